"""`gpustack-render explain TARGET SNAPSHOT...`: each field of a rendered object with its sources,
and a Node's derivation, state, flavors and capacity.

Cross-checks rather than snapshots of the wording: the object explain shows is the one `render`
prints; every leaf of it is listed with at least one source; every ``rules/<file>:<line>: <path>``
source points at a line of that file holding that key; the gKey explain derives step by step is the
renderer's for every Node of several snapshots (a generated 300-Node one included); the capacity
keys explain lists are the ones `node-patches` writes.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from cli_invoke import invoke
from gpustack_render import pipeline
from gpustack_render.errors import UserError
from gpustack_render.explain import explain, format_text, parse_target
from gpustack_render.explain.base import Explainer
from gpustack_render.explain.node import gkey_trace

REPO = Path(__file__).resolve().parents[1]
DEMO = "fixtures/demo"
T4_QUEUE = "ClusterQueue/gpustack--nvidia-tesla-t4-linux-amd64"
_ORIGIN = re.compile(r"^(?P<file>\S+\.ya?ml):(?P<line>\d+): (?P<path>\S+)")


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # sources are shown relative to the working directory


@lru_cache(maxsize=None)
def _context(snapshot: tuple[str, ...], sets: tuple[str, ...] = ()) -> pipeline.Context:
    ctx = pipeline.prepare(list(snapshot), list(sets), None)
    ctx.evaluation  # noqa: B018 - evaluate once
    return ctx


def explain_json(target: str, snapshot: tuple[str, ...] = (DEMO,), sets: tuple[str, ...] = ()) -> dict[str, Any]:
    ctx = _context(snapshot, sets)
    return explain(ctx, target, pipeline.setting_sources(ctx, list(sets))).as_json()


@lru_cache(maxsize=None)
def rendered(snapshot: tuple[str, ...] = (DEMO,), sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return pipeline.render_objects(_context(snapshot, sets), None)


def target_of(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    if obj["kind"] == "LocalQueue":
        return f"LocalQueue/{meta['namespace']}/{meta['name']}"
    return f"{obj['kind']}/{meta['name']}"


def leaves(value: Any) -> int:
    if isinstance(value, dict) and value:
        return sum(leaves(v) for v in value.values())
    if isinstance(value, list) and value:
        return sum(leaves(v) for v in value)
    return 1


def origins_of(report: dict[str, Any]) -> list[str]:
    out = [o for f in report["fields"] for o in f["from"]]
    out += [o for s in report["sections"] for line in s["lines"] for o in line.get("from", [])]
    return out


def check_origins(report: dict[str, Any]) -> int:
    """Every ``file:line: path`` source names a line of that file that holds the path's last key."""
    checked = 0
    for origin in origins_of(report):
        match = _ORIGIN.match(origin)
        if not match:
            continue
        lines = (REPO / match["file"]).read_text(encoding="utf-8").splitlines()
        line = lines[int(match["line"]) - 1]
        last = match["path"].split(".")[-1]
        if last.isdigit():
            assert line.lstrip().startswith("-"), f"{origin}: line {line!r} is not a list item"
        else:
            assert last in line, f"{origin}: line {line!r} does not hold {last!r}"
        checked += 1
    return checked


# --- every rendered object of the demo ---------------------------------------------------------

DEMO_TARGETS = [target_of(o) for o in rendered()]


def test_demo_renders_every_kind() -> None:
    kinds = {t.split("/")[0] for t in DEMO_TARGETS}
    assert kinds == {"NodeFeature", "Topology", "AdmissionCheck", "ResourceFlavor", "InstanceType", "ClusterQueue",
                     "LocalQueue"}


@pytest.mark.parametrize("target", DEMO_TARGETS)
def test_explained_object_is_the_rendered_one(target: str) -> None:
    report = explain_json(target)
    obj = next(o for o in rendered() if target_of(o) == target)
    assert report["object"] == obj
    assert report["rendered"] is True and report["template"].endswith(f"templates/{obj['kind']}.yaml")
    # every leaf is listed once, each with at least one source
    assert len(report["fields"]) == leaves(obj)
    assert all(f["from"] and all(isinstance(o, str) and o for o in f["from"]) for f in report["fields"])
    assert len({f["path"] for f in report["fields"]}) == len(report["fields"])
    check_origins(report)
    text = format_text(explain(_context((DEMO,)), target, pipeline.setting_sources(_context((DEMO,)), [])))
    assert text.startswith(target + "\n")


