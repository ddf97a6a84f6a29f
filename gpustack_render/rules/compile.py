"""Validated rule models → compiled :class:`~gpustack_render.rules.Rules` (meaning checks)."""

from __future__ import annotations

import os
import re
from typing import Any, Callable

from gpustack_render.rules import schema
from gpustack_render.errors import did_you_mean
from gpustack_render.k8s import QUALIFIED_KEY, label_value, qualified_name
from gpustack_render.rules.expressions import (Arithmetic, NameFormat, always, check_replacement,
                                               compile_condition)
from gpustack_render.rules import (ACCEL_FLAVOR_FIELDS, CAPACITY_VARIABLES, CapacityFamilyRule,
                                   LifecycleWarningRule, SavedStopPolicyRule, StopPolicyRule, CPU_FLAVOR_FIELDS,
                                   HOSTNAME_LEVEL, QUOTA_VARIABLES, AdmissionCheckRule, FlavorKind,
                                   KindMetadata, ManufacturerRule, PresetEntry, QuotaRule, Rules, _Compiler, _Document,
                                   _position)

# The engine's pool identity (evaluate/chain.py) is the flavor's accelerated flag, general and
# accelerator group (Grouping pool, rule data) and these fields of the flavor.
POOL_FLAVOR_FIELDS = ("os", "arch")
# Fields a name format may leave out because another one it keeps determines them.
DERIVED_FIELDS = {"gManu": "gKey", "manufacturer": "aKey"}


def quota_samples(m: int) -> dict[str, tuple[Any, ...]]:
    """Typical inputs of a queue's nominalQuota (capacity = nodes x count), probed at load."""
    return {"capacity": (8, 1, 2, 3, 96, 1024), "count": (8, 1, 2, 3, 96), "nodes": (1, 2, 3, 100), "M": (m,)}


def capacity_samples(m: int) -> dict[str, tuple[Any, ...]]:
    """Typical inputs of a capacity key (per Node: logical and partitioned cards, slices, MiB of a card)."""
    return {"L": (1, 0, 2, 8), "P": (1, 0, 7, 8), "slices": (1, 0, 4), "vram": (16384, 0, 24576, 81920),
            "overcommit": (False, True), "M": (m,)}


def _arithmetic(c: _Compiler, kind: str, loc: tuple[str | int, ...], source: str, allowed: set[str],
                samples: dict[str, tuple[Any, ...]]) -> Arithmetic | None:
    """Compile an expression, probe it on typical inputs and give it its rule position, so that a
    failure on the snapshot's data is a rule error at file:line (exit 2), never an internal error."""
    expr = c.at(kind, loc, lambda: Arithmetic.compile(source, allowed))
    if expr is None:
        return None
    line, col = _position(c.docs[kind].data, loc)
    located = expr.located(c.docs[kind].file, line, col, ".".join(map(str, loc)))
    probed: Arithmetic | None = c.at(kind, loc, lambda: located.probe(samples))
    return probed


def _missing_fields(kept: set[str], required: set[str]) -> list[str]:
    """The identity fields a name format drops (a derived field is kept by the field it comes from)."""
    return sorted(f for f in required if f not in kept and DERIVED_FIELDS.get(f) not in kept)


