"""``explain node/NAME`` and ``explain NodeFeature/NAME``: a Node's keys, state, flavors and capacity."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpustack_render.rules.model import AnnotationIdSource, CruftCutAt, CruftDelete, CruftRegex, LabelsIdSource
from gpustack_render.errors import Diagnostics
from gpustack_render.evaluate.nodes import ARCH_LABEL, OS_LABEL, NodeFacts
from gpustack_render.explain.base import Explainer, Report, Section, show, show_quantity, why_not
from gpustack_render.k8s import format_decimal_si

if TYPE_CHECKING:
    from gpustack_render.evaluate.capacity import CapacityEvaluator


def _cruft_text(step: Any) -> str:
    if isinstance(step, CruftCutAt):
        return f"cut at {show(step.cutAt)}"
    if isinstance(step, CruftDelete):
        return "delete " + ", ".join(show(w) for w in step.delete)
    if isinstance(step, CruftRegex):
        return f"regex {show(step.regex)} -> {show(step.replace)}"
    return "trim spaces"


def gkey_trace(x: Explainer, name: str) -> tuple[str, list[dict[str, Any]]]:
    """The gKey derivation of stage3-node.md §1.3 as the evaluator recorded it, each step in words
    with its rule."""
    decision = x.decision(f"Node/{name}", "gKey")
    assert decision is not None, name
    g = x.rules.normalisation.gKey
    steps: list[dict[str, Any]] = []
    for step in decision.steps:
        kind = step["step"]
        if kind == "manu":
            steps.append(_manu_step(x, step))
        elif kind == "gKey":
            gkey = step["value"]
            steps.append({"step": "gKey", "value": gkey,
                          "text": (f"gKey = manu + \"-\" + idPrefix = {gkey}" if step["idPrefix"]
                                   else f"gKey = manu = {gkey} (idPrefix is empty)"), "from": []})
        else:
            i = int(kind[len("idPrefix["):-1])
            source = g.idPrefix[i]
            if isinstance(source, AnnotationIdSource):
                steps.append(_annotation_step(x, step, i, source, steps[0]["value"] if steps else ""))
            else:
                steps.append(_labels_step(x, step, i, source))
    return str(decision.result), steps


def _manu_step(x: Explainer, step: dict[str, Any]) -> dict[str, Any]:
    """The manufacturer step: the vendor label read, or its fallback."""
    g = x.rules.normalisation.gKey
    raw_vendor, manu = step["read"], step["value"]
    if not raw_vendor:
        why = f"label {g.manufacturer.label} is absent or empty: fallback {show(g.manufacturer.fallback)}"
    elif step["fallback"]:
        why = (f"label {g.manufacturer.label}={show(raw_vendor)} is listed in absentValues: fallback "
               f"{show(g.manufacturer.fallback)}")
    else:
        why = f"label {g.manufacturer.label}={show(raw_vendor)}, lower-cased"
    return {"step": "manu", "value": manu, "text": f"manu = {show(manu)}: {why}",
            "from": [x.rule("Normalisation", "gKey", "manufacturer")]}


def _annotation_step(x: Explainer, step: dict[str, Any], i: int, source: AnnotationIdSource,
                     manu: str) -> dict[str, Any]:
    """An annotation idPrefix source: why it does not apply, or its NormalizeName passes (each cruft
    rule, then the character pass) with the value after each."""
    kind = step["step"]
    origin = x.rule("Normalisation", "gKey", "idPrefix", i)
    norm = x.rules.normalisation.normalizeName
    raw = step["input"]
    if not step["applies"]:
        state = "absent or empty" if not raw else f"{show(raw)} starts with '@' (unresolved)"
        return {"step": kind, "applies": False,
                "text": f"idPrefix source {i + 1} (annotation {source.annotation}) does not apply: "
                        f"{state}", "from": [origin]}
    max_length, after, value = step["maxLength"], step["afterCruft"], step["value"]
    sub: list[str] = []
    before = raw
    for j, (cruft, result) in enumerate(zip(norm.cruft, step["cruft"])):
        sub.append(f"cruft {j + 1} {_cruft_text(cruft)}: {show(result) if result != before else '(no change)'}")
        before = result
    return {
        "step": kind, "applies": True, "value": value,
        "input": raw, "afterCruft": after, "afterCharacterPass": value, "maxLength": max_length,
        "text": (f"idPrefix source {i + 1} applies: annotation {source.annotation}={show(raw)}; "
                 f"NormalizeName(prefix {show(manu)}, maxLength {source.maxLength} = {max_length}, "
                 f"stripCruft {show(source.stripCruft)})"),
        "detail": sub + ([f"after cruft stripping: {show(after)}"] if source.stripCruft else []) + [
            f"after the character pass (lower-case, space -> {show(norm.spaceBecomes)}, "
            f"keep {show(norm.keep)}, leading {show(manu)} removed, "
            f"cut at {max_length or 'no limit'}): {show(value)}"],
        "from": [origin, x.rule("Normalisation", "normalizeName")]}


def _labels_step(x: Explainer, step: dict[str, Any], i: int, source: LabelsIdSource) -> dict[str, Any]:
    """A labels idPrefix source: the labels joined, or which of them are missing."""
    kind = step["step"]
    origin = x.rule("Normalisation", "gKey", "idPrefix", i)
    parts = step["parts"]
    if step["applies"]:
        shown = ", ".join(f"{label}={show(v)}" for label, v in zip(source.labels, parts))
        return {"step": kind, "applies": True, "value": step["value"],
                "text": f"idPrefix source {i + 1} applies: labels {shown} joined by {show(source.join)}"
                        f" = {show(step['value'])}", "from": [origin]}
    missing = [label for label, v in zip(source.labels, parts) if not v]
    return {"step": kind, "applies": False,
            "text": f"idPrefix source {i + 1} (labels) does not apply: {', '.join(missing)} absent or empty",
            "from": [origin]}


def _add_steps(section: Section, steps: list[dict[str, Any]]) -> None:
    for n, step in enumerate(steps, 1):
        section.add(f"{n}. {step['text']}", *step["from"])
        for detail in step.get("detail", []):
            section.add(f"     {detail}")


def gkey_section(x: Explainer, report: Report, facts: NodeFacts) -> None:
    _, steps = gkey_trace(x, facts.name)
    section = report.section(f"CPU key (gKey) = {facts.gkey}")
    _add_steps(section, steps)
    section.add(f"gManu (gKey up to its first '-') = {facts.gmanu}")
    report.facts["gKey"] = facts.gkey
    report.facts["gManu"] = facts.gmanu
    report.facts["gKeySteps"] = [{k: v for k, v in s.items() if k not in ("from",)} for s in steps]


def managed_text(x: Explainer, facts: NodeFacts) -> tuple[str, list[str]]:
    rules = x.rules
    node = x.snapshot.nodes[facts.name]
    current = (node.metadata.labels or {}).get(rules.grouping.managed_key, "")
    decision = x.decision(f"Node/{facts.name}", "managed")
    verdict = decision.verdict if decision is not None else None
    origins = [x.rule("Grouping", "managedLabel")]
    if current:
        why = (f"the Node's own label {rules.grouping.managed_key}={show(current)} is kept as is (the NodeFeature never "
               f"overrides an explicit value)")
    elif verdict is not None and verdict.value:
        why = (f"the Node has no {rules.grouping.managed_key} label; the NodeFeature stamps {show(rules.grouping.managed_stamp_value)} "
               f"because stampWhen holds")
        origins.extend(x.settings_of("Grouping:managedLabel.stampWhen"))
    else:
        why = (f"the Node has no {rules.grouping.managed_key} label and stampWhen does not hold "
               f"({why_not(verdict)}): the key is omitted")
        origins.extend(x.settings_of("Grouping:managedLabel.stampWhen"))
    state = "managed" if facts.managed else "NOT managed"
    converged = facts.converged.get(rules.grouping.managed_key)
    return (f"{state}: converged {rules.grouping.managed_key}={show(converged) if converged is not None else '(absent)'}; "
            f"{why}"), origins


def explain_node(x: Explainer, name: str) -> Report:
    facts = x.facts[name]
    node = x.snapshot.nodes[name]
    rules = x.rules
    report = Report("Node", name, rendered=False, source_file=x.file_of("Node", name))
    report.facts.update(managed=facts.managed, os=facts.os, arch=facts.arch, profile=facts.profile,
                        cpuCount=facts.cpu_count, aKeys=list(facts.akeys), hasAccelerator=facts.has_accelerator,
                        conditionFacts=dict(facts.facts))

    state = report.section("State")
    text, origins = managed_text(x, facts)
    state.add(text, *origins)
    state.add(f"os/arch: {OS_LABEL}={show(facts.os) if facts.os else '(absent)'}, "
              f"{ARCH_LABEL}={show(facts.arch) if facts.arch else '(absent)'}")
    own_profile = (node.metadata.labels or {}).get(x.vocab.topologyProfile.label, "")
    if own_profile:
        state.add(f"topology profile {facts.profile}: the Node's own label {x.vocab.topologyProfile.label}")
    else:
        state.add(f"topology profile {facts.profile}: computed from the topology levels "
                  f"{', '.join(rules.topology.levels)} (the Node has no {x.vocab.topologyProfile.label} label)",
                  x.rule("Topology", "levels"))
    topology = rules.naming.topology.render({"profile": facts.profile})
    if not any(t.name == topology for t in x.plan.topologies):
        state.add(f"no Topology/{topology} can be rendered: queues with its flavors are refused (MissingTopology)")
    cpu = (node.status.capacity or {}).get("cpu")
    state.add(f"CPU count {facts.cpu_count}: status.capacity.cpu={show_quantity(cpu) if cpu is not None else '(absent)'}"
              f" rounded up")
    state.add(f"has an accelerator: {show(facts.has_accelerator)} (label {x.vocab.acceleratableLabel}=\"true\" "
              f"or at least one aKey)")
    state.add("condition facts: " + ", ".join(f"{k}={show(v)}" for k, v in sorted(facts.facts.items())))

    gkey_section(x, report, facts)
    _akeys_section(x, report, facts)

    nf = report.section(f"NodeFeature {rules.naming.node_feature.render({'node': name})} spec.labels")
    for key, value in sorted(facts.feature_labels.items()):
        nf.add(f"{key}={show(value)}")

    _flavors_section(x, report, facts)
    _capacity_section(x, report, facts)
    x.settings_report(report, x.named("Grouping:managedLabel.stampWhen", "Grouping:cpuOnlyLabel.when", "Grouping:aware"))
    return report


def _akeys_section(x: Explainer, report: Report, facts: NodeFacts) -> None:
    node = x.snapshot.nodes[facts.name]
    prefix, want = x.akey_prefix, x.rules.normalisation.aKey.value
    section = report.section(f"Accelerator keys (aKeys): {', '.join(facts.akeys) or 'none'}")
    origin = x.rule("Normalisation", "aKey")
    for akey in facts.akeys:
        section.add(f"{akey}: label {prefix}{akey}={show(want)}, manufacturer {akey.split('-', 1)[0]} is known",
                    origin, x.manufacturer(akey.split("-", 1)[0]))
    recorded = x.decision(f"Node/{facts.name}", "aKeys")
    labels = node.metadata.labels or {}
    accepted = tuple(f"{prefix}{a}." for a in facts.akeys)
    for key, (code, value) in recorded.inputs if recorded is not None else ():
        rest = key[len(prefix):]
        if key.startswith(accepted) or any(rest.startswith(other[len(prefix):] + ".") for other in labels
                                           if other.startswith(prefix) and other != key):
            continue  # an attribute (.count, .product, ...) of a model label listed on its own
        why = {"value": f"value {show(value)} is not {show(want)}",
               "no-dash": "no '-' (a manufacturer-wide label, not a model)",
               "manufacturer": f"{show(rest.partition('-')[0])} is not a known manufacturer",
               "slash": "contains '/'"}[code]
        section.add(f"{key} is not an aKey: {why}", origin)


def _flavors_section(x: Explainer, report: Report, facts: NodeFacts) -> None:
    subject = f"Node/{facts.name}"
    flavors_of = [f for f in x.plan.flavors if facts.name in f.nodes]
    section = report.section("Flavors")
    fed: list[str] = []
    cpu_origin = x.rule("Grouping", "flavor", "cpu", "contributes")
    cpu_flavor = next((f for f in flavors_of if not f.accelerated), None)
    if cpu_flavor is not None:
        section.add(f"feeds CPU flavor ResourceFlavor/{cpu_flavor.name} (count {cpu_flavor.count}; capacity "
                    f"{cpu_flavor.capacity} from {len(cpu_flavor.nodes)} Node(s))", cpu_origin)
        fed.append(cpu_flavor.name)
    else:
        why = why_not(next((d.verdict for d in x.decisions(subject, "flavor.cpu")), None)) \
            or "contributes does not hold"
        section.add(f"feeds no CPU flavor: {why}", cpu_origin,
                    *(x.setting(n) for n in x.named("Grouping:flavor.cpu.contributes") if n in why))
    accel_origin = x.rule("Grouping", "flavor", "accelerated", "contributes")
    recorded = {d.input("aKey"): d for d in x.decisions(subject, "flavor.accelerated")}
    for akey in facts.akeys:
        decision = recorded[akey]
        raw = decision.input("count", "")
        flavor = next((f for f in flavors_of if f.accelerated and f.akey == akey), None)
        if flavor is not None:
            section.add(f"feeds accelerated flavor ResourceFlavor/{flavor.name} for {akey} (label "
                        f"{x.akey_prefix}{akey}.count={show(raw)}; capacity {flavor.capacity} from "
                        f"{len(flavor.nodes)} Node(s))", accel_origin)
            fed.append(flavor.name)
        elif decision.verdict is None:
            state = f"={show(raw)} is not a positive integer" if raw else " is missing"
            section.add(f"no flavor for {akey}: label {x.akey_prefix}{akey}.count{state} (zero count)")
        else:
            why = why_not(decision.verdict)
            section.add(f"no flavor for {akey}: {why or 'contributes does not hold'}", accel_origin)
    if not facts.akeys:
        section.add("no accelerated flavor: the Node has no aKey")
    for flavor in x.plan.flavors:
        selects = x.decision(f"ResourceFlavor/{flavor.name}", "flavor.nodeLabels")
        assert selects is not None, flavor.name  # every rendered flavor records what its nodeLabels select
        if facts.name in selects.result and facts.name not in flavor.nodes:
            section.add(f"NOTE: ResourceFlavor/{flavor.name} does not contain this Node but its spec.nodeLabels "
                        f"select it (a queue selecting both flavors is refused: OverlappingSelectors)")
    queues = [q for q in x.plan.cluster_queues if any(f.name in fed for f in q.flavors)]
    for queue in queues:
        mine = [f for f in queue.flavors if f.name in fed]
        section.add(f"its flavors are in ClusterQueue/{queue.name}: "
                    + ", ".join(f"{f.name} ({f.resource} {f.nominal_quota})" for f in mine))
    for queue in x.plan.cluster_queues:
        refusal = x.decision(f"ClusterQueue/{queue.name}", "queue.refusal")
        if queue in queues or refusal is None:
            continue
        if facts.name in refusal.input("nodes", ()) or any(name in fed for name in refusal.input("flavors", ())):
            section.add(f"ClusterQueue/{queue.name} refused its plan because of this Node's flavors: {queue.refusal}")
    report.facts["flavors"] = fed
    report.facts["clusterQueues"] = [q.name for q in queues]


def _capacity_section(x: Explainer, report: Report, facts: NodeFacts) -> None:
    from gpustack_render.evaluate.capacity import CapacityEvaluator
    node = x.snapshot.nodes[facts.name]
    devices = x.snapshot.devices.get(facts.name)
    section = report.section("Capacity keys (node-patches)")
    evaluator = CapacityEvaluator(x.rules, Diagnostics())
    current = node.status.capacity or {}
    owned_now = sorted(k for k in current if evaluator.owns_capacity(k))
    report.facts["capacity"] = {}
    if not facts.managed or devices is None:
        why = "the Node is not managed" if not facts.managed else f"there is no Devices object named {facts.name}"
        stale = sorted(k for k in (node.metadata.labels or {}) if evaluator.owns_label(k))
        section.add(f"no capacity keys and no fit labels are desired: {why}"
                    + (f"; the owned keys present are removed: {', '.join(owned_now + stale)}"
                       if owned_now or stale else ""))
        return
    desired = evaluator.desired(node, devices, facts)
    skipped: list[tuple[str, str]] = []
    tallies = evaluator.tallies(node, devices, facts, skipped)
    for akey, why in skipped:
        section.add(f"{akey} adds nothing: {why}")
    if not facts.akeys:
        section.add("no capacity keys are desired: the Node has no aKey")
    for manu_name, tally in sorted(tallies.items()):
        _manufacturer_capacity(x, section, evaluator, manu_name, tally, current)
    section.add("patch: " + ("; ".join(_capacity_ops(desired.capacity, current, owned_now))
                             or "nothing to change (status.capacity already matches)"))
    _fit_labels_section(x, report, evaluator, node.metadata.labels or {}, desired.labels)
    report.facts["capacity"] = {k: format_decimal_si(v) for k, v in sorted(desired.capacity.items())}
    report.facts["fitLabels"] = dict(sorted(desired.labels.items()))


def _manufacturer_capacity(x: Explainer, section: Section, evaluator: CapacityEvaluator, manu_name: str, tally: Any,
                           current: dict[str, Any]) -> None:
    """One manufacturer's tally and, per capacity family, whether it is gated in and the keys it yields."""
    manufacturer = x.rules.manufacturers.by_name[manu_name]
    base = manufacturer.resource_base
    section.add(f"{manu_name} ({base}): L={tally.logical} logical and P={tally.partitioned} "
                f"partitioned card(s); key values are summed over its models", x.manufacturer(manu_name))
    for i, family in enumerate(x.rules.capacity.families):
        pool = family.pool.render({"base": base})
        reason = evaluator.gate(family, manufacturer, tally, current)
        origin = x.rule("Capacity", "families", i)
        if reason is not None:
            section.add(f"  family {family.name}: not desired: {reason}", origin)
            continue
        section.add(f"  family {family.name}: gated in (status.capacity[{pool}]={show_quantity(current[pool])} > 0)",
                    origin)
        for j, (key_fmt, expr) in enumerate(family.keys):
            key = key_fmt.render({"base": base})
            section.add(f"    {key} = {expr.source} = {tally.values[key]} -> {show(format_decimal_si(tally.values[key]))}",
                        x.rule("Capacity", "families", i, "keys", j))
        if family.profile_key and manufacturer.partition_kind:
            for profile, count in sorted(tally.profiles.items()):
                key = family.profile_key.render({"base": base, "kind": manufacturer.partition_kind,
                                                 "profile": profile})
                section.add(f"    {key} = {count} (partition profile instances)",
                            x.rule("Capacity", "families", i, "profileKey"))


