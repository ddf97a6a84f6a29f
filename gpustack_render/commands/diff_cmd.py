"""`gpustack-render diff`: what applying the render would change (exit 1 when anything would)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpustack_render import pipeline
from gpustack_render.commands.common import chain_inputs, command_body, templates_option, write_stdout
from gpustack_render.errors import EXIT_NEGATIVE, EXIT_OK


@click.command("diff")
@chain_inputs
@templates_option
@click.option("--against", type=click.Path(path_type=Path), metavar="PATH",
              help="A previous render (YAML stream, JSON List, or an -o directory). "
                   "Default: the live objects of the rendered kinds in the snapshot.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text",
              show_default=True, help="text: unified YAML diffs; json: RFC 6902 patches; markdown: a PR comment.")
@click.option("--include-node-patches", is_flag=True,
              help="Also list Nodes with pending node-patches (capacity keys, fit labels) as changes.")
def command(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, templates_dir: Path | None,
            against: Path | None, fmt: str, include_node_patches: bool) -> None:
    """Compare the render with the current objects: added, changed and removed (owned objects only).

    Server-owned fields (status, managedFields, resourceVersion, ...) and Kueue defaults the render
    leaves unset are ignored (rules/diff.yaml). Exit 0: no differences; 1: differences; 2: error.
    """
    def action(state: dict[str, Any]) -> int:
        from gpustack_render.diff_report import report
        ctx = state["ctx"] = pipeline.prepare(snapshot, sets, rules_dir)
        changes = pipeline.diff_changes(ctx, templates_dir, against, include_node_patches)
        write_stdout(report(changes, fmt))
        return EXIT_NEGATIVE if changes else EXIT_OK

    command_body(action)
