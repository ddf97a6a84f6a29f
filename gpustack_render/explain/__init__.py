"""``gpustack-render explain``: why a rendered object (or a Node) looks the way it does.

Pure: a prepared :class:`~gpustack_render.explain.base.Context` (``pipeline.Context`` fits), the
settings' sources and a target in, a :class:`Report` out (``as_json()`` for ``--format json``,
:func:`format_text` for people). The builders format what the evaluator recorded while it decided
(gpustack_render/evaluate/record.py: gKey steps, verdicts, flavor selection, refusals with the objects
they name, a queue's InstanceType, preset tiers, quotas, lifecycle rules), the plan it produced and
the rules' origins; they evaluate nothing again. (The capacity keys of a Node are asked of the same
``CapacityEvaluator`` ``node-patches`` uses.)

Targets: ``KIND/NAME`` for ResourceFlavor, ClusterQueue, InstanceType, NodeFeature, Topology,
AdmissionCheck; ``LocalQueue/NAMESPACE/NAME``; ``node/NAME``; ``workload/NAMESPACE/NAME`` (a
snapshot Workload's admission under the rendered chain, from the ``admit`` run). Kinds are case-insensitive and take
kubectl's plural and short names (:data:`ALIASES`).
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from gpustack_render.errors import Problem, UserError
from gpustack_render.explain.base import Context, Explainer, Report
from gpustack_render.explain.text import format_text

KINDS = ("ResourceFlavor", "ClusterQueue", "InstanceType", "LocalQueue", "NodeFeature", "Topology",
         "AdmissionCheck", "node", "workload")
NAMESPACED = ("LocalQueue", "workload")
# What kubectl accepts for each kind besides its name: the singular and plural resource names and
# the CRDs' own spec.names.shortNames (Kueue v0.19: rf/flavor/flavors, cq, lq/queue/queues, topo,
# ac; kubectl's built-in `no` for nodes). NodeFeature and InstanceType declare no short name. Tool
# vocabulary (what a user types), so it lives here, not in rules/.
ALIASES: dict[str, tuple[str, ...]] = {
    "ResourceFlavor": ("resourceflavors", "rf", "flavor", "flavors"),
    "ClusterQueue": ("clusterqueues", "cq"),
    "InstanceType": ("instancetypes",),
    "LocalQueue": ("localqueues", "lq", "queue", "queues"),
    "NodeFeature": ("nodefeatures",),
    "Topology": ("topologies", "topo"),
    "AdmissionCheck": ("admissionchecks", "ac"),
    "node": ("nodes", "no"),
    "workload": ("workloads", "wl"),
}
_BY_LOWER = {alias: kind for kind in KINDS for alias in (kind.lower(), *ALIASES[kind])}

__all__ = ["ALIASES", "KINDS", "Report", "closest", "explain", "format_text", "parse_target", "suggestion"]


def similarity(word: str, candidate: str) -> float:
    """How alike two whole names are (difflib's ratio, case folded, no junk heuristic: long
    generated names repeat characters, which autojunk would discard)."""
    return SequenceMatcher(None, word.lower(), candidate.lower(), autojunk=False).ratio()


def _rank(word: str, candidate: str, weights: Mapping[str, float]) -> tuple[bool, float, float]:
    """A name that contains what was typed (a partial name) beats one that does not; then the parts
    of the typed name (between ``-``, ``.``, ``_`` and ``/``) that the name has, each weighing the more
    the fewer names have it (``weights``; a part the name has is one of its parts or the start of one:
    ``h10`` of ``h100``): what tells names apart (``h100``) outweighs what they share (``nvidia``,
    ``linux``); then the whole-name similarity decides. (Similarity alone puts ``…-l4-linux-amd64``
    before ``…-h100-80gb-hbm3-linux-amd64`` for ``…-h100-linux-amd64``: the short name shares more of
    the long common parts.)"""
    parts = _parts(candidate)
    return (word.lower() in candidate.lower(), round(sum(w for p, w in weights.items() if _has(parts, p)), 9),
            round(similarity(word, candidate), 9))


def _has(parts: set[str], part: str) -> bool:
    return part in parts or any(p.startswith(part) for p in parts)


def _parts(name: str) -> set[str]:
    return set(re.split(r"[-._/]+", name.lower())) - {""}


def _weights(word: str, candidates: Iterable[str]) -> dict[str, float]:
    """Each part of ``word`` that some candidate has, weighing 1 / the number of candidates with it."""
    counts: dict[str, int] = dict.fromkeys(_parts(word), 0)
    for candidate in candidates:
        parts = _parts(candidate)
        for part in counts:
            counts[part] += _has(parts, part)
    return {part: 1 / count for part, count in counts.items() if count}


def _ranked(word: str, candidates: Iterable[str]) -> list[tuple[tuple[bool, float, float], str]]:
    """Each distinct candidate with its :func:`_rank`, best first (ties by name)."""
    names = set(candidates)
    weights = _weights(word, names)
    ranked = [(_rank(word, c, weights), c) for c in names]
    ranked.sort(key=lambda rc: (tuple(-x for x in rc[0]), rc[1]))
    return ranked


def closest(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The ``n`` candidates most like ``word``, best first (ties by name)."""
    return [c for _, c in _ranked(word, candidates)[:n]]


