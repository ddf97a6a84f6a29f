"""Property: the queue lifecycle (rules/lifecycle.yaml, stage4-chain.md §2.5-§2.6) is a fixed point.

Render a generated snapshot, *apply* the result to it the way the cluster would, render again: the
output must not change. Applying means

* the rendered ClusterQueues, LocalQueues, ResourceFlavors, Topologies, AdmissionChecks and
  InstanceTypes replace (or join) the snapshot's objects of the same identity (API group, kind,
  namespace, name). What an apply does not own stays as the API server keeps it: ``status`` (the
  workload counts the drain reads, AdmissionCheck conditions) and ``metadata.deletionTimestamp`` /
  ``finalizers`` (a deletion in progress cannot be undone). Snapshot objects the render does not
  produce (finalizing flavors, foreign queues, InstanceTypes being deleted) are left alone;
* each Node's labels become the converged view (stage3-node.md §1.5): ``general.feature.gpustack.ai/*``
  and ``feature.gpustack.ai/cpu-only`` dropped, the rendered NodeFeature's ``spec.labels`` added (NFD
  copies them), ``topology.gpustack.ai/profile`` added when absent (the operator's topology
  controller). The profile is computed here from the rules' levels, not taken from the renderer.

InstanceTypes are create-only (§4.1): a derived InstanceType that the first render creates is in the
snapshot afterwards and so is never rendered again. The fixed point is therefore stated as

1. render 2 == render 1 without its InstanceTypes, byte for byte (the CLI's JSON and YAML output),
   and render 2 has no InstanceType at all;
2. render 3 (after applying render 2) == render 2, byte for byte;
3. render 2 warns "back-fill" for no queue that render 1 held itself (being deleted, drained,
   inactive, empty plan): the renderer's own holds are never mistaken for an admin's.

Checked over generated snapshots (hypothesis: a few Nodes of random CPU vendors, names and counts,
optional accelerators, managed or not, stale labels; InstanceTypes inactive or deleting; queues with
any stop policy, renderer markers, quota and workload counts, being deleted; snapshot flavors, some
finalizing; the zone Topology; inactive AdmissionChecks; every setting flipped at random), over a few
fixed shapes, and over every fixture case that renders. Everything runs in-process through
:mod:`gpustack_render.pipeline`; snapshots are JSON files in a temporary directory.

At the end, a regression test: kept groups are never emptied by finalizing flavors, and the lifecycle
transitions of stage4-chain.md §2.6.1 walked step by step (render, apply, change one thing, render,
render once more), in both directions, with the stop policy and markers expected at each step.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_render import pipeline
from gpustack_render.emit import format_objects

GENERAL = "general.feature.gpustack.ai/"
CPU_ONLY = "feature.gpustack.ai/cpu-only"
PROFILE = "topology.gpustack.ai/profile"
AKEY = "acceleratable.feature.gpustack.ai/"
EMPTY_PLAN = "topology.gpustack.ai/empty-plan-hold"
SAVED = "topology.gpustack.ai/migration-stop-policy"
INACTIVE_HOLD = "topology.gpustack.ai/inactive-hold"
TAS = "topology.gpustack.ai/tas-queue"
HOSTNAME_PROFILE = "fnv64-87bf574bea2a4f23"
ZONE_PROFILE = "fnv64-f7b1861ac0399767"  # levels topology.kubernetes.io/zone + kubernetes.io/hostname
APPLIED_KINDS = {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "AdmissionCheck", "InstanceType"}
# Lifecycle rules whose Hold/HoldAndDrain is the renderer's own decision (not an admin's hold kept or
# restored): the next render must not read them as an admin's stop and warn about a back-fill.
RENDERER_HOLDS = {"being-deleted", "drain-while-workloads", "drain-no-flavors", "refused-return", "inactive",
                  "empty-plan-hold"}
SETTINGS = ("instance-type-aware-cpu-manufacturer", "instance-type-mixed-on-node", "instance-type-derived-from-node",
            "instance-type-drain-when-no-flavors", "node-management-manual")

# CPU models: key -> (vendor_id label, cpu-name annotation, (family, id) labels, gKey).
CPUS = {
    "amd": ("AMD", "AMD EPYC 7R13 Processor", None, "amd-epyc-7r13"),
    "intel": ("Intel", "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", None, "intel-xeon-gold-6338"),
    "intel-fam": ("Intel", None, ("6", "143"), "intel-6-143"),
    "intel-bare": ("Intel", None, None, "intel"),  # a bare manufacturer gKey: overlapping selectors
    "generic": (None, None, None, "generic"),
}
# Accelerators: aKey -> (product label, memory label).
ACCELS = {"nvidia-l4": ("NVIDIA-L4", "24Gi"), "nvidia-tesla-t4": ("Tesla-T4", "15Gi"),
          "nvidia-a10g": ("NVIDIA-A10G", "24Gi")}
GONE_FLAVORS = ["gpustack--amd-epyc-7r13-linux-amd64-64c-" + HOSTNAME_PROFILE,
                "gpustack--intel-xeon-gold-6338--nvidia-l4-linux-amd64-8d-" + HOSTNAME_PROFILE]
CUSTOM_NAMES = ["team-a", "team-b", "gpustack--nvidia-a10g-linux-arm64"]


def profile_of_levels(levels: list[str]) -> str:
    """stage3-node.md §7, written out here so the converged view does not lean on the renderer."""
    value = 0xCBF29CE484222325
    for byte in "\x00".join(levels).encode("utf-8"):
        value = ((value ^ byte) * 0x100000001B3) % (1 << 64)
    return f"fnv64-{value:016x}"


def _meta(name: str, deleting: bool = False, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **{k: v for k, v in extra.items() if v}}
    if deleting:
        meta["deletionTimestamp"] = "2025-03-12T10:00:00Z"
        meta["finalizers"] = ["example.com/in-use"]
    return meta


# ------------------------------------------------------------------------------------------------
# Strategies
# ------------------------------------------------------------------------------------------------


@st.composite
def node_specs(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 5))
    return [{
        "name": f"node-{i}",
        "cpu": draw(st.sampled_from(sorted(CPUS))),
        "cpus": draw(st.sampled_from([0, 4, 16, 32])),  # 0: no CPU count label, no CPU flavor
        "arch": draw(st.sampled_from(["amd64", "amd64", "arm64"])),
        "managed": draw(st.sampled_from([None, None, "true", "false"])),
        "accels": draw(st.dictionaries(st.sampled_from(sorted(ACCELS)), st.integers(1, 2), max_size=2)),
        "zone": draw(st.sampled_from([False, False, False, True])),
        "stale": draw(st.booleans()),  # general.* / cpu-only labels left by an earlier render
        "deleting": draw(st.sampled_from([False] * 7 + [True])),
    } for i in range(count)]


def node_object(spec: dict[str, Any]) -> dict[str, Any]:
    vendor, cpu_name, family, _ = CPUS[spec["cpu"]]
    labels: dict[str, str] = {"kubernetes.io/os": "linux", "kubernetes.io/arch": spec["arch"],
                              "kubernetes.io/hostname": spec["name"],
                              "feature.gpustack.ai/acceleratable": "true" if spec["accels"] else "false"}
    if vendor:
        labels["feature.node.kubernetes.io/cpu-model.vendor_id"] = vendor
    if family:
        labels["feature.node.kubernetes.io/cpu-model.family"], labels["feature.node.kubernetes.io/cpu-model.id"] = family
    if spec["managed"] is not None:
        labels["gpustack.ai/managed"] = spec["managed"]
    for akey, n in spec["accels"].items():
        product, memory = ACCELS[akey]
        labels.update({AKEY + akey: "true", f"{AKEY}{akey}.count": str(n), f"{AKEY}{akey}.product": product,
                       f"{AKEY}{akey}.memory": memory})
    if spec["zone"]:
        labels.update({"topology.kubernetes.io/zone": "zone-a", PROFILE: ZONE_PROFILE})
    if spec["stale"]:
        labels.update({GENERAL + "stale-cpu": "true", GENERAL + "stale-cpu.count": "3", CPU_ONLY: "true"})
    annotations = {"feature.gpustack.ai/cpu-name": cpu_name} if cpu_name else {}
    capacity = {"cpu": str(spec["cpus"])} if spec["cpus"] else {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": _meta(spec["name"], spec["deleting"], labels=labels, annotations=annotations),
            "status": {"capacity": capacity}}


def candidate_names(specs: list[dict[str, Any]]) -> tuple[list[str], dict[str, dict[str, Any] | None]]:
    """Flavor names the nodes may produce (plus gone and foreign ones), and queue / InstanceType
    names: the derived pool names of both awareness modes with the spec a derived InstanceType of
    that pool has, plus custom names (spec None: drawn at random)."""
    flavors = set(GONE_FLAVORS) | {"default-flavor"}
    names: dict[str, dict[str, Any] | None] = {name: None for name in CUSTOM_NAMES}
    for s in specs:
        gkey, arch = CPUS[s["cpu"]][3], s["arch"]
        profile = ZONE_PROFILE if s["zone"] else HOSTNAME_PROFILE
        flavors.add(f"gpustack--{gkey}-linux-{arch}-{s['cpus']}c-{profile}")
        base = {"os": "linux", "arch": arch}
        names[f"gpustack--generic-linux-{arch}"] = {**base, "generalGroup": "generic", "acceleratable": False}
        names[f"gpustack--{gkey}-linux-{arch}"] = {**base, "generalGroup": gkey, "acceleratable": False}
        for akey, n in s["accels"].items():
            flavors.add(f"gpustack--{gkey}--{akey}-linux-{arch}-{n}d-{profile}")
            accel = {**base, "acceleratable": True, "acceleratorGroup": akey}
            names[f"gpustack--{akey}-linux-{arch}"] = {**accel, "generalGroup": "generic"}
            names[f"gpustack--{gkey}--{akey}-linux-{arch}"] = {**accel, "generalGroup": gkey}
    return sorted(flavors), dict(sorted(names.items()))


@st.composite
def instance_type(draw: st.DrawFn, name: str, derived: dict[str, Any] | None,
                  specs: list[dict[str, Any]]) -> dict[str, Any]:
    if derived is not None and draw(st.integers(0, 3)):  # mostly what a derived InstanceType would say
        spec = dict(derived)
        labels = {"schedule.gpustack.ai/derived-from-node": "true"}
    else:
        accelerated = draw(st.booleans())
        spec = {"os": "linux", "arch": draw(st.sampled_from(["amd64", "arm64"])), "acceleratable": accelerated,
                "generalGroup": draw(st.sampled_from(["", "generic"] + sorted({CPUS[s["cpu"]][3] for s in specs})))}
        if accelerated:
            spec["acceleratorGroup"] = draw(st.sampled_from(sorted(ACCELS)))
        labels = {}
    inactive = draw(st.sampled_from([None, False, False, True]))
    if inactive is not None:
        spec["inactive"] = inactive
    return {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType",
            "metadata": _meta(name, draw(st.sampled_from([False] * 4 + [True])), labels=labels), "spec": spec}


@st.composite
def cluster_queue(draw: st.DrawFn, name: str, flavors: list[str]) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    marker = draw(st.sampled_from(["", "", "empty-plan", "saved-None", "saved-Hold", "saved-unset",
                                   "saved-HoldAndDrain", "both"]))
    if marker in ("empty-plan", "both"):
        annotations[EMPTY_PLAN] = "true"
    if marker.startswith("saved-") or marker == "both":
        annotations[SAVED] = marker[len("saved-"):] if marker.startswith("saved-") else "None"
    if draw(st.sampled_from([False, False, False, True])):  # a Hold that came from spec.inactive
        annotations[INACTIVE_HOLD] = "true"
    spec: dict[str, Any] = {"namespaceSelector": {}}
    if draw(st.booleans()):
        resource = draw(st.sampled_from(["cpu", "credits.gpustack.ai/nvidia"]))
        picked = draw(st.lists(st.sampled_from(flavors), min_size=1, max_size=3, unique=True))
        spec["resourceGroups"] = [{"coveredResources": [resource], "flavors": [
            {"name": f, "resources": [{"name": resource, "nominalQuota": draw(st.sampled_from(["0", "4", "3200k", 16]))}]}
            for f in picked]}]
        annotations[TAS] = "true"
    policy = draw(st.sampled_from([None, "None", "Hold", "Hold", "HoldAndDrain", "HoldAndDrain"]))
    if policy:
        spec["stopPolicy"] = policy
    obj = {"apiVersion": draw(st.sampled_from(["kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1"])),
           "kind": "ClusterQueue",
           "metadata": _meta(name, draw(st.sampled_from([False] * 7 + [True])), annotations=annotations),
           "spec": spec}
    if draw(st.booleans()):
        obj["status"] = {"reservingWorkloads": draw(st.integers(0, 2)), "admittedWorkloads": draw(st.integers(0, 2))}
    return obj


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str]]:
    specs = draw(node_specs())
    flavors, pools = candidate_names(specs)
    names = list(pools)
    objects = [node_object(s) for s in specs]
    objects += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}, "status": {"phase": "Active"}}
                for ns in ("team-a", "gpustack-system")]
    typed = draw(st.lists(st.sampled_from(names), max_size=4, unique=True))
    for name in typed:
        objects.append(draw(instance_type(name, pools[name], specs)))
    # queues mostly of the InstanceTypes just drawn and of the derived pools, a few foreign ones
    queue_names = st.sampled_from(typed * 3 + names) if typed else st.sampled_from(names)
    for name in draw(st.lists(queue_names, max_size=5, unique=True)):
        objects.append(draw(cluster_queue(name, flavors)))
    for name in draw(st.lists(st.sampled_from(flavors), max_size=4, unique=True)):
        profile = name.rsplit("-", 2)[-2:] if name.startswith("gpustack--") else None
        topology = f"gpustack-{'-'.join(profile)}" if profile else ""
        if draw(st.sampled_from([False] * 5 + [True])):
            topology = "gpustack-fnv64-0000000000000000"  # a flavor Kueue must re-create
        objects.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": _meta(name),
                        "spec": {"topologyName": topology} if topology else {}})
    if draw(st.booleans()):
        objects.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                        "metadata": _meta("gpustack-" + ZONE_PROFILE),
                        "spec": {"levels": [{"nodeLabel": "topology.kubernetes.io/zone"},
                                            {"nodeLabel": "kubernetes.io/hostname"}]}})
    if draw(st.booleans()):
        objects.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
                        "metadata": _meta(draw(st.sampled_from(["gpustack-node-devices",
                                                                "gpustack-model-deployment-joint"]))),
                        "spec": {"controllerName": "example.com/whatever"},
                        "status": {"conditions": [{"type": "Active", "status": draw(st.sampled_from(["False", "True"]))}]}})
    sets = [f"{key}={str(draw(st.booleans())).lower()}" for key in SETTINGS]
    return objects, sets


# ------------------------------------------------------------------------------------------------
# Render and apply
# ------------------------------------------------------------------------------------------------


def _identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return obj["apiVersion"].rpartition("/")[0], obj["kind"], meta.get("namespace") or "", meta["name"]


class Render:
    def __init__(self, objects: list[dict[str, Any]], sets: list[str], workdir: Path, step: int) -> None:
        path = workdir / f"snapshot-{step}.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}), encoding="utf-8")
        # allow_empty: a drawn snapshot may have every Node being deleted; the empty chain is a fixed point too
        ctx = pipeline.prepare([str(path)], sets, None, allow_empty=True)
        self.objects = pipeline.render_objects(ctx, None)
        self.warnings = list(ctx.diagnostics.warnings)
        self.levels = list(ctx.rules.topology.levels)
        lifecycle_rules = {rule.name for rule in ctx.rules.lifecycle.stop_policy}
        assert RENDERER_HOLDS <= lifecycle_rules, f"lifecycle rules renamed? {sorted(lifecycle_rules)}"
        self.rule_of: dict[str, str] = {}
        records = ctx.records  # the recording evaluation: the lifecycle rule that decided each stopPolicy
        for queue in ctx.evaluation.plan.cluster_queues:
            decided = records.first(f"ClusterQueue/{queue.name}", "lifecycle")
            self.rule_of[queue.name] = str(decided.input("rule")) if decided is not None else ""

    def text(self, objects: list[dict[str, Any]] | None = None) -> str:
        objects = self.objects if objects is None else objects
        return format_objects(objects, "json") + format_objects(objects, "yaml")

    def backfill_warnings(self) -> dict[str, str]:
        out = {}
        for warning in self.warnings:
            found = re.match(r"ClusterQueue/([^:]+): .*back-fill", warning)
            if found:
                out[found.group(1)] = warning
        return out


def apply(snapshot: list[dict[str, Any]], render: Render) -> list[dict[str, Any]]:
    """The snapshot once ``render`` is applied and NFD / the topology controller have converged."""
    current = {_identity(o): copy.deepcopy(o) for o in snapshot}
    for obj in render.objects:
        if obj["kind"] not in APPLIED_KINDS:
            continue
        new = copy.deepcopy(obj)
        old = current.get(_identity(obj))
        if old is not None:  # what an apply does not own stays as the API server has it
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            for key in ("deletionTimestamp", "finalizers"):
                if key in old["metadata"]:
                    new["metadata"][key] = copy.deepcopy(old["metadata"][key])
        current[_identity(obj)] = new
    features = {o["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"]: o["spec"].get("labels") or {}
                for o in render.objects if o["kind"] == "NodeFeature"}
    computed_profile = profile_of_levels(render.levels)
    for obj in current.values():
        name = obj["metadata"]["name"]
        if obj["kind"] != "Node" or name not in features:
            continue
        labels = {k: v for k, v in (obj["metadata"].get("labels") or {}).items()
                  if not k.startswith(GENERAL) and k != CPU_ONLY}
        labels.update(features[name])
        if not labels.get(PROFILE):
            labels[PROFILE] = computed_profile
        obj["metadata"]["labels"] = labels
    return list(current.values())


def check_fixed_point(snapshot: list[dict[str, Any]], sets: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="lifecycle-fp-") as tmp:
        workdir = Path(tmp)
        first = Render(snapshot, sets, workdir, 1)
        applied = apply(snapshot, first)
        second = Render(applied, sets, workdir, 2)
        third = Render(apply(applied, second), sets, workdir, 3)

    created = [o for o in first.objects if o["kind"] == "InstanceType"]
    assert [o for o in second.objects if o["kind"] == "InstanceType"] == [], \
        "InstanceTypes are create-only: nothing to render once the first render's are applied"
    without_created = [o for o in first.objects if o["kind"] != "InstanceType"]
    assert second.text() == first.text(without_created), (
        f"render -> apply -> render changed the output (InstanceTypes created: {[o['metadata']['name'] for o in created]})")
    assert third.text() == second.text(), "the second render is not a fixed point"

    held = {name for name, rule in first.rule_of.items() if rule in RENDERER_HOLDS}
    wrongly_warned = {q: w for q, w in second.backfill_warnings().items() if q in held}
    assert not wrongly_warned, (f"the renderer's own holds read back as an admin's stop: "
                                f"{ {q: first.rule_of[q] for q in wrongly_warned} }")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(snapshots())
def test_render_apply_render_is_a_fixed_point(generated: tuple[list[dict[str, Any]], list[str]]) -> None:
    snapshot, sets = generated
    check_fixed_point(snapshot, sets)


# ------------------------------------------------------------------------------------------------
# Fixed examples (the interesting shapes, always run)
# ------------------------------------------------------------------------------------------------

L4_NODE = {"name": "node-l4", "cpu": "intel", "cpus": 32, "arch": "amd64", "managed": None,
           "accels": {"nvidia-l4": 2}, "zone": False, "stale": True, "deleting": False}
CPU_NODE = {"name": "node-cpu", "cpu": "amd", "cpus": 16, "arch": "amd64", "managed": None,
            "accels": {}, "zone": False, "stale": False, "deleting": False}
L4_FLAVOR = "gpustack--intel-xeon-gold-6338--nvidia-l4-linux-amd64-2d-" + HOSTNAME_PROFILE
L4_IT = {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType", "metadata": {"name": "team-l4"},
         "spec": {"acceleratable": True, "acceleratorGroup": "nvidia-l4", "os": "linux", "arch": "amd64"}}
DEFAULTS = [f"{key}={'false' if key == 'node-management-manual' or 'aware' in key else 'true'}" for key in SETTINGS]


def _queue(annotations: dict[str, str] | None = None, groups: bool = True, policy: str | None = None,
           workloads: int = 0, deleting: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"namespaceSelector": {}}
    if groups:
        spec["resourceGroups"] = [{"coveredResources": ["credits.gpustack.ai/nvidia"], "flavors": [
            {"name": L4_FLAVOR, "resources": [{"name": "credits.gpustack.ai/nvidia", "nominalQuota": "3200k"}]}]}]
    if policy:
        spec["stopPolicy"] = policy
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": _meta("team-l4", deleting, annotations=annotations or {}), "spec": spec,
            "status": {"reservingWorkloads": 0, "admittedWorkloads": workloads}}


def _inactive(it: dict[str, Any]) -> dict[str, Any]:
    it = copy.deepcopy(it)
    it["spec"]["inactive"] = True
    return it


FIXED = {
    "inactive-hold": ([node_object(CPU_NODE), node_object(L4_NODE), _inactive(L4_IT), _queue()], DEFAULTS),
    "empty-plan-hold": ([node_object(CPU_NODE), L4_IT, _queue(groups=False)], DEFAULTS),
    "drain-with-workloads": ([node_object(CPU_NODE), L4_IT, _queue(workloads=2)], DEFAULTS),
    "drain-no-workloads": ([node_object(CPU_NODE), L4_IT, _queue(policy="Hold")], DEFAULTS),
    "restore-after-drain": ([node_object(CPU_NODE), node_object(L4_NODE), L4_IT,
                             _queue({SAVED: "unset"}, groups=False, policy="HoldAndDrain")], DEFAULTS),
    "queue-deleting": ([node_object(L4_NODE), L4_IT, _queue(policy="Hold", deleting=True)], DEFAULTS),
    "drain-disabled": ([node_object(CPU_NODE), L4_IT, _queue(workloads=1)],
                       [s if "drain" not in s else "instance-type-drain-when-no-flavors=false" for s in DEFAULTS]),
}


@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_point_examples(name: str) -> None:
    snapshot, sets = FIXED[name]
    check_fixed_point(copy.deepcopy(snapshot), sets)


# ------------------------------------------------------------------------------------------------
# Every fixture case that renders (fixtures/cases/*/case.yaml) is a fixed point too
# ------------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "fixtures" / "cases"


def _read_objects(path: Path) -> list[dict[str, Any]]:
    """cli-contract.md: a directory is read recursively (*.yaml, *.yml, *.json); Lists (List, NodeList, ...) are unpacked."""
    files = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml", ".json")) if path.is_dir() else [path]
    out: list[dict[str, Any]] = []
    for file in files:
        for doc in yaml.load_all(file.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader):  # libyaml: same data
            if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
                out.extend(doc.get("items") or [])
            elif isinstance(doc, dict):
                out.append(doc)
    return out


def _render_cases() -> list[Path]:
    found = []
    for case in sorted(p for p in CASES.iterdir() if (p / "case.yaml").is_file()):
        spec = yaml.safe_load((case / "case.yaml").read_text(encoding="utf-8"))
        if spec.get("command", "render") == "render" and not spec.get("expectExitCode") and not spec.get("rules"):
            found.append(case)
    return found


@pytest.mark.parametrize("case", _render_cases(), ids=lambda p: p.name)
def test_fixture_case_is_a_fixed_point(case: Path) -> None:
    spec = yaml.safe_load((case / "case.yaml").read_text(encoding="utf-8"))
    snapshot = [obj for rel in spec["snapshot"] for obj in _read_objects(case / rel)]
    check_fixed_point(snapshot, list(spec.get("set") or []))


# ------------------------------------------------------------------------------------------------
# Regression: dropping finalizing flavors from kept groups must never leave a group without
# flavors (Kueue's CRD requires 1..64), and a queue left without any flavor must be held
# (stage4-chain.md §2.6). A drain with workloads keeps its groups verbatim (lifecycle rule).
# ------------------------------------------------------------------------------------------------

ZONE_NODE = {"name": "node-zone", "cpu": "amd", "cpus": 8, "arch": "amd64", "managed": None,
             "accels": {}, "zone": True, "stale": False, "deleting": False}
INT32 = "gpustack--intel-xeon-gold-6338-linux-amd64-32c-" + HOSTNAME_PROFILE


def _flavor(name: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"topologyName": "gpustack-" + HOSTNAME_PROFILE}}


def _cpu_queue_on(flavor: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "gpustack--generic-linux-amd64"},
            "spec": {"namespaceSelector": {}, "stopPolicy": "None", "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "32"}]}]}]}}


EMPTIED = {
    # node-l4 left with 2 Workloads still admitted: drain-while-workloads keeps the groups "verbatim",
    # then the finalizing L4 flavor is dropped from them -> flavors: [] (HoldAndDrain)
    "drain-with-workloads-and-its-flavor": [node_object(CPU_NODE), L4_IT, _queue(workloads=2), _flavor(L4_FLAVOR)],
    # the CPU plan is refused (MissingTopology: node-zone); the last good plan's only flavor is
    # finalizing -> flavors: [] and stopPolicy None (an un-held queue without flavors)
    "refused-last-good-plan-finalizing": [node_object(CPU_NODE), node_object(ZONE_NODE), _cpu_queue_on(INT32),
                                          _flavor(INT32)],
}


@pytest.mark.parametrize("name", sorted(EMPTIED))
def test_kept_groups_never_lose_all_flavors(name: str, tmp_path: Path) -> None:
    render = Render(copy.deepcopy(EMPTIED[name]), DEFAULTS, tmp_path, 1)
    for queue in (o for o in render.objects if o["kind"] == "ClusterQueue"):
        groups = queue["spec"].get("resourceGroups") or []
        assert all(group.get("flavors") for group in groups), \
            f"ClusterQueue/{queue['metadata']['name']}: a resource group without flavors: {groups}"
        if not groups:
            assert queue["spec"]["stopPolicy"] != "None", f"ClusterQueue/{queue['metadata']['name']}: no flavor, not held"


# ------------------------------------------------------------------------------------------------
# Transitions that need the queue's history (stage4-chain.md §2.6.1), walked step by step: render,
# apply, change one thing, render, apply, render once more (which must not change anything). At each
# step the queue team-l4 must show the expected stopPolicy and lifecycle annotations, and no renderer
# hold may read back as an admin's (back-fill warning) unless the step expects it.
# ------------------------------------------------------------------------------------------------

Objects = list[dict[str, Any]]
L4_ZONE_NODE = {**L4_NODE, "zone": True}  # its profile fnv64-f7b1... has no Topology until one is added
ZONE_TOPOLOGY = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "gpustack-" + ZONE_PROFILE},
                 "spec": {"levels": [{"nodeLabel": "topology.kubernetes.io/zone"}, {"nodeLabel": "kubernetes.io/hostname"}]}}


def set_inactive(value: bool) -> Any:
    def change(objects: Objects) -> Objects:
        for obj in objects:
            if obj["kind"] == "InstanceType" and obj["metadata"]["name"] == "team-l4":
                obj["spec"]["inactive"] = value
        return objects
    return change


def without_node(name: str) -> Any:
    return lambda objects: [o for o in objects if not (o["kind"] == "Node" and o["metadata"]["name"] == name)]


def with_objects(*new: dict[str, Any]) -> Any:
    return lambda objects: objects + [copy.deepcopy(o) for o in new]


def admin_hold(objects: Objects) -> Objects:
    """The admin sets Hold on the queue directly (kubectl patch): only spec.stopPolicy changes."""
    for obj in objects:
        if obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] == "team-l4":
            obj["spec"]["stopPolicy"] = "Hold"
    return objects


def _state(render: Render) -> tuple[str, dict[str, str], bool]:
    queue = next(o for o in render.objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "team-l4")
    annotations = {k: v for k, v in (queue["metadata"].get("annotations") or {}).items() if k != TAS}
    return queue["spec"]["stopPolicy"], annotations, "team-l4" in render.backfill_warnings()


HOLD_MARKED = ("Hold", {INACTIVE_HOLD: "true"}, False)
NONE = ("None", {}, False)
START = [node_object(CPU_NODE), node_object(L4_NODE), L4_IT]
# name -> (snapshot, [(what changes, change, expected (stopPolicy, annotations without tas-queue, back-fill warned))])
TRANSITIONS: dict[str, tuple[Objects, list[tuple[str, Any, tuple[str, dict[str, str], bool]]]]] = {
    "inactive-hold-and-release": (START, [
        ("first render", None, NONE),
        ("InstanceType inactive", set_inactive(True), HOLD_MARKED),
        ("InstanceType reactivated", set_inactive(False), NONE),
    ]),
    "admin-hold-stays": (START, [
        ("first render", None, NONE),
        ("admin sets Hold on the queue", admin_hold, ("Hold", {}, True)),
        ("InstanceType inactive (the back-fill)", set_inactive(True), HOLD_MARKED),
        ("InstanceType reactivated", set_inactive(False), NONE),
    ]),
    "drained-inactive-then-reactivated": (START, [
        ("InstanceType inactive", set_inactive(True), HOLD_MARKED),
        ("its flavors go", without_node("node-l4"), ("HoldAndDrain", {SAVED: "Hold", INACTIVE_HOLD: "true"}, False)),
        ("InstanceType reactivated while it waits", set_inactive(False), ("HoldAndDrain", {SAVED: "None"}, False)),
        ("flavors return", with_objects(node_object(L4_NODE)), NONE),
    ]),
    "drained-active-then-inactive": (START, [
        ("first render", None, NONE),
        ("its flavors go", without_node("node-l4"), ("HoldAndDrain", {SAVED: "None"}, False)),
        ("InstanceType inactive while it waits", set_inactive(True),
         ("HoldAndDrain", {SAVED: "Hold", INACTIVE_HOLD: "true"}, False)),
        ("flavors return", with_objects(node_object(L4_NODE)), HOLD_MARKED),
        ("InstanceType reactivated", set_inactive(False), NONE),
    ]),
    "drained-admin-hold-kept": (START, [
        ("admin sets Hold on the queue", lambda o: admin_hold(with_objects(_queue())(o)), ("Hold", {}, True)),
        ("its flavors go", without_node("node-l4"), ("HoldAndDrain", {SAVED: "Hold"}, False)),
        ("InstanceType inactive while it waits", set_inactive(True), ("HoldAndDrain", {SAVED: "Hold"}, False)),
        ("InstanceType reactivated while it waits", set_inactive(False), ("HoldAndDrain", {SAVED: "Hold"}, False)),
        ("flavors return", with_objects(node_object(L4_NODE)), ("Hold", {}, True)),
    ]),
    "refused-return-keeps-saved": (START, [
        ("admin sets Hold on the queue", lambda o: admin_hold(with_objects(_queue())(o)), ("Hold", {}, True)),
        ("its flavors go", without_node("node-l4"), ("HoldAndDrain", {SAVED: "Hold"}, False)),
        ("a Node returns whose profile has no Topology (refused)", with_objects(node_object(L4_ZONE_NODE)),
         ("HoldAndDrain", {SAVED: "Hold"}, False)),
        ("the Topology is added (plan applied)", with_objects(ZONE_TOPOLOGY), ("Hold", {}, True)),
    ]),
    "refused-return-of-active-queue": (START, [
        ("first render", None, NONE),
        ("its flavors go", without_node("node-l4"), ("HoldAndDrain", {SAVED: "None"}, False)),
        ("a Node returns whose profile has no Topology (refused)", with_objects(node_object(L4_ZONE_NODE)),
         ("HoldAndDrain", {SAVED: "None"}, False)),
        ("the Topology is added (plan applied)", with_objects(ZONE_TOPOLOGY), NONE),
    ]),
}


def walk(snapshot: Objects, steps: list[tuple[str, Any, Any]], workdir: Path) -> list[tuple[str, Any]]:
    """Each step: change, render, apply, render again (must be unchanged). Returns the states seen."""
    seen = []
    current = copy.deepcopy(snapshot)
    for i, (what, change, _) in enumerate(steps):
        if change is not None:
            current = change(current)
        first = Render(current, DEFAULTS, workdir, 2 * i)
        current = apply(current, first)
        again = Render(current, DEFAULTS, workdir, 2 * i + 1)
        without_created = [o for o in first.objects if o["kind"] != "InstanceType"]
        assert again.text() == first.text(without_created), f"step '{what}': render -> apply -> render changed the output"
        state = _state(first)
        seen.append((what, (state[0], state[1], _state(again)[2])))
    return seen


@pytest.mark.parametrize("name", sorted(TRANSITIONS))
def test_lifecycle_transitions(name: str, tmp_path: Path) -> None:
    snapshot, steps = TRANSITIONS[name]
    seen = walk(snapshot, steps, tmp_path)
    assert seen == [(what, expected) for what, _, expected in steps]
