"""``explain workload/NS/NAME``: one Workload's admission under the rendered chain, step by step.

Every flavor tried for each PodSet, in the queue's order, with the mode and Kueue's reasons (taken
or passed over), then, for the TAS flavors tried, the Nodes that could or could not hold its Pods
and why. It reads the admission run (gpustack_render/admit); nothing is decided again here.
"""

from __future__ import annotations

from typing import Any

from gpustack_render.admit.chain import quantity_text
from gpustack_render.admit.engine import Entry, Result, mode_name
from gpustack_render.admit.nodes import Nodes, fits_count, pod_room, selector_matches, taint_text, untolerated
from gpustack_render.admit.model import FlavorSpec, PodSetDemand
from gpustack_render.explain.base import Report

MAX_NODES = 50  # Nodes listed per flavor (the rest counted), so a 10,000-Node pool stays readable


def _quota_origins(rules: Any, podset: PodSetDemand) -> list[str]:
    """Where the PodSet's quota usage comes from: the rules/admission.yaml entries its requests went through."""
    from gpustack_render.explain.base import show_path
    from gpustack_render.rules.admission import entries_used
    return [show_path(rules.origins.get(e, e)) for e in entries_used(podset.per_pod, rules.admission)]


def explain_workload(result: Result, entry: Entry, rules: Any) -> Report:
    w = entry.workload
    report = Report("Workload", w.name, w.namespace, rendered=False)
    summary = report.section("Admission (the rendered chain)")
    summary.add(f"queue {w.queue} -> ClusterQueue {entry.cluster_queue or '-'}; priority {w.priority}")
    summary.add(f"outcome {entry.outcome}: {entry.reason}")
    if entry.evicted:
        summary.add(f"evicted first: {entry.evicted}")
    if entry.preempts:
        summary.add("preempts " + ", ".join(entry.preempts))
    if entry.preempted_by:
        summary.add(f"preempted by {entry.preempted_by}")
    for r in entry.podsets:
        section = report.section(f"PodSet {r.podset.name} ({r.podset.count} pod(s); quota "
                                 + (", ".join(f"{k}={quantity_text(k, v)}" for k, v in sorted(r.podset.usage.items()))
                                    or "none") + ")")
        origins = _quota_origins(rules, r.podset)
        if origins:
            section.add("quota usage transformed by the Admission rules", *origins)
        if not r.attempts:
            section.add(f"flavor {r.flavor or '-'}: {mode_name(r.mode) or 'not tried'}"
                        + (" (already holds quota)" if r.flavor else ""))
        for attempt in r.attempts:
            verdict = "taken" if attempt.flavor == r.flavor and r.flavor else "passed over"
            section.add(f"flavor {attempt.flavor}: {mode_name(attempt.mode)}, {verdict}"
                        + (": " + "; ".join(attempt.reasons) if attempt.reasons else ""))
        if r.nodes:
            section.add("placed on " + ", ".join(f"{n} ({c} pod(s))" for n, c in r.nodes.items()))
        if result.nodes is not None and result.chain is not None:
            tried = [a.flavor for a in r.attempts] or ([r.flavor] if r.flavor else [])
            for flavor in tried:
                spec = result.chain.flavors.get(flavor)
                if spec is not None and spec.topology:
                    report.sections.append(_nodes_section(result.nodes, spec, r.podset, r.nodes))
    return report


def _nodes_section(nodes: Nodes, flavor: FlavorSpec, podset: PodSetDemand, placed: dict[str, int]) -> Any:
    from gpustack_render.explain.base import Section
    section = Section(f"Nodes of flavor {flavor.name} for PodSet {podset.name} (room after the run)")
    need = pod_room(podset.per_pod)
    tolerations = list(podset.tolerations) + list(flavor.tolerations)
    matching = [i for i, n in enumerate(nodes.nodes) if all(n.labels.get(k) == v for k, v in flavor.node_labels.items())]
    if not matching:
        section.add("no Node carries the flavor's nodeLabels")
    for i in matching[:MAX_NODES]:
        node = nodes.nodes[i]
        section.add(f"{node.name}: {_verdict(nodes, i, podset, need, tolerations, placed)}")
    if len(matching) > MAX_NODES:
        section.add(f"… {len(matching) - MAX_NODES} more Node(s) of the flavor")
    return section


def _verdict(nodes: Nodes, i: int, podset: PodSetDemand, need: dict[str, int], tolerations: list[Any],
             placed: dict[str, int]) -> str:
    node = nodes.nodes[i]
    if not node.schedulable:
        return "cannot: unschedulable or not Ready"
    if not selector_matches(podset, node.labels, node.name):
        return "cannot: does not match the Pod's nodeSelector / required node affinity"
    taint = untolerated(node.taints, tolerations)
    if taint is not None:
        return f"cannot: untolerated taint {taint_text(taint)}"
    mine = placed.get(node.name, 0)
    free = nodes.free[i]
    more = fits_count(free, need)
    head = f"holds {mine} of its pod(s); " if mine else ""
    if more > 0:
        return head + f"could hold {more} more pod(s)"
    short = [f"{r} free {quantity_text(r, free.get(r, 0))} < {quantity_text(r, a)}"
             for r, a in sorted(need.items()) if free.get(r, 0) < a]
    return head + "no room: " + ", ".join(short)
