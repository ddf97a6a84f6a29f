"""Shared pytest configuration.

``--update-goldens`` makes the golden tests (tests/test_golden.py) rewrite their files under
``tests/golden/`` from the current output instead of comparing against them. Review the resulting
``git diff tests/golden`` before committing it.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="Rewrite the golden files in tests/golden/ from the current output "
        "(then review the diff) instead of comparing against them.",
    )


@pytest.fixture(scope="session")
def update_goldens(request: pytest.FixtureRequest) -> bool:
    """True when pytest runs with ``--update-goldens``."""
    return bool(request.config.getoption("--update-goldens"))
