"""Stage 3 node capacity (stage3-node.md §4) and per-card fit labels (§5): desired owned keys.

Pure: a Node, its Devices, its converged facts and the rules in; desired values and the owned-key
predicate out. The patch itself is computed in :mod:`gpustack_render.emit.patches`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping

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


# One aKey's cards as the capacity formulas read them: manufacturer name, L, P, slices, vram (MiB),
# overcommit, and the partition profiles' published names with their counts (in the order found).
_Summary = tuple[str, int, int, int, int, bool, tuple[tuple[str, int], ...]]


_NOTHING: dict[str, int] = {}  # the shared empty desired capacity (never written to)
_NO_CARD: Any = object()  # a ledger row's card, when the spec group has none of its id


def _card_slices(status: inputs.AcceleratorStatus) -> int | None:
    """What the fit labels read of a card (§5): ``None`` for a partitioned card (in no
    population), else its logicalSliced count (a logical card when positive)."""
    physical = status.physicalSliced
    if physical is not None and physical.count > 0:
        return None
    logical = status.logicalSliced
    return logical.count if logical is not None else 0


@dataclass
class NodeDesired:
    capacity: dict[str, int]
    labels: dict[str, str]


class CapacityEvaluator:
    def __init__(self, rules: Rules, diagnostics: Diagnostics) -> None:
        self.rules, self.diag = rules, diagnostics
        self.M = rules.manufacturers.units_per_accelerator
        self._akey_prefix = rules.normalisation.aKey.labelPrefix
        self._owned_exact: set[str] = set()
        self._owned_prefixes: list[str] = []
        for manu in rules.manufacturers.by_name.values():
            for family in rules.capacity.families:
                self._owned_exact.update(k.render({"base": manu.resource_base}) for k, _ in family.keys)
                if family.profile_key and manu.partition_kind:
                    probe = family.profile_key.render({"base": manu.resource_base, "kind": manu.partition_kind,
                                                       "profile": "\x00"})
                    self._owned_prefixes.append(probe.split("\x00", 1)[0])
        # §5: an owned fit label is either fitLabels format with a non-empty aKey; the literal text
        # around {aKey} comes from the rules, so renaming a label there moves ownership with it.
        self._fit_affixes: list[tuple[str, str]] = []
        for fmt in (rules.capacity.fit_sliced_label, rules.capacity.fit_shared_label):
            if fmt is not None:
                before, _, after = fmt.render({"aKey": "\x00"}).partition("\x00")
                self._fit_affixes.append((before, after))

        # Per distinct input, not per Node: label keys and capacity keys repeat on every Node, and
        # the compiled formulas see a few dozen distinct (L, P, slices, vram, overcommit) tuples.
        self._owns_label: dict[str, bool] = {}
        self._owns_capacity: dict[str, bool] = {}
        # per key tuple: its owned keys (label key tuples are shared by the Nodes: NodeFacts.label_keys)
        self._owned_labels_in: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._owned_capacity_in: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._family_values: dict[tuple[object, ...], list[tuple[str, int]]] = {}
        # Rendered once per manufacturer / aKey / profile instead of once per Node.
        self._families: dict[str, list[tuple[CapacityFamilyRule, str, list[str]]]] = {}
        self._profile_keys: dict[tuple[int, str, str], tuple[str, bool]] = {}
        self._fit_keys: dict[str, tuple[str, str] | None] = {}
        self._positive: dict[int, tuple[Fraction, bool]] = {}
        self._published: dict[tuple[str, str], str] = {}   # (manufacturer, profile name) → published
        self._akey_manufacturer: dict[str, ManufacturerRule] = {}
        self._memory_labels: dict[str, str] = {}
        # The desired capacity per distinct (summaries, positive pools): what the families give
        # with the names of the invalid partition profile keys each such Node is warned about.
        # (The key names the Node's pool quantities by id; the entry keeps them and is used only
        # for quantities equal to them.)
        self._desired_capacity: dict[tuple[object, ...], tuple[tuple[object, ...], dict[str, int],
                                                                tuple[tuple[str, str], ...]]] = {}
        self._pools: dict[str | tuple[str, ...], tuple[str, ...]] = {}
        self._vram_of: dict[tuple[object, str], int] = {}  # per (NodeShape, aKey), when valid

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

    def owned_keys(self, mapping: Mapping[str, object], capacity: bool) -> tuple[str, ...]:
        """The keys of ``mapping`` this renderer owns, in order: decided once per distinct key tuple
        (Nodes of one machine type share theirs)."""
        return self.owned_in(tuple(mapping), capacity)

    def owned_in(self, keys: tuple[str, ...], capacity: bool) -> tuple[str, ...]:
        """:meth:`owned_keys` of a mapping with these keys (e.g. :attr:`NodeFacts.label_keys`)."""
        memo = self._owned_capacity_in if capacity else self._owned_labels_in
        found = memo.get(keys)
        if found is None:
            owns = self.owns_capacity if capacity else self.owns_label
            found = memo[keys] = tuple(k for k in keys if owns(k))
        return found

    def shows_accelerator(self, node: inputs.Node, facts: NodeFacts) -> bool:
        """Whether the Node looks like a GPU Node without its Devices: an accelerator (§1.4), or
        capacity keys or fit labels this renderer owns. Only such a Node loses data when its
        Devices object is missing from the snapshot."""
        return (facts.has_accelerator or any(self.owns_capacity(k) for k in node.status.capacity or {})
                or any(self.owns_label(k) for k in node.metadata.labels or {}))

    # --- desired ---------------------------------------------------------------------------------
    def desired(self, node: inputs.Node, devices: inputs.Devices | None, facts: NodeFacts) -> NodeDesired:
        """The Node's desired capacity keys and fit labels (the caller's own mappings)."""
        if not facts.managed or devices is None:
            return NodeDesired({}, {})
        return NodeDesired(dict(self._capacity(node, devices, facts)), self.fit_labels(node, devices))

    def desired_parts(self, node: inputs.Node, devices: inputs.Devices, facts: NodeFacts
                      ) -> tuple[dict[str, int], dict[str, str]]:
        """:meth:`desired` of a managed Node with Devices as (capacity, fit labels), for the caller
        that only reads them: the capacity mapping is the one shared by the Nodes with equal cards,
        and the fit-label pass reuses what the capacity pass read of each spec group's cards."""
        cards: dict[int, dict[str, int | None]] = {}
        return self._capacity(node, devices, facts, cards), self.fit_labels(node, devices, cards)

    def _capacity(self, node: inputs.Node, devices: inputs.Devices, facts: NodeFacts,
                  cards: dict[int, dict[str, int | None]] | None = None) -> dict[str, int]:
        """§4.3-§4.6, decided once per distinct input: the Node's cards summed per aKey (the one
        per-card pass) and which pools its status.capacity holds as positive decide the keys.
        ``cards`` receives, per spec group read, each card's slice count (:func:`_card_slices`)."""
        summaries = self._summaries(node, devices, facts, None, cards)
        if not summaries:
            return _NOTHING
        capacity = node.status.capacity or {}
        manufacturers = summaries[0][0] if len(summaries) == 1 else tuple(sorted({s[0] for s in summaries}))
        pools = self._pools.get(manufacturers)
        if pools is None:
            pools = self._pools[manufacturers] = self._pool_keys(manufacturers)
        held = tuple(map(capacity.get, pools))
        memo = (summaries, tuple(map(id, held)))
        found = self._desired_capacity.get(memo)
        if found is None or found[0] != held:  # (equal quantities are as positive as the ones kept)
            found = self._desired_capacity[memo] = (held, *self._capacity_of(self._tally(summaries), capacity))
        _, desired, invalid = found
        for profile, key in invalid:
            self.diag.warn(f"Node/{node.metadata.name}: partition profile {profile!r} would give "
                           f"the invalid resource name {key!r}; skipped")
        return desired

    def _pool_keys(self, manufacturers: str | tuple[str, ...]) -> tuple[str, ...]:
        """The pool keys whose quantities gate the capacity families of these manufacturers."""
        names = (manufacturers,) if isinstance(manufacturers, str) else manufacturers
        return tuple(dict.fromkeys(pool for name in names for _, pool, _ in self._families_of(self.rules.manufacturers.by_name[name])))

    def _capacity_of(self, tallies: dict[str, _Tally], capacity: Mapping[str, Fraction]
                     ) -> tuple[dict[str, int], tuple[tuple[str, str], ...]]:
        """The desired keys of these tallies on a Node with this ``capacity``, and the partition
        profiles (with the key each would give) skipped as invalid, in the order found."""
        desired: dict[str, int] = {}
        invalid: list[tuple[str, str]] = []
        for manu_name, tally in sorted(tallies.items()):
            manufacturer = self.rules.manufacturers.by_name[manu_name]
            for family, pool, keys in self._families_of(manufacturer):
                if self._gate(family, manufacturer, tally, capacity, pool) is not None:
                    continue
                values = tally.values
                for key in keys:
                    desired[key] = values[key]
                if family.profile_key and manufacturer.partition_kind:
                    for profile, count in sorted(tally.profiles.items()):
                        key, valid = self._profile_key(family, manufacturer, profile)
                        if valid:
                            desired[key] = count
                        else:
                            invalid.append((profile, key))
        return desired, tuple(invalid)

    def _families_of(self, manufacturer: ManufacturerRule) -> list[tuple[CapacityFamilyRule, str, list[str]]]:
        """Each capacity family with its pool key and key names rendered for ``manufacturer``."""
        found = self._families.get(manufacturer.name)
        if found is None:
            base = {"base": manufacturer.resource_base}
            found = self._families[manufacturer.name] = [
                (family, family.pool.render(base), [k.render(base) for k, _ in family.keys])
                for family in self.rules.capacity.families]
        return found

    def _profile_key(self, family: CapacityFamilyRule, manufacturer: ManufacturerRule, profile: str) -> tuple[str, bool]:
        memo = (id(family), manufacturer.name, profile)  # the family objects live as long as the rules
        found = self._profile_keys.get(memo)
        if found is None:
            assert family.profile_key is not None
            key = family.profile_key.render({"base": manufacturer.resource_base, "kind": manufacturer.partition_kind,
                                             "profile": profile})
            found = self._profile_keys[memo] = (key, valid_qualified_name(key))
        return found

    def gate(self, family: CapacityFamilyRule, manufacturer: ManufacturerRule, tally: _Tally,
             capacity: Mapping[str, Fraction]) -> str | None:
        """Why ``family`` is not desired for ``manufacturer`` (§4.3, §4.6), or ``None`` when it is."""
        return self._gate(family, manufacturer, tally, capacity, family.pool.render({"base": manufacturer.resource_base}))

    def _gate(self, family: CapacityFamilyRule, manufacturer: ManufacturerRule, tally: _Tally,
              capacity: Mapping[str, Fraction], pool: str) -> str | None:
        population = tally.logical if family.population == "logical" else tally.partitioned
        if population <= 0:
            return f"no {family.population} cards"
        if family.requires_partition_kind and not manufacturer.partition_kind:
            return f"manufacturer {manufacturer.name} has no partition kind"
        if not self._is_positive(capacity.get(pool)):
            return f"status.capacity[{pool}] is absent or 0"
        return None

    def _is_positive(self, value: Fraction | None) -> bool:
        """``value > 0`` (absent: no). Fraction comparisons are Python code and equal quantities are
        mostly one shared object (the snapshot parses each text once): kept per object, with it."""
        if value is None:
            return False
        hit = self._positive.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        positive = value > 0
        self._positive[id(value)] = (value, positive)
        return positive

    def tallies(self, node: inputs.Node, devices: inputs.Devices, facts: NodeFacts,
                skipped: list[tuple[str, str]] | None = None) -> dict[str, _Tally]:
        """Per manufacturer: the summed key values and card populations (for ``explain``); ``skipped``
        collects ``(aKey, reason)`` for the models that add nothing."""
        return self._tallies(node, devices, facts, skipped)

    def _tallies(self, node: inputs.Node, devices: inputs.Devices, facts: NodeFacts,
                 skipped: list[tuple[str, str]] | None = None) -> dict[str, _Tally]:
        return self._tally(self._summaries(node, devices, facts, skipped))

    def _summaries(self, node: inputs.Node, devices: inputs.Devices, facts: NodeFacts,
                   skipped: list[tuple[str, str]] | None = None,
                   cards: dict[int, dict[str, int | None]] | None = None) -> tuple[_Summary, ...]:
        """Per aKey of the Node with a Devices spec group and a logical or partitioned card, what
        the formulas read of its cards (the per-card pass; ``skipped`` as :meth:`tallies` says;
        ``cards`` as :meth:`_capacity` says)."""
        akeys = facts.akeys
        if not akeys:
            return ()
        spec_groups = devices.spec.groups
        only = spec_groups[0] if len(spec_groups) == 1 else None  # the usual Node: one model
        only_key = f"{only.manufacturer}-{only.id}" if only is not None else ""
        groups = {} if only is not None else {f"{g.manufacturer}-{g.id}": g for g in spec_groups}
        ledger: dict[tuple[str, str], dict[str, inputs.LedgerAccelerator]] | None = None  # built when first read
        out: list[_Summary] = []
        shape, vram_of, akey_manufacturer = facts.shape, self._vram_of, self._akey_manufacturer
        for akey in akeys:
            group = (only if akey == only_key else None) if only is not None else groups.get(akey)
            if group is None:
                if skipped is not None:
                    skipped.append((akey, "no Devices spec group for this aKey"))
                continue
            manufacturer = akey_manufacturer.get(akey)
            if manufacturer is None:
                manufacturer = akey_manufacturer[akey] = self.rules.manufacturers.by_name[akey.split("-", 1)[0]]
            vram = vram_of.get((shape, akey)) if shape is not None else None
            if vram is None:
                vram = self._vram(node, akey, facts)
            logical = partitioned = slices = 0
            overcommit_any = False
            profiles: dict[str, int] | None = None  # only partitioned cards have any
            if cards is not None:
                cards[id(group)] = {card.id: _card_slices(card.status) for card in group.accelerators}
            for card in group.accelerators:
                status = card.status
                physical = status.physicalSliced
                if physical is not None and physical.count > 0:
                    partitioned += 1
                    if profiles is None:
                        profiles = defaultdict(int)
                    if ledger is None:
                        ledger = {(g.manufacturer, g.id): {a.id: a for a in g.accelerators}
                                  for g in devices.status.groups}
                    rows = ledger.get((group.manufacturer, group.id), {})
                    self._card_profiles(manufacturer, physical, rows.get(card.id), profiles)
                    continue
                sliced = status.logicalSliced
                if sliced is not None and sliced.count > 0:
                    logical += 1
                    slices += sliced.count
                    overcommit_any |= sliced.coresPercentageOvercommit
            if logical == 0 and partitioned == 0:
                if skipped is not None:
                    skipped.append((akey, "no logical or partitioned card (L = P = 0)"))
                continue
            detail = group.acceleratorSlicedDetail.logical if group.acceleratorSlicedDetail else None
            overcommit = bool(detail.coresPercentageOvercommit) if detail is not None else overcommit_any
            out.append((manufacturer.name, logical, partitioned, slices, vram, overcommit,
                        tuple(profiles.items()) if profiles else ()))
        return tuple(out)

    def _tally(self, summaries: tuple[_Summary, ...]) -> dict[str, _Tally]:
        """Per manufacturer: the summed key values and card populations of these aKey summaries."""
        tallies: dict[str, _Tally] = {}
        for name, logical, partitioned, slices, vram, overcommit, profiles in summaries:
            manufacturer = self.rules.manufacturers.by_name[name]
            tally = tallies.get(name)
            if tally is None:
                tally = tallies[name] = _Tally()
            tally.logical += logical
            tally.partitioned += partitioned
            values = tally.values
            for key, value in self._key_values(manufacturer.resource_base, logical, partitioned, slices, vram,
                                               overcommit):
                values[key] += value
            for profile, count in profiles:
                tally.profiles[profile] += count
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
                for family in self.rules.capacity.families for key_fmt, expr in family.keys]
        return values

    def _vram(self, node: inputs.Node, akey: str, facts: NodeFacts) -> int:
        """The aKey's memory label in MiB: its converged value, which the Node's shape fixes (the
        label is under the aKey prefix, so in the signature), hence kept per shape when valid; an
        invalid one is warned about for each Node."""
        shape = facts.shape
        key = self._memory_labels.get(akey)
        if key is None:
            key = self._memory_labels[akey] = f"{self._akey_prefix}{akey}.memory"
        raw = facts.label(key)
        try:
            mib = memory_label_mib(raw) if raw else 0
            if shape is not None:
                self._vram_of[(shape, akey)] = mib
            return mib
        except QuantityError:
            self.diag.warn(f"Node/{node.metadata.name}: label {self._akey_prefix}{akey}.memory={raw!r} is not a "
                           f"quantity; read as 0 MiB")
            return 0

    def _card_profiles(self, manufacturer: ManufacturerRule, physical: inputs.PhysicalSliced,
                       row: inputs.LedgerAccelerator | None, out: dict[str, int]) -> None:
        """§4.4: a ready ledger row counts allocated + remaining; otherwise the static ceiling."""
        publish = self._publish
        for profile in physical.profiles:
            out[publish(manufacturer, profile.name)] += 0
        if row is not None and (row.allocatedProfiles or row.remainingProfiles):
            for entry in row.allocatedProfiles + row.remainingProfiles:
                out[publish(manufacturer, entry.name)] += entry.count
        else:
            for profile in physical.profiles:
                out[publish(manufacturer, profile.name)] += profile.count

    def _publish(self, manufacturer: ManufacturerRule, name: str) -> str:
        """:meth:`publish_profile`, once per distinct (manufacturer, profile name)."""
        memo = (manufacturer.name, name)
        found = self._published.get(memo)
        if found is None:
            found = self._published[memo] = self.publish_profile(manufacturer, name)
        return found

    @staticmethod
    def publish_profile(manufacturer: ManufacturerRule, name: str) -> str:
        fields = name.lower().split()
        published = fields[-1] if fields else ""
        for pattern, replacement in manufacturer.publish_profile:
            published = pattern.sub(replacement, published)
        return published

    def fit_labels(self, node: inputs.Node, devices: inputs.Devices,
                   cards: dict[int, dict[str, int | None]] | None = None) -> dict[str, str]:
        """§5: per ledger group, a label per population that has at least one member. The members are
        ledger rows joined to their spec card (``fitLabels.populations``): a spec card without a row
        has no allocation state, so it neither makes a label appear nor counts towards its value.

        One pass over the members decides both populations (it runs for every card of every Node):
        ``logical`` is a logically sliceable card that is not partitioned, ``wholeCard`` any card that
        is not partitioned. A member's free slice units are 0 once every slice slot is taken, however
        much memory is left, else the row's ``remaining`` (a card outside the logical population has
        no slice slots, so only its ``remaining`` counts). ``cards``: the slice counts per card of
        the spec groups already read (:meth:`_capacity`), by the group's id."""
        rules = self.rules
        populations: FitPopulations = rules.capacity.fit_populations
        sliced_any_card = populations.slicedMaxFreeUnits != "logical"
        shared_any_card = populations.sharedFreeCards != "logical"
        shared_modes, share_units = rules.capacity.shared_modes, rules.capacity.share_units
        spec_groups = devices.spec.groups
        fit_keys = self._fit_keys
        labels: dict[str, str] = {}
        for ledger_group in devices.status.groups:
            manufacturer, group_id = ledger_group.manufacturer, ledger_group.id
            akey = f"{manufacturer}-{group_id}"
            keys = fit_keys[akey] if akey in fit_keys else self._fit_label_keys(akey)
            if keys is None:
                self.diag.warn(f"Node/{node.metadata.name}: accelerator group {akey!r} gives invalid fit label "
                               f"keys; no fit labels for it")
                continue
            # the last spec group of that manufacturer and id, as a mapping of them would hold
            if len(spec_groups) == 1:
                only = spec_groups[0]
                spec = only if only.id == group_id and only.manufacturer == manufacturer else None
            else:
                spec = next((g for g in reversed(spec_groups) if g.id == group_id and g.manufacturer == manufacturer),
                            None)
            if spec is None:
                continue
            known = cards.get(id(spec)) if cards is not None else None
            if known is None:  # (a mapping keeps each id's last card, as here)
                known = {c.id: _card_slices(c.status) for c in spec.accelerators}
            max_free: int | None = None
            shared_members = shared_free = 0
            for row in ledger_group.accelerators:
                count = known.get(row.id, _NO_CARD)
                if count is None or count is _NO_CARD:
                    continue  # partitioned, or no spec card: in neither population
                is_logical = count > 0
                if is_logical or sliced_any_card:
                    free = 0 if is_logical and row.allocatedSlices >= count else row.remaining
                    if max_free is None or free > max_free:
                        max_free = free
                if is_logical or shared_any_card:
                    shared_members += 1
                    if row.mode in shared_modes and row.remaining >= share_units:
                        shared_free += 1
            if max_free is not None:
                labels[keys[0]] = str(max_free)
            if shared_members:
                labels[keys[1]] = str(shared_free)
        return labels

    def _fit_label_keys(self, akey: str) -> tuple[str, str] | None:
        """The sliced and shared fit label keys of ``akey``, or ``None`` when either is invalid."""
        if akey in self._fit_keys:
            return self._fit_keys[akey]
        sliced_key = self.rules.capacity.fit_sliced_label.render({"aKey": akey})
        shared_key = self.rules.capacity.fit_shared_label.render({"aKey": akey})
        found = self._fit_keys[akey] = ((sliced_key, shared_key) if valid_qualified_name(sliced_key)
                                        and valid_qualified_name(shared_key) else None)
        return found
