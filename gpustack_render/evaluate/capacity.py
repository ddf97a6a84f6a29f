"""Stage 3 node capacity (stage3-node.md §4) and per-card fit labels (§5): desired owned keys.

Pure: a Node, its Devices, its converged facts and the rules in; desired values and the owned-key
predicate out. The patch itself is computed in :mod:`gpustack_render.emit.patches`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping

from gpustack_render.snapshot import inputs
from gpustack_render.errors import Diagnostics
from gpustack_render.evaluate.nodes import NodeFacts
from gpustack_render.k8s import QuantityError, memory_label_mib, valid_qualified_name
from gpustack_render.rules import CapacityFamilyRule, ManufacturerRule, Rules
from gpustack_render.rules.model import FitPopulations

@dataclass
class _Tally:
    """One manufacturer's sums over its models."""

    values: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    logical: int = 0
    partitioned: int = 0
    profiles: dict[str, int] = field(default_factory=lambda: defaultdict(int))


@dataclass
class NodeDesired:
    capacity: dict[str, int]
    labels: dict[str, str]


class CapacityEvaluator:
    def __init__(self, rules: Rules, diagnostics: Diagnostics) -> None:
        self.rules, self.diag = rules, diagnostics
        self.M = rules.units_per_accelerator
        self._akey_prefix = rules.normalisation.aKey.labelPrefix
        self._owned_exact: set[str] = set()
        self._owned_prefixes: list[str] = []
        for manu in rules.manufacturers.values():
            for family in rules.capacity_families:
                self._owned_exact.update(k.render({"base": manu.resource_base}) for k, _ in family.keys)
                if family.profile_key and manu.partition_kind:
                    probe = family.profile_key.render({"base": manu.resource_base, "kind": manu.partition_kind,
                                                       "profile": "\x00"})
                    self._owned_prefixes.append(probe.split("\x00", 1)[0])
        # §5: an owned fit label is either fitLabels format with a non-empty aKey; the literal text
        # around {aKey} comes from the rules, so renaming a label there moves ownership with it.
        self._fit_affixes: list[tuple[str, str]] = []
        for fmt in (rules.fit_sliced_label, rules.fit_shared_label):
            if fmt is not None:
                before, _, after = fmt.render({"aKey": "\x00"}).partition("\x00")
                self._fit_affixes.append((before, after))

        # Per distinct input, not per Node: label keys and capacity keys repeat on every Node, and
        # the compiled formulas see a few dozen distinct (L, P, slices, vram, overcommit) tuples.
        self._owns_label: dict[str, bool] = {}
        self._owns_capacity: dict[str, bool] = {}
        self._family_values: dict[tuple[object, ...], list[tuple[str, int]]] = {}

    # --- ownership -------------------------------------------------------------------------------
    def owns_capacity(self, key: str) -> bool:
        owned = self._owns_capacity.get(key)
        if owned is None:
            owned = self._owns_capacity[key] = key in self._owned_exact or any(
                key.startswith(p) and len(key) > len(p) for p in self._owned_prefixes)
        return owned

    def owns_label(self, key: str) -> bool:
        owned = self._owns_label.get(key)
        if owned is None:
            owned = self._owns_label[key] = any(
                key.startswith(before) and key.endswith(after) and len(key) > len(before) + len(after)
                for before, after in self._fit_affixes)
        return owned

    def shows_accelerator(self, node: inputs.Node, facts: NodeFacts) -> bool:
        """Whether the Node looks like a GPU Node without its Devices: an accelerator (§1.4), or
        capacity keys or fit labels this renderer owns. Only such a Node loses data when its
        Devices object is missing from the snapshot."""
        return (facts.has_accelerator or any(self.owns_capacity(k) for k in node.status.capacity or {})
                or any(self.owns_label(k) for k in node.metadata.labels or {}))

    # --- desired ---------------------------------------------------------------------------------
    def desired(self, node: inputs.Node, devices: inputs.Devices | None, facts: NodeFacts) -> NodeDesired:
        if not facts.managed or devices is None:
            return NodeDesired({}, {})
        return NodeDesired(self._capacity(node, devices, facts), self.fit_labels(node, devices))

    def _capacity(self, node: inputs.Node, devices: inputs.Devices, facts: NodeFacts) -> dict[str, int]:
        tallies = self._tallies(node, devices, facts)
        capacity = node.status.capacity or {}
        desired: dict[str, int] = {}
        for manu_name, tally in sorted(tallies.items()):
            manufacturer = self.rules.manufacturers[manu_name]
            base = manufacturer.resource_base
            for family in self.rules.capacity_families:
                if self.gate(family, manufacturer, tally, capacity) is not None:
                    continue
                for key_fmt, _ in family.keys:
                    key = key_fmt.render({"base": base})
                    desired[key] = tally.values[key]
                if family.profile_key and manufacturer.partition_kind:
                    for profile, count in sorted(tally.profiles.items()):
                        key = family.profile_key.render({"base": base, "kind": manufacturer.partition_kind,
                                                         "profile": profile})
                        if valid_qualified_name(key):
                            desired[key] = count
                        else:
                            self.diag.warn(f"Node/{node.metadata.name}: partition profile {profile!r} would give "
                                           f"the invalid resource name {key!r}; skipped")
        return desired

    def gate(self, family: CapacityFamilyRule, manufacturer: ManufacturerRule, tally: _Tally,
             capacity: Mapping[str, Fraction]) -> str | None:
        """Why ``family`` is not desired for ``manufacturer`` (§4.3, §4.6), or ``None`` when it is."""
        population = tally.logical if family.population == "logical" else tally.partitioned
        if population <= 0:
            return f"no {family.population} cards"
        if family.requires_partition_kind and not manufacturer.partition_kind:
            return f"manufacturer {manufacturer.name} has no partition kind"
        pool = family.pool.render({"base": manufacturer.resource_base})
        if capacity.get(pool, Fraction(0)) <= 0:
            return f"status.capacity[{pool}] is absent or 0"
        return None

    def tallies(self, node: inputs.Node, devices: inputs.Devices, facts: NodeFacts,
                skipped: list[tuple[str, str]] | None = None) -> dict[str, _Tally]:
        """Per manufacturer: the summed key values and card populations (for ``explain``); ``skipped``
        collects ``(aKey, reason)`` for the models that add nothing."""
        return self._tallies(node, devices, facts, skipped)

    def _tallies(self, node: inputs.Node, devices: inputs.Devices, facts: NodeFacts,
                 skipped: list[tuple[str, str]] | None = None) -> dict[str, _Tally]:
        groups = {f"{g.manufacturer}-{g.id}": g for g in devices.spec.groups}
        ledger = {(g.manufacturer, g.id): {a.id: a for a in g.accelerators} for g in devices.status.groups}
        tallies: dict[str, _Tally] = {}
        labels = facts.converged
        for akey in facts.akeys:
            group = groups.get(akey)
            if group is None:
                if skipped is not None:
                    skipped.append((akey, "no Devices spec group for this aKey"))
                continue
            manufacturer = self.rules.manufacturers[akey.split("-", 1)[0]]
            vram = self._vram(node, akey, labels)
            logical = partitioned = slices = 0
            overcommit_any = False
            profiles: dict[str, int] = defaultdict(int)
            rows = ledger.get((group.manufacturer, group.id), {})
            for card in group.accelerators:
                status = card.status
                if status.physicalSliced is not None and status.physicalSliced.count > 0:
                    partitioned += 1
                    self._card_profiles(manufacturer, status.physicalSliced, rows.get(card.id), profiles)
                elif status.logicalSliced is not None and status.logicalSliced.count > 0:
                    logical += 1
                    slices += status.logicalSliced.count
                    overcommit_any |= status.logicalSliced.coresPercentageOvercommit
            if logical == 0 and partitioned == 0:
                if skipped is not None:
                    skipped.append((akey, "no logical or partitioned card (L = P = 0)"))
                continue
            detail = group.acceleratorSlicedDetail.logical if group.acceleratorSlicedDetail else None
            overcommit = bool(detail.coresPercentageOvercommit) if detail is not None else overcommit_any
            tally = tallies.setdefault(manufacturer.name, _Tally())
            tally.logical += logical
            tally.partitioned += partitioned
            for key, value in self._key_values(manufacturer.resource_base, logical, partitioned, slices, vram,
                                               overcommit):
                tally.values[key] += value
            for name, count in profiles.items():
                tally.profiles[name] += count
        return tallies

    def _key_values(self, base: str, logical: int, partitioned: int, slices: int, vram: int,
                    overcommit: bool) -> list[tuple[str, int]]:
        """Every capacity family key of ``base`` with its formula's value for these inputs (cached)."""
        memo = (base, logical, partitioned, slices, vram, overcommit)
        values = self._family_values.get(memo)
        if values is None:
            variables = {"L": logical, "P": partitioned, "slices": slices, "vram": vram,
                         "overcommit": overcommit, "M": self.M}
            values = self._family_values[memo] = [
                (key_fmt.render({"base": base}), expr(**variables))
                for family in self.rules.capacity_families for key_fmt, expr in family.keys]
        return values

    def _vram(self, node: inputs.Node, akey: str, labels: Mapping[str, str]) -> int:
        raw = labels.get(f"{self._akey_prefix}{akey}.memory")
        if not raw:
            return 0
        try:
            return memory_label_mib(raw)
        except QuantityError:
            self.diag.warn(f"Node/{node.metadata.name}: label {self._akey_prefix}{akey}.memory={raw!r} is not a "
                           f"quantity; read as 0 MiB")
            return 0

    def _card_profiles(self, manufacturer: ManufacturerRule, physical: inputs.PhysicalSliced,
                       row: inputs.LedgerAccelerator | None, out: dict[str, int]) -> None:
        """§4.4: a ready ledger row counts allocated + remaining; otherwise the static ceiling."""
        publish = self.publish_profile
        for profile in physical.profiles:
            out[publish(manufacturer, profile.name)] += 0
        if row is not None and (row.allocatedProfiles or row.remainingProfiles):
            for entry in row.allocatedProfiles + row.remainingProfiles:
                out[publish(manufacturer, entry.name)] += entry.count
        else:
            for profile in physical.profiles:
                out[publish(manufacturer, profile.name)] += profile.count

    @staticmethod
    def publish_profile(manufacturer: ManufacturerRule, name: str) -> str:
        fields = name.lower().split()
        published = fields[-1] if fields else ""
        for pattern, replacement in manufacturer.publish_profile:
            published = pattern.sub(replacement, published)
        return published

    def fit_labels(self, node: inputs.Node, devices: inputs.Devices) -> dict[str, str]:
        """§5: per ledger group, a label per population that has at least one member. The members are
        ledger rows joined to their spec card (``fitLabels.populations``): a spec card without a row
        has no allocation state, so it neither makes a label appear nor counts towards its value."""
        rules = self.rules
        populations: FitPopulations = rules.fit_populations
        spec_groups = {(g.manufacturer, g.id): g for g in devices.spec.groups}
        labels: dict[str, str] = {}
        for ledger_group in devices.status.groups:
            akey = f"{ledger_group.manufacturer}-{ledger_group.id}"
            sliced_key = rules.fit_sliced_label.render({"aKey": akey})
            shared_key = rules.fit_shared_label.render({"aKey": akey})
            if not (valid_qualified_name(sliced_key) and valid_qualified_name(shared_key)):
                self.diag.warn(f"Node/{node.metadata.name}: accelerator group {akey!r} gives invalid fit label "
                               f"keys; no fit labels for it")
                continue
            spec = spec_groups.get((ledger_group.manufacturer, ledger_group.id))
            if spec is None:
                continue
            members = _ledger_members(spec, ledger_group)
            sliced = [(row, card) for row, card in members if _in_population(card, populations.slicedMaxFreeUnits)]
            shared = [(row, card) for row, card in members if _in_population(card, populations.sharedFreeCards)]
            if sliced:
                labels[sliced_key] = str(max(_free_slice_units(row, card) for row, card in sliced))
            if shared:
                labels[shared_key] = str(sum(1 for row, _ in shared
                                             if row.mode in rules.shared_modes and row.remaining >= rules.share_units))
        return labels


