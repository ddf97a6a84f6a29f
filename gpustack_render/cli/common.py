"""What every command shares: the one error handler (exit codes), stdout writing, common options."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

import click

from gpustack_render.errors import DEBUG, PROG, Diagnostics, flush, handle, note_text, warning_text

# -q/--quiet: -1 (errors only), default 0, -v/--verbose: 1 (stage timings). Set by the CLI group.
VERBOSITY = {"level": 0}
ALLOW_EMPTY = {"on": False}


def run(action: Callable[[], int | None], diagnostics: Callable[[], Diagnostics | None] = lambda: None) -> None:
    """A command's end through :func:`handle`, as an exit; a closed stdout is a quiet end."""
    # A snapshot is one large, acyclic object graph that lives for the whole (short) run: the
    # cyclic collector would rescan it on every generation-2 pass and triple the run time.
    gc.disable()
    try:
        code, finished = handle(action, diagnostics, lambda line: click.echo(line, err=True), warn_line)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        _closed_stdout()
    if finished:
        report_timings()
    sys.exit(code)


def _closed_stdout() -> NoReturn:
    """``render | head``: the reader went away. End quietly, as kubectl does on SIGPIPE (exit 141);
    stdout is pointed at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    os._exit(141)


def command_body(body: Callable[[dict[str, Any]], int | None]) -> None:
    """Run a command body; whatever context it stores under ``"ctx"`` supplies the warnings."""
    state: dict[str, Any] = {}
    run(lambda: body(state), lambda: state["ctx"].diagnostics if "ctx" in state else None)


def quiet() -> bool:
    return VERBOSITY["level"] < 0


def verbose() -> bool:
    return VERBOSITY["level"] > 0


def warn_line(text: str) -> None:
    """One diagnostic line on stderr (``gpustack-render: warning: …``); silenced by ``-q``."""
    if not quiet():
        click.echo(warning_text(text), err=True)


def note_line(text: str) -> None:
    """A ``note:`` on stderr: what was not done and why; silenced by ``-q`` like warnings."""
    if not quiet():
        click.echo(note_text(text), err=True)


def info_line(text: str) -> None:
    """A ``-v`` line on stderr (stage timings, summaries)."""
    if verbose():
        click.echo(f"{PROG}: {text}", err=True)


def report_timings() -> None:
    """With ``-v``: how long each pipeline stage took (gpustack_render.timing)."""
    from gpustack_render import timing
    if verbose() and timing.STAGES:
        for text in timing.NOTES:
            info_line(text)
        info_line("timing: " + ", ".join(f"{name} {seconds:.3f}s" for name, seconds in timing.STAGES)
                  + f"; total {timing.elapsed():.3f}s")


def write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


snapshot_args = click.argument("snapshot", nargs=-1, required=True, metavar="SNAPSHOT...")
set_option = click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
                          help="Override a setting (repeatable); wins over the settings object in the snapshot.")
rules_option = click.option("--rules", "rules_dir", type=click.Path(file_okay=False, path_type=Path),
                            help="Rules directory, an overlay over the built-in rules: each file replaces the built-in "
                                 "file of its kind, the others stay built-in (rules.yaml with inherit: false: "
                                 "a full copy). Default: the built-in rules.")


def _set_allow_empty(_ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    ALLOW_EMPTY["on"] = value


allow_empty_option = click.option(
    "--allow-empty", is_flag=True, expose_value=False, callback=_set_allow_empty,
    help="Accept a snapshot without Nodes (renders the empty chain; applied with pruning, it deletes "
         "every flavor and queue).")


def allow_empty() -> bool:
    """Whether this invocation passed ``--allow-empty`` (for ``pipeline.prepare``)."""
    return ALLOW_EMPTY["on"]


def prepare(snapshot: Sequence[str], sets: Sequence[str], rules_dir: Path | None) -> Any:
    """``pipeline.prepare`` with this invocation's ``--allow-empty``."""
    from gpustack_render import pipeline
    return pipeline.prepare(snapshot, sets, rules_dir, allow_empty=allow_empty())


def chain_inputs(command: Callable[..., Any]) -> Callable[..., Any]:
    """SNAPSHOT..., --set, --rules, --allow-empty: the inputs every rendering command takes."""
    return snapshot_args(set_option(rules_option(allow_empty_option(command))))


templates_option = click.option("--templates", "templates_dir", type=click.Path(file_okay=False, path_type=Path),
                                help="Templates directory, an overlay over the built-in templates: a <Kind>.yaml "
                                     "replaces that kind's template only. Default: the built-in templates.")


def reset_switches() -> None:
    from gpustack_render import timing
    DEBUG["on"] = False
    VERBOSITY["level"] = 0
    ALLOW_EMPTY["on"] = False
    timing.reset()


def _set_debug(_ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        DEBUG["on"] = True


def _set_level(level: int) -> Callable[[click.Context, click.Parameter, bool], None]:
    def callback(_ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            VERBOSITY["level"] = level
    return callback


def add_global_options(command: click.Command) -> None:
    """``--debug``, ``-q`` and ``-v`` work before or after the subcommand: the group and every
    command carry them, and each only sets the process-wide switch it names."""
    names = {opt for param in command.params for opt in getattr(param, "opts", [])}
    extra = [click.Option(["--debug"], is_flag=True, expose_value=False, is_eager=True, callback=_set_debug,
                          help="Show a traceback for internal errors."),
             click.Option(["-q", "--quiet"], is_flag=True, expose_value=False, is_eager=True,
                          callback=_set_level(-1), help="Print errors only (no warnings or notes)."),
             click.Option(["-v", "--verbose"], is_flag=True, expose_value=False, is_eager=True,
                          callback=_set_level(1), help="Also print stage timings and a summary on stderr.")]
    command.params.extend(option for option in extra if not set(option.opts) & names)


class FormatChoice(click.Choice):
    """``--format`` choices; ``yml`` is read as ``yaml`` (as kubectl users type it) without being
    listed in ``--help``."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.lower() == "yml" and "yaml" in self.choices:
            value = "yaml"
        return super().convert(value, param, ctx)
