"""One compile function per engine rule kind: each reads only its own validated model (and, for
probing expressions, M), so every kind that is intact is compiled even when another file is broken."""

from __future__ import annotations

import re
from functools import partial
from types import MappingProxyType
from typing import Any, Callable

import msgspec

from gpustack_render.errors import did_you_mean
from gpustack_render.k8s import QUALIFIED_KEY
from gpustack_render.rules import schema
from gpustack_render.rules.admission import Entry
from gpustack_render.rules.compiler import Compiler, Loc
from gpustack_render.rules.expressions import Arithmetic, CompiledCondition, NameFormat, always, check_replacement
from gpustack_render.rules.model import (CAPACITY_VARIABLES, HOSTNAME_LEVEL, QUOTA_VARIABLES, AdmissionCheckRule,
                                         AKeyRule, AnnotationIdSource, CapacityFamilyRule, CpuManufacturerSource,
                                         CruftCutAt, CruftDelete, CruftRegex, CruftRule, CruftTrim, FitPopulations, GKeyRule,
                                         LabelsIdSource, ManufacturerRule, Normalisation, NormalizeNameRule,
                                         PresetEntry, PresetRow, Presets, PresetTier, QuotaRule)


def quota_samples(m: int) -> dict[str, tuple[Any, ...]]:
    """Typical inputs of a queue's nominalQuota (capacity = nodes x count), probed at load."""
    return {"capacity": (8, 1, 2, 3, 96, 1024), "count": (8, 1, 2, 3, 96), "nodes": (1, 2, 3, 100), "M": (m,)}


def capacity_samples(m: int) -> dict[str, tuple[Any, ...]]:
    """Typical inputs of a capacity key (per Node: logical and partitioned cards, slices, MiB of a card)."""
    return {"L": (1, 0, 2, 8), "P": (1, 0, 7, 8), "slices": (1, 0, 4), "vram": (16384, 0, 24576, 81920),
            "overcommit": (False, True), "M": (m,)}


def compile_manufacturers(c: Compiler, manus: schema.ManufacturersRules) -> dict[str, ManufacturerRule]:
    manufacturers: dict[str, ManufacturerRule] = {}
    for i, item in enumerate(manus.items):
        if item.name in manufacturers:
            c.fail("Manufacturers", ("items", i, "name"), f"duplicate manufacturer '{item.name}'")
            continue
        if not QUALIFIED_KEY.match(item.resourceBase) or "/" not in item.resourceBase:
            c.fail("Manufacturers", ("items", i, "resourceBase"),
                   f"'{item.resourceBase}' is not a valid extended resource name (domain/name)")
        rewrites = tuple(
            compiled for j, r in enumerate(item.publishProfile)
            if (compiled := _regex_rewrite(c, "Manufacturers", ("items", i, "publishProfile", j), "match",
                                           r.match, r.replace)) is not None)
        manufacturers[item.name] = ManufacturerRule(item.name, item.resourceBase, item.partitionKind, rewrites)
    return manufacturers


def _regex_rewrite(c: Compiler, kind: str, loc: Loc, pattern_key: str, regex: str, replacement: str) -> Any:
    """A regex and its replacement template, both checked at load (a bad group reference too)."""
    pattern = c.at(kind, loc + (pattern_key,), lambda: re.compile(regex))
    if pattern is None:
        return None
    return c.at(kind, loc, lambda: check_replacement(pattern, replacement))  # points at its replace


def compile_presets(c: Compiler, presets: schema.PresetRules) -> Presets:
    """The rule file as a frozen value, with the product match table flattened to token prefixes
    (unknown tiers and duplicates refused)."""
    tiers = set(presets.tiers)
    entries: dict[str, tuple[PresetEntry, ...]] = {}
    seps = "[" + re.escape(presets.tokenSeparators) + "]"
    for manu, rows in presets.manufacturers.items():
        flat: list[PresetEntry] = []
        seen_prefixes: dict[tuple[str, ...], int] = {}  # tokens → the entry first listing them (duplicates)
        for i, row in enumerate(rows):
            for tier_loc, tier in [(("tier",), row.tier)] + [(("by", k), v) for k, v in row.by.items()]:
                if tier not in tiers:
                    c.fail("UnitResourcePresets", ("manufacturers", manu, i) + tier_loc,
                           f"unknown tier '{tier}'", did_you_mean(tier, tiers))
            for j, prefix in enumerate(row.prefixes):
                tokens = tuple(t for t in re.split(seps, prefix.lower()) if t)
                if tokens in seen_prefixes:
                    c.fail("UnitResourcePresets", ("manufacturers", manu, i, "prefixes", j),
                           f"duplicate preset prefix '{prefix}' for manufacturer '{manu}'",
                           f"already listed in manufacturers.{manu}.{seen_prefixes[tokens]}; this one could never match")
                    continue
                seen_prefixes[tokens] = i
                flat.append(PresetEntry(row.tier, tokens, tuple((k.lower(), v) for k, v in row.by.items())))
        entries[manu] = tuple(flat)
    return _presets(presets, entries)


