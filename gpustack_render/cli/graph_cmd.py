"""`gpustack-render graph SNAPSHOT...`: the rendered Kueue chain as a Mermaid or Graphviz diagram."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import click

from gpustack_render.cli.common import chain_inputs, command_body, prepare, templates_option, write_stdout


@click.command("graph")
@chain_inputs
@templates_option
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid", show_default=True,
              help="mermaid: a flowchart GitHub renders in Markdown; dot: Graphviz (`dot -Tsvg`).")
@click.option("--pool", "pools", multiple=True, metavar="NAME",
              help="Only this pool (ClusterQueue name), its flavors, Nodes and LocalQueues (repeatable).")
def command(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, templates_dir: Path | None,
            fmt: str, pools: tuple[str, ...]) -> None:
    """Draw the chain: Nodes (grouped by flavor) → ResourceFlavors → ClusterQueues → LocalQueues.

    A ClusterQueue shows its quota per resource and its stop policy; refused plans and held queues
    (stopPolicy other than None) are marked. Example:

    \b
      gpustack-render graph fixtures/demo > chain.mmd
      gpustack-render graph fixtures/demo --format dot | dot -Tsvg > chain.svg
    """
    def action(state: dict[str, Any]) -> None:
        from gpustack_render import pipeline
        from gpustack_render.views.graph import MERMAID_MAX_TEXT, to_dot, to_mermaid
        ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
        objects = pipeline.render_objects(ctx, templates_dir)
        graph = chain_graph(ctx, objects, pools)
        text = to_dot(graph) if fmt == "dot" else to_mermaid(graph)
        if fmt == "mermaid" and len(text) > MERMAID_MAX_TEXT:
            ctx.diagnostics.warn(f"the diagram is {len(text):,} characters; Mermaid (and GitHub) draw at most "
                                 f"{MERMAID_MAX_TEXT:,}: narrow it with --pool, or use --format dot")
        write_stdout(text)

    command_body(action)


def chain_graph(ctx: Any, objects: Sequence[dict[str, Any]], pools: Sequence[str]) -> Any:
    """The graph of ``objects`` rendered from ``ctx``: Node counts from the Nodes' converged labels,
    refusals from the plan; an unknown ``--pool`` is a usage error with a suggestion."""
    from gpustack_render.errors import Problem, UserError
    from gpustack_render.explain import suggestion
    from gpustack_render.views.graph import build_graph, count_nodes_per_flavor, pool_names
    known = pool_names(objects)
    for pool in pools:
        if pool not in known:
            raise UserError([Problem(f"--pool {pool!r}: no such ClusterQueue in the render",
                                     hint=suggestion(pool, known, "ClusterQueue"))])
    flavors = [o for o in objects if o.get("kind") == "ResourceFlavor"]
    labels = {f.name: f.converged for f in ctx.evaluation.node_facts}
    refusals = {q.name: q.refusal for q in ctx.evaluation.plan.cluster_queues if q.refusal}
    return build_graph(objects, count_nodes_per_flavor(flavors, labels), refusals, pools or None)
