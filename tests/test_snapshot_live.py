"""`gpustack-render snapshot` against a loopback fake API server (no other network).

The server (``http.server`` in a thread, 127.0.0.1, port 0) serves recorded ``kubectl get -o
json``-style Lists, honours ``limit``/``continue`` and records every request, so the tests can
assert that the client really paged, sent the kubeconfig's token, and asked for nothing else.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from cli_invoke import invoke

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
    "/apis/kueue.x-k8s.io/v1beta2/workloads": [],
    "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpustack-system/nodefeatures": [],
}
OBJECTS: dict[str, dict[str, Any]] = {
    "/api/v1/namespaces/gpustack-system/secrets/gpustack-settings": SECRET,
}


def discovery(lists: dict[str, list[dict[str, Any]]],
              preferred: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """``/api`` and ``/apis`` as a real API server answers them, for the groups of ``lists``: a
    group's versions in the order its paths first appear, ``preferred`` (by group) or the first one
    its preferredVersion."""
    versions: dict[str, list[str]] = {}
    for path in lists:
        parts = path.split("/")
        if parts[1] == "apis":
            versions.setdefault(parts[2], [])
            if parts[3] not in versions[parts[2]]:
                versions[parts[2]].append(parts[3])
    groups = [{"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
               "preferredVersion": {"groupVersion": f"{g}/{(preferred or {}).get(g, vs[0])}",
                                    "version": (preferred or {}).get(g, vs[0])}}
              for g, vs in sorted(versions.items())]
    return {"/api": {"kind": "APIVersions", "versions": ["v1"],
                     "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}]},
            "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}}


DISCOVERY = discovery(LISTS)


class FakeApiServer:
    """Serves LISTS with paging and discovery; ``status`` overrides the answer for a path (or
    ``"*"``), ``page_status`` for one page of a list (``(path, continue token)``); ``html`` answers
    every request 200 with a web page, like a wrong ingress; ``lists`` replaces LISTS; ``preferred``
    names a group's preferredVersion in discovery (default: the first of its versions in ``lists``)."""

    def __init__(self, status: dict[str, int] | None = None, page_status: dict[tuple[str, str], int] | None = None,
                 html: bool = False, lists: dict[str, list[dict[str, Any]]] | None = None,
                 remaining_count: bool = False, tls: tuple[Path, Path] | None = None,
                 preferred: dict[str, str] | None = None) -> None:
        self.requests: list[tuple[str, dict[str, list[str]], str]] = []
        self.status = status or {}
        self.page_status = page_status or {}
        self.lists = LISTS if lists is None else lists
        self.objects = {**OBJECTS, **discovery(self.lists, preferred)}
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
                url = url._replace(path=url.path.rstrip("/") or "/")  # the client asks for /api/ and /apis/
                query = parse_qs(url.query)
                outer.requests.append((url.path, query, self.headers.get("Authorization", "")))
                if outer.html:
                    page = b"<html><body><h1>Welcome to nginx!</h1></body></html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                code = outer.status.get(url.path, outer.status.get("*"))
                code = outer.page_status.get((url.path, query.get("continue", [""])[0]), code)
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    code = 401
                if code:
                    self._send(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                                      "reason": {401: "Unauthorized", 403: "Forbidden", 404: "NotFound"}.get(code)})
                    return
                if url.path in outer.objects:
                    self._send(200, outer.objects[url.path])
                    return
                if url.path not in outer.lists:
                    self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    return
                items = outer.lists[url.path]
                start = int(query.get("continue", ["0"])[0])
                limit = int(query.get("limit", [str(len(items) or 1)])[0])
                page = items[start:start + limit]
                more = start + limit < len(items)
                meta: dict[str, Any] = {"resourceVersion": "42"}
                if more:
                    meta["continue"] = str(start + limit)
                    if outer.remaining_count:
                        meta["remainingItemCount"] = len(items) - start - limit
                self._send(200, {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": page})

        self.html = html
        self.remaining_count = remaining_count
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:  # (certificate, key): HTTPS with a self-signed certificate
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        # serve_forever notices shutdown() only between polls: its default 0.5 s interval made every
        # test wait half a second on leaving the server; 10 ms keeps the loop cheap and the exit quick.
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

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


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        yield fake


def test_snapshot_pages_and_captures_every_kind(server: FakeApiServer, tmp_path: Path) -> None:
    proc = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, server.port)), "--page-size", "2")
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
    known = set(LISTS) | set(OBJECTS) | set(DISCOVERY) | {"/api/v1/namespaces/gpustack-system/configmaps/gpustack-settings"}
    assert {p for p, _, _ in server.requests} == known
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in snap["items"]:
        by_kind.setdefault(item["kind"], []).append(item)
    assert [n["metadata"]["name"] for n in by_kind["Node"]] == [f"node-{i}" for i in range(5)]
    assert all(n["apiVersion"] == "v1" for n in by_kind["Node"]), "List items must get apiVersion/kind"
    assert all("managedFields" not in n["metadata"] for n in by_kind["Node"])
    assert len(by_kind["LocalQueue"]) == 3 and len(by_kind["Namespace"]) == 2