def test_origins_point_at_the_rule_lines() -> None:
    checked = sum(check_origins(explain_json(t)) for t in DEMO_TARGETS)
    checked += check_origins(explain_json("node/node-t4-b"))
    assert checked > 100


# --- ClusterQueue --------------------------------------------------------------------------------

def _field(report: dict[str, Any], path: str) -> dict[str, Any]:
    return next(f for f in report["fields"] if f["path"] == path)


def _section(report: dict[str, Any], title_start: str) -> list[str]:
    section = next(s for s in report["sections"] if s["title"].startswith(title_start))
    return [line["text"] for line in section["lines"]]


def test_queue_selector_flavors_quota_stop_policy_and_checks() -> None:
    report = explain_json(T4_QUEUE)
    facts = report["facts"]
    assert facts["selector"] == {"acceleratable.feature.gpustack.ai/nvidia-tesla-t4": "true",
                                 "feature.gpustack.ai/acceleratable": "true", "kubernetes.io/arch": "amd64",
                                 "kubernetes.io/os": "linux", "resource.gpustack.ai/type": "nodes"}
    t4_1d = "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64-1d-fnv64-87bf574bea2a4f23"
    t4_4d = t4_1d.replace("-1d-", "-4d-")
    assert facts["selected"] == [t4_1d, t4_4d]
    assert facts["quota"] == [{"flavor": t4_1d, "resource": "credits.gpustack.ai/nvidia", "nominalQuota": "1600k"},
                              {"flavor": t4_4d, "resource": "credits.gpustack.ai/nvidia", "nominalQuota": "6400k"}]
    quota = _section(report, "Quota")
    assert any("capacity * M with capacity=4, M=1600000 = 6400000 -> \"6400k\"" in line for line in quota), quota
    assert facts["stopPolicy"] == "None" and facts["decision"]
    assert _section(report, "stopPolicy None")
    assert facts["admissionChecks"] == ["gpustack-node-devices", "gpustack-model-deployment-joint"]
    checks = _section(report, "Admission checks")
    assert checks[0].startswith("gpustack-node-devices: applies")
    nominal = _field(report, "spec.resourceGroups[0].flavors[1].resources[0].nominalQuota")
    assert nominal["value"] == "6400k" and "rules/queues.yaml" in nominal["from"][0]
    assert "capacity 4 = 1 Node(s) x 4" in nominal["from"][0]
    assert {s["name"] for s in report["settings"]} >= {"instance-type-aware-cpu-manufacturer",
                                                       "instance-type-derived-from-node"}


def test_cpu_queue_skips_the_node_devices_check_and_says_why() -> None:
    checks = _section(explain_json("ClusterQueue/gpustack--generic-linux-amd64"), "Admission checks")
    assert checks[0].startswith("gpustack-node-devices: skipped") and "acceleratable is false" in checks[0]


def test_refused_queue_names_the_node_and_both_flavors() -> None:
    snap = ("fixtures/cases/overlapping-selectors/nodes.yaml",)
    report = explain_json("ClusterQueue/gpustack--nvidia-l4-linux-amd64", snap)
    refusal = report["facts"]["refusal"]
    assert refusal.startswith("OverlappingSelectors: Node node-l4-xeon matches flavors")
    assert "gpustack--intel--nvidia-l4" in refusal and "gpustack--intel-6-143--nvidia-l4" in refusal
    assert report["facts"]["stopPolicy"] == "Hold" and report["facts"]["quota"] == []
    assert any("plan refused: OverlappingSelectors" in line for line in _section(report, "Flavor selection"))
    node = explain_json("node/node-l4-xeon", snap)
    flavors = _section(node, "Flavors")
    assert any(line.startswith("NOTE: ResourceFlavor/gpustack--intel--nvidia-l4") for line in flavors), flavors
    flavor = explain_json("ResourceFlavor/gpustack--intel--nvidia-l4-linux-amd64-1d-fnv64-87bf574bea2a4f23", snap)
    assert any("node-l4-xeon" in line and "do not contribute" in line
               for line in _section(flavor, "Contributing Nodes"))


