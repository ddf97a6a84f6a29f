"""`gpustack-render pin WORKLOAD... --snapshot SNAPSHOT...`: the Workload fit pin (fit-pin.md) offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import click

from gpustack_render.cli.common import (FormatChoice, allow_empty_option, command_body, note_line, prepare,
                                             rules_option, set_option, write_stdout)
from gpustack_render.errors import PROG, UserError


SNAPSHOT_OPTION = "--snapshot"


def spread_snapshot_paths(args: Sequence[str]) -> list[str]:
    """``--snapshot A B`` → ``--snapshot A --snapshot B``: the contract's ``--snapshot SNAPSHOT...``
    takes every plain argument up to the next option (click options take one value each, so B would
    otherwise be read as a WORKLOAD). ``-`` is a path (stdin); ``--`` ends the options as usual."""
    out: list[str] = []
    collecting = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i:])
            break
        if arg == SNAPSHOT_OPTION:
            out.extend(args[i:i + 2])  # the option and its first value, as click reads them
            i += 2
            collecting = True
            continue
        if arg.startswith(SNAPSHOT_OPTION + "="):
            collecting = True
        elif arg.startswith("-") and arg != "-":
            collecting = False
        elif collecting:
            out.append(SNAPSHOT_OPTION)
        out.append(arg)
        i += 1
    return out


class PinCommand(click.Command):
    """The pin command, reading ``--snapshot SNAPSHOT...`` as cli-contract.md writes it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, spread_snapshot_paths(args))
        except click.MissingParameter as err:
            taken = ctx.params.get("snapshot") or ()
            if err.param is None or err.param.name != "workloads" or len(taken) < 2:
                raise
            raise click.UsageError(
                f"Missing argument 'WORKLOAD...': {SNAPSHOT_OPTION} took every path up to the next option "
                f"({', '.join(taken)}), so none was left for WORKLOAD. Write the Workloads first "
                f"(pin WORKLOAD... {SNAPSHOT_OPTION} SNAPSHOT...) or end the snapshot paths with -- "
                f"(pin {SNAPSHOT_OPTION} SNAPSHOT... -- WORKLOAD...).", ctx) from None


@click.command("pin", cls=PinCommand)
@click.argument("workloads", nargs=-1, required=True, metavar="WORKLOAD...")
@click.option(SNAPSHOT_OPTION, "snapshot", multiple=True, required=True, metavar="SNAPSHOT...",
              help="Cluster snapshot files or directories, or - for stdin: every path after --snapshot up "
                   "to the next option or -- (so WORKLOADs come first, or after --; or repeat --snapshot).")
@set_option
@rules_option
@allow_empty_option
@click.option("--format", "fmt", type=FormatChoice(["yaml", "json", "patch"]), default="yaml", show_default=True,
              help="yaml: the Workloads as a YAML stream; json: a List; patch: RFC 6902 patches per Workload.")
@click.option("--explain-nodes", is_flag=True,
              help="On stderr: per pinned PodSet, which snapshot Nodes satisfy the pin (fit labels as "
                   "node-patches would set them).")
def command(workloads: tuple[str, ...], snapshot: tuple[str, ...], sets: tuple[str, ...],
            rules_dir: Path | None, fmt: str, explain_nodes: bool) -> None:
    """Pin Kueue Workloads to Nodes whose per-card fit labels can hold them, as the webhook would.

    WORKLOAD is one or more files or directories of kueue.x-k8s.io Workloads (single objects,
    streams or Lists; - for stdin), printed back in input order with the required node affinity
    the fit pin adds. A Workload left alone is printed unchanged (its patch is empty) and a note
    on stderr says why. The queue chain (LocalQueue → ClusterQueue → InstanceType) resolves
    against what the snapshot renders plus the snapshot's own objects. Exit 0; 2 for bad input.
    """
    def action(state: dict[str, Any]) -> None:
        from gpustack_render import pipeline
        from gpustack_render.yamlio import dump_json, dump_yaml_stream  # not for --help: libyaml, ruamel, orjson
        if "-" in workloads and "-" in snapshot:
            raise UserError.single("standard input (-) can feed WORKLOAD or --snapshot, not both")
        ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
        results = pipeline.pin_workloads(ctx, workloads)
        for result in results:
            if result.note:
                note_line(f"{result.workload.ref}: {result.note}")
        if explain_nodes:
            from gpustack_render.pin.explain_nodes import explain_lines
            for line in explain_lines(results, pipeline.fit_node_labels(ctx)):
                click.echo(line if line.startswith(" ") else f"{PROG}: {line}", err=True)
        pinned = [r.pinned for r in results]
        if fmt == "patch":
            write_stdout(dump_json([{"namespace": r.workload.namespace, "name": r.workload.name, "patch": r.patch}
                                    for r in results]))
        elif fmt == "json":
            write_stdout(dump_json({"apiVersion": "v1", "kind": "List", "items": pinned}))
        else:
            write_stdout(dump_yaml_stream(pinned))

    command_body(action)
