"""`gpustack-render diff`: desired (the render) against current (a previous render or the live
objects in the snapshot); what is ignored, what counts as removed, the three output formats, exit codes."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from cli_invoke import invoke
import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
CQ_T4 = "gpustack--nvidia-tesla-t4-linux-amd64"


def rendered(*args: str) -> list[dict[str, Any]]:
    proc = invoke("render", *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["items"]


def find(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in items if o["kind"] == kind and o["metadata"]["name"] == name)


def write_list(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    return path


def snapshot_with(tmp_path: Path, live: list[dict[str, Any]]) -> Path:
    """The demo snapshot plus ``live`` objects, as one directory."""
    snap = tmp_path / "snap"
    shutil.copytree(DEMO, snap)
    write_list(snap / "live.json", live)
    return snap


def diff_json(*args: str) -> tuple[int, list[dict[str, Any]]]:
    """The exit code and the ``changes`` of ``diff --format json`` (whose summary must agree)."""
    proc = invoke("diff", *args, "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"summary", "changes"}
    for action in ("added", "changed", "removed"):
        keys = {(c["kind"], c["namespace"], c["name"]) for c in out["changes"] if c["action"] == action}
        assert out["summary"][action] == len(keys)
    return proc.returncode, out["changes"]


@pytest.fixture(scope="module")
def demo() -> list[dict[str, Any]]:
    return rendered(str(DEMO))


# --- no differences -------------------------------------------------------------------------------

NO_CHANGES_JSON = {"summary": {"added": 0, "changed": 0, "removed": 0, "kinds": {}}, "changes": []}


@pytest.mark.parametrize("shape", ["yaml", "json", "dir"])
@pytest.mark.parametrize("fmt, empty", [("text", "0 added, 0 changed, 0 removed\n"), ("json", NO_CHANGES_JSON),
                                        ("markdown", None)])
def test_a_previous_render_in_any_shape_has_no_differences(tmp_path: Path, shape: str, fmt: str,
                                                           empty: Any) -> None:
    against = tmp_path / "prev"
    if shape == "dir":
        assert invoke("render", str(DEMO), "-o", str(against)).returncode == 0
    else:
        out = invoke("render", str(DEMO), "--format", shape).stdout
        against.write_text(out, encoding="utf-8")
    proc = invoke("diff", str(DEMO), "--against", str(against), "--format", fmt)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if empty is None:
        assert proc.stdout.startswith("### gpustack-render diff") and "No differences." in proc.stdout
    elif fmt == "json":
        assert json.loads(proc.stdout) == empty
    else:
        assert proc.stdout == empty


def _server_noise(obj: dict[str, Any], i: int) -> dict[str, Any]:
    """What the API server and controllers add to an applied object."""
    live = copy.deepcopy(obj)
    meta = live["metadata"]
    meta.update(uid=f"uid-{i}", resourceVersion=str(1000 + i), generation=3,
                creationTimestamp="2025-01-01T00:00:00Z", managedFields=[{"manager": "kubectl"}])
    meta.setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(obj)
    live["status"] = {"conditions": [{"type": "Active", "status": "True"}]}
    if live["kind"] in ("ClusterQueue", "ResourceFlavor"):
        meta["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    if live["kind"] == "ClusterQueue":
        live["spec"].update(queueingStrategy="BestEffortFIFO", fairSharing={"weight": "1"})
    if live["kind"] == "LocalQueue":
        live["spec"].update(stopPolicy="None", fairSharing={"weight": 1})
    return live


def test_live_objects_with_server_fields_and_kueue_defaults_have_no_differences(tmp_path: Path,
                                                                                demo: list[dict[str, Any]]) -> None:
    live = [_server_noise(o, i) for i, o in enumerate(demo)]
    code, changes = diff_json(str(snapshot_with(tmp_path, live)))
    assert (code, changes) == (0, [])


def test_without_live_objects_everything_is_added(demo: list[dict[str, Any]]) -> None:
    code, changes = diff_json(str(DEMO))
    assert code == 1
    assert {c["action"] for c in changes} == {"added"}
    assert [(c["kind"], c["namespace"], c["name"]) for c in changes] == \
        [(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in demo]
    for change, obj in zip(changes, demo):
        assert jsonpatch.apply_patch({}, change["patch"]) == obj


# --- what differs ---------------------------------------------------------------------------------

def _mutate(demo: list[dict[str, Any]], kind: str, name: str, edit: Any) -> list[dict[str, Any]]:
    items = copy.deepcopy(demo)
    edit(find(items, kind, name))
    return items


@pytest.mark.parametrize("kind, name, edit, fields", [
    ("ClusterQueue", CQ_T4, lambda o: o["spec"].update(stopPolicy="Hold"), ["spec.stopPolicy"]),
    # A default the render sets to something else is a real difference.
    ("ClusterQueue", CQ_T4, lambda o: o["spec"]["preemption"].update(withinClusterQueue="Never"),
     ["spec.preemption.withinClusterQueue"]),
    # A non-default value of a field the render leaves unset is a difference too.
    ("ClusterQueue", CQ_T4, lambda o: o["spec"].update(queueingStrategy="StrictFIFO"), ["spec.queueingStrategy"]),
    ("ClusterQueue", CQ_T4, lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
     .update(nominalQuota="1"), ["spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"]),
    ("Topology", "gpustack-fnv64-87bf574bea2a4f23", lambda o: o["metadata"]["labels"].update({"team": "x"}),
     ["metadata.labels.team"]),
    ("NodeFeature", "node-cpu-gpustack-worker", lambda o: o["spec"]["labels"].pop("gpustack.ai/managed"),
     ['spec.labels["gpustack.ai/managed"]']),
])
def test_changed_fields_and_patch(tmp_path: Path, demo: list[dict[str, Any]], kind: str, name: str, edit: Any,
                                  fields: list[str]) -> None:
    previous = _mutate(demo, kind, name, edit)
    code, changes = diff_json(str(DEMO), "--against", str(write_list(tmp_path / "prev.json", previous)))
    assert code == 1
    assert [(c["action"], c["kind"], c["name"], c["fields"]) for c in changes] == [("changed", kind, name, fields)]
    assert jsonpatch.apply_patch(find(previous, kind, name), changes[0]["patch"]) == find(demo, kind, name)


def test_text_format_is_a_unified_yaml_diff_per_object(tmp_path: Path, demo: list[dict[str, Any]]) -> None:
    previous = _mutate(demo, "ClusterQueue", CQ_T4, lambda o: o["spec"].update(stopPolicy="Hold"))
    proc = invoke("diff", str(DEMO), "--against", str(write_list(tmp_path / "prev.json", previous)))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[:3] == [f"diff -u a/ClusterQueue/{CQ_T4} b/ClusterQueue/{CQ_T4}",
                         f"--- a/ClusterQueue/{CQ_T4}", f"+++ b/ClusterQueue/{CQ_T4}"]
    assert "-  stopPolicy: Hold" in lines and "+  stopPolicy: None" in lines
    assert sum(line.startswith(("-", "+")) and not line.startswith(("---", "+++")) for line in lines) == 2
    assert lines[-1] == "0 added, 1 changed (ClusterQueue 1), 0 removed"


def test_markdown_format_is_a_pr_comment(tmp_path: Path, demo: list[dict[str, Any]]) -> None:
    previous = _mutate(demo, "ClusterQueue", CQ_T4, lambda o: o["spec"].update(stopPolicy="Hold"))
    previous = [o for o in previous if o["metadata"]["name"] != "gpustack-node-devices"]
    proc = invoke("diff", str(DEMO), "--against", str(write_list(tmp_path / "prev.json", previous)),
                   "--format", "markdown")
    assert proc.returncode == 1
    text = proc.stdout
    assert text.startswith("### gpustack-render diff\n\n**1 added (AdmissionCheck 1), 1 changed (ClusterQueue 1), "
                           "0 removed**")
    assert "| Kind | Name | Change | Changed fields |" in text
    assert f"| ClusterQueue | `{CQ_T4}` | changed | `spec.stopPolicy` |" in text
    assert "| AdmissionCheck | `gpustack-node-devices` | added | — |" in text
    # two object diffs plus the diagram of the one changed pool
    assert text.count("<details>") == 3 == text.count("</details>")
    assert "<summary>Diagram of the changed pools</summary>" in text and "```mermaid\nflowchart LR\n" in text
    assert f"<summary>ClusterQueue/{CQ_T4} — changed</summary>" in text
    assert "```diff\n" in text and "+  stopPolicy: None" in text


# --- removed: only what the tool owns -------------------------------------------------------------

def _flavor(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": name, "labels": labels}, "spec": {"nodeLabels": {"a": "b"}}}


def _node_feature(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
            "metadata": {"name": name, "namespace": "gpustack-system", "labels": labels}, "spec": {"labels": {}}}


@pytest.mark.parametrize("obj, removed", [
    (_flavor("gpustack--gone-linux-amd64-4c-fnv64-0", {"resource.gpustack.ai/type": "nodes"}), True),
    (_flavor("team-flavor", {"resource.gpustack.ai/type": "nodes"}), True),            # owned by label
    (_flavor("gpustack-old", {}), True),                                              # owned by name
    (_flavor("team-flavor", {}), False),                                              # foreign
    (_node_feature("gone-gpustack-worker", {"app.kubernetes.io/part-of": "gpustack-operator-worker"}), True),
    (_node_feature("node-cpu", {"app.kubernetes.io/part-of": "nfd-worker"}), False),  # nfd-worker's own
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
      "metadata": {"name": "team-queue", "namespace": "team-a"}, "spec": {"clusterQueue": "x"}}, False),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
      "metadata": {"name": "gpustack-fnv64-0000000000000000", "namespace": "team-a"},
      "spec": {"clusterQueue": "x"}}, True),
    # Not a compared kind at all: never reported.
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpustack-x", "namespace": "a"}}, False),
])
@pytest.mark.parametrize("mode", ["live", "against"])
def test_removed_only_for_owned_objects(tmp_path: Path, demo: list[dict[str, Any]], obj: dict[str, Any],
                                        removed: bool, mode: str) -> None:
    if mode == "live":
        code, changes = diff_json(str(snapshot_with(tmp_path, demo + [obj])))
    else:
        code, changes = diff_json(str(DEMO), "--against", str(write_list(tmp_path / "prev.json", demo + [obj])))
    expected = [("removed", obj["kind"], obj["metadata"]["name"])] if removed else []
    assert [(c["action"], c["kind"], c["name"]) for c in changes] == expected
    assert code == (1 if removed else 0)
    if removed:
        assert changes[0]["patch"] and jsonpatch.apply_patch(obj, changes[0]["patch"]) == {}


def test_existing_derived_instance_type_is_not_removed(tmp_path: Path, demo: list[dict[str, Any]]) -> None:
    """Create-only: once the derived InstanceType exists, the render leaves it out; that is no removal.
    One that does not exist (its pool is gone and it was never created) is removed."""
    existing = find(demo, "InstanceType", CQ_T4)
    snap = snapshot_with(tmp_path, [existing])
    now = rendered(str(snap))
    assert not [o for o in now if o["kind"] == "InstanceType" and o["metadata"]["name"] == CQ_T4]
    code, changes = diff_json(str(snap), "--against", str(write_list(tmp_path / "prev.json", demo)))
    assert (code, changes) == (0, [])
    gone = copy.deepcopy(existing)
    gone["metadata"]["name"] = "gpustack--nvidia-h100-linux-amd64"
    code, changes = diff_json(str(snap), "--against", str(write_list(tmp_path / "prev.json", demo + [gone])))
    assert [(c["action"], c["kind"], c["name"]) for c in changes] == [("removed", "InstanceType", gone["metadata"]["name"])]


def test_match_by_group_not_version_and_by_namespace(tmp_path: Path, demo: list[dict[str, Any]]) -> None:
    previous = copy.deepcopy(demo)
    find(previous, "ClusterQueue", CQ_T4)["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    moved = next(o for o in previous if o["kind"] == "LocalQueue")
    old_namespace = moved["metadata"]["namespace"]
    moved["metadata"]["namespace"] = "elsewhere"
    code, changes = diff_json(str(DEMO), "--against", str(write_list(tmp_path / "prev.json", previous)))
    assert code == 1
    summary = sorted((c["action"], c["kind"], c["namespace"], c["name"], tuple(c["fields"])) for c in changes)
    lq = moved["metadata"]["name"]
    assert summary == sorted([("changed", "ClusterQueue", "", CQ_T4, ("apiVersion",)),
                              ("added", "LocalQueue", old_namespace, lq, ()),
                              ("removed", "LocalQueue", "elsewhere", lq, ())])


# --- node patches ---------------------------------------------------------------------------------

def test_include_node_patches_lists_nodes_with_pending_patches(tmp_path: Path) -> None:
    against = tmp_path / "prev.yaml"
    against.write_text(invoke("render", str(DEMO)).stdout, encoding="utf-8")
    assert invoke("diff", str(DEMO), "--against", str(against)).returncode == 0
    code, changes = diff_json(str(DEMO), "--against", str(against), "--include-node-patches")
    patches = json.loads(invoke("node-patches", str(DEMO), "--format", "json").stdout)
    assert patches, "the demo must have pending node patches for this test to mean anything"
    assert code == 1
    assert [(c["kind"], c["name"], c["subresource"], c["patch"]) for c in changes] == \
        [("Node", p["node"], p["subresource"], p["patch"]) for p in patches]
    status = next(c for c in changes if c["subresource"] == "status")
    assert all(f.startswith("status.capacity[") for f in status["fields"])
    text = invoke("diff", str(DEMO), "--against", str(against), "--include-node-patches").stdout
    assert f"--- a/Node/{status['name']} (status)" in text


# --- errors ---------------------------------------------------------------------------------------

def test_bad_inputs_exit_2_with_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n", encoding="utf-8")
    cases = [(["--against", str(tmp_path / "missing")], "no such file or directory"),
             (["--against", str(broken)], "invalid YAML"),
             (["--format", "html"], "Invalid value for '--format'")]
    for args, words in cases:
        proc = invoke("diff", str(DEMO), *args)
        assert proc.returncode == 2, args
        assert words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stdout == ""


def test_diff_rules_are_data_and_checked(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    shutil.copytree(REPO / "rules", rules)
    diff_rules = yaml.safe_load((rules / "diff.yaml").read_text(encoding="utf-8"))
    # Without the ClusterQueue defaults, the live queue's server defaults become differences.
    diff_rules["defaults"] = [d for d in diff_rules["defaults"] if d["kind"] != "ClusterQueue"]
    (rules / "diff.yaml").write_text(yaml.safe_dump(diff_rules, sort_keys=False), encoding="utf-8")
    demo = rendered(str(DEMO))
    snap = snapshot_with(tmp_path, [_server_noise(o, i) for i, o in enumerate(demo)])
    code, changes = diff_json(str(snap), "--rules", str(rules))
    assert code == 1 and {c["kind"] for c in changes} == {"ClusterQueue"}
    assert all(c["fields"] == ["spec.fairSharing", "spec.queueingStrategy"] for c in changes)
    # A create-only kind that is not compared is a rule error naming the file and the line.
    diff_rules["createOnly"] = [{"group": "worker.gpustack.ai", "kind": "Instancetype"}]
    (rules / "diff.yaml").write_text(yaml.safe_dump(diff_rules, sort_keys=False), encoding="utf-8")
    proc = invoke("diff", str(DEMO), "--rules", str(rules))
    assert proc.returncode == 2
    assert "diff.yaml:" in proc.stderr and "not one of the compared kinds" in proc.stderr
    assert "InstanceType.worker.gpustack.ai" in proc.stderr  # the did-you-mean hint