def test_snapshot_reduces_the_settings_secret(server: FakeApiServer, tmp_path: Path) -> None:
    proc = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, server.port)))
    assert proc.returncode == 0, proc.stderr
    secrets = [i for i in json.loads(proc.stdout)["items"] if i["kind"] == "Secret"]
    assert secrets == [{"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "gpustack-settings", "namespace": "gpustack-system"},
                        "data": {"workload-fit-affinity": SECRET["data"]["workload-fit-affinity"]}}]
    assert "hunter2" not in proc.stdout and base64.b64encode(b"hunter2").decode() not in proc.stdout
    assert "secret stuff" not in proc.stdout


def test_snapshot_output_file_is_renderable(server: FakeApiServer, tmp_path: Path) -> None:
    out = tmp_path / "snap" / "cluster.json"
    proc = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, server.port)), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert sorted(p.name for p in out.parent.iterdir()) == ["cluster.json"], "temporary file left behind"
    rendered = invoke("render", str(out), "--format", "json")
    assert rendered.returncode == 0, rendered.stderr
    kinds = [i["kind"] for i in json.loads(rendered.stdout)["items"]]
    assert kinds.count("NodeFeature") == 5
    # The cluster has no rendered objects yet: diff against the capture itself lists them as added.
    diff = invoke("diff", str(out), "--format", "json")
    assert diff.returncode == 1, diff.stderr
    report = json.loads(diff.stdout)
    changes = report["changes"] if isinstance(report, dict) else report  # {"summary", "changes"} or a list
    assert changes and {e["action"] for e in changes} == {"added"}


def test_snapshot_skips_kinds_whose_crd_is_missing(tmp_path: Path) -> None:
    missing = "/apis/kueue.x-k8s.io/v1beta2/topologies"
    with FakeApiServer(status={missing: 404}) as fake:
        proc = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)))
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
        proc = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port, token)), "-o", str(out))
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
    proc = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, port)))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the API server" in lines[0], proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("args, words", [
    (["--kubeconfig", "{tmp}/missing"], "cannot read kubeconfig"),
    (["--kubeconfig", "{kubeconfig}", "--context", "nope"], "cannot use kubeconfig"),
    (["--page-size", "0"], "page-size"),
])
def test_snapshot_bad_arguments_exit_2(server: FakeApiServer, tmp_path: Path, args: list[str], words: str) -> None:
    config = kubeconfig(tmp_path, server.port)
    proc = invoke("snapshot", *[a.format(tmp=tmp_path, kubeconfig=config) for a in args])
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert server.requests == []


# --------------------------------------------------------------------------------------------
# "Safe to apply": a capture that is not the whole cluster fails, writing nothing (in-process)
# --------------------------------------------------------------------------------------------


