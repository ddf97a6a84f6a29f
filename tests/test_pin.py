"""The Workload fit pin (fit-pin.md), in process: resource classes, the demand parser, term merging,
which Workloads are pinned, and idempotence (a property test).

Every expectation is derived by hand from fit-pin.md; the section is named next to each table.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import msgspec
import pytest
from budget import Branches, budget
from hypothesis import given
from hypothesis import strategies as st

from gpustack_render.errors import UserError
from gpustack_render.pin import QueueChain, merge_into, pin_keys, pin_workload, requirements
from gpustack_render.pin.demand import (EXCLUSIVE, INT32_MAX, SHARED_CARDS, SLICED_CARD, SLICED_UNITS, Demand,
                                        Container, ResourceClassifier, podset_demand)
from gpustack_render.pin.workloads import read_workloads
from gpustack_render.rules import load_rules
from gpustack_render.snapshot import workload_model

RULES = load_rules()
CLASSIFIER = ResourceClassifier(RULES)
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
SL = "sliced-max-free-units.fit.gpustack.ai/"
SH = "shared-free-cards.fit.gpustack.ai/"
QUEUE = "gpustack-fnv64-0123456789abcdef"


# --------------------------------------------------------------------------------------------------
# §3 resource classes: from the manufacturers' bases and rules/capacity.yaml, never a table in code
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("nvidia.com/gpu.sliced", SLICED_CARD),
    ("nvidia.com/gpu.sliced.units", SLICED_UNITS),
    ("nvidia.com/gpu.shared", SHARED_CARDS),
    ("nvidia.com/gpu", EXCLUSIVE),
    ("huawei.com/npu.sliced.units", SLICED_UNITS),          # every manufacturer base of the rules
    ("alibabacloud.com/ppu.shared", SHARED_CARDS),
    ("metax-tech.com/gpu.sliced", SLICED_CARD),
    ("nvidia.com/gpu.partitioned", "partitioned"),
    ("nvidia.com/gpu.partitioned.units", "partitioned"),
    ("nvidia.com/gpu.partitioned.mig-1g.10gb", "partitioned"),
    ("nvidia.com/gpu.sliced.memory-percentage", "sliced"),   # sliced, but not part of the demand
    ("nvidia.com/gpu.sliced.memory-mib", "sliced"),
    ("nvidia.com/gpu.sliced.cores-percentage", "sliced"),
    ("cpu", None),
    ("memory", None),
    ("example.com/foo.sliced.units", None),                  # unknown base
    ("nvidia.com/gpux.shared", None),
    ("nvidia.com/gpu.shared.extra", None),
])
def test_resource_classes(name: str, expected: str | None) -> None:
    assert CLASSIFIER.classify(name) == expected


def test_classes_follow_the_rules(tmp_path: Path) -> None:
    """A manufacturer added in the rules is recognised; a renamed suffix moves the class (no code table)."""
    import shutil
    rules_dir = tmp_path / "rules"
    shutil.copytree(Path(__file__).resolve().parents[1] / "rules", rules_dir)
    manus = rules_dir / "manufacturers.yaml"
    manus.write_text(manus.read_text() + "  - name: kunlunxin\n    resourceBase: kunlunxin.com/xpu\n")
    cap = rules_dir / "capacity.yaml"
    cap.write_text(cap.read_text().replace('sharedCards: "{base}.shared"', 'sharedCards: "{base}.share"'))
    classifier = ResourceClassifier(load_rules(rules_dir))
    assert classifier.classify("kunlunxin.com/xpu.sliced.units") == SLICED_UNITS
    assert classifier.classify("nvidia.com/gpu.share") == SHARED_CARDS
    assert classifier.classify("nvidia.com/gpu.shared") is None


def test_workload_fit_rules_are_checked(tmp_path: Path) -> None:
    import shutil
    rules_dir = tmp_path / "rules"
    shutil.copytree(Path(__file__).resolve().parents[1] / "rules", rules_dir)
    cap = rules_dir / "capacity.yaml"
    cap.write_text(cap.read_text().replace('sharedCards: "{base}.shared"', 'sharedCards: "{base}.sliced"'))
    with pytest.raises(UserError) as err:
        load_rules(rules_dir)
    assert "workloadFit.sharedCards" in str(err.value) and "already used" in str(err.value)
    cap.write_text(cap.read_text().replace('sharedCards: "{base}.sliced"', 'sharedCards: "{bass}.shared"'))
    with pytest.raises(UserError) as err:
        load_rules(rules_dir)
    assert "unknown placeholder 'bass'" in str(err.value)


# --------------------------------------------------------------------------------------------------
# §3 demand: U and N per Pod
# --------------------------------------------------------------------------------------------------

def _container(limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": "c", "image": "i", "resources": resources}


def demand(*containers: dict[str, Any]) -> Demand:
    parsed = [Container(("c", i), msgspec.convert(c, workload_model.Container).requests) for i, c in enumerate(containers)]
    return podset_demand(parsed, CLASSIFIER)


G = "nvidia.com/gpu"
DEMAND_CASES: list[tuple[str, list[dict[str, Any]], tuple[int, int]]] = [
    ("the spec example: a 50 % slice", [_container({f"{G}.sliced": 1, f"{G}.sliced.units": "800000"})], (800000, 0)),
    ("units without a .sliced card: U = 0", [_container({f"{G}.sliced.units": 800000})], (0, 0)),
    ("a .sliced card without units: U = 0", [_container({f"{G}.sliced": 1})], (0, 0)),
    ("the card in one container, units in another", [_container({f"{G}.sliced": 1}),
                                                     _container({f"{G}.sliced.units": 300000})], (300000, 0)),
    ("U is the largest units value", [_container({f"{G}.sliced": 1, f"{G}.sliced.units": 400000}),
                                      _container({f"{G}.sliced": 1, f"{G}.sliced.units": 600000})], (600000, 0)),
    ("requests win over limits", [_container({f"{G}.sliced": 1, f"{G}.sliced.units": 1600000},
                                             {f"{G}.sliced.units": "400k"})], (400000, 0)),
    ("limits and requests merge", [_container({f"{G}.sliced": 1}, {f"{G}.sliced.units": 500000})], (500000, 0)),
    ("a request of 0 cards is no card", [_container({f"{G}.sliced": 0, f"{G}.sliced.units": 800000})], (0, 0)),
    ("a fractional card still asks", [_container({f"{G}.sliced": "500m", f"{G}.sliced.units": 10})], (10, 0)),
    ("fractional units round up", [_container({f"{G}.sliced": 1, f"{G}.sliced.units": "0.5"})], (1, 0)),
    ("units clamp to int32", [_container({f"{G}.sliced": 1, f"{G}.sliced.units": "1e12"})], (INT32_MAX, 0)),
    ("negative units clamp to 0", [_container({f"{G}.sliced": 1, f"{G}.sliced.units": "-5"})], (0, 0)),
    ("any base: the key uses the queue's group", [_container({"huawei.com/npu.sliced": 1}),
                                                  _container({f"{G}.sliced.units": 7})], (7, 0)),
    ("N: one container with 2 shared cards", [_container({f"{G}.shared": 2})], (0, 2)),
    ("N is a max, not a sum", [_container({f"{G}.shared": 2}), _container({f"{G}.shared": 2})], (0, 2)),
    ("N = 1 is kept but does not pin", [_container({f"{G}.shared": 1})], (0, 1)),
    ("N: requests over limits", [_container({f"{G}.shared": 4}, {f"{G}.shared": 2})], (0, 2)),
    ("N: fractional rounds up", [_container({f"{G}.shared": "1.5"})], (0, 2)),
    ("N: <= 0 counts as 0", [_container({f"{G}.shared": "-3"})], (0, 0)),
    ("N clamps to int32", [_container({f"{G}.shared": "3E"})], (0, INT32_MAX)),
    ("exclusive never pins", [_container({G: 4})], (0, 0)),
    ("partitioned never pins", [_container({f"{G}.partitioned": 1, f"{G}.partitioned.units": 800000,
                                            f"{G}.partitioned.mig-1g.10gb": 1})], (0, 0)),
    ("sliced memory/cores do not enter", [_container({f"{G}.sliced": 1, f"{G}.sliced.memory-mib": 9000,
                                                      f"{G}.sliced.memory-percentage": 50,
                                                      f"{G}.sliced.cores-percentage": 50})], (0, 0)),
    ("unknown bases and cpu are ignored", [_container({"example.com/foo.sliced": 1,
                                                       "example.com/foo.sliced.units": 5, "cpu": "2",
                                                       "example.com/foo.shared": 5})], (0, 0)),
    ("both U and N", [_container({f"{G}.sliced": 1, f"{G}.sliced.units": 100000, f"{G}.shared": 3})], (100000, 3)),
    ("no resources", [{"name": "c", "image": "i"}], (0, 0)),
    ("no containers", [], (0, 0)),
]


@pytest.mark.parametrize("label, containers, expected", DEMAND_CASES, ids=[c[0] for c in DEMAND_CASES])
def test_demand(label: str, containers: list[dict[str, Any]], expected: tuple[int, int]) -> None:
    got = demand(*containers)
    assert (got.units, got.shared) == expected
    assert got.pins == (expected[0] > 0 or expected[1] >= 2)


def _workload(podsets: list[dict[str, Any]], queue: str | None = QUEUE, namespace: str = "team-a",
              name: str = "w") -> dict[str, Any]:
    spec: dict[str, Any] = {"podSets": podsets}
    if queue is not None:
        spec["queueName"] = queue
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _podset(name: str = "main", count: int = 1, init: list[dict[str, Any]] | None = None,
            containers: list[dict[str, Any]] | None = None, affinity: Any = "absent") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers if containers is not None else [_container()]}
    if init is not None:
        spec["initContainers"] = init
    if affinity != "absent":
        spec["affinity"] = affinity
    return {"name": name, "count": count, "template": {"spec": spec}}


def _read(tmp_path: Path, *objects: dict[str, Any]) -> list[Any]:
    path = tmp_path / f"w{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))
    return read_workloads([str(path)], CLASSIFIER)


def test_init_containers_count_per_container(tmp_path: Path) -> None:
    """Init containers enter U and N like app containers: N is the largest single container."""
    ps = _podset(init=[_container({f"{G}.shared": 3})], containers=[_container({f"{G}.shared": 2}),
                                                                     _container({f"{G}.shared": 2})])
    (w,) = _read(tmp_path, _workload([ps]))
    assert w.podsets[0].demand == Demand(0, 3)
    ps = _podset(init=[_container({f"{G}.sliced": 1})], containers=[_container({f"{G}.sliced.units": 9})])
    (w,) = _read(tmp_path, _workload([ps]))
    assert w.podsets[0].demand == Demand(9, 0)


def test_count_does_not_scale(tmp_path: Path) -> None:
    """Per Pod: count 8 or count 0 give the same demand (count 0 is still pinned)."""
    base = [_container({f"{G}.shared": 2})]
    (a, b) = _read(tmp_path, _workload([_podset(count=8, containers=base)], name="a"),
                   _workload([_podset(count=0, containers=base)], name="b"))
    assert a.podsets[0].demand == b.podsets[0].demand == Demand(0, 2)


# --------------------------------------------------------------------------------------------------
# §2 requirements and merging into the required node affinity
# --------------------------------------------------------------------------------------------------

KEYS = (SL + "nvidia-l4", SH + "nvidia-l4")
R_U = {"key": SL + "nvidia-l4", "operator": "Gt", "values": ["799999"]}
R_N = {"key": SH + "nvidia-l4", "operator": "Gt", "values": ["2"]}
ZONE = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
FIELD = {"key": "metadata.name", "operator": "In", "values": ["n1"]}


def test_requirements() -> None:
    assert requirements(800000, 0, KEYS) == [R_U]
    assert requirements(0, 3, KEYS) == [R_N]
    assert requirements(800000, 3, KEYS) == [R_U, R_N]  # sliced first, then shared
    assert requirements(1, 2, KEYS) == [{**R_U, "values": ["0"]}, {**R_N, "values": ["1"]}]
    assert requirements(0, 1, KEYS) == []
    assert pin_keys(RULES, "nvidia-l4") == KEYS


def _required(*terms: Any) -> dict[str, Any]:
    return {"nodeAffinity": {REQ: {"nodeSelectorTerms": list(terms)}}}


MERGE_CASES: list[tuple[str, Any, list[dict[str, Any]], Any, int]] = [
    # (label, affinity before ("absent" = no key), requirements, affinity after, number of ops)
    ("no affinity: one term", "absent", [R_U], _required({"matchExpressions": [R_U]}), 1),
    ("affinity null", None, [R_U, R_N], _required({"matchExpressions": [R_U, R_N]}), 1),
    ("other affinity parts untouched", {"podAffinity": {"x": 1}},
     [R_U], {"podAffinity": {"x": 1}, **_required({"matchExpressions": [R_U]})}, 1),
    ("preferred node terms untouched", {"nodeAffinity": {"preferred": [1]}},
     [R_U], {"nodeAffinity": {"preferred": [1], REQ: {"nodeSelectorTerms": [{"matchExpressions": [R_U]}]}}}, 1),
    ("zero terms stay", _required(), [R_U], _required(), 0),
    ("required without nodeSelectorTerms stays", {"nodeAffinity": {REQ: {}}}, [R_U], {"nodeAffinity": {REQ: {}}}, 0),
    ("every non-empty term gets it", _required({"matchExpressions": [ZONE]}, {"matchExpressions": [FIELD]}),
     [R_U], _required({"matchExpressions": [ZONE, R_U]}, {"matchExpressions": [FIELD, R_U]}), 2),
    ("a matchFields-only term gains matchExpressions", _required({"matchFields": [FIELD]}),
     [R_U, R_N], _required({"matchFields": [FIELD], "matchExpressions": [R_U, R_N]}), 1),
    ("empty terms stay empty", _required({}, {"matchExpressions": [], "matchFields": []}, None,
                                         {"matchExpressions": [ZONE]}),
     [R_U], _required({}, {"matchExpressions": [], "matchFields": []}, None, {"matchExpressions": [ZONE, R_U]}), 1),
    ("empty matchExpressions next to matchFields", _required({"matchExpressions": [], "matchFields": [FIELD]}),
     [R_U], _required({"matchExpressions": [R_U], "matchFields": [FIELD]}), 1),
    ("identical requirement not added twice", _required({"matchExpressions": [R_U]}), [R_U],
     _required({"matchExpressions": [R_U]}), 0),
    ("a stricter requirement on the key is kept, the pin added",
     _required({"matchExpressions": [{**R_U, "values": ["1000000"]}]}), [R_U],
     _required({"matchExpressions": [{**R_U, "values": ["1000000"]}, R_U]}), 1),
    ("only the missing one of two", _required({"matchExpressions": [R_N, ZONE]}), [R_U, R_N],
     _required({"matchExpressions": [R_N, ZONE, R_U]}), 1),
    ("other operator on the same key is not identical", _required({"matchExpressions": [{**R_U, "operator": "Lt"}]}),
     [R_U], _required({"matchExpressions": [{**R_U, "operator": "Lt"}, R_U]}), 1),
]


@pytest.mark.parametrize("label, before, reqs, after, n_ops", MERGE_CASES, ids=[c[0] for c in MERGE_CASES])
def test_merge(label: str, before: Any, reqs: list[dict[str, Any]], after: Any, n_ops: int) -> None:
    pod: dict[str, Any] = {"containers": [{"name": "c"}]}
    if before != "absent":
        pod["affinity"] = copy.deepcopy(before)
    doc = {"spec": {"podSets": [{"template": {"spec": copy.deepcopy(pod)}}]}}
    ops = merge_into(doc["spec"]["podSets"][0]["template"]["spec"], reqs, "/spec/podSets/0/template/spec")
    assert doc["spec"]["podSets"][0]["template"]["spec"] == {"containers": [{"name": "c"}], "affinity": after}
    assert len(ops) == n_ops
    assert all(op["path"].startswith("/spec/podSets/0/template/spec/affinity") for op in ops)
    original = {"spec": {"podSets": [{"template": {"spec": pod}}]}}
    assert jsonpatch.apply_patch(original, ops) == doc


# --------------------------------------------------------------------------------------------------
# §1 which Workloads are pinned (the chain built by hand)
# --------------------------------------------------------------------------------------------------

def _chain(group: str | None = "nvidia-l4", cq_labels: dict[str, str] | None = None) -> QueueChain:
    return QueueChain(local_queues={("team-a", QUEUE): "cq"},
                      cluster_queues={"cq": cq_labels if cq_labels is not None
                                      else {"resource.gpustack.ai/type": "instancetypes"}},
                      instance_types={"cq": group})


SLICE = [_container({f"{G}.sliced": 1, f"{G}.sliced.units": "800000"})]
ON = {"workload-fit-affinity": True}


@pytest.mark.parametrize("label, workload, chain, settings_, note", [
    ("no queue name", _workload([_podset(containers=SLICE)], queue=None), _chain(), ON, "no spec.queueName"),
    ("foreign queue", _workload([_podset(containers=SLICE)], queue="research"), _chain(), ON,
     "queue research is not an operator queue"),
    ("foreign queue is checked before the setting", _workload([_podset(containers=SLICE)], queue="research"),
     _chain(), {"workload-fit-affinity": False}, "queue research is not an operator queue"),
    ("no demand", _workload([_podset(containers=[_container({G: 1})])]), _chain(), ON, "no PodSet has a demand"),
    ("demand before the setting", _workload([_podset()]), _chain(), {"workload-fit-affinity": False},
     "no PodSet has a demand"),
    ("setting off", _workload([_podset(containers=SLICE)]), _chain(), {"workload-fit-affinity": False},
     "setting workload-fit-affinity is false"),
    ("no LocalQueue", _workload([_podset(containers=SLICE)], namespace="team-b"), _chain(), ON,
     f"LocalQueue team-b/{QUEUE} does not exist"),
    ("ClusterQueue not an InstanceType queue", _workload([_podset(containers=SLICE)]), _chain(cq_labels={}), ON,
     "ClusterQueue cq is not labelled resource.gpustack.ai/type=instancetypes"),
    ("CPU InstanceType", _workload([_podset(containers=SLICE)]), _chain(group=""), ON,
     "InstanceType cq has no spec.acceleratorGroup"),
    ("invalid group", _workload([_podset(containers=SLICE)]), _chain(group="Bad Group"), ON,
     "accelerator group 'Bad Group' gives the invalid label key"),
    ("group too long for a label name", _workload([_podset(containers=SLICE)]), _chain(group="n" * 64), ON,
     f"gives the invalid label key '{SL}{'n' * 64}': its name part is 64 characters, over 63"),
    ("group with a slash", _workload([_podset(containers=SLICE)]), _chain(group="a/b"), ON,
     "the group holds a '/', and a label key has at most one"),
    ("group with a space", _workload([_podset(containers=SLICE)]), _chain(group="Bad Group"), ON,
     "its name part must be alphanumerics, '-', '_' or '.', alphanumeric at both ends"),
])
def test_left_alone(tmp_path: Path, label: str, workload: dict[str, Any], chain: QueueChain,
                    settings_: dict[str, bool], note: str) -> None:
    (w,) = _read(tmp_path, workload)
    result = pin_workload(w, RULES, chain, settings_)
    assert note in result.note
    assert result.patch == [] and result.pinned == workload


@pytest.mark.parametrize("namespace, chain, why", [
    # the snapshot's live Namespaces are team-a and gpustack-system; the rules reserve gpustack-system
    ("team-b", QueueChain(namespaces=frozenset({"team-a", "gpustack-system"}), rendered_local_queues=frozenset({QUEUE})),
     "the snapshot has no live Namespace team-b, and LocalQueues are rendered only in the snapshot's Namespaces"),
    ("gpustack-system", QueueChain(namespaces=frozenset({"team-a", "gpustack-system"}),
                                   rendered_local_queues=frozenset({QUEUE})),
     "namespace gpustack-system is reserved (rules of kind Namespaces), so no LocalQueue is rendered there"),
    ("team-a", QueueChain(namespaces=frozenset({"team-a"}), rendered_local_queues=frozenset({"gpustack-fnv64-other"})),
     f"no rendered ClusterQueue has a LocalQueue named {QUEUE}"),
])
def test_missing_local_queue_says_why(tmp_path: Path, namespace: str, chain: QueueChain, why: str) -> None:
    """The note names the reason the render made no LocalQueue there, so the admin knows the fix."""
    (w,) = _read(tmp_path, _workload([_podset(containers=SLICE)], namespace=namespace))
    assert pin_workload(w, RULES, chain, ON).note == (
        f"LocalQueue {namespace}/{QUEUE} does not exist (neither rendered nor in the snapshot): {why}")


def test_chain_missing_links(tmp_path: Path) -> None:
    (w,) = _read(tmp_path, _workload([_podset(containers=SLICE)]))
    chain = QueueChain(local_queues={("team-a", QUEUE): "gone"})
    assert pin_workload(w, RULES, chain, ON).note == "ClusterQueue gone (of LocalQueue team-a/" + QUEUE + ") does not exist"
    chain = QueueChain(local_queues={("team-a", QUEUE): None})
    assert "has no spec.clusterQueue" in pin_workload(w, RULES, chain, ON).note
    chain = QueueChain(local_queues={("team-a", QUEUE): "cq"},
                       cluster_queues={"cq": {"resource.gpustack.ai/type": "instancetypes"}})
    assert pin_workload(w, RULES, chain, ON).note == "InstanceType cq (of ClusterQueue cq) does not exist"


def test_pinned_multi_podset(tmp_path: Path) -> None:
    """Each PodSet with a demand gets its own requirements; a PodSet without one is untouched."""
    workload = _workload([
        _podset("driver", containers=[_container({"cpu": "1"})]),
        _podset("workers", containers=[_container({f"{G}.sliced": 1, f"{G}.sliced.units": 400000}),
                                       _container({f"{G}.shared": 3})]),
        _podset("shards", containers=[_container({f"{G}.shared": 2})],
                affinity=_required({"matchExpressions": [ZONE]}, {})),
    ])
    (w,) = _read(tmp_path, workload)
    result = pin_workload(w, RULES, _chain(), ON)
    assert result.note == "" and result.group == "nvidia-l4"
    pods = [p["template"]["spec"] for p in result.pinned["spec"]["podSets"]]
    assert "affinity" not in pods[0]
    assert pods[1]["affinity"] == _required({"matchExpressions": [{**R_U, "values": ["399999"]}, R_N]})
    assert pods[2]["affinity"] == _required({"matchExpressions": [ZONE, {**R_N, "values": ["1"]}]}, {})
    assert [p.index for p in result.podsets] == [1, 2]
    assert jsonpatch.apply_patch(workload, result.patch) == result.pinned
    again = pin_workload(_read(tmp_path, result.pinned)[0], RULES, _chain(), ON)
    assert again.patch == [] and again.pinned == result.pinned and again.note == "already pinned; nothing to add"


def test_key_uses_the_queue_group_whatever_the_base(tmp_path: Path) -> None:
    (w,) = _read(tmp_path, _workload([_podset(containers=[_container({"huawei.com/npu.shared": 2})])]))
    result = pin_workload(w, RULES, _chain(group="nvidia-l4"), ON)
    assert result.pinned["spec"]["podSets"][0]["template"]["spec"]["affinity"] == \
        _required({"matchExpressions": [{**R_N, "values": ["1"]}]})


# --------------------------------------------------------------------------------------------------
# Bad input (exit 2 material): named object and field
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("obj, fragments", [
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "x"}}, ["Pod/x/p", "not a Kueue Workload"]),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q"}},
     ["holds no Kueue Workload, only snapshot objects (LocalQueue: 1)", "goes after --snapshot"]),
    ({"apiVersion": "example.com/v1", "kind": "Workload", "metadata": {"name": "q"}}, ["not a Kueue Workload"]),
    (_workload([{"name": "a", "count": 1}]), ["Workload/team-a/w", "spec.podSets[0].template", "needs a template"]),
    (_workload([{"name": "a", "template": {}}]), ["spec.podSets[0].template.spec"]),
    (_workload([_podset(containers=[_container({"cpu": "two"})])]),
     ["spec.podSets[0].template.spec.containers[0].resources.limits.cpu", '"two" is not a valid quantity']),
    (_workload([_podset(init=[_container(None, {f"{G}.shared": [1]})])]),
     ["spec.podSets[0].template.spec.initContainers[0].resources.requests.nvidia.com/gpu.shared"]),
    (_workload([_podset(affinity={"nodeAffinity": {REQ: {"nodeSelectorTerms": {"a": 1}}}})]),
     ["affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", "expected a list"]),
    ({**_workload([]), "spec": None}, ["spec", "required field is missing"]),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {}}, ["metadata.name"]),
])
def test_bad_input(tmp_path: Path, obj: dict[str, Any], fragments: list[str]) -> None:
    with pytest.raises(UserError) as err:
        _read(tmp_path, obj)
    text = str(err.value)
    assert all(f in text for f in fragments), text


def test_snapshot_file_as_workload_is_one_problem(tmp_path: Path) -> None:
    """A file of snapshot objects given as WORKLOAD: one problem for the file that says where it goes,
    not one "not a Kueue Workload" per object. A file that also holds a Workload is checked object by object."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    with pytest.raises(UserError) as err:
        _read(tmp_path, node, {**node, "metadata": {"name": "m"}}, ns)
    (problem,) = err.value.problems
    assert problem.message.startswith("holds no Kueue Workload, only snapshot objects (Namespace: 1, Node: 2); ")
    assert problem.obj == "" and problem.file.endswith(".json")
    with pytest.raises(UserError) as err:
        _read(tmp_path, node, _workload([_podset(containers=SLICE)]))
    assert [p.message for p in err.value.problems] == [
        "not a Kueue Workload (apiVersion 'v1', kind 'Node'); pin reads only kueue.x-k8s.io Workloads"]


