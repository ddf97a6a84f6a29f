"""CRD CEL rules (``x-kubernetes-validations``) evaluated as the API server evaluates them on a create.

The API server runs every rule of a CRD's structural schema with ``self`` bound to the value at the
rule's level (once per list item, once per map value), and turns a false result into a field error
carrying the rule's ``messageExpression`` (when it evaluates to a usable string), else its
``message``, else ``failed rule: <rule>``, at the rule's level plus its ``fieldPath``. This module
does the same with cel-python (``celpy``, pure Python, RE2 for ``matches``):

* each rule text is compiled once per process (:func:`compile_rule`, cached) and each CRD version's
  rules once into a :class:`CelPlan` that mirrors only the schema branches holding rules, so the
  thousands of NodeFeatures of a large render (their CRD has no rules) cost nothing;
* transition rules (they read ``oldSelf``, the object before an update) cannot apply to a create:
  they are counted and skipped, and the caller says so once;
* a rule cel-python cannot parse, or that calls a function neither cel-python nor
  :data:`K8S_FUNCTIONS` provides, is reported once as a note and skipped, never a crash;
* the Kubernetes CEL library functions the CRDs may use and cel-python lacks (cel-go's string
  extension, Kubernetes' list and regex libraries) are added through cel-python's extension
  mechanism: the ``functions`` mapping of ``Environment.program``, where a method call
  ``x.f(a)`` is looked up as ``f`` and called as ``f(x, a)``. Not provided (a rule using them is a
  note): ``quantity``, ``url``, ``ip``, ``cidr``, ``semver``, ``format``, optional types (``?.``);
* each distinct value is evaluated once per schema node (:class:`CelPlan` memo): interpreted CEL
  costs about a millisecond a rule, and a render repeats values (tolerations on every flavor).

cel-python does not type-check a rule before running it as the API server does when the CRD is
created; the CRDs this tool meets were accepted by an API server, so that check has been made.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterator

import celpy
from celpy import CELParseError, celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError, CELSyntaxError, CELUnsupportedError, base_functions
from lark.exceptions import LarkError

# cel-python logs evaluation details; without a handler Python's last-resort handler would print
# its warnings on stderr, which belongs to the tool's own diagnostics.
logging.getLogger("celpy").addHandler(logging.NullHandler())
logging.getLogger("celpy").propagate = False

Issue = tuple[list[Any], str]
# cel-python failing in itself (not a CEL error, which it returns as a value): its unsupported and
# syntax errors, lark's, and Python's from its evaluator (a deep expression's RecursionError, ...).
LIBRARY_ERRORS = (CELUnsupportedError, CELSyntaxError, CELParseError, LarkError, RecursionError, ArithmeticError,
                  LookupError, TypeError, ValueError, AttributeError)

# Macros and special forms cel-python evaluates itself (not looked up in the function mapping).
MACROS = frozenset({"has", "dyn", "map", "filter", "all", "exists", "exists_one", "reduce", "min"})
_FIELD_PATH_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(?:'((?:[^'\\]|\\.)*)'|(\d+))\]")


# --- Kubernetes CEL library functions cel-python does not have --------------------------------

def _error(message: str) -> CELEvalError:
    return CELEvalError(message)


def _str(value: str) -> celtypes.StringType:
    return celtypes.StringType(value)


def _char_at(text: str, index: int) -> Any:
    """cel-go strings ``charAt``: the character at ``index``; ``index == size`` gives ``''``."""
    if not 0 <= index <= len(text):
        return _error(f"index out of range: {index}")
    return _str(text[index:index + 1])


def _index_of(container: Any, item: Any, offset: int = 0) -> Any:
    """``indexOf``: a substring's position (cel-go strings, with optional offset) or, on a list,
    the first equal element's (Kubernetes lists library); ``-1`` when absent."""
    if isinstance(container, list):
        return celtypes.IntType(next((i for i, x in enumerate(container) if x == item), -1))
    if not 0 <= offset <= len(container):
        return _error(f"index out of range: {offset}")
    return celtypes.IntType(container.find(item, offset))


