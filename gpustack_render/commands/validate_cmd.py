"""`gpustack-render validate`: rendered (or given) manifests against CRD schemas, Kubernetes
metadata rules and Kueue limits; one line per problem on stdout, exit 1 when there is any."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpustack_render import pipeline
from gpustack_render.commands.common import command_body, rules_option, set_option, templates_option, write_stdout
from gpustack_render.errors import EXIT_NEGATIVE, EXIT_OK, PROG


@click.command("validate")
@click.argument("snapshot", nargs=-1, metavar="[SNAPSHOT]...")
@set_option
@rules_option
@templates_option
@click.option("--manifests", type=click.Path(path_type=Path), metavar="PATH",
              help="Validate these manifests (YAML stream, JSON List, or an -o directory) instead of a render.")
@click.option("--crds", "crds_dir", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="CustomResourceDefinition files (read recursively). Default: the CRDs in the snapshot.")
@click.option("--strict", is_flag=True, help="Reject fields the CRD schema does not know.")
def command(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, templates_dir: Path | None,
            manifests: Path | None, crds_dir: Path | None, strict: bool) -> None:
    """Check what `render` produces for SNAPSHOT (or the --manifests given) before it is applied.

    Schema: the openAPIV3Schema of the CRD version matching each apiVersion. Always: object names,
    namespaces, label keys and values, annotation keys and size, Kueue limits, and (with SNAPSHOT)
    queue plans the renderer refused. Without CRDs the schema check is skipped with a warning.
    Exit 0: clean; 1: problems found; 2: unusable input.
    """
    if bool(snapshot) == (manifests is not None):
        raise click.UsageError("give SNAPSHOT... or --manifests PATH (exactly one of them)")
    if manifests is not None and (sets or rules_dir or templates_dir):
        raise click.UsageError("--set, --rules and --templates apply to a render; not with --manifests")

    def action(state: dict[str, Any]) -> int:
        if manifests is not None:
            from gpustack_render.crd_schema import load_crd_dir
            from gpustack_render.manifests import read_manifests
            from gpustack_render.validate import validate_objects
            objects = read_manifests(manifests)
            outcome = validate_objects(objects, load_crd_dir(crds_dir) if crds_dir else None, strict)
        else:
            ctx = state["ctx"] = pipeline.prepare(snapshot, sets, rules_dir)
            outcome = pipeline.validate_render(ctx, templates_dir, crds_dir, strict)
            ctx.diagnostics.extend(outcome.warnings)
        if manifests is not None:
            for warning in outcome.warnings:
                click.echo(f"{PROG}: warning: {warning}", err=True)
        write_stdout("".join(line + "\n" for line in outcome.lines))
        if outcome.lines:
            click.echo(f"{PROG}: validate: {len(outcome.lines)} problem(s)", err=True)
        return EXIT_NEGATIVE if outcome.lines else EXIT_OK

    command_body(action)
