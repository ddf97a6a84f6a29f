"""The commands of the pipeline itself: ``render``, ``catalog`` and ``node-patches``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpustack_render.cli.common import (FormatChoice, chain_inputs, command_body, info_line, prepare,
                                        templates_option, write_stdout)
from gpustack_render.timing import stage


@click.command()
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
        from gpustack_render import pipeline  # not for --help: it builds every rule and input model
        from gpustack_render.emit import format_objects, render_summary, write_directory  # nor libyaml, orjson
        ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
        objects = pipeline.render_objects(ctx, templates_dir)
        ctx.diagnostics.extend(pipeline.removal_warnings(ctx, objects))
        with stage("write"):
            if output_dir is not None:
                write_directory(objects, output_dir, fmt)
            else:
                write_stdout(format_objects(objects, fmt))
        info_line(render_summary(objects, len(ctx.snapshot.nodes)))

    command_body(action)


@click.command()
@chain_inputs
@templates_option
@click.option("--format", "fmt", type=FormatChoice(["yaml", "json"]), default="yaml", show_default=True)
def catalog(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, templates_dir: Path | None,
            fmt: str) -> None:
    """Print the read-only InstanceTypeFlavor catalog as a List."""
    def action(state: dict[str, Any]) -> None:
        from gpustack_render import pipeline
        from gpustack_render.yamlio import dump_json, dump_yaml
        ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
        listing = pipeline.render_catalog(ctx, templates_dir)
        write_stdout(dump_json(listing) if fmt == "json" else dump_yaml(listing))

    command_body(action)


@click.command("node-patches")
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
        from gpustack_render import pipeline
        from gpustack_render.emit.patches import check_devices_captured, kubectl_lines
        from gpustack_render.yamlio import dump_json, dump_yaml
        ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
        if strict_devices:
            check_devices_captured(ctx.snapshot, ctx.rules, ctx.partial_evaluation)
        entries = pipeline.node_patches(ctx)
        with stage("write"):
            if fmt == "json":
                write_stdout(dump_json(entries))
            elif fmt == "kubectl":
                write_stdout(kubectl_lines(entries))
            else:
                write_stdout(dump_yaml(entries) if entries else "[]\n")

    command_body(action)


COMMANDS = (render, catalog, node_patches)
