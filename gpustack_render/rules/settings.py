"""Effective settings: rule defaults < the snapshot's settings object < ``--set``."""

from __future__ import annotations

from typing import Mapping, Sequence

from gpustack_render.errors import Problem, UserError, did_you_mean

_TRUE = {"true", "True", "TRUE", "t", "T", "1"}
_FALSE = {"false", "False", "FALSE", "f", "F", "0"}


def parse_bool(text: str) -> bool | None:
    """The settings boolean grammar (inputs.md §9); ``None`` when ``text`` is not a boolean."""
    text = text.strip()
    return True if text in _TRUE else False if text in _FALSE else None


def parse_overrides(pairs: Sequence[str], known: Mapping[str, bool]) -> dict[str, bool]:
    """``--set NAME=VALUE`` pairs; an unknown name or a non-boolean value is a usage error."""
    problems: list[Problem] = []
    out: dict[str, bool] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep:
            problems.append(Problem(f"--set {pair!r}: expected NAME=VALUE"))
        elif name not in known:
            problems.append(Problem(f"--set {name}: unknown setting",
                                    hint=did_you_mean(name, known) or f"known: {', '.join(sorted(known))}"))
        elif (parsed := parse_bool(value)) is None:
            problems.append(Problem(f"--set {name}: {value!r} is not a boolean (true/false)"))
        else:
            out[name] = parsed
    if problems:
        raise UserError(problems)
    return out


def effective_settings(defaults: Mapping[str, bool], snapshot_values: Mapping[str, str],
                       snapshot_origin: Mapping[str, tuple[str, str, str]], overrides: Mapping[str, bool]) -> dict[str, bool]:
    problems: list[Problem] = []
    settings = dict(defaults)
    for key, raw in snapshot_values.items():
        if key not in defaults:
            continue  # the operator stores more keys than the renderer reads
        parsed = parse_bool(raw)
        if parsed is None:
            file, obj, path = snapshot_origin[key]
            problems.append(Problem(f'"{raw}" is not a boolean', file=file, obj=obj, path=path))
        else:
            settings[key] = parsed
    if problems:
        raise UserError(problems)
    settings.update(overrides)
    return settings


def setting_sources(defaults: Mapping[str, bool], snapshot_values: Mapping[str, str],
                    snapshot_origin: Mapping[str, tuple[str, str, str]],
                    overrides: Mapping[str, bool]) -> dict[str, tuple[str, str]]:
    """Where each effective setting came from (for ``explain``): ``(source, detail)`` with source
    ``default``, ``snapshot`` (detail ``file: Kind/ns/name: data.key``) or ``--set``.

    Mirrors :func:`effective_settings` without changing it; call it only on inputs that function accepted.
    """
    sources = {name: ("default", "") for name in defaults}
    for key, raw in snapshot_values.items():
        if key in defaults and parse_bool(raw) is not None:
            sources[key] = ("snapshot", ": ".join(p for p in snapshot_origin.get(key, ("", "", "")) if p))
    for key in overrides:
        sources[key] = ("--set", "")
    return sources
