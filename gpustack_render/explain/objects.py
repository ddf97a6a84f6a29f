"""``explain`` for the rendered Kueue chain: ResourceFlavor, ClusterQueue, InstanceType, LocalQueue,
Topology, AdmissionCheck."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from gpustack_render.evaluate.nodes import ARCH_LABEL, OS_LABEL
from gpustack_render.evaluate.plan import ClusterQueuePlan, FlavorPlan
from gpustack_render.explain.base import Explainer, Report, show, why_not
from gpustack_render.k8s import format_decimal_si


# A refused plan's kept groups (stage4-chain.md §2.5).
KEPT_EXISTING = ("a refused plan keeps only the flavors that still exist: a flavor of the render's name format "
                 "it no longer renders is dropped, a group left empty goes")


def _fmt_origin(x: Explainer, kind: str, path: tuple[str | int, ...], source: str, values: dict[str, Any]) -> str:
    used = re.findall(r"\{([^{}|]+)", source)
    shown = ", ".join(f"{name.strip()}={show(values.get(name.strip(), ''))}" for name in dict.fromkeys(used))
    return x.rule(kind, *path, value=source) + (f" with {shown}" if shown else "")


# --- ResourceFlavor ------------------------------------------------------------------------------

def _cpu_annotations(x: Explainer) -> str:
    """The cpuDetail note's source annotations, shortened to their common start (``…/cpu-*``)."""
    import os
    keys = [*x.vocab.cpuAnnotations.detail.values(), *x.vocab.cpuAnnotations.cache.values()]
    common = os.path.commonprefix(keys) if keys else ""
    return f"{common}*" if len(keys) > 1 else ", ".join(keys)