def test_drained_queue_shows_the_lifecycle_decision() -> None:
    case = "fixtures/snapshots/drain"  # the drain case's snapshot, shared with drain-disabled
    snap = (f"{case}/nodes.yaml", f"{case}/instancetypes.yaml", f"{case}/clusterqueues.yaml",
            "fixtures/demo/namespaces.json")
    report = explain_json("ClusterQueue/gpustack--nvidia-a10g-linux-amd64", snap)
    assert report["facts"]["stopPolicy"] == "HoldAndDrain"
    assert report["facts"]["instanceType"] == "snapshot"
    assert "HoldAndDrain" in _field(report, "spec.stopPolicy")["from"][0]
    assert report["facts"]["selected"] == []


# --- ResourceFlavor, InstanceType, LocalQueue ----------------------------------------------------

def test_flavor_capacity_nodes_and_name_format() -> None:
    name = "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64-4d-fnv64-87bf574bea2a4f23"
    report = explain_json(f"ResourceFlavor/{name}")
    assert report["facts"]["nodes"] == ["node-t4-b"] and report["facts"]["capacity"] == 4
    name_from = _field(report, "metadata.name")["from"][0]
    assert name_from.startswith("rules/naming.yaml:") and 'aKey="nvidia-tesla-t4"' in name_from and "count=4" in name_from
    capacity = _field(report, 'metadata.labels["acceleratable.feature.gpustack.ai/nvidia-tesla-t4.capacity"]')
    assert "1 contributing Node(s) x 4 = 4" in capacity["from"][0]
    assert any("node-t4-b (fixtures/demo/nodes.yaml)" in o for o in capacity["from"])
    product = _field(report, 'metadata.annotations["note.gpustack.ai/product"]')
    assert "Node/node-t4-b" in product["from"][0] and "nvidia-tesla-t4.product" in product["from"][0]
    queues = _section(report, "ClusterQueues")
    assert queues == [f"{T4_QUEUE}: nominalQuota credits.gpustack.ai/nvidia=6400k"]


def test_cpu_only_pin_names_the_setting_and_its_source() -> None:
    name = "gpustack--amd-epyc-7r13-linux-amd64-16c-fnv64-87bf574bea2a4f23"
    report = explain_json(f"ResourceFlavor/{name}", sets=("instance-type-mixed-on-node=false",))
    pin = _field(report, 'spec.nodeLabels["feature.gpustack.ai/cpu-only"]')
    assert pin["value"] == "true"
    assert pin["from"][0].startswith("rules/grouping.yaml:") and "pinCpuOnly" in pin["from"][0]
    assert pin["from"][1] == "setting instance-type-mixed-on-node=false (--set)"


def test_instance_type_preset_trace() -> None:
    report = explain_json("InstanceType/gpustack--nvidia-tesla-t4-linux-amd64")
    assert report["facts"]["tier"] == "small"
    preset = _section(report, "Unit-resource preset")
    assert preset[0] == "product \"Tesla-T4\" normalised to \"tesla-t4\", tokens ['tesla', 't4']"
    assert "leading tokens ['tesla'] ignored" in preset[1]
    cpu = _field(report, "spec.unitResources.cpu")
    assert cpu["value"] == "8" and any('prefixes.0 "t4"' in o for o in cpu["from"])
    a10g = explain_json("InstanceType/gpustack--nvidia-a10g-linux-amd64")
    assert a10g["facts"]["tier"] == "medium"


def test_snapshot_instance_type_is_not_rendered() -> None:
    case = "fixtures/cases/existing-instance-type"
    report = explain_json("InstanceType/gpustack--nvidia-a10g-linux-amd64",
                          (DEMO, f"{case}/instancetypes.yaml"))
    assert report["rendered"] is False and report["object"] is None
    assert "create-only" in _section(report, "Not rendered")[0]


def test_local_queue_namespace_and_name() -> None:
    lq = next(o for o in rendered() if o["kind"] == "LocalQueue" and o["metadata"]["namespace"] == "team-a")
    report = explain_json(target_of(lq))
    name_from = _field(report, "metadata.name")["from"][0]
    assert "{clusterQueue|fnv64a}" in name_from and lq["spec"]["clusterQueue"] in name_from
    assert "gpustack-system" in _field(report, "metadata.namespace")["from"][1]