def assert_fails_cleanly(result: Any, out: Path, words: list[str], before: str | None = None) -> str:
    """Exit 2, exactly one stderr line holding ``words``, nothing on stdout, and the ``-o`` file
    untouched: absent, or (``before``) still its earlier content, with no temporary file left."""
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert lines[0].startswith("gpustack-render: error: ") and "Traceback" not in result.stderr
    assert result.stdout == ""
    if before is None:
        assert not out.exists(), "a failed capture must not create the snapshot"
    else:
        assert out.read_text(encoding="utf-8") == before, "a failed capture must not replace the snapshot"
    assert list(out.parent.glob(f".{out.name}.*")) == [], "temporary file left behind"
    return lines[0]


NOT_KUBERNETES = "is not a Kubernetes API server"


@pytest.mark.parametrize("server_args, page_size, words", [
    ({"status": {"*": 404}}, "500", [NOT_KUBERNETES, "GET /api answered 404"]),
    ({"html": True}, "500", [NOT_KUBERNETES, "text/html, not JSON"]),
    ({"status": {"/api/v1/nodes": 404}}, "500", [NOT_KUBERNETES, "does not serve nodes"]),
    ({"status": {"/api/v1/namespaces": 404}}, "500", [NOT_KUBERNETES, "does not serve namespaces"]),
    ({"status": {"/api/v1/nodes": 403}}, "500", ["forbidden: the credentials may not list nodes"]),
    ({"status": {"/api/v1/namespaces": 403}}, "500", ["forbidden: the credentials may not list namespaces"]),
    ({"page_status": {("/api/v1/nodes", "2"): 500}}, "2", ["HTTP 500", "list nodes (page 2)"]),
    ({"page_status": {("/apis/kueue.x-k8s.io/v1beta2/localqueues", "2"): 500}}, "2",
     ["HTTP 500", "list localqueues (page 2)"]),
    ({"page_status": {("/api/v1/nodes", "4"): 404}}, "2", ["404", "list nodes (page 3)", "cannot be completed"]),
], ids=["404-everywhere", "html-page", "nodes-404", "namespaces-404", "nodes-403", "namespaces-403",
        "500-on-continue-page", "500-on-crd-continue-page", "404-on-continue-page"])
@pytest.mark.parametrize("existing", [False, True], ids=["new-file", "existing-file"])
def test_a_capture_that_is_not_the_whole_cluster_writes_nothing(
        tmp_path: Path, server_args: dict[str, Any], page_size: str, words: list[str], existing: bool) -> None:
    out = tmp_path / "snap" / "cluster.json"
    before = None
    if existing:
        out.parent.mkdir()
        before = '{"apiVersion": "v1", "kind": "List", "items": ["the last good snapshot"]}\n'
        out.write_text(before, encoding="utf-8")
    with FakeApiServer(**server_args) as fake:
        result = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)), "--page-size", page_size,
                        "-o", str(out))
    line = assert_fails_cleanly(result, out, words, before)
    assert f"127.0.0.1:{fake.port}" in line


