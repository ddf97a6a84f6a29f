"""Where the default rules and templates are: inside the installed wheel, or beside the package
in a source checkout (editable installs do not copy them)."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def _find(name: str) -> Path:
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    return _PACKAGE / "_data" / name


def default_rules_dir() -> Path:
    return _find("rules")


def default_templates_dir() -> Path:
    return _find("templates")