# --- node ----------------------------------------------------------------------------------------

def test_node_gkey_steps_and_normalize_name_intermediates() -> None:
    report = explain_json("node/node-t4-a")
    steps = report["facts"]["gKeySteps"]
    assert [s["step"] for s in steps] == ["manu", "idPrefix[0]", "gKey"]
    assert steps[0]["value"] == "intel"
    name = steps[1]
    assert name["input"] == "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz"
    assert name["afterCruft"] == "Intel Xeon Platinum 8259CL"
    assert name["afterCharacterPass"] == "xeon-platinum-8259cl"
    assert name["maxLength"] == 54 - len("intel") - 1
    assert report["facts"]["gKey"] == steps[-1]["value"] == "intel-xeon-platinum-8259cl"
    lines = _section(report, "CPU key")
    assert any('cruft 1 cut at " @ ": "Intel(R) Xeon(R) Platinum 8259CL CPU"' in line for line in lines)
    assert any('cruft 2 delete' in line and '"Intel Xeon Platinum 8259CL CPU"' in line for line in lines)


def test_node_flavors_queues_and_capacity_match_node_patches() -> None:
    report = explain_json("node/node-t4-b")
    facts = report["facts"]
    assert facts["managed"] is True and facts["aKeys"] == ["nvidia-tesla-t4"]
    assert sorted(facts["flavors"]) == sorted(
        f["metadata"]["name"] for f in rendered() if f["kind"] == "ResourceFlavor"
        and "node-t4-b" in explain_json(f"ResourceFlavor/{f['metadata']['name']}")["facts"]["nodes"])
    assert facts["clusterQueues"] == ["gpustack--generic-linux-amd64", "gpustack--nvidia-tesla-t4-linux-amd64"]
    patches = pipeline.node_patches(_context((DEMO,)))
    for node in ("node-a10g", "node-t4-a", "node-t4-b", "node-cpu"):
        node_facts = explain_json(f"node/{node}")["facts"]
        status = next((p["patch"] for p in patches if p["node"] == node and p["subresource"] == "status"), [])
        labels = next((p["patch"] for p in patches if p["node"] == node and p["subresource"] == ""), [])
        assert node_facts["capacity"] == {op["path"].split("/")[-1].replace("~1", "/"): op["value"] for op in status}
        assert node_facts.get("fitLabels", {}) == {op["path"].split("/")[-1].replace("~1", "/"): op["value"]
                                                   for op in labels}


def test_node_capacity_gates_on_a_mixed_snapshot() -> None:
    snap = ("fixtures/capacity/mixed",)
    stale = _section(explain_json("node/stale-1", snap), "Capacity keys")
    assert any("family sliced: not desired: status.capacity[nvidia.com/gpu.sliced] is absent or 0" in line
               for line in stale), stale
    assert any(line.startswith("patch: remove amd.com/gpu.sliced.units") for line in stale)
    mixed = explain_json("node/a100-mixed", snap)
    lines = _section(mixed, "Capacity keys")
    assert any("family partitioned: gated in" in line for line in lines)
    assert mixed["facts"]["capacity"]["nvidia.com/gpu.partitioned.units"] == "3200k"
    unmanaged = _section(explain_json("node/unmanaged-1", snap), "Capacity keys")
    assert unmanaged[0].startswith("no capacity keys and no fit labels are desired: the Node is not managed")


NODE_YAML = """\
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {labels}
  annotations: {{feature.gpustack.ai/cpu-name: "Intel(R) Xeon(R) Gold 6348 CPU @ 2.60GHz"}}
status:
  capacity: {{cpu: "8"}}
"""


def _node(tmp_path: Path, name: str, labels: dict[str, str]) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(NODE_YAML.format(name=name, labels=json.dumps(labels)), encoding="utf-8")
    return str(path)


BASE = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel"}
GPU = {"acceleratable.feature.gpustack.ai/nvidia-l4": "true", "acceleratable.feature.gpustack.ai/nvidia-l4.count": "2"}