def explain_flavor(x: Explainer, flavor: FlavorPlan) -> Report:
    rules = x.rules
    kind_name = "accelerated" if flavor.accelerated else "cpu"
    report = Report("ResourceFlavor", flavor.name, template=x.template("ResourceFlavor"))
    values = {"gKey": flavor.gkey, "gManu": flavor.gmanu, "aKey": flavor.akey, "manufacturer": flavor.manufacturer,
              "os": flavor.os, "arch": flavor.arch, "count": flavor.count, "profile": flavor.profile}
    name_source = (rules.flavor_accelerated if flavor.accelerated else rules.flavor_cpu).name.source
    own = (x.akey_prefix + flavor.akey) if flavor.accelerated else x.vocab.generalGroupPrefix + flavor.gkey
    first = flavor.nodes[0] if flavor.nodes else ""
    count_from = (f"label {x.akey_prefix}{flavor.akey}.count" if flavor.accelerated
                  else "status.capacity.cpu rounded up")
    contributors = [x.node_ref(n) for n in flavor.nodes]
    prov: dict[Any, list[str]] = {
        ("metadata", "name"): [_fmt_origin(x, "Naming", ("resourceFlavor", kind_name), name_source, values)],
        ("metadata", "labels", own): [f"own key of the {kind_name} flavor"],
        ("metadata", "labels", f"{own}.count"): [f"per-Node count: {count_from} of the contributing Nodes"],
        ("metadata", "labels", f"{own}.capacity"): [f"capacity = {len(flavor.nodes)} contributing Node(s) x "
                                                    f"{flavor.count} = {flavor.capacity}", *contributors],
        ("metadata", "labels", x.vocab.acceleratableLabel): ["accelerated flavor" if flavor.accelerated else "CPU flavor"],
        ("metadata", "labels", OS_LABEL): [f"grouping key os: Node label {OS_LABEL}"],
        ("metadata", "labels", ARCH_LABEL): [f"grouping key arch: Node label {ARCH_LABEL}"],
        ("metadata", "labels", x.vocab.topologyProfile.label): [f"grouping key profile: the Nodes' converged {x.vocab.topologyProfile.label}"],
        ("metadata", "labels", x.vocab.queueType.key): ["fixed: marks a flavor built from Nodes "
                                                              "(what ClusterQueues select on)"],
        ("spec", "topologyName"): [_fmt_origin(x, "Naming", ("topology",), rules.topology_name.source, values)],
        ("spec", "nodeLabels"): [f"pins the grouping key on the Nodes; rule {x.rule('Grouping', 'flavor', kind_name, 'key')}"],
        ("spec", "nodeLabels", rules.managed_key): [x.rule("Grouping", "managedLabel", "key")
                                                    + ": only managed Nodes"],
    }
    if flavor.accelerated:
        prov[("metadata", "labels", x.vocab.generalGroupPrefix + flavor.gkey)] = ["the paired CPU key (gKey) of the contributing "
                                                                      "Nodes"]
    if not flavor.accelerated and "Grouping:flavor.cpu.pinCpuOnly" in rules.conditions:
        prov[("spec", "nodeLabels", rules.cpu_only_key)] = [
            x.rule("Grouping", "flavor", "cpu", "pinCpuOnly") + f" {rules.describe('Grouping:flavor.cpu.pinCpuOnly')}",
            *x.settings_of("Grouping:flavor.cpu.pinCpuOnly")]
    node = x.snapshot.nodes.get(first)
    annotations = (node.metadata.annotations or {}) if node else {}
    for note, value in flavor.notes.items():
        path = ("metadata", "annotations", x.vocab.notePrefix + note)
        if note == "cpuDetail":
            why = [x.node_ref(first, f"annotations {_cpu_annotations(x)}")]
            if flavor.accelerated:
                why.extend(x.settings_of("Grouping:aware"))
            prov[path] = why
        elif note == "product" and not flavor.accelerated:
            product = x.vocab.cpuAnnotations.product
            prov[path] = [x.node_ref(first, f"annotation {product}={show(annotations.get(product, ''))}")]
        elif note == "family" and not flavor.accelerated:
            prov[path] = [x.node_ref(first, f"annotation {x.vocab.cpuAnnotations.family}")]
        elif note in ("product", "family", "memory", "cores"):
            prov[path] = [x.node_ref(first, f"label {x.akey_prefix}{flavor.akey}.{note}")]
        elif note == "manufacturer":
            prov[path] = ["the aKey up to its first '-'" if flavor.accelerated else "gManu: the gKey up to its first '-'"]
        else:
            prov[path] = [{"acceleratable": "the flavor kind (accelerated or CPU)", "generalGroup": "the gKey",
                           "acceleratorGroup": "the aKey", "topologyProfile": "the profile"}.get(
                note, f"{note}: from the grouping key")]
    x.attach_fields(report, x.render("ResourceFlavor", flavor), prov)

    group = report.section(f"Grouping ({kind_name} flavor)")
    key_fields = (rules.flavor_accelerated if flavor.accelerated else rules.flavor_cpu).key
    group.add("grouping key: " + ", ".join(f"{k}={show(values.get(k))}" for k in key_fields),
              x.rule("Grouping", "flavor", kind_name, "key"))
    group.add(f"a Node contributes when {rules.describe(f'Grouping:flavor.{kind_name}.contributes')}",
              x.rule("Grouping", "flavor", kind_name, "contributes"))
    nodes = report.section(f"Contributing Nodes: capacity {flavor.capacity} = {len(flavor.nodes)} Node(s) x count "
                           f"{flavor.count}")
    for name in flavor.nodes:
        nodes.add(name, x.node_ref(name))
    if first:
        nodes.add(f"notes come from {first} (the contributing Node with the smallest name)")
    selects = x.decision(f"ResourceFlavor/{flavor.name}", "flavor.nodeLabels")
    assert selects is not None, flavor.name  # every rendered flavor records what its nodeLabels select
    matching: list[str] = selects.result
    if matching != sorted(flavor.nodes):
        extra = sorted(set(matching) - set(flavor.nodes))
        nodes.add(f"NOTE: spec.nodeLabels also select managed Node(s) that do not contribute: {', '.join(extra)} "
                  f"(a queue with this flavor is refused: OverlappingSelectors / NonConservedQuota)")
    queues = report.section("ClusterQueues")
    found = False
    for queue in x.plan.cluster_queues:
        entry = next((f for f in queue.flavors if f.name == flavor.name), None)
        if entry is not None:
            queues.add(f"ClusterQueue/{queue.name}: nominalQuota {entry.resource}={entry.nominal_quota}")
            found = True
        elif flavor.name in _selection(x, queue.name).result:
            queues.add(f"ClusterQueue/{queue.name} selects it but renders no plan with it: "
                       + (queue.refusal or _stop_reason(x, queue)))
            found = True
    if not found:
        queues.add("no ClusterQueue selects it")
    report.facts.update(kind=kind_name, nodes=list(flavor.nodes), count=flavor.count, capacity=flavor.capacity,
                        groupingKey={k: values.get(k) for k in key_fields})
    x.settings_report(report, x.named("Grouping:flavor.cpu.pinCpuOnly", "Grouping:aware"))
    return report