def _presets(presets: schema.PresetRules, entries: dict[str, tuple[PresetEntry, ...]]) -> Presets:
    def tier(units: schema.UnitResources) -> PresetTier:
        return PresetTier(units.cpu, units.ram)
    return Presets(
        presets.localStorage, tier(presets.cpuPool), tier(presets.fallback),
        MappingProxyType({name: tier(units) for name, units in presets.tiers.items()}),
        frozenset(presets.ignoreLeadingTokens), presets.tokenSeparators,
        MappingProxyType({manu: tuple(PresetRow(row.tier, tuple(row.prefixes), MappingProxyType(dict(row.by)))
                                      for row in rows) for manu, rows in presets.manufacturers.items()}),
        entries)


def compile_topology(c: Compiler, topology: schema.TopologyRules) -> tuple[str, ...]:
    levels = tuple(topology.levels)
    for i, level in enumerate(levels):
        if level in levels[:i]:
            c.fail("Topology", ("levels", i), f"topology level '{level}' is listed twice; levels must be unique")
    if levels and levels[-1] != HOSTNAME_LEVEL:
        c.fail("Topology", ("levels", len(levels) - 1), f"the last topology level must be {HOSTNAME_LEVEL}")
    return levels


def compile_namespaces(c: Compiler, namespaces: schema.NamespaceRules) -> frozenset[str]:
    reserved = namespaces.reserved
    for i, namespace in enumerate(reserved):
        if namespace in reserved[:i]:
            c.fail("Namespaces", ("reserved", i), f"reserved namespace '{namespace}' is listed twice")
    return frozenset(reserved)


def compile_normalisation(c: Compiler, norm: schema.NormalisationRules) -> Normalisation:
    """The rule file as a frozen value, with the NormalizeName cruft steps as functions and the
    idPrefix length expressions."""
    id_prefix_max: dict[int, Arithmetic] = {}
    for i, source in enumerate(norm.gKey.idPrefix):
        if isinstance(source, schema.AnnotationSource):
            expr = c.arithmetic("Normalisation", ("gKey", "idPrefix", i, "maxLength"), source.maxLength,
                                {"manu"}, {"manu": ("intel", "amd", norm.gKey.manufacturer.fallback)})
            if expr:
                id_prefix_max[i] = expr
    cruft: list[Callable[[str], str]] = []
    for i, step in enumerate(norm.normalizeName.cruft):
        compiled = c.at("Normalisation", ("normalizeName", "cruft", i), partial(_cruft_step, step))
        if compiled:
            cruft.append(compiled)
    return _normalisation(norm, tuple(cruft), id_prefix_max)


def _normalisation(norm: schema.NormalisationRules, cruft: tuple[Callable[[str], str], ...],
                   id_prefix_max: dict[int, Arithmetic]) -> Normalisation:
    g, spec = norm.gKey, norm.normalizeName
    sources = tuple(AnnotationIdSource(s.annotation, s.stripCruft, s.maxLength)
                    if isinstance(s, schema.AnnotationSource) else LabelsIdSource(tuple(s.labels), s.join)
                    for s in g.idPrefix)
    manufacturer = CpuManufacturerSource(g.manufacturer.label, g.manufacturer.fallback,
                                         tuple(g.manufacturer.absentValues))
    return Normalisation(
        GKeyRule(g.maxLength, manufacturer, sources), AKeyRule(norm.aKey.labelPrefix, norm.aKey.value),
        NormalizeNameRule(tuple(_cruft_rule(step) for step in spec.cruft), spec.spaceBecomes, spec.keep,
                          spec.separators),
        cruft, id_prefix_max)


def _cruft_rule(step: Any) -> CruftRule:
    if isinstance(step, schema.CutAt):
        return CruftCutAt(step.cutAt)
    if isinstance(step, schema.Delete):
        return CruftDelete(tuple(step.delete))
    if isinstance(step, schema.RegexReplace):
        return CruftRegex(step.regex, step.replace)
    return CruftTrim()


