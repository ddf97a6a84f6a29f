"""Validated rule models → compiled :class:`~gpustack_render.rules.Rules` (meaning checks)."""

from __future__ import annotations

import os
import re
from typing import Any, Callable

from gpustack_render.rules import schema
from gpustack_render.errors import did_you_mean
from gpustack_render.k8s import QUALIFIED_KEY, label_value, qualified_name
from gpustack_render.rules.expressions import Arithmetic, NameFormat, always, compile_condition
from gpustack_render.rules import (ACCEL_FLAVOR_FIELDS, CAPACITY_VARIABLES, LIFECYCLE_FACTS, CapacityFamilyRule,
                                   LifecycleWarningRule, SavedStopPolicyRule, StopPolicyRule, CPU_FLAVOR_FIELDS,
                                   HOSTNAME_LEVEL, NODE_FACTS,
                                   QUEUE_FACTS, QUOTA_VARIABLES, AdmissionCheckRule, FlavorKind,
                                   KindMetadata, ManufacturerRule, PresetEntry, QuotaRule, Rules, _Compiler, _Document)

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
        return lambda s: pattern.sub(replacement, s, count=1)
    return str.strip


def compile_rules(c: _Compiler, docs: dict[str, _Document]) -> Rules | None:
    m: dict[str, Any] = {kind: doc.model for kind, doc in docs.items()}
    settings: schema.SettingsRules = m["Settings"]
    setting_names = set(settings.defaults)
    manus: schema.ManufacturersRules = m["Manufacturers"]
    naming: schema.NamingRules = m["Naming"]
    grouping: schema.GroupingRules = m["Grouping"]
    norm: schema.NormalisationRules = m["Normalisation"]
    presets: schema.PresetRules = m["UnitResourcePresets"]
    queues: schema.QueueRules = m["Queues"]

    def cond(kind: str, loc: tuple[str | int, ...], value: Any, facts: set[str]) -> Any:
        return c.at(kind, loc, lambda: compile_condition(value, facts, setting_names))

    def fmt(kind: str, loc: tuple[str | int, ...], value: str, allowed: set[str]) -> Any:
        return c.at(kind, loc, lambda: NameFormat.compile(value, allowed))

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
            if (compiled := c.at("Manufacturers", ("items", i, "publishProfile", j, "match"),
                                 lambda r=r: (re.compile(r.match), r.replace))) is not None)
        manufacturers[item.name] = ManufacturerRule(item.name, item.resourceBase, item.partitionKind, rewrites)

    tiers = set(presets.tiers)
    entries: dict[str, tuple[PresetEntry, ...]] = {}
    seps = "[" + re.escape(presets.tokenSeparators) + "]"
    for manu, rows in presets.manufacturers.items():
        if manu not in manufacturers:
            c.fail("UnitResourcePresets", ("manufacturers", manu), f"unknown manufacturer '{manu}'",
                   did_you_mean(manu, manufacturers) or "add it to the Manufacturers rules first")
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

    levels = tuple(m["Topology"].levels)
    for i, level in enumerate(levels):
        if level in levels[:i]:
            c.fail("Topology", ("levels", i), f"topology level '{level}' is listed twice; levels must be unique")
    if levels and levels[-1] != HOSTNAME_LEVEL:
        c.fail("Topology", ("levels", len(levels) - 1), f"the last topology level must be {HOSTNAME_LEVEL}")

    flavor_kinds: dict[str, FlavorKind | None] = {}
    for kind_name, allowed in (("cpu", CPU_FLAVOR_FIELDS), ("accelerated", ACCEL_FLAVOR_FIELDS)):
        group: schema.FlavorGroup = getattr(grouping.flavor, kind_name)
        for i, key_field in enumerate(group.key):
            if key_field not in allowed:
                c.fail("Grouping", ("flavor", kind_name, "key", i), f"unknown grouping field '{key_field}'",
                       did_you_mean(key_field, allowed))
        contributes = cond("Grouping", ("flavor", kind_name, "contributes"), group.contributes, NODE_FACTS)
        pin = cond("Grouping", ("flavor", kind_name, "pinCpuOnly"), group.pinCpuOnly, NODE_FACTS) \
            if group.pinCpuOnly else None
        name = fmt("Naming", ("resourceFlavor", kind_name), getattr(naming.resourceFlavor, kind_name), allowed)
        missing = name.placeholders - set(group.key) - {"gManu", "manufacturer"} if name else set()
        if missing:
            c.fail("Naming", ("resourceFlavor", kind_name),
                   f"placeholder(s) {', '.join(sorted(missing))} are not in the grouping key",
                   "flavors would collide: add them to Grouping flavor key")
        flavor_kinds[kind_name] = FlavorKind(tuple(group.key), contributes, name, pin) \
            if contributes and name else None

    pool_fields = {"gKey", "gManu", "os", "arch"}
    pool_name: dict[tuple[bool, bool], Any] = {}
    catalog_name: dict[tuple[bool, bool], Any] = {}
    for aware, attr in ((True, "whenAware"), (False, "whenUnaware")):
        for accel, kind_name in ((False, "cpu"), (True, "accelerated")):
            allowed = pool_fields | ({"aKey", "manufacturer"} if accel else set())
            pool_name[(aware, accel)] = fmt("Naming", ("pool", attr, kind_name),
                                            getattr(getattr(naming.pool, attr), kind_name), allowed)
            catalog_name[(aware, accel)] = fmt("Naming", ("catalog", attr, kind_name),
                                               getattr(getattr(naming.catalog, attr), kind_name),
                                               {"gKey", "gManu", "aKey", "manufacturer"} if accel
                                               else {"gKey", "gManu"})
    pool_identity: dict[bool, Any] = {}
    for aware, attr in ((True, "whenAware"), (False, "whenUnaware")):
        ident: schema.PoolIdentity = getattr(grouping.pool, attr)
        pool_identity[aware] = (fmt("Grouping", ("pool", attr, "generalGroup"), ident.generalGroup,
                                    {"gKey", "gManu"}),
                                fmt("Grouping", ("pool", attr, "acceleratorGroup"), ident.acceleratorGroup,
                                    {"aKey"}))

    id_prefix_max: dict[int, Arithmetic] = {}
    for i, source in enumerate(norm.gKey.idPrefix):
        if isinstance(source, schema.AnnotationSource):
            expr = c.at("Normalisation", ("gKey", "idPrefix", i, "maxLength"),
                        lambda source=source: Arithmetic.compile(source.maxLength, {"manu"}))
            if expr:
                id_prefix_max[i] = expr
    cruft = []
    for i, step in enumerate(norm.normalizeName.cruft):
        compiled = c.at("Normalisation", ("normalizeName", "cruft", i), lambda step=step: _cruft_step(step))
        if compiled:
            cruft.append(compiled)

    quota = {}
    for kind_name, allowed in (("cpu", set()), ("accelerated", {"manufacturer"})):
        rule: schema.Quota = getattr(queues.quota, kind_name)
        resource = fmt("Queues", ("quota", kind_name, "resource"), rule.resource, allowed)
        expr = c.at("Queues", ("quota", kind_name, "nominalQuota"),
                    lambda rule=rule: Arithmetic.compile(rule.nominalQuota, QUOTA_VARIABLES))
        quota[kind_name] = QuotaRule(resource, expr) if resource and expr else None
    checks = []
    for i, check in enumerate(queues.admissionChecks):
        if check.name in [other.name for other in queues.admissionChecks[:i]]:
            c.fail("Queues", ("admissionChecks", i, "name"), f"duplicate admission check name '{check.name}'")
        when = cond("Queues", ("admissionChecks", i, "when"), check.when, QUEUE_FACTS) if check.when else always
        checks.append(AdmissionCheckRule(check.name, check.controllerName, when or always))

    reserved = m["Namespaces"].reserved
    for i, namespace in enumerate(reserved):
        if namespace in reserved[:i]:
            c.fail("Namespaces", ("reserved", i), f"reserved namespace '{namespace}' is listed twice")

    managed_when = cond("Grouping", ("managedLabel", "stampWhen"), grouping.managedLabel.stampWhen, NODE_FACTS)
    cpu_only_when = cond("Grouping", ("cpuOnlyLabel", "when"), grouping.cpuOnlyLabel.when, NODE_FACTS)
    node_feature = fmt("Naming", ("nodeFeature",), naming.nodeFeature, {"node"})
    topology = fmt("Naming", ("topology",), naming.topology, {"profile"})
    local_queue = fmt("Naming", ("localQueue",), naming.localQueue, {"clusterQueue"})
    capacity: schema.CapacityRules = m["Capacity"]
    families = []
    for i, fam in enumerate(capacity.families):
        loc = ("families", i)
        if fam.name in [other.name for other in capacity.families[:i]]:
            c.fail("Capacity", loc + ("name",), f"duplicate capacity family name '{fam.name}'")
        pool = fmt("Capacity", loc + ("pool",), fam.pool, {"base"})
        keys = tuple((fmt("Capacity", loc + ("keys", j, "key"), k.key, {"base"}),
                      c.at("Capacity", loc + ("keys", j, "value"),
                           lambda k=k: Arithmetic.compile(k.value, CAPACITY_VARIABLES)))
                     for j, k in enumerate(fam.keys))
        profile_key = fmt("Capacity", loc + ("profileKey",), fam.profileKey, {"base", "kind", "profile"}) \
            if fam.profileKey else None
        families.append(CapacityFamilyRule(fam.name, fam.population, pool, fam.requiresPartitionKind, keys,
                                           profile_key))
    fit = capacity.fitLabels
    fit_sliced = fmt("Capacity", ("fitLabels", "slicedMaxFreeUnits"), fit.slicedMaxFreeUnits, {"aKey"})
    fit_shared = fmt("Capacity", ("fitLabels", "sharedFreeCards"), fit.sharedFreeCards, {"aKey"})
    _check_fit_label_formats(c, fit, fit_sliced, fit_shared)
    share_expr = c.at("Capacity", ("fitLabels", "shareUnits"), lambda: Arithmetic.compile(fit.shareUnits, {"M"}))
    share_units = share_expr(M=manus.unitsPerAccelerator) if share_expr else 0
    pin_formats = _workload_fit(c, capacity.workloadFit, fmt)
    lifecycle: schema.LifecycleRules = m["Lifecycle"]
    stop_rules = []
    for i, rule in enumerate(lifecycle.stopPolicy):
        loc = ("stopPolicy", i)
        if rule.name in [r.name for r in lifecycle.stopPolicy[:i]]:
            c.fail("Lifecycle", loc + ("name",), f"duplicate rule name '{rule.name}'")
        when = cond("Lifecycle", loc + ("when",), rule.when, LIFECYCLE_FACTS) if rule.when else always
        if rule.when is None and i != len(lifecycle.stopPolicy) - 1:
            c.fail("Lifecycle", loc + ("name",), f"rule '{rule.name}' has no 'when' but is not last",
                   "the rules after it could never apply")
        c.at("Lifecycle", loc + ("name",), lambda: None)  # records the rule's file:line for explain
        origin = c.origins[f"Lifecycle:{'.'.join(map(str, loc + ('name',)))}"]
        stop_rules.append(StopPolicyRule(rule.name, when or always, rule.stopPolicy, rule.groups,
                                         tuple(sorted(rule.annotations.items())), rule.saveStopPolicy, origin))
    if lifecycle.stopPolicy[-1].when is not None:
        c.fail("Lifecycle", ("stopPolicy", len(lifecycle.stopPolicy) - 1, "when"),
               "the last stopPolicy rule must have no 'when' (the default)")
    save_rules = []
    for i, saved in enumerate(lifecycle.save):
        loc = ("save", i)
        when = cond("Lifecycle", loc + ("when",), saved.when, LIFECYCLE_FACTS) if saved.when else always
        c.at("Lifecycle", loc + ("name",), lambda: None)  # records the rule's file:line for explain
        save_rules.append(SavedStopPolicyRule(saved.name, when or always, saved.stopPolicy,
                                              tuple(sorted(saved.annotations.items())),
                                              c.origins[f"Lifecycle:save.{i}.name"]))
    lifecycle_warnings = []
    for i, warning in enumerate(lifecycle.warnings):
        loc = ("warnings", i)
        when = cond("Lifecycle", loc + ("when",), warning.when, LIFECYCLE_FACTS)
        message = fmt("Lifecycle", loc + ("message",), warning.message, {"queue", "instanceType"})
        if when and message:
            c.at("Lifecycle", loc + ("name",), lambda: None)
            lifecycle_warnings.append(LifecycleWarningRule(warning.name, when, message,
                                                           c.origins[f"Lifecycle:warnings.{i}.name"]))
    check_diff(c, m["Diff"])
    output = compile_output(c, m["Output"])
    if c.problems:
        return None
    return Rules(
        setting_defaults=dict(settings.defaults),
        settings_source=(settings.source.namespace, settings.source.name),
        units_per_accelerator=manus.unitsPerAccelerator,
        manufacturers=manufacturers, naming=naming,
        node_feature_name=node_feature, topology_name=topology, local_queue_name=local_queue,
        flavor_cpu=flavor_kinds["cpu"], flavor_accelerated=flavor_kinds["accelerated"],  # type: ignore[arg-type]
        pool_name=pool_name, catalog_name=catalog_name, pool_identity=pool_identity,
        managed_key=grouping.managedLabel.key, managed_stamp_value=grouping.managedLabel.stampValue,
        managed_stamp_when=managed_when, cpu_only_key=grouping.cpuOnlyLabel.key, cpu_only_when=cpu_only_when,
        normalisation=norm, cruft_steps=tuple(cruft), id_prefix_max_length=id_prefix_max,
        presets=presets, preset_entries=entries,
        reserved_namespaces=frozenset(m["Namespaces"].reserved), topology_levels=levels,
        max_flavors_per_group=queues.maxFlavorsPerGroup,
        quota_cpu=quota["cpu"], quota_accelerated=quota["accelerated"],  # type: ignore[arg-type]
        admission_checks=tuple(checks), capacity_families=tuple(families), fit_sliced_label=fit_sliced,
        fit_shared_label=fit_shared, share_units=share_units, shared_modes=frozenset(fit.sharedModes),
        pin_sliced_card=pin_formats[0], pin_sliced_units=pin_formats[1], pin_shared_cards=pin_formats[2],
        resource_flavor_prefix=os.path.commonprefix([flavor_kinds["cpu"].name.parts[0][0],  # type: ignore[union-attr]
                                                     flavor_kinds["accelerated"].name.parts[0][0]]),  # type: ignore[union-attr]
        lifecycle=tuple(stop_rules), lifecycle_warnings=tuple(lifecycle_warnings), lifecycle_save=tuple(save_rules),
        lifecycle_markers=lifecycle.markers,
        origins=c.origins, models=m, diff=m["Diff"], output=output,
    )