def _capacity_ops(desired: dict[str, Any], current: dict[str, Any], owned_now: list[str]) -> list[str]:
    """The status.capacity patch in words: each owned key added, replaced or removed."""
    ops = []
    for key in sorted(set(desired) | set(owned_now)):
        want = desired.get(key)
        have = current.get(key)
        if want is None:
            ops.append(f"remove {key} (owned, no longer desired)")
        elif have is None:
            ops.append(f"add {key}={format_decimal_si(want)}")
        elif have != want:
            ops.append(f"replace {key}: {show_quantity(have)} -> {format_decimal_si(want)}")
    return ops


def _fit_labels_section(x: Explainer, report: Report, evaluator: CapacityEvaluator, labels: dict[str, str],
                        desired: dict[str, str]) -> None:
    fit = report.section("Fit labels (node-patches)")
    for key, value in sorted(desired.items()):
        fit.add(f"{key}={show(value)}", x.rule("Capacity", "fitLabels"))
    if not desired:
        fit.add("none: no ledger group in the Devices status")
    stale = sorted(k for k in labels if evaluator.owns_label(k) and k not in desired)
    changed = sorted(k for k, v in desired.items() if k in labels and labels[k] != v)
    if stale or changed:
        fit.add("patch: " + "; ".join([f"replace {k}: {show(labels[k])} -> {show(desired[k])}" for k in changed]
                                      + [f"remove {k} (owned, no longer desired)" for k in stale]))