def _last_index_of(container: Any, item: Any, offset: int | None = None) -> Any:
    if isinstance(container, list):
        return celtypes.IntType(next((i for i in reversed(range(len(container))) if container[i] == item), -1))
    end = len(container) if offset is None else offset
    if not 0 <= end <= len(container):
        return _error(f"index out of range: {end}")
    return celtypes.IntType(container.rfind(item, 0, end + len(item)))


def _ascii(convert: Callable[[str], str]) -> Callable[[str], celtypes.StringType]:
    """``lowerAscii``/``upperAscii`` change ASCII letters only, as cel-go does."""
    def fn(text: str) -> celtypes.StringType:
        return _str("".join(convert(c) if c.isascii() else c for c in text))
    return fn


def _replace(text: str, old: str, new: str, limit: int = -1) -> celtypes.StringType:
    return _str(text.replace(old, new, limit if limit >= 0 else -1))


def _split(text: str, sep: str, limit: int = -1) -> Any:
    """cel-go ``split``: ``limit`` 0 gives an empty list, negative no limit."""
    if limit == 0:
        return celtypes.ListType()
    parts = text.split(sep, limit - 1) if limit > 0 else text.split(sep) if sep else list(text)
    return celtypes.ListType([_str(p) for p in parts])


def _substring(text: str, start: int, end: int | None = None) -> Any:
    stop = len(text) if end is None else end
    if not 0 <= start <= stop <= len(text):
        return _error(f"substring out of range: [{start}:{stop}] of {len(text)}")
    return _str(text[start:stop])


def _join(items: Any, sep: str = "") -> Any:
    if not all(isinstance(i, str) for i in items):
        return _error("join: list of strings expected")
    return _str(sep.join(items))


def _is_sorted(items: Any) -> Any:
    return celtypes.BoolType(all(a <= b for a, b in zip(items, items[1:])))


def _sum(items: Any) -> Any:
    total: Any = celtypes.IntType(0)
    for i, item in enumerate(items):
        total = item if i == 0 else total + item
    return total


def _max(items: Any) -> Any:
    if not items:
        return _error("max of an empty list")
    return max(items)


def _find(text: str, pattern: str) -> Any:
    """Kubernetes regex library ``find``: the first match (RE2, like ``matches``), or ``''``."""
    import re2
    try:
        match = re2.search(pattern, text)
    except re2.error as err:
        return _error(f"invalid regex: {err}")
    return _str(match.group(0) if match else "")


def _find_all(text: str, pattern: str, limit: int = -1) -> Any:
    import re2
    try:
        found = [m.group(0) for m in re2.finditer(pattern, text)]
    except re2.error as err:
        return _error(f"invalid regex: {err}")
    return celtypes.ListType([_str(f) for f in (found if limit < 0 else found[:limit])])


K8S_FUNCTIONS: dict[str, Callable[..., Any]] = {
    # cel-go ext strings (part of the Kubernetes CEL environment)
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _ascii(str.lower),
    "upperAscii": _ascii(str.upper),
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": lambda text: _str(text.strip()),
    "join": _join,
    # Kubernetes lists library (``min`` is a cel-python macro with the same meaning on lists)
    "isSorted": _is_sorted,
    "sum": _sum,
    "max": _max,
    # Kubernetes regex library
    "find": _find,
    "findAll": _find_all,
}
KNOWN_FUNCTIONS = frozenset(base_functions) | frozenset(K8S_FUNCTIONS) | MACROS


# --- compiling ----------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _environment() -> celpy.Environment:
    return celpy.Environment()


def _called_names(tree: Any) -> Iterator[str]:
    """Names of the functions and methods a parsed expression calls."""
    for node in tree.iter_subtrees():
        if node.data in ("member_dot_arg", "ident_arg", "dot_ident_arg"):
            token = node.children[1] if node.data == "member_dot_arg" else node.children[0]
            yield str(token)


def _reads_old_self(tree: Any) -> bool:
    return any(node.data == "ident" and str(node.children[0]) == "oldSelf" for node in tree.iter_subtrees())


@dataclass(frozen=True)
class Compiled:
    """A rule text compiled once: a program, or why it cannot be evaluated; transition rules
    are recognised and never run."""

    program: Any = None
    transition: bool = False
    problem: str = ""


