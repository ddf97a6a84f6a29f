"""The Kueue chain objects (rendered manifests or the snapshot's own) read into a :class:`Chain`.

One reading for both ``--chain rendered`` (the render's own dicts, exactly as it would apply them)
and ``--chain live`` (the snapshot's objects): LocalQueue, ClusterQueue, ResourceFlavor, Topology,
AdmissionCheck of Kueue's group, any served version.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable, Mapping

from gpustack_render.admit.model import Chain, FlavorQuota, FlavorSpec, QueueSpec
from gpustack_render.k8s import QuantityError, format_binary_si, format_decimal_si, parse_quantity
from gpustack_render.rules.admission import CPU, kueue_value as resource_value
from gpustack_render.snapshot.workload_model import GROUP as KUEUE_GROUP

HOLD_AND_DRAIN = "HoldAndDrain"  # evicts what the queue holds; plain Hold only stops new admissions
HOLD_POLICIES = frozenset({"Hold", HOLD_AND_DRAIN})
# Kubernetes' byte-sized resources, which Kueue prints in BinarySI (pkg/resources ResourceQuantity).
BINARY_RESOURCES = frozenset({"memory", "ephemeral-storage"})
BINARY_PREFIX = "hugepages-"


@lru_cache(maxsize=1 << 14)  # (the same few amounts over 50,000 Workloads)
def quantity_text(resource: str, value: int) -> str:
    """An int64 amount as Kueue prints it (``1600k``, ``4``, ``500m``, ``3Gi``): cpu from milli-units,
    the byte-sized resources in BinarySI, everything else in DecimalSI."""
    if resource == CPU:
        return format_decimal_si(value // 1000) if value % 1000 == 0 else f"{value}m"
    if resource in BINARY_RESOURCES or resource.startswith(BINARY_PREFIX):
        return format_binary_si(value)
    return format_decimal_si(value)


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _nominal(resource: str, raw: Any) -> int:
    try:
        return resource_value(resource, parse_quantity(raw))  # (which refuses a bool, a mapping, a list, null)
    except QuantityError:
        return 0


def _queue(name: str, spec: Mapping[str, Any]) -> tuple[QueueSpec, list[str]]:
    """The queue, and every flavor name its resource groups use (for the inactive checks)."""
    groups = _list(spec.get("resourceGroups"))
    covered: list[str] = []
    flavors: list[FlavorQuota] = []
    for group in groups:
        group = _map(group)
        covered += [str(r) for r in _list(group.get("coveredResources"))]
        for flavor in _list(group.get("flavors")):
            flavor = _map(flavor)
            nominal = {str(_map(r).get("name")): _nominal(str(_map(r).get("name")), _map(r).get("nominalQuota"))
                       for r in _list(flavor.get("resources"))}
            flavors.append(FlavorQuota(str(flavor.get("name")), nominal))
    checks = [str(c) for c in _list(spec.get("admissionChecks"))]
    checks += [str(_map(c).get("name")) for c in _list(_map(spec.get("admissionChecksStrategy")).get("admissionChecks"))]
    queue = QueueSpec(
        name=name, covered=covered, flavors=flavors,
        strategy=str(spec.get("queueingStrategy") or "BestEffortFIFO"),
        preempt_within=str(_map(spec.get("preemption")).get("withinClusterQueue") or "Never"),
        when_can_preempt=str(_map(spec.get("flavorFungibility")).get("whenCanPreempt") or "TryNextFlavor"),
        admission_checks=checks, stop_policy=str(spec.get("stopPolicy") or "None"),
        cohort=str(spec.get("cohortName") or spec.get("cohort") or ""))
    return queue, [f.name for f in flavors]


def _flavor(name: str, spec: Mapping[str, Any]) -> FlavorSpec:
    labels = {str(k): str(v) for k, v in _map(spec.get("nodeLabels")).items()}
    return FlavorSpec(name, labels, _list(spec.get("nodeTaints")), _list(spec.get("tolerations")),
                      str(spec.get("topologyName") or ""))


def _active(obj: Mapping[str, Any]) -> bool:
    """An AdmissionCheck is active unless its ``Active`` condition says ``False``."""
    for condition in _list(_map(obj.get("status")).get("conditions")):
        condition = _map(condition)
        if condition.get("type") == "Active":
            return condition.get("status") != "False"
    return True


def read_chain(objects: Iterable[Mapping[str, Any]]) -> Chain:
    """The chain of ``objects`` (other kinds are skipped), with each ClusterQueue's inactive reason."""
    chain = Chain()
    flavor_uses: dict[str, list[str]] = {}
    for obj in objects:
        api, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api, str) or api.rpartition("/")[0] != KUEUE_GROUP:
            continue
        meta, spec = _map(obj.get("metadata")), _map(obj.get("spec"))
        name = str(meta.get("name") or "")
        if kind == "LocalQueue":
            chain.local_queues[(str(meta.get("namespace") or "default"), name)] = str(spec.get("clusterQueue") or "")
        elif kind == "ClusterQueue":
            chain.queues[name], flavor_uses[name] = _queue(name, spec)
        elif kind == "ResourceFlavor":
            chain.flavors[name] = _flavor(name, spec)
        elif kind == "Topology":
            chain.topologies[name] = [str(_map(level).get("nodeLabel")) for level in _list(spec.get("levels"))]
        elif kind == "AdmissionCheck":
            chain.checks[name] = _active(obj)
    for name, queue in chain.queues.items():
        queue.inactive = _inactive(chain, queue, flavor_uses[name])
    return chain


def _inactive(chain: Chain, queue: QueueSpec, flavors: list[str]) -> str:
    """Why Kueue would mark the queue inactive (its ``Active`` condition False), "" when active."""
    if queue.stop_policy in HOLD_POLICIES:
        return f"stopPolicy is {queue.stop_policy}"
    for flavor in flavors:
        if flavor not in chain.flavors:
            return f"flavor {flavor} doesn't exist"
        topology = chain.flavors[flavor].topology
        if topology and topology not in chain.topologies:
            return f"Topology {topology} doesn't exist"
    for check in queue.admission_checks:
        if check not in chain.checks:
            return f"AdmissionCheck {check} doesn't exist"
        if not chain.checks[check]:
            return f"AdmissionCheck {check} is inactive"
    kinds = {bool(chain.flavors[f].topology) for f in flavors}
    if len(kinds) > 1:
        return "TAS and non-TAS flavors in one resource group"
    return ""