def explain_node_feature(x: Explainer, plan_item: Any) -> Report:
    rules = x.rules
    facts = x.facts[plan_item.node]
    node = x.snapshot.nodes[plan_item.node]
    report = Report("NodeFeature", plan_item.name, template=x.template("NodeFeature"))
    report.facts.update(namespace=plan_item.namespace, node=plan_item.node)
    obj = x.render("NodeFeature", plan_item)
    managed, managed_origins = managed_text(x, facts)
    prov: dict[Any, list[str]] = {
        ("metadata", "name"): [x.rule("Naming", "nodeFeature", value=rules.naming.node_feature.source)
                               + f" with node={show(plan_item.node)}"],
        ("metadata", "labels", "nfd.node.kubernetes.io/node-name"): [x.node_ref(plan_item.node, "metadata.name")],
    }
    labels_path = ("spec", "labels")
    prov[labels_path + (rules.grouping.managed_key,)] = [managed, *managed_origins]
    prov[labels_path + (x.vocab.generalGroupPrefix + facts.gmanu,)] = [f"gManu {facts.gmanu}: the gKey up to its first '-'"]
    prov[labels_path + (x.vocab.generalGroupPrefix + facts.gkey,)] = [f"gKey {facts.gkey} (derivation below)",
                                                          x.rule("Normalisation", "gKey")]
    cpu = (node.status.capacity or {}).get("cpu")
    prov[labels_path + (f"{x.vocab.generalGroupPrefix}{facts.gkey}.count",)] = [
        x.node_ref(plan_item.node, f"status.capacity.cpu={show_quantity(cpu)} rounded up")]
    prov[labels_path + (rules.grouping.cpu_only_key,)] = [
        x.rule("Grouping", "cpuOnlyLabel", "when") + f" {rules.describe('Grouping:cpuOnlyLabel.when')}",
        *x.settings_of("Grouping:cpuOnlyLabel.when")]
    x.attach_fields(report, obj, prov)
    if rules.grouping.cpu_only_key not in facts.feature_labels:
        report.section("Not written").add(
            f"{rules.grouping.cpu_only_key}: cpuOnlyLabel.when does not hold ("
            + why_not(next((d.verdict for d in x.decisions(f"Node/{facts.name}", "cpuOnly")), None)) + ")",
            x.rule("Grouping", "cpuOnlyLabel", "when"))
    gkey_section(x, report, facts)
    x.settings_report(report, x.named("Grouping:managedLabel.stampWhen", "Grouping:cpuOnlyLabel.when"))
    return report

