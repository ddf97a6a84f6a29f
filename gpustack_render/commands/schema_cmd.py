"""`gpustack-render schema [-o DIR] [--check]`: JSON Schemas of the rule files, one per kind."""

from __future__ import annotations

from pathlib import Path

import click

from gpustack_render.commands.common import run, write_stdout
from gpustack_render.errors import EXIT_NEGATIVE


@click.command("schema")
@click.option("-o", "--output-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write <kind>.schema.json files here (only the ones that changed).")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 when the schemas in -o DIR (default: schemas) are missing or stale.")
def command(output_dir: Path | None, check: bool) -> None:
    """JSON Schemas of the rule files, generated from the rule models: one per kind.

    Without -o, prints them as one JSON object keyed by file name. Editors that understand
    `# yaml-language-server: $schema=../schemas/<kind>.schema.json` (the first line of every
    built-in rule file) validate rule files while typing. Schemas check shape only; run
    `gpustack-render lint` for meaning (placeholders, facts, expressions, cross-file references).
    """
    def action() -> int:
        import json

        from gpustack_render import schema_export
        if check:
            problems = schema_export.compare(output_dir or Path("schemas"))
            for problem in problems:
                click.echo(problem)
            if not problems:
                click.echo(f"{len(schema_export.generate())} schemas up to date")
            return EXIT_NEGATIVE if problems else 0
        if output_dir is None:
            texts = schema_export.generate()
            write_stdout(json.dumps({name: json.loads(text) for name, text in texts.items()}, indent=2,
                                    ensure_ascii=False) + "\n")
            return 0
        changed = schema_export.write(output_dir)
        click.echo(f"wrote {len(changed)} of {len(schema_export.generate())} schema(s) to {output_dir}", err=True)
        return 0

    run(action)