def _check_fit_label_formats(c: _Compiler, fit: schema.FitLabels, *formats: Any) -> None:
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


def _workload_fit(c: _Compiler, pin: schema.WorkloadFit, fmt: Callable[..., Any]) -> tuple[Any, Any, Any]:
    """Capacity ``workloadFit``: three distinct ``{base}`` resource formats (the Workload fit pin)."""
    fields = ("slicedCard", "slicedUnits", "sharedCards")
    formats = tuple(fmt("Capacity", ("workloadFit", f), getattr(pin, f), {"base"}) for f in fields)
    for i, f in enumerate(fields):
        if getattr(pin, f) in [getattr(pin, other) for other in fields[:i]]:
            c.fail("Capacity", ("workloadFit", f), f"'{getattr(pin, f)}' is already used by another workloadFit entry")
        elif formats[i] is not None and "base" not in formats[i].placeholders:
            c.fail("Capacity", ("workloadFit", f), "must contain the placeholder {base}")
    return formats  # type: ignore[return-value]


def check_diff(c: _Compiler, diff: schema.DiffRules) -> None:
    """rules/diff.yaml: every kind it names must be a compared kind, and nothing is listed twice,
    so a typo cannot silently switch off an ownership, create-only or default rule."""
    kinds = [(k.group, k.kind) for k in diff.kinds]
    names = {f"{kind}.{group}" if group else kind for group, kind in kinds}
    for i, key in enumerate(kinds):
        if key in kinds[:i]:
            c.fail("Diff", ("kinds", i, "kind"), f"kind {key[1]} of group '{key[0]}' is listed twice")
    for section, entries in (("createOnly", diff.createOnly), ("defaults", diff.defaults)):
        for i, entry in enumerate(entries):
            if (entry.group, entry.kind) not in kinds:
                wanted = f"{entry.kind}.{entry.group}" if entry.group else entry.kind
                c.fail("Diff", (section, i, "kind"), f"{wanted} is not one of the compared kinds",
                       did_you_mean(wanted, names) or "add it under kinds first")
    for i, entry in enumerate(diff.defaults):
        paths = [tuple(v.path) for v in entry.values]
        for j, path in enumerate(paths):
            if path in paths[:j]:
                c.fail("Diff", ("defaults", i, "values", j, "path"), f"default for {'.'.join(path)} is listed twice")
    paths = [tuple(f.path) for f in diff.ignore]
    for i, path in enumerate(paths):
        if path in paths[:i]:
            c.fail("Diff", ("ignore", i, "path"), f"ignored field {'.'.join(path)} is listed twice")