# --- ClusterQueue --------------------------------------------------------------------------------

def _instance_type_source(x: Explainer, name: str) -> tuple[str, dict[str, Any]]:
    """Which InstanceType the queue was built from (derived, snapshot, deleting) and the spec values
    the queue read, as the evaluator recorded them."""
    decision = x.decision(f"ClusterQueue/{name}", "queue.instanceType")
    assert decision is not None, name  # every rendered queue records its InstanceType
    return str(decision.result), dict(decision.inputs)


def _decisions(x: Explainer, queue: ClusterQueuePlan) -> list[str]:
    """The queue's decisions, one line each, from the records: its flavor selection, the refusal,
    the stop policy (and what a drain saves)."""
    selection = _selection(x, queue.name)
    out = [f"selected {len(selection.result)} flavor(s) by {selection.input('selector')}"]
    refusal = x.decision(f"ClusterQueue/{queue.name}", "queue.refusal")
    if refusal is not None:
        out.append(f"plan refused: {refusal.result}")
    out.append(_stop_reason(x, queue))
    return out


def explain_queue(x: Explainer, queue: ClusterQueuePlan) -> Report:
    rules = x.rules
    report = Report("ClusterQueue", queue.name, template=x.template("ClusterQueue"))
    origin, spec = _instance_type_source(x, queue.name)
    if origin == "derived":
        it_ref = f"InstanceType/{queue.name} (derived)"
    else:
        it_ref = x.snap_ref("InstanceType", queue.name) + (" (being deleted)" if origin == "deleting" else "")
    aware = x.rules.is_aware(x.settings)
    acceleratable = queue.labels.get(x.vocab.acceleratableLabel) == "true"
    selection = _selection(x, queue.name)
    selector: dict[str, str] = selection.input("selector")
    selected = [step for step in selection.steps if "label" not in step]
    rejected = [step for step in selection.steps if "label" in step]
    prov: dict[Any, list[str]] = {
        ("metadata", "name"): [f"one ClusterQueue per InstanceType, with its name: {it_ref}"],
        ("metadata", "labels"): [f"from {it_ref}"],
        ("metadata", "labels", x.vocab.acceleratableLabel): [f"spec.acceleratable={show(spec.get('acceleratable'))} of {it_ref}"],
        ("metadata", "labels", OS_LABEL): [f"spec.os of {it_ref}"],
        ("metadata", "labels", ARCH_LABEL): [f"spec.arch of {it_ref}"],
        ("metadata", "labels", x.vocab.queueType.key): ["fixed: marks a queue built from an InstanceType"],
        ("metadata", "annotations", x.vocab.tasQueueAnnotation): ["resourceGroups is not empty"],
        ("spec", "stopPolicy"): [_stop_reason(x, queue)],
        ("spec", "resourceGroups"): ["the snapshot's resource groups, kept verbatim (last good plan): "
                                     + (queue.refusal or _stop_reason(x, queue)),
                                     *([KEPT_EXISTING] if queue.refusal else []),
                                     x.snap_ref("ClusterQueue", queue.name, "spec.resourceGroups")]
        if queue.kept_resource_groups and not queue.flavors
        else ["the validated plan (Flavor selection and Quota below)"],
    }
    quota_kind = "accelerated" if acceleratable else "cpu"
    if queue.flavors:
        group = ("spec", "resourceGroups", 0)
        prov[group + ("coveredResources",)] = [x.rule("Queues", "quota", quota_kind, "resource",
                                                      value=(rules.quota_accelerated if acceleratable
                                                             else rules.quota_cpu).resource.source)]
        by_name = {f.name: f for f in x.plan.flavors}
        for i, entry in enumerate(queue.flavors):
            flavor = by_name.get(entry.name)
            where = group + ("flavors", i)
            prov[where + ("name",)] = [f"selected flavor {i + 1} (per-Node count {flavor.count if flavor else '?'} "
                                       f"ascending, then name)"]
            prov[where + ("resources", 0, "name")] = prov[group + ("coveredResources",)]
            prov[where + ("resources", 0, "nominalQuota")] = [
                x.rule("Queues", "quota", quota_kind, "nominalQuota",
                       value=(rules.quota_accelerated if acceleratable else rules.quota_cpu).nominal_quota.source)
                + (f" with capacity {flavor.capacity} = {len(flavor.nodes)} Node(s) x {flavor.count}" if flavor else "")]
    if spec.get("acceleratorGroup"):
        prov[("metadata", "labels", x.akey_prefix + spec["acceleratorGroup"])] = [
            f"spec.acceleratorGroup={show(spec['acceleratorGroup'])} of {it_ref}"]
    if spec.get("generalGroup"):
        prov[("metadata", "labels", x.vocab.generalGroupPrefix + spec["generalGroup"])] = [
            f"spec.generalGroup={show(spec['generalGroup'])} of {it_ref}",
            *x.settings_of("Grouping:aware")]
    decisions = _decisions(x, queue)
    markers = getattr(rules, "lifecycle_markers", None)
    if markers is not None:
        for marker in (markers.emptyPlanHold, markers.savedStopPolicy, markers.inactiveHold):
            prov[("metadata", "annotations", marker)] = ["; ".join(decisions), x.rule("Lifecycle", "markers")]
    for i, check in enumerate(queue.admission_checks):
        index = next((j for j, c in enumerate(rules.admission_checks) if c.name == check), None)
        prov[("spec", "admissionChecksStrategy", "admissionChecks", i)] = [
            x.rule("Queues", "admissionChecks", index, "name", value=check) if index is not None else "rules"]
    obj = x.render("ClusterQueue", queue)
    x.attach_fields(report, obj, prov)

    it = report.section(f"InstanceType ({origin})")
    it.add(it_ref + (f"; see explain InstanceType/{queue.name}" if origin == "derived" else ""))
    for key in ("generalGroup", "acceleratorGroup", "acceleratable", "os", "arch", "inactive"):
        if key in spec:
            it.add(f"{key}: {show(spec[key])}")
    if not aware and spec.get("generalGroup") not in (None, "", x.rules.generic_group):
        it.add(f"no general.* label: {x.named_one('Grouping:aware')} is false, so generalGroup is not selected on",
               *x.settings_of("Grouping:aware"))

    sel = report.section("Flavor selection")
    sel.add("selector (a flavor's metadata.labels must contain all): "
            + ", ".join(f"{k}={show(v)}" for k, v in selector.items()))
    for step in selected:
        sel.add(f"selected {step['flavor']}: count {step['count']}, capacity {step['capacity']} "
                f"({len(step['nodes'])} Node(s): {', '.join(step['nodes'])})")
    for step in rejected[:10]:
        label = step["label"]
        miss = f"{label[0]}={show(label[1])} (wants {show(label[2])})" if label else "capacity 0"
        sel.add(f"not selected {step['flavor']}: {miss}")
    if len(rejected) > 10:
        sel.add(f"... and {len(rejected) - 10} more flavors of the same kind not selected")
    if not selected:
        sel.add("no flavor selected")
    sel.add("order: per-Node count ascending, then name (small Nodes fill first)")
    if getattr(queue, "refusal", ""):
        sel.add(f"plan refused: {queue.refusal}")

    quota = report.section("Quota")
    rule = rules.quota_accelerated if acceleratable else rules.quota_cpu
    kind_name = "accelerated" if acceleratable else "cpu"
    if queue.flavors:
        manufacturer = selected[0]["manufacturer"] if selected else ""
        quota.add(f"covered resource {queue.covered_resource}", _fmt_origin(
            x, "Queues", ("quota", kind_name, "resource"), rule.resource.source, {"manufacturer": manufacturer}))
        quotas = {step["flavor"]: step["quota"] for step in selected}
        for entry in queue.flavors:
            recorded = quotas.get(entry.name)
            if recorded is None:
                quota.add(f"{entry.name}: {entry.nominal_quota}")
                continue
            variables, value = recorded
            used = ", ".join(f"{k}={v}" for k, v in variables.items() if re.search(rf"\b{k}\b", rule.nominal_quota.source))
            quota.add(f"{entry.name}: nominalQuota = {rule.nominal_quota.source} with {used} = {value} -> "
                      f"{show(entry.nominal_quota)}", x.rule("Queues", "quota", kind_name, "nominalQuota"))
    elif queue.kept_resource_groups:
        quota.add("no new plan: the snapshot's resource groups are kept verbatim")
        if queue.refusal:
            quota.add(KEPT_EXISTING)
    else:
        quota.add("no resource groups")

    stop = report.section(f"stopPolicy {queue.stop_policy}")
    if queue.refusal:
        stop.add(f"plan refused: {queue.refusal}")
    for line, origins in _stop_lines(x, queue):
        stop.add(line, *origins)

    checks = report.section("Admission checks")
    for decision in x.decisions(f"ClusterQueue/{queue.name}", "admissionCheck"):
        name, verdict = decision.input("check"), decision.verdict
        origin_text = show_origin(decision.origin, decision.rule)
        if decision.result:
            checks.add(f"{name}: applies (when {verdict.text if verdict else 'always'})", origin_text)
        elif verdict is not None and not verdict.value:
            checks.add(f"{name}: skipped, when {verdict.text} does not hold: {verdict.reason}", origin_text)
        elif not decision.input("active"):
            checks.add(f"{name}: skipped, the snapshot's AdmissionCheck has Active=False",
                       origin_text, x.snap_ref("AdmissionCheck", name, "status.conditions"))
        else:
            checks.add(f"{name}: not applied", origin_text)

    local = [lq for lq in x.plan.local_queues if lq.cluster_queue == queue.name]
    lqs = report.section(f"LocalQueues ({len(local)})")
    for lq in local[:20]:
        lqs.add(f"LocalQueue/{lq.namespace}/{lq.name}")
    if len(local) > 20:
        lqs.add(f"... and {len(local) - 20} more")
    report.facts.update(instanceType=origin, selector=selector, selected=list(selection.result),
                        quota=[{"flavor": f.name, "resource": f.resource, "nominalQuota": f.nominal_quota}
                               for f in queue.flavors],
                        stopPolicy=queue.stop_policy, decision="; ".join(decisions), decisions=decisions,
                        refusal=getattr(queue, "refusal", "") or None,
                        admissionChecks=list(queue.admission_checks))
    x.settings_report(report, x.named("Grouping:aware", "Queues:deriveInstanceTypes", "Lifecycle:*"))
    return report