def test_workload_list_items_inherit_kind(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadList\nitems:\n"
                    "- metadata: {name: a}\n  spec: {podSets: []}\n")
    (w,) = read_workloads([str(path)], CLASSIFIER)
    assert (w.namespace, w.name, w.obj["kind"]) == ("default", "a", "Workload")


# --------------------------------------------------------------------------------------------------
# Property: pinning is idempotent, the patch reproduces the result, nothing outside affinity moves
# --------------------------------------------------------------------------------------------------

_names = st.sampled_from([f"{G}.sliced", f"{G}.sliced.units", f"{G}.shared", G, "huawei.com/npu.sliced",
                          "huawei.com/npu.shared", "cpu", f"{G}.sliced.memory-mib", "example.com/x.shared"])
_quantity = st.one_of(st.integers(-3, 3_000_000), st.sampled_from(["0.5", "1.5", "400k", "2", "1e12", "-1", "3"]))
_resources = st.dictionaries(_names, _quantity, max_size=4)
_container_st = st.builds(lambda lim, req: _container(lim or None, req or None), _resources, _resources)
_expr = st.sampled_from([ZONE, R_U, R_N, {**R_U, "values": ["5"]}, {**R_N, "values": ["0"]},
                         {**R_U, "values": ["0"]}, {**R_N, "values": ["1"]}])
