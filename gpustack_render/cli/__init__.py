"""Command line: parse arguments, call the pipeline, map results to exit codes. No logic here.

One module per command (``render_cmd`` holds ``render``, ``catalog`` and ``node-patches``);
``common`` is what they share, including the one error handler."""

from __future__ import annotations

import gc

# The cyclic collector is off while this package imports (click and the commands: tens of thousands
# of objects, none of them garbage), then back as it was: its passes over them cost a few
# milliseconds of every start, ``--help`` included. A command switches it off for its run
# (``common.run``); an importer that only imports keeps its own setting.
_COLLECTING = gc.isenabled()
gc.disable()

import os
import sys
from typing import Any, NoReturn

import click

from gpustack_render.cli.common import _closed_stdout, add_global_options, reset_switches
from gpustack_render.errors import PROG


class _Group(click.Group):
    """Resets the process-wide switches (--debug, -q, -v) for every invocation, so in-process
    callers (tests, the case runner) start each run from the defaults."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        reset_switches()
        return super().parse_args(ctx, args)

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        """As the process's own entry point, end without tearing down the snapshot's object graph
        (a tenth of a second at 10,000 Nodes): once stdout and stderr are flushed nothing is left
        to do. In-process callers (tests, the case runner) pass ``args`` or swap stdout, and get
        click's ordinary ``SystemExit``."""
        if args is not None or sys.stdout is not sys.__stdout__ or sys.stderr is not sys.__stderr__:
            return super().main(args, *rest, **kwargs)
        try:
            return super().main(args, *rest, **kwargs)
        except SystemExit as done:
            _exit_now(done.code)


def _exit_now(code: Any) -> NoReturn:
    if code is not None and not isinstance(code, int):  # sys.exit("message"): printed, status 1
        sys.stderr.write(f"{code}\n")
        code = 1
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _closed_stdout()
    except (OSError, ValueError):
        code = code or 1
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code or 0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="gpustack-render", prog_name=PROG)
def main() -> None:
    """Render GPUStack's worker NodeFeatures and Kueue chain from a cluster snapshot.

    SNAPSHOT is one or more files or directories (read recursively: *.yaml, *.yml, *.json) or -
    for standard input, as `kubectl get -o yaml|json` prints them. Exit codes: 0 success, 1 a
    negative answer, 2 the job could not be done, 3 an internal error (please report it).
    """


def _register() -> None:
    """Each command lives in its own module under ``gpustack_render.cli``."""
    from gpustack_render.cli import (admit_cmd, diff_cmd, explain_cmd, graph_cmd, lint_cmd, pin_cmd, render_cmd,
                                     schema_cmd, snapshot_cmd, summary_cmd, test_cmd, validate_cmd)
    for command in render_cmd.COMMANDS:
        main.add_command(command)
    for module in (diff_cmd, validate_cmd, snapshot_cmd, lint_cmd, explain_cmd, test_cmd, schema_cmd, pin_cmd,
                   graph_cmd, summary_cmd, admit_cmd):
        main.add_command(module.command)
    for command in (main, *main.commands.values()):
        add_global_options(command)


_register()
gc.freeze()  # what importing built lives as long as the process: later passes need not walk it
if _COLLECTING:
    gc.enable()