def _selection(x: Explainer, queue: str) -> Any:
    """The evaluator's flavor selection of a queue (every rendered queue records one)."""
    decision = x.decision(f"ClusterQueue/{queue}", "queue.selection")
    assert decision is not None, queue
    return decision


def show_origin(origin: str, rule: str) -> str:
    """``rules/queues.yaml:30: admissionChecks.0`` for a recorded rule entry."""
    from gpustack_render.explain.base import show_path
    return f"{show_path(origin)}: {rule.partition(':')[2]}" if origin else rule


def _stop_lines(x: Explainer, queue: ClusterQueuePlan) -> list[tuple[str, list[str]]]:
    """The lifecycle rule that decided the stop policy (with the facts its condition read) and the
    save rule of a drain, as the evaluator recorded them."""
    subject = f"ClusterQueue/{queue.name}"
    decision = x.decision(subject, "lifecycle")
    if decision is None:
        return [("stopPolicy None: no lifecycle rule applied", [])]
    text = f"stopPolicy {decision.result} by lifecycle rule '{decision.input('rule')}' ({_clean(decision.origin)})"
    verdict = decision.verdict
    lines: list[tuple[str, list[str]]] = [(text, [])]
    if verdict is not None and verdict.leaves:
        lines.append((f"when {verdict.text} holds: " + ", ".join(f"{leaf.text} ({show(leaf.read)})"
                                                               for leaf in verdict.leaves), []))
    save = x.decision(subject, "lifecycle.save")
    if save is not None:
        lines.append((f"saves {save.result} by save rule {_clean(save.steps[0])}", []))
    return lines