# The budget must draw every affinity shape (tests/budget.py); a term shape sits two choices deeper
# and is drawn a few times per hundred examples, so every one is also in the deterministic table
# below (TERM_SHAPES), in every run.
SHAPES = Branches()
TERMS = Branches()
_term = TERMS.one_of(
    term_empty=st.just({}), term_null=st.none(),
    term_expressions=st.builds(lambda e: {"matchExpressions": e}, st.lists(_expr, max_size=3)),
    term_fields_and_expressions=st.builds(lambda e: {"matchFields": [FIELD], "matchExpressions": e},
                                          st.lists(_expr, max_size=2)),
    term_fields=st.just({"matchFields": [FIELD]}),
)
_affinity = SHAPES.one_of(
    absent=st.just("absent"), null=st.none(), empty=st.just({}), anti_affinity=st.just({"podAntiAffinity": {"x": 1}}),
    empty_node_affinity=st.just({"nodeAffinity": {}}), empty_required=st.just({"nodeAffinity": {REQ: {}}}),
    required=st.builds(lambda terms: _required(*terms), st.lists(_term, max_size=4)),
)
_podset_st = st.builds(lambda init, cs, aff, n: _podset(f"p{n}", init=init or None, containers=cs, affinity=aff),
                       st.lists(_container_st, max_size=2), st.lists(_container_st, max_size=3), _affinity,
                       st.integers(0, 9))


