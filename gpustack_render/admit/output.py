"""The preview's outputs (admission.md §9): the JSON document, and the text and markdown views of it.

JSON is built first; text and markdown read only it, so the three never disagree.
"""

from __future__ import annotations

from typing import Any, Mapping

from gpustack_render.admit.chain import quantity_text
from gpustack_render.admit.engine import Entry, Result, mode_name
from gpustack_render.admit.model import KEPT
from gpustack_render.tables import kubectl_lines, markdown_cell

Doc = dict[str, Any]


def _podset(entry: Entry) -> list[Doc]:
    out = []
    for r in entry.podsets:
        out.append({"name": r.podset.name, "count": r.podset.count, "flavor": r.flavor, "mode": mode_name(r.mode),
                    "nodes": dict(r.nodes),
                    "requests": {k: quantity_text(k, v) for k, v in sorted(r.podset.usage.items())},
                    "reasons": list(r.reasons)})
    return out


def _entry(entry: Entry) -> Doc:
    w = entry.workload
    return {"namespace": w.namespace, "name": w.name, "clusterQueue": entry.cluster_queue, "priority": w.priority,
            "outcome": entry.outcome, "podSets": _podset(entry), "preempts": list(entry.preempts),
            "preemptedBy": entry.preempted_by, "evicted": entry.evicted, "reason": entry.reason}


def _queues(result: Result) -> list[Doc]:
    out = []
    for name in sorted(result.queues):
        queue = result.queues[name]
        used = result.usage.get(name, {})
        flavors = [{"name": f.name, "resource": r, "nominal": quantity_text(r, q),
                    "used": quantity_text(r, used.get((f.name, r), 0))}
                   for f in queue.flavors for r, q in f.nominal.items()]
        out.append({"name": name, "flavors": flavors})
    return out


def document(result: Result, chain: str) -> Doc:
    return {"chain": chain, "workloads": [_entry(e) for e in result.entries], "queues": _queues(result)}


def _key(doc: Mapping[str, Any]) -> tuple[str, str]:
    return doc["namespace"], doc["name"]


def _flavors(doc: Mapping[str, Any]) -> str:
    return ",".join(sorted({p["flavor"] for p in doc["podSets"] if p["flavor"]})) or "-"


def compare(live: Doc, rendered: Doc) -> Doc:
    """The Workloads whose outcome (or flavor) differs between the live and the rendered chain."""
    before = {_key(w): w for w in live["workloads"]}
    after = {_key(w): w for w in rendered["workloads"]}
    changed = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        old_outcome = old["outcome"] if old else None
        new_outcome = new["outcome"] if new else None
        if old_outcome == new_outcome and (old is None or new is None or _flavors(old) == _flavors(new)):
            continue
        if new_outcome == KEPT and old_outcome == KEPT:
            continue
        why = (new["evicted"] or new["reason"]) if new else "not previewed with the rendered chain"
        changed.append({"namespace": key[0], "name": key[1], "live": old_outcome, "rendered": new_outcome,
                        "why": why})
    return {"live": live, "rendered": rendered, "changed": changed}


def _nodes(doc: Mapping[str, Any]) -> str:
    counts: dict[str, int] = {}
    for p in doc["podSets"]:
        for node, pods in p["nodes"].items():
            counts[node] = counts.get(node, 0) + pods
    return ",".join(f"{n}" if c == 1 else f"{n}({c})" for n, c in sorted(counts.items())) or "-"


def _usage_lines(doc: Doc) -> list[str]:
    lines = []
    for queue in doc["queues"]:
        parts = [f"{f['name']} {f['resource']} {f['used']}/{f['nominal']}" for f in queue["flavors"]]
        lines.append(f"ClusterQueue {queue['name']}: " + ("; ".join(parts) if parts else "no quota"))
    return lines


def text(doc: Doc) -> str:
    """``kubectl get``-style table, then one usage line per ClusterQueue."""
    if "changed" in doc:
        return _compare_text(doc)
    rows = [["NAMESPACE", "NAME", "QUEUE", "PRIORITY", "OUTCOME", "FLAVOR", "NODES", "REASON"]]
    for w in doc["workloads"]:
        rows.append([w["namespace"], w["name"], w["clusterQueue"] or "-", str(w["priority"]), w["outcome"],
                     _flavors(w), _nodes(w), (f"evicted: {w['evicted']}; " if w["evicted"] else "") + w["reason"]])
    lines = kubectl_lines(rows) if len(rows) > 1 else ["No Workloads."]
    return "\n".join(lines + [""] + _usage_lines(doc)) + "\n"


def _compare_text(doc: Doc) -> str:
    rows = [["NAMESPACE", "NAME", "LIVE", "RENDERED", "WHY"]]
    rows += [[c["namespace"], c["name"], c["live"] or "-", c["rendered"] or "-", c["why"]] for c in doc["changed"]]
    lines = kubectl_lines(rows) if len(rows) > 1 else ["No Workload's outcome changes."]
    return "\n".join(lines + ["", "live:"] + _usage_lines(doc["live"]) + ["", "rendered:"]
                     + _usage_lines(doc["rendered"])) + "\n"


def markdown(doc: Doc, limit: int | None = None, heading: str = "### Admission preview") -> str:
    """The compare view as a PR comment section: changed outcomes, per-queue usage before → after.
    ``limit``: at most that many characters, rows left off said so in a last line."""
    changed = doc["changed"]
    head = [heading, ""]
    if not changed:
        head.append("No Workload's admission outcome changes.")
    else:
        head += [f"{len(changed)} Workload(s) change outcome:", "",
                 "| Workload | Live | Rendered | Why |", "|---|---|---|---|"]
    rows = [f"| `{c['namespace']}/{c['name']}` | {c['live'] or '-'} | {c['rendered'] or '-'} | {markdown_cell(c['why'])} |"
            for c in changed]
    usage = ["", "| ClusterQueue | Flavor | Resource | Used before → after | Nominal before → after |",
             "|---|---|---|---|---|"]
    before = {(q["name"], f["name"], f["resource"]): f for q in doc["live"]["queues"] for f in q["flavors"]}
    after = {(q["name"], f["name"], f["resource"]): f for q in doc["rendered"]["queues"] for f in q["flavors"]}
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        used = f"{old['used'] if old else '-'} → {new['used'] if new else '-'}"
        nominal = f"{old['nominal'] if old else '-'} → {new['nominal'] if new else '-'}"
        usage.append(f"| `{key[0]}` | `{key[1]}` | {key[2]} | {used} | {nominal} |")
    out = "\n".join(head + rows + usage) + "\n"
    if limit is None or len(out) <= limit:
        return out
    tail = "\n".join(usage) + "\n"
    kept = list(head)
    for i, row in enumerate(rows):
        note = (f"\n… {len(rows) - i} more row(s) left off (GitHub's comment size); "
                f"run `gpustack-render admit --chain compare`.")
        if len("\n".join(kept + [row])) + len(note) + 1 + len(tail) > limit:
            return "\n".join(kept) + note + "\n" + tail
        kept.append(row)
    return "\n".join(kept) + "\n" + tail