def test_a_missing_crd_group_is_a_warning_and_the_rest_is_captured(tmp_path: Path) -> None:
    """A cluster without Kueue is real: its kinds are skipped with one warning each, exit 0."""
    without_kueue = {path: items for path, items in LISTS.items() if "kueue.x-k8s.io" not in path}
    out = tmp_path / "cluster.json"
    with FakeApiServer(lists=without_kueue) as fake:
        result = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        f"gpustack-render: warning: skipping {kind}"
        for kind in ("Topology", "AdmissionCheck", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Workload")]
    assert all("not served by the cluster" in line for line in lines)
    assert not any("kueue" in path for path, _, _ in fake.requests), "discovery already said Kueue is absent"
    kinds = [item["kind"] for item in json.loads(out.read_text(encoding="utf-8"))["items"]]
    assert kinds.count("Node") == 5 and kinds.count("Namespace") == 2 and kinds.count("Secret") == 1


def _at(version_of: dict[str, str], lists: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, list[dict[str, Any]]]:
    """``lists`` (LISTS) with each group of ``version_of`` served at that version instead, its objects'
    apiVersion too."""
    moved: dict[str, list[dict[str, Any]]] = {}
    for path, items in (LISTS if lists is None else lists).items():
        parts = path.split("/")
        if parts[1] == "apis" and parts[2] in version_of:
            parts[3] = version_of[parts[2]]
            items = [{**i, "apiVersion": f"{parts[2]}/{parts[3]}"} if "apiVersion" in i else i for i in items]
        moved["/".join(parts)] = items
    return moved


def _captured(result: Any) -> dict[str, list[str]]:
    """kind -> the apiVersions of the captured objects of that kind."""
    out: dict[str, list[str]] = {}
    for item in json.loads(result.stdout)["items"]:
        out.setdefault(item["kind"], []).append(item["apiVersion"])
    return out


DEVICES = [{"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices", "metadata": {"name": "node-0"},
            "spec": {"groups": []}}]


@pytest.mark.parametrize("version_of", [
    {"kueue.x-k8s.io": "v1beta1"},  # an older Kueue: only v1beta1
    {"worker.gpustack.ai": "v1"},  # a newer operator: worker.gpustack.ai/v1
], ids=["kueue-v1beta1-only", "operator-v1-only"])
def test_a_kind_is_read_at_the_version_the_server_serves(tmp_path: Path, version_of: dict[str, str]) -> None:
    lists = _at(version_of, {**LISTS, "/apis/worker.gpustack.ai/v1alpha1/devices": DEVICES})
    with FakeApiServer(lists=lists) as fake:
        result = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)), "--page-size", "2")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == "", "nothing is skipped: every kind is served at a version the tool reads"
    group, version = next(iter(version_of.items()))
    asked = {p for p, _, _ in fake.requests if p.startswith(f"/apis/{group}/")}
    assert asked and all(p.startswith(f"/apis/{group}/{version}/") for p in asked), asked
    captured = _captured(result)
    kind = "LocalQueue" if group.startswith("kueue") else "Devices"
    assert captured[kind] and set(captured[kind]) == {f"{group}/{version}"}, captured


def test_the_version_discovery_prefers_is_read(tmp_path: Path) -> None:
    """Both Kueue versions served: the preferred one is listed, whichever it is, and only it."""
    both = {**LISTS, **_at({"kueue.x-k8s.io": "v1beta1"})}
    for preferred in ("v1beta1", "v1beta2"):
        with FakeApiServer(lists=both, preferred={"kueue.x-k8s.io": preferred}) as fake:
            result = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)))
        assert result.exit_code == 0 and result.stderr == "", result.stderr
        asked = {p.split("/")[3] for p, _, _ in fake.requests if p.startswith("/apis/kueue.x-k8s.io/")}
        assert asked == {preferred}, (preferred, asked)
        assert set(_captured(result)["LocalQueue"]) == {f"kueue.x-k8s.io/{preferred}"}


def test_a_preferred_version_the_tool_does_not_read_is_passed_over(tmp_path: Path) -> None:
    """A future Kueue preferring v1 beside v1beta2: v1beta2 is read; serving only v1: skipped, saying why."""
    beside = {**LISTS, **_at({"kueue.x-k8s.io": "v1"})}
    with FakeApiServer(lists=beside, preferred={"kueue.x-k8s.io": "v1"}) as fake:
        result = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)))
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    assert not any(p.startswith("/apis/kueue.x-k8s.io/v1/") for p, _, _ in fake.requests)
    assert set(_captured(result)["LocalQueue"]) == {"kueue.x-k8s.io/v1beta2"}
    with FakeApiServer(lists=_at({"kueue.x-k8s.io": "v1"})) as fake:
        result = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)))
    assert result.exit_code == 0, result.stderr
    assert "skipping ClusterQueue (clusterqueues.kueue.x-k8s.io): the cluster serves kueue.x-k8s.io v1 only, " \
           "and this tool reads v1beta2, v1beta1" in result.stderr
    assert "LocalQueue" not in _captured(result)


