"""ClusterQueues (stage4-chain.md §2): flavor selection, the validated resource group, refusals,
stopPolicy and admission checks. Each decision is recorded (when a recorder is given) for ``explain``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from gpustack_render.snapshot import inputs
from gpustack_render.errors import Diagnostics
from gpustack_render.evaluate.chain import flavor_order, flavor_selector, queue_labels
from gpustack_render.evaluate.nodes import ShapeGroup
from gpustack_render.evaluate.plan import ClusterQueuePlan, FlavorPlan, QueueFlavorQuota
from gpustack_render.evaluate.record import Decision, Recorder
from gpustack_render.k8s import format_decimal_si
from gpustack_render.rules import Rules
from gpustack_render.snapshot import Snapshot


@dataclass(frozen=True)
class Refusal:
    """Why a queue's plan is refused: ``text`` is what the warning and ``ClusterQueuePlan.refusal``
    say; ``flavors`` and ``nodes`` are the objects it names, so that ``explain`` can tell which Nodes
    and flavors a refusal is about without searching the text for their names."""

    text: str
    flavors: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()


class NodeMatcher:
    """Which managed Nodes each flavor's ``nodeLabels`` select, computed per distinct label signature."""

    def __init__(self, groups: list[ShapeGroup], flavors: list[FlavorPlan]) -> None:
        keys = sorted({k for f in flavors for k in f.node_labels})
        signatures: dict[frozenset[tuple[str, str]], list[str]] = {}
        # A NodeShape fixes the converged value of every key a flavor's nodeLabels hold (they are the
        # rules' exact keys, aKey-prefixed keys and the NodeFeature's own: all in the signature;
        # tests/test_speed_evaluate.py checks it), so the label signature is built once per shape
        # group, from its first Node (the groups come in the order of their first Nodes, which keeps
        # the signatures in the order their first Node comes).
        for group in groups:
            node = group.first
            if node.managed:
                converged = node.converged
                sig = frozenset((k, converged[k]) for k in keys if k in converged)
                signatures.setdefault(sig, []).extend(group.names)
        self.matches: dict[str, list[str]] = {}
        self.by_signature: list[tuple[list[str], set[str]]] = []
        candidates = _by_rarest_label(flavors)
        for sig, nodes in signatures.items():
            matched = {f.name for item in sig for f in candidates.get(item, ()) if f.node_labels.items() <= sig}
            matched.update(f.name for f in candidates.get(None, ()))
            self.by_signature.append((nodes, matched))
            for name in matched:
                self.matches.setdefault(name, []).extend(nodes)


def _by_rarest_label(flavors: list[FlavorPlan]) -> dict[tuple[str, str] | None, list[FlavorPlan]]:
    """The flavors under the one ``nodeLabels`` item of each that the fewest flavors share (under
    ``None``: those that select by nothing, so every Node). A signature can only hold a flavor's
    ``nodeLabels`` if it holds that item, so each signature tests a few flavors, not all of them."""
    counts: dict[tuple[str, str], int] = {}
    for flavor in flavors:
        for item in flavor.node_labels.items():
            counts[item] = counts.get(item, 0) + 1
    out: dict[tuple[str, str] | None, list[FlavorPlan]] = {}
    for flavor in flavors:
        rarest = min(flavor.node_labels.items(), key=counts.__getitem__, default=None)
        out.setdefault(rarest, []).append(flavor)
    return out