EXCLUSIONS = {
    # name: (labels, --set, the CPU-flavor line must contain, the accelerated line must contain)
    "unmanaged": ({**BASE, **GPU, "gpustack.ai/managed": "false"}, (), "managed is false, needs true",
                  "managed is false, needs true"),
    "manual-mode": ({**BASE, **GPU}, ("node-management-manual=true",), "managed is false", "managed is false"),
    "no-os-arch": ({"feature.node.kubernetes.io/cpu-model.vendor_id": "Intel", **GPU}, (),
                   "hasOsArch is false, needs true", "hasOsArch is false, needs true"),
    "cpu-only-setting": ({**BASE, **GPU}, ("instance-type-mixed-on-node=false",),
                         "setting instance-type-mixed-on-node is false, needs true; and hasAccelerator is true, "
                         "needs false", "feeds accelerated flavor"),
    "zero-count": ({**BASE, "acceleratable.feature.gpustack.ai/nvidia-l4": "true",
                    "acceleratable.feature.gpustack.ai/nvidia-l4.count": "0"}, (), "feeds CPU flavor",
                   "label acceleratable.feature.gpustack.ai/nvidia-l4.count=\"0\" is not a positive integer"),
}


@pytest.mark.parametrize("name", list(EXCLUSIONS))
def test_node_exclusion_reasons(tmp_path: Path, name: str) -> None:
    labels, sets, cpu_line, accel_line = EXCLUSIONS[name]
    path = _node(tmp_path, f"n-{name}", labels)
    args = ["explain", f"node/n-{name}", path, "--format", "json"]
    for item in sets:
        args += ["--set", item]
    proc = invoke(*args)
    assert proc.returncode == 0, proc.stderr
    lines = _section(json.loads(proc.stdout), "Flavors")
    assert cpu_line in lines[0], lines
    assert accel_line in lines[1], lines


def test_manual_mode_says_the_label_is_not_stamped(tmp_path: Path) -> None:
    path = _node(tmp_path, "n-manual", {**BASE})
    ctx = pipeline.prepare([path], ["node-management-manual=true"], None)
    report = explain(ctx, "node/n-manual", pipeline.setting_sources(ctx, ["node-management-manual=true"])).as_json()
    state = next(s for s in report["sections"] if s["title"] == "State")["lines"][0]
    assert state["text"].startswith("NOT managed") and "stampWhen does not hold" in state["text"]
    assert "setting node-management-manual=true (--set)" in state["from"]


def test_gkey_trace_agrees_with_the_renderer_on_every_node(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "bench"))
    try:
        import gen_snapshot
    finally:
        sys.path.pop(0)
    generated = tmp_path / "snap.json"
    generated.write_text(json.dumps(gen_snapshot.generate(300, 2, seed=7)), encoding="utf-8")
    checked = 0
    for snap in ([DEMO], ["fixtures/capacity/mixed"], ["fixtures/cases/overlapping-selectors/nodes.yaml"],
                 [str(generated)]):
        ctx = pipeline.prepare(snap, [], None)
        x = Explainer(ctx, pipeline.setting_sources(ctx, []), None)
        for facts in ctx.evaluation.node_facts:
            gkey, steps = gkey_trace(x, facts.name)  # the evaluator's recorded derivation, formatted
            assert gkey == facts.gkey == steps[-1]["value"], facts.name
            assert steps[0]["step"] == "manu" and all(step["text"] for step in steps), facts.name
            checked += 1
        for name in list(x.facts)[:40]:
            explain(ctx, f"node/{name}", {}, None)  # never raises
    assert checked > 300


# --- settings sources --------------------------------------------------------------------------

def test_setting_sources_default_snapshot_and_set() -> None:
    case = "fixtures/cases/settings-configmap"
    report = explain_json("node/node-t4-b", (DEMO, f"{case}/settings.yaml"), ("node-management-manual=false",))
    by_name = {s["name"]: s for s in report["settings"]}
    assert (by_name["node-management-manual"]["source"], by_name["node-management-manual"]["value"]) == ("--set", False)
    mixed = by_name["instance-type-mixed-on-node"]
    assert (mixed["source"], mixed["value"]) == ("snapshot", False)
    assert mixed["detail"] == (f"{case}/settings.yaml: ConfigMap/gpustack-system/gpustack-settings: "
                               f"data.instance-type-mixed-on-node")
    default = [s for s in report["settings"] if s["source"] == "default"]
    for item in default:
        file, line = item["detail"].rsplit(":", 1)
        assert item["name"] in (REPO / file).read_text().splitlines()[int(line) - 1]