def test_a_kind_missing_from_the_preferred_version_is_read_at_the_next(tmp_path: Path) -> None:
    """Kueue serving v1beta2 and v1beta1 where Topologies are only in v1beta1 (a 404 at v1beta2)."""
    topologies = [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "t"},
                   "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}]
    lists = {**{p: i for p, i in LISTS.items() if not p.endswith("/topologies")},
             "/apis/kueue.x-k8s.io/v1beta1/topologies": topologies}
    with FakeApiServer(lists=lists) as fake:
        result = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)))
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    assert [p for p, _, _ in fake.requests if p.endswith("/topologies")] == [
        "/apis/kueue.x-k8s.io/v1beta2/topologies", "/apis/kueue.x-k8s.io/v1beta1/topologies"]
    assert _captured(result)["Topology"] == ["kueue.x-k8s.io/v1beta1"]
    without = {p: i for p, i in lists.items() if not p.endswith("/topologies")}
    with FakeApiServer(lists={**without, "/apis/kueue.x-k8s.io/v1beta1/localqueues": []}) as fake:
        result = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)))
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [
        "gpustack-render: warning: skipping Topology (topologies.kueue.x-k8s.io): not served by the cluster at "
        "kueue.x-k8s.io v1beta2, v1beta1 (CRD not installed?)"]


