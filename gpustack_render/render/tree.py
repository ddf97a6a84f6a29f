"""A template is a YAML document of its kind whose values may be jinja expressions; it is compiled
once, at load, into one Python function that builds the object from a plan item (``obj``).

The language (README "Templates"):

- a string that is exactly one ``{{ expr }}`` takes the expression's value (a string, number,
  boolean, null, mapping or list, copied as data: mappings by sorted key, tuples as lists);
- a string with text around its expressions is that text with each value written as a string;
- a value that is ``omit`` (``{{ omit }}``, ``{{ x if x else omit }}``, ``{{ x or omit }}``) leaves its
  key or its list item out;
- directives are keys of a mapping that start with ``$``: ``$if: EXPR`` keeps the entry (or list
  item) only when the expression is true, ``$else: VALUE`` is the value when it is not, ``$for:
  NAME[, NAME] in EXPR [if EXPR]`` repeats a list item once per element (in a mapping: its entries,
  merged), and ``$value: VALUE`` is what the entry or item is instead of the mapping's other keys.

Everything else is YAML as written. Expressions are compiled by expr.py into the same sandbox the
rules use; every statement of the generated function that evaluates one is mapped back to the
template's ``line:col``, so an expression that fails on the data is reported there (errors.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Sequence

from jinja2 import TemplateError, TemplateSyntaxError, nodes
from jinja2.runtime import Context, new_context
from jinja2.sandbox import SandboxedEnvironment

from gpustack_render.errors import Problem, UserError
from gpustack_render.sandbox import EXPRESSION_ERRORS as SANDBOX_ERRORS, TimeBudgetExceeded
from gpustack_render.render.expr import ExprWriter, Names, Unsupported, join_text, parse_expression
from gpustack_render.rulesyaml import item_at, key_at, value_at
from gpustack_render.render.values import OMIT, NotData, Values

DIRECTIVES = ("$if", "$else", "$for", "$value")
# Data maps: sorted by key, values as strings (what kubectl keeps of labels and annotations).
DATA_MAPS: dict[str, tuple[str, ...]] = {"metadata": ("labels", "annotations"), "spec": ("labels", "nodeLabels")}
_CODE_FILE = "<template {}>"
_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent) + "/"
_FOR = re.compile(r"\A\s*([A-Za-z_][A-Za-z_0-9]*(?:\s*,\s*[A-Za-z_][A-Za-z_0-9]*)*)\s+in\s+(.+?)\s*\Z", re.S)


# What an expression can raise on the data (anything else raised in a builder is a bug of ours): the
# sandbox's list, plus a value that is not data, but not RecursionError: a build that recurses too
# deeply is reported as a bug of ours (exit 3), as it always was.
EXPRESSION_ERRORS = (NotData, *(error for error in SANDBOX_ERRORS if error is not RecursionError))

Position = tuple[int, int]  # 1-based line and column in the template


def is_template_text(text: Any) -> bool:
    """A string scalar jinja2 reads (an expression, a statement or a comment in it); anything else
    is a literal."""
    return isinstance(text, str) and ("{{" in text or "{%" in text or "{#" in text)


def whole_expression(parts: Sequence[nodes.Node]) -> nodes.Node | None:
    """The one expression a scalar's parts are, with only blanks around it: the scalar then takes
    the expression's native value (a number, a map, ...); ``None`` for text with expressions in it."""
    exprs = [p for p in parts if not isinstance(p, nodes.TemplateData)]
    if len(exprs) == 1 and all(not p.data.strip() for p in parts if isinstance(p, nodes.TemplateData)):
        return exprs[0]
    return None


class Builder:
    """One template compiled: ``build(item)`` makes the object (see :func:`build_all` for the errors)."""

    def __init__(self, function: Callable[[Any], dict[str, Any]], where: dict[int, Position], code_file: str,
                 values: Values, grows: bool, template: Any) -> None:
        self.build = function
        self.template = template  # the template document it was compiled from (with its positions)
        self.grows = grows  # a $for: the object's size depends on the data (checked, see build_all)
        self.where = where
        self.code_file = code_file
        self.values = values

    def position(self, err: BaseException) -> Position | None:
        """The template position of the innermost generated statement the error passed through;
        None when the error is no mistake of the template: raised inside this package's own code
        (a bug of ours) rather than by the template's expression, a jinja filter or a Python
        builtin it called (a TemplateError or a value that is not data is always the template's)."""
        found, innermost = None, ""
        tb = err.__traceback__
        while tb is not None:
            innermost = tb.tb_frame.f_code.co_filename
            if innermost == self.code_file:
                found = self.where.get(tb.tb_lineno, found)
            tb = tb.tb_next
        if not isinstance(err, (TemplateError, NotData)) and innermost.startswith(_PACKAGE_DIR):
            return None
        return found


