"""Cross-file checks: what one rule kind says about another (run only when both compiled)."""

from __future__ import annotations

from typing import Iterable

from gpustack_render.errors import did_you_mean
from gpustack_render.rules import schema
from gpustack_render.rules.admission import Entry
from gpustack_render.rules.compiler import Compiler
from gpustack_render.rules.model import CapacityFamilyRule
from gpustack_render.rules.naming import FLAVOR_KINDS, POOL_KINDS, SPLITS, CompiledGrouping, CompiledNaming

# The engine's pool identity (evaluate/chain.py) is the flavor's accelerated flag, general and
# accelerator group (Grouping pool, rule data) and these fields of the flavor.
POOL_FLAVOR_FIELDS = ("os", "arch")
# Fields a name format may leave out because another one it keeps determines them.
DERIVED_FIELDS = {"gManu": "gKey", "manufacturer": "aKey"}


def _missing_fields(kept: set[str], required: set[str]) -> list[str]:
    """The identity fields a name format drops (a derived field is kept by the field it comes from)."""
    return sorted(f for f in required if f not in kept and DERIVED_FIELDS.get(f) not in kept)


def check_preset_manufacturers(c: Compiler, presets: schema.PresetRules, manufacturers: Iterable[str]) -> None:
    """UnitResourcePresets may only name manufacturers the Manufacturers rules know."""
    known = set(manufacturers)
    for manu in presets.manufacturers:
        if manu not in known:
            c.fail("UnitResourcePresets", ("manufacturers", manu), f"unknown manufacturer '{manu}'",
                   did_you_mean(manu, known) or "add it to the Manufacturers rules first")


def check_flavor_names(c: Compiler, naming: CompiledNaming, grouping: CompiledGrouping) -> None:
    """A ResourceFlavor name must keep every grouping key field, and use no field outside the key:
    otherwise two flavor groups would share one name."""
    for kind_name, allowed in FLAVOR_KINDS:
        name, key = naming.flavor[kind_name], set(grouping.flavor[kind_name].key)
        if name is None:
            continue
        missing = name.placeholders - key - {"gManu", "manufacturer"}
        if missing:
            c.fail("Naming", ("resourceFlavor", kind_name),
                   f"placeholder(s) {', '.join(sorted(missing))} are not in the grouping key",
                   "flavors would collide: add them to Grouping flavor key")
        dropped = _missing_fields(name.placeholders, key & allowed)
        if dropped:
            c.fail("Naming", ("resourceFlavor", kind_name),
                   f"drops grouping key field(s) {', '.join(dropped)}",
                   "flavors of different groups would get the same name: add "
                   + ", ".join("{" + f + "}" for f in dropped))


def check_pool_names(c: Compiler, naming: CompiledNaming, grouping: CompiledGrouping) -> None:
    """A pool name must keep every field of the pool's identity (Grouping pool, os and arch)."""
    for aware, attr in SPLITS:
        general_fmt, accel_fmt = grouping.pool_identity[aware]
        for accel, kind_name in POOL_KINDS:
            name_fmt = naming.pool_name[(aware, accel)]
            if name_fmt is None or general_fmt is None or (accel and accel_fmt is None):
                continue
            required = set(POOL_FLAVOR_FIELDS) | general_fmt.placeholders
            if accel and accel_fmt is not None:
                required |= accel_fmt.placeholders
            dropped = _missing_fields(name_fmt.placeholders, required)
            if dropped:
                c.fail("Naming", ("pool", attr, kind_name), f"drops pool identity field(s) {', '.join(dropped)}",
                       "pools of different identities (Grouping pool." + attr + " and os, arch) would get the "
                       "same name: add " + ", ".join("{" + f + "}" for f in dropped))


def check_admission_families(c: Compiler, entries: tuple[Entry, ...], families: tuple[CapacityFamilyRule, ...]) -> None:
    """An Admission ``family`` entry must name a Capacity family."""
    known = {family.name for family in families}
    for entry in entries:
        if entry.family is not None and entry.family not in known:
            c.fail("Admission", ("transformations", entry.index, "family"), f"unknown capacity family '{entry.family}'",
                   did_you_mean(entry.family, known) or f"Capacity families: {', '.join(sorted(known))}")