def _cruft_step(step: Any) -> Callable[[str], str]:
    if isinstance(step, schema.CutAt):
        marker = step.cutAt
        return lambda s: s.split(marker, 1)[0]
    if isinstance(step, schema.Delete):
        words = tuple(step.delete)

        def delete(s: str) -> str:
            for word in words:
                s = s.replace(word, "")
            return s
        return delete
    if isinstance(step, schema.RegexReplace):
        pattern, replacement = re.compile(step.regex), step.replace
        check_replacement(pattern, replacement)
        return lambda s: pattern.sub(replacement, s, count=1)
    return str.strip


class CompiledQueues(msgspec.Struct, frozen=True, eq=False):
    """``rules/queues.yaml`` compiled, None where a part did not (made into :class:`QueuesRules`)."""
    quota_cpu: QuotaRule | None
    quota_accelerated: QuotaRule | None
    admission_checks: tuple[AdmissionCheckRule, ...]
    derive_instance_types: CompiledCondition | None


def compile_queues(c: Compiler, queues: schema.QueueRules, m: int) -> CompiledQueues:
    quota: dict[str, QuotaRule | None] = {}
    for kind_name, allowed in (("cpu", set()), ("accelerated", {"manufacturer"})):
        rule: schema.Quota = getattr(queues.quota, kind_name)
        resource = c.fmt("Queues", ("quota", kind_name, "resource"), rule.resource, allowed)
        expr = c.arithmetic("Queues", ("quota", kind_name, "nominalQuota"), rule.nominalQuota, QUOTA_VARIABLES,
                            quota_samples(m))
        quota[kind_name] = QuotaRule(resource, expr) if resource and expr else None
    checks = []
    for i, check in enumerate(queues.admissionChecks):
        if check.name in [other.name for other in queues.admissionChecks[:i]]:
            c.fail("Queues", ("admissionChecks", i, "name"), f"duplicate admission check name '{check.name}'")
        when = c.cond("Queues", ("admissionChecks", i, "when"), check.when, "queue") if check.when else always
        checks.append(AdmissionCheckRule(check.name, check.controllerName, when or always))
    derive = c.cond("Queues", ("deriveInstanceTypes",), queues.deriveInstanceTypes, "global")
    return CompiledQueues(quota["cpu"], quota["accelerated"], tuple(checks), derive)


class CompiledCapacity(msgspec.Struct, frozen=True, eq=False):
    """``rules/capacity.yaml`` compiled, None where a part did not (made into :class:`CapacityRules`)."""
    families: tuple[CapacityFamilyRule, ...]
    fit_sliced_label: NameFormat | None
    fit_shared_label: NameFormat | None
    share_units: int
    shared_modes: frozenset[int]
    pin_formats: tuple[NameFormat | None, NameFormat | None, NameFormat | None]  # slicedCard, slicedUnits, sharedCards
    workload_fit_when: CompiledCondition | None
    fit_populations: FitPopulations


def compile_capacity(c: Compiler, capacity: schema.CapacityRules, m: int) -> CompiledCapacity:
    fit = capacity.fitLabels
    fit_sliced = c.fmt("Capacity", ("fitLabels", "slicedMaxFreeUnits"), fit.slicedMaxFreeUnits, {"aKey"})
    fit_shared = c.fmt("Capacity", ("fitLabels", "sharedFreeCards"), fit.sharedFreeCards, {"aKey"})
    _check_fit_label_formats(c, fit, fit_sliced, fit_shared)
    share_expr = c.arithmetic("Capacity", ("fitLabels", "shareUnits"), fit.shareUnits, {"M"},
                              {"M": (m,)})  # probed with the one value it reads
    share_units = share_expr(M=m) if share_expr else 0
    return CompiledCapacity(_families(c, capacity, m), fit_sliced, fit_shared, share_units,
                            frozenset(fit.sharedModes), _workload_fit(c, capacity.workloadFit),
                            c.cond("Capacity", ("workloadFit", "when"), capacity.workloadFit.when, "global"),
                            FitPopulations(fit.populations.slicedMaxFreeUnits, fit.populations.sharedFreeCards))