SLICE_LIMITS = {f"{G}.sliced": 1, f"{G}.sliced.units": "800000"}
TERM_SHAPES: dict[str, Any] = {
    "term_empty": {}, "term_null": None, "term_expressions": {"matchExpressions": [ZONE, R_U]},
    "term_fields_and_expressions": {"matchFields": [FIELD], "matchExpressions": [R_N]},
    "term_fields": {"matchFields": [FIELD]},
}


def test_the_term_table_names_every_term_shape() -> None:
    assert set(TERM_SHAPES) == set(TERMS.names)


@pytest.mark.parametrize("group", ["nvidia-l4", "ascend-910b"])
@pytest.mark.parametrize("shape", sorted(TERM_SHAPES))
def test_pinning_is_idempotent_for_every_term_shape(tmp_path: Path, shape: str, group: str) -> None:
    """Deterministic: each term shape alone, beside another term, and in a podset without demand."""
    term = TERM_SHAPES[shape]
    podsets = [_podset("p0", containers=[_container(SLICE_LIMITS)], affinity=_required(term)),
               _podset("p1", containers=[_container(SLICE_LIMITS)], affinity=_required({"matchExpressions": [ZONE]}, term)),
               _podset("p2", containers=[_container()], affinity=_required(term))]
    _pinning_is_idempotent(tmp_path, podsets, group)