def write_kubeconfig(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def exec_kubeconfig(port: int, script: str) -> dict[str, Any]:
    """A kubeconfig whose user gets its credentials from an exec plugin (a Python one-liner)."""
    return {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "users": [{"name": "fake", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                         "command": sys.executable, "args": ["-c", script],
                                                         "interactiveMode": "Never"}}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}


FAILING_PLUGIN = "import sys; sys.stderr.write('token expired\\nrun: cloud auth login\\n'); sys.exit(3)"
GOOD_PLUGIN = ("import json; print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
               f"'kind': 'ExecCredential', 'status': {{'token': '{TOKEN}'}}}}))")


@pytest.mark.parametrize("doc, context, words", [
    (None, None, ["missing", "cannot read kubeconfig: No such file or directory"]),
    ("clusters: [unclosed\n", None, ["kubeconfig:2:1", "cannot use kubeconfig: not YAML"]),
    ("just a sentence\n", None, ["not a kubeconfig"]),
    ({"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}, None, ["has no contexts"]),
    ("{kubeconfig}", "nope", ["--context 'nope' is not one of its contexts (fake)"]),
    ({"apiVersion": "v1", "kind": "Config", "contexts": [{"name": "a", "context": {}}]}, None,
     ["no current-context; pass --context (one of: a)"]),
    ("{exec:failing}", None, ["the exec credential plugin failed: process returned 3. token expired; "
                              "run: cloud auth login"]),
    ("{exec:missing}", None, ["the exec credential plugin failed:", "No such file or directory",
                              "no-such-auth-plugin"]),
    ("{exec:no-token}", None, ["the exec credential plugin failed: missing token or clientCertificateData"]),
], ids=["missing", "not-yaml", "not-a-mapping", "no-contexts", "unknown-context", "no-current-context",
        "exec-plugin-fails", "exec-plugin-not-installed", "exec-plugin-gives-no-token"])
def test_an_unusable_kubeconfig_is_one_line_and_writes_nothing(
        server: FakeApiServer, tmp_path: Path, doc: Any, context: str | None, words: list[str]) -> None:
    if doc == "{kubeconfig}":
        config = kubeconfig(tmp_path, server.port)
    elif doc == "{exec:failing}":
        config = write_kubeconfig(tmp_path, exec_kubeconfig(server.port, FAILING_PLUGIN))
    elif doc == "{exec:no-token}":
        config = write_kubeconfig(tmp_path, exec_kubeconfig(server.port, GOOD_PLUGIN.replace("'token'", "'x'")))
    elif doc == "{exec:missing}":
        plugin = exec_kubeconfig(server.port, "")
        plugin["users"][0]["user"]["exec"].update(command=str(tmp_path / "no-such-auth-plugin"), args=[])
        config = write_kubeconfig(tmp_path, plugin)
    else:
        config = tmp_path / "missing" if doc is None else write_kubeconfig(tmp_path, doc)
    out = tmp_path / "cluster.json"
    args = ["snapshot", "--kubeconfig", str(config), "-o", str(out)] + (["--context", context] if context else [])
    line = assert_fails_cleanly(invoke(*args), out, words)
    assert str(config) in line
    assert server.requests == [], "nothing may be asked of a server with an unusable kubeconfig"


def test_an_exec_plugin_token_is_used(server: FakeApiServer, tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path, exec_kubeconfig(server.port, GOOD_PLUGIN))
    result = invoke("snapshot", "--kubeconfig", str(config))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert {auth for _, _, auth in server.requests} == {f"Bearer {TOKEN}"}


# --------------------------------------------------------------------------------------------
# TLS: an unverified server is one warning line, a failed verification one error line
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl not found on PATH: the TLS tests make their self-signed certificate with it")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=fake",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key


def tls_kubeconfig(tmp_path: Path, port: int, insecure: bool) -> Path:
    cluster: dict[str, Any] = {"server": f"https://127.0.0.1:{port}"}
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    return write_kubeconfig(tmp_path, {
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": cluster}], "users": [{"name": "fake", "user": {"token": TOKEN}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]})


def test_insecure_skip_tls_verify_is_one_warning_line(self_signed: tuple[Path, Path], tmp_path: Path) -> None:
    with FakeApiServer(tls=self_signed) as fake:
        result = invoke("snapshot", "--kubeconfig", str(tls_kubeconfig(tmp_path, fake.port, True)), "--page-size", "2")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"gpustack-render: warning: TLS certificate verification is off for https://127.0.0.1:{fake.port} "
        f"(insecure-skip-tls-verify in the kubeconfig): the server's identity was not checked"]
    assert len(json.loads(result.stdout)["items"]) == 5 + 2 + 3 + 1


def test_a_certificate_that_does_not_verify_is_one_error_line(self_signed: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "cluster.json"
    with FakeApiServer(tls=self_signed) as fake:
        result = invoke("snapshot", "--kubeconfig", str(tls_kubeconfig(tmp_path, fake.port, False)), "-o", str(out))
    assert_fails_cleanly(result, out, ["cannot reach the API server", "certificate verify failed"])


# --------------------------------------------------------------------------------------------
# Progress on stderr: only on a terminal, never with -q
# --------------------------------------------------------------------------------------------


def test_progress_shows_kinds_and_pages_on_a_terminal(tmp_path: Path) -> None:
    pty = pytest.importorskip("pty", reason="the progress test needs a pseudo-terminal (POSIX)")
    out = tmp_path / "cluster.json"
    with FakeApiServer(remaining_count=True) as fake:
        master, slave = pty.openpty()
        try:
            proc = subprocess.Popen([sys.executable, "-m", "gpustack_render", "snapshot", "--kubeconfig",
                                     str(kubeconfig(tmp_path, fake.port)), "--page-size", "2", "-o", str(out)],
                                    cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
            os.close(slave)
            shown = b""
            while True:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            assert proc.wait(timeout=120) == 0, shown.decode(errors="replace")
        finally:
            os.close(master)
    text = shown.decode(errors="replace")
    assert "snapshot  [" in text, text
    assert "Node: page 1, 2/5 objects" in text and "Node: page 3, 5 objects" in text, text
    assert "LocalQueue: page 2, 3 objects" in text and "settings: done" in text, text
    assert "12/12" in text, text
    assert json.loads(out.read_text(encoding="utf-8"))["kind"] == "List"


def test_no_progress_without_a_terminal(server: FakeApiServer, tmp_path: Path) -> None:
    proc = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, server.port)), "--page-size", "2")
    assert proc.returncode == 0
    assert proc.stderr == "", "progress (or anything) on a stderr that is not a terminal"


@pytest.mark.parametrize("flags, shown", [([], True), (["-v"], True), (["-q"], False), (["--quiet"], False)])
def test_progress_follows_the_terminal_check_and_quiet(server: FakeApiServer, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, flags: list[str],
                                                       shown: bool) -> None:
    from gpustack_render.cli import snapshot_cmd
    monkeypatch.setattr(snapshot_cmd, "stderr_is_terminal", lambda: True)
    result = invoke(*flags, "snapshot", "--kubeconfig", str(kubeconfig(tmp_path, server.port)))
    assert result.exit_code == 0, result.stderr
    # CliRunner's stderr is no terminal, so click's bar prints just its label: enough to see it ran.
    assert ("snapshot" in result.stderr) is shown, result.stderr
    assert json.loads(result.stdout)["kind"] == "List"


# --------------------------------------------------------------------------------------------
# Workloads: every namespace, paged, pruned to what the admission preview reads (admission.md §2)
# --------------------------------------------------------------------------------------------

CRDS = REPO.parent / "shared" / "crds"


def _workload(namespace: str, name: str, admitted: bool) -> dict[str, Any]:
    """A Workload as Kueue serves it: a whole Pod template and a status history, most of it not read."""
    container = {"name": "main", "image": "vllm/vllm-openai:v0.9", "command": ["serve"],
                 "env": [{"name": "HF_TOKEN", "value": "hf_secret"}],
                 "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
                 "volumeMounts": [{"name": "cache", "mountPath": "/root/.cache"}]}
    template = {"metadata": {"labels": {"app": name},
                             "annotations": {"kueue.x-k8s.io/podset-preferred-topology": "kubernetes.io/hostname"}},
                "spec": {"containers": [container],
                         "initContainers": [{"name": "fetch", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
                         "overhead": {"cpu": "100m"}, "nodeSelector": {"kubernetes.io/arch": "amd64"},
                         "affinity": {"nodeAffinity": {
                             "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                                 {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]},
                             "preferredDuringSchedulingIgnoredDuringExecution": [
                                 {"weight": 1, "preference": {"matchExpressions": [
                                     {"key": "zone", "operator": "In", "values": ["a"]}]}}]},
                             "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                                 {"topologyKey": "kubernetes.io/hostname", "labelSelector": {}}]}},
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                         "volumes": [{"name": "cache", "emptyDir": {}}], "restartPolicy": "Never"}}
    conditions = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "ok",
                   "lastTransitionTime": "2026-11-30T10:00:00Z"},
                  {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "ok",
                   "lastTransitionTime": "2026-11-30T10:00:00Z"}]
    status: dict[str, Any] = {"resourceRequests": [{"name": "main", "resources": {"cpu": "4"}}],
                              "requeueState": {"count": 1}}
    if admitted:
        status.update(conditions=conditions, admission={"clusterQueue": "gpustack--nvidia-l4-linux-amd64",
                                                        "podSetAssignments": [{"name": "main", "count": 1,
                                                                               "flavors": {"cpu": "f"}}]})
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace, "uid": "u-" + name, "resourceVersion": "7",
                         "creationTimestamp": "2026-11-30T09:00:00Z", "labels": {"team": "a"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "j"}],
                         "managedFields": [{"manager": "kueue"}]},
            "spec": {"queueName": "gpustack-fnv64-0123456789abcdef", "priority": 100,
                     "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass", "active": True,
                     "podSets": [{"name": "main", "count": 2, "minCount": 1, "template": template,
                                  "topologyRequest": {"preferred": "kubernetes.io/hostname"}}]},
            "status": status}


WORKLOADS = [_workload(ns, f"wl-{i}", admitted=i % 2 == 0) for i, ns in enumerate(["default", "team-a"] * 3)]


def test_snapshot_captures_workloads_in_every_namespace_pruned(tmp_path: Path) -> None:
    path = "/apis/kueue.x-k8s.io/v1beta2/workloads"
    out = tmp_path / "cluster.json"
    with FakeApiServer(lists={**LISTS, path: WORKLOADS}) as fake:
        result = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)), "--page-size", "4",
                        "-o", str(out))
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    # One cluster-wide list (every namespace), paged like the Nodes: 6 Workloads at 4 per page.
    assert [(q.get("limit"), q.get("continue")) for q in fake.calls(path)] == [(["4"], None), (["4"], ["4"])]
    assert not any("/namespaces/" in p and p.endswith("/workloads") for p, _, _ in fake.requests)
    snap = json.loads(out.read_text(encoding="utf-8"))
    captured = [i for i in snap["items"] if i["kind"] == "Workload"]
    assert [(w["metadata"]["namespace"], w["metadata"]["name"]) for w in captured] == \
        [(w["metadata"]["namespace"], w["metadata"]["name"]) for w in WORKLOADS]
    template = WORKLOADS[0]["spec"]["podSets"][0]["template"]
    assert captured[0] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "wl-0", "namespace": "default", "creationTimestamp": "2026-11-30T09:00:00Z"},
        "spec": {"queueName": "gpustack-fnv64-0123456789abcdef", "priority": 100, "podSets": [{
            "name": "main", "count": 2, "topologyRequest": {"preferred": "kubernetes.io/hostname"},
            "template": {
                "metadata": {"annotations": template["metadata"]["annotations"]},
                "spec": {"containers": [{"name": "main", "resources": template["spec"]["containers"][0]["resources"]}],
                         "initContainers": [{"name": "fetch", "resources": {"requests": {"cpu": "1"}}}],
                         "overhead": {"cpu": "100m"}, "nodeSelector": {"kubernetes.io/arch": "amd64"},
                         "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                      template["spec"]["affinity"]["nodeAffinity"][
                                          "requiredDuringSchedulingIgnoredDuringExecution"]}},
                         "tolerations": template["spec"]["tolerations"]}}}]},
        "status": {"admission": WORKLOADS[0]["status"]["admission"], "conditions": WORKLOADS[0]["status"]["conditions"]}}
    assert "status" not in captured[1], "a pending Workload: nothing of its status is read"
    assert "hf_secret" not in out.read_text(encoding="utf-8") and "managedFields" not in captured[0]["metadata"]
    # The capture is renderable, and the Workloads change nothing of the render.
    with_workloads = invoke("render", str(out))
    assert with_workloads.exit_code == 0, with_workloads.stderr
    without = tmp_path / "without.json"
    without.write_text(json.dumps({**snap, "items": [i for i in snap["items"] if i["kind"] != "Workload"]}),
                       encoding="utf-8")
    assert invoke("render", str(without)).stdout == with_workloads.stdout


