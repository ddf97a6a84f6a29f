"""The plan: what stage 4 decided, as plain data the templates render. Templates see only this."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class FlavorPlan:
    name: str
    accelerated: bool
    gkey: str
    gmanu: str
    akey: str
    manufacturer: str
    os: str
    arch: str
    count: int
    profile: str
    topology_name: str
    nodes: list[str]
    labels: dict[str, str] = field(default_factory=dict)
    node_labels: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    note_prefix: str = ""  # Vocabulary notePrefix: the template writes each note as <note_prefix><note>

    @property
    def capacity(self) -> int:
        return len(self.nodes) * self.count


@dataclass
class PoolPlan:
    name: str
    accelerated: bool
    general_group: str
    accelerator_group: str
    os: str
    arch: str
    catalog_name: str
    flavors: list[FlavorPlan] = field(default_factory=list)


@dataclass
class InstanceTypePlan:
    name: str
    display_name: str
    general_group: str
    accelerator_group: str
    acceleratable: bool
    os: str
    arch: str
    unit_cpu: str
    unit_ram: str
    local_storage: str


@dataclass
class QueueFlavorQuota:
    name: str
    resource: str
    nominal_quota: str


@dataclass
class ClusterQueuePlan:
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    covered_resource: str
    flavors: list[QueueFlavorQuota]
    kept_resource_groups: Any
    admission_checks: list[str]
    stop_policy: str
    refusal: str = ""  # the refusal reason (TooManyFlavors, ...) when the plan was refused
    # why each value was decided is not kept here (templates see only this): the evaluator records it,
    # when explain asks, as Decisions (evaluate/record.py)


@dataclass
class LocalQueuePlan:
    name: str
    namespace: str
    cluster_queue: str


@dataclass
class TopologyPlan:
    name: str
    levels: list[str]


@dataclass
class AdmissionCheckPlan:
    name: str
    controller_name: str


@dataclass(slots=True)
class NodeFeaturePlan:
    """One per Node (10,000 of them): slotted, so each is built and read a little faster."""

    name: str
    namespace: str
    node: str
    labels: dict[str, str]


@dataclass
class CatalogItemPlan:
    name: str
    general_group: str
    accelerator_group: str
    acceleratable: bool
    manufacturer: str
    product: str
    family: str
    memory: str
    cores: str
    sliceable: bool


@dataclass
class Plan:
    node_features: list[NodeFeaturePlan] = field(default_factory=list)
    topologies: list[TopologyPlan] = field(default_factory=list)
    admission_checks: list[AdmissionCheckPlan] = field(default_factory=list)
    flavors: list[FlavorPlan] = field(default_factory=list)
    instance_types: list[InstanceTypePlan] = field(default_factory=list)
    cluster_queues: list[ClusterQueuePlan] = field(default_factory=list)
    local_queues: list[LocalQueuePlan] = field(default_factory=list)
    catalog: list[CatalogItemPlan] = field(default_factory=list)
