"""Rule files and templates: read by ruamel.yaml's round-trip loader, with positions.

The one reader of the YAML an admin edits by hand (``rules/*.yaml``, ``templates/<Kind>.yaml``):
ruamel.yaml's round-trip loader, YAML 1.2 (an unquoted ``yes`` is a string, ``0777`` an int that
keeps its width), which also round-trips the files ``schema --rules`` rewrites. Every mapping and
sequence it builds remembers where it, each key, each value and each item start (``.lc``): the
``file:line:col`` of every message about a rule file or a template is read here, by
:func:`key_at`, :func:`value_at`, :func:`item_at` and :func:`start_of` (0-based, as ruamel's marks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError, YAMLStreamError

from gpustack_render.errors import Problem, UserError
from gpustack_render.yamlio import read_text

Position = tuple[int, int]  # 0-based line and column, as ruamel's marks


def load(path: Path, display: str) -> Any:
    """The one document of a rule file (or template), with positions (see :func:`parse`)."""
    return parse(read_text(path, display), display)


def parse(text: str, display: str) -> Any:
    """The one document of a rule file's (or template's) text, as ruamel's round-trip loader reads
    it; text that is not YAML is a problem at its ``file:line:col``."""
    try:
        return YAML(typ="rt").load(text)
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        raise UserError([Problem(f"invalid YAML: {err.problem or err.context}", file=display,
                                 line=mark.line + 1 if mark else None,
                                 column=mark.column + 1 if mark else None)]) from None
    except (YAMLError, YAMLStreamError, ValueError, LookupError, TypeError) as err:  # ruamel's unmarked errors:
        # a bad character (ReaderError), a tagged scalar its constructor fails on (`!!int x`, `!!bool x`)
        raise UserError([Problem(f"invalid YAML: {str(err).splitlines()[0]}", file=display)]) from None


def key_at(node: Any, key: Any) -> Position | None:
    """Where ``key`` of the mapping ``node`` starts (``None``: a mapping not read from a file)."""
    lc = getattr(node, "lc", None)
    return lc.key(key) if lc else None


def value_at(node: Any, key: Any) -> Position | None:
    """Where the value of ``key`` of the mapping ``node`` starts."""
    lc = getattr(node, "lc", None)
    return lc.value(key) if lc else None


def item_at(node: Any, index: int) -> Position | None:
    """Where item ``index`` (non-negative) of the sequence ``node`` starts."""
    lc = getattr(node, "lc", None)
    return lc.item(index) if lc else None


def start_of(node: Any) -> Position | None:
    """Where a mapping or sequence read from a file starts (its first key or item)."""
    lc = getattr(node, "lc", None)
    if lc is None or lc.line is None:
        return None
    return lc.line, lc.col or 0