def suggestion(word: str, candidates: Iterable[str], what: str, cutoff: float = 0.6) -> str:
    """``did you mean 'x'?`` when one name is close (or is the only one containing ``word``), naming
    every equally close one; else the closest few, so that a hint always points somewhere useful."""
    names = sorted(set(candidates))
    if not names:
        return f"this snapshot renders no {what}"
    ranked = _ranked(word, names)[:3]
    best = [c for _, c in ranked]
    top = ranked[0][0]
    containing = [c for c in names if word and word.lower() in c.lower()]
    if top[2] >= cutoff or len(containing) == 1:
        ties = [c for rank, c in ranked if rank == top]
        quoted = [f"'{c}'" for c in ties]
        return "did you mean " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]) + "?"
    more = f" (of {len(names)})" if len(names) > len(best) else ""
    return f"closest {what}s{more}: {', '.join(best)}"


def _kind_hint(text: str) -> str:
    """The kind (and the alias it was matched through) most like ``text``, else all kinds."""
    alias = closest(text, _BY_LOWER, 1)[0]
    if similarity(text, alias) >= 0.6:
        kind = _BY_LOWER[alias]
        return f"did you mean '{kind}'?" if alias == kind.lower() else f"did you mean '{alias}' ({kind})?"
    return "kinds: " + "; ".join(f"{k} ({', '.join(ALIASES[k])})" for k in KINDS)


def parse_target(target: str) -> tuple[str, str, str]:
    """``KIND/NAME`` or ``LocalQueue/NS/NAME`` → (kind, namespace, name); a usage error otherwise.
    KIND is case-insensitive and may be any name kubectl accepts for it (``cq``, ``rf``, ``nodes``)."""
    kind_text, sep, rest = target.partition("/")
    kind = _BY_LOWER.get(kind_text.lower())
    if kind is None:
        raise UserError([Problem(f"target {target!r}: unknown kind {kind_text!r}", hint=_kind_hint(kind_text))])
    if not sep or not rest:
        raise UserError([Problem(f"target {target!r}: expected {kind}/NAME"
                                 + (f" ({kind}/NAMESPACE/NAME)" if kind in NAMESPACED else ""))])
    if kind in NAMESPACED:
        namespace, sep, name = rest.partition("/")
        if not sep or not namespace or not name:
            raise UserError([Problem(f"target {target!r}: expected {kind}/NAMESPACE/NAME")])
        return kind, namespace, name
    if "/" in rest:
        raise UserError([Problem(f"target {target!r}: expected {kind}/NAME (a name has no '/')")])
    return kind, "", rest


def explain(ctx: Context, target: str, setting_sources: Mapping[str, tuple[str, str]],
            templates_dir: Path | None = None, admission: Callable[[], Any] | None = None) -> Report:
    """``admission``: the admit run over the rendered chain (``workload/NS/NAME`` asks for it)."""
    from gpustack_render.explain import node as node_mod
    from gpustack_render.explain import objects, queue
    kind, namespace, name = parse_target(target)
    if kind == "workload":
        assert admission is not None
        return _explain_workload(admission(), target, namespace, name, ctx.rules)
    x = Explainer(ctx, setting_sources, templates_dir)
    plan = x.plan
    if kind == "node":
        if name not in x.facts:
            _not_found(target, "Node", name, x.facts, "it is not in the snapshot (or is being deleted)")
        return node_mod.explain_node(x, name)
    if kind == "InstanceType":
        known = {it.name for it in plan.instance_types} | set(ctx.snapshot.instance_types) \
            | set(ctx.snapshot.deleted_instance_types)
        if name not in known:
            _not_found(target, kind, name, known, "no pool derives it and the snapshot has none")
        return objects.explain_instance_type(x, name)
    if kind == "LocalQueue":
        items = {(lq.namespace, lq.name): lq for lq in plan.local_queues}
        item = items.get((namespace, name))
        if item is None:
            _not_found(target, kind, f"{namespace}/{name}", {f"{ns}/{n}" for ns, n in items},
                       "not rendered from this snapshot")
        return objects.explain_local_queue(x, item)
    table: dict[str, Sequence[Any]] = {"ResourceFlavor": plan.flavors, "ClusterQueue": plan.cluster_queues,
                                       "NodeFeature": plan.node_features, "Topology": plan.topologies,
                                       "AdmissionCheck": plan.admission_checks}
    by_name = {entry.name: entry for entry in table[kind]}
    found = by_name.get(name)
    if found is None:
        _not_found(target, kind, name, by_name, "not rendered from this snapshot")
    builders: dict[str, Callable[[Explainer, Any], Report]] = {"ResourceFlavor": objects.explain_flavor, "ClusterQueue": queue.explain_queue,
                "NodeFeature": node_mod.explain_node_feature, "Topology": objects.explain_topology,
                "AdmissionCheck": objects.explain_admission_check}
    return builders[kind](x, found)


def _explain_workload(result: Any, target: str, namespace: str, name: str, rules: Any) -> Report:
    from gpustack_render.explain.workload import explain_workload
    entries = {e.workload.ref: e for e in result.entries}
    entry = entries.get(f"{namespace}/{name}")
    if entry is None:
        _not_found(target, "Workload", f"{namespace}/{name}", entries,
                   "not in the snapshot (or Finished, or in a ClusterQueue of a cohort)")
    assert entry is not None
    return explain_workload(result, entry, rules)


def _not_found(target: str, kind: str, name: str, known: Iterable[str], why: str) -> None:
    raise UserError([Problem(f"{target}: {why}", hint=suggestion(name, known, kind))])
