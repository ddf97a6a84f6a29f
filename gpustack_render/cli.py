"""Command line: parse arguments, call the pipeline, map results to exit codes. No logic here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpustack_render import pipeline
from gpustack_render.commands.common import (FormatChoice, add_global_options, chain_inputs, command_body,
                                             info_line, prepare, reset_switches, templates_option, write_stdout)
from gpustack_render.emit import format_objects, render_summary, write_directory
from gpustack_render.errors import PROG
from gpustack_render.timing import stage
from gpustack_render.yamlio import dump_json, dump_yaml

class _Group(click.Group):
    """Resets the process-wide switches (--debug, -q, -v) for every invocation, so in-process
    callers (tests, the case runner) start each run from the defaults."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        reset_switches()
        return super().parse_args(ctx, args)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="gpustack-render", prog_name=PROG)
def main() -> None:
    """Render GPUStack's worker NodeFeatures and Kueue chain from a cluster snapshot.

    SNAPSHOT is one or more files or directories (read recursively: *.yaml, *.yml, *.json) or -
    for standard input, as `kubectl get -o yaml|json` prints them. Exit codes: 0 success, 1 a
    negative answer, 2 the job could not be done, 3 an internal error (please report it).
    """


@main.command()
@chain_inputs
@templates_option
@click.option("--format", "fmt", type=FormatChoice(["yaml", "json"]), default="yaml", show_default=True)
@click.option("-o", "--output-dir", type=click.Path(path_type=Path),
              help="Write one file per object (YAML, or JSON with --format json) plus kustomization.yaml here "
                   "(atomically) instead of stdout. Files that are not manifests (README, .gitkeep, "
                   "dotfiles) are kept.")
def render(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, templates_dir: Path | None,
           fmt: str, output_dir: Path | None) -> None:
    """Render NodeFeature, Topology, AdmissionCheck, ResourceFlavor, InstanceType, ClusterQueue, LocalQueue."""
    def action(state: dict[str, Any]) -> None:
        ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
        objects = pipeline.render_objects(ctx, templates_dir)
        with stage("write"):
            if output_dir is not None:
                write_directory(objects, output_dir, fmt)
            else:
                write_stdout(format_objects(objects, fmt))
        info_line(render_summary(objects, len(ctx.snapshot.nodes)))

    command_body(action)


@main.command()
@chain_inputs
@templates_option
@click.option("--format", "fmt", type=FormatChoice(["yaml", "json"]), default="yaml", show_default=True)
def catalog(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, templates_dir: Path | None,
            fmt: str) -> None:
    """Print the read-only InstanceTypeFlavor catalog as a List."""
    def action(state: dict[str, Any]) -> None:
        ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
        listing = pipeline.render_catalog(ctx, templates_dir)
        write_stdout(dump_json(listing) if fmt == "json" else dump_yaml(listing))

    command_body(action)


@main.command("node-patches")
@chain_inputs
@click.option("--format", "fmt", type=FormatChoice(["yaml", "json", "kubectl"]), default="yaml", show_default=True,
              help="kubectl: ready-to-run `kubectl patch node` lines.")
@click.option("--strict-devices", is_flag=True,
              help="Exit 2 when the snapshot holds no Devices at all while managed Nodes show accelerators "
                   "(default: skip those Nodes with a warning).")
def node_patches(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, fmt: str,
                 strict_devices: bool) -> None:
    """RFC 6902 patches the worker applies to Nodes: capacity keys ("status") and fit labels ("")."""
    def action(state: dict[str, Any]) -> None:
        from gpustack_render.patches import check_devices_captured, kubectl_lines
        ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
        if strict_devices:
            check_devices_captured(ctx.snapshot, ctx.rules, ctx.evaluation)
        entries = pipeline.node_patches(ctx)
        if fmt == "json":
            write_stdout(dump_json(entries))
        elif fmt == "kubectl":
            write_stdout(kubectl_lines(entries))
        else:
            write_stdout(dump_yaml(entries) if entries else "[]\n")

    command_body(action)


def _register() -> None:
    """Each further command lives in its own module under ``gpustack_render.commands``."""
    from gpustack_render.commands import (diff_cmd, explain_cmd, graph_cmd, lint_cmd, pin_cmd, schema_cmd,
                                          snapshot_cmd, summary_cmd, test_cmd, validate_cmd)
    for module in (diff_cmd, validate_cmd, snapshot_cmd, lint_cmd, explain_cmd, test_cmd, schema_cmd, pin_cmd,
                   graph_cmd, summary_cmd):
        main.add_command(module.command)
    for command in (main, *main.commands.values()):
        add_global_options(command)


_register()
