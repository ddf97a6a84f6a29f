"""Shared pytest configuration: the ``cli`` fixture and the one golden-update switch.

``cli(*args, input=None, env=None, cwd=REPO)`` runs the CLI in this process (tests/cli_invoke.py)
and returns a :class:`cli_invoke.CliResult` (``exit_code``/``returncode``, ``stdout``, ``stderr``,
``stdout_bytes``; it also unpacks as ``code, out, err``).

Goldens: ``pytest --update-goldens`` or ``GPUSTACK_RENDER_UPDATE_GOLDENS=1`` (either one) makes
the golden tests (tests/golden/, fixtures/cases/*/expected.yaml) rewrite their files from the
current output instead of comparing against them; the fixture cases go through the same code path
as ``gpustack-render test --update``. Review ``git diff`` before committing.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Callable

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_invoke import CliResult, invoke  # noqa: E402

from gpustack_render.casetest import UPDATE_ENV, update_requested  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="Rewrite the golden files (tests/golden/, fixtures/cases/*/expected.yaml) from the current "
        f"output (then review the diff) instead of comparing against them; same as {UPDATE_ENV}=1.",
    )


def pytest_configure(config: pytest.Config) -> None:
    """``--update-goldens`` is the environment switch ``gpustack-render test`` reads, set for this run."""
    if config.getoption("--update-goldens"):
        os.environ[UPDATE_ENV] = "1"


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (test items, module data, compiled strategies) lives to the end:
    freezing it keeps the thousand-odd collections the in-process CLI runs trigger from walking it
    again each time (a third of the collector's time in this process)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def update_goldens() -> bool:
    """True when goldens are to be rewritten (``--update-goldens`` or ``GPUSTACK_RENDER_UPDATE_GOLDENS=1``)."""
    return update_requested()


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    """The CLI, in process: ``cli("render", "fixtures/demo", "--format", "json")``."""
    return invoke