def _stop_reason(x: Explainer, queue: ClusterQueuePlan) -> str:
    """The stop-policy decision in one line (a drain adds what it saves for the restore)."""
    return "; ".join(line for line, _ in _stop_lines(x, queue) if not line.startswith("when "))


def _clean(text: str) -> str:
    """Absolute paths below the working directory shown relative, as everywhere else."""
    import os
    cwd = os.getcwd().rstrip(os.sep) + os.sep
    return text.replace(cwd, "")


# --- InstanceType --------------------------------------------------------------------------------

def preset_trace(x: Explainer, name: str) -> tuple[str | None, list[str], list[str]]:
    """(tier or None for the fallback, explanation lines, origins) — stage4-chain.md §4.3 matching, as
    the evaluator's PresetMatcher recorded it for the derived InstanceType ``name``."""
    decision = x.decision(f"InstanceType/{name}", "preset")
    assert decision is not None, name
    presets = x.rules.presets
    manufacturer = decision.input("manufacturer")
    rows = presets.manufacturers.get(manufacturer) or ()
    # the matcher's flat entries are the rows' prefixes in order (rules/compile.py)
    entries = [(i, j, prefix) for i, row in enumerate(rows) for j, prefix in enumerate(row.prefixes)]
    lines: list[str] = []
    for step in decision.steps:
        kind = step["step"]
        if kind == "table":
            if not step["hasTable"]:
                return None, [f"no preset table for manufacturer {show(manufacturer)}: fallback"], [
                    x.rule("UnitResourcePresets", "manufacturers")]
            return None, ["the product is empty: fallback"], []
        if kind == "tokens":
            lines.append(f"product {show(step['product'])} normalised to {show(step['normalised'])}, "
                         f"tokens {step['tokens']}")
        elif kind == "ignored":
            lines.append(f"leading tokens {step['dropped']} ignored -> {step['tokens']}")
        elif kind == "match":
            i, j, prefix = entries[step["index"]]
            origins = [x.rule("UnitResourcePresets", "manufacturers", manufacturer, i, "prefixes", j, value=prefix)]
            if step["by"] is not None:
                by_token = next(k for k in rows[i].by if k.lower() == step["by"])
                lines.append(f"prefix {show(prefix)} (manufacturers.{manufacturer}.{i}) matches; token "
                             f"{show(by_token)} overrides its tier {rows[i].tier} -> {step['tier']}")
                return step["tier"], lines, origins + [x.rule("UnitResourcePresets", "manufacturers", manufacturer,
                                                              i, "by", by_token)]
            lines.append(f"prefix {show(prefix)} (manufacturers.{manufacturer}.{i}) matches: tier {step['tier']}")
            return step["tier"], lines, origins
    lines.append("no entry matches: fallback")
    return None, lines, [x.rule("UnitResourcePresets", "manufacturers", manufacturer)]


