"""What every command shares: the one error handler (exit codes), stdout writing, common options."""

from __future__ import annotations

import gc
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

import click

from gpustack_render.errors import EXIT_USAGE, PROG, Diagnostics, UserError

DEBUG = {"on": False}
# -q/--quiet: -1 (errors only), default 0, -v/--verbose: 1 (stage timings). Set by the CLI group.
VERBOSITY = {"level": 0}


def run(action: Callable[[], int | None], diagnostics: Callable[[], Diagnostics | None] = lambda: None) -> None:
    """The one error handler: user errors and internal failures become one-line messages, exit 2."""
    # A snapshot is one large, acyclic object graph that lives for the whole (short) run: the
    # cyclic collector would rescan it on every generation-2 pass and triple the run time.
    gc.disable()
    try:
        code = action() or 0
    except UserError as err:
        flush_warnings(diagnostics())
        for problem in err.problems:
            click.echo(problem.format() if problem.compiler_style else f"{PROG}: {problem.format()}", err=True)
        sys.exit(EXIT_USAGE)
    except (click.exceptions.Exit, click.ClickException, SystemExit):
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as err:  # a bug: one line, traceback only with --debug
        if DEBUG["on"]:
            traceback.print_exc()
        click.echo(f"{PROG}: error: internal error: {type(err).__name__}: {err} "
                   f"(run with --debug for a traceback and please report it)", err=True)
        sys.exit(EXIT_USAGE)
    flush_warnings(diagnostics())
    sys.exit(code)


def command_body(body: Callable[[dict[str, Any]], int | None]) -> None:
    """Run a command body; whatever context it stores under ``"ctx"`` supplies the warnings."""
    state: dict[str, Any] = {}
    run(lambda: body(state), lambda: state["ctx"].diagnostics if "ctx" in state else None)


def flush_warnings(diag: Diagnostics | None) -> None:
    for warning in diag.warnings if diag else []:
        click.echo(f"{PROG}: warning: {warning}", err=True)


def write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


snapshot_args = click.argument("snapshot", nargs=-1, required=True, metavar="SNAPSHOT...")
set_option = click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
                          help="Override a setting (repeatable); wins over the snapshot's gpustack-settings.")
rules_option = click.option("--rules", "rules_dir", type=click.Path(file_okay=False, path_type=Path),
                            help="Rules directory (default: the built-in rules).")


def chain_inputs(command: Callable[..., Any]) -> Callable[..., Any]:
    """SNAPSHOT..., --set, --rules: the inputs every rendering command takes."""
    return snapshot_args(set_option(rules_option(command)))


templates_option = click.option("--templates", "templates_dir", type=click.Path(file_okay=False, path_type=Path),
                                help="Templates directory (default: the built-in templates).")
