"""The Workload fit pin (fit-pin.md), applied offline: which Workloads are pinned, what is added.

Upstream this is a mutating webhook on Kueue Workloads; it never rejects one, so every failure to
resolve means "leave it alone" and here the reason is reported as a note. Pure: Workloads, the
queue chain, the rules and the settings in; pinned copies, RFC 6902 patches and notes out.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping

from gpustack_render.evaluate.plan import Plan
from gpustack_render.k8s import valid_qualified_name
from gpustack_render.pin.workloads import REQUIRED, WorkloadInput
from gpustack_render.rules import Rules
from gpustack_render.snapshot import Snapshot
from gpustack_render.snapshot.workload_model import GROUP as KUEUE_GROUP

Op = dict[str, Any]
Requirement = dict[str, Any]


@dataclass
class QueueChain:
    """LocalQueue → ClusterQueue → InstanceType: the rendered plan first, then the snapshot's objects."""

    local_queues: dict[tuple[str, str], str | None] = field(default_factory=dict)   # (ns, name) → clusterQueue
    cluster_queues: dict[str, Mapping[str, Any]] = field(default_factory=dict)     # name → labels
    instance_types: dict[str, str | None] = field(default_factory=dict)            # name → acceleratorGroup
    namespaces: frozenset[str] | None = None                                       # the snapshot's live Namespaces
    rendered_local_queues: frozenset[str] = frozenset()                            # names of the rendered LocalQueues

    @classmethod
    def build(cls, plan: Plan, snapshot: Snapshot) -> "QueueChain":
        chain = cls(namespaces=frozenset(snapshot.namespaces),
                    rendered_local_queues=frozenset(lq.name for lq in plan.local_queues))
        for lq in plan.local_queues:
            chain.local_queues[(lq.namespace, lq.name)] = lq.cluster_queue
        for cq in plan.cluster_queues:
            chain.cluster_queues[cq.name] = cq.labels
        for it in plan.instance_types:
            chain.instance_types[it.name] = it.accelerator_group
        for (group, kind, namespace, name), obj in sorted(snapshot.raw.items()):
            if group == KUEUE_GROUP and kind == "LocalQueue":
                spec = obj.get("spec")
                target = spec.get("clusterQueue") if isinstance(spec, dict) else None
                chain.local_queues.setdefault((namespace, name), target if isinstance(target, str) else None)
            elif group == KUEUE_GROUP and kind == "ClusterQueue":
                meta = obj.get("metadata")
                labels = meta.get("labels") if isinstance(meta, dict) else None
                chain.cluster_queues.setdefault(name, labels if isinstance(labels, dict) else {})
        for types in (snapshot.instance_types, snapshot.deleted_instance_types):
            for name, existing in sorted(types.items()):
                chain.instance_types.setdefault(name, existing.spec.acceleratorGroup)
        return chain

    def resolve(self, namespace: str, queue: str, queue_type: tuple[str, str],
                reserved: frozenset[str] = frozenset()) -> tuple[str | None, str]:
        """The InstanceType's accelerator group (the aKey), or ``None`` and why not (§1 step 5).
        ``queue_type`` is the label (Vocabulary ``queueType``: key, queue value) that marks a ClusterQueue
        built from an InstanceType; ``reserved`` are the namespaces the rules give no LocalQueue, named
        when that is the cause."""
        if (namespace, queue) not in self.local_queues:
            return None, (f"LocalQueue {namespace}/{queue} does not exist (neither rendered nor in the snapshot): "
                          + self._why_no_local_queue(namespace, queue, reserved))
        cluster_queue = self.local_queues[(namespace, queue)]
        if not cluster_queue:
            return None, f"LocalQueue {namespace}/{queue} has no spec.clusterQueue"
        labels = self.cluster_queues.get(cluster_queue)
        if labels is None:
            return None, f"ClusterQueue {cluster_queue} (of LocalQueue {namespace}/{queue}) does not exist"
        key, value = queue_type
        if labels.get(key) != value:
            return None, f"ClusterQueue {cluster_queue} is not labelled {key}={value}"
        if cluster_queue not in self.instance_types:
            return None, f"InstanceType {cluster_queue} (of ClusterQueue {cluster_queue}) does not exist"
        group = self.instance_types[cluster_queue]
        if not group:
            return None, f"InstanceType {cluster_queue} has no spec.acceleratorGroup (a CPU queue)"
        return group, ""

    def _why_no_local_queue(self, namespace: str, queue: str, reserved: frozenset[str]) -> str:
        """Why the render made no such LocalQueue: the admin's fix differs (add the Namespace, use
        another namespace, or point the Workload at a queue that exists)."""
        if namespace in reserved:
            return f"namespace {namespace} is reserved (rules of kind Namespaces), so no LocalQueue is rendered there"
        if self.namespaces is not None and namespace not in self.namespaces:
            return (f"the snapshot has no live Namespace {namespace}, and LocalQueues are rendered only in the "
                    f"snapshot's Namespaces")
        if queue not in self.rendered_local_queues:
            return f"no rendered ClusterQueue has a LocalQueue named {queue}"
        return "its ClusterQueue's LocalQueue is rendered in other namespaces only"