def _ledger_members(spec: inputs.DeviceGroup, ledger_group: inputs.LedgerGroup
                    ) -> list[tuple[inputs.LedgerAccelerator, inputs.Accelerator]]:
    """The ledger rows of one group joined by id to their spec card; rows without a card are dropped
    (§5), and so are spec cards without a row (they are simply never reached)."""
    cards = {c.id: c for c in spec.accelerators}
    return [(row, cards[row.id]) for row in ledger_group.accelerators if row.id in cards]


def _partitioned(card: inputs.Accelerator) -> bool:
    physical = card.status.physicalSliced
    return physical is not None and physical.count > 0


def _in_population(card: inputs.Accelerator, population: str) -> bool:
    """``logical``: logically sliceable and not partitioned; ``wholeCard``: not partitioned."""
    if _partitioned(card):
        return False
    if population == "logical":
        logical = card.status.logicalSliced
        return logical is not None and logical.count > 0
    return True


def _free_slice_units(row: inputs.LedgerAccelerator, card: inputs.Accelerator) -> int:
    """0 once every slice slot is taken, however much memory is left; else the row's ``remaining``.
    A card outside the logical population has no slice slots, so only its ``remaining`` counts."""
    logical = card.status.logicalSliced
    if logical is not None and logical.count > 0 and row.allocatedSlices >= logical.count:
        return 0
    return row.remaining