def explain_instance_type(x: Explainer, name: str) -> Report:
    rules = x.rules
    derived = next((it for it in x.plan.instance_types if it.name == name), None)
    aware = x.rules.is_aware(x.settings)
    if derived is None:
        report = Report("InstanceType", name, rendered=False, source_file=x.file_of("InstanceType", name))
        section = report.section("Not rendered")
        deleting = name in x.snapshot.deleted_instance_types
        section.add(f"InstanceType/{name} is in the snapshot" + (" and being deleted" if deleting else "")
                    + ": InstanceTypes are create-only, an existing one is never rendered or changed; its "
                      "ClusterQueue still follows its spec", x.snap_ref("InstanceType", name))
        it = (x.snapshot.deleted_instance_types if deleting else x.snapshot.instance_types)[name]
        raw = next((obj for (group, kind, _, n), obj in x.snapshot.raw.items()
                    if kind == "InstanceType" and n == name), None)
        raw_spec = (raw or {}).get("spec")
        spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else msgspec.structs.asdict(it.spec)
        for key, value in spec.items():
            section.add(f"spec.{key}: {show(value)}")
        if not x.rules.derive_instance_types({}, x.settings):  # type: ignore[misc]
            section.add(f"{x.named_one('Queues:deriveInstanceTypes')} is false: no InstanceType is derived",
                        *x.settings_of("Queues:deriveInstanceTypes"))
        x.settings_report(report, x.named("Queues:deriveInstanceTypes"))
        return report
    report = Report("InstanceType", name, template=x.template("InstanceType"))
    recorded = x.decision(f"InstanceType/{name}", "preset")  # the pool's flavors, as the evaluator used them
    by_name = {f.name: f for f in x.plan.flavors}
    pool_flavors = [by_name[n] for n in recorded.input("flavors")] if recorded is not None else []
    first = by_name.get(recorded.input("firstFlavor")) if recorded is not None else None
    accel = derived.acceleratable
    kind_name = "accelerated" if accel else "cpu"
    split = "whenAware" if aware else "whenUnaware"
    values = {"gKey": first.gkey if first else "", "gManu": first.gmanu if first else "",
              "aKey": first.akey if first else "", "manufacturer": first.manufacturer if first else "",
              "os": derived.os, "arch": derived.arch}
    product = first.notes.get("product", "") if first else ""
    tier, lines, preset_origins = preset_trace(x, name) if accel else (None, [], [])
    if not accel:
        display_why = [x.rule("Naming", "unawareCpuDisplayName", value=rules.naming.unawareCpuDisplayName)] if not aware \
            else [f"the first flavor's product note {show(product)}" if product else "the pool's generalGroup (no product)"]
    else:
        display_why = [f"the first flavor's product note {show(product)}" if product
                       else "the pool's acceleratorGroup (the first flavor has no product)"]
    display_why.append(x.rule("Naming", "displayNameMaxLength") + f": cut to {rules.naming.displayNameMaxLength}")
    unit_why = ([x.rule("UnitResourcePresets", "cpuPool")] if not accel else
                [f"tier {tier}: " + x.rule("UnitResourcePresets", "tiers", tier)] + preset_origins if tier else
                [x.rule("UnitResourcePresets", "fallback")] + preset_origins)
    prov: dict[Any, list[str]] = {
        ("metadata", "name"): [_fmt_origin(x, "Naming", ("pool", split, kind_name),
                                           rules.pool_name[(aware, accel)].source, values),
                               *x.settings_of("Grouping:aware")],
        ("metadata", "labels"): ["marks an InstanceType derived from Nodes (create-only)"],
        ("spec", "displayName"): display_why,
        ("spec", "generalGroup"): [_fmt_origin(x, "Grouping", ("pool", split, "generalGroup"),
                                               rules.pool_identity[aware][0].source, values)],
        ("spec", "acceleratorGroup"): [_fmt_origin(x, "Grouping", ("pool", split, "acceleratorGroup"),
                                                   rules.pool_identity[aware][1].source, values)],
        ("spec", "acceleratable"): ["the pool is accelerated" if accel else "the pool is a CPU pool"],
        ("spec", "os"): ["the pool's os (its flavors' Node label kubernetes.io/os)"],
        ("spec", "arch"): ["the pool's arch (its flavors' Node label kubernetes.io/arch)"],
        ("spec", "unitResources"): unit_why,
        ("spec", "localStorage"): [x.rule("UnitResourcePresets", "localStorage", value=rules.presets.localStorage)],
    }
    x.attach_fields(report, x.render("InstanceType", derived), prov)
    section = report.section("Pool")
    section.add(f"derived because {x.named_one('Queues:deriveInstanceTypes')} is true and the snapshot has no "
                f"InstanceType/{name}", *x.settings_of("Queues:deriveInstanceTypes"))
    if pool_flavors:
        for flavor in pool_flavors:
            section.add(f"flavor {flavor.name} (count {flavor.count}, capacity {flavor.capacity})")
        if first is not None:
            section.add(f"first flavor (count ascending, then name): {first.name}; it supplies product and manufacturer")
    if accel:
        preset = report.section("Unit-resource preset")
        for line in lines:
            preset.add(line)
        chosen = rules.presets.tiers[tier] if tier else rules.presets.fallback
        preset.add(f"unitResources cpu={show(chosen.cpu)}, ram={show(chosen.ram)}"
                   + (f" (tier {tier})" if tier else " (fallback)"))
    report.facts.update(pool=[f.name for f in pool_flavors], tier=tier,
                        displayName=derived.display_name)
    x.settings_report(report, x.named("Queues:deriveInstanceTypes", "Grouping:aware"))
    return report


