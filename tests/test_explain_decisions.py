"""The decisions ``explain`` used to work out beside the evaluator are now recorded where they are
made, and explain only words them (issue 13 point 1):

* which InstanceType a ClusterQueue was built from (derived, the snapshot's, one being deleted) and
  the spec values it read (``queue.instanceType``);
* the objects a refusal names (``queue.refusal``: its flavors and Nodes, no search of its text);
* which managed Nodes each flavor's ``spec.nodeLabels`` select (``flavor.nodeLabels``);
* the queue's decisions as separate lines (``ClusterQueuePlan`` carries no joined string any more);
* the Topology's profile and where its levels come from (``topology``).

Each test checks the record against something computed independently here (the snapshot files, the
Node facts), and that explain shows it; a record replaced by a made-up one proves explain reads the
record rather than working the answer out again.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from gpustack_render import pipeline
from gpustack_render.evaluate.plan import ClusterQueuePlan
from gpustack_render.evaluate.record import Decision
from gpustack_render.explain import explain

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "fixtures" / "cases"
SNAPSHOTS = REPO / "fixtures" / "snapshots"
NAMESPACES = str(REPO / "fixtures" / "demo" / "namespaces.json")

SNAPSHOT: dict[str, tuple[str, ...]] = {
    "demo": (str(REPO / "fixtures" / "demo"),),
    "existing": (str(REPO / "fixtures" / "demo"), str(CASES / "existing-instance-type" / "instancetypes.yaml")),
    "deleting": (str(SNAPSHOTS / "lifecycle-inactive-hold" / "nodes.yaml"),
                 str(SNAPSHOTS / "lifecycle-inactive-hold" / "namespaces.yaml"),
                 str(CASES / "lifecycle-deleting-instancetype" / "instancetypes.yaml"),
                 str(CASES / "lifecycle-deleting-instancetype" / "clusterqueues.yaml")),
    "overlap": (str(CASES / "overlapping-selectors" / "nodes.yaml"), NAMESPACES),
    "missing-topology": (str(SNAPSHOTS / "lifecycle-finalizing-flavor" / "nodes.yaml"),
                         str(SNAPSHOTS / "lifecycle-inactive-hold" / "namespaces.yaml")),
    "topology-snapshot": (str(CASES / "topology-profile-snapshot" / "nodes.yaml"),
                          str(CASES / "topology-profile-snapshot" / "topology.yaml"), NAMESPACES),
}


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # sources are shown relative to the working directory


def _fresh(label: str) -> pipeline.Context:
    ctx = pipeline.prepare(list(SNAPSHOT[label]), [], None)
    ctx.records  # noqa: B018 - the recording evaluation
    return ctx


@lru_cache(maxsize=None)
def _context(label: str) -> pipeline.Context:
    return _fresh(label)


def _report(label: str, target: str, ctx: pipeline.Context | None = None) -> dict[str, Any]:
    ctx = ctx or _context(label)
    return explain(ctx, target, pipeline.setting_sources(ctx, [])).as_json()


def _lines(report: dict[str, Any], title_start: str = "") -> list[str]:
    return [line["text"] for s in report["sections"] if s["title"].startswith(title_start) for line in s["lines"]]


def _field_from(report: dict[str, Any], path: str) -> list[str]:
    return next(f["from"] for f in report["fields"] if f["path"] == path)


# --- the InstanceType a queue was built from -------------------------------------------------------

@pytest.mark.parametrize("label, queue, source", [
    ("demo", "gpustack--nvidia-tesla-t4-linux-amd64", "derived"),
    ("existing", "my-t4", "snapshot"),
    ("existing", "gpustack--nvidia-a10g-linux-amd64", "snapshot"),
    ("deleting", "gpustack--nvidia-l4-linux-amd64", "deleting"),
])
def test_queue_records_its_instance_type_source(label: str, queue: str, source: str) -> None:
    ctx = _context(label)
    decision = ctx.records.first(f"ClusterQueue/{queue}", "queue.instanceType")
    assert decision is not None and decision.result == source
    spec = dict(decision.inputs)
    derived = {it.name: it for it in ctx.evaluation.plan.instance_types}
    if source == "derived":
        it = derived[queue]
        assert spec == {"generalGroup": it.general_group, "acceleratorGroup": it.accelerator_group,
                        "acceleratable": it.acceleratable, "os": it.os, "arch": it.arch, "inactive": False}
    else:
        assert queue not in derived  # create-only: the snapshot's InstanceType is never derived again
        snap = (ctx.snapshot.deleted_instance_types if source == "deleting" else ctx.snapshot.instance_types)[queue]
        assert (spec["acceleratorGroup"], spec["acceleratable"], spec["inactive"]) == (
            snap.spec.acceleratorGroup, snap.spec.acceleratable, snap.spec.inactive)
    report = _report(label, f"ClusterQueue/{queue}")
    assert report["facts"]["instanceType"] == source
    shown = _lines(report, f"InstanceType ({source})")
    assert shown, [s["title"] for s in report["sections"]]
    assert ("(being deleted)" in shown[0]) == (source == "deleting")
    assert ("(derived)" in shown[0]) == (source == "derived")
    for key, value in spec.items():
        assert any(line.startswith(f"{key}: ") for line in shown), (key, shown)


def test_explain_shows_the_recorded_instance_type_not_its_own_lookup() -> None:
    """A made-up record (a derived queue said to come from a snapshot InstanceType being deleted)
    is what explain shows: it reads the record, it does not look the InstanceType up again."""
    ctx = _fresh("demo")
    queue = "gpustack--nvidia-tesla-t4-linux-amd64"
    subject = f"ClusterQueue/{queue}"
    real = ctx.records.first(subject, "queue.instanceType")
    assert real is not None and real.result == "derived"
    fake = dataclasses.replace(real, result="deleting", inputs=(*real.inputs[:-1], ("inactive", True)))
    ctx.records.by_subject[subject].insert(0, fake)
    report = _report("demo", subject, ctx)
    assert report["facts"]["instanceType"] == "deleting"
    assert "inactive: true" in _lines(report, "InstanceType (deleting)")


# --- refusals name their flavors and Nodes -----------------------------------------------------------

def test_overlapping_selectors_records_the_node_and_both_flavors() -> None:
    ctx = _context("overlap")
    queue = "gpustack--nvidia-l4-linux-amd64"
    refusal = ctx.records.first(f"ClusterQueue/{queue}", "queue.refusal")
    plan = next(q for q in ctx.evaluation.plan.cluster_queues if q.name == queue)
    assert refusal is not None and refusal.result == plan.refusal and plan.refusal.startswith("OverlappingSelectors")
    assert refusal.input("nodes") == ["node-l4-xeon"]
    flavors = refusal.input("flavors")
    assert len(flavors) == 2 and all(f"{name}" in plan.refusal for name in flavors)
    assert set(flavors) <= {f.name for f in ctx.evaluation.plan.flavors}


def test_missing_topology_records_the_flavor_without_one() -> None:
    ctx = _context("missing-topology")
    queue = "gpustack--generic-linux-amd64"
    refusal = ctx.records.first(f"ClusterQueue/{queue}", "queue.refusal")
    assert refusal is not None and refusal.result.startswith("MissingTopology")
    rendered = {t.name for t in ctx.evaluation.plan.topologies}
    by_name = {f.name: f for f in ctx.evaluation.plan.flavors}
    assert refusal.input("nodes") == []
    assert refusal.input("flavors") and all(by_name[f].topology_name not in rendered for f in refusal.input("flavors"))


@pytest.mark.parametrize("label", ["overlap", "missing-topology", "demo"])
def test_a_node_is_told_about_a_refusal_exactly_when_it_names_the_node_or_its_flavors(label: str) -> None:
    ctx = _context(label)
    refusals = {q.name: ctx.records.first(f"ClusterQueue/{q.name}", "queue.refusal")
                for q in ctx.evaluation.plan.cluster_queues}
    told = 0
    for name in sorted(ctx.snapshot.nodes):
        report = _report(label, f"node/{name}")
        fed = set(report["facts"]["flavors"])
        for queue, refusal in refusals.items():
            line = f"ClusterQueue/{queue} refused its plan because of this Node's flavors"
            shown = any(text.startswith(line) for text in _lines(report, "Flavors"))
            want = refusal is not None and (name in refusal.input("nodes") or bool(fed & set(refusal.input("flavors"))))
            assert shown == want, (name, queue)
            told += shown
    assert told or label == "demo"


# --- what a flavor's nodeLabels select ---------------------------------------------------------------

@pytest.mark.parametrize("label", ["demo", "overlap", "missing-topology"])
def test_each_flavor_records_the_managed_nodes_its_node_labels_select(label: str) -> None:
    ctx = _context(label)
    facts = ctx.evaluation.node_facts
    for flavor in ctx.evaluation.plan.flavors:
        decision = ctx.records.first(f"ResourceFlavor/{flavor.name}", "flavor.nodeLabels")
        assert decision is not None, flavor.name
        assert decision.result == sorted(f.name for f in facts
                                         if f.managed and flavor.node_labels.items() <= f.converged.items())
        assert decision.input("nodeLabels") == flavor.node_labels
        assert decision.input("contributing") == flavor.nodes


def test_selected_but_not_contributing_is_shown_on_the_flavor_and_the_node() -> None:
    ctx = _context("overlap")
    extra = {f.name: sorted(set(d.result) - set(f.nodes)) for f in ctx.evaluation.plan.flavors
             if (d := ctx.records.first(f"ResourceFlavor/{f.name}", "flavor.nodeLabels")) is not None}
    assert any(extra.values())
    for flavor, nodes in extra.items():
        notes = [t for t in _lines(_report("overlap", f"ResourceFlavor/{flavor}")) if t.startswith("NOTE: spec.nodeLabels")]
        assert (notes == [f"NOTE: spec.nodeLabels also select managed Node(s) that do not contribute: "
                          f"{', '.join(nodes)} (a queue with this flavor is refused: OverlappingSelectors / "
                          f"NonConservedQuota)"]) if nodes else not notes, flavor
        for node in nodes:
            assert any(t.startswith(f"NOTE: ResourceFlavor/{flavor} does not contain this Node")
                       for t in _lines(_report("overlap", f"node/{node}"), "Flavors")), (flavor, node)


def test_explain_shows_the_recorded_node_label_selection() -> None:
    ctx = _fresh("demo")
    flavor = ctx.evaluation.plan.flavors[0]
    subject = f"ResourceFlavor/{flavor.name}"
    real = ctx.records.first(subject, "flavor.nodeLabels")
    assert real is not None and real.result == flavor.nodes  # the demo has no overlap
    ctx.records.by_subject[subject].insert(0, dataclasses.replace(real, result=[*real.result, "node-made-up"]))
    notes = [t for t in _lines(_report("demo", subject, ctx)) if t.startswith("NOTE: spec.nodeLabels")]
    assert notes and "node-made-up" in notes[0]


# --- the queue's decisions, one each -------------------------------------------------------------------

def test_the_queue_plan_carries_no_joined_decision_string() -> None:
    assert "decision" not in {f.name for f in dataclasses.fields(ClusterQueuePlan)}


@pytest.mark.parametrize("label", ["demo", "overlap", "deleting", "missing-topology"])
def test_queue_decisions_are_the_recorded_ones(label: str) -> None:
    ctx = _context(label)
    for queue in ctx.evaluation.plan.cluster_queues:
        subject = f"ClusterQueue/{queue.name}"
        facts = _report(label, subject)["facts"]
        decisions = facts["decisions"]
        selection = ctx.records.first(subject, "queue.selection")
        assert selection is not None
        assert decisions[0] == f"selected {len(selection.result)} flavor(s) by {selection.input('selector')}"
        refusal = ctx.records.first(subject, "queue.refusal")
        assert (f"plan refused: {refusal.result}" in decisions) if refusal is not None else \
            not any(d.startswith("plan refused") for d in decisions)
        lifecycle = ctx.records.first(subject, "lifecycle")
        last = decisions[-1]
        if lifecycle is None:
            assert last == "stopPolicy None: no lifecycle rule applied"
        else:
            assert last.startswith(f"stopPolicy {lifecycle.result} by lifecycle rule '{lifecycle.input('rule')}'")
        save = ctx.records.first(subject, "lifecycle.save")
        assert (f"saves {save.result} by save rule" in last) if save is not None else "saves" not in last
        assert facts["decision"] == "; ".join(decisions)


# --- Topology: profile and the source of its levels -----------------------------------------------------

def test_topology_levels_come_from_the_rules_or_the_snapshot() -> None:
    ctx = _context("topology-snapshot")
    profiles = {f.topology_name: f.profile for f in ctx.evaluation.plan.flavors}
    configured = list(ctx.rules.topology.levels)
    sources = set()
    for topology in ctx.evaluation.plan.topologies:
        report = _report("topology-snapshot", f"Topology/{topology.name}")
        assert report["facts"]["profile"] == profiles[topology.name]
        origin = _field_from(report, "spec.levels[0].nodeLabel")[0]
        from_rules = topology.levels == configured
        sources.add(from_rules)
        assert ("(hash to the profile)" in origin and origin.startswith("rules/")) if from_rules else \
            origin.startswith(f"snapshot Topology/{topology.name} ")
    assert sources == {True, False}  # hostname-only from the rules, zone + hostname from the snapshot


def test_explain_shows_the_recorded_topology_decision() -> None:
    """A recorded Topology decision (the evaluator records one when it plans the Topologies) is what
    explain shows: here a made-up profile and levels source."""
    ctx = _fresh("demo")
    topology = ctx.evaluation.plan.topologies[0]
    subject = f"Topology/{topology.name}"
    made_up = Decision("topology", list(topology.levels), "Topology:levels", "",
                       (("profile", "fnv64-made-up"), ("configuredProfile", "fnv64-other"), ("levelsFrom", "snapshot")))
    ctx.records.by_subject.setdefault(subject, []).insert(0, made_up)
    report = _report("demo", subject, ctx)
    assert report["facts"]["profile"] == "fnv64-made-up"
    assert any(s["title"] == "Nodes with profile fnv64-made-up" for s in report["sections"])
    assert _field_from(report, "spec.levels[0].nodeLabel")[0].startswith(f"snapshot Topology/{topology.name}")