# --- verdicts: the condition compiler's second output ------------------------------------------

def _cond(data: Any) -> Any:
    from pydantic import TypeAdapter

    from gpustack_render.rules import schema
    return TypeAdapter(schema.Condition).validate_python(data)


@pytest.mark.parametrize("data, facts, settings, want", [
    ({"fact": "managed"}, {"managed": False}, {}, ["managed is false, needs true"]),
    ({"fact": "cpuCount", "operator": "Gt", "value": 0}, {"cpuCount": 0}, {}, ["cpuCount is 0, needs Gt 0"]),
    ({"not": {"fact": "hasAccelerator"}}, {"hasAccelerator": True}, {}, ["hasAccelerator is true, needs false"]),
    ({"setting": "s"}, {}, {"s": False}, ["setting s is false, needs true"]),
    ({"all": [{"fact": "a"}, {"fact": "b"}]}, {"a": True, "b": False}, {}, ["b is false, needs true"]),
    ({"any": [{"fact": "a"}, {"not": {"setting": "s"}}]}, {"a": False}, {"s": True},
     ["a is false, needs true; and setting s is true, needs false"]),
    ({"all": [{"fact": "a"}]}, {"a": True}, {}, []),
])
def test_verdict_reason_and_value(data: Any, facts: dict[str, Any], settings: dict[str, bool], want: list[str]) -> None:
    """The verdict compiled from the same tree says why, and its value is the boolean closure's."""
    from gpustack_render.rules.expressions import compile_condition, compile_verdict
    cond = _cond(data)
    verdict = compile_verdict(cond)(facts, settings)
    assert verdict.reason == "; ".join(want)
    assert verdict.value == compile_condition(cond, set(facts), set(settings))(facts, settings) == (not want)
    assert {leaf.text for leaf in verdict.leaves} <= {*(f"setting {s}" for s in settings), *(
        t for t in ("managed", "cpuCount Gt 0", "hasAccelerator", "a", "b"))}


def test_verdict_does_not_swallow_type_errors() -> None:
    """explain's old interpreter turned a TypeError into False; the verdict fails as the render would."""
    from gpustack_render.rules.expressions import compile_verdict
    with pytest.raises(TypeError):
        compile_verdict(_cond({"fact": "cpuCount", "operator": "Gt", "value": 0}))({"cpuCount": "x"}, {})


# --- targets and the CLI -----------------------------------------------------------------------

