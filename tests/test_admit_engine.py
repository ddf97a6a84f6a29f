"""The admission engine over its own small inputs (admission.md §4–§8), case by case from Kueue's
behaviour (v0.19: pkg/scheduler/flavorassigner TestAssignFlavors, preemption TestPreemption,
scheduler TestSchedule, the TAS scheduler tests). Each case names the Kueue behaviour it follows."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gpustack_render.admit.engine import Entry, admit
from gpustack_render.admit.model import (ADMITTED, EVICTED, KEPT, PENDING, PREEMPT, PREEMPTED, QUOTA_RESERVED,
                                         REQUIRED, Chain, Cluster, FlavorQuota, FlavorSpec, Holding, NodeRoom,
                                         PodSetDemand, QueueSpec, WorkloadDemand)

GPU = "example.com/credits"
POOL = "example.com/pool"


def podset(gpu: int = 1, count: int = 1, cpu: str = "1", **kw: Any) -> PodSetDemand:
    return PodSetDemand("main", count, {"cpu": Fraction(cpu), "example.com/gpu": Fraction(gpu)},
                        {GPU: gpu * count, "cpu": int(Fraction(cpu) * 1000) * count}, **kw)


def wl(name: str, gpu: int = 1, priority: int = 0, created: str = "2026-01-01T00:00:00Z", count: int = 1,
       holding: Holding | None = None, queue: str = "lq", **kw: Any) -> WorkloadDemand:
    return WorkloadDemand("ns", name, queue, priority, created, [podset(gpu, count, **kw)], holding)


def holds(flavor: str, nodes: dict[str, int] | None = None, at: str = "2026-01-01T00:00:00Z") -> Holding:
    return Holding("cq", [{GPU: flavor, "cpu": flavor}], [nodes or {}], at, admitted=True)


def chain(flavors: list[tuple[str, int]], tas: bool = False, **queue: Any) -> Chain:
    spec = QueueSpec("cq", [GPU], [FlavorQuota(f, {GPU: q}) for f, q in flavors],
                     preempt_within=queue.pop("preempt_within", "LowerPriority"),
                     when_can_preempt=queue.pop("when_can_preempt", "MayStopSearch"), **queue)
    out = Chain(local_queues={("ns", "lq"): "cq"}, queues={"cq": spec})
    for f, _ in flavors:
        out.flavors[f] = FlavorSpec(f, {POOL: f}, topology="topo" if tas else "")
    out.topologies["topo"] = ["kubernetes.io/hostname"]
    return out


def node(name: str, flavor: str, gpu: int = 4, cpu: str = "16", pods: int = 110) -> NodeRoom:
    return NodeRoom(name, {POOL: flavor}, [], {"cpu": Fraction(cpu), "example.com/gpu": Fraction(gpu),
                                               "pods": Fraction(pods)})


def run(c: Chain, workloads: list[WorkloadDemand], nodes: list[NodeRoom] | None = None, evict: bool = False,
        **kw: Any) -> dict[str, Entry]:
    result = admit(Cluster(c, nodes or [], workloads, **kw), evict)
    return {e.workload.name: e for e in result.entries}


def test_fit_on_first_flavor() -> None:
    # TestAssignFlavors "single flavor, fits"
    out = run(chain([("small", 2), ("big", 8)]), [wl("a")])
    assert out["a"].outcome == ADMITTED
    assert out["a"].podsets[0].flavor == "small"


def test_no_fit_wording_then_next_flavor() -> None:
    # TestAssignFlavors "multiple flavors, fits in second": the first's quota is too small
    out = run(chain([("small", 2), ("big", 8)]), [wl("a", gpu=3)])
    assert out["a"].podsets[0].flavor == "big"
    assert out["a"].podsets[0].reasons == [
        f"insufficient quota for {GPU} in flavor small, previously considered podsets requests (0) + "
        f"current podset request (3) > maximum capacity (2)"]


def test_pending_reason_is_kueue_message() -> None:
    out = run(chain([("small", 2)]), [wl("a", gpu=3)])
    assert out["a"].outcome == PENDING
    assert out["a"].reason == (f"couldn't assign flavors to pod set main: insufficient quota for {GPU} in flavor "
                               f"small, previously considered podsets requests (0) + current podset request (3) > "
                               f"maximum capacity (2)")


def test_untolerated_taint() -> None:
    # TestAssignFlavors "multiple flavors, skip flavor with taint"
    c = chain([("small", 2), ("big", 8)])
    c.flavors["small"].node_taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    out = run(c, [wl("a")])
    assert out["a"].podsets[0].flavor == "big"
    assert out["a"].podsets[0].reasons == ["untolerated taint {dedicated x NoSchedule <nil>} in flavor small"]
    tolerated = run(c, [wl("b", tolerations=[{"key": "dedicated", "operator": "Exists"}])])
    assert tolerated["b"].podsets[0].flavor == "small"


def test_affinity_reduced_to_flavor_keys() -> None:
    # TestAssignFlavors "multiple flavors, fits in second with node affinity"; keys the flavor does not
    # carry are ignored (flavorSelector), so an unrelated key never rules a flavor out
    c = chain([("small", 2), ("big", 8)])
    terms = [{"matchExpressions": [{"key": POOL, "operator": "In", "values": ["big"]},
                                   {"key": "other.example.com/fit", "operator": "Gt", "values": ["3"]}]}]
    out = run(c, [wl("a", affinity_terms=terms)])
    assert out["a"].podsets[0].flavor == "big"
    assert out["a"].podsets[0].reasons == ["flavor small doesn't match node affinity"]
    only_other = [{"matchExpressions": [{"key": "other.example.com/fit", "operator": "Gt", "values": ["3"]}]}]
    assert run(c, [wl("b", affinity_terms=only_other)])["b"].podsets[0].flavor == "small"
    assert run(c, [wl("c", node_selector={POOL: "big"})])["c"].podsets[0].flavor == "big"


def test_preempt_stops_search_under_may_stop() -> None:
    # TestAssignFlavors "multiple flavors, preempt in first, fits in second" with whenCanPreempt:
    # MayStopSearch: the first flavor's Preempt wins although the second has room
    c = chain([("small", 2), ("big", 8)])
    held = wl("low", gpu=2, priority=0, holding=holds("small"))
    out = run(c, [held, wl("high", gpu=1, priority=10)])
    assert out["high"].outcome == PREEMPT
    assert out["high"].podsets[0].flavor == "small"
    assert out["high"].preempts == ["ns/low"]
    assert out["low"].outcome == PREEMPTED and out["low"].preempted_by == "ns/high"
    tried = run(chain([("small", 2), ("big", 8)], when_can_preempt="TryNextFlavor"),
                [wl("low", gpu=2, holding=holds("small")), wl("high", gpu=1, priority=10)])
    assert tried["high"].outcome == ADMITTED and tried["high"].podsets[0].flavor == "big"
    assert tried["low"].outcome == KEPT


def test_no_candidates_tries_next_flavor() -> None:
    # equal priority: nobody to preempt (withinClusterQueue LowerPriority), so the next flavor
    c = chain([("small", 2), ("big", 8)])
    out = run(c, [wl("old", gpu=2, priority=5, holding=holds("small")), wl("new", gpu=1, priority=5)])
    assert out["new"].podsets[0].flavor == "big"
    assert out["new"].podsets[0].reasons == [f"insufficient unused quota for {GPU} in flavor small, 1 more needed"]
    single = run(chain([("small", 2)]), [wl("old", gpu=2, priority=5, holding=holds("small")),
                                         wl("new", gpu=1, priority=5)])
    assert single["new"].outcome == PENDING
    assert single["new"].reason.endswith("insufficient unused quota for example.com/credits in flavor small, "
                                         "1 more needed")


def test_minimal_preemption_set() -> None:
    # TestPreemption "preempt lowest priority" + minimal set: candidates are taken lowest priority
    # first, then the most recently admitted; one that is not needed is given back
    c = chain([("f", 4)])
    holders = [wl("p1-old", gpu=1, priority=1, holding=holds("f", at="2026-01-01T00:00:00Z")),
               wl("p1-new", gpu=1, priority=1, holding=holds("f", at="2026-01-02T00:00:00Z")),
               wl("p2", gpu=2, priority=2, holding=holds("f"))]
    out = run(c, holders + [wl("high", gpu=2, priority=9)])
    assert out["high"].outcome == PREEMPT
    assert out["high"].preempts == ["ns/p1-new", "ns/p1-old"]
    assert out["p2"].outcome == KEPT
    # needing 2 where p1-new (1) and then p2 (2) are taken: p1-new is given back
    out = run(c, [holders[1], holders[2], wl("mid", gpu=1, priority=1, holding=holds("f")),
                  wl("high", gpu=2, priority=9)])
    assert sorted(out["high"].preempts) == ["ns/mid", "ns/p1-new"]


def test_order_priority_then_creation() -> None:
    c = chain([("f", 1)])
    out = run(c, [wl("late-high", priority=5, created="2026-01-03T00:00:00Z"),
                  wl("early-low", priority=0, created="2026-01-01T00:00:00Z"),
                  wl("early-high", priority=5, created="2026-01-02T00:00:00Z")])
    assert out["early-high"].outcome == ADMITTED
    assert out["late-high"].outcome == PENDING and out["early-low"].outcome == PENDING


def test_extra_workloads_queue_after_snapshot_ones() -> None:
    extra = wl("extra", created="")
    extra.extra = True
    out = run(chain([("f", 1)]), [extra, wl("snap", created="2026-06-01T00:00:00Z")])
    assert out["snap"].outcome == ADMITTED and out["extra"].outcome == PENDING


def test_strict_fifo_blocks_best_effort_does_not() -> None:
    # TestSchedule "strict FIFO" vs "best effort FIFO"
    workloads = [wl("big", gpu=3, created="2026-01-01T00:00:00Z"), wl("small", gpu=1, created="2026-01-02T00:00:00Z")]
    best = run(chain([("f", 2)]), workloads)
    assert best["big"].outcome == PENDING and best["small"].outcome == ADMITTED
    strict = run(chain([("f", 2)], strategy="StrictFIFO"), workloads)
    assert strict["big"].outcome == PENDING and strict["small"].outcome == PENDING
    assert "waiting behind ns/big" in strict["small"].reason


@pytest.mark.parametrize("change, reason", [
    (lambda c: c.local_queues.clear(), "LocalQueue ns/lq doesn't exist"),
    (lambda c: c.queues.clear(), "ClusterQueue cq doesn't exist"),
    (lambda c: setattr(c.queues["cq"], "inactive", "stopPolicy is Hold"), "ClusterQueue cq is inactive"),
])
def test_chain_links(change: Any, reason: str) -> None:
    c = chain([("f", 1)])
    change(c)
    out = run(c, [wl("a")])
    assert out["a"].outcome == PENDING and out["a"].reason == reason


def test_eviction_when_flavor_removed_then_readmitted() -> None:
    # admission.md §4 seed: a workload on a dropped partial-pool flavor is evicted and re-admitted
    c = chain([("kept", 4)])
    out = run(c, [wl("h", holding=holds("gone"))], evict=True)
    assert out["h"].evicted == "flavor gone was removed from the ClusterQueue"
    assert out["h"].outcome == ADMITTED and out["h"].podsets[0].flavor == "kept"
    assert run(c, [wl("h", holding=holds("gone"))])["h"].outcome == KEPT  # live: nothing is checked


def test_draining_queue_evicts() -> None:
    c = chain([("f", 4)], stop_policy="HoldAndDrain", inactive="stopPolicy is HoldAndDrain")
    out = run(c, [wl("h", holding=holds("f"))], evict=True)
    assert out["h"].outcome == EVICTED and out["h"].evicted == "ClusterQueue is draining"


def test_quota_kept_on_decrease() -> None:
    # Kueue never evicts for a quota decrease: the holder keeps it, a newcomer waits
    c = chain([("f", 1)])
    out = run(c, [wl("h", gpu=3, holding=holds("f")), wl("n", gpu=1)], evict=True)
    assert out["h"].outcome == KEPT and out["n"].outcome == PENDING


def test_admission_checks_reserve_quota_only() -> None:
    out = run(chain([("f", 2)], admission_checks=["check-a", "check-b"]), [wl("a")])
    assert out["a"].outcome == QUOTA_RESERVED
    assert out["a"].reason == "quota reserved; waiting for admission checks: check-a, check-b"


def test_tas_required_one_node() -> None:
    # TAS: required at the hostname level puts every Pod on one Node
    c = chain([("f", 100)], tas=True)
    nodes = [node("n1", "f", gpu=2), node("n2", "f", gpu=4), node("n3", "f", gpu=8)]
    out = run(c, [wl("a", gpu=1, count=3, topology=REQUIRED)], nodes)
    assert out["a"].podsets[0].nodes == {"n2": 3}  # the one left with the least room
    too_big = run(c, [wl("b", gpu=1, count=9, topology=REQUIRED)], nodes)
    assert too_big["b"].outcome == PENDING
    assert 'topology "topo" allows to fit only 8 out of 9 pod(s)' in too_big["b"].podsets[0].reasons


def test_tas_spread_and_none_fit() -> None:
    c = chain([("f", 100)], tas=True)
    nodes = [node("n1", "f", gpu=2), node("n2", "f", gpu=2)]
    out = run(c, [wl("a", gpu=1, count=3)], nodes)
    assert sum(out["a"].podsets[0].nodes.values()) == 3 and set(out["a"].podsets[0].nodes) == {"n1", "n2"}
    none = run(c, [wl("b", gpu=3)], nodes)
    assert none["b"].podsets[0].reasons == ['topology "topo" doesn\'t allow to fit any of 1 pod(s)']


def test_tas_holders_take_room_and_preempt() -> None:
    c = chain([("f", 100)], tas=True)
    nodes = [node("n1", "f", gpu=2)]
    low = wl("low", gpu=2, priority=0, holding=holds("f", {"n1": 1}))
    out = run(c, [low, wl("same", gpu=1, priority=0)], nodes)
    assert out["same"].outcome == PENDING  # quota fits, the Node is full, nobody lower to preempt
    out = run(c, [low, wl("high", gpu=1, priority=5)], nodes)
    assert out["high"].outcome == PREEMPT and out["high"].preempts == ["ns/low"]
    assert out["high"].podsets[0].nodes == {"n1": 1}


def test_unready_node_and_reserve() -> None:
    c = chain([("f", 100)], tas=True)
    down = node("n1", "f", gpu=4)
    down.schedulable = False
    assert run(c, [wl("a")], [down])["a"].outcome == PENDING
    out = run(c, [wl("b", cpu="10")], [node("n2", "f", cpu="16")], reserve={"cpu": Fraction(8)})
    assert out["b"].outcome == PENDING


def test_strict_quota_check_refuses_uncovered() -> None:
    out = run(chain([("f", 2)]), [wl("a")], strict_quota=True)
    assert out["a"].outcome == PENDING
    assert out["a"].reason == "couldn't assign flavors to pod set main: resource cpu unavailable in ClusterQueue"
    assert run(chain([("f", 2)]), [wl("a")])["a"].outcome == ADMITTED  # IgnoreUndeclared


def test_debt_counts_from_zero_available() -> None:
    # Kueue's Available is 0 when the queue is in debt (a quota decrease): N more needed = own + request
    out = run(chain([("f", 1)]), [wl("h", gpu=3, holding=holds("f")), wl("n", gpu=1, priority=5)])
    assert out["n"].podsets[0].reasons == [f"insufficient unused quota for {GPU} in flavor f, 1 more needed"]


def test_untried_podsets_listed() -> None:
    c = chain([("f", 1)])
    c.local_queues.clear()
    entry = run(c, [wl("a", gpu=2)])["a"]
    assert [(p.podset.name, p.flavor, p.mode) for p in entry.podsets] == [("main", None, -1)]


def test_usage_after_run() -> None:
    result = admit(Cluster(chain([("f", 4)]), [], [wl("h", gpu=1, holding=holds("f")), wl("n", gpu=2)]), False)
    assert result.usage["cq"][("f", GPU)] == 3
