"""`gpustack-render validate`: rendered (or given) manifests against CRD schemas and CEL rules,
Kubernetes metadata rules and Kueue's webhook; one line per problem on stdout, exit 1 when there
is any."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpustack_render.cli.common import (allow_empty_option, command_body, note_line, prepare, rules_option,
                                             set_option, templates_option, warn_line, write_stdout)
from gpustack_render.errors import EXIT_NEGATIVE, EXIT_OK, PROG


@click.command("validate")
@click.argument("snapshot", nargs=-1, metavar="[SNAPSHOT]...")
@set_option
@rules_option
@allow_empty_option
@templates_option
@click.option("--manifests", type=click.Path(allow_dash=True), metavar="PATH",
              help="Validate these manifests (YAML stream, JSON List, an -o directory, or - for stdin) "
                   "instead of a render.")
@click.option("--crds", "crds_dir", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="CustomResourceDefinition files (read recursively). Default: the CRDs in the snapshot.")
@click.option("--strict", is_flag=True, help="Reject fields the CRD schema does not know.")
@click.option("--skip-schema", is_flag=True,
              help="No CRD schema or CEL check, and no warning that there are no CRDs.")
def command(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, templates_dir: Path | None,
            manifests: str | None, crds_dir: Path | None, strict: bool, skip_schema: bool) -> None:
    """Check what `render` produces for SNAPSHOT (or the --manifests given) before it is applied.

    CRDs: the openAPIV3Schema and the CEL rules (x-kubernetes-validations) of the CRD version
    matching each apiVersion, as the API server runs them on a create. Always: object names,
    namespaces, label keys and values, annotation keys and size, Kueue's flavor resource names,
    and (with SNAPSHOT) queue plans the renderer refused. Without CRDs the schema check is skipped
    with a warning (--skip-schema: silently).
    Exit 0: clean; 1: problems found; 2: unusable input.
    """
    if bool(snapshot) == (manifests is not None):
        raise click.UsageError("give SNAPSHOT... or --manifests PATH (exactly one of them)")
    if manifests is not None and (sets or rules_dir or templates_dir):
        raise click.UsageError("--set, --rules and --templates apply to a render; not with --manifests")
    if skip_schema and (crds_dir is not None or strict):
        raise click.UsageError("--crds and --strict are schema checks; not with --skip-schema")

    def action(state: dict[str, Any]) -> int:
        from gpustack_render.validate import validate_objects
        if manifests is not None:
            from gpustack_render.validate.crd_schema import load_crd_dir
            from gpustack_render.diff.manifests import read_manifests
            objects = read_manifests(manifests if manifests == "-" else Path(manifests))
            crds = load_crd_dir(crds_dir) if crds_dir else None
            outcome = validate_objects(objects, crds, strict, skip_schema=skip_schema)
            for warning in outcome.warnings:
                warn_line(warning)
        else:
            ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
            from gpustack_render import pipeline
            outcome = pipeline.validate_render(ctx, templates_dir, crds_dir, strict, skip_schema)
            ctx.diagnostics.extend(outcome.warnings)
        for note in outcome.notes:
            note_line(note)
        write_stdout("".join(line + "\n" for line in outcome.lines))
        if outcome.lines:
            click.echo(f"{PROG}: validate: {len(outcome.lines)} problem(s)", err=True)
        return EXIT_NEGATIVE if outcome.lines else EXIT_OK

    command_body(action)