@pytest.mark.skipif(not (CRDS / "kueue").is_dir(), reason=f"Kueue CRDs not found at {CRDS} (../shared/crds)")
def test_captured_workloads_stay_valid_workloads(tmp_path: Path) -> None:
    """Pruned, a Workload still passes the real Kueue CRD (schema and CEL rules), at both versions."""
    out = tmp_path / "cluster.json"
    served = [_workload("team-a", "v2", admitted=True),
              {**_workload("team-a", "v1", admitted=True), "apiVersion": "kueue.x-k8s.io/v1beta1"}]
    lists = {**LISTS, "/apis/kueue.x-k8s.io/v1beta2/workloads": served[:1],
             "/apis/kueue.x-k8s.io/v1beta1/workloads": served[1:]}
    with FakeApiServer(lists=lists) as fake:
        result = invoke("snapshot", "--kubeconfig", str(kubeconfig(tmp_path, fake.port)), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    workloads = [i for i in json.loads(out.read_text(encoding="utf-8"))["items"] if i["kind"] == "Workload"]
    assert [w["metadata"]["name"] for w in workloads] == ["v2"]  # the preferred version only
    workloads.append({**workloads[0], "apiVersion": "kueue.x-k8s.io/v1beta1", "metadata": {
        **workloads[0]["metadata"], "name": "v1"}})
    manifests = tmp_path / "workloads.json"
    manifests.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": workloads}), encoding="utf-8")
    checked = invoke("validate", "--manifests", str(manifests), "--crds", str(CRDS), "--strict")
    assert checked.exit_code == 0 and checked.stdout == "", checked.stdout + checked.stderr