@pytest.mark.parametrize("target, message", [
    ("Flavr/x", "unknown kind 'Flavr'"),
    ("clusterqueue", "expected ClusterQueue/NAME"),
    ("LocalQueue/only-name", "expected LocalQueue/NAMESPACE/NAME"),
    ("ResourceFlavor/a/b", "a name has no '/'"),
])
def test_bad_targets(target: str, message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        parse_target(target)


def test_kinds_are_case_insensitive() -> None:
    assert parse_target("resourceflavor/x") == ("ResourceFlavor", "", "x")
    assert parse_target("NODE/n") == ("node", "", "n")
    assert parse_target("localqueue/ns/q") == ("LocalQueue", "ns", "q")


CRDS = Path(__file__).resolve().parents[2] / "shared" / "crds"  # ../shared/crds next to the repository


def crd_names() -> dict[str, dict[str, Any]]:
    """kind → spec.names of every CustomResourceDefinition under ../shared/crds."""
    import yaml
    if not CRDS.is_dir():  # as every CRD test: skipped, with the path it looked at in the reason
        pytest.skip(f"CRD test data not found at {CRDS} (../shared/crds next to the repo: Kueue and NFD "
                    f"CustomResourceDefinitions)")
    out = {}
    for path in sorted(CRDS.rglob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                out[doc["spec"]["names"]["kind"]] = doc["spec"]["names"]
    return out


def test_every_crd_short_and_plural_name_of_an_explained_kind_is_accepted() -> None:
    from gpustack_render.explain import ALIASES, KINDS
    names = crd_names()
    covered = [k for k in KINDS if k in names]
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue", "Topology", "AdmissionCheck", "NodeFeature"} <= set(covered)
    for kind in covered:
        spec = names[kind]
        for alias in [spec["plural"], spec["singular"], *spec.get("shortNames", [])]:
            assert parse_target(f"{alias}/x" if kind != "LocalQueue" else f"{alias}/ns/x")[0] == kind, alias
            assert parse_target(f"{alias.upper()}/x" if kind != "LocalQueue" else f"{alias.upper()}/ns/x")[0] == kind
        # nothing beyond what the CRD declares (plus kubectl's own names for the kind)
        assert set(ALIASES[kind]) <= {spec["plural"], *spec.get("shortNames", [])}, kind
    assert parse_target("no/n") == ("node", "", "n") and parse_target("nodes/n") == ("node", "", "n")
    with pytest.raises(UserError, match="unknown kind 'it'"):
        parse_target("it/x")  # InstanceType has no short name: none is invented


def test_short_name_explains_the_same_object() -> None:
    long = invoke("explain", T4_QUEUE, DEMO, "--format", "json")
    short = invoke("explain", "cq/" + T4_QUEUE.split("/", 1)[1], DEMO, "--format", "json")
    assert long.exit_code == short.exit_code == 0
    assert json.loads(short.stdout) == json.loads(long.stdout)
    lq = invoke("explain", "queue/default/gpustack-fnv64-3b93966fd73eb9ec", DEMO, "--format", "json")
    assert lq.exit_code == 0 and json.loads(lq.stdout)["kind"] == "LocalQueue"


@pytest.mark.parametrize("typed, names, hint", [
    # a partial name: the one name containing it, though the whole names are far apart
    ("nvidia-tesla-t4", ["gpustack--generic-linux-amd64", "gpustack--nvidia-a10g-linux-amd64",
                         "gpustack--nvidia-tesla-t4-linux-amd64"], "did you mean 'gpustack--nvidia-tesla-t4-linux-amd64'?"),
    # whole-name similarity, not the first characters: the amd64 twin of an arm64 typo
    ("gpustack--nvidia-l4-linux-arm65", ["gpustack--nvidia-l4-linux-amd64", "gpustack--nvidia-l4-linux-arm64",
                                         "gpustack--nvidia-l40-linux-arm64"], "did you mean 'gpustack--nvidia-l4-linux-arm64'?"),
    # equally close: both named
    ("node-t4", ["node-t4-a", "node-t4-b", "node-cpu"], "did you mean 'node-t4-a' or 'node-t4-b'?"),
    # nothing close: the closest few, best first, with the total
    ("zz", ["b-aa", "a-zb", "c-cc", "d-dd"], "closest Nodes (of 4): a-zb, b-aa, c-cc"),
    ("x", [], "this snapshot renders no Node"),
])
def test_did_you_mean_ranks_by_the_whole_name(typed: str, names: list[str], hint: str) -> None:
    from gpustack_render.explain import suggestion
    assert suggestion(typed, names, "Node") == hint


def test_unknown_kind_suggests_the_kind_and_its_alias() -> None:
    with pytest.raises(UserError) as err:
        parse_target("clusterqueus/x")
    assert "did you mean 'clusterqueues' (ClusterQueue)?" in str(err.value)
    with pytest.raises(UserError) as err:
        parse_target("ResourceFlavour/x")
    assert "did you mean 'ResourceFlavor'?" in str(err.value)
    with pytest.raises(UserError) as err:
        parse_target("zzz/x")
    assert "kinds: ResourceFlavor (resourceflavors, rf, flavor, flavors)" in str(err.value)


def test_cli_text_and_json() -> None:
    text = invoke("explain", T4_QUEUE, DEMO)
    assert text.returncode == 0 and text.stderr == ""
    assert text.stdout.startswith(T4_QUEUE + "\n")
    for heading in ("Fields", "Flavor selection", "Quota", "stopPolicy None", "Admission checks", "Settings"):
        assert f"\n{heading}\n" in text.stdout, heading
    data = json.loads(invoke("explain", T4_QUEUE, DEMO, "--format", "json").stdout)
    assert data["target"] == T4_QUEUE and data["kind"] == "ClusterQueue"
    node = invoke("explain", "node/node-t4-b", DEMO, "fixtures/demo/nodes.yaml")  # SNAPSHOT takes many paths
    assert node.returncode == 0 and "CPU key (gKey) = intel-xeon-platinum-8259cl" in node.stdout


def test_cli_not_found_suggests_a_name() -> None:
    proc = invoke("explain", "ClusterQueue/gpustack--nvidia-tesla-t4-linux-amd6", DEMO)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "did you mean 'gpustack--nvidia-tesla-t4-linux-amd64'?" in proc.stderr
    proc = invoke("explain", "node/nope", DEMO)
    assert proc.returncode == 2 and "not in the snapshot" in proc.stderr
    proc = invoke("explain", "Bogus/x", DEMO)
    assert proc.returncode == 2 and "unknown kind" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_help_documents_target_first() -> None:
    proc = invoke("explain", "--help")
    assert proc.returncode == 0
    assert "explain [OPTIONS] TARGET SNAPSHOT..." in proc.stdout and "TARGET comes first" in proc.stdout
    assert "explain" in invoke("--help").stdout


@pytest.mark.parametrize("manufacturer, product, tier, says", [
    ("nvidia", "NVIDIA-A100-SXM4-80GB", "large", 'token "80gb" overrides its tier medium -> large'),
    ("nvidia", "NVIDIA-A100-PCIE-40GB", "medium", 'token "40gb" overrides its tier medium -> medium'),
    ("nvidia", "Tesla-V100-SXM2-32GB", "medium", 'leading tokens [\'tesla\'] ignored'),
    ("nvidia", "NVIDIA-A10", "medium", 'prefix "a10" (manufacturers.nvidia.5) matches: tier medium'),
    ("nvidia", "NVIDIA-A1000", None, "no entry matches: fallback"),
    ("amd", "AMD-Instinct-MI300X", "xlarge", 'prefix "mi300x"'),
    ("cambricon", "MLU", None, "no entry matches: fallback"),
    ("acme", "X1", None, 'no preset table for manufacturer "acme": fallback'),
    ("nvidia", "", None, "the product is empty: fallback"),
])
def test_preset_trace_formats_the_matchers_steps(manufacturer: str, product: str, tier: str | None, says: str) -> None:
    from gpustack_render.evaluate.names import NameNormaliser
    from gpustack_render.evaluate.presets import PresetMatcher
    from gpustack_render.evaluate.record import Decision, Records
    from gpustack_render.explain.objects import preset_trace
    ctx = _context((DEMO,))
    x = Explainer(ctx, {}, None)
    names = NameNormaliser(ctx.rules)
    steps: list[dict[str, Any]] = []
    matched = PresetMatcher(ctx.rules, names).tier(manufacturer, product, steps)
    x.records = Records()
    x.records.record("InstanceType/t", Decision("preset", None, inputs=(("manufacturer", manufacturer),
                                                                        ("product", product)), steps=tuple(steps)))
    got, lines, _ = preset_trace(x, "t")
    assert got == tier == matched == PresetMatcher(ctx.rules, names).tier(manufacturer, product)
    assert any(says in line for line in lines), lines


def _render_cases() -> list[Path]:
    from gpustack_render import casetest
    out = []
    for case_dir in casetest.case_dirs(REPO / "fixtures" / "cases"):
        case = casetest.load_case(case_dir)
        if case.expect_exit_code == 0 and case.rules is None:
            out.append(case_dir)
    return out


@pytest.mark.parametrize("case_dir", _render_cases(), ids=lambda p: p.name)
def test_every_object_and_node_of_every_fixture_case_explains(case_dir: Path) -> None:
    """Robustness: every rendered object and every Node of every fixture case can be explained, the
    object shown is the rendered one, and the JSON form is plain data."""
    from gpustack_render import casetest
    case = casetest.load_case(case_dir)
    paths = [str((case_dir / rel).resolve().relative_to(REPO)) for rel in case.snapshot]
    ctx = pipeline.prepare(paths, list(case.set), None)
    sources = pipeline.setting_sources(ctx, list(case.set))
    targets = [target_of(o) for o in pipeline.render_objects(ctx, None)]
    targets += [f"node/{name}" for name in ctx.snapshot.nodes]
    targets += [f"InstanceType/{name}" for name in ctx.snapshot.instance_types]
    objects = {target_of(o): o for o in pipeline.render_objects(ctx, None)}
    for target in targets:
        report = explain(ctx, target, sources)
        data = json.loads(json.dumps(report.as_json()))
        if target in objects:
            assert data["object"] == objects[target], target
        assert format_text(report).startswith(target + "\n")
