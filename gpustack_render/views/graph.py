"""The Kueue chain as a diagram: groups of Nodes → ResourceFlavors → ClusterQueues → LocalQueues.

Built from *rendered manifests* (what ``render`` prints, or any other stream of the same kinds), so
``graph`` and ``diff --format markdown`` draw the same picture from the same objects. Pure: no I/O.
The model (:class:`PoolGraph`) is written as a Mermaid flowchart (:func:`to_mermaid`, what GitHub
renders in Markdown) or as Graphviz DOT (:func:`to_dot`). Output is deterministic: everything is
sorted by name, and element ids derive from names (not positions), so adding one pool does not
renumber the others in a diff.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Mapping, Sequence

from gpustack_render.diff.quota import QuotaEdge, list_value as _list, object_name as _name, object_spec as _spec
from gpustack_render.diff.quota import quota_edges as _quota_edges, quota_totals as _totals

# Kueue's stop policy meaning "admit as usual"; anything else holds the queue.
ACTIVE_STOP_POLICY = "None"
# Mermaid's default maxTextSize (GitHub keeps it): a longer diagram is not drawn at all.
MERMAID_MAX_TEXT = 50_000

__all__ = ["FlavorBox", "PoolGraph", "QueueBox", "QuotaEdge", "build_graph", "count_nodes_per_flavor",
           "pool_names", "to_dot", "to_mermaid"]


@dataclass(frozen=True)
class FlavorBox:
    """One ResourceFlavor and the number of Nodes its ``spec.nodeLabels`` select."""

    name: str
    nodes: int
    rendered: bool = True  # False: a queue references it, but it is not among the objects


@dataclass(frozen=True)
class QueueBox:
    """One ClusterQueue (a pool): its total quota per resource, stop policy, refusal, LocalQueues."""

    name: str
    quota: tuple[tuple[str, str], ...]
    stop_policy: str
    refusal: str = ""
    local_queues: int = 0
    namespaces: tuple[str, ...] = ()

    @property
    def held(self) -> bool:
        return bool(self.stop_policy) and self.stop_policy != ACTIVE_STOP_POLICY

    @property
    def refused(self) -> bool:
        return bool(self.refusal)


@dataclass
class PoolGraph:
    flavors: list[FlavorBox] = field(default_factory=list)
    queues: list[QueueBox] = field(default_factory=list)
    edges: list[QuotaEdge] = field(default_factory=list)


# --- model -----------------------------------------------------------------------------------------

def count_nodes_per_flavor(flavors: Sequence[dict[str, Any]],
                           node_labels: Mapping[str, Mapping[str, str]]) -> dict[str, int]:
    """How many Nodes each ResourceFlavor selects: a Node counts when its labels hold every pair of
    the flavor's ``spec.nodeLabels``. Matched once per distinct label signature (the Node's values
    of the keys any flavor pins), not per Node × flavor: 10,000 Nodes share a few dozen signatures."""
    selectors = {_name(f): dict(_spec(f).get("nodeLabels") or {}) for f in flavors if _name(f)}
    keys = sorted({k for sel in selectors.values() for k in sel})
    signatures: Counter[frozenset[tuple[str, str]]] = Counter(
        frozenset((k, labels[k]) for k in keys if k in labels) for labels in node_labels.values())
    counts = dict.fromkeys(selectors, 0)
    for signature, nodes in signatures.items():
        for name, selector in selectors.items():
            if selector.items() <= signature:
                counts[name] += nodes
    return counts


def pool_names(objects: Iterable[dict[str, Any]]) -> list[str]:
    """The ClusterQueue names among ``objects``, sorted: what ``--pool`` may name."""
    return sorted({_name(o) for o in objects if o.get("kind") == "ClusterQueue" and _name(o)})


def build_graph(objects: Sequence[dict[str, Any]], flavor_node_counts: Mapping[str, int],
                refusals: Mapping[str, str] | None = None, pools: Collection[str] | None = None) -> PoolGraph:
    """The diagram model of ``objects`` (ResourceFlavor, ClusterQueue and LocalQueue manifests; other
    kinds are ignored). ``refusals`` maps a ClusterQueue to the reason its plan was refused.
    ``pools`` narrows the graph to those ClusterQueues, their flavors and LocalQueues; names that
    are not among the objects are ignored (check them with :func:`pool_names` first)."""
    refusals = refusals or {}
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for obj in objects:
        by_kind[str(obj.get("kind", ""))].append(obj)
    wanted = set(pools) if pools is not None else None
    queue_objs = sorted((q for q in by_kind["ClusterQueue"] if wanted is None or _name(q) in wanted), key=_name)
    local: dict[str, list[str]] = defaultdict(list)
    for lq in by_kind["LocalQueue"]:
        local[str(_spec(lq).get("clusterQueue", ""))].append(str((lq.get("metadata") or {}).get("namespace", "")))
    graph = PoolGraph()
    used: set[str] = set()
    for queue in queue_objs:
        name = _name(queue)
        edges = list(_quota_edges(queue))
        graph.edges += edges
        used.update(e.flavor for e in edges)
        namespaces = local.get(name, [])
        graph.queues.append(QueueBox(name, _totals(edges), str(_spec(queue).get("stopPolicy") or ""),
                                     refusals.get(name, ""), len(namespaces), tuple(sorted(set(namespaces)))))
    rendered = {_name(f) for f in by_kind["ResourceFlavor"] if _name(f)}
    shown = (rendered | used) if wanted is None else used
    graph.flavors = [FlavorBox(n, int(flavor_node_counts.get(n, 0)), n in rendered) for n in sorted(shown)]
    graph.edges.sort(key=lambda e: (e.flavor, e.queue))
    return graph


# --- labels shared by both writers ---------------------------------------------------------------------

def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _queue_lines(queue: QueueBox) -> list[str]:
    lines = ["ClusterQueue", queue.name]
    lines += [f"{resource}: {value}" for resource, value in queue.quota] or ["no quota"]
    lines.append(f"stopPolicy: {queue.stop_policy or ACTIVE_STOP_POLICY}")
    if queue.refused:
        lines.append(f"REFUSED: {queue.refusal}")
    return lines


def _flavor_lines(flavor: FlavorBox) -> list[str]:
    return ["ResourceFlavor", flavor.name] + ([] if flavor.rendered else ["(not rendered)"])


def _local_lines(queue: QueueBox) -> list[str]:
    lines = [_plural(queue.local_queues, "LocalQueue")]
    shown = list(queue.namespaces[:3]) + (["..."] if len(queue.namespaces) > 3 else [])
    return lines + ([", ".join(shown)] if shown else [])


def _edge_label(edge: QuotaEdge) -> str:
    return ", ".join(f"{resource}: {value}" for resource, value in edge.quotas)


def _ids(prefix: str, names: Iterable[str]) -> dict[str, str]:
    """Name → Mermaid id: ``prefix_`` + 10 hex digits of the name's SHA-1. Ids follow names, so they
    stay put when other pools come and go, and stay short: GitHub refuses a diagram over 50,000
    characters, and generated flavor names run to 90. A (vanishingly rare) clash gets a suffix, in
    name order."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in sorted(set(names)):
        base = f"{prefix}_{hashlib.sha1(name.encode('utf-8')).hexdigest()[:10]}"
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}_{n}", n + 1
        taken.add(candidate)
        out[name] = candidate
    return out


