"""``explain ClusterQueue/NAME``: the queue's InstanceType, flavor selection, quota, stop policy,
admission checks and LocalQueues, read from the evaluator's records."""

from __future__ import annotations

import re
from typing import Any

from gpustack_render.evaluate.nodes import ARCH_LABEL, OS_LABEL
from gpustack_render.evaluate.plan import ClusterQueuePlan
from gpustack_render.explain.base import Explainer, Report, show, show_path

# A refused plan's kept groups (stage4-chain.md §2.5).
KEPT_EXISTING = ("a refused plan keeps only the flavors that still exist: a flavor of the render's name format "
                 "it no longer renders is dropped, a group left empty goes")

Provenance = dict[Any, list[str]]


def _instance_type_source(x: Explainer, name: str) -> tuple[str, dict[str, Any]]:
    """Which InstanceType the queue was built from (derived, snapshot, deleting) and the spec values
    the queue read, as the evaluator recorded them."""
    decision = x.decision(f"ClusterQueue/{name}", "queue.instanceType")
    assert decision is not None, name  # every rendered queue records its InstanceType
    return str(decision.result), dict(decision.inputs)


def _decisions(x: Explainer, queue: ClusterQueuePlan) -> list[str]:
    """The queue's decisions, one line each, from the records: its flavor selection, the refusal,
    the stop policy (and what a drain saves)."""
    selection = selection_of(x, queue.name)
    out = [f"selected {len(selection.result)} flavor(s) by {selection.input('selector')}"]
    refusal = x.decision(f"ClusterQueue/{queue.name}", "queue.refusal")
    if refusal is not None:
        out.append(f"plan refused: {refusal.result}")
    out.append(stop_reason(x, queue))
    return out


def explain_queue(x: Explainer, queue: ClusterQueuePlan) -> Report:
    report = Report("ClusterQueue", queue.name, template=x.template("ClusterQueue"))
    origin, spec = _instance_type_source(x, queue.name)
    if origin == "derived":
        it_ref = f"InstanceType/{queue.name} (derived)"
    else:
        it_ref = x.snap_ref("InstanceType", queue.name) + (" (being deleted)" if origin == "deleting" else "")
    acceleratable = queue.labels.get(x.vocab.acceleratableLabel) == "true"
    selection = selection_of(x, queue.name)
    selector: dict[str, str] = selection.input("selector")
    selected = [step for step in selection.steps if "label" not in step]
    rejected = [step for step in selection.steps if "label" in step]
    decisions = _decisions(x, queue)
    prov = _provenance(x, queue, it_ref, spec, acceleratable, decisions)
    x.attach_fields(report, x.render("ClusterQueue", queue), prov)
    _instance_type_section(x, report, queue, origin, it_ref, spec)
    _selection_section(report, queue, selector, selected, rejected)
    _quota_section(x, report, queue, acceleratable, selected)
    _stop_section(x, report, queue)
    _checks_section(x, report, queue)
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


def _provenance(x: Explainer, queue: ClusterQueuePlan, it_ref: str, spec: dict[str, Any], acceleratable: bool,
                decisions: list[str]) -> Provenance:
    """Where each field of the rendered queue comes from: its InstanceType, the plan, the rules."""
    rules = x.rules
    prov: Provenance = {
        ("metadata", "name"): [f"one ClusterQueue per InstanceType, with its name: {it_ref}"],
        ("metadata", "labels"): [f"from {it_ref}"],
        ("metadata", "labels", x.vocab.acceleratableLabel): [f"spec.acceleratable={show(spec.get('acceleratable'))} of {it_ref}"],
        ("metadata", "labels", OS_LABEL): [f"spec.os of {it_ref}"],
        ("metadata", "labels", ARCH_LABEL): [f"spec.arch of {it_ref}"],
        ("metadata", "labels", x.vocab.queueType.key): ["fixed: marks a queue built from an InstanceType"],
        ("metadata", "annotations", x.vocab.tasQueueAnnotation): ["resourceGroups is not empty"],
        ("spec", "stopPolicy"): [stop_reason(x, queue)],
        ("spec", "resourceGroups"): ["the snapshot's resource groups, kept verbatim (last good plan): "
                                     + (queue.refusal or stop_reason(x, queue)),
                                     *([KEPT_EXISTING] if queue.refusal else []),
                                     x.snap_ref("ClusterQueue", queue.name, "spec.resourceGroups")]
        if queue.kept_resource_groups and not queue.flavors
        else ["the validated plan (Flavor selection and Quota below)"],
    }
    if queue.flavors:
        _quota_provenance(x, queue, acceleratable, prov)
    if spec.get("acceleratorGroup"):
        prov[("metadata", "labels", x.akey_prefix + spec["acceleratorGroup"])] = [
            f"spec.acceleratorGroup={show(spec['acceleratorGroup'])} of {it_ref}"]
    if spec.get("generalGroup"):
        prov[("metadata", "labels", x.vocab.generalGroupPrefix + spec["generalGroup"])] = [
            f"spec.generalGroup={show(spec['generalGroup'])} of {it_ref}",
            *x.settings_of("Grouping:aware")]
    markers = getattr(rules.lifecycle, "markers", None)
    if markers is not None:
        for marker in (markers.emptyPlanHold, markers.savedStopPolicy, markers.inactiveHold):
            prov[("metadata", "annotations", marker)] = ["; ".join(decisions), x.rule("Lifecycle", "markers")]
    for i, check in enumerate(queue.admission_checks):
        index = next((j for j, c in enumerate(rules.queues.admission_checks) if c.name == check), None)
        prov[("spec", "admissionChecksStrategy", "admissionChecks", i)] = [
            x.rule("Queues", "admissionChecks", index, "name", value=check) if index is not None else "rules"]
    return prov


