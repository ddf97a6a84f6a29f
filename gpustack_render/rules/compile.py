"""Validated rule models → compiled :class:`~gpustack_render.rules.model.Rules`.

One compile function per kind (kinds.py, naming.py, lifecycle.py, meta.py), then the cross-file
checks (checks.py), then the frozen :class:`Rules`. A kind whose file is broken is left out: the
other kinds are still compiled and checked, so one run reports every file's problems."""

from __future__ import annotations

import os
from typing import Any, Mapping, TypeVar

from gpustack_render.errors import Problem
from gpustack_render.rules import admission, checks, kinds, meta, naming, schema
from gpustack_render.rules.compiler import Compiler, format_matcher
from gpustack_render.rules.lifecycle import compile_lifecycle
from gpustack_render.rules.model import (CapacityRules, FlavorKind, GroupingRules, ManufacturersRules, NamespacesRules,
                                         NamingRules, QueuesRules, Rules, SettingsRules, TopologyRules)
from gpustack_render.rules.read import Document, record_origins

T = TypeVar("T")
# M when the Manufacturers file is broken: expressions are still probed (with a typical value).
_FALLBACK_M = 1000


def compile_rules(docs: Mapping[str, Document], problems: list[Problem]) -> Rules | None:
    """The compiled rules, or ``None`` with the meaning problems appended to ``problems``.

    ``docs`` holds the documents per kind that were read; one without a model (broken) is skipped,
    and a missing or broken kind makes the result ``None`` after the others were checked."""
    models: dict[str, Any] = {kind: doc.model for kind, doc in docs.items() if doc.model is not None}
    settings = models.get("Settings")
    c = Compiler({k: d for k, d in docs.items() if d.model is not None}, problems,
                 settings.defaults if settings is not None else None)
    for doc in c.docs.values():
        record_origins(doc, c.origins)
    parts = _compile_kinds(c, models)
    _cross_checks(c, parts)
    if c.problems or set(parts) != set(schema.RULE_KINDS):
        return None
    return _assemble(c, models, parts)


def _compile_kinds(c: Compiler, models: dict[str, Any]) -> dict[str, Any]:
    """Each present kind compiled on its own (``Settings`` needs no compiling beyond its model)."""
    manus = models.get("Manufacturers")
    m = manus.unitsPerAccelerator if manus is not None else _FALLBACK_M
    compilers: dict[str, Any] = {
        "Settings": lambda model: model,
        "Manufacturers": lambda model: kinds.compile_manufacturers(c, model),
        "UnitResourcePresets": lambda model: kinds.compile_presets(c, model),
        "Topology": lambda model: kinds.compile_topology(c, model),
        "Namespaces": lambda model: kinds.compile_namespaces(c, model),
        "Naming": lambda model: naming.compile_naming(c, model),
        "Grouping": lambda model: naming.compile_grouping(c, model),
        "Normalisation": lambda model: kinds.compile_normalisation(c, model),
        "Queues": lambda model: kinds.compile_queues(c, model, m),
        "Capacity": lambda model: kinds.compile_capacity(c, model, m),
        "Lifecycle": lambda model: compile_lifecycle(c, model),
        "Vocabulary": lambda model: meta.compile_vocabulary(c, model),
        "Diff": lambda model: meta.compile_diff(c, model),
        "Output": lambda model: meta.compile_output(c, model),
        "Admission": lambda model: kinds.compile_admission(c, model, m),
    }
    return {kind: compilers[kind](model) for kind, model in models.items()}


def _cross_checks(c: Compiler, parts: dict[str, Any]) -> None:
    if "UnitResourcePresets" in parts and "Manufacturers" in parts:
        checks.check_preset_manufacturers(c, c.docs["UnitResourcePresets"].model, parts["Manufacturers"])
    if "Admission" in parts and "Capacity" in parts:
        checks.check_admission_families(c, parts["Admission"][1], parts["Capacity"].families)
    if "Naming" in parts and "Grouping" in parts:
        checks.check_flavor_names(c, parts["Naming"], parts["Grouping"])
        checks.check_pool_names(c, parts["Naming"], parts["Grouping"])


def _req(value: T | None) -> T:
    """A compiled part that is only ``None`` after a reported problem (never when assembling)."""
    assert value is not None, "compiled rules assembled despite a problem"
    return value