def compile_output(c: _Compiler, output: schema.OutputRules) -> dict[str, KindMetadata]:
    """rules/output.yaml: only kinds the renderer writes (a typo would add nothing, silently), keys
    and values the API server accepts (checked here, not as a failing apply), maps sorted by key."""
    from gpustack_render.rules.schema import RENDER_KINDS
    compiled: dict[str, KindMetadata] = {}
    for kind, meta in output.kinds.items():
        loc: tuple[str | int, ...] = ("kinds", kind)
        if kind not in RENDER_KINDS:
            c.fail("Output", loc, f"'{kind}' is not a rendered kind",
                   did_you_mean(kind, RENDER_KINDS) or f"one of {', '.join(RENDER_KINDS)}", at_key=True)
            continue
        for section, check_value in (("labels", label_value), ("annotations", None)):
            for key, value in getattr(meta, section).items():
                if problem := qualified_name(key):
                    c.fail("Output", loc + (section, key), f"invalid {section[:-1]}: {problem}", at_key=True)
                if check_value is not None and (problem := check_value(value)):
                    c.fail("Output", loc + (section, key), f"invalid label: {problem}")
        compiled[kind] = KindMetadata(tuple(sorted(meta.labels.items())), tuple(sorted(meta.annotations.items())))
    return compiled
