"""The compiler's state and helpers: meaning errors become positioned problems, origins are kept."""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, TypeVar

from gpustack_render.errors import Problem
from gpustack_render.rules import schema
from gpustack_render.rules.expressions import (FILTERS, Arithmetic, NameFormat, RuleMeaningError, compile_condition,
                                               compile_verdict, describe_condition)
from gpustack_render.rules.model import RuleCondition
from gpustack_render.rules.read import Document, Loc, position

T = TypeVar("T")


class _AnySetting(set[str]):
    """The setting names when the Settings file itself is broken: every name passes, so the other
    files' conditions are still checked for everything else (the Settings problem is reported)."""

    def __contains__(self, item: object) -> bool:
        return True


class Compiler:
    """Compiles validated models, turning meaning errors into positioned problems."""

    def __init__(self, docs: dict[str, Document], problems: list[Problem], setting_names: Iterable[str] | None) -> None:
        self.docs, self.problems = docs, problems
        self.origins: dict[str, str] = {}
        self.setting_refs: dict[str, tuple[str, ...]] = {}
        self.conditions: dict[str, RuleCondition] = {}
        self.setting_names: set[str] = set(setting_names) if setting_names is not None else _AnySetting()

    def at(self, kind: str, loc: Loc, fn: Callable[[], T]) -> T | None:
        """``fn()``, its meaning error reported at ``kind`` ``loc`` (and the entry's origin recorded)."""
        doc = self.docs[kind]
        line, _ = position(doc.data, loc)
        self.origins[f"{kind}:{'.'.join(map(str, loc))}"] = f"{doc.file}:{line}" if line else doc.file
        try:
            return fn()
        except RuleMeaningError as err:
            full = loc + err.subpath
            line, col = position(doc.data, full)
            self.problems.append(Problem(str(err), file=doc.file, line=line, column=col,
                                         path=".".join(map(str, full)), hint=err.hint))
        except re.error as err:
            line, col = position(doc.data, loc)
            self.problems.append(Problem(f"invalid regular expression: {err}", file=doc.file, line=line,
                                         column=col, path=".".join(map(str, loc))))
        return None

    def fail(self, kind: str, loc: Loc, message: str, hint: str = "", *, at_key: bool = False) -> None:
        doc = self.docs[kind]
        line, col = position(doc.data, loc, at_key=at_key)
        self.problems.append(Problem(message, file=doc.file, line=line, column=col,
                                     path=".".join(map(str, loc)), hint=hint))

    def origin(self, kind: str, loc: Loc) -> str:
        """The ``file:line`` of a rule entry (recorded for ``explain``)."""
        self.at(kind, loc, lambda: None)
        return self.origins[f"{kind}:{'.'.join(map(str, loc))}"]

    def cond(self, kind: str, loc: Loc, value: Any, facts: str | set[str]) -> Any:
        """A condition compiled against its scope's facts and the known settings (recorded for explain,
        with its text and verdict twin, once it compiled: the verdict reads only accepted trees)."""
        entry = f"{kind}:{'.'.join(map(str, loc))}"
        self.setting_refs[entry] = settings_named(value)
        compiled = self.at(kind, loc, lambda: compile_condition(value, facts, self.setting_names))
        if compiled is not None:
            setting = value.setting if isinstance(value, schema.SettingCondition) else None
            self.conditions[entry] = RuleCondition(describe_condition(value), compile_verdict(value), setting)
        return compiled

    def fmt(self, kind: str, loc: Loc, value: str, allowed: set[str]) -> NameFormat | None:
        return self.at(kind, loc, lambda: NameFormat.compile(value, allowed))

    def arithmetic(self, kind: str, loc: Loc, source: str, allowed: set[str],
                   samples: dict[str, tuple[Any, ...]]) -> Arithmetic | None:
        """Compile an expression, probe it on typical inputs and give it its rule position, so that a
        failure on the snapshot's data is a rule error at file:line (exit 2), never an internal error."""
        expr = self.at(kind, loc, lambda: Arithmetic.compile(source, allowed))
        if expr is None:
            return None
        line, col = position(self.docs[kind].data, loc)
        located = expr.located(self.docs[kind].file, line, col, ".".join(map(str, loc)))
        return self.at(kind, loc, lambda: located.probe(samples))


def settings_named(cond: Any) -> tuple[str, ...]:
    """The settings a condition model refers to, in order: ``explain`` names them, so no stage has to."""
    if cond is None:
        return ()
    if isinstance(cond, schema.SettingCondition):
        return (cond.setting,)
    if isinstance(cond, schema.NotCondition):
        return settings_named(cond.not_)
    members = getattr(cond, "all", None) or getattr(cond, "any", None) or []
    return tuple(dict.fromkeys(name for member in members for name in settings_named(member)))


_REGEX_SPECIAL = frozenset("\\.^$*+?{}[]|()")


def format_matcher(name_format: NameFormat, placeholder: str, hashed: str) -> tuple[str, re.Pattern[str]]:
    """A name format as a matcher (``^literal<placeholder>literal$``), so that recognising a name
    derives from the one format that writes it. ``hashed`` is the pattern of an ``fnv64a`` placeholder,
    ``placeholder`` that of any other. Returns the pattern's text (for messages) and the pattern."""
    text = "^"
    for literal, name, fn in name_format.parts:
        text += "".join("\\" + ch if ch in _REGEX_SPECIAL else ch for ch in literal)
        if name is not None:
            text += hashed if fn is FILTERS["fnv64a"] else placeholder
    text += "$"
    return text, re.compile(text)
