"""`gpustack-render summary SNAPSHOT...`: one table of pools (ClusterQueues), kubectl style."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpustack_render.cli.common import chain_inputs, command_body, prepare, write_stdout


@click.command("summary")
@chain_inputs
@click.option("-o", "--output", "output", type=click.Choice(["wide", "json"]), default=None,
              help="wide: more columns (accelerator, flavors, the LocalQueue names, message); json: for tools.")
def command(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, output: str | None) -> None:
    """One line per pool (ClusterQueue): Nodes, cards, quota, free cards, largest free slice, warnings.

    Free cards and the largest free slice (in units) are read from the fit labels `node-patches`
    would set on each Node of the pool; <unknown> when no Node of the pool has them (no Devices).
    Example:

    \b
      gpustack-render summary fixtures/demo
      gpustack-render summary fixtures/demo -o json | jq '.pools[] | {name, freeCards}'
    """
    def action(state: dict[str, Any]) -> None:
        from gpustack_render import pipeline
        from gpustack_render.views.summary import as_json, format_table, summarise
        from gpustack_render.yamlio import dump_json
        ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
        rows = summarise(ctx, pipeline.fit_node_labels(ctx))
        if output == "json":
            write_stdout(dump_json(as_json(rows)))
        elif rows:
            write_stdout(format_table(rows, wide=output == "wide"))
        else:
            click.echo("No resources found.", err=True)

    command_body(action)
