"""`gpustack-render lint [--rules DIR] [--templates DIR] [--crds DIR]`: check every rule file (and
the templates) and report all problems at once."""

from __future__ import annotations

from pathlib import Path

import click

from gpustack_render.cli.common import note_line, rules_option, run, templates_option, write_stdout
from gpustack_render.errors import EXIT_NEGATIVE


@click.command("lint")
@rules_option
@templates_option
@click.option("--crds", "crds_dir", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Check the templates against these CustomResourceDefinitions (their openAPIV3Schema).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def command(rules_dir: Path | None, templates_dir: Path | None, crds_dir: Path | None, fmt: str) -> None:
    """Check rule files: YAML syntax, unknown or missing keys, types, references between tables and
    files, expressions, placeholders, duplicates.

    Prints every problem, one per line, compiler style
    (rules/naming.yaml:9:8: error: resourceFlavor.cpu: unknown placeholder 'gkey' (did you mean 'gKey'?)),
    then a summary line. The same checks run before every render, which refuses invalid rules
    with the same messages. With --templates, the templates are compiled too (every mistake at its
    file:line:col); with --crds, each template's fixed structure is checked against its kind's CRD
    (unknown fields, wrong types, enum values, missing required fields). Exit 0 when clean, 1 when
    there are problems, 2 when the rules directory cannot be read.
    """
    def action() -> int:
        from gpustack_render.rules.lint import lint_rules
        from gpustack_render.yamlio import dump_json
        result = lint_rules(rules_dir)
        if templates_dir is not None or crds_dir is not None:
            from gpustack_render.validate.template_schema import lint_templates
            for note in lint_templates(result, templates_dir, crds_dir):
                note_line(note)
        write_stdout(dump_json(result.as_json()) if fmt == "json" else result.text())
        return 0 if result.ok else EXIT_NEGATIVE

    run(action)