def _flavor(names: naming.CompiledNaming, grouping: naming.CompiledGrouping, kind_name: str) -> FlavorKind:
    group = grouping.flavor[kind_name]
    return FlavorKind(group.key, _req(group.contributes), _req(names.flavor[kind_name]), group.pin_cpu_only)


def _assemble(c: Compiler, models: dict[str, Any], parts: dict[str, Any]) -> Rules:
    """The frozen :class:`Rules` from the compiled parts of a problem-free load."""
    settings, queues_model = models["Settings"], models["Queues"]
    queues: kinds.CompiledQueues = parts["Queues"]
    capacity: kinds.CompiledCapacity = parts["Capacity"]
    strategy, entries = parts["Admission"]
    return Rules(
        settings=SettingsRules(dict(settings.defaults), (settings.source.namespace, settings.source.name)),
        manufacturers=ManufacturersRules(models["Manufacturers"].unitsPerAccelerator, parts["Manufacturers"]),
        naming=_naming(parts["Naming"]), grouping=_grouping(models["Grouping"], parts["Naming"], parts["Grouping"]),
        normalisation=parts["Normalisation"], presets=parts["UnitResourcePresets"],
        namespaces=NamespacesRules(parts["Namespaces"]), topology=TopologyRules(parts["Topology"]),
        queues=QueuesRules(_req(queues.quota_cpu), _req(queues.quota_accelerated), queues.admission_checks,
                           queues_model.maxFlavorsPerGroup, _req(queues.derive_instance_types)),
        capacity=_capacity(capacity), lifecycle=parts["Lifecycle"], diff=parts["Diff"], output=parts["Output"],
        vocabulary=_req(parts["Vocabulary"]),
        admission=admission.derive(strategy, entries, _admission_resources(parts, queues, capacity)),
        origins=c.origins, conditions=c.conditions, setting_refs=c.setting_refs,
    )


def _naming(names: naming.CompiledNaming) -> NamingRules:
    flavors = [_req(names.flavor[kind_name]) for kind_name in ("cpu", "accelerated")]
    return NamingRules(
        _req(names.node_feature), _req(names.topology), _req(names.local_queue),
        format_matcher(_req(names.local_queue), ".*", ".*")[1],
        {k: _req(v) for k, v in names.pool_name.items()}, {k: _req(v) for k, v in names.catalog_name.items()},
        os.path.commonprefix([flavor.parts[0][0] for flavor in flavors]),
        names.unawareCpuDisplayName, names.displayNameMaxLength)


def _grouping(model: schema.GroupingRules, names: naming.CompiledNaming,
              grouping: naming.CompiledGrouping) -> GroupingRules:
    return GroupingRules(
        _flavor(names, grouping, "cpu"), _flavor(names, grouping, "accelerated"),
        {k: (_req(g), _req(a)) for k, (g, a) in grouping.pool_identity.items()},
        model.managedLabel.key, model.managedLabel.stampValue, _req(grouping.managed_stamp_when),
        model.cpuOnlyLabel.key, _req(grouping.cpu_only_when), _req(grouping.aware), grouping.generic_group)


def _capacity(capacity: kinds.CompiledCapacity) -> CapacityRules:
    pin = capacity.pin_formats
    return CapacityRules(
        capacity.families, _req(capacity.fit_sliced_label), _req(capacity.fit_shared_label), capacity.share_units,
        capacity.shared_modes, capacity.fit_populations, _req(pin[0]), _req(pin[1]), _req(pin[2]),
        _req(capacity.workload_fit_when))


def _admission_resources(parts: dict[str, Any], queues: kinds.CompiledQueues,
                         capacity: kinds.CompiledCapacity) -> list[admission.Resources]:
    """Each manufacturer's resources as the Manufacturers, Capacity and Queues rules spell them."""
    out = []
    pin = capacity.pin_formats
    credits = _req(queues.quota_accelerated).resource
    for manufacturer in sorted(parts["Manufacturers"].values(), key=lambda m: m.name):
        values = {"base": manufacturer.resource_base}
        inputs = {"resourceBase": manufacturer.resource_base, "slicedCard": _req(pin[0]).render(values),
                  "slicedUnits": _req(pin[1]).render(values), "sharedCards": _req(pin[2]).render(values)}
        families = {family.name: (family.pool.render(values), *(key.render(values) for key, _ in family.keys))
                    for family in capacity.families}
        out.append(admission.Resources(manufacturer.name, inputs, families,
                                       credits.render({"manufacturer": manufacturer.name})))
    return out
