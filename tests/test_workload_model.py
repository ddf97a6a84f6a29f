"""The one Workload model and reader (snapshot/workload_model.py, snapshot/workloads.py):
every served version, the Pod request rule, topologyAssignment decoding, the snapshot keeping
Workloads untyped, and bad input named by file, Workload and field (admission.md §1-§3)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpustack_render.errors import UserError
from gpustack_render.rules import load_rules
from gpustack_render.snapshot import load_snapshot
from gpustack_render.snapshot.workload_model import DecodeError, Workload, decode
from gpustack_render.snapshot.workloads import read_workloads, snapshot_workloads

RULES = load_rules(None)
V2 = "kueue.x-k8s.io/v1beta2"


def _wl(podsets: list[dict[str, Any]] | None = None, name: str = "w", api: str = V2, **spec: Any) -> dict[str, Any]:
    podsets = podsets if podsets is not None else [{"name": "main", "count": 1, "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]
    return {"apiVersion": api, "kind": "Workload", "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"queueName": "q", "podSets": podsets, **spec}}


def _status(*conditions: tuple[str, str], assignments: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"admission": {"clusterQueue": "cq", "podSetAssignments": assignments or [{"name": "main"}]},
            "conditions": [{"type": t, "status": s, "lastTransitionTime": "2026-01-01T00:00:00Z",
                            "reason": "r", "message": "m"} for t, s in conditions]}


def _read(tmp_path: Path, *objects: dict[str, Any], require_queue: bool = True) -> list[Workload]:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump_all(list(objects), sort_keys=False))
    return read_workloads([str(path)], "admit", frozenset(), lambda found: f"only {found}", require_queue)


def _error(tmp_path: Path, obj: dict[str, Any]) -> str:
    with pytest.raises(UserError) as err:
        _read(tmp_path, obj)
    (problem,) = err.value.problems
    return problem.format()


@pytest.mark.parametrize("api", ["kueue.x-k8s.io/v1beta1", V2])
def test_every_served_version_reads(tmp_path: Path, api: str) -> None:
    (w,) = _read(tmp_path, _wl(api=api, priority=5))
    assert (w.ref, w.priority, w.spec.queueName, w.api_version) == ("team-a/w", 5, "q", api)
    assert w.spec.podSets[0].template.spec.pod_requests() == {"cpu": Fraction(1)}


def test_defaults(tmp_path: Path) -> None:
    obj = _wl([{"template": {"spec": {"containers": [{"name": "c"}]}}}])
    del obj["metadata"]["namespace"]
    (w,) = _read(tmp_path, obj)
    podset = w.spec.podSets[0]
    assert (w.namespace, w.priority, podset.ref, podset.count, w.holds_quota) == ("default", 0, "main", 1, False)


def test_pod_request_rule() -> None:
    """The larger of the app containers' sum and the largest init container, plus overhead; a limit
    stands for a missing request."""
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                           {"name": "b", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": 1},
                                                       "requests": {"cpu": "250m"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}},
                               {"name": "j", "resources": {"limits": {"memory": "512Mi"}}}],
            "overhead": {"cpu": "100m"}}
    (podset,) = decode(_wl([{"name": "p", "count": 3, "template": {"spec": spec}}]), "f").spec.podSets
    assert podset.template.spec.pod_requests() == {
        "cpu": Fraction(21, 10), "memory": Fraction(1 << 30), "nvidia.com/gpu": Fraction(1)}


def test_pod_request_rule_with_sidecars() -> None:
    """Kubernetes' rule with sidecars (restartPolicy Always): they run beside the app containers
    (added to the sum) and beside every later init container."""
    def c(cpu: str, sidecar: bool = False) -> dict[str, Any]:
        return {"name": "x", "resources": {"requests": {"cpu": cpu}}, **({"restartPolicy": "Always"} if sidecar else {})}
    spec = {"containers": [c("1")], "initContainers": [c("3"), c("1", sidecar=True), c("2.5")]}
    (podset,) = decode(_wl([{"name": "p", "template": {"spec": spec}}]), "f").spec.podSets
    # app 1 + sidecar 1 = 2; init: 3 (before the sidecar), then 1 + 2.5 = 3.5 -> 3.5
    assert podset.template.spec.pod_requests() == {"cpu": Fraction(7, 2)}
    spec = {"containers": [c("4")], "initContainers": [c("1", sidecar=True), c("2")]}
    (podset,) = decode(_wl([{"name": "p", "template": {"spec": spec}}]), "f").spec.podSets
    assert podset.template.spec.pod_requests() == {"cpu": Fraction(5)}  # app 4 + sidecar 1 > 1 + 2


def test_status_and_helpers() -> None:
    w = decode({**_wl(), "status": _status(("QuotaReserved", "True"), ("Admitted", "True"))}, "f")
    assert (w.holds_quota, w.admitted, w.finished, w.status.admission.clusterQueue) == (True, True, False, "cq")
    assert w.quota_reserved_at is not None and w.quota_reserved_at.year == 2026
    done = decode({**_wl(), "status": _status(("QuotaReserved", "True"), ("Finished", "True"))}, "f")
    assert (done.holds_quota, done.admitted, done.finished) == (False, False, True)
    pending = decode({**_wl(), "status": _status(("QuotaReserved", "True"))}, "f", status=False)
    assert (pending.holds_quota, pending.status.admission) == (False, None)


def test_topology_request_from_annotations() -> None:
    annotated = {"name": "p", "template": {"metadata": {"annotations": {
        "kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"}}, "spec": {}}}
    explicit = {"name": "q", "topologyRequest": {"preferred": "rack"}, "template": {"spec": {}}}
    none = {"name": "r", "template": {"spec": {}}}
    got = [p.topology() for p in decode(_wl([annotated, explicit, none]), "f").spec.podSets]
    assert [(t.required, t.preferred) if t else None for t in got] == [
        ("kubernetes.io/hostname", None), (None, "rack"), None]


HOST = "kubernetes.io/hostname"
TOPOLOGY_CASES = [
    ("v1beta1 domains", {"levels": [HOST], "domains": [{"values": ["n1"], "count": 2}, {"values": ["n2"], "count": 1}]},
     {"n1": 2, "n2": 1}),
    ("slices: individual roots with prefix and suffix, universal count",
     {"levels": [HOST], "slices": [{"domainCount": 2, "valuesPerLevel": [
         {"individual": {"prefix": "node-", "roots": ["1", "2"], "suffix": ".x"}}], "podCounts": {"universal": 3}}]},
     {"node-1.x": 3, "node-2.x": 3}),
    ("slices: two slices, individual counts, a universal higher level",
     {"levels": ["rack", HOST], "slices": [
         {"domainCount": 2, "valuesPerLevel": [{"universal": "r1"}, {"individual": {"roots": ["a", "b"]}}],
          "podCounts": {"individual": [4, 2]}},
         {"domainCount": 1, "valuesPerLevel": [{"universal": "r2"}, {"universal": "c"}],
          "podCounts": {"universal": 1}}]},
     {"a": 4, "b": 2, "c": 1}),
]


@pytest.mark.parametrize("topology, lowest", [c[1:] for c in TOPOLOGY_CASES], ids=[c[0] for c in TOPOLOGY_CASES])
def test_topology_assignment_decodes(topology: dict[str, Any], lowest: dict[str, int]) -> None:
    status = _status(("QuotaReserved", "True"), assignments=[
        {"name": "main", "flavors": {"cpu": "f"}, "count": 1, "topologyAssignment": topology}])
    w = decode({**_wl(), "status": status}, "f")
    (placement,) = w.placements
    assert placement is not None and placement.lowest() == lowest
    assert placement.levels == tuple(topology["levels"])


TA = "status.admission.podSetAssignments[0].topologyAssignment"
BAD_TOPOLOGY = [
    ("roots shorter than domainCount", {"levels": [HOST], "slices": [{"domainCount": 2, "valuesPerLevel": [
        {"individual": {"roots": ["a"]}}], "podCounts": {"universal": 1}}]},
     f"{TA}.slices[0].valuesPerLevel[0].individual.roots: has 1 root(s), domainCount is 2"),
    ("both universal and individual", {"levels": [HOST], "slices": [{"domainCount": 1, "valuesPerLevel": [
        {"universal": "a", "individual": {"roots": ["a"]}}], "podCounts": {"universal": 1}}]},
     f"{TA}.slices[0].valuesPerLevel[0]: exactly one of universal or individual must be set"),
    ("no pod count", {"levels": [HOST], "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "a"}],
                                                    "podCounts": {}}]},
     f"{TA}.slices[0].podCounts: exactly one of universal or individual must be set"),
    ("individual counts of the wrong length", {"levels": [HOST], "slices": [{"domainCount": 1, "valuesPerLevel": [
        {"universal": "a"}], "podCounts": {"individual": [1, 2]}}]},
     f"{TA}.slices[0].podCounts.individual: has 2 count(s), domainCount is 1"),
    ("a level without values", {"levels": ["rack", HOST], "slices": [{"domainCount": 1, "valuesPerLevel": [
        {"universal": "a"}], "podCounts": {"universal": 1}}]},
     f"{TA}.slices[0].valuesPerLevel: has 1 entries for 2 level(s)"),
    ("neither domains nor slices", {"levels": [HOST]},
     f"{TA}: exactly one of domains (v1beta1) or slices (v1beta2) must be set"),
    ("a domain with too few values", {"levels": ["rack", HOST], "domains": [{"values": ["n1"], "count": 1}]},
     f"{TA}.domains[0].values: has 1 value(s) for 2 level(s)"),
    ("a count of zero", {"levels": [HOST], "domains": [{"values": ["n1"], "count": 0}]},
     f"{TA}.domains[0].count: expected an integer >= 1"),
    ("no levels", {"slices": []}, f"{TA}.levels: required field is missing"),
]


@pytest.mark.parametrize("topology, message", [c[1:] for c in BAD_TOPOLOGY], ids=[c[0] for c in BAD_TOPOLOGY])
def test_topology_assignment_that_does_not_decode(tmp_path: Path, topology: dict[str, Any], message: str) -> None:
    snap = _snapshot(tmp_path, {**_wl(), "status": _status(("QuotaReserved", "True"), assignments=[
        {"name": "main", "topologyAssignment": topology}])})
    with pytest.raises(UserError) as err:
        snapshot_workloads(snap)
    (problem,) = err.value.problems
    assert problem.obj == "Workload/team-a/w" and problem.file.endswith("wl.yaml")
    assert f"{problem.path}: {problem.message}" == message


def _snapshot(tmp_path: Path, *workloads: dict[str, Any]) -> Any:
    (tmp_path / "wl.yaml").write_text(yaml.safe_dump_all(list(workloads), sort_keys=False))
    return load_snapshot(["fixtures/demo", str(tmp_path / "wl.yaml")], RULES.settings.source,
                         RULES.vocabulary.workerApiGroup)


BAD_INPUT = [
    ("no queueName", {**_wl(), "spec": {"podSets": _wl()["spec"]["podSets"]}},
     ["w.yaml:", "Workload/team-a/w", "spec.queueName", "required field is missing"]),
    ("a PodSet without a template", _wl([{"name": "a", "count": 1}]),
     ["w.yaml:", "Workload/team-a/w", "spec.podSets[0].template", "a PodSet needs a template"]),
    ("an unparsable quantity", _wl([{"name": "a", "template": {"spec": {"initContainers": [
        {"name": "i", "resources": {"requests": {"nvidia.com/gpu.sliced.units": "half"}}}]}}}]),
     ["Workload/team-a/w", "spec.podSets[0].template.spec.initContainers[0].resources.requests."
      "nvidia.com/gpu.sliced.units", '"half" is not a valid quantity']),
    ("an unparsable overhead", _wl([{"name": "a", "template": {"spec": {"overhead": {"cpu": "x"}}}}]),
     ["spec.podSets[0].template.spec.overhead.cpu", '"x" is not a valid quantity']),
    ("an unknown version", _wl(api="kueue.x-k8s.io/v1alpha9"),
     ["Workload/team-a/w", "apiVersion", "version 'v1alpha9' of kueue.x-k8s.io is not served by Kueue v0.19"]),
    ("a count of the wrong type", _wl([{"name": "a", "count": "2", "template": {"spec": {}}}]),
     ["spec.podSets[0].count", "expected an integer, got a string"]),
    ("podSets not a list", {**_wl(), "spec": {"queueName": "q", "podSets": {"a": 1}}},
     ["spec.podSets", "expected a list, got a mapping"]),
]


@pytest.mark.parametrize("obj, fragments", [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_names_file_workload_field(tmp_path: Path, obj: dict[str, Any], fragments: list[str]) -> None:
    line = _error(tmp_path, obj)
    assert all(f in line for f in fragments), line


def test_bad_input_has_the_line(tmp_path: Path) -> None:
    line = _error(tmp_path, _wl([{"name": "a", "count": 1}]))
    assert line.startswith(f"error: {tmp_path / 'w.yaml'}:9: "), line  # the PodSet's line in the dumped YAML


def test_status_of_pending_workloads_is_ignored(tmp_path: Path) -> None:
    """--workloads: pending, whatever their status says (a broken one included)."""
    (w,) = _read(tmp_path, {**_wl(), "status": {"admission": "not a mapping"}})
    assert w.status.admission is None and not w.holds_quota


def test_every_workload_problem_at_once(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        _read(tmp_path, _wl([{"name": "a"}], name="one"), _wl(name="two", api="kueue.x-k8s.io/v2"))
    assert [p.obj for p in err.value.problems] == ["Workload/team-a/one", "Workload/team-a/two"]


def test_workload_list_and_stream(tmp_path: Path) -> None:
    listing = {"apiVersion": V2, "kind": "WorkloadList", "items": [
        {k: v for k, v in _wl(name=n).items() if k not in ("apiVersion", "kind")} for n in ("a", "b")]}
    (tmp_path / "l.json").write_text(json.dumps(listing))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump_all([_wl(name="c"), _wl(name="d")]))
    got = read_workloads([str(tmp_path)], "admit", frozenset(), str)
    assert [w.name for w in got] == ["a", "b", "c", "d"]


def test_snapshot_keeps_workloads_untyped(tmp_path: Path) -> None:
    """A bad Workload in a snapshot does not fail loading it (render never types them); typing
    them on demand names the problem."""
    snap = _snapshot(tmp_path, _wl(name="good"), _wl([{"name": "a"}], name="bad"))
    assert sorted(snap.workloads) == [("team-a", "bad"), ("team-a", "good")]
    assert "wl.yaml" not in " ".join(snap.unused_files)
    with pytest.raises(UserError) as err:
        snapshot_workloads(snap)
    assert [(p.obj, p.path) for p in err.value.problems] == [("Workload/team-a/bad", "spec.podSets[0].template")]


def test_snapshot_workloads_typed_in_order(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path, {**_wl(name="b"), "status": _status(("QuotaReserved", "True"))}, _wl(name="a"))
    assert [(w.name, w.holds_quota) for w in snapshot_workloads(snap)] == [("a", False), ("b", True)]


@pytest.mark.parametrize("suffix", ["yaml", "json"])
def test_duplicate_workload_conflicts_when_typed_only(tmp_path: Path, suffix: str) -> None:
    """Two differing copies of one Workload: loading (render) does not fail, typing (admit) does."""
    dump = json.dumps if suffix == "json" else yaml.safe_dump
    (tmp_path / f"other.{suffix}").write_text(dump(_wl(priority=3)))
    (tmp_path / f"wl.{suffix}").write_text(dump(_wl()))
    snap = load_snapshot([str(tmp_path)], RULES.settings.source, RULES.vocabulary.workerApiGroup)
    with pytest.raises(UserError) as err:
        snapshot_workloads(snap)
    (problem,) = err.value.problems
    assert problem.obj == "Workload/team-a/w" and "conflicts with a different object of the same identity" in \
        problem.message and problem.file.endswith(f"wl.{suffix}")


def test_decode_error_carries_the_field() -> None:
    with pytest.raises(DecodeError) as err:
        decode(_wl([{"name": "a", "template": {"spec": {"nodeSelector": {"k": 1}}}}]), "f")
    assert err.value.loc == ("spec", "podSets", 0, "template", "spec", "nodeSelector")


def test_pin_refuses_an_unknown_version(tmp_path: Path) -> None:
    """pin reads through the same reader: a Workload of a version Kueue does not serve is exit 2."""
    from gpustack_render.pin.demand import ResourceClassifier
    from gpustack_render.pin.workloads import read_workloads as pin_read
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(_wl(api="kueue.x-k8s.io/v1")))
    with pytest.raises(UserError) as err:
        pin_read([str(path)], ResourceClassifier(RULES))
    (problem,) = err.value.problems
    assert (problem.obj, problem.path) == ("Workload/team-a/w", "apiVersion") and "v1beta1, v1beta2" in problem.message


def test_json_and_yaml_snapshots_type_alike(tmp_path: Path) -> None:
    """A snapshot's Workloads are kept as their JSON text (fastjson.Kept) where the fast readers read
    the file, as plain data where the slow path does; typed, they are the same, and so are their problems."""
    from gpustack_render.snapshot import fastjson
    good = {**_wl(name="good", priority=7), "status": _status(("QuotaReserved", "True"), assignments=[
        {"name": "main", "count": 1, "flavors": {"cpu": "f"}, "topologyAssignment": TOPOLOGY_CASES[1][1]}])}
    bad = _wl([{"name": "a", "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}}], name="bad")
    (tmp_path / "w.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [good, bad]}, indent=1))
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "w.yaml").write_text("# a comment: not kubectl's own style\n" + yaml.safe_dump_all([good, bad]))
    results = []
    for path in (tmp_path / "w.json", tmp_path / "y" / "w.yaml"):
        snap = load_snapshot(["fixtures/demo", str(path)], RULES.settings.source, RULES.vocabulary.workerApiGroup)
        kinds = {type(obj) for _, obj in snap.workloads.values()}
        with pytest.raises(UserError) as err:
            snapshot_workloads(snap)
        (problem,) = err.value.problems
        del snap.workloads[("team-a", "bad")]
        (w,) = snapshot_workloads(snap)
        results.append((kinds, (w.ref, w.priority, w.holds_quota, w.placements[0].lowest() if w.placements[0] else None,
                                w.spec.podSets[0].template.spec.pod_requests()),
                        (problem.obj, problem.path, problem.message, problem.line is not None)))
    assert results[0][0] == {fastjson.Kept}
    assert results[0][1:] == results[1][1:]
    assert results[0][2] == ("Workload/team-a/bad", "spec.podSets[0].template.spec.containers[0].resources.requests.cpu",
                             '"lots" is not a valid quantity', True)


def test_the_same_workload_in_json_and_yaml_is_one(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(_wl()))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(_wl()))
    snap = load_snapshot([str(tmp_path)], RULES.settings.source, RULES.vocabulary.workerApiGroup, )
    assert list(snap.workloads) == [("team-a", "w")]


def test_no_line_lookup_in_a_large_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding the line composes the whole file again (~30 s at 50,000 Workloads): a file over the
    limit gets a problem without the line, naming file, Workload and field all the same."""
    from gpustack_render.snapshot import workloads
    obj = _wl([{"name": "a", "count": 1}])
    assert _error(tmp_path, obj).startswith(f"error: {tmp_path / 'w.yaml'}:9: ")
    monkeypatch.setattr(workloads, "LINE_LOOKUP_MAX_BYTES", 10)
    line = _error(tmp_path, obj)
    assert line.startswith(f"error: {tmp_path / 'w.yaml'}: Workload/team-a/w: spec.podSets[0].template: "), line


def test_a_copy_without_namespace_is_the_default_one(tmp_path: Path) -> None:
    plain = _wl()
    plain["metadata"]["namespace"] = "default"
    bare = _wl(priority=1)
    del bare["metadata"]["namespace"]
    (tmp_path / "a.json").write_text(json.dumps(plain))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(bare))
    snap = load_snapshot([str(tmp_path)], RULES.settings.source, RULES.vocabulary.workerApiGroup)
    assert list(snap.workloads) == [("default", "w")]
    with pytest.raises(UserError) as err:  # they differ (priority): not silently one or the other
        snapshot_workloads(snap)
    assert "conflicts with a different object" in str(err.value)
