"""The one way tests run the CLI: in this process, through click's ``CliRunner`` on
``gpustack_render.cli.main`` (no new interpreter per call, which made the suite take minutes).

Tests take the ``cli`` fixture (tests/conftest.py); module-level helpers that cache a run
(``lru_cache``) import :func:`invoke` directly. Only ``tests/test_smoke.py`` spawns the real
console script, ``python -m gpustack_render``, the wheel and kubectl.

What a child process gave for free and an in-process run must restore:

* the process-wide switches (``--debug``, ``-q``/``-v``, ``--allow-empty``) are reset by the CLI
  group on every invocation (``cli/__init__._Group``);
* the commands turn the cyclic garbage collector off for their short run (``cli/common.run``):
  :func:`invoke` turns it back on, or the test process would grow without bound;
* ``sys.exit`` codes are caught by ``CliRunner`` and become ``exit_code``;
* the working directory (``cwd=``) and environment (``env=``) are set for the call only.
"""

from __future__ import annotations

import contextlib
import gc
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from click.testing import CliRunner

from gpustack_render.cli import main

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class CliResult:
    """What a run printed and how it ended; ``returncode`` too, so code written against
    ``subprocess.CompletedProcess`` reads the same."""

    exit_code: int
    stdout: str
    stderr: str
    stdout_bytes: bytes
    stderr_bytes: bytes

    @property
    def returncode(self) -> int:
        return self.exit_code

    @property
    def output(self) -> str:
        """stdout then stderr, for assertion messages (click's ``Result.output`` interleaves them)."""
        return self.stdout + self.stderr

    def __iter__(self) -> Iterator[object]:
        """``code, out, err = cli(...)``."""
        return iter((self.exit_code, self.stdout, self.stderr))


@contextlib.contextmanager
def _environment(env: Mapping[str, str | None] | None, replace: bool) -> Iterator[None]:
    """``env`` for the call only: overrides (``None`` removes a variable), or, with ``replace``,
    the whole environment as ``subprocess.run(env=...)`` would give it."""
    if env is None:
        yield
        return
    saved = dict(os.environ)
    try:
        if replace:
            os.environ.clear()
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def invoke(*args: object, input: str | bytes | None = None, env: Mapping[str, str | None] | None = None,
           replace_env: bool = False, cwd: str | Path | None = REPO) -> CliResult:
    """Run ``gpustack-render ARGS...`` in this process, from ``cwd`` (the repository root unless
    told), with ``input`` as standard input. An exception the CLI lets through (a bug in a click
    callback) propagates, so it is never mistaken for an exit code."""
    runner = CliRunner()
    try:
        with _environment(env, replace_env), contextlib.chdir(cwd or os.getcwd()):
            result = runner.invoke(main, [str(arg) for arg in args], input=input, catch_exceptions=False)
    finally:
        gc.enable()
    return CliResult(exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr,
                     stdout_bytes=result.stdout_bytes, stderr_bytes=result.stderr_bytes or b"")