@dataclass
class PodSetPin:
    index: int
    name: str
    requirements: list[Requirement]
    held: bool = True  # some required term holds the requirements (False: a selector with no non-empty term)


@dataclass
class PinResult:
    workload: WorkloadInput
    pinned: dict[str, Any]                      # the Workload as the webhook would leave it
    patch: list[Op]                             # RFC 6902, from the input to ``pinned``
    note: str = ""                              # why it was left alone ("" when pinned)
    group: str = ""                             # the accelerator group the keys use
    podsets: list[PodSetPin] = field(default_factory=list)


def pin_keys(rules: Rules, group: str) -> tuple[str, str]:
    """The two node label keys of ``group``: the fit-label formats of rules/capacity.yaml."""
    return rules.capacity.fit_sliced_label.render({"aKey": group}), rules.capacity.fit_shared_label.render({"aKey": group})


def requirements(units: int, shared: int, keys: tuple[str, str]) -> list[Requirement]:
    """§2: ``sliced > U-1`` when U > 0, then ``shared > N-1`` when N ≥ 2."""
    out = []
    if units > 0:
        out.append({"key": keys[0], "operator": "Gt", "values": [str(units - 1)]})
    if shared >= 2:
        out.append({"key": keys[1], "operator": "Gt", "values": [str(shared - 1)]})
    return out


def _same(a: Any, b: Requirement) -> bool:
    return isinstance(a, dict) and all(a.get(k) == b[k] for k in ("key", "operator", "values"))


def _present(value: Any) -> bool:
    return isinstance(value, list) and len(value) > 0


def merge_into(pod_spec: dict[str, Any], reqs: list[Requirement], base: str) -> list[Op]:
    """Add ``reqs`` to the required node affinity of ``pod_spec`` in place (§2); the ops, under ``base``
    (the pointer of ``pod_spec``), that do the same to the original."""
    affinity = pod_spec.get("affinity")
    term = {"matchExpressions": copy.deepcopy(reqs)}
    if affinity is None:
        value: dict[str, Any] = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [term]}}}
        pod_spec["affinity"] = value
        return [{"op": "add", "path": f"{base}/affinity", "value": copy.deepcopy(value)}]
    node_affinity = affinity.get("nodeAffinity")
    if node_affinity is None:
        value = {REQUIRED: {"nodeSelectorTerms": [term]}}
        affinity["nodeAffinity"] = value
        return [{"op": "add", "path": f"{base}/affinity/nodeAffinity", "value": copy.deepcopy(value)}]
    required = node_affinity.get(REQUIRED)
    if required is None:
        value = {"nodeSelectorTerms": [term]}
        node_affinity[REQUIRED] = value
        return [{"op": "add", "path": f"{base}/affinity/nodeAffinity/{REQUIRED}", "value": copy.deepcopy(value)}]
    ops: list[Op] = []
    terms = required.get("nodeSelectorTerms") or []  # a selector with zero terms stays as it is
    for j, selector in enumerate(terms):
        if not isinstance(selector, dict):
            continue  # a null term is empty: it matches nothing and stays empty
        expressions = selector.get("matchExpressions")
        if not (_present(expressions) or _present(selector.get("matchFields"))):
            continue
        missing = [r for r in reqs if not any(_same(e, r) for e in expressions or [])]
        path = f"{base}/affinity/nodeAffinity/{REQUIRED}/nodeSelectorTerms/{j}/matchExpressions"
        if not missing:
            continue
        if expressions is None:
            selector["matchExpressions"] = copy.deepcopy(missing)
            ops.append({"op": "add", "path": path, "value": copy.deepcopy(missing)})
            continue
        for requirement in missing:
            expressions.append(copy.deepcopy(requirement))
            ops.append({"op": "add", "path": f"{path}/-", "value": copy.deepcopy(requirement)})
    return ops


