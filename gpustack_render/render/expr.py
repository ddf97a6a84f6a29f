"""Jinja expressions of a template, compiled to Python source that runs in the template's sandbox.

A template value ``{{ expr }}`` is parsed by jinja2's own parser and each node of the expression is
written as the Python that jinja2's code generator writes for it, with every sandbox hook in place:
attribute and item access through the environment's ``getattr``/``getitem`` (the sandbox's checks),
calls through its ``call`` (safe callables only), the intercepted operators (``*``, ``**``: the size
limits of sandbox.py) through ``call_binop``, filters and tests from the environment, unknown names as
the environment's (strict) undefined. The builder of a whole template is then one Python function
(tree.py), so an expression costs what its operations cost: no construct is slower than another.
"""

from __future__ import annotations

from typing import Any, Callable

from jinja2 import nodes
from jinja2.exceptions import TemplateSyntaxError
from jinja2.parser import Parser
from jinja2.sandbox import SandboxedEnvironment

_COMPARE = {"eq": "==", "ne": "!=", "gt": ">", "gteq": ">=", "lt": "<", "lteq": "<=", "in": "in",
            "notin": "not in"}
_BINARY = {nodes.Add: "+", nodes.Sub: "-", nodes.Mul: "*", nodes.Div: "/", nodes.FloorDiv: "//",
           nodes.Mod: "%", nodes.Pow: "**", nodes.And: "and", nodes.Or: "or"}
_UNARY = {nodes.Not: "not ", nodes.Neg: "-", nodes.Pos: "+"}


class Unsupported(Exception):
    """An expression node a template value cannot hold (a statement's node); ``lineno`` is jinja's."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(message)
        self.lineno = lineno


def parse_expression(env: SandboxedEnvironment, source: str) -> nodes.Expr:
    """One jinja expression (what ``{{ }}`` holds), by jinja2's parser; TemplateSyntaxError."""
    parser = Parser(env, source, state="variable")
    expr = parser.parse_expression()
    if not parser.stream.eos:
        raise TemplateSyntaxError("unexpected text after the expression", parser.stream.current.lineno)
    return expr


class Names:
    """What the generated code refers to: constants and hooks by slot (``K[i]``), and the local
    names in scope (the plan item, loop variables) as Python variables."""

    def __init__(self, env: SandboxedEnvironment, omit: object) -> None:
        self.env = env
        self.omit = omit
        self.constants: list[Any] = []
        self._slots: dict[tuple[str, Any], int] = {}
        self.locals: dict[str, str] = {}

    def constant(self, value: Any, key: Any = None) -> str:
        """``K[i]`` holding ``value`` (one slot per distinct key, by default the value's type and value)."""
        ident = ("value", (type(value), value)) if key is None else ("key", key)
        try:
            index = self._slots.get(ident)
        except TypeError:  # an unhashable constant
            index = None
        if index is None:
            index = len(self.constants)
            self.constants.append(value)
            try:
                self._slots[ident] = index
            except TypeError:
                pass
        return f"K[{index}]"

    def hook(self, name: str, value: Callable[..., Any]) -> str:
        return self.constant(value, ("hook", name))