# --- LocalQueue, Topology, AdmissionCheck --------------------------------------------------------

def explain_local_queue(x: Explainer, item: Any) -> Report:
    rules = x.rules
    report = Report("LocalQueue", item.name, namespace=item.namespace, template=x.template("LocalQueue"))
    prov: dict[Any, list[str]] = {
        ("metadata", "name"): [_fmt_origin(x, "Naming", ("localQueue",), rules.local_queue_name.source,
                                           {"clusterQueue": item.cluster_queue})],
        ("metadata", "namespace"): [x.snap_ref("Namespace", item.namespace, "live and not reserved"),
                                    x.rule("Namespaces", "reserved", value=sorted(rules.reserved_namespaces))],
        ("metadata", "annotations"): [f"the ClusterQueue it feeds: ClusterQueue/{item.cluster_queue}"],
        ("spec", "clusterQueue"): [f"ClusterQueue/{item.cluster_queue} (one LocalQueue per rendered ClusterQueue and "
                                   f"live, non-reserved Namespace)"],
    }
    x.attach_fields(report, x.render("LocalQueue", item), prov)
    section = report.section("Why")
    section.add(f"ClusterQueue/{item.cluster_queue} is rendered; Namespace {item.namespace} is live and not reserved",
                x.rule("Namespaces", "reserved"))
    reserved = sorted(ns for ns in rules.reserved_namespaces)
    section.add(f"reserved namespaces (never get LocalQueues): {', '.join(reserved)}")
    report.facts.update(clusterQueue=item.cluster_queue)
    return report