@lru_cache(maxsize=None)
def compile_rule(text: str) -> Compiled:
    env = _environment()
    try:
        tree = env.compile(text)
    except (CELParseError, LarkError, RecursionError) as err:  # lark's own errors for some inputs too
        column = getattr(err, "column", None)
        return Compiled(problem=f"cannot be parsed (syntax error{f' at column {column}' if column else ''})")
    if _reads_old_self(tree):
        return Compiled(transition=True)
    unknown = sorted(set(_called_names(tree)) - KNOWN_FUNCTIONS)
    if unknown:
        return Compiled(problem=f"calls {', '.join(n + '()' for n in unknown)}, which this tool does not provide")
    try:
        return Compiled(program=env.program(tree, functions=K8S_FUNCTIONS))
    except LIBRARY_ERRORS as err:
        return Compiled(problem=f"cannot be compiled ({type(err).__name__}: {err})")


def _field_path(text: Any) -> list[Any] | None:
    """``fieldPath`` (``.a.b``, ``['key']``, ``[0]``) as path parts; ``None`` when malformed."""
    if not isinstance(text, str) or not text:
        return [] if not text else None
    parts: list[Any] = []
    pos = 0
    while pos < len(text):
        m = _FIELD_PATH_STEP.match(text, pos)
        if not m:
            return None
        name, key, index = m.groups()
        parts.append(name if name is not None else int(index) if index is not None else re.sub(r"\\(.)", r"\1", key))
        pos = m.end()
    return parts


@dataclass(frozen=True)
class Rule:
    """One evaluable rule of a schema node, with what the API server would say when it fails."""

    text: str
    program: Any
    message: str
    message_program: Any
    field_path: tuple[Any, ...]

    def check(self, value: Any, path: list[Any]) -> Iterator[Issue]:
        at = path + list(self.field_path)
        try:
            result = self.program.evaluate({"self": value})
        except CELEvalError as err:
            result = err
        if isinstance(result, CELEvalError):
            yield at, f"{_reason(result)} evaluating rule: {self.message}"
        elif not isinstance(result, celtypes.BoolType):
            yield at, f"rule did not evaluate to a bool (got {type(result).__name__}): {self.message}"
        elif not result:
            yield at, self._failure(value)

    def _failure(self, value: Any) -> str:
        """``messageExpression`` when it yields a non-empty one-line string, as the API server."""
        if self.message_program is not None:
            try:
                text = self.message_program.evaluate({"self": value})
            except CELEvalError:
                text = None
            if isinstance(text, str) and text.strip() and "\n" not in text:
                return str(text)
        return self.message


_NO_MEMBER = re.compile(r"no such member in mapping: '(.*)'\Z")


def _reason(err: CELEvalError) -> str:
    """cel-python's error text, in cel-go's words where they differ (``no such key: x``), as the
    API server prints ``<error> evaluating rule: <message>``."""
    first = str(err.args[0]) if err.args else ""
    missing = _NO_MEMBER.match(first)
    return f"no such key: {missing.group(1)}" if missing else first or type(err).__name__


@dataclass
class RuleNode:
    """A schema node that holds rules, or leads to one."""

    rules: list[Rule] = field(default_factory=list)
    properties: dict[str, "RuleNode"] = field(default_factory=dict)
    items: "RuleNode | None" = None
    values: "RuleNode | None" = None

    def empty(self) -> bool:
        return not (self.rules or self.properties or self.items or self.values)


