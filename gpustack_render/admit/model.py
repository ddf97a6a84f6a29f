"""The admission preview's own small inputs (admission.md §2–§4), independent of where they came from.

The engine (:mod:`gpustack_render.admit.engine`) runs over these plain dataclasses only: the
Workloads' demands per PodSet (quota usage already transformed, per-Pod requests before it), the
chain's queues and flavors, and the Nodes' room. ``inputs`` and ``chain`` build them from the typed Workload
model and the chain objects; tests build them directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

# Kueue's outcome words (admission.md §9).
ADMITTED = "Admitted"
QUOTA_RESERVED = "QuotaReserved"
PENDING = "Pending"
PREEMPT = "Preempt"
PREEMPTED = "Preempted"
EVICTED = "Evicted"
KEPT = "Kept"

# Flavor assignment modes, best last (Kueue: NoFit < Preempt < Fit; NoCandidates is a NoFit that
# found quota but nobody to preempt, ranked between them as admission.md §6 orders them).
NO_FIT, NO_CANDIDATES, PREEMPT_MODE, FIT = 0, 1, 2, 3
NOT_TRIED = -1  # a PodSet of a Workload that never reached flavor assignment (mode null in the output)
MODE_NAMES = {NO_FIT: "NoFit", NO_CANDIDATES: "NoCandidates", PREEMPT_MODE: "Preempt", FIT: "Fit"}

# Topology request modes of a PodSet.
REQUIRED, PREFERRED, UNCONSTRAINED = "required", "preferred", "unconstrained"


@dataclass
class PodSetDemand:
    name: str
    count: int
    per_pod: dict[str, Fraction]                 # one Pod's requests, before transformation (placement room)
    usage: dict[str, int]                        # quota usage (int64 accounting, transformed, × count)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity_terms: list[Any] | None = None      # required nodeSelectorTerms; None: no required affinity
    tolerations: list[Any] = field(default_factory=list)
    topology: str = ""                           # REQUIRED / PREFERRED / UNCONSTRAINED / "" (none asked)
    topology_level: str = ""
    # computed once when first needed (admit.nodes): the selector's cache key and one Pod's room
    selector_key: str | None = field(default=None, compare=False, repr=False)
    room: dict[str, int] | None = field(default=None, compare=False, repr=False)


@dataclass
class Holding:
    """A snapshot Workload's ``status.admission``: the queue, per PodSet its flavors and Nodes."""

    cluster_queue: str
    flavors: list[dict[str, str]]                # per PodSet (in spec order): resource → flavor
    nodes: list[dict[str, int]]                  # per PodSet: node name → Pods (empty: not placed)
    reserved_at: str = ""                        # QuotaReserved lastTransitionTime (later = more recent)
    admitted: bool = False                       # Admitted is True too


@dataclass
class WorkloadDemand:
    namespace: str
    name: str
    queue: str
    priority: int
    created: str                                 # metadata.creationTimestamp ("" when absent)
    podsets: list[PodSetDemand]
    holding: Holding | None = None               # holds quota (QuotaReserved and not Finished)
    extra: bool = False                          # from --workloads: queues after snapshot ones of equal priority

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class FlavorQuota:
    name: str
    nominal: dict[str, int]                      # covered resource → nominalQuota (int64 accounting)


@dataclass
class QueueSpec:
    name: str
    covered: list[str]
    flavors: list[FlavorQuota]                   # in the queue's order
    strategy: str = "BestEffortFIFO"
    preempt_within: str = "Never"                # preemption.withinClusterQueue
    when_can_preempt: str = "TryNextFlavor"      # flavorFungibility.whenCanPreempt
    admission_checks: list[str] = field(default_factory=list)
    stop_policy: str = "None"
    cohort: str = ""
    inactive: str = ""                           # why Kueue holds it inactive ("" when active)


@dataclass
class FlavorSpec:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: list[Any] = field(default_factory=list)
    tolerations: list[Any] = field(default_factory=list)
    topology: str = ""                           # topologyName ("" : not a TAS flavor)


@dataclass
class Chain:
    """One chain (rendered or live): LocalQueues, ClusterQueues, flavors, Topology levels, checks."""

    local_queues: dict[tuple[str, str], str] = field(default_factory=dict)
    queues: dict[str, QueueSpec] = field(default_factory=dict)
    flavors: dict[str, FlavorSpec] = field(default_factory=dict)
    topologies: dict[str, list[str]] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)        # name → active


@dataclass
class NodeRoom:
    name: str
    labels: dict[str, str]
    taints: list[Any]
    allocatable: dict[str, Fraction]
    schedulable: bool = True


@dataclass
class Cluster:
    """What admission runs over: the chain, the Nodes, the Workloads, and the reserved room."""

    chain: Chain
    nodes: list[NodeRoom]
    workloads: list[WorkloadDemand]
    reserve: dict[str, Fraction] = field(default_factory=dict)
    strict_quota: bool = False                   # quota-check strategy Strict (else IgnoreUndeclared)
    notes: list[str] = field(default_factory=list)