def test_pinning_is_idempotent(tmp_path: Path) -> None:
    SHAPES.seen.clear()

    @budget(100, 300)
    @given(podsets=st.lists(_podset_st, min_size=1, max_size=4), group=st.sampled_from(["nvidia-l4", "ascend-910b"]))
    def check(podsets: list[dict[str, Any]], group: str) -> None:
        _pinning_is_idempotent(tmp_path, podsets, group)
    check()
    SHAPES.assert_all_drawn()


def _pinning_is_idempotent(tmp_path: Path, podsets: list[dict[str, Any]], group: str) -> None:
    workload = json.loads(json.dumps(_workload(podsets)))  # the generator shares objects (like YAML aliases)
    (w,) = _read(tmp_path, workload)
    first = pin_workload(w, RULES, _chain(group=group), ON)
    assert jsonpatch.apply_patch(workload, first.patch) == first.pinned
    for op in first.patch:
        assert op["op"] == "add"
        index = int(op["path"].split("/")[3])
        assert op["path"].startswith(f"/spec/podSets/{index}/template/spec/affinity")
    for before, after in zip(workload["spec"]["podSets"], first.pinned["spec"]["podSets"]):
        strip = [{k: v for k, v in p["template"]["spec"].items() if k != "affinity"} for p in (before, after)]
        assert strip[0] == strip[1]
    (again,) = _read(tmp_path, first.pinned)
    second = pin_workload(again, RULES, _chain(group=group), ON)
    assert second.patch == [] and second.pinned == first.pinned
    any_demand = any(p.demand.pins for p in w.podsets)
    assert bool(first.podsets) == any_demand


def test_quantities_are_exact() -> None:
    """400k and 400000 and 4e5 are the same units; no float rounding on the way (parse_quantity)."""
    for text in ("400k", "400000", "4e5", "0.4M"):
        assert demand(_container({f"{G}.sliced": 1, f"{G}.sliced.units": text})).units == 400000