def _regex_rewrite(c: _Compiler, kind: str, loc: tuple[str | int, ...], pattern_key: str, regex: str,
                   replacement: str) -> Any:
    """A regex and its replacement template, both checked at load (a bad group reference too)."""
    pattern = c.at(kind, loc + (pattern_key,), lambda: re.compile(regex))
    if pattern is None:
        return None
    return c.at(kind, loc, lambda: check_replacement(pattern, replacement))  # points at its replace

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

    setting_refs: dict[str, tuple[str, ...]] = {}

    def cond(kind: str, loc: tuple[str | int, ...], value: Any, facts: str | set[str]) -> Any:
        setting_refs[f"{kind}:{'.'.join(map(str, loc))}"] = settings_named(value)
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
            if (compiled := _regex_rewrite(c, "Manufacturers", ("items", i, "publishProfile", j), "match",
                                           r.match, r.replace)) is not None)
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
        contributes = cond("Grouping", ("flavor", kind_name, "contributes"), group.contributes,
                           "accelerator" if kind_name == "accelerated" else "flavor")
        pin = cond("Grouping", ("flavor", kind_name, "pinCpuOnly"), group.pinCpuOnly, "flavor") \
            if group.pinCpuOnly else None
        name = fmt("Naming", ("resourceFlavor", kind_name), getattr(naming.resourceFlavor, kind_name), allowed)
        missing = name.placeholders - set(group.key) - {"gManu", "manufacturer"} if name else set()
        if missing:
            c.fail("Naming", ("resourceFlavor", kind_name),
                   f"placeholder(s) {', '.join(sorted(missing))} are not in the grouping key",
                   "flavors would collide: add them to Grouping flavor key")
        dropped = _missing_fields(name.placeholders, set(group.key) & allowed) if name else []
        if dropped:
            c.fail("Naming", ("resourceFlavor", kind_name),
                   f"drops grouping key field(s) {', '.join(dropped)}",
                   "flavors of different groups would get the same name: add "
                   + ", ".join("{" + f + "}" for f in dropped))
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
        general_fmt, accel_fmt = pool_identity[aware]
        for accel, kind_name in ((False, "cpu"), (True, "accelerated")):
            name_fmt = pool_name[(aware, accel)]
            if name_fmt is None or general_fmt is None or (accel and accel_fmt is None):
                continue
            required = set(POOL_FLAVOR_FIELDS) | general_fmt.placeholders | (accel_fmt.placeholders if accel else set())
            dropped = _missing_fields(name_fmt.placeholders, required)
            if dropped:
                c.fail("Naming", ("pool", attr, kind_name), f"drops pool identity field(s) {', '.join(dropped)}",
                       "pools of different identities (Grouping pool." + attr + " and os, arch) would get the "
                       "same name: add " + ", ".join("{" + f + "}" for f in dropped))

    id_prefix_max: dict[int, Arithmetic] = {}
    for i, source in enumerate(norm.gKey.idPrefix):
        if isinstance(source, schema.AnnotationSource):
            expr = _arithmetic(c, "Normalisation", ("gKey", "idPrefix", i, "maxLength"), source.maxLength,
                               {"manu"}, {"manu": ("intel", "amd", norm.gKey.manufacturer.fallback)})
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
        expr = _arithmetic(c, "Queues", ("quota", kind_name, "nominalQuota"), rule.nominalQuota, QUOTA_VARIABLES,
                           quota_samples(manus.unitsPerAccelerator))
        quota[kind_name] = QuotaRule(resource, expr) if resource and expr else None
    checks = []
    for i, check in enumerate(queues.admissionChecks):
        if check.name in [other.name for other in queues.admissionChecks[:i]]:
            c.fail("Queues", ("admissionChecks", i, "name"), f"duplicate admission check name '{check.name}'")
        when = cond("Queues", ("admissionChecks", i, "when"), check.when, "queue") if check.when else always
        checks.append(AdmissionCheckRule(check.name, check.controllerName, when or always))

    reserved = m["Namespaces"].reserved
    for i, namespace in enumerate(reserved):
        if namespace in reserved[:i]:
            c.fail("Namespaces", ("reserved", i), f"reserved namespace '{namespace}' is listed twice")

    managed_when = cond("Grouping", ("managedLabel", "stampWhen"), grouping.managedLabel.stampWhen, "node")
    cpu_only_when = cond("Grouping", ("cpuOnlyLabel", "when"), grouping.cpuOnlyLabel.when, "node")
    node_feature = fmt("Naming", ("nodeFeature",), naming.nodeFeature, {"node"})
    topology = fmt("Naming", ("topology",), naming.topology, {"profile"})
    local_queue = fmt("Naming", ("localQueue",), naming.localQueue, {"clusterQueue"})
    for loc, name_fmt, field_name in ((("nodeFeature",), node_feature, "node"), (("topology",), topology, "profile"),
                                      (("localQueue",), local_queue, "clusterQueue")):
        if name_fmt is not None and field_name not in name_fmt.placeholders:
            c.fail("Naming", loc, f"must contain the placeholder {{{field_name}}}",
                   f"every {field_name} gets its own object: without it they would all get one name")
    capacity: schema.CapacityRules = m["Capacity"]
    families = []
    for i, fam in enumerate(capacity.families):
        loc = ("families", i)
        if fam.name in [other.name for other in capacity.families[:i]]:
            c.fail("Capacity", loc + ("name",), f"duplicate capacity family name '{fam.name}'")
        pool = fmt("Capacity", loc + ("pool",), fam.pool, {"base"})
        keys = tuple((fmt("Capacity", loc + ("keys", j, "key"), k.key, {"base"}),
                      _arithmetic(c, "Capacity", loc + ("keys", j, "value"), k.value, CAPACITY_VARIABLES,
                                  capacity_samples(manus.unitsPerAccelerator)))
                     for j, k in enumerate(fam.keys))
        profile_key = fmt("Capacity", loc + ("profileKey",), fam.profileKey, {"base", "kind", "profile"}) \
            if fam.profileKey else None
        families.append(CapacityFamilyRule(fam.name, fam.population, pool, fam.requiresPartitionKind, keys,
                                           profile_key))
    fit = capacity.fitLabels
    fit_sliced = fmt("Capacity", ("fitLabels", "slicedMaxFreeUnits"), fit.slicedMaxFreeUnits, {"aKey"})
    fit_shared = fmt("Capacity", ("fitLabels", "sharedFreeCards"), fit.sharedFreeCards, {"aKey"})
    _check_fit_label_formats(c, fit, fit_sliced, fit_shared)
    share_expr = _arithmetic(c, "Capacity", ("fitLabels", "shareUnits"), fit.shareUnits, {"M"},
                             {"M": (manus.unitsPerAccelerator,)})  # probed with the one value it reads
    share_units = share_expr(M=manus.unitsPerAccelerator) if share_expr else 0
    pin_formats = _workload_fit(c, capacity.workloadFit, fmt)
    lifecycle: schema.LifecycleRules = m["Lifecycle"]
    stop_rules = []
    for i, rule in enumerate(lifecycle.stopPolicy):
        loc = ("stopPolicy", i)
        if rule.name in [r.name for r in lifecycle.stopPolicy[:i]]:
            c.fail("Lifecycle", loc + ("name",), f"duplicate rule name '{rule.name}'")
        when = cond("Lifecycle", loc + ("when",), rule.when, "lifecycle") if rule.when else always
        if rule.when is None and i != len(lifecycle.stopPolicy) - 1:
            c.fail("Lifecycle", loc + ("name",), f"rule '{rule.name}' has no 'when' but is not last",
                   "the rules after it could never apply")
        c.at("Lifecycle", loc + ("name",), lambda: None)  # records the rule's file:line for explain
        origin = c.origins[f"Lifecycle:{'.'.join(map(str, loc + ('name',)))}"]
        stop_rules.append(StopPolicyRule(rule.name, when or always, rule.stopPolicy, rule.groups,
                                         _marked_annotations(c, loc, rule, lifecycle.markers),
                                         rule.saveStopPolicy, origin))
    if lifecycle.stopPolicy[-1].when is not None:
        c.fail("Lifecycle", ("stopPolicy", len(lifecycle.stopPolicy) - 1, "when"),
               "the last stopPolicy rule must have no 'when' (the default)")
    save_rules = []
    for i, saved in enumerate(lifecycle.save):
        loc = ("save", i)
        when = cond("Lifecycle", loc + ("when",), saved.when, "lifecycle") if saved.when else always
        c.at("Lifecycle", loc + ("name",), lambda: None)  # records the rule's file:line for explain
        save_rules.append(SavedStopPolicyRule(saved.name, when or always, saved.stopPolicy,
                                              _marked_annotations(c, loc, saved, lifecycle.markers),
                                              c.origins[f"Lifecycle:save.{i}.name"]))
    lifecycle_warnings = []
    for i, warning in enumerate(lifecycle.warnings):
        loc = ("warnings", i)
        when = cond("Lifecycle", loc + ("when",), warning.when, "lifecycle")
        message = fmt("Lifecycle", loc + ("message",), warning.message, {"queue", "instanceType"})
        if when and message:
            c.at("Lifecycle", loc + ("name",), lambda: None)
            lifecycle_warnings.append(LifecycleWarningRule(warning.name, when, message,
                                                           c.origins[f"Lifecycle:warnings.{i}.name"]))
    check_diff(c, m["Diff"])
    output = compile_output(c, m["Output"])
    vocabulary: schema.VocabularyRules = m["Vocabulary"]
    profile_format, profile_pattern = compile_vocabulary(c, vocabulary)
    pool_aware = cond("Grouping", ("aware",), grouping.aware, "global")
    derive = cond("Queues", ("deriveInstanceTypes",), queues.deriveInstanceTypes, "global")
    fit_when = cond("Capacity", ("workloadFit", "when"), capacity.workloadFit.when, "global")
    generic_group = _generic_group(c, grouping)
    local_queue_pattern = format_matcher(local_queue, ".*", ".*")[1] if local_queue else None
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
        vocabulary=vocabulary, pool_aware=pool_aware, derive_instance_types=derive, workload_fit_when=fit_when,
        setting_refs=setting_refs, profile_format=profile_format, profile_pattern=profile_pattern,
        local_queue_pattern=local_queue_pattern, generic_group=generic_group,
    )


