"""`gpustack-render admit SNAPSHOT...`: which Workloads Kueue would admit with this chain (admission.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpustack_render.cli.common import (FormatChoice, chain_inputs, command_body, note_line, templates_option,
                                        write_stdout)


@click.command("admit")
@chain_inputs
@templates_option
@click.option("--workloads", "workloads", multiple=True, metavar="PATH",
              help="More Workloads (files, directories or -), pending; repeatable.")
@click.option("--chain", "chain", type=click.Choice(["rendered", "live", "compare"]), default="rendered",
              show_default=True, help="rendered: the chain this render produces; live: the snapshot's own; "
                                      "compare: both, only the Workloads whose outcome differs (exit 1 if any).")
@click.option("--reserve", "reserve", multiple=True, metavar="RESOURCE=QTY",
              help="Take QTY of RESOURCE from every Node's room (Pods no Workload accounts for); repeatable.")
@click.option("--format", "fmt", type=FormatChoice(["text", "json", "markdown"]), default="text", show_default=True)
def command(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, templates_dir: Path | None,
            workloads: tuple[str, ...], chain: str, reserve: tuple[str, ...], fmt: str) -> None:
    """Preview Kueue's admission of the snapshot's Workloads: which would be admitted, on which
    flavor and Nodes, which wait and why (Kueue v0.19's scheduler, offline).

    SNAPSHOT may hold kueue.x-k8s.io Workloads; --workloads adds pending ones. Exit 0 when the run
    completes, 1 with --chain compare when some outcome differs, 2 for bad input. Example:

    \b
      gpustack-render admit fixtures/admit --chain live
      gpustack-render admit fixtures/admit --chain compare --format markdown
    """
    def action(state: dict[str, Any]) -> int | None:
        from gpustack_render import pipeline
        from gpustack_render.admit.command import AdmitRequest
        run = pipeline.admit_command(AdmitRequest(snapshot, sets, rules_dir, workloads, chain, reserve, fmt,
                                                  templates_dir), state)
        for note in run.notes:
            note_line(note)
        write_stdout(run.text)
        return run.exit_code

    command_body(action)