@dataclass
class CelPlan:
    """Every rule of one CRD version's schema, compiled; what was skipped and why."""

    root: RuleNode | None
    where: str = ""
    transition_rules: int = 0
    notes: list[str] = field(default_factory=list)
    # (node, the value as canonical JSON) -> the node's problems relative to it. A render repeats
    # values (the same tolerations on every flavor); an interpreted CEL evaluation costs far more
    # than the key, so each distinct value is evaluated once per rule node.
    _memo: dict[tuple[int, str], list[Issue]] = field(default_factory=dict, repr=False)

    def issues(self, obj: dict[str, Any]) -> Iterator[Issue]:
        if self.root is not None:
            yield from self._walk(self.root, obj, [])

    def _walk(self, node: RuleNode, value: Any, path: list[Any]) -> Iterator[Issue]:
        if node.rules:
            for at, message in self._node_issues(node, value):
                yield path + at, message
        if isinstance(value, dict):
            for name, child in node.properties.items():
                if name in value:
                    yield from self._walk(child, value[name], path + [name])
            if node.values is not None:
                for key, item in value.items():
                    yield from self._walk(node.values, item, path + [str(key)])
        elif isinstance(value, list) and node.items is not None:
            for i, item in enumerate(value):
                yield from self._walk(node.items, item, path + [i])

    def _node_issues(self, node: RuleNode, value: Any) -> list[Issue]:
        key = (id(node), json.dumps(value, sort_keys=True, separators=(",", ":"), default=str))
        found = self._memo.get(key)
        if found is None:  # from the JSON text: YAML timestamps and the like arrive as strings, as in the API
            cel_value = json_to_cel(json.loads(key[1]))
            found = self._memo[key] = [issue for rule in node.rules for issue in self._checked(rule, cel_value)]
        return found

    def _checked(self, rule: Rule, value: Any) -> list[Issue]:
        """A failure inside cel-python itself (not a CEL error) is the tool's limit, not the
        object's problem: one note per rule, and the rule counts as passed."""
        try:
            return list(rule.check(value, []))
        except LIBRARY_ERRORS as err:  # cel-python failing in itself, never a traceback
            note = (f"{self.where}: CEL rule {rule.text!r} could not be evaluated by cel-python "
                    f"({type(err).__name__}); skipped")
            if note not in self.notes:
                self.notes.append(note)
            return []


def _schema_path(path: list[str]) -> str:
    return "".join(path) or "<root>"


def compile_schema(schema: dict[str, Any], where: str) -> CelPlan:
    """The rules of ``schema`` (an ``openAPIV3Schema``); ``where`` names the CRD version in notes."""
    plan = CelPlan(root=None, where=where)
    plan.root = _compile_node(schema, [], plan, where)
    return plan


def _compile_node(schema: Any, path: list[str], plan: CelPlan, where: str) -> RuleNode | None:
    if not isinstance(schema, dict):
        return None
    node = RuleNode()
    for spec in schema.get("x-kubernetes-validations") or ():
        rule = _compile_entry(spec, path, plan, where)
        if rule is not None:
            node.rules.append(rule)
    for name, sub in (schema.get("properties") or {}).items():
        child = _compile_node(sub, path + [f".{name}"], plan, where)
        if child is not None:
            node.properties[name] = child
    node.items = _compile_node(schema.get("items"), path + ["[*]"], plan, where)
    node.values = _compile_node(schema.get("additionalProperties"), path + ["[*]"], plan, where)
    return None if node.empty() else node


def _compile_entry(spec: Any, path: list[str], plan: CelPlan, where: str) -> Rule | None:
    text = spec.get("rule") if isinstance(spec, dict) else None
    if not isinstance(text, str):
        plan.notes.append(f"{where}: {_schema_path(path)}: a CEL rule without rule text was skipped")
        return None
    compiled = compile_rule(text)
    if compiled.transition:
        plan.transition_rules += 1
        return None
    if compiled.problem:
        plan.notes.append(f"{where}: {_schema_path(path)}: CEL rule {text!r} {compiled.problem}; not evaluated")
        return None
    message = str(spec.get("message") or "").strip() or f"failed rule: {text.strip()}"
    message_program = None
    if isinstance(spec.get("messageExpression"), str):
        expr = compile_rule(spec["messageExpression"])
        if expr.problem:
            plan.notes.append(f"{where}: {_schema_path(path)}: messageExpression {spec['messageExpression']!r} "
                              f"{expr.problem}; its message is used instead")
        message_program = expr.program
    steps = _field_path(spec.get("fieldPath"))
    if steps is None:
        plan.notes.append(f"{where}: {_schema_path(path)}: fieldPath {spec.get('fieldPath')!r} is not a "
                          f"relative path; errors are reported at the rule's level")
        steps = []
    return Rule(text, compiled.program, message, message_program, tuple(steps))