class ExprWriter:
    """Python source for jinja expression nodes (see the module docstring)."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.env = names.env

    def uses_omit(self, expr: nodes.Node) -> bool:
        """Whether the expression names ``omit`` (only then can its value be the omit marker)."""
        found = [expr] if isinstance(expr, nodes.Name) else list(expr.find_all(nodes.Name))
        return any(n.name == "omit" and n.name not in self.names.locals for n in found)

    def write(self, node: nodes.Node) -> str:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise Unsupported(f"{type(node).__name__} is not supported in a template value", node.lineno)
        return str(method(node))

    def _hook(self, name: str) -> str:
        env = self.env
        hooks: dict[str, Callable[..., Any]] = {"getattr": env.getattr, "getitem": env.getitem, "call": env.call,
                 "binop": env.call_binop, "unop": env.call_unop, "join": join_text}
        return self.names.hook(name, hooks[name])

    def _Const(self, node: nodes.Const) -> str:
        return self.names.constant(node.value)

    def _Name(self, node: nodes.Name) -> str:
        local = self.names.locals.get(node.name)
        if local is not None:
            return local
        if node.name == "omit":
            return self.names.constant(self.names.omit, ("omit",))
        if node.name in self.env.globals:
            return self.names.constant(self.env.globals[node.name], ("global", node.name))
        return self.names.constant(self.env.undefined(name=node.name), ("undefined", node.name))

    def _Getattr(self, node: nodes.Getattr) -> str:
        return f"{self._hook('getattr')}({self.write(node.node)}, {self.names.constant(node.attr)})"

    def _Getitem(self, node: nodes.Getitem) -> str:
        return f"{self._hook('getitem')}({self.write(node.node)}, {self.write(node.arg)})"

    def _Slice(self, node: nodes.Slice) -> str:
        parts = [self.write(part) if part is not None else "None" for part in (node.start, node.stop, node.step)]
        return f"slice({', '.join(parts)})"

    def _Tuple(self, node: nodes.Tuple) -> str:
        return "(" + "".join(self.write(item) + ", " for item in node.items) + ")"

    def _List(self, node: nodes.List) -> str:
        return "[" + ", ".join(self.write(item) for item in node.items) + "]"

    def _Dict(self, node: nodes.Dict) -> str:
        return "{" + ", ".join(f"{self.write(p.key)}: {self.write(p.value)}" for p in node.items) + "}"

    def _CondExpr(self, node: nodes.CondExpr) -> str:
        if node.expr2 is None:
            otherwise = self.names.constant(self.env.undefined(
                "the inline if-expression evaluated to false and no else section was defined."), ("no else",))
        else:
            otherwise = self.write(node.expr2)
        return f"({self.write(node.expr1)} if {self.write(node.test)} else {otherwise})"

    def _Concat(self, node: nodes.Concat) -> str:
        return f"{self._hook('join')}(({''.join(self.write(n) + ', ' for n in node.nodes)}))"

    def _Compare(self, node: nodes.Compare) -> str:
        return "(" + self.write(node.expr) + "".join(f" {_COMPARE[op.op]} {self.write(op.expr)}"
                                                    for op in node.ops) + ")"

    def _BinExpr(self, node: nodes.BinExpr) -> str:
        left, right = self.write(node.left), self.write(node.right)
        if node.operator in self.env.intercepted_binops:
            return f"{self._hook('binop')}(CTX, {node.operator!r}, {left}, {right})"
        return f"({left} {_BINARY[type(node)]} {right})"

    _Add = _Sub = _Mul = _Div = _FloorDiv = _Mod = _Pow = _And = _Or = _BinExpr

    def _UnaryExpr(self, node: nodes.UnaryExpr) -> str:
        if node.operator in self.env.intercepted_unops:
            return f"{self._hook('unop')}(CTX, {node.operator!r}, {self.write(node.node)})"
        return f"({_UNARY[type(node)]}{self.write(node.node)})"

    _Not = _Neg = _Pos = _UnaryExpr

    def _arguments(self, node: nodes.Filter | nodes.Test | nodes.Call) -> str:
        parts = [self.write(arg) for arg in node.args]
        parts += [f"{kw.key}={self.write(kw.value)}" for kw in node.kwargs]
        if node.dyn_args is not None:
            parts.append(f"*{self.write(node.dyn_args)}")
        if node.dyn_kwargs is not None:
            parts.append(f"**{self.write(node.dyn_kwargs)}")
        return "".join(", " + part for part in parts)

    def _function(self, node: nodes.Filter | nodes.Test, table: dict[str, Any], what: str) -> str:
        func = table.get(node.name)
        if func is None:
            raise Unsupported(f"no {what} named {node.name!r}", node.lineno)
        passed = getattr(getattr(func, "jinja_pass_arg", None), "name", None)
        first = {"context": "CTX, ", "eval_context": "CTX.eval_ctx, ", "environment": "ENV, "}.get(str(passed), "")
        target = self.write(node.node) if node.node is not None else "None"
        return f"{self.names.constant(func, (what, node.name))}({first}{target}{self._arguments(node)})"

    def _Filter(self, node: nodes.Filter) -> str:
        return self._function(node, self.env.filters, "filter")

    def _Test(self, node: nodes.Test) -> str:
        return self._function(node, self.env.tests, "test")

    def _Call(self, node: nodes.Call) -> str:
        return f"{self._hook('call')}(CTX, {self.write(node.node)}{self._arguments(node)})"


def join_text(parts: tuple[Any, ...]) -> str:
    """``a ~ b`` and text around expressions: each part as a string (a strict undefined part
    raises), as jinja2 joins them."""
    return "".join([part if type(part) is str else str(part) for part in parts])
