"""`gpustack-render test [PATH...]`: run rule test cases (case.yaml + snapshot + expected.yaml)."""

from __future__ import annotations

from pathlib import Path

import click

from gpustack_render.cli.common import run, write_stdout
from gpustack_render.errors import EXIT_NEGATIVE, UserError

DEFAULT_PATH = "fixtures/cases"


@click.command("test")
@click.argument("paths", nargs=-1, metavar="[PATH]...", type=click.Path(path_type=Path))
@click.option("--update", is_flag=True,
              help="Rewrite each case's expected.yaml from the output (only when the exit code is the expected "
                   "one); review `git diff` afterwards. GPUSTACK_RENDER_UPDATE_GOLDENS=1 in the environment "
                   "does the same (pytest --update-goldens sets it).")
@click.option("--rules", "rules_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Run every case that does not name its own rules directory against this one "
                   "(default: the built-in rules).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "junit"]), default="text", show_default=True)
def command(paths: tuple[Path, ...], update: bool, rules_dir: Path | None, fmt: str) -> None:
    """Run rule test cases and compare each output with its golden, semantically.

    A PATH holding case.yaml is one case; any other directory holds one case per sub-folder
    (default: fixtures/cases). case.yaml: description, command (render | catalog | node-patches),
    snapshot (paths relative to the case), set, rules (a rules directory relative to the case),
    expectExitCode, expectStderr, expect ({kinds: [...], names: [globs]}: only those objects are
    compared, others are ignored). expected.yaml: the expected objects (render, catalog) or patch
    entries (node-patches), only the selected ones with expect. Paths in case files are relative to
    the case folder; commands run from the current directory.

    Rules: a case's own `rules:` wins; the other cases run against --rules DIR when given, else
    the built-in rules. The RULES column (and "rules" in json, a property in junit) says which.

    Prints a result table, the differences of each failing case and one final line
    "N passed, M failed" (for --format json|junit that line goes to stderr). Exit 1 when a case fails.
    """
    def action() -> int:
        from gpustack_render import casetest
        roots = list(paths) or [Path(DEFAULT_PATH)]
        missing = [str(p) for p in roots if not p.exists()]
        if missing:
            raise UserError.single("no such case directory", file=", ".join(missing))
        if rules_dir is not None:
            from gpustack_render.rules.overlay import check_holds_rules
            if not rules_dir.is_dir():
                raise UserError.single("rules directory not found", file=str(rules_dir))
            check_holds_rules(rules_dir)  # once, not once per case
        entries = casetest.run_suite(roots, Path.cwd(), update=update or casetest.update_requested(),
                                     rules=rules_dir)
        if not entries:
            raise UserError.single("no test cases found (a case is a folder with case.yaml)",
                                   file=", ".join(str(p) for p in roots))
        if fmt == "text":
            write_stdout(casetest.format_table(entries))
        else:
            write_stdout(casetest.format_json(entries) if fmt == "json" else casetest.format_junit(entries))
            click.echo(casetest.summary_line(entries), err=True)
        return EXIT_NEGATIVE if any(not e.outcome.ok for e in entries) else 0

    run(action)
