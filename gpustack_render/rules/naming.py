"""Compiling the Naming and Grouping kinds (each on its own; checks.py relates the two)."""

from __future__ import annotations

import msgspec

from gpustack_render.errors import did_you_mean
from gpustack_render.rules import schema
from gpustack_render.rules.compiler import Compiler
from gpustack_render.rules.expressions import CompiledCondition, NameFormat
from gpustack_render.rules.model import ACCEL_FLAVOR_FIELDS, CPU_FLAVOR_FIELDS

FLAVOR_KINDS = (("cpu", CPU_FLAVOR_FIELDS), ("accelerated", ACCEL_FLAVOR_FIELDS))
SPLITS = ((True, "whenAware"), (False, "whenUnaware"))
POOL_KINDS = ((False, "cpu"), (True, "accelerated"))


class CompiledNaming(msgspec.Struct, frozen=True, eq=False):
    """``rules/naming.yaml`` compiled; a format is None where its entry did not compile (a problem is reported)."""
    node_feature: NameFormat | None
    topology: NameFormat | None
    local_queue: NameFormat | None
    flavor: dict[str, NameFormat | None]                   # cpu / accelerated
    pool_name: dict[tuple[bool, bool], NameFormat | None]  # (aware, accelerated) → format
    catalog_name: dict[tuple[bool, bool], NameFormat | None]
    unawareCpuDisplayName: str
    displayNameMaxLength: int


def compile_naming(c: Compiler, naming: schema.NamingRules) -> CompiledNaming:
    flavor = {kind_name: c.fmt("Naming", ("resourceFlavor", kind_name), getattr(naming.resourceFlavor, kind_name),
                               allowed) for kind_name, allowed in FLAVOR_KINDS}
    pool_fields = {"gKey", "gManu", "os", "arch"}
    pool_name: dict[tuple[bool, bool], NameFormat | None] = {}
    catalog_name: dict[tuple[bool, bool], NameFormat | None] = {}
    for aware, attr in SPLITS:
        for accel, kind_name in POOL_KINDS:
            allowed = pool_fields | ({"aKey", "manufacturer"} if accel else set())
            pool_name[(aware, accel)] = c.fmt("Naming", ("pool", attr, kind_name),
                                              getattr(getattr(naming.pool, attr), kind_name), allowed)
            catalog_name[(aware, accel)] = c.fmt("Naming", ("catalog", attr, kind_name),
                                                 getattr(getattr(naming.catalog, attr), kind_name),
                                                 {"gKey", "gManu", "aKey", "manufacturer"} if accel
                                                 else {"gKey", "gManu"})
    node_feature = c.fmt("Naming", ("nodeFeature",), naming.nodeFeature, {"node"})
    topology = c.fmt("Naming", ("topology",), naming.topology, {"profile"})
    local_queue = c.fmt("Naming", ("localQueue",), naming.localQueue, {"clusterQueue"})
    for loc, name_fmt, field_name in ((("nodeFeature",), node_feature, "node"), (("topology",), topology, "profile"),
                                      (("localQueue",), local_queue, "clusterQueue")):
        if name_fmt is not None and field_name not in name_fmt.placeholders:
            c.fail("Naming", loc, f"must contain the placeholder {{{field_name}}}",
                   f"every {field_name} gets its own object: without it they would all get one name")
    return CompiledNaming(node_feature, topology, local_queue, flavor, pool_name, catalog_name,
                          naming.unawareCpuDisplayName, naming.displayNameMaxLength)


class CompiledGroupingFlavor(msgspec.Struct, frozen=True, eq=False):
    """One Grouping ``flavor`` kind compiled (None: its condition did not compile)."""
    key: tuple[str, ...]
    contributes: CompiledCondition | None
    pin_cpu_only: CompiledCondition | None


class CompiledGrouping(msgspec.Struct, frozen=True, eq=False):
    """``rules/grouping.yaml`` compiled, None where a part did not (made into :class:`GroupingRules`)."""
    flavor: dict[str, CompiledGroupingFlavor]
    pool_identity: dict[bool, tuple[NameFormat | None, NameFormat | None]]  # aware → (general, accelerator)
    managed_stamp_when: CompiledCondition | None
    cpu_only_when: CompiledCondition | None
    aware: CompiledCondition | None
    generic_group: str


def compile_grouping(c: Compiler, grouping: schema.GroupingRules) -> CompiledGrouping:
    flavor = {}
    for kind_name, allowed in FLAVOR_KINDS:
        group: schema.FlavorGroup = getattr(grouping.flavor, kind_name)
        for i, key_field in enumerate(group.key):
            if key_field not in allowed:
                c.fail("Grouping", ("flavor", kind_name, "key", i), f"unknown grouping field '{key_field}'",
                       did_you_mean(key_field, allowed))
        contributes = c.cond("Grouping", ("flavor", kind_name, "contributes"), group.contributes,
                             "accelerator" if kind_name == "accelerated" else "flavor")
        pin = c.cond("Grouping", ("flavor", kind_name, "pinCpuOnly"), group.pinCpuOnly, "flavor") \
            if group.pinCpuOnly else None
        flavor[kind_name] = CompiledGroupingFlavor(tuple(group.key), contributes, pin)
    identity: dict[bool, tuple[NameFormat | None, NameFormat | None]] = {}
    for aware, attr in SPLITS:
        ident: schema.PoolIdentity = getattr(grouping.pool, attr)
        identity[aware] = (c.fmt("Grouping", ("pool", attr, "generalGroup"), ident.generalGroup, {"gKey", "gManu"}),
                           c.fmt("Grouping", ("pool", attr, "acceleratorGroup"), ident.acceleratorGroup, {"aKey"}))
    return CompiledGrouping(
        flavor, identity,
        c.cond("Grouping", ("managedLabel", "stampWhen"), grouping.managedLabel.stampWhen, "node"),
        c.cond("Grouping", ("cpuOnlyLabel", "when"), grouping.cpuOnlyLabel.when, "node"),
        c.cond("Grouping", ("aware",), grouping.aware, "global"),
        _generic_group(c, grouping))


def _generic_group(c: Compiler, grouping: schema.GroupingRules) -> str:
    """``pool.whenUnaware.generalGroup`` is also the generalGroup of an InstanceType that has none
    (the pool not split per CPU key), so it must be one fixed name, not a format."""
    value = grouping.pool.whenUnaware.generalGroup
    if "{" in value or "}" in value:
        c.fail("Grouping", ("pool", "whenUnaware", "generalGroup"),
               "must be a fixed name without placeholders",
               "a pool that is not split per CPU key has one generalGroup, also for InstanceTypes without one")
    return value
