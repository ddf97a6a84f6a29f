"""Command line: parse arguments, call the pipeline, map results to exit codes. No logic here.

One module per command (``render_cmd`` holds ``render``, ``catalog`` and ``node-patches``);
``common`` is what they share, including the one error handler."""

from __future__ import annotations

import click

from gpustack_render.cli.common import add_global_options, reset_switches
from gpustack_render.errors import PROG


class _Group(click.Group):
    """Resets the process-wide switches (--debug, -q, -v) for every invocation, so in-process
    callers (tests, the case runner) start each run from the defaults."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        reset_switches()
        return super().parse_args(ctx, args)


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
    from gpustack_render.cli import (diff_cmd, explain_cmd, graph_cmd, lint_cmd, pin_cmd, render_cmd, schema_cmd,
                                     snapshot_cmd, summary_cmd, test_cmd, validate_cmd)
    for command in render_cmd.COMMANDS:
        main.add_command(command)
    for module in (diff_cmd, validate_cmd, snapshot_cmd, lint_cmd, explain_cmd, test_cmd, schema_cmd, pin_cmd,
                   graph_cmd, summary_cmd):
        main.add_command(module.command)
    for command in (main, *main.commands.values()):
        add_global_options(command)


_register()
