"""`gpustack-render diff`: what applying the render would change (exit 1 when anything would)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import click

from gpustack_render.cli.common import chain_inputs, command_body, prepare, templates_option, write_stdout
from gpustack_render.errors import EXIT_NEGATIVE, EXIT_OK, UserError
from gpustack_render.timing import stage

if TYPE_CHECKING:  # imported lazily at run time: `--help` stays fast
    from gpustack_render import pipeline
    from gpustack_render.diff import DiffPolicy
    from gpustack_render.diff.pools import PoolComparison


@click.command("diff")
@chain_inputs
@templates_option
@click.option("--against", type=click.Path(path_type=Path, allow_dash=True), metavar="PATH",
              help="A previous render (YAML stream, JSON List, or an -o directory; - reads standard input). "
                   "Default: the live objects of the rendered kinds in the snapshot.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text",
              show_default=True, help="text: unified YAML diffs; json: RFC 6902 patches; markdown: a PR comment.")
@click.option("--include-node-patches", is_flag=True,
              help="Also list Nodes with pending node-patches (capacity keys, fit labels) as changes.")
@click.option("--max-removals", type=click.IntRange(min=0), metavar="N",
              help="Fail (exit 2, nothing on stdout) when more than N owned objects would be removed.")
@click.option("--guard-removals", is_flag=True,
              help="Fail (exit 2, nothing on stdout) when any kind would lose more than half of its owned "
                   "objects (what the warning says); with --max-removals, both apply.")
@click.option("--admission", is_flag=True,
              help="markdown: add the admission preview (admit --chain compare: the snapshot's Workloads whose "
                   "outcome changes, per-queue usage before -> after).")
def command(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, templates_dir: Path | None,
            against: Path | None, fmt: str, include_node_patches: bool, max_removals: int | None,
            guard_removals: bool, admission: bool) -> None:
    """Compare the render with the current objects: added, changed and removed (owned objects only).

    Server-owned fields (status, managedFields, resourceVersion, ...) and Kueue defaults the render
    leaves unset are ignored (rules/diff.yaml). Every format ends with (json: carries) a summary per
    kind; a kind losing more than half of its owned objects is warned about.
    Exit 0: no differences; 1: differences; 2: error (or more removals than --max-removals, or a
    kind losing more than half with --guard-removals).
    """
    def action(state: dict[str, Any]) -> int:
        from gpustack_render import diff
        from gpustack_render.diff.report import ReportExtras, report
        from gpustack_render.diff.current import read_current
        from gpustack_render.diff.manifests import is_stdin
        if is_stdin(against) and "-" in snapshot:
            raise UserError.single("SNAPSHOT and --against cannot both be '-': standard input can be read once")
        if admission and fmt != "markdown":
            raise UserError.single("--admission adds a section to the markdown report: use it with --format markdown")
        ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
        policy = diff.DiffPolicy(ctx.rules.diff)
        from gpustack_render import pipeline
        desired = pipeline.render_objects(ctx, templates_dir)
        with stage("current"):
            current = read_current(against, desired) if against is not None else list(ctx.snapshot.raw.values())
        with stage("compare"):
            changes = diff.compare(desired, current, policy, set(ctx.snapshot.raw))
        if include_node_patches:
            changes += diff.node_changes(ctx.snapshot.nodes, pipeline.node_patches(ctx))
        summary = diff.summarise(changes)
        owned = diff.owned_counts(current, policy)
        warnings = diff.removal_warnings(summary, owned)
        ctx.diagnostics.extend(warnings)
        diff.check_max_removals(summary, max_removals)
        if guard_removals:
            diff.check_half_removals(summary, owned)
        extras = ReportExtras(warnings=warnings)
        if fmt == "markdown" and changes:
            extras.pools = _pools(ctx, desired, current, policy)
            extras.diagram = lambda pools: _diagram(ctx, desired, pools)
        if fmt == "markdown" and admission:
            from gpustack_render.admit.output import markdown
            doc = pipeline.admit_preview(ctx, (), "compare", {}, templates_dir, rendered=desired).doc
            extras.admission = lambda budget: markdown(doc, limit=budget, heading="#### Admission preview")
        write_stdout(report(changes, fmt, extras))
        return EXIT_NEGATIVE if changes else EXIT_OK

    command_body(action)


def _pools(ctx: pipeline.Context, desired: list[dict[str, Any]], current: list[dict[str, Any]],
           policy: DiffPolicy) -> PoolComparison:
    """The pool comparison: before with the snapshot's Node labels as the current NodeFeatures leave
    them, after with the converged ones (the labels the rendered NodeFeatures give), so both counts
    mean what their render means."""
    from gpustack_render.diff.pools import compare_pools, labels_before
    snapshot_labels = {name: node.metadata.labels or {} for name, node in ctx.snapshot.nodes.items()}
    after = {facts.name: facts.converged for facts in ctx.evaluation.node_facts}
    before = labels_before(snapshot_labels, after, ctx.evaluation.plan.node_features, current)
    return compare_pools(desired, current, policy, before, after)


def _diagram(ctx: pipeline.Context, desired: list[dict[str, Any]], pools: Sequence[str]) -> str:
    """The Mermaid diagram of ``pools`` as they will be: the `graph` command's picture of them."""
    from gpustack_render.cli.graph_cmd import chain_graph
    from gpustack_render.views.graph import to_mermaid
    return to_mermaid(chain_graph(ctx, desired, pools))
