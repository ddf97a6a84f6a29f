"""`gpustack-render lint [--rules DIR]`: check every rule file and report all problems at once."""

from __future__ import annotations

from pathlib import Path

import click

from gpustack_render.cli.common import rules_option, run, write_stdout
from gpustack_render.errors import EXIT_NEGATIVE


@click.command("lint")
@rules_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def command(rules_dir: Path | None, fmt: str) -> None:
    """Check rule files: YAML syntax, unknown or missing keys, types, references between tables and
    files, expressions, placeholders, duplicates.

    Prints every problem, one per line, compiler style
    (rules/naming.yaml:9:8: error: resourceFlavor.cpu: unknown placeholder 'gkey' (did you mean 'gKey'?)),
    then a summary line. The same checks run before every render, which refuses invalid rules
    with the same messages. Exit 0 when clean, 1 when there are problems, 2 when the rules
    directory cannot be read.
    """
    def action() -> int:
        from gpustack_render.rules.lint import lint_rules
        from gpustack_render.yamlio import dump_json
        result = lint_rules(rules_dir)
        write_stdout(dump_json(result.as_json()) if fmt == "json" else result.text())
        return 0 if result.ok else EXIT_NEGATIVE

    run(action)
