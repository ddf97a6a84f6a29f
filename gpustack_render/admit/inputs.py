"""The engine's inputs built from the snapshot: Workloads (the one typed model) and Nodes' room.

``usage_of`` is the rule data's quota accounting (admission.md §3: the transformations, int64,
× count), handed in by the pipeline, so this module holds no table of its own.
"""

from __future__ import annotations

from datetime import timezone
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping

import msgspec

from gpustack_render.admit.model import (PREFERRED, REQUIRED, UNCONSTRAINED, Holding, NodeRoom, PodSetDemand,
                                         WorkloadDemand)
from gpustack_render.errors import Problem, UserError
from gpustack_render.k8s import QuantityError, parse_quantity
from gpustack_render.snapshot import Snapshot
from gpustack_render.snapshot.workload_model import PodSet, Workload

UsageOf = Callable[[Mapping[str, Fraction], int], dict[str, int]]
NOT_READY = frozenset({"False", "Unknown"})


def _stamp(value: Any) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if value is not None else ""


def _topology(podset: PodSet) -> tuple[str, str]:
    request = podset.topology()
    if request is None:
        return "", ""
    if request.required:
        return REQUIRED, request.required
    if request.preferred:
        return PREFERRED, request.preferred
    return (UNCONSTRAINED, "") if request.unconstrained else ("", "")


def _podset(podset: PodSet, usage_of: UsageOf) -> PodSetDemand:
    spec = podset.template.spec
    per_pod = spec.pod_requests()
    terms = spec.required_terms()
    mode, level = _topology(podset)
    return PodSetDemand(
        name=podset.ref, count=podset.count, per_pod=per_pod, usage=usage_of(per_pod, podset.count),
        node_selector=dict(spec.nodeSelector or {}),
        affinity_terms=None if terms is None else msgspec.to_builtins(terms),
        tolerations=msgspec.to_builtins(spec.tolerations), topology=mode, topology_level=level)


def _holding(w: Workload) -> Holding | None:
    if not w.holds_quota:
        return None
    admission = w.status.admission
    assert admission is not None
    by_name = {a.name: (a, w.placements[i] if i < len(w.placements) else None)
               for i, a in enumerate(admission.podSetAssignments)}
    flavors, nodes = [], []
    for podset in w.spec.podSets:
        assignment, placement = by_name.get(podset.ref, (None, None))
        flavors.append(dict(assignment.flavors) if assignment is not None else {})
        nodes.append(placement.lowest() if placement is not None else {})
    return Holding(admission.clusterQueue, flavors, nodes, _stamp(w.quota_reserved_at), w.admitted)


def demand(w: Workload, usage_of: UsageOf, extra: bool = False) -> WorkloadDemand:
    return WorkloadDemand(w.namespace, w.name, w.spec.queueName or "", w.priority, _stamp(w.meta.creationTimestamp),
                          [_podset(p, usage_of) for p in w.spec.podSets], None if extra else _holding(w), extra)


def _memo(usage_of: UsageOf) -> UsageOf:
    """``usage_of`` computed once per distinct (requests, count): Workloads repeat a few shapes."""
    seen: dict[tuple[tuple[tuple[str, Fraction], ...], int], dict[str, int]] = {}

    def usage(per_pod: Mapping[str, Fraction], count: int) -> dict[str, int]:
        key = (tuple(per_pod.items()), count)
        found = seen.get(key)
        if found is None:
            found = seen[key] = usage_of(per_pod, count)
        return dict(found)
    return usage


def demands(snapshot_workloads: Iterable[Workload], extra: Iterable[Workload], usage_of: UsageOf) -> list[WorkloadDemand]:
    """Every Workload the preview lists: the snapshot's (Finished ones left out), then ``--workloads``."""
    usage_of = _memo(usage_of)
    out = [demand(w, usage_of) for w in snapshot_workloads if not w.finished]
    return out + [demand(w, usage_of, extra=True) for w in extra]


def _ready(ready: object) -> bool | None:
    """The ``Ready`` condition's verdict (``None``: the Node has no conditions at all)."""
    return None if ready is None else ready not in NOT_READY


def _allocatable(snapshot: Snapshot, name: str, node: Any, problems: list[Problem]) -> dict[str, Fraction]:
    """``status.allocatable``: the capacity, with the entries the snapshot keeps where allocatable
    differs from it (snapshot/inputs.admit_view)."""
    out: dict[str, Fraction] = dict(node.status.capacity or {})
    raw = node.status.allocatable
    if not isinstance(raw, dict):
        return out
    for resource, value in raw.items():
        try:
            out[str(resource)] = parse_quantity(value)  # (which refuses a bool, a mapping, a list, null)
        except QuantityError as err:
            problems.append(Problem(str(err), file=snapshot.files.get(("Node", name), ""), obj=f"Node/{name}",
                                    path=f"status.allocatable.{resource}"))
    return out


def node_rooms(snapshot: Snapshot, labels_of: Mapping[str, Mapping[str, str]]) -> tuple[list[NodeRoom], list[str]]:
    """Each snapshot Node with the labels of the chain mode (``labels_of``), taints, room and whether
    it takes new Pods; the notes the output states once."""
    problems: list[Problem] = []
    rooms: list[NodeRoom] = []
    unconditioned = 0
    for name in sorted(snapshot.nodes):
        node = snapshot.nodes[name]
        ready = _ready(node.status.ready)
        unconditioned += ready is None
        taints = node.spec.taints if isinstance(node.spec.taints, list) else []
        schedulable = node.spec.unschedulable is not True and ready is not False
        labels = dict(labels_of.get(name, node.metadata.labels or {}))
        rooms.append(NodeRoom(name, labels, taints, _allocatable(snapshot, name, node, problems), schedulable))
    if problems:
        raise UserError(problems)
    notes = ["Pods that no Workload accounts for (DaemonSets, Pods outside Kueue) are not in a snapshot; "
             "--reserve RESOURCE=QTY takes room on every Node for them"]
    if unconditioned:
        notes.append(f"{unconditioned} Node(s) have no status.conditions (a hand-written snapshot): counted as Ready")
    return rooms, notes
