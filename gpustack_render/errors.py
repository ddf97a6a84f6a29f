"""User-facing problems and the one place that formats them.

Every failure caused by input (snapshot, rules, templates, arguments) is a :class:`UserError`
carrying one or more :class:`Problem` objects, so that all problems found in one pass can be shown
at once and the CLI can map them to exit code 2 without a traceback; :func:`handle` is that one
mapping (a bug: exit 3), for every command and the in-process case runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

PROG = "gpustack-render"

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3


@dataclass(frozen=True, order=True)
class Problem:
    """One problem, printed compiler-style: ``file:line:col: error: object: path: message``."""

    message: str
    file: str = ""
    line: int | None = None
    column: int | None = None
    obj: str = ""
    path: str = ""
    hint: str = ""
    severity: str = "error"
    compiler_style: bool = False  # rule files: ``file:line:col: error: …`` like a compiler

    def location(self) -> str:
        parts = [self.file] if self.file else []
        if self.file and self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def format(self) -> str:
        """``file:line:col: error: path: msg`` for rule files, ``error: file:line: Kind/name: path: msg``
        for everything else (inputs.md §10)."""
        order = (self.location(), self.severity) if self.compiler_style else (self.severity, self.location())
        pieces = [p for p in (*order, self.obj, self.path) if p]
        text = ": ".join(pieces) + ": " + self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


@dataclass
class UserError(Exception):
    """Input the tool cannot work with; the job cannot be done (exit 2)."""

    problems: list[Problem] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(p.format() for p in self.problems)

    @classmethod
    def single(cls, message: str, **where: object) -> "UserError":
        return cls([Problem(message=message, **where)])  # type: ignore[arg-type]


class Diagnostics:
    """Collects warnings (stderr, never the exit code) in a deterministic order. ``place``, when
    set, may put where a warning's object came from in front of it (the snapshot file and line of
    a Node's label: gpustack_render.snapshot.place)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self.warnings: list[str] = []
        self.place: Callable[[str], str] | None = None

    def warn(self, message: str) -> None:
        if self.place is not None:
            message = self.place(message)
        if message not in self._seen:
            self._seen.add(message)
            self.warnings.append(message)

    def extend(self, messages: Iterable[str]) -> None:
        for message in messages:
            self.warn(message)


def did_you_mean(word: str, vocabulary: Iterable[str]) -> str:
    """A short suggestion for a misspelt closed-vocabulary word, or ``""``. (difflib is imported
    here: only an error needs it, and a render that has none does not pay for its import.)"""
    import difflib
    options = sorted(vocabulary)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if not close:
        lowered = {o.lower(): o for o in options}
        if word.lower() in lowered:
            close = [lowered[word.lower()]]
    return f"did you mean '{close[0]}'?" if close else ""


DEBUG = {"on": False}  # --debug: a bug's traceback is printed


def handle(action: Callable[[], int | None], diagnostics: Callable[[], Diagnostics | None],
           echo: Callable[[str], None], warn: Callable[[str], None]) -> tuple[int, bool]:
    """The one error handler, for every command and the in-process case runner: user errors become
    their one-line problems (exit 2), a bug one line asking for a report (exit 3, the traceback
    with ``--debug``). Returns the exit code and whether the action ran to its end; lines go to
    ``echo`` and the diagnostics' warnings to ``warn``, so a caller can collect them."""
    import click  # its exits and usage errors are click's to report

    try:
        code = action() or 0
    except UserError as err:
        flush(diagnostics(), warn)
        for problem in err.problems:
            echo(problem.format() if problem.compiler_style else f"{PROG}: {problem.format()}")
        return EXIT_USAGE, False
    except (click.exceptions.Exit, click.ClickException, SystemExit, KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as err:  # a bug: one line, traceback only with --debug
        if DEBUG["on"]:
            import traceback
            traceback.print_exc()
        echo(f"{PROG}: error: internal error: {type(err).__name__}: {err} "
             f"(run with --debug for a traceback and please report it)")
        return EXIT_INTERNAL, False
    flush(diagnostics(), warn)
    return code, True


def warning_text(text: str) -> str:
    return f"{PROG}: warning: {text}"


def note_text(text: str) -> str:
    return f"{PROG}: note: {text}"


def flush(diag: Diagnostics | None, warn: Callable[[str], None]) -> None:
    for warning in diag.warnings if diag else []:
        warn(warning)