# --- Mermaid ---------------------------------------------------------------------------------------

_MERMAID_ENTITIES = {"&": "#amp;", '"': "#quot;", "#": "#35;", "<": "#lt;", ">": "#gt;", "|": "#124;",
                     "`": "#96;", "[": "#91;", "]": "#93;", "{": "#123;", "}": "#125;"}


def mermaid_text(text: str) -> str:
    """Text safe inside a quoted Mermaid label: the characters Mermaid or its HTML labels would read
    as syntax become entity codes (``#quot;``), control characters become spaces."""
    return "".join(_MERMAID_ENTITIES.get(c, " " if ord(c) < 32 else c) for c in text)


def _mermaid_label(lines: Sequence[str]) -> str:
    return '"' + "<br/>".join(mermaid_text(line) for line in lines) + '"'


def to_mermaid(graph: PoolGraph) -> str:
    """A Mermaid flowchart (left to right: Nodes → ResourceFlavor → ClusterQueue → LocalQueues);
    refused queues are styled ``refused``, held ones (stopPolicy not None) ``held``."""
    flavor_ids = _ids("rf", (f.name for f in graph.flavors))
    node_ids = _ids("nodes", (f.name for f in graph.flavors))
    queue_ids = _ids("cq", (q.name for q in graph.queues))
    local_ids = _ids("lq", (q.name for q in graph.queues))
    out = ["flowchart LR"]
    if not graph.flavors and not graph.queues:
        out.append('  empty["no pools"]')
    for flavor in graph.flavors:
        out.append(f"  {node_ids[flavor.name]}([{_mermaid_label([_plural(flavor.nodes, 'Node')])}])")
        out.append(f"  {flavor_ids[flavor.name]}[{_mermaid_label(_flavor_lines(flavor))}]")
    for queue in graph.queues:
        out.append(f"  {queue_ids[queue.name]}[[{_mermaid_label(_queue_lines(queue))}]]")
        if queue.local_queues:
            out.append(f"  {local_ids[queue.name]}>{_mermaid_label(_local_lines(queue))}]")
    for flavor in graph.flavors:
        out.append(f"  {node_ids[flavor.name]} --> {flavor_ids[flavor.name]}")
    for edge in graph.edges:
        label = _edge_label(edge)
        arrow = f' -->|"{mermaid_text(label)}"| ' if label else " --> "
        out.append(f"  {flavor_ids[edge.flavor]}{arrow}{queue_ids[edge.queue]}")
    for queue in graph.queues:
        if queue.local_queues:
            out.append(f"  {queue_ids[queue.name]} --> {local_ids[queue.name]}")
    refused = [queue_ids[q.name] for q in graph.queues if q.refused]
    held = [queue_ids[q.name] for q in graph.queues if q.held and not q.refused]
    unrendered = [flavor_ids[f.name] for f in graph.flavors if not f.rendered]
    for cls, style, members in (("refused", "fill:#fde2e2,stroke:#c0392b,stroke-width:2px", refused),
                                ("held", "fill:#fff4cc,stroke:#b7950b,stroke-dasharray:4 2", held),
                                ("missing", "fill:#eeeeee,stroke:#888888,stroke-dasharray:2 2", unrendered)):
        if members:
            out.append(f"  classDef {cls} {style}")
            out.append(f"  class {','.join(members)} {cls}")
    return "\n".join(out) + "\n"


