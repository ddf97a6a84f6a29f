"""Running a case's command: the argv it stands for (:func:`command_argv`, and parsed back), the
child-process invoker, and a run's outcome. The in-process invoker composes the pipeline, so it
lives in the package's ``__init__`` (the case runner's one composer)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from gpustack_render.casetest.case import ADMIT, Case
from gpustack_render.errors import PROG
from gpustack_render.rules.overlay import BUILT_IN

# (argv, cwd) -> (exit code, stdout, stderr)
Invoker = Callable[[Sequence[str], Path], "tuple[int, str, str]"]


def _rel(target: Path, cwd: Path) -> str:
    try:
        return os.path.relpath(target, cwd)
    except ValueError:  # another drive (Windows)
        return str(target)


PROGRAM = PROG  # the console script's name (a case run as `gpustack-render ...` rather than `python -m`)
BUILT_IN_RULES = BUILT_IN  # how a run with the built-in rules names them, as the overlay does


def rules_dir_for(case: Case, default_rules: Path | None = None) -> Path | None:
    """The rules a case runs with: its own ``rules:`` wins (a case about a rule edit carries it),
    else ``test --rules DIR`` (``default_rules``), else the built-in rules (``None``)."""
    return case.path / case.rules if case.rules is not None else default_rules


def rules_label(case: Case, cwd: Path, default_rules: Path | None = None) -> str:
    """What ``test`` prints per case: the rules directory relative to ``cwd``, or ``built-in``."""
    rules = rules_dir_for(case, default_rules)
    return BUILT_IN_RULES if rules is None else _rel(rules, cwd)


def command_argv(case: Case, cwd: Path, python: str = sys.executable,
                 default_rules: Path | None = None) -> list[str]:
    """``python -m gpustack_render <command> …``; ``python="gpustack-render"`` gives ``gpustack-render <command> …``."""
    argv = ([python] if Path(python).name == PROGRAM else [python, "-m", "gpustack_render"]) + [case.command]
    argv += [_rel(case.path / rel, cwd) for rel in case.snapshot]
    for item in case.set:
        argv += ["--set", item]
    rules = rules_dir_for(case, default_rules)
    if rules is not None:
        argv += ["--rules", _rel(rules, cwd)]
    if case.command == ADMIT:
        argv += ["--chain", case.chain]
        for rel in case.workloads:
            argv += ["--workloads", _rel(case.path / rel, cwd)]
        for item in case.reserve:
            argv += ["--reserve", item]
    argv += ["--format", "json"]
    return argv


def subprocess_invoker(argv: Sequence[str], cwd: Path) -> tuple[int, str, str]:
    proc = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


@dataclass
class _Argv:
    """An argv of :func:`command_argv`, parsed (``chain``, ``workloads`` and ``reserve``: ``admit`` only)."""
    command: str
    snapshots: list[str] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    rules: str | None = None
    fmt: str | None = None
    chain: str = "rendered"
    workloads: list[str] = field(default_factory=list)
    reserve: list[str] = field(default_factory=list)


_LIST_OPTIONS = {"--set": "sets", "--workloads": "workloads", "--reserve": "reserve"}
_VALUE_OPTIONS = {"--rules": "rules", "--format": "fmt", "--chain": "chain"}


def _parse_argv(argv: Sequence[str]) -> _Argv:
    """The argv :func:`command_argv` builds, parsed."""
    command, rest = _split_argv(argv)
    parsed = _Argv(command)
    i = 0
    while i < len(rest):
        arg = rest[i]
        if (arg in _LIST_OPTIONS or arg in _VALUE_OPTIONS) and i + 1 < len(rest):
            if arg in _LIST_OPTIONS:
                getattr(parsed, _LIST_OPTIONS[arg]).append(rest[i + 1])
            else:
                setattr(parsed, _VALUE_OPTIONS[arg], rest[i + 1])
            i += 2
            continue
        parsed.snapshots.append(arg)
        i += 1
    return parsed


def _split_argv(argv: Sequence[str]) -> tuple[str, list[str]]:
    """The argv :func:`command_argv` builds → (command, the arguments after it)."""
    args = list(argv)
    if "gpustack_render" in args:
        start = args.index("gpustack_render") + 1
    else:
        start = 1 if args and Path(args[0]).name == PROGRAM else 0
    return args[start], args[start + 1:]


@dataclass
class CaseRun:
    argv: list[str]
    exit_code: int
    stdout: str
    stderr: str


@dataclass
class CaseOutcome:
    case: Case
    run: CaseRun | None = None
    failures: list[str] = field(default_factory=list)
    updated: bool = False
    rules: str = BUILT_IN_RULES  # the rules directory it ran with, as printed

    @property
    def ok(self) -> bool:
        return not self.failures

    def report(self) -> str:
        lines = [f"case {self.case.name}: {self.case.description}"]
        if self.run is not None:
            lines.append("  command: " + " ".join(shlex.quote(a) for a in self.run.argv))
            lines.append(f"  rules: {self.rules}")
            lines.append(f"  exit code: {self.run.exit_code} (expected {self.case.expect_exit_code})")
        for failure in self.failures:
            lines += ["  " + line for line in failure.splitlines()]
        if self.run is not None and self.run.stderr.strip():
            lines.append("  stderr:")
            lines += ["    | " + line for line in self.run.stderr.rstrip().splitlines()[:40]]
        return "\n".join(lines)