def _topology_decision(x: Explainer, item: Any) -> tuple[str, bool]:
    """(the profile a rendered Topology is for, whether its levels are the configured ones rather
    than the snapshot's), as the evaluator recorded them when it planned the Topologies."""
    decision = x.decision(f"Topology/{item.name}", "topology")
    if decision is None:  # every rendered Topology is planned, and recorded, by build_topologies
        raise AssertionError(f"no recorded topology decision for Topology/{item.name}")
    return str(decision.input("profile")), decision.input("levelsFrom") == "configured"


def explain_topology(x: Explainer, item: Any) -> Report:
    rules = x.rules
    report = Report("Topology", item.name, template=x.template("Topology"))
    profile, configured = _topology_decision(x, item)
    levels_from = ([x.rule("Topology", "levels", value=list(rules.topology_levels)) + " (hash to the profile)"]
                   if configured else [x.snap_ref("Topology", item.name, "spec.levels (hash to the profile; the "
                                                                         "configured levels do not)")])
    prov: dict[Any, list[str]] = {
        ("metadata", "name"): [_fmt_origin(x, "Naming", ("topology",), rules.topology_name.source, {"profile": profile})],
        ("spec", "levels"): levels_from,
    }
    x.attach_fields(report, x.render("Topology", item), prov)
    section = report.section(f"Nodes with profile {profile}")
    for facts in sorted(x.facts.values(), key=lambda f: f.name):
        if facts.profile != profile:
            continue
        own = (x.snapshot.nodes[facts.name].metadata.labels or {}).get(x.vocab.topologyProfile.label)
        section.add(f"{facts.name}: " + ("its own label" if own else "computed from the topology levels"),
                    x.node_ref(facts.name))
    report.facts.update(profile=profile, levels=list(item.levels))
    return report


def explain_admission_check(x: Explainer, item: Any) -> Report:
    rules = x.rules
    report = Report("AdmissionCheck", item.name, template=x.template("AdmissionCheck"))
    index = next(i for i, c in enumerate(rules.admission_checks) if c.name == item.name)
    prov: dict[Any, list[str]] = {
        ("metadata", "name"): [x.rule("Queues", "admissionChecks", index, "name", value=item.name)],
        ("spec", "controllerName"): [x.rule("Queues", "admissionChecks", index, "controllerName",
                                            value=item.controller_name)],
    }
    x.attach_fields(report, x.render("AdmissionCheck", item), prov)
    section = report.section("ClusterQueues")
    when = rules.describe(f"Queues:admissionChecks.{index}.when")
    section.add(f"applies to a queue when {when} and the snapshot does not show it Active=False",
                x.rule("Queues", "admissionChecks", index))
    users = [q.name for q in x.plan.cluster_queues if item.name in q.admission_checks]
    for name in users:
        section.add(f"ClusterQueue/{name}")
    if not users:
        section.add("no rendered ClusterQueue carries it")
    return report
