"""`gpustack-render schema [-o DIR] [--check]`: JSON Schemas of the rule files, one per kind."""

from __future__ import annotations

from pathlib import Path

import click

from gpustack_render.cli.common import run, write_stdout
from gpustack_render.errors import EXIT_NEGATIVE, PROG, UserError


@click.command("schema")
@click.option("-o", "--output-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write <kind>.schema.json files here (only the ones that changed).")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 when the schemas in -o DIR (default: schemas) are missing or stale "
                   "(with --rules: or a rule file does not link to them).")
@click.option("--rules", "rules_dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Also point the first line of every rule file in this directory at the schemas in -o DIR "
                   "(a relative link, for rules copied into another repository).")
def command(output_dir: Path | None, check: bool, rules_dir: Path | None) -> None:
    """JSON Schemas of the rule files, generated from the rule models: one per kind.

    Without -o, prints them as one JSON object keyed by file name. Editors that understand
    `# yaml-language-server: $schema=../schemas/<kind>.schema.json` (the first line of every
    built-in rule file) validate rule files while typing. Schemas check shape only; run
    `gpustack-render lint` for meaning (placeholders, facts, expressions, cross-file references).

    After copying rules/ elsewhere, `schema -o DIR --rules RULESDIR` writes the schemas to DIR and
    rewrites each rule file's first line to link to DIR relative to the file; nothing else in the
    rule files changes.
    """
    def action() -> int:
        import json

        from gpustack_render.rules import export as schema_export
        if rules_dir is not None and output_dir is None:
            raise UserError.single("--rules needs -o DIR: the schema directory the rule files should link to")
        if rules_dir is not None:
            from gpustack_render.rules.overlay import check_holds_rules
            check_holds_rules(rules_dir)  # a snapshot directory is not relinked file by file
        if check:
            problems = schema_export.compare(output_dir or Path("schemas"))
            if rules_dir is not None:
                problems += schema_export.compare_links(rules_dir, output_dir)  # type: ignore[arg-type]
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
        if rules_dir is not None:
            relinked, skipped = schema_export.relink(rules_dir, output_dir)
            for path in skipped:
                click.echo(f"{PROG}: warning: {path}: not a rule file (no known kind), left alone", err=True)
            click.echo(f"linked {len(relinked)} rule file(s) in {rules_dir} to {output_dir}", err=True)
        return 0

    run(action)