def is_directive(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("$")


def _has_directives(node: Any) -> bool:
    return isinstance(node, dict) and any(map(is_directive, node))


Put = Callable[[int, str], None]


class _Emitter:
    """The generated function's source, a statement at a time; each statement that evaluates an
    expression is recorded with the template position it comes from. Every node's code is a
    literal or a local name, so using it twice evaluates nothing twice."""

    def __init__(self, file: str, names: Names, problems: list[Problem]) -> None:
        self.file = file
        self.names = names
        self.writer = ExprWriter(names)
        self.problems = problems
        self.lines: list[str] = ["def build(v_obj):"]
        self.where: dict[int, Position] = {}
        self.count = 0
        self.floats = False  # a float written in the template itself
        self.loops = 0

    def temp(self, prefix: str = "t") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def line(self, depth: int, text: str, at: Position | None = None) -> None:
        self.lines.append("    " * depth + text)
        if at is not None:
            self.where[len(self.lines)] = at
        if text.endswith(":"):
            self.lines.append("    " * (depth + 1) + "pass")

    def assign(self, depth: int, code: str, at: Position | None = None, prefix: str = "t") -> str:
        temp = self.temp(prefix)
        self.line(depth, f"{temp} = {code}", at)
        return temp

    def problem(self, message: str, at: Position | None) -> None:
        self.problems.append(Problem(message, file=self.file, line=at[0] if at else None,
                                     column=at[1] if at else None, compiler_style=True))

    # -- expressions -------------------------------------------------------------------------
    def expression(self, source: str, at: Position | None) -> nodes.Expr | None:
        try:
            return parse_expression(self.names.env, source)
        except TemplateSyntaxError as err:
            self.problem(f"template syntax error in {source.strip()!r}: {err.message}", at)
            return None

    def code(self, expr: nodes.Node | None, at: Position | None) -> str | None:
        if expr is None:
            return None
        try:
            return self.writer.write(expr)
        except Unsupported as err:
            self.problem(str(err), at)
            return None

    def parts(self, text: str, at: Position | None) -> list[nodes.Node] | None:
        """The text and expressions of a string scalar, by jinja2's parser; None after a problem."""
        try:
            body = self.names.env.parse(text).body
        except TemplateSyntaxError as err:
            self.problem(f"template syntax error in {text!r}: {err.message}", at)
            return None
        found: list[nodes.Node] = []
        for node in body:
            if not isinstance(node, nodes.Output):
                self.problem(f"{{% %}} statements are not supported in a template value ({text!r}); "
                             f"use $if or $for", at)
                return None
            found.extend(node.nodes)
        return found

    def scalar(self, text: str, depth: int, at: Position | None, native: str = "NATIVE") -> tuple[str, bool]:
        """Code for a string scalar (a literal or a local) and whether it may be ``omit``."""
        if not is_template_text(text):
            return repr(str(text)), False
        parts = self.parts(text, at)
        if parts is None:
            return "None", False
        if all(isinstance(p, nodes.TemplateData) for p in parts):
            return repr("".join(p.data for p in parts if isinstance(p, nodes.TemplateData))), False
        whole = whole_expression(parts)
        if whole is not None:
            code = self.code(whole, at)
            if code is None:
                return "None", False
            temp = self.assign(depth, code, at)
            self.line(depth, f"if type({temp}) is not str: {temp} = {native}({temp})", at)
            return temp, self.writer.uses_omit(whole)
        codes = []
        for part in parts:
            code = repr(part.data) if isinstance(part, nodes.TemplateData) else self.code(part, at)
            if code is None:
                return "None", False
            codes.append(code)
        return self.assign(depth, f"JOIN(({''.join(c + ', ' for c in codes)}))", at), False

    # -- nodes -------------------------------------------------------------------------------
    def value(self, node: Any, depth: int, at: Position | None, tidy: tuple[str, ...] = (),
              data_map: bool = False) -> tuple[str, bool]:
        """Code for a template node and whether it may be ``omit``. ``tidy``: the data maps this
        node (the object's ``metadata`` or ``spec``) holds; ``data_map``: the node is one of them."""
        if _has_directives(node):
            temp = self.assign(depth, "OMIT", prefix="d")
            self.directed(node, depth, at, lambda d, code: self.line(d, f"{temp} = {code}"))
            code, may_omit, tidied = temp, True, False
        elif isinstance(node, dict):
            code, may_omit, tidied = self.mapping(node, depth, tidy), False, True
        elif isinstance(node, list):
            code, may_omit, tidied = self.sequence(node, depth), False, True
        elif isinstance(node, str):
            code, may_omit = self.scalar(node, depth, at, "TIDY_NATIVE" if data_map else "NATIVE")
            tidied = code.startswith(("'", '"'))
        else:
            return self.fixed(node, at), False
        if data_map and isinstance(node, dict):  # written as a mapping, or built by directives
            return self.assign(depth, f"TIDY({code})"), may_omit
        if tidy and not tidied:
            return self.assign(depth, f"TIDY_PARENT({code}, {tidy!r})"), may_omit
        return code, may_omit

    def fixed(self, value: Any, at: Position | None) -> str:
        """A scalar written in the template (the YAML reader's types as plain ones)."""
        if isinstance(value, bool) or value is None:
            return repr(None if value is None else bool(value))
        if isinstance(value, int):
            return repr(int(value))
        if isinstance(value, float):
            self.floats = True
            return self.names.constant(float(value))
        if isinstance(value, dict):
            self.problem("a mapping cannot be a key: write an expression in quotes (\"{{ ... }}\")", at)
        else:
            self.problem(f"a {type(value).__name__} cannot stand in a template", at)
        return "None"

    def mapping(self, node: dict[Any, Any], depth: int, tidy: tuple[str, ...], root: bool = False,
                into: str | None = None) -> str:
        """A mapping's entries (directive keys aside): a dict display when none may be left out,
        else entries put one by one (into ``into`` when given: a $for's merged entries)."""
        entries: list[tuple[str, str, bool]] = []
        for key in node:
            if is_directive(key):
                continue
            key_code = self.key(node, key, depth)
            at = one_based(value_at(node, key))
            code, may_omit = self.value(node[key], depth, at, DATA_MAPS.get(key, ()) if root else (),
                                        key in tidy)
            entries.append((key_code, code, may_omit))
        if into is None and not any(may_omit for _k, _c, may_omit in entries):
            return "{" + ", ".join(f"{k}: {c}" for k, c, _m in entries) + "}"
        temp = into or self.assign(depth, "{}", prefix="m")
        for key_code, code, may_omit in entries:
            self.line(depth, f"if {code} is not OMIT: {temp}[{key_code}] = {code}" if may_omit
                      else f"{temp}[{key_code}] = {code}")
        return temp

    def key(self, node: dict[Any, Any], key: Any, depth: int) -> str:
        at = one_based(key_at(node, key))
        if not isinstance(key, str):
            return self.fixed(key, at)
        code, may_omit = self.scalar(key, depth, at, "KEY")
        if may_omit:
            self.problem("a key cannot be omit", at)
        return code

    def sequence(self, node: list[Any], depth: int) -> str:
        if not any(map(_has_directives, node)):
            items = [self.value(item, depth, one_based(item_at(node, i))) for i, item in enumerate(node)]
            if not any(may_omit for _c, may_omit in items):
                return "[" + ", ".join(code for code, _m in items) + "]"
        temp = self.assign(depth, "[]", prefix="l")
        for index, item in enumerate(node):
            at = one_based(item_at(node, index))
            if _has_directives(item):
                self.directed(item, depth, at, lambda d, code: self.line(d, f"{temp}.append({code})"), in_list=True)
            else:
                code, may_omit = self.value(item, depth, at)
                self.put(depth, code, may_omit, lambda d, c: self.line(d, f"{temp}.append({c})"))
        return temp

    def check_directives(self, node: dict[Any, Any], in_list: bool) -> None:
        for key in node:
            if is_directive(key) and key not in DIRECTIVES:
                self.problem(f"unknown directive {key!r} (directives: {', '.join(DIRECTIVES)})",
                             one_based(key_at(node, key)))
        rest = [k for k in node if not is_directive(k)]
        if "$value" in node and rest:
            self.problem("$value is the whole value: no other keys beside it", one_based(key_at(node, "$value")))
        if "$else" in node and "$if" not in node:
            self.problem("$else needs $if", one_based(key_at(node, "$else")))
        if "$for" in node and "$value" in node and not in_list:
            self.problem("$for in a mapping repeats its entries: no $value", one_based(key_at(node, "$for")))

    def directed(self, node: dict[Any, Any], depth: int, at: Position | None, put: Put,
                 in_list: bool = False) -> None:
        """A mapping with directives; ``put(depth, code)`` places each value built."""
        self.check_directives(node, in_list)
        inner = depth
        if "$if" in node:
            cond = self.condition(node, "$if", depth)
            self.line(depth, f"if {cond}:")
            inner += 1
        if "$for" in node:
            self.loop(node, inner, put, in_list)
        else:
            code, may_omit = self.body(node, inner, at)
            self.put(inner, code, may_omit, put)
        if "$if" in node and "$else" in node:
            self.line(depth, "else:")
            code, may_omit = self.value(node["$else"], depth + 1, one_based(value_at(node, "$else")))
            self.put(depth + 1, code, may_omit, put)

    def body(self, node: dict[Any, Any], depth: int, at: Position | None) -> tuple[str, bool]:
        """What a directed node stands for: its ``$value``, else its other entries."""
        if "$value" in node:
            return self.value(node["$value"], depth, one_based(value_at(node, "$value")))
        return self.mapping(node, depth, ()), False

    def put(self, depth: int, code: str, may_omit: bool, put: Put) -> None:
        if may_omit:
            self.line(depth, f"if {code} is not OMIT:")
            put(depth + 1, code)
        else:
            put(depth, code)

    def condition(self, node: dict[Any, Any], key: str, depth: int) -> str:
        at = one_based(value_at(node, key))
        source = node[key]
        if not isinstance(source, str):
            return repr(bool(source))
        code = self.code(self.expression(_strip_braces(source), at), at)
        return "False" if code is None else self.assign(depth, code, at, prefix="c")

    def loop(self, node: dict[Any, Any], depth: int, put: Put, in_list: bool) -> None:
        at = one_based(value_at(node, "$for"))
        match = _FOR.match(str(node["$for"]))
        if match is None:
            self.problem(f"$for must read 'NAME in EXPR' (or 'KEY, VALUE in EXPR'), not {node['$for']!r}", at)
            return
        targets = [t.strip() for t in match.group(1).split(",")]
        expr = self.expression(_strip_braces(match.group(2)), at)
        test: nodes.Expr | None = None
        if isinstance(expr, nodes.CondExpr) and expr.expr2 is None:
            conditional: nodes.CondExpr = expr
            expr, test = conditional.expr1, conditional.test  # `x in xs if cond`: a filter, as jinja's for
        code = self.code(expr, at)
        if code is None:
            return
        self.loops += 1
        saved = dict(self.names.locals)
        variables = [f"v_{t}_{self.temp('')}" for t in targets]
        self.names.locals.update(zip(targets, variables))
        mapping = None if in_list else self.assign(depth, "{}", prefix="m")
        self.line(depth, f"for {', '.join(variables)} in {code}:", at)
        if test is not None:
            self.line(depth + 1, f"if not ({self.code(test, at)}): continue", at)
        if mapping is None:
            item, may_omit = self.body(node, depth + 1, at)
            self.put(depth + 1, item, may_omit, put)
        else:
            self.mapping(node, depth + 1, (), into=mapping)
        self.names.locals = saved
        if mapping is not None:
            put(depth, mapping)


def one_based(position: tuple[int, int] | None) -> Position | None:
    return (position[0] + 1, position[1] + 1) if position else None


def _strip_braces(text: str) -> str:
    """A directive's expression may be written bare or in ``{{ }}``."""
    stripped = text.strip()
    if stripped.startswith("{{") and stripped.endswith("}}"):
        return stripped[2:-2]
    return stripped


def compile_template(data: Any, file: str, env: SandboxedEnvironment, context: Context) -> Builder:
    """The builder of a template document (a mapping, its kind's object); UserError naming every
    mistake at its ``file:line:col``."""
    problems: list[Problem] = []
    if not isinstance(data, dict):
        raise UserError([Problem("a template is one YAML mapping (the object of its kind)", file=file)])
    values = Values()
    names = Names(env, OMIT)
    names.locals["obj"] = "v_obj"
    emitter = _Emitter(file, names, problems)
    for key in data:
        if is_directive(key):
            emitter.problem("directives cannot stand at the top of a template", one_based(key_at(data, key)))
    if not problems:
        code = emitter.mapping(data, 1, (), root=True)
        emitter.line(1, f"return {code}")
    if problems:
        raise UserError(problems)
    code_file = _CODE_FILE.format(file)
    source = "\n".join(emitter.lines) + "\n"
    namespace: dict[str, Any] = {"K": names.constants, "CTX": context, "ENV": env, "OMIT": OMIT,
                                 "NATIVE": values.native, "KEY": values.key, "TIDY": values.tidy,
                                 "TIDY_NATIVE": values.tidy_native, "TIDY_PARENT": values.tidy_parent,
                                 "JOIN": join_text}
    exec(compile(source, code_file, "exec"), namespace)  # our generated code: names above only
    values.floats.seen = emitter.floats
    return Builder(namespace["build"], emitter.where, code_file, values, emitter.loops > 0, data)


def new_template_context(env: SandboxedEnvironment, name: str) -> Context:
    """The context filters that take one (``map``, ``select``, ...) and sandboxed calls receive."""
    return new_context(env, name, {}, None, False, env.globals)


def build_all(builder: Builder, items: Sequence[Any], file: str, kind: str) -> list[dict[str, Any]]:
    """Every item's object; an expression that fails is one problem per template position and
    message, naming the first object it failed on and how many more."""
    build = builder.build
    try:
        objects = [build(item) for item in items]
    except EXPRESSION_ERRORS as first:
        at = builder.position(first)
        if at is None:
            raise
        if isinstance(first, TimeBudgetExceeded):  # the pass is over: no second one to count objects
            raise UserError([Problem(f"template failed: {first}", file=file, line=at[0], column=at[1],
                                     compiler_style=True)]) from None
    else:
        if builder.grows:
            _check_sizes(objects, file)
        return objects
    failures: dict[tuple[Position, str], list[Any]] = {}
    objects = []
    for item in items:
        try:
            objects.append(build(item))
        except EXPRESSION_ERRORS as err:
            at = builder.position(err)
            if at is None:
                raise
            failures.setdefault((at, _reason(err)), []).append(item)
    problems = []
    for (at, reason), failed in failures.items():
        more = f" (and {len(failed) - 1} more {kind} objects)" if len(failed) > 1 else ""
        problems.append(Problem(f"template failed: {reason}{more}", file=file, line=at[0], column=at[1],
                                obj=object_label(kind, failed[0]), compiler_style=True))
    raise UserError(sorted(problems, key=lambda p: (p.line or 0, p.column or 0)))


# One object built may be about this large (characters of its text): a template that loops or
# multiplies strings into a huge manifest fails here instead of in kubectl.
MAX_OBJECT_CHARS = 1_000_000


def _check_sizes(objects: Sequence[Any], file: str) -> None:
    for obj in objects:
        size = _size(obj)
        if size > MAX_OBJECT_CHARS:
            raise UserError.single(f"the template renders an object of about {size:,} characters, over the limit "
                                   f"of {MAX_OBJECT_CHARS:,}", file=file)


def _size(value: Any) -> int:
    """About the length of ``value``'s text: its strings and keys, and a few characters per value."""
    stack, size = [value], 0
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            size += len(item) + 2
        elif kind is dict:
            size += sum(len(key) + 2 if type(key) is str else 4 for key in item)
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        else:
            size += 4
    return size


def object_label(kind: str, item: Any) -> str:
    """``Kind/name``, or ``Kind/namespace/name`` for a namespaced plan item."""
    namespace = getattr(item, "namespace", "")
    return f"{kind}/{namespace}/{getattr(item, 'name', '?')}" if namespace else f"{kind}/{getattr(item, 'name', '?')}"


def _reason(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    return text if isinstance(err, (NotData,)) or type(err).__module__.startswith("jinja2") \
        else f"{type(err).__name__}: {text}"
