"""Templates checked against their kind's CRD ``openAPIV3Schema`` before anything renders.

A template is a YAML tree (render/tree.py), so its fixed structure can be checked where it is
written: every key written as text must be a field of the schema there (``spec.cohortNmae`` is not),
every value written as text must have the field's type (and be one of its ``enum`` values), and every
required field must be written, each a ``file:line:col`` problem. What expressions decide is not
known before the data: a whole ``{{ expr }}`` value is not type-checked, an interpolated one is a
string; a mapping with a key given by an expression, or entries merged by ``$for``, is not checked
for missing fields; ``$value`` and ``$else`` are checked where they stand, ``$for`` items as items.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpustack_render.errors import Problem, UserError, did_you_mean
from gpustack_render.render import TEMPLATE_KINDS, load_template, takes_native_value
from gpustack_render.render.locate import locate
from gpustack_render.render.tree import is_directive, is_template_text, one_based
from gpustack_render.rules.lint import LintResult
from gpustack_render.rulesyaml import item_at, key_at, value_at
from gpustack_render.validate.crd_schema import Crds

_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object", list: "array"}
Position = tuple[int, int] | None


def lint_templates(result: LintResult, templates_dir: Path | None, crds_dir: Path | None) -> list[str]:
    """``lint --templates/--crds``: the templates' problems added to ``result``; the notes to print
    (kinds without a CRD, what was checked)."""
    from gpustack_render.validate.crd_schema import load_crd_dir
    problems, notes = check_templates(templates_dir, load_crd_dir(crds_dir) if crds_dir is not None else None)
    result.problems.extend(problems)
    checked = "compiled and checked against the CRDs of " + str(crds_dir) if crds_dir is not None else "compiled"
    return notes + [f"{len(TEMPLATE_KINDS)} templates of {locate(templates_dir, TEMPLATE_KINDS).dir} {checked}"]


def check_templates(templates_dir: Path | None, crds: Crds | None) -> tuple[list[Problem], list[str]]:
    """Every template mistake (compiling) and, with ``crds``, schema problem of the templates of
    ``--templates templates_dir`` (an overlay over the built-in ones); a note per kind without a CRD
    in ``crds``."""
    problems: list[Problem] = []
    notes: list[str] = []
    templates = locate(templates_dir, TEMPLATE_KINDS)
    for kind in TEMPLATE_KINDS:
        path = templates.file(kind)
        try:
            data = load_template(path).template
        except UserError as err:
            problems.extend(err.problems)
            continue
        if crds is None:
            continue
        schema = _schema_of(data, crds)
        if schema is None:
            notes.append(f"{path}: no CRD for its apiVersion and kind: its structure was not checked")
            continue
        _Checker(str(path), problems).node(data, schema, "", None)
    return problems, notes


def _schema_of(data: Any, crds: Crds) -> dict[str, Any] | None:
    api, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str) or "{{" in api + kind:
        return None
    group, _, version = api.rpartition("/")
    crd = crds.kinds.get((group, kind), {}).get(version)
    return crd.schema if crd is not None else None


class _Checker:
    def __init__(self, file: str, problems: list[Problem]) -> None:
        self.file = file
        self.problems = problems

    def problem(self, message: str, path: str, at: Position) -> None:
        self.problems.append(Problem(message, file=self.file, line=at[0] if at else None,
                                     column=at[1] if at else None, path=path.lstrip("."), compiler_style=True))

    def node(self, node: Any, schema: dict[str, Any], path: str, at: Position, item: bool = False) -> None:
        """``node`` against ``schema``; ``item``: the node is a list item (a ``$for`` repeats it)."""
        if not schema or schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
            return
        if isinstance(node, dict) and any(map(is_directive, node)):
            self.directed(node, schema, path, at, item)
        elif isinstance(node, dict):
            if self.typed("object", schema, path, at):
                self.mapping(node, schema, path, at, False)
        elif isinstance(node, list):
            if self.typed("array", schema, path, at):
                for index, value in enumerate(node):
                    self.node(value, schema.get("items") or {}, f"{path}[{index}]", one_based(item_at(node, index)),
                              True)
        elif is_template_text(node):
            if not takes_native_value(node):
                self.typed("string", schema, path, at)
        else:
            self.scalar(node, schema, path, at)

    def directed(self, node: dict[str, Any], schema: dict[str, Any], path: str, at: Position, item: bool) -> None:
        for key in ("$value", "$else"):
            if key in node:
                self.node(node[key], schema, path, one_based(value_at(node, key)))
        if "$value" not in node:
            rest = {k: v for k, v in node.items() if not is_directive(k)}
            if self.typed("object", schema, path, at):
                self.mapping(node, schema, path, at, merged="$for" in node and not item, keys=list(rest))

    def typed(self, wanted: str, schema: dict[str, Any], path: str, at: Position) -> bool:
        declared = schema.get("type")
        if declared is None or declared == wanted or (wanted == "integer" and declared == "number"):
            return True
        if schema.get("x-kubernetes-int-or-string") and wanted in ("integer", "string"):
            return True
        self.problem(f"wrong type: the CRD wants {declared}, the template writes {_article(wanted)}", path, at)
        return False

    def scalar(self, value: Any, schema: dict[str, Any], path: str, at: Position) -> None:
        if value is None:
            if not schema.get("nullable") and schema.get("type"):
                self.problem(f"wrong type: the CRD wants {schema['type']}, the template writes null", path, at)
            return
        kind = _TYPES.get(type(value)) or next((n for t, n in _TYPES.items() if isinstance(value, t)), "value")
        if self.typed(kind, schema, path, at) and "enum" in schema and value not in schema["enum"]:
            allowed = ", ".join(map(str, schema["enum"]))
            self.problem(f"{value!r} is not one of the CRD's values ({allowed})", path, at)

    def mapping(self, node: dict[Any, Any], schema: dict[str, Any], path: str, at: Position, merged: bool,
                keys: list[Any] | None = None) -> None:
        properties: dict[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        open_ended = bool(extra) or schema.get("x-kubernetes-preserve-unknown-fields") or not properties
        written = list(node) if keys is None else keys
        for key in written:
            if is_directive(key):
                continue
            where = f"{path}.{key}"
            key_position, value_position = one_based(key_at(node, key)), one_based(value_at(node, key))
            if is_template_text(key):
                merged = True
                continue
            if key in properties:
                self.node(node[key], properties[key], where, value_position)
            elif isinstance(extra, dict):
                self.node(node[key], extra, where, value_position)
            elif not open_ended:
                hint = did_you_mean(str(key), properties)
                self.problem(f"unknown field: the CRD has no {key!r} here" + (f" ({hint})" if hint else ""),
                             where, key_position)
        if not merged:
            for required in schema.get("required") or []:
                if required not in written:
                    self.problem(f"missing required field {required!r}", path or "(object)", at)


def _article(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind
