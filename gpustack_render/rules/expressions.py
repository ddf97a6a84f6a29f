"""The small expression languages of rule files, compiled once at load.

- :class:`NameFormat`: ``"gpustack--{gKey}-{os}"`` placeholders with optional filters
  (``{clusterQueue|fnv64a}``); placeholders and filters are closed vocabularies.
- :class:`Arithmetic`: a sandboxed Jinja expression (``capacity * M``) under ``StrictUndefined``,
  in the templates' :class:`~gpustack_render.sandbox.BoundedSandbox` (``**`` bounded).
- :class:`CompiledCondition`: structured conditions (``fact`` / ``setting`` / ``all`` / ``any`` /
  ``not``) turned into plain closures, because they run per Node on 10,000-node snapshots. Every
  fact a condition may name is declared once in :data:`FACTS`, with its type, where it is known and
  what it means, so that a condition that does not fit its fact is a load error, never a crash.
"""

from __future__ import annotations

import operator
import re
from typing import Any, Callable, Literal, Mapping

import msgspec
from jinja2 import StrictUndefined, TemplateSyntaxError, meta

from gpustack_render.errors import Problem, UserError, did_you_mean
from gpustack_render.k8s import fnv1a64_hex
from gpustack_render.sandbox import EXPRESSION_ERRORS, BoundedSandbox
from gpustack_render.rules import schema


class RuleMeaningError(ValueError):
    """A rule value is well-formed YAML of the right type but means nothing (with a hint)."""

    def __init__(self, message: str, hint: str = "", subpath: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.hint = hint
        self.subpath = subpath


FILTERS: dict[str, Callable[[str], str]] = {"fnv64a": fnv1a64_hex, "lower": str.lower}
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


class NameFormat(msgspec.Struct, frozen=True, eq=False):
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


_SANDBOX = BoundedSandbox(undefined=StrictUndefined)
# A result must fit a Kubernetes quantity or label value as the API server reads it (int64).
MAX_RESULT = 2 ** 63 - 1


class ArithmeticFailure(ValueError):
    """An expression failed on its input values (the rule's fault, never the renderer's)."""


class Arithmetic(msgspec.Struct, frozen=True, eq=False):
    """A sandboxed Jinja expression evaluated to a whole number.

    ``where`` is the rule's position (file, line, column, rule path), set once compiled, so that an
    expression that fails on the snapshot's data is reported as a rule error naming the rule file,
    the expression and its input values (exit 2), never as an internal error."""

    source: str
    _fn: Callable[..., Any]
    names: frozenset[str] = frozenset()
    where: tuple[str, int | None, int | None, str] = ("", None, None, "")

    def evaluate(self, **values: Any) -> int:
        """The whole-number result, or :class:`ArithmeticFailure` saying why there is none."""
        try:
            result = self._fn(**values)
        except EXPRESSION_ERRORS as err:  # sandboxed admin input failing on its data: the rule's fault
            raise ArithmeticFailure(f"failed: {err or type(err).__name__}") from None
        if isinstance(result, float) and result.is_integer():
            result = int(result)
        if isinstance(result, bool) or not isinstance(result, int):
            raise ArithmeticFailure(f"gave {result!r}, not a whole number")
        if abs(result) > MAX_RESULT:
            raise ArithmeticFailure(f"gave a number of {result.bit_length()} bits, over the int64 range of "
                                    f"a Kubernetes quantity")
        return result

    def __call__(self, **values: Any) -> int:
        try:
            return self.evaluate(**values)
        except ArithmeticFailure as err:
            file, line, column, path = self.where
            raise UserError([Problem(f"expression '{self.source}' {err} for {show_values(values, self.names)}",
                                     file=file, line=line, column=column, path=path,
                                     compiler_style=True)]) from None

    def located(self, file: str, line: int | None, column: int | None, path: str) -> "Arithmetic":
        return Arithmetic(self.source, self._fn, self.names, (file, line, column, path))

    def probe(self, samples: Mapping[str, tuple[Any, ...]]) -> "Arithmetic":
        """Evaluate on sample inputs at load (``lint``): the base sample (first value of each
        variable), then each variable through its samples with the others at their base. An
        expression that fails on a typical input (``L * vram / 3``, ``capacity / 0``, ``P ** M``)
        is a rule error at its file:line, not a failing render later."""
        used = sorted(self.names)
        base = {name: samples[name][0] for name in used}
        cases = [base] + [dict(base, **{name: value}) for name in used for value in samples[name][1:]]
        for values in cases:
            try:
                self.evaluate(**values)
            except ArithmeticFailure as err:
                raise RuleMeaningError(f"expression '{self.source}' {err} for {show_values(values, self.names)}",
                                       "inputs tried at load: an expression must give a whole number "
                                       "for every input") from None
        return self

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
        return cls(source, fn, frozenset(names))


def show_values(values: Mapping[str, Any], names: frozenset[str] | set[str]) -> str:
    """``L=1, vram=16384``: the inputs an expression read (all of them when it reads none)."""
    shown = [f"{k}={values[k]!r}" for k in sorted(values) if k in names] or \
        [f"{k}={v!r}" for k, v in sorted(values.items())]
    return ", ".join(shown) or "no input"


def check_replacement(pattern: re.Pattern[str], replacement: str) -> tuple[re.Pattern[str], str]:
    r"""A regex ``replace`` is a template: ``\9`` or ``\g<name>`` that the pattern has no group for
    would fail on the first match. Python checks the template without a match, so check it at load."""
    try:
        pattern.sub(replacement, "")
    except (re.error, IndexError) as err:
        raise RuleMeaningError(f"invalid replacement for this regex: {err}",
                               f"the regex has {pattern.groups} group(s)"
                               + (f" named {', '.join(sorted(pattern.groupindex))}" if pattern.groupindex
                                  else ""), ("replace",)) from None
    return pattern, replacement


# --- facts ----------------------------------------------------------------------------------------

FactType = Literal["bool", "int", "str"]

# Where conditions are read, and so which facts exist there (the engine computes them per place).
SCOPES: dict[str, str] = {
    "node": "Grouping managedLabel.stampWhen and cpuOnlyLabel.when (before the Node's managed state is known)",
    "flavor": "Grouping flavor.cpu.contributes and flavor.*.pinCpuOnly",
    "accelerator": "Grouping flavor.accelerated.contributes (once per accelerator key of the Node)",
    "queue": "Queues admissionChecks[].when",
    "lifecycle": "Lifecycle stopPolicy[].when, save[].when and warnings[].when",
}


class Fact(msgspec.Struct, frozen=True, eq=False):
    """A fact a condition may name: its type, where it is known, and what it means (docs/rules.md)."""

    name: str
    type: FactType
    scopes: frozenset[str]
    meaning: str
    values: tuple[str, ...] = ()  # a str fact's possible values ("" included); () = any text

    def describe_type(self) -> str:
        if self.type == "str" and self.values:
            return "one of " + ", ".join(f'"{v}"' for v in self.values)
        return {"bool": "true/false", "int": "whole number", "str": "text"}[self.type]


_NODE = frozenset({"node", "flavor", "accelerator"})
_MANAGED = frozenset({"flavor", "accelerator"})
_LIFE = frozenset({"lifecycle"})
STOP_POLICIES = ("", "None", "Hold", "HoldAndDrain")

FACTS: dict[str, Fact] = {f.name: f for f in (
    Fact("hasAccelerator", "bool", _NODE, "the Node shows an accelerator: the acceleratable label is true or it "
         "has an accelerator key label"),
    Fact("cpuCount", "int", _NODE, "the Node's status.capacity.cpu, rounded up (0 when absent)"),
    Fact("managed", "bool", _MANAGED, "the Node's converged managed label (after the NodeFeature stamp) is true"),
    Fact("hasOsArch", "bool", _MANAGED, "the Node has both an os and an arch label"),
    Fact("acceleratorCount", "int", frozenset({"accelerator"}),
         "the cards of this accelerator key (its .count label; 0 when absent or not a number)"),
    Fact("acceleratable", "bool", frozenset({"queue", "lifecycle"}), "the pool is an accelerated one"),
    Fact("queueExists", "bool", _LIFE, "the snapshot has the ClusterQueue"),
    Fact("queueDeleting", "bool", _LIFE, "the snapshot's ClusterQueue has a deletionTimestamp"),
    Fact("instanceTypeDeleting", "bool", _LIFE, "the pool's InstanceType is being deleted"),
    Fact("inactive", "bool", _LIFE, "the pool's InstanceType has spec.inactive: true"),
    Fact("noFlavors", "bool", _LIFE, "no rendered flavor selects the pool"),
    Fact("hasGroups", "bool", _LIFE, "the plan has resource groups (rendered flavors or groups kept from the "
         "snapshot)"),
    Fact("carriesQuota", "bool", _LIFE, "the snapshot's ClusterQueue has a nominalQuota above 0"),
    Fact("currentStopPolicy", "str", _LIFE, "the snapshot's ClusterQueue spec.stopPolicy (\"\" when none)",
         STOP_POLICIES),
    Fact("drained", "bool", _LIFE, "currentStopPolicy is HoldAndDrain"),
    Fact("adminStopped", "bool", _LIFE, "currentStopPolicy is Hold or HoldAndDrain and the queue carries no "
         "renderer marker"),
    Fact("hasWorkloads", "bool", _LIFE, "the queue's status shows reserving or admitted workloads"),
    Fact("savedStopPolicy", "str", _LIFE, "the savedStopPolicy marker's value on the queue (\"\" when none)"),
    Fact("inactiveHeld", "bool", _LIFE, "the queue carries the inactiveHold marker"),
    Fact("planRefused", "bool", _LIFE, "flavors are selected but the plan is refused"),
)}


def facts_in(scope: str) -> set[str]:
    """The fact names known where conditions of ``scope`` are read."""
    return {name for name, fact in FACTS.items() if scope in fact.scopes}


Facts = Mapping[str, Any]
Settings = Mapping[str, bool]
CompiledCondition = Callable[[Facts, Settings], bool]

_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "Gt": operator.gt, "Ge": operator.ge, "Lt": operator.lt, "Le": operator.le,
    "Eq": operator.eq, "Ne": operator.ne,
}
_ORDERING = ("Gt", "Ge", "Lt", "Le")


def _value_type(value: Any) -> FactType:
    return "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "str"


def _check_fact(cond: schema.FactCondition, fact: Fact, subpath: tuple[str | int, ...]) -> None:
    """The operator and value must fit the fact's type: a mismatch would be a TypeError per Node
    (``cpuCount Gt "0"``) or a condition that can never hold (``currentStopPolicy Eq Hld``)."""
    if cond.operator is None:
        return
    if cond.operator in _ORDERING and fact.type != "int":
        raise RuleMeaningError(f"operator {cond.operator} does not fit fact '{fact.name}' ({fact.describe_type()})",
                               "use Eq or Ne" if fact.type == "str" else
                               f"write {{fact: {fact.name}}} or {{not: {{fact: {fact.name}}}}}",
                               subpath + ("operator",))
    value = cond.value
    if _value_type(value) != fact.type:
        hint = ""
        if fact.type == "int" and isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            hint = f"write {value.strip()} without quotes"
        elif fact.type == "bool" and isinstance(value, str) and value.lower() in ("true", "false"):
            hint = f"write {value.lower()} without quotes"
        elif fact.type == "str" and not isinstance(value, str):
            hint = f'quote it: "{str(value).lower() if isinstance(value, bool) else value}"'
        raise RuleMeaningError(f"value {value!r} does not fit fact '{fact.name}' ({fact.describe_type()})", hint,
                               subpath + ("value",))
    if fact.values and value not in fact.values:
        raise RuleMeaningError(f"value {value!r} is not a possible value of fact '{fact.name}' "
                               f"({fact.describe_type()})", did_you_mean(str(value), [v for v in fact.values if v]),
                               subpath + ("value",))


def compile_condition(cond: schema.Condition, scope: str | set[str], settings: set[str],
                      subpath: tuple[str | int, ...] = ()) -> CompiledCondition:
    """Compile a validated condition read in ``scope`` (a key of :data:`SCOPES`, or the fact names
    themselves: an empty set for a condition over settings only); an unknown fact or setting, or an
    operator or value that does not fit the fact, raises with its sub-path."""
    facts = facts_in(scope) if isinstance(scope, str) else set(scope)
    if isinstance(cond, schema.FactCondition):
        name = cond.fact
        if name not in facts:
            if name in FACTS and facts:
                raise RuleMeaningError(f"fact '{name}' is not known here", f"known here: {', '.join(sorted(facts))}",
                                       subpath + ("fact",))
            raise RuleMeaningError(f"unknown fact '{name}'", did_you_mean(name, facts) or (
                f"allowed: {', '.join(sorted(facts))}" if facts else "only settings are known here"),
                subpath + ("fact",))
        if cond.operator is None:
            if cond.value is not None:
                raise RuleMeaningError("'value' needs an 'operator'", subpath=subpath + ("value",))
            return lambda f, s: bool(f[name])
        if cond.value is None:
            raise RuleMeaningError(f"operator {cond.operator} needs a 'value'", subpath=subpath)
        if name in FACTS:
            _check_fact(cond, FACTS[name], subpath)
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


# --- verdicts: the same condition tree, compiled to a value that carries its reason ---------------

def _shown(value: Any) -> str:
    import json
    return ("true" if value else "false") if isinstance(value, bool) else json.dumps(value, ensure_ascii=False)


class Leaf(msgspec.Struct, frozen=True, eq=False):
    """One fact or setting a condition read: its text (``cpuCount Gt 0``), the value read, the result."""

    text: str
    read: Any
    value: bool


class Verdict(msgspec.Struct, frozen=True, eq=False):
    """A condition's value with why: ``reason`` names the leaves that decided it (``cpuCount is 0,
    needs Gt 0``), ``leaves`` every fact and setting it read."""

    value: bool
    reason: str
    leaves: tuple[Leaf, ...]
    text: str  # the condition in one line: all(managed, cpuCount Gt 0, not(hasAccelerator))


CompiledVerdict = Callable[[Facts, Settings], Verdict]


def describe_condition(cond: schema.Condition | None) -> str:
    """A compact one-line rendering of a condition: ``all(managed, cpuCount Gt 0, not(hasAccelerator))``."""
    if cond is None:
        return "always"
    if isinstance(cond, schema.FactCondition):
        return cond.fact if cond.operator is None else f"{cond.fact} {cond.operator} {_shown(cond.value)}"
    if isinstance(cond, schema.SettingCondition):
        return f"setting {cond.setting}"
    if isinstance(cond, schema.NotCondition):
        return f"not({describe_condition(cond.not_)})"
    key = "all" if isinstance(cond, schema.AllCondition) else "any"
    return f"{key}({', '.join(describe_condition(c) for c in getattr(cond, key))})"


def compile_verdict(cond: schema.Condition | None) -> CompiledVerdict:
    """The verdict twin of :func:`compile_condition`, over a tree that compile_condition accepted
    (so facts, settings and operators are known): the same operators, so the value is the boolean
    closure's; used only when the evaluator records (``explain``)."""
    text = describe_condition(cond)
    inner = _verdict_parts(cond)

    def run(facts: Facts, settings: Settings) -> Verdict:
        value, why, leaves = inner(facts, settings, True)
        return Verdict(value, "; ".join(why), tuple(leaves), text)
    return run


_Parts = Callable[[Facts, Settings, bool], tuple[bool, list[str], list[Leaf]]]


def _verdict_parts(cond: schema.Condition | None) -> _Parts:
    """(value, the reasons it is not ``want`` — the deciding leaves in words —, every leaf read)."""
    if cond is None:
        return lambda f, s, want: (True, [] if want else ["the rule has no condition (always true)"], [])
    if isinstance(cond, schema.FactCondition):
        name, op_name, wanted_value = cond.fact, cond.operator, cond.value
        op = _OPERATORS[op_name] if op_name is not None else None
        text = describe_condition(cond)

        def fact(f: Facts, s: Settings, want: bool) -> tuple[bool, list[str], list[Leaf]]:
            read = f[name]
            value = bool(read) if op is None else bool(op(read, wanted_value))
            needs = f"{op_name} {_shown(wanted_value)}" if op_name else "true"
            if not want:
                needs = f"not {needs}" if op_name else "false"
            why = [] if value == want else [f"{name} is {_shown(read)}, needs {needs}"]
            return value, why, [Leaf(text, read, value)]
        return fact
    if isinstance(cond, schema.SettingCondition):
        setting = cond.setting

        def setting_leaf(f: Facts, s: Settings, want: bool) -> tuple[bool, list[str], list[Leaf]]:
            value = bool(s[setting])
            why = [] if value == want else [f"setting {setting} is {_shown(s[setting])}, needs {_shown(want)}"]
            return value, why, [Leaf(f"setting {setting}", s[setting], value)]
        return setting_leaf
    if isinstance(cond, schema.NotCondition):
        inner = _verdict_parts(cond.not_)

        def negate(f: Facts, s: Settings, want: bool) -> tuple[bool, list[str], list[Leaf]]:
            value, why, leaves = inner(f, s, not want)
            return not value, why, leaves
        return negate
    is_all = isinstance(cond, schema.AllCondition)
    members = [_verdict_parts(c) for c in (cond.all if is_all else cond.any)]  # type: ignore[union-attr]

    def group(f: Facts, s: Settings, want: bool) -> tuple[bool, list[str], list[Leaf]]:
        results = [m(f, s, want) for m in members]
        value = all(r[0] for r in results) if is_all else any(r[0] for r in results)
        leaves = [leaf for r in results for leaf in r[2]]
        if value == want:
            return value, [], leaves
        if is_all == want:  # all failed (some member false) / any held when it should not (some true)
            return value, [w for r in results if r[0] != want for w in r[1]], leaves
        return value, ["; and ".join(p for p in ("; ".join(r[1]) for r in results) if p)], leaves
    return group
