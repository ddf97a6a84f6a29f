"""ResourceFlavors (stage4-chain.md §1): contributing Nodes grouped by the rules' grouping key."""

from __future__ import annotations

import json
from typing import Mapping, Sequence

from gpustack_render.snapshot import inputs
from gpustack_render.errors import Diagnostics, UserError
from gpustack_render.evaluate.nodes import ARCH_LABEL, OS_LABEL, NodeFacts, NodeShape
from gpustack_render.evaluate.plan import FlavorPlan
from gpustack_render.evaluate.record import Decision, Recorder
from gpustack_render.rules import FlavorKind, Rules
from gpustack_render.rules.model import CpuAnnotations


def _present(value: str | None) -> str:
    """Empty or unresolved-template (``@…``) values count as absent."""
    return "" if not value or value.startswith("@") else value


def cpu_detail(annotations: Mapping[str, str], gmanu: str, accelerated: bool, cpu: CpuAnnotations) -> str:
    """The ``cpuDetail`` note: the Vocabulary ``cpuAnnotations`` read off the Node, in their order."""
    detail: dict[str, object] = {}
    if accelerated:
        for key, value in (("manufacturer", gmanu), ("product", annotations.get(cpu.product)),
                           ("family", annotations.get(cpu.family))):
            if _present(value):
                detail[key] = value
    for key, source in cpu.detail.items():
        if value := _present(annotations.get(source)):
            detail[key] = value
    detail["cache"] = {key: value for key, source in cpu.cache.items()
                       if (value := _present(annotations.get(source)))}
    return json.dumps(detail, separators=(",", ":"), ensure_ascii=False)


def flavor_fields(facts: NodeFacts, akey: str, count: int) -> dict[str, object]:
    """The fields the Naming formats of a Node's flavor (``akey`` "" for its CPU flavor) and of
    its pool are rendered with."""
    return {"gKey": facts.gkey, "gManu": facts.gmanu, "os": facts.os, "arch": facts.arch,
            "count": count, "profile": facts.profile, "aKey": akey,
            "manufacturer": akey.split("-", 1)[0] if akey else ""}