def _marked_annotations(c: _Compiler, loc: tuple[str | int, ...], rule: Any,
                        markers: schema.LifecycleMarkers) -> tuple[tuple[str, str], ...]:
    """A rule's annotations: its ``mark`` entries name markers (defined once, in ``markers``) and set
    them to "true". A marker key written out under ``annotations`` is refused: changing the marker
    would leave that copy behind, and the renderer's own hold would then read as an admin's."""
    marker_keys = {getattr(markers, name): name for name in ("emptyPlanHold", "savedStopPolicy", "inactiveHold")}
    for key in rule.annotations:
        if key in marker_keys:
            c.fail("Lifecycle", loc + ("annotations", key), f"'{key}' is the {marker_keys[key]} marker",
                   f"reference it by name: mark: [{marker_keys[key]}]", at_key=True)
    marked = {getattr(markers, name): "true" for name in rule.mark}
    return tuple(sorted({**rule.annotations, **marked}.items()))


def settings_named(cond: Any) -> tuple[str, ...]:
    """The settings a condition model refers to, in order: ``explain`` names them, so no stage has to."""
    if cond is None:
        return ()
    if isinstance(cond, schema.SettingCondition):
        return (cond.setting,)
    if isinstance(cond, schema.NotCondition):
        return settings_named(cond.not_)
    members = getattr(cond, "all", None) or getattr(cond, "any", None) or []
    return tuple(dict.fromkeys(name for member in members for name in settings_named(member)))


