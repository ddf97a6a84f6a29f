"""The small expression languages of rule files, compiled once at load.

- :class:`NameFormat`: ``"gpustack--{gKey}-{os}"`` placeholders with optional filters
  (``{clusterQueue|fnv64a}``); placeholders and filters are closed vocabularies.
- :class:`Arithmetic`: a sandboxed Jinja expression (``capacity * M``) under ``StrictUndefined``.
- :class:`CompiledCondition`: structured conditions (``fact`` / ``setting`` / ``all`` / ``any`` /
  ``not``) turned into plain closures, because they run per Node on 10,000-node snapshots.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from jinja2 import StrictUndefined, TemplateSyntaxError, meta
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.sandbox import SandboxedEnvironment

from gpustack_render.rules import schema
from gpustack_render.errors import did_you_mean
from gpustack_render.k8s import fnv1a64_hex


class RuleMeaningError(ValueError):
    """A rule value is well-formed YAML of the right type but means nothing (with a hint)."""

    def __init__(self, message: str, hint: str = "", subpath: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.hint = hint
        self.subpath = subpath


FILTERS: dict[str, Callable[[str], str]] = {"fnv64a": fnv1a64_hex, "lower": str.lower}
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class NameFormat:
    """A compiled name format; ``render`` is a tight loop over literal and placeholder parts."""

    source: str
    parts: tuple[tuple[str, str | None, Callable[[str], str] | None], ...]

    @property
    def placeholders(self) -> set[str]:
        return {name for _, name, _ in self.parts if name}

    def render(self, values: Mapping[str, Any]) -> str:
        out: list[str] = []
        for literal, name, fn in self.parts:
            out.append(literal)
            if name is not None:
                text = str(values[name])
                out.append(fn(text) if fn else text)
        return "".join(out)

    @classmethod
    def compile(cls, source: str, allowed: set[str]) -> "NameFormat":
        parts: list[tuple[str, str | None, Callable[[str], str] | None]] = []
        pos = 0
        for match in _PLACEHOLDER.finditer(source):
            name, _, filter_name = match.group(1).partition("|")
            name, filter_name = name.strip(), filter_name.strip()
            if name not in allowed:
                raise RuleMeaningError(f"unknown placeholder '{name}'", did_you_mean(name, allowed)
                                       or f"allowed: {', '.join(sorted(allowed))}")
            fn = None
            if filter_name:
                if filter_name not in FILTERS:
                    raise RuleMeaningError(f"unknown filter '{filter_name}'",
                                           did_you_mean(filter_name, FILTERS) or
                                           f"allowed: {', '.join(sorted(FILTERS))}")
                fn = FILTERS[filter_name]
            parts.append((source[pos:match.start()], name, fn))
            pos = match.end()
        tail = source[pos:]
        if "{" in tail or "}" in tail or any("{" in lit or "}" in lit for lit, _, _ in parts):
            raise RuleMeaningError("unbalanced '{' or '}' in name format")
        parts.append((tail, None, None))
        return cls(source, tuple(parts))


_SANDBOX = SandboxedEnvironment(undefined=StrictUndefined)


@dataclass(frozen=True)
class Arithmetic:
    """A sandboxed Jinja expression evaluated to an integer."""

    source: str
    _fn: Callable[..., Any]

    def __call__(self, **values: Any) -> int:
        try:
            result = self._fn(**values)
        except (UndefinedError, SecurityError, TypeError, ArithmeticError) as err:
            raise ValueError(f"expression '{self.source}' failed: {err}") from None
        if isinstance(result, bool) or not isinstance(result, int):
            if isinstance(result, float) and result.is_integer():
                return int(result)
            raise ValueError(f"expression '{self.source}' gave {result!r}, not a whole number")
        return result

    @classmethod
    def compile(cls, source: str, allowed: set[str]) -> "Arithmetic":
        try:
            names = meta.find_undeclared_variables(_SANDBOX.parse("{{ " + source + " }}"))
            fn = _SANDBOX.compile_expression(source, undefined_to_none=False)
        except TemplateSyntaxError as err:
            raise RuleMeaningError(f"expression syntax error: {err.message}") from None
        for name in sorted(names - allowed):
            raise RuleMeaningError(f"unknown variable '{name}' in expression",
                                   did_you_mean(name, allowed) or f"allowed: {', '.join(sorted(allowed))}")
        return cls(source, fn)


Facts = Mapping[str, Any]
Settings = Mapping[str, bool]
CompiledCondition = Callable[[Facts, Settings], bool]

_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "Gt": operator.gt, "Ge": operator.ge, "Lt": operator.lt, "Le": operator.le,
    "Eq": operator.eq, "Ne": operator.ne,
}


def compile_condition(cond: schema.Condition, facts: set[str], settings: set[str],
                      subpath: tuple[str | int, ...] = ()) -> CompiledCondition:
    """Compile a validated condition; unknown fact or setting names raise with their sub-path."""
    if isinstance(cond, schema.FactCondition):
        name = cond.fact
        if name not in facts:
            raise RuleMeaningError(f"unknown fact '{name}'", did_you_mean(name, facts) or
                                   f"allowed: {', '.join(sorted(facts))}", subpath + ("fact",))
        if cond.operator is None:
            if cond.value is not None:
                raise RuleMeaningError("'value' needs an 'operator'", subpath=subpath + ("value",))
            return lambda f, s: bool(f[name])
        if cond.value is None:
            raise RuleMeaningError(f"operator {cond.operator} needs a 'value'", subpath=subpath)
        op, value = _OPERATORS[cond.operator], cond.value
        return lambda f, s: op(f[name], value)
    if isinstance(cond, schema.SettingCondition):
        name = cond.setting
        if name not in settings:
            raise RuleMeaningError(f"unknown setting '{name}'", did_you_mean(name, settings) or
                                   f"allowed: {', '.join(sorted(settings))}", subpath + ("setting",))
        return lambda f, s: bool(s[name])
    if isinstance(cond, schema.NotCondition):
        inner = compile_condition(cond.not_, facts, settings, subpath + ("not",))
        return lambda f, s: not inner(f, s)
    key = "all" if isinstance(cond, schema.AllCondition) else "any"
    members = [compile_condition(c, facts, settings, subpath + (key, i))
               for i, c in enumerate(getattr(cond, key))]
    if key == "all":
        return lambda f, s: all(m(f, s) for m in members)
    return lambda f, s: any(m(f, s) for m in members)


def always(_facts: Facts, _settings: Settings) -> bool:
    return True
