"""``gpustack-render explain``: why a rendered object (or a Node) looks the way it does.

Pure: a prepared :class:`~gpustack_render.pipeline.Context`, the settings' sources and a target in,
a :class:`Report` out (``as_json()`` for ``--format json``, :func:`format_text` for people). The
builders read the plan the renderer computed and the rules' origins; where they re-derive a value
to show its steps (gKey, preset tier, quota) they cross-check it against the renderer's value.

Targets: ``KIND/NAME`` for ResourceFlavor, ClusterQueue, InstanceType, NodeFeature, Topology,
AdmissionCheck; ``LocalQueue/NAMESPACE/NAME``; ``node/NAME``. Kinds are case-insensitive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from gpustack_render.errors import Problem, UserError, did_you_mean
from gpustack_render.explain.base import Explainer, Report
from gpustack_render.explain.text import format_text
from gpustack_render.pipeline import Context

KINDS = ("ResourceFlavor", "ClusterQueue", "InstanceType", "LocalQueue", "NodeFeature", "Topology",
         "AdmissionCheck", "node")
_BY_LOWER = {k.lower(): k for k in KINDS}

__all__ = ["KINDS", "Report", "explain", "format_text", "parse_target"]


def parse_target(target: str) -> tuple[str, str, str]:
    """``KIND/NAME`` or ``LocalQueue/NS/NAME`` → (kind, namespace, name); a usage error otherwise."""
    kind_text, sep, rest = target.partition("/")
    kind = _BY_LOWER.get(kind_text.lower())
    if kind is None:
        hint = did_you_mean(kind_text, KINDS) or f"kinds: {', '.join(KINDS)}"
        raise UserError([Problem(f"target {target!r}: unknown kind {kind_text!r}", hint=hint)])
    if not sep or not rest:
        raise UserError([Problem(f"target {target!r}: expected {kind}/NAME"
                                 + (" (LocalQueue/NAMESPACE/NAME)" if kind == "LocalQueue" else ""))])
    if kind == "LocalQueue":
        namespace, sep, name = rest.partition("/")
        if not sep or not namespace or not name:
            raise UserError([Problem(f"target {target!r}: expected LocalQueue/NAMESPACE/NAME")])
        return kind, namespace, name
    if "/" in rest:
        raise UserError([Problem(f"target {target!r}: expected {kind}/NAME (a name has no '/')")])
    return kind, "", rest


def explain(ctx: Context, target: str, setting_sources: Mapping[str, tuple[str, str]],
            templates_dir: Path | None = None) -> Report:
    from gpustack_render.explain import node as node_mod
    from gpustack_render.explain import objects
    kind, namespace, name = parse_target(target)
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
    sources = {"ResourceFlavor": plan.flavors, "ClusterQueue": plan.cluster_queues,
               "NodeFeature": plan.node_features, "Topology": plan.topologies,
               "AdmissionCheck": plan.admission_checks}[kind]
    by_name = {item.name: item for item in sources}
    item = by_name.get(name)
    if item is None:
        _not_found(target, kind, name, by_name, "not rendered from this snapshot")
    builders = {"ResourceFlavor": objects.explain_flavor, "ClusterQueue": objects.explain_queue,
                "NodeFeature": node_mod.explain_node_feature, "Topology": objects.explain_topology,
                "AdmissionCheck": objects.explain_admission_check}
    return builders[kind](x, item)


def _not_found(target: str, kind: str, name: str, known: object, why: str) -> None:
    names = sorted(known)  # type: ignore[call-overload]
    hint = did_you_mean(name, names)
    if not hint:
        hint = (f"{kind}s: {', '.join(names[:8])}{', ...' if len(names) > 8 else ''}" if names
                else f"this snapshot renders no {kind}")
    raise UserError([Problem(f"{target}: {why}", hint=hint)])
