"""`gpustack-render admit SNAPSHOT...`: which Workloads Kueue would admit with this chain (admission.md)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import click

from gpustack_render.cli.common import (FormatChoice, chain_inputs, command_body, note_line, templates_option,
                                        write_stdout)
from gpustack_render.errors import EXIT_NEGATIVE, UserError


def parse_reserve(values: tuple[str, ...]) -> dict[str, Fraction]:
    """``--reserve RESOURCE=QTY`` (repeatable; a repeated resource adds up)."""
    from gpustack_render.k8s import QuantityError, parse_quantity
    out: dict[str, Fraction] = {}
    for value in values:
        resource, sep, quantity = value.partition("=")
        try:
            if not sep or not resource:
                raise QuantityError("expected RESOURCE=QTY")
            amount = parse_quantity(quantity)
            if amount < 0:
                raise QuantityError(f"{quantity!r} is negative")
        except QuantityError as err:
            raise UserError.single(f"--reserve {value}: {err}") from None
        out[resource] = out.get(resource, Fraction(0)) + amount
    return out


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
        from gpustack_render.admit import output
        from gpustack_render.yamlio import dump_json
        amounts = parse_reserve(reserve)
        if "-" in workloads and "-" in snapshot:
            raise UserError.single("standard input (-) can feed SNAPSHOT or --workloads, not both")
        # (nothing is applied: a snapshot without Nodes just places no Pods, so no --allow-empty guard)
        ctx = state["ctx"] = pipeline.prepare(snapshot, sets, rules_dir, allow_empty=True)
        preview = pipeline.admit_preview(ctx, workloads, chain, amounts, templates_dir)
        for note in preview.notes:
            note_line(note)
        if fmt == "json":
            write_stdout(dump_json(preview.doc))
        elif fmt == "markdown":
            doc = preview.doc if chain == "compare" else output.compare(preview.doc, preview.doc)
            write_stdout(output.markdown(doc))
        else:
            write_stdout(output.text(preview.doc))
        return EXIT_NEGATIVE if chain == "compare" and preview.changed else None

    command_body(action)