# --- Graphviz DOT ------------------------------------------------------------------------------------

def dot_string(text: str) -> str:
    """A DOT quoted string: backslashes and quotes escaped, control characters as spaces (a label's
    line breaks are added by the caller as ``\\n``)."""
    text = "".join(" " if ord(c) < 32 else c for c in text)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dot_label(lines: Sequence[str]) -> str:
    """A label's lines joined by DOT's ``\\n``; ``&`` written as ``&amp;`` since Graphviz reads HTML
    entities in labels (a name holding ``&lt;`` would otherwise be drawn as ``<``)."""
    return '"' + "\\n".join(dot_string(line.replace("&", "&amp;"))[1:-1] for line in lines) + '"'


def to_dot(graph: PoolGraph) -> str:
    """A Graphviz digraph of the same model (``dot -Tsvg``); ids are ``kind:name`` strings."""
    out = ["digraph pools {", "  rankdir=LR;", '  node [fontname="Helvetica", fontsize=10];',
           '  edge [fontname="Helvetica", fontsize=9];']
    if not graph.flavors and not graph.queues:
        out.append('  empty [label="no pools", shape=plaintext];')
    for flavor in graph.flavors:
        style = "" if flavor.rendered else ', style=dashed'
        out.append(f"  {dot_string('nodes:' + flavor.name)} [label={_dot_label([_plural(flavor.nodes, 'Node')])}, "
                   f"shape=box3d];")
        out.append(f"  {dot_string('rf:' + flavor.name)} [label={_dot_label(_flavor_lines(flavor))}, shape=box{style}];")
    for queue in graph.queues:
        fill = "#fde2e2" if queue.refused else "#fff4cc" if queue.held else "#e8f4fd"
        out.append(f"  {dot_string('cq:' + queue.name)} [label={_dot_label(_queue_lines(queue))}, "
                   f'shape=box, style="rounded,filled", fillcolor="{fill}"];')
        if queue.local_queues:
            out.append(f"  {dot_string('lq:' + queue.name)} [label={_dot_label(_local_lines(queue))}, shape=note];")
    for flavor in graph.flavors:
        out.append(f"  {dot_string('nodes:' + flavor.name)} -> {dot_string('rf:' + flavor.name)};")
    for edge in graph.edges:
        label = _edge_label(edge)
        attrs = f" [label={_dot_label([label])}]" if label else ""
        out.append(f"  {dot_string('rf:' + edge.flavor)} -> {dot_string('cq:' + edge.queue)}{attrs};")
    for queue in graph.queues:
        if queue.local_queues:
            out.append(f"  {dot_string('cq:' + queue.name)} -> {dot_string('lq:' + queue.name)};")
    out.append("}")
    return "\n".join(out) + "\n"