def _families(c: Compiler, capacity: schema.CapacityRules, m: int) -> tuple[CapacityFamilyRule, ...]:
    families = []
    for i, fam in enumerate(capacity.families):
        loc: Loc = ("families", i)
        if fam.name in [other.name for other in capacity.families[:i]]:
            c.fail("Capacity", loc + ("name",), f"duplicate capacity family name '{fam.name}'")
        pool = c.fmt("Capacity", loc + ("pool",), fam.pool, {"base"})
        keys = [(c.fmt("Capacity", loc + ("keys", j, "key"), k.key, {"base"}),
                 c.arithmetic("Capacity", loc + ("keys", j, "value"), k.value, CAPACITY_VARIABLES,
                              capacity_samples(m)))
                for j, k in enumerate(fam.keys)]
        profile_key = c.fmt("Capacity", loc + ("profileKey",), fam.profileKey, {"base", "kind", "profile"}) \
            if fam.profileKey else None
        compiled_keys = tuple((key, value) for key, value in keys if key is not None and value is not None)
        if pool is None or len(compiled_keys) != len(keys) or (fam.profileKey and profile_key is None):
            continue  # its problems are reported: no Rules are made
        families.append(CapacityFamilyRule(fam.name, fam.population, pool, fam.requiresPartitionKind,
                                           compiled_keys, profile_key))
    return tuple(families)


def _check_fit_label_formats(c: Compiler, fit: schema.FitLabels, *formats: NameFormat | None) -> None:
    """Ownership of fit labels is "either format with some aKey" (stage3-node.md §5), and owned
    labels that are not desired are removed: a format must hold ``{aKey}`` exactly once, with text
    around it, and the two must differ, or the renderer would remove labels it never wrote."""
    fields = ("slicedMaxFreeUnits", "sharedFreeCards")
    for field_name, label_format in zip(fields, formats):
        if label_format is None:
            continue
        probe = label_format.render({"aKey": "\x00"})
        if probe.count("\x00") != 1:
            c.fail("Capacity", ("fitLabels", field_name), "must contain the placeholder {aKey} exactly once")
        elif probe == "\x00":
            c.fail("Capacity", ("fitLabels", field_name), "needs text besides {aKey}",
                   "the renderer owns, and removes, every label of this form")
    if fit.slicedMaxFreeUnits == fit.sharedFreeCards:
        c.fail("Capacity", ("fitLabels", "sharedFreeCards"), f"'{fit.sharedFreeCards}' is already used by slicedMaxFreeUnits")


def _workload_fit(c: Compiler, pin: schema.WorkloadFit) -> tuple[NameFormat | None, NameFormat | None, NameFormat | None]:
    """Capacity ``workloadFit``: three distinct ``{base}`` resource formats (the Workload fit pin)."""
    fields = ("slicedCard", "slicedUnits", "sharedCards")
    formats = tuple(c.fmt("Capacity", ("workloadFit", f), getattr(pin, f), {"base"}) for f in fields)
    for i, f in enumerate(fields):
        if getattr(pin, f) in [getattr(pin, other) for other in fields[:i]]:
            c.fail("Capacity", ("workloadFit", f), f"'{getattr(pin, f)}' is already used by another workloadFit entry")
        elif (compiled := formats[i]) is not None and "base" not in compiled.placeholders:
            c.fail("Capacity", ("workloadFit", f), "must contain the placeholder {base}")
    return formats[0], formats[1], formats[2]


def compile_admission(c: Compiler, admission: schema.AdmissionRules, m: int) -> tuple[str, tuple[Entry, ...]]:
    """Admission: the quota-check strategy and the transformation entries (``credits`` evaluated
    with M); each input named once, exactly one of ``input`` or ``family`` per entry."""
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for i, rule in enumerate(admission.transformations):
        loc: Loc = ("transformations", i)
        if (rule.input is None) == (rule.family is None):
            c.fail("Admission", loc, "needs exactly one of input or family")
            continue
        named = rule.input or f"family {rule.family}"
        if named in seen:
            c.fail("Admission", loc + ("input" if rule.input else "family",),
                   f"{named} is already transformed by transformations[{seen[named]}]")
            continue
        seen[named] = i
        credits = None
        if rule.credits is not None:
            expr = c.arithmetic("Admission", loc + ("credits",), rule.credits, {"M"}, {"M": (m,)})
            if expr is None:
                continue
            credits = expr(M=m)
        entries.append(Entry(i, rule.input, rule.family, rule.strategy, credits, rule.multiplyBy))
    return admission.quotaCheckStrategy, tuple(entries)