_REGEX_SPECIAL = frozenset("\\.^$*+?{}[]|()")


def format_matcher(name_format: NameFormat, placeholder: str, hashed: str) -> tuple[str, re.Pattern[str]]:
    """A name format as a matcher (``^literal<placeholder>literal$``), so that recognising a name
    derives from the one format that writes it. ``hashed`` is the pattern of an ``fnv64a`` placeholder,
    ``placeholder`` that of any other. Returns the pattern's text (for messages) and the pattern."""
    from gpustack_render.rules.expressions import FILTERS
    text = "^"
    for literal, name, fn in name_format.parts:
        text += "".join("\\" + ch if ch in _REGEX_SPECIAL else ch for ch in literal)
        if name is not None:
            text += hashed if fn is FILTERS["fnv64a"] else placeholder
    text += "$"
    return text, re.compile(text)


def _generic_group(c: _Compiler, grouping: schema.GroupingRules) -> str:
    """``pool.whenUnaware.generalGroup`` is also the generalGroup of an InstanceType that has none
    (the pool not split per CPU key), so it must be one fixed name, not a format."""
    value = grouping.pool.whenUnaware.generalGroup
    if "{" in value or "}" in value:
        c.fail("Grouping", ("pool", "whenUnaware", "generalGroup"),
               "must be a fixed name without placeholders",
               "a pool that is not split per CPU key has one generalGroup, also for InstanceTypes without one")
    return value


def compile_vocabulary(c: _Compiler, vocab: schema.VocabularyRules) -> tuple[Any, Any]:
    """rules/vocabulary.yaml: every key must be one the API server accepts (a prefix: with a name
    after it), and the topology profile format must be a valid label value with its ``{levels}``."""
    from gpustack_render.k8s import dns_label, dns_subdomain
    keys: list[tuple[tuple[str | int, ...], str]] = [
        (("acceleratableLabel",), vocab.acceleratableLabel), (("tasQueueAnnotation",), vocab.tasQueueAnnotation),
        (("topologyProfile", "label"), vocab.topologyProfile.label), (("queueType", "key"), vocab.queueType.key),
        (("cpuAnnotations", "product"), vocab.cpuAnnotations.product),
        (("cpuAnnotations", "family"), vocab.cpuAnnotations.family)]
    keys += [(("cpuAnnotations", section, name), key) for section in ("detail", "cache")
             for name, key in getattr(vocab.cpuAnnotations, section).items()]
    keys += [((entry,), getattr(vocab, entry) + "x") for entry in ("generalGroupPrefix", "notePrefix")]
    for loc, key in keys:
        if problem := qualified_name(key):
            c.fail("Vocabulary", loc, f"not a valid label or annotation key: {problem}")
    for loc, value in ((("queueType", "flavor"), vocab.queueType.flavor), (("queueType", "queue"), vocab.queueType.queue)):
        if problem := label_value(value):
            c.fail("Vocabulary", loc, f"not a valid label value: {problem}")
    if vocab.queueType.flavor == vocab.queueType.queue:
        c.fail("Vocabulary", ("queueType", "queue"), "must differ from queueType.flavor")
    if problem := dns_label(vocab.nodeFeatureNamespace):
        c.fail("Vocabulary", ("nodeFeatureNamespace",), f"not a valid namespace: {problem}")
    if problem := dns_subdomain(vocab.workerApiGroup):
        c.fail("Vocabulary", ("workerApiGroup",), f"not a valid API group: {problem}")
    profile = c.at("Vocabulary", ("topologyProfile", "format"),
                   lambda: NameFormat.compile(vocab.topologyProfile.format, {"levels"}))
    if profile is None:
        return None, None
    if "levels" not in profile.placeholders:
        c.fail("Vocabulary", ("topologyProfile", "format"), "must contain the placeholder {levels}",
               "a profile names the topology levels: {levels|fnv64a}")
    elif problem := label_value(profile.render({"levels": ""})):
        c.fail("Vocabulary", ("topologyProfile", "format"), f"does not make a valid label value: {problem}")
    return profile, format_matcher(profile, ".*", "[0-9a-f]{16}")[1]


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
