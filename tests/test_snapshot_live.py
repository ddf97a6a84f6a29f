"""`gpustack-render snapshot` against a loopback fake API server (no other network).

The server (``http.server`` in a thread, 127.0.0.1, port 0) serves recorded ``kubectl get -o
json``-style Lists, honours ``limit``/``continue`` and records every request, so the tests can
assert that the client really paged, sent the kubeconfig's token, and asked for nothing else.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[1]
TOKEN = "test-token-123"


def _node(name: str, manufacturer: str = "amd") -> dict[str, Any]:
    # Built-in kinds come without apiVersion/kind inside a List, as the API server sends them.
    return {"metadata": {"name": name, "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                                                  "gpustack.ai/managed": "true"},
                         "managedFields": [{"manager": "kubelet"}]},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi"},
                       "nodeInfo": {"operatingSystem": "linux", "architecture": "amd64"}}}


NODES = [_node(f"node-{i}") for i in range(5)]
NAMESPACES = [{"metadata": {"name": n}, "status": {"phase": "Active"}} for n in ("default", "team-a")]
LOCAL_QUEUES = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                 "metadata": {"name": f"lq-{i}", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}
                for i in range(3)]
SECRET = {"apiVersion": "v1", "kind": "Secret",
          "metadata": {"name": "gpustack-settings", "namespace": "gpustack-system",
                       "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{secret stuff}"}},
          "data": {"workload-fit-affinity": base64.b64encode(b"false").decode(),
                   "database-password": base64.b64encode(b"hunter2").decode()}}

LISTS: dict[str, list[dict[str, Any]]] = {
    "/api/v1/nodes": NODES,
    "/api/v1/namespaces": NAMESPACES,
    "/apis/worker.gpustack.ai/v1alpha1/devices": [],
    "/apis/worker.gpustack.ai/v1alpha1/instancetypes": [],
    "/apis/kueue.x-k8s.io/v1beta2/topologies": [],
    "/apis/kueue.x-k8s.io/v1beta2/admissionchecks": [],
    "/apis/kueue.x-k8s.io/v1beta2/resourceflavors": [],
    "/apis/kueue.x-k8s.io/v1beta2/clusterqueues": [],
    "/apis/kueue.x-k8s.io/v1beta2/localqueues": LOCAL_QUEUES,
    "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpustack-system/nodefeatures": [],
}
OBJECTS: dict[str, dict[str, Any]] = {
    "/api/v1/namespaces/gpustack-system/secrets/gpustack-settings": SECRET,
}


class FakeApiServer:
    """Serves LISTS with paging; ``status`` overrides the answer for a path (or ``"*"``)."""

    def __init__(self, status: dict[str, int] | None = None) -> None:
        self.requests: list[tuple[str, dict[str, list[str]], str]] = []
        self.status = status or {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                outer.requests.append((url.path, query, self.headers.get("Authorization", "")))
                code = outer.status.get(url.path, outer.status.get("*"))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    code = 401
                if code:
                    self._send(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                                      "reason": {401: "Unauthorized", 403: "Forbidden", 404: "NotFound"}.get(code)})
                    return
                if url.path in OBJECTS:
                    self._send(200, OBJECTS[url.path])
                    return
                if url.path not in LISTS:
                    self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    return
                items = LISTS[url.path]
                start = int(query.get("continue", ["0"])[0])
                limit = int(query.get("limit", [str(len(items) or 1)])[0])
                page = items[start:start + limit]
                more = start + limit < len(items)
                self._send(200, {"kind": "List", "apiVersion": "v1",
                                 "metadata": {"resourceVersion": "42", **({"continue": str(start + limit)} if more else {})},
                                 "items": page})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FakeApiServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    def calls(self, path: str) -> list[dict[str, list[str]]]:
        return [query for p, query, _ in self.requests if p == path]


def kubeconfig(tmp_path: Path, port: int, token: str = TOKEN) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "fake", "user": {"token": token}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
    }), encoding="utf-8")
    return path


def run_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env_cmd = [sys.executable, "-m", "gpustack_render", *args]
    return subprocess.run(env_cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        yield fake


def test_snapshot_pages_and_captures_every_kind(server: FakeApiServer, tmp_path: Path) -> None:
    proc = run_cli("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, server.port)), "--page-size", "2")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    snap = json.loads(proc.stdout)
    assert snap["kind"] == "List"
    # Paging: 5 Nodes at 2 per page are 3 requests, each with limit=2, continuing from the last token.
    node_calls = server.calls("/api/v1/nodes")
    assert [q.get("limit") for q in node_calls] == [["2"], ["2"], ["2"]]
    assert [q.get("continue") for q in node_calls] == [None, ["2"], ["4"]]
    assert len(server.calls("/apis/kueue.x-k8s.io/v1beta2/localqueues")) == 2
    # Every request carried the kubeconfig's token; nothing outside the known paths was asked for.
    assert {auth for _, _, auth in server.requests} == {f"Bearer {TOKEN}"}
    known = set(LISTS) | set(OBJECTS) | {"/api/v1/namespaces/gpustack-system/configmaps/gpustack-settings"}
    assert {p for p, _, _ in server.requests} == known
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in snap["items"]:
        by_kind.setdefault(item["kind"], []).append(item)
    assert [n["metadata"]["name"] for n in by_kind["Node"]] == [f"node-{i}" for i in range(5)]
    assert all(n["apiVersion"] == "v1" for n in by_kind["Node"]), "List items must get apiVersion/kind"
    assert all("managedFields" not in n["metadata"] for n in by_kind["Node"])
    assert len(by_kind["LocalQueue"]) == 3 and len(by_kind["Namespace"]) == 2


def test_snapshot_reduces_the_settings_secret(server: FakeApiServer, tmp_path: Path) -> None:
    proc = run_cli("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, server.port)))
    assert proc.returncode == 0, proc.stderr
    secrets = [i for i in json.loads(proc.stdout)["items"] if i["kind"] == "Secret"]
    assert secrets == [{"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "gpustack-settings", "namespace": "gpustack-system"},
                        "data": {"workload-fit-affinity": SECRET["data"]["workload-fit-affinity"]}}]
    assert "hunter2" not in proc.stdout and base64.b64encode(b"hunter2").decode() not in proc.stdout
    assert "secret stuff" not in proc.stdout


def test_snapshot_output_file_is_renderable(server: FakeApiServer, tmp_path: Path) -> None:
    out = tmp_path / "snap" / "cluster.json"
    proc = run_cli("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, server.port)), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert sorted(p.name for p in out.parent.iterdir()) == ["cluster.json"], "temporary file left behind"
    rendered = run_cli("render", str(out), "--format", "json")
    assert rendered.returncode == 0, rendered.stderr
    kinds = [i["kind"] for i in json.loads(rendered.stdout)["items"]]
    assert kinds.count("NodeFeature") == 5
    # The cluster has no rendered objects yet: diff against the capture itself lists them as added.
    diff = run_cli("diff", str(out), "--format", "json")
    assert diff.returncode == 1, diff.stderr
    assert {e["action"] for e in json.loads(diff.stdout)} == {"added"}


def test_snapshot_skips_kinds_whose_crd_is_missing(tmp_path: Path) -> None:
    missing = "/apis/kueue.x-k8s.io/v1beta2/topologies"
    with FakeApiServer(status={missing: 404}) as fake:
        proc = run_cli("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)))
    assert proc.returncode == 0, proc.stderr
    assert "warning: skipping Topology" in proc.stderr
    assert len(json.loads(proc.stdout)["items"]) == 5 + 2 + 3 + 1


@pytest.mark.parametrize("status, token, words", [
    ({}, "wrong-token", "unauthorized"),
    ({"*": 401}, TOKEN, "unauthorized"),
    ({"/api/v1/nodes": 403}, TOKEN, "forbidden: the credentials may not list nodes"),
    ({"/apis/kueue.x-k8s.io/v1beta2/clusterqueues": 500}, TOKEN, "HTTP 500"),
])
def test_snapshot_http_errors_are_one_line_exit_2(tmp_path: Path, status: dict[str, int], token: str,
                                                  words: str) -> None:
    with FakeApiServer(status=status) as fake:
        out = tmp_path / "snap.json"
        proc = run_cli("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port, token)), "-o", str(out))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert f"127.0.0.1:{fake.port}" in lines[0]
    assert not out.exists(), "a failed capture must not leave a snapshot"
    assert list(tmp_path.glob(".snap.json.*")) == []


def test_snapshot_connection_refused_is_one_line_exit_2(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that was just free: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = run_cli("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, port)))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the API server" in lines[0], proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("args, words", [
    (["--kubeconfig", "{tmp}/missing"], "cannot use kubeconfig"),
    (["--kubeconfig", "{kubeconfig}", "--context", "nope"], "cannot use kubeconfig"),
    (["--page-size", "0"], "page-size"),
])
def test_snapshot_bad_arguments_exit_2(server: FakeApiServer, tmp_path: Path, args: list[str], words: str) -> None:
    config = kubeconfig(tmp_path, server.port)
    proc = run_cli("snapshot", *[a.format(tmp=tmp_path, kubeconfig=config) for a in args])
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert server.requests == []