def _quota_provenance(x: Explainer, queue: ClusterQueuePlan, acceleratable: bool, prov: Provenance) -> None:
    """The planned resource group: its covered resource and each selected flavor's quota rule."""
    quota_kind = "accelerated" if acceleratable else "cpu"
    rule = x.rules.queues.quota_accelerated if acceleratable else x.rules.queues.quota_cpu
    group = ("spec", "resourceGroups", 0)
    prov[group + ("coveredResources",)] = [x.rule("Queues", "quota", quota_kind, "resource",
                                                  value=rule.resource.source)]
    by_name = {f.name: f for f in x.plan.flavors}
    for i, entry in enumerate(queue.flavors):
        flavor = by_name.get(entry.name)
        where = group + ("flavors", i)
        prov[where + ("name",)] = [f"selected flavor {i + 1} (per-Node count {flavor.count if flavor else '?'} "
                                   f"ascending, then name)"]
        prov[where + ("resources", 0, "name")] = prov[group + ("coveredResources",)]
        prov[where + ("resources", 0, "nominalQuota")] = [
            x.rule("Queues", "quota", quota_kind, "nominalQuota", value=rule.nominal_quota.source)
            + (f" with capacity {flavor.capacity} = {len(flavor.nodes)} Node(s) x {flavor.count}" if flavor else "")]


def _instance_type_section(x: Explainer, report: Report, queue: ClusterQueuePlan, origin: str, it_ref: str,
                           spec: dict[str, Any]) -> None:
    it = report.section(f"InstanceType ({origin})")
    it.add(it_ref + (f"; see explain InstanceType/{queue.name}" if origin == "derived" else ""))
    for key in ("generalGroup", "acceleratorGroup", "acceleratable", "os", "arch", "inactive"):
        if key in spec:
            it.add(f"{key}: {show(spec[key])}")
    aware = x.rules.is_aware(x.settings)
    if not aware and spec.get("generalGroup") not in (None, "", x.rules.grouping.generic_group):
        it.add(f"no general.* label: {x.named_one('Grouping:aware')} is false, so generalGroup is not selected on",
               *x.settings_of("Grouping:aware"))


def _selection_section(report: Report, queue: ClusterQueuePlan, selector: dict[str, str],
                       selected: list[dict[str, Any]], rejected: list[dict[str, Any]]) -> None:
    """The selector, the flavors it selected and (the first ten) it did not, and the order."""
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


def _quota_section(x: Explainer, report: Report, queue: ClusterQueuePlan, acceleratable: bool,
                   selected: list[dict[str, Any]]) -> None:
    """Each flavor's nominalQuota with the variables its formula used, as the selection recorded them."""
    quota = report.section("Quota")
    rule = x.rules.queues.quota_accelerated if acceleratable else x.rules.queues.quota_cpu
    kind_name = "accelerated" if acceleratable else "cpu"
    if queue.flavors:
        manufacturer = selected[0]["manufacturer"] if selected else ""
        quota.add(f"covered resource {queue.covered_resource}", x.format_rule(
            "Queues", ("quota", kind_name, "resource"), rule.resource.source, {"manufacturer": manufacturer}))
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


def _stop_section(x: Explainer, report: Report, queue: ClusterQueuePlan) -> None:
    stop = report.section(f"stopPolicy {queue.stop_policy}")
    if queue.refusal:
        stop.add(f"plan refused: {queue.refusal}")
    for line, origins in _stop_lines(x, queue):
        stop.add(line, *origins)


def _checks_section(x: Explainer, report: Report, queue: ClusterQueuePlan) -> None:
    """Each admission check's recorded decision: applies, skipped by its condition or by Active=False."""
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


def selection_of(x: Explainer, queue: str) -> Any:
    """The evaluator's flavor selection of a queue (every rendered queue records one)."""
    decision = x.decision(f"ClusterQueue/{queue}", "queue.selection")
    assert decision is not None, queue
    return decision


def show_origin(origin: str, rule: str) -> str:
    """``rules/queues.yaml:30: admissionChecks.0`` for a recorded rule entry."""
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


def stop_reason(x: Explainer, queue: ClusterQueuePlan) -> str:
    """The stop-policy decision in one line (a drain adds what it saves for the restore)."""
    return "; ".join(line for line, _ in _stop_lines(x, queue) if not line.startswith("when "))


def _clean(text: str) -> str:
    """Absolute paths below the working directory shown relative, as everywhere else."""
    import os
    cwd = os.getcwd().rstrip(os.sep) + os.sep
    return text.replace(cwd, "")