def pin_workload(workload: WorkloadInput, rules: Rules, chain: QueueChain, settings: Mapping[str, bool]) -> PinResult:
    """Apply the pin to one Workload (treated as a create: §1 step 4 always holds)."""
    pinned = copy.deepcopy(workload.obj)
    result = PinResult(workload, pinned, [])
    queue = workload.queue
    if not queue:
        result.note = "no spec.queueName, so not an operator queue"
        return result
    if not rules.naming.local_queue_pattern.match(queue):  # named by Naming localQueue: an operator queue
        result.note = f"queue {queue} is not an operator queue"
        return result
    demanding = [p for p in workload.podsets if p.demand.pins]
    if not demanding:
        result.note = "no PodSet has a demand (sliced units U > 0 or shared cards N >= 2)"
        return result
    if not rules.capacity.workload_fit_when({}, settings):
        setting = rules.conditions["Capacity:workloadFit.when"].setting
        result.note = (f"setting {setting} is false" if setting is not None else
                       f"Capacity workloadFit.when does not hold (settings: "
                       f"{', '.join(rules.settings_of('Capacity:workloadFit.when')) or 'none'})")
        return result
    queue_type = (rules.vocabulary.queueType.key, rules.vocabulary.queueType.queue)
    group, reason = chain.resolve(workload.namespace, queue, queue_type, rules.namespaces.reserved)
    if group is None:
        result.note = reason
        return result
    keys = pin_keys(rules, group)
    invalid = [key for key in keys if not valid_qualified_name(key)]
    if invalid:
        result.note = f"accelerator group {group!r} gives the invalid label key {invalid[0]!r}: {_key_problem(invalid[0])}"
        return result
    result.group = group
    for podset in demanding:
        reqs = requirements(podset.demand.units, podset.demand.shared, keys)
        pod_spec = pinned["spec"]["podSets"][podset.index]["template"]["spec"]
        result.patch += merge_into(pod_spec, reqs, f"/spec/podSets/{podset.index}/template/spec")
        result.podsets.append(PodSetPin(podset.index, podset.name, reqs, _non_empty_terms(pod_spec) > 0))
    if not result.patch:
        result.note = ("already pinned; nothing to add" if any(p.held for p in result.podsets) else
                       "the required node selector has no non-empty term to take the pin; nothing to add")
    return result


def _key_problem(key: str) -> str:
    """Why a fit-label key is not a valid label key, in the words of the Kubernetes rule it breaks."""
    name = key.rpartition("/")[2]
    if len(name) > 63:
        return f"its name part is {len(name)} characters, over 63"
    if key.count("/") > 1:
        return "the group holds a '/', and a label key has at most one"
    return "its name part must be alphanumerics, '-', '_' or '.', alphanumeric at both ends"


def _non_empty_terms(pod_spec: dict[str, Any]) -> int:
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED) or {}
    return sum(1 for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)
               and (_present(t.get("matchExpressions")) or _present(t.get("matchFields"))))


def pin_all(workloads: list[WorkloadInput], rules: Rules, chain: QueueChain,
            settings: Mapping[str, bool]) -> list[PinResult]:
    return [pin_workload(w, rules, chain, settings) for w in workloads]