class QueueBuilder:
    def __init__(self, rules: Rules, settings: Mapping[str, bool], snapshot: Snapshot, flavors: list[FlavorPlan],
                 matcher: NodeMatcher, missing_profiles: set[str], diag: Diagnostics,
                 recorder: Recorder | None = None) -> None:
        self.rules, self.settings, self.snapshot, self.diag = rules, settings, snapshot, diag
        self.recorder = recorder
        self.flavors, self.matcher, self.missing_profiles = flavors, matcher, missing_profiles
        self.rendered = {f.name for f in flavors}
        self.aware = rules.is_aware(settings)
        self.akey_prefix = rules.normalisation.aKey.labelPrefix
        self.M = rules.manufacturers.units_per_accelerator
        if recorder is not None:
            self._record_node_labels(recorder)

    def _record_node_labels(self, recorder: Recorder) -> None:
        """Which managed Nodes each flavor's ``spec.nodeLabels`` select (the matcher's answer, the one
        the refusals are decided on), beside the Nodes that contribute to it: a Node selected but not
        contributing makes a queue with the flavor overlap or not conserve its quota."""
        for flavor in self.flavors:
            recorder.record(f"ResourceFlavor/{flavor.name}", Decision(
                "flavor.nodeLabels", sorted(self.matcher.matches.get(flavor.name, [])),
                inputs=(("nodeLabels", dict(flavor.node_labels)), ("contributing", list(flavor.nodes)))))

    def build(self, name: str, general_group: str, accelerator_group: str, acceleratable: bool, os: str,
              arch: str, inactive: bool, it_deleting: bool = False) -> ClusterQueuePlan:
        labels = queue_labels(general_group, accelerator_group, acceleratable, os, arch, self.aware, self.rules)
        selector = flavor_selector(labels, self.rules).items()
        selected = sorted((f for f in self.flavors if selector <= f.labels.items() and f.capacity > 0),
                          key=flavor_order)
        existing = self.snapshot.cluster_queues.get(name)
        plan = ClusterQueuePlan(name=name, labels=labels, annotations={}, covered_resource="", flavors=[],
                                kept_resource_groups=None, admission_checks=[], stop_policy="None")
        quotas: list[int] = []
        refusal = self._refusal(name, selected) if selected else None
        if selected and refusal is None:
            quota = self.rules.queues.quota_accelerated if acceleratable else self.rules.queues.quota_cpu
            manufacturer = selected[0].notes.get("manufacturer", selected[0].manufacturer)
            plan.covered_resource = quota.resource.render({"manufacturer": manufacturer})
            quotas = [quota.nominal_quota(capacity=f.capacity, count=f.count, nodes=len(f.nodes), M=self.M)
                      for f in selected]
            plan.flavors = [QueueFlavorQuota(f.name, plan.covered_resource, format_decimal_si(value))
                            for f, value in zip(selected, quotas)]
        elif refusal is not None:
            plan.refusal = refusal.text
            kept, dropped = self._still_existing(existing.raw_resource_groups if existing else None)
            plan.kept_resource_groups = kept
            self.diag.warn(f"ClusterQueue/{name}: plan refused ({refusal.text}); {_kept_text(kept, dropped)}")
        plan.stop_policy = self._lifecycle(plan, selected, existing, inactive, it_deleting, acceleratable)
        if plan.flavors or plan.kept_resource_groups:
            plan.annotations[self.rules.vocabulary.tasQueueAnnotation] = "true"
        facts = {"acceleratable": acceleratable}
        plan.admission_checks = [c.name for c in self.rules.queues.admission_checks
                                 if c.when(facts, self.settings) and self._check_active(c.name)]
        plan.annotations = dict(sorted(plan.annotations.items()))
        if self.recorder is not None:
            self._record_instance_type(self.recorder, name, (general_group, accelerator_group, acceleratable, os,
                                                             arch, inactive), it_deleting)
            self._record(self.recorder, plan, dict(selector), selected, quotas, facts, refusal)
        return plan

    def _record_instance_type(self, recorder: Recorder, name: str, spec: tuple[str, str, bool, str, str, bool],
                              deleting: bool) -> None:
        """Which InstanceType the queue was built from (``derived`` from a pool, the ``snapshot``'s, or
        the snapshot's one ``deleting``) and the spec values it read: a snapshot InstanceType always
        wins over a derived one of the same name (InstanceTypes are create-only)."""
        source = "deleting" if deleting else "snapshot" if name in self.snapshot.instance_types else "derived"
        keys = ("generalGroup", "acceleratorGroup", "acceleratable", "os", "arch", "inactive")
        recorder.record(f"ClusterQueue/{name}", Decision("queue.instanceType", source, inputs=tuple(zip(keys, spec))))

    def _record(self, recorder: Recorder, plan: ClusterQueuePlan, selector: dict[str, str],
                selected: list[FlavorPlan], quotas: list[int], facts: Mapping[str, Any],
                refusal: Refusal | None) -> None:
        """The queue's selection (and, for flavors of its kind, the label that kept each out), the
        quota's inputs and value, the refusal with the flavors and Nodes it names, and the
        admission-check verdicts, for ``explain``."""
        subject, origins = f"ClusterQueue/{plan.name}", self.rules.origins
        kind_label = self.rules.vocabulary.acceleratableLabel
        names = {f.name for f in selected}
        rejected = []
        for flavor in self.flavors:
            if flavor.name in names or flavor.labels.get(kind_label) != plan.labels.get(kind_label):
                continue
            miss = next(((k, flavor.labels.get(k), v) for k, v in selector.items() if flavor.labels.get(k) != v), None)
            rejected.append({"flavor": flavor.name, "label": miss})
        recorder.record(subject, Decision(
            "queue.selection", [f.name for f in selected], inputs=(("selector", selector),),
            steps=tuple({"flavor": f.name, "count": f.count, "capacity": f.capacity, "nodes": list(f.nodes),
                         "manufacturer": f.notes.get("manufacturer", f.manufacturer),
                         "quota": ({"capacity": f.capacity, "count": f.count, "nodes": len(f.nodes), "M": self.M},
                                   quotas[i]) if quotas else None}
                        for i, f in enumerate(selected)) + tuple(rejected)))
        if refusal is not None:
            recorder.record(subject, Decision("queue.refusal", refusal.text, inputs=(
                ("flavors", list(refusal.flavors)), ("nodes", list(refusal.nodes)))))
        for i, check in enumerate(self.rules.queues.admission_checks):
            rule = f"Queues:admissionChecks.{i}"
            recorder.record(subject, Decision(
                "admissionCheck", check.name in plan.admission_checks, rule, origins.get(rule, ""),
                (("check", check.name), ("active", self._check_active(check.name))),
                self.rules.verdict(f"{rule}.when")(facts, self.settings)))

    def _still_existing(self, groups: Any) -> tuple[Any, list[str]]:
        """A kept (last good) plan keeps only the flavors that still exist (stage4-chain.md §2.5):
        a flavor of the render's own name format that it no longer renders is deleted (Kueue holds
        its finalizer until no queue references it, and dropping it is the update it waits for),
        whether or not the snapshot still holds it; a foreign flavor was never the render's and is
        kept. A group left without flavors goes (Kueue requires 1 to 64), and no group left means
        no groups at all. Returns the groups and the names dropped."""
        kept, dropped = [], []
        for group in groups or []:
            if not isinstance(group, dict) or not isinstance(group.get("flavors"), list):
                kept.append(group)
                continue
            flavors = []
            for flavor in group["flavors"]:
                name = flavor.get("name") if isinstance(flavor, dict) else None
                if isinstance(name, str) and not self._exists(name):
                    dropped.append(name)
                else:
                    flavors.append(flavor)
            if flavors:
                kept.append({**group, "flavors": flavors})
        return kept or None, sorted(set(dropped))

    def _exists(self, flavor: str) -> bool:
        """Whether a ResourceFlavor of this name is there once the render is applied."""
        return flavor in self.rendered or not flavor.startswith(self.rules.naming.resource_flavor_prefix)

    def _check_active(self, name: str) -> bool:
        check = self.snapshot.admission_checks.get(name)
        if check is None:
            return True
        return not any(c.type == "Active" and c.status == "False" for c in check.status.conditions)

    def _refusal(self, name: str, selected: list[FlavorPlan]) -> Refusal | None:
        limit = self.rules.queues.max_flavors_per_group
        if len(selected) > limit:
            return Refusal(f"TooManyFlavors: {len(selected)} flavors, at most {limit}")
        missing = [f.name for f in selected if f.profile in self.missing_profiles]
        if missing:
            return Refusal(f"MissingTopology: flavor(s) {', '.join(missing)} have no Topology", tuple(missing))
        names = {f.name for f in selected}
        for nodes, matched in self.matcher.by_signature:
            both = sorted(matched & names)
            if len(both) >= 2:
                node = min(nodes)
                return Refusal(f"OverlappingSelectors: Node {node} matches flavors {both[0]} and {both[1]}",
                               (both[0], both[1]), (node,))
        for flavor in selected:
            nodes_matched = len(self.matcher.matches.get(flavor.name, []))
            if nodes_matched * flavor.count != flavor.capacity:
                return Refusal(f"NonConservedQuota: flavor {flavor.name} has capacity {flavor.capacity} but "
                               f"{nodes_matched} managed Node(s) x {flavor.count} match its nodeLabels",
                               (flavor.name,))
        return None

    def _lifecycle(self, plan: ClusterQueuePlan, selected: list[FlavorPlan], existing: inputs.ClusterQueue | None,
                   inactive: bool, it_deleting: bool, acceleratable: bool) -> str:
        """The first lifecycle rule (rules/lifecycle.yaml) that holds decides the stop policy (with a
        recorder, it records the rule and, for a drain, the save rule)."""
        markers = self.rules.lifecycle.markers
        annotations = (existing.metadata.annotations or {}) if existing else {}
        current = existing.spec.stopPolicy if existing else ""
        facts = self._lifecycle_facts(plan, selected, existing, inactive, it_deleting, acceleratable)
        for warning in self.rules.lifecycle.warnings:
            if warning.when(facts, self.settings):
                self.diag.warn(f"ClusterQueue/{plan.name}: " + warning.message.render(
                    {"queue": plan.name, "instanceType": plan.name}) + f" [{warning.name}, {warning.origin}]")
        for index, rule in enumerate(self.rules.lifecycle.stop_policy):
            if not rule.when(facts, self.settings):
                continue
            if self.recorder is not None:
                self._record_lifecycle(self.recorder, plan.name, index, facts)
            if rule.groups == "none":
                plan.flavors, plan.kept_resource_groups = [], None
            elif rule.groups == "current":
                plan.flavors = []
                plan.kept_resource_groups = existing.raw_resource_groups if existing else None
            plan.annotations.update(rule.annotations)
            if rule.save_stop_policy:
                value, save_why = self._saved_policy(facts, current, annotations.get(markers.savedStopPolicy, ""),
                                                     plan.annotations)
                plan.annotations[markers.savedStopPolicy] = value
                if self.recorder is not None:
                    self.recorder.record(f"ClusterQueue/{plan.name}", Decision(
                        "lifecycle.save", value, inputs=(("currentStopPolicy", current),), steps=(save_why,)))
            return rule.stop_policy
        return "None"

    def _record_lifecycle(self, recorder: Recorder, queue: str, index: int, facts: Mapping[str, Any]) -> None:
        """The lifecycle rule that decided the stop policy, with its verdict over the facts it read."""
        rule = self.rules.lifecycle.stop_policy[index]
        recorder.record(f"ClusterQueue/{queue}", Decision(
            "lifecycle", rule.stop_policy, f"Lifecycle:stopPolicy.{index}.name", rule.origin,
            (("rule", rule.name), ("groups", rule.groups), *sorted(facts.items())),
            self.rules.verdict(f"Lifecycle:stopPolicy.{index}.when")(facts, self.settings)))

    def _lifecycle_facts(self, plan: ClusterQueuePlan, selected: list[FlavorPlan],
                         existing: inputs.ClusterQueue | None, inactive: bool, it_deleting: bool,
                         acceleratable: bool) -> dict[str, Any]:
        """The facts the lifecycle rules read. The renderer's own holds carry a marker (rules'
        ``markers``), so that the next render, which sees only the objects, can tell them from an
        admin's hold."""
        markers = self.rules.lifecycle.markers
        annotations = (existing.metadata.annotations or {}) if existing else {}
        current = existing.spec.stopPolicy if existing else ""
        marked = any(m in annotations for m in (markers.emptyPlanHold, markers.savedStopPolicy, markers.inactiveHold))
        return {
            "queueExists": existing is not None,
            "queueDeleting": bool(existing and existing.metadata.deletionTimestamp is not None),
            "instanceTypeDeleting": it_deleting, "inactive": inactive, "noFlavors": not selected,
            "hasGroups": bool(plan.flavors or plan.kept_resource_groups),
            "carriesQuota": existing is not None and any(r.nominalQuota > 0 for g in existing.spec.resourceGroups
                                                   for f in g.flavors for r in f.resources),
            "currentStopPolicy": current, "drained": current == "HoldAndDrain",
            "adminStopped": current in ("Hold", "HoldAndDrain") and not marked,
            "hasWorkloads": existing is not None and (existing.status.reservingWorkloads > 0
                                                or existing.status.admittedWorkloads > 0),
            "savedStopPolicy": annotations.get(markers.savedStopPolicy, ""), "acceleratable": acceleratable,
            "inactiveHeld": markers.inactiveHold in annotations, "planRefused": bool(plan.refusal),
        }

    def _saved_policy(self, facts: Mapping[str, Any], current: str, saved: str,
                      annotations: dict[str, str]) -> tuple[str, str]:
        """The policy a drain records for the restore: the first save rule that holds (rules/lifecycle.yaml
        ``save``) names it and may add markers; with no rule, the queue's current policy."""
        markers = self.rules.lifecycle.markers
        for rule in self.rules.lifecycle.save:
            if rule.when(facts, self.settings):
                annotations.update(rule.annotations)
                value = {"current": current or markers.savedWhenUnset, "saved": saved}.get(rule.stop_policy,
                                                                                          rule.stop_policy)
                return value or markers.savedWhenUnset, f"'{rule.name}' ({rule.origin})"
        return current or markers.savedWhenUnset, "default (the current policy)"


def _kept_text(kept: Any, dropped: list[str]) -> str:
    """How a refused plan's warning ends: what it keeps of the snapshot's resource groups, and which
    flavors it drops from them (:meth:`QueueBuilder._still_existing`)."""
    gone = f"{', '.join(dropped)}, which the render no longer has"
    if kept:
        return f"keeping the snapshot's resource groups without {gone}" if dropped else \
            "keeping the snapshot's resource groups"
    return f"the snapshot's resource groups held only {gone}; no resource groups" if dropped else "no resource groups"