class FlavorBuilder:
    def __init__(self, rules: Rules, settings: Mapping[str, bool], diagnostics: Diagnostics,
                 recorder: Recorder | None = None) -> None:
        self.rules, self.settings, self.diag = rules, settings, diagnostics
        self.recorder = recorder
        self.aware = rules.is_aware(settings)
        self.vocab = rules.vocabulary
        self._groups: dict[tuple[str, tuple[object, ...]], FlavorPlan] = {}
        self._names: dict[str, tuple[str, tuple[object, ...]]] = {}
        self._akey_prefix = rules.normalisation.aKey.labelPrefix
        # per NodeShape: the flavors its Nodes join (with the aKey), the warnings they get and the
        # names of its later Nodes, added to those flavors in one step by flavors()
        self._replays: dict[NodeShape, tuple[list[tuple[FlavorPlan, str]], list[str], list[str]]] = {}

    def add_node(self, facts: NodeFacts, node: inputs.Node, warn: bool = True) -> None:
        """Add the Node to the flavors it contributes to. Which flavors those are, and what it is
        warned about, depend only on its :class:`NodeShape`: decided for the first Node of a shape
        and replayed for the others (unless recording, which decides every Node). Nodes come in name
        order, so a later Node of a shape never supplies a flavor's notes (the smallest name does):
        its name is only kept, to join the shape's flavors in :meth:`flavors`. ``warn=False`` keeps
        the warnings of the shape (:meth:`warnings_of`) instead of giving them for this Node."""
        shape = facts.shape if self.recorder is None else None
        replay = self._replays.get(shape) if shape is not None else None
        if replay is not None:
            replay[2].append(facts.name)
            for warning in replay[1]:
                self.diag.warn(f"Node/{facts.name}: {warning}")
            return
        joined: list[tuple[FlavorPlan, str]] = []
        warnings: list[str] = []
        cpu_kind, accel_kind = self.rules.grouping.flavor_cpu, self.rules.grouping.flavor_accelerated
        recorder = self.recorder
        if cpu_kind.contributes(facts.facts, self.settings):
            joined.append((self._add(cpu_kind, facts, node, "", facts.cpu_count), ""))
        if recorder is not None:
            self._record(recorder, facts, "cpu", "", facts.facts, None)
        for akey in facts.akeys:
            raw = facts.label(f"{self._akey_prefix}{akey}.count") or ""
            count = int(raw) if raw.isdigit() else 0
            if count <= 0:
                if facts.managed:
                    state = f"={raw!r} is not a positive integer" if raw else " is missing"
                    warnings.append(f"label {self._akey_prefix}{akey}.count{state}; no flavor for {akey}")
                    if warn:
                        self.diag.warn(f"Node/{facts.name}: {warnings[-1]}")
                if recorder is not None:
                    self._record(recorder, facts, "accelerated", akey, None, raw)
                continue
            node_facts = dict(facts.facts, acceleratorCount=count)
            if accel_kind.contributes(node_facts, self.settings):
                joined.append((self._add(accel_kind, facts, node, akey, count), akey))
            if recorder is not None:
                self._record(recorder, facts, "accelerated", akey, node_facts, raw)
        if shape is not None:
            self._replays[shape] = (joined, warnings, [])

    def add_shape(self, facts: NodeFacts, node: inputs.Node, later: Sequence[str]) -> tuple[str, ...]:
        """A whole shape at once: its first Node (``facts``, ``node``) decides, as :meth:`add_node`
        does, and the names of its ``later`` Nodes join the same flavors. The warnings each of its
        Nodes gets (the text after ``Node/NAME: ``) are returned, not given: the caller gives them
        per Node, in name order, after the Node's own."""
        shape = facts.shape
        assert shape is not None and self.recorder is None and shape not in self._replays
        self.add_node(facts, node, warn=False)
        replay = self._replays[shape]
        replay[2].extend(later)
        return tuple(replay[1])

    def reset(self) -> None:
        """Forget every Node added (the flavors, their names, the shapes' replays)."""
        self._groups.clear()
        self._names.clear()
        self._replays.clear()

    def _record(self, recorder: Recorder, facts: NodeFacts, kind: str, akey: str,
                node_facts: Mapping[str, object] | None, count_label: str | None) -> None:
        """Whether the Node contributes to its ``kind`` flavor (for ``explain``): the verdict of the
        rule's ``contributes``, or no verdict when the aKey's count label is not a positive integer."""
        rule = f"Grouping:flavor.{kind}.contributes"
        verdict = self.rules.verdict(rule)(node_facts, self.settings) if node_facts is not None else None
        inputs: tuple[tuple[str, object], ...] = (("aKey", akey),) if akey else ()
        if count_label is not None:
            inputs += (("countLabel", f"{self._akey_prefix}{akey}.count"), ("count", count_label))
        recorder.record(f"Node/{facts.name}", Decision(
            f"flavor.{kind}", verdict.value if verdict is not None else False, rule,
            self.rules.origins.get(rule, ""), inputs, verdict))

    def _add(self, kind: FlavorKind, facts: NodeFacts, node: inputs.Node, akey: str, count: int) -> FlavorPlan:
        fields = flavor_fields(facts, akey, count)
        key = ("a" if akey else "c", tuple(fields[f] for f in kind.key))
        flavor = self._groups.get(key)
        if flavor is None:
            name = kind.name.render(fields)
            self._claim_name(name, key, bool(akey))
            flavor = self._groups[key] = FlavorPlan(
                name=name, accelerated=bool(akey), gkey=facts.gkey, gmanu=facts.gmanu, akey=akey,
                manufacturer=str(fields["manufacturer"]), os=facts.os, arch=facts.arch, count=count,
                profile=facts.profile, topology_name=self.rules.naming.topology.render({"profile": facts.profile}),
                nodes=[])
            flavor.node_labels = self._node_labels(kind, facts, akey, count)
        self._join(flavor, facts, node, akey)
        return flavor

    def _join(self, flavor: FlavorPlan, facts: NodeFacts, node: inputs.Node, akey: str) -> None:
        if not flavor.nodes or facts.name < flavor.nodes[0]:
            flavor.notes = self._notes(facts, node, akey)  # the smallest Node name supplies notes
            flavor.nodes.insert(0, facts.name)
        else:
            flavor.nodes.append(facts.name)

    def _claim_name(self, name: str, key: tuple[str, tuple[object, ...]], accelerated: bool) -> None:
        """Two grouping keys must not share a flavor name: the second group would be applied over
        the first, and its Nodes would lose their flavor."""
        other = self._names.setdefault(name, key)
        if other != key:
            rule = f"resourceFlavor.{'accelerated' if accelerated else 'cpu'}"
            raise UserError.single(
                f"two flavor groups get the same name (grouping keys {list(other[1])} and {list(key[1])}); "
                f"the name format {rule} must keep every field of the grouping key",
                file=self.rules.origins.get(f"Naming:{rule}", ""), obj=f"ResourceFlavor/{name}")

    def _node_labels(self, kind: FlavorKind, facts: NodeFacts, akey: str, count: int) -> dict[str, str]:
        general = self.vocab.generalGroupPrefix
        labels = {self.rules.grouping.managed_key: "true", OS_LABEL: facts.os, ARCH_LABEL: facts.arch,
                  general + facts.gkey: "true", self.vocab.topologyProfile.label: facts.profile}
        if akey:
            labels[self._akey_prefix + akey] = "true"
            labels[f"{self._akey_prefix}{akey}.count"] = str(count)
        else:
            labels[f"{general}{facts.gkey}.count"] = str(count)
            if kind.pin_cpu_only and kind.pin_cpu_only(facts.facts, self.settings):
                labels[self.rules.grouping.cpu_only_key] = "true"
        return dict(sorted(labels.items()))

    def _notes(self, facts: NodeFacts, node: inputs.Node, akey: str) -> dict[str, str]:
        label, annotations = facts.label, node.metadata.annotations or {}
        notes: dict[str, str] = {"acceleratable": "true" if akey else "false", "generalGroup": facts.gkey}
        if akey:
            prefix = f"{self._akey_prefix}{akey}"
            notes.update(acceleratorGroup=akey, manufacturer=akey.split("-", 1)[0],
                         product=_present(label(prefix + ".product")),
                         family=_present(label(prefix + ".family")),
                         memory=_present(label(prefix + ".memory")),
                         cores=_present(label(prefix + ".cores")))
        else:
            notes.update(manufacturer=facts.gmanu,
                         product=_present(annotations.get(self.vocab.cpuAnnotations.product)),
                         family=_present(annotations.get(self.vocab.cpuAnnotations.family)))
        notes["topologyProfile"] = facts.profile
        if not akey or self.aware:
            notes["cpuDetail"] = cpu_detail(annotations, facts.gmanu, bool(akey), self.vocab.cpuAnnotations)
        return {k: v for k, v in notes.items() if v}

    def flavors(self) -> list[FlavorPlan]:
        for joined, _, later in self._replays.values():
            if later:
                for flavor, _ in joined:
                    flavor.nodes.extend(later)
                later.clear()
        out = []
        vocab, general = self.vocab, self.vocab.generalGroupPrefix
        for flavor in self._groups.values():
            own = (self._akey_prefix + flavor.akey) if flavor.accelerated else general + flavor.gkey
            labels = {own: "true", f"{own}.count": str(flavor.count), f"{own}.capacity": str(flavor.capacity),
                      vocab.acceleratableLabel: "true" if flavor.accelerated else "false",
                      OS_LABEL: flavor.os, ARCH_LABEL: flavor.arch, vocab.queueType.key: vocab.queueType.flavor,
                      vocab.topologyProfile.label: flavor.profile}
            if flavor.accelerated:
                labels[general + flavor.gkey] = "true"
            flavor.note_prefix = vocab.notePrefix
            flavor.labels = dict(sorted(labels.items()))
            flavor.nodes.sort()
            out.append(flavor)
        return sorted(out, key=lambda f: f.name)
