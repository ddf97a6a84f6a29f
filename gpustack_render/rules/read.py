"""Rule files → positioned documents and validated models (shape), in our own words.

Files are read, with positions, by :mod:`gpustack_render.rulesyaml` (ruamel.yaml); pydantic's
messages never reach the user."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpustack_render.errors import Problem, UserError, did_you_mean
from gpustack_render.rules import plain, schema
from gpustack_render import rulesyaml
from gpustack_render.rulesyaml import item_at, key_at, value_at

Loc = tuple[str | int, ...]


@dataclass
class Document:
    """One rule file read: its kind, path, positioned data and (once validated) its model."""
    kind: str
    file: str
    data: Any
    model: Any = None


def position(data: Any, loc: Loc, *, at_key: bool = False) -> tuple[int | None, int | None]:
    """Walk the document's nodes along ``loc``; the deepest position found wins (1-based).

    A scalar is pointed at by its value (that is what is wrong), a mapping or list by its key;
    ``at_key`` points at the last key itself, for problems of the key (an unknown key)."""
    line = col = None
    node = data
    for i, part in enumerate(loc):
        try:
            if isinstance(part, int) and isinstance(node, list) and part < len(node):
                pos = item_at(node, part)
                node = node[part]
            elif isinstance(node, dict) and part in node:
                scalar = not isinstance(node[part], (dict, list))
                use_value = scalar and not (at_key and i == len(loc) - 1)
                pos = value_at(node, part) if use_value else key_at(node, part)
                node = node[part]
            else:
                break
        except (KeyError, IndexError, TypeError, AttributeError):
            break
        if pos:
            line, col = pos[0] + 1, pos[1] + 1
    return line, col


_TYPE_WORDS = {"string_type": "a string", "int_type": "a whole number", "int_parsing": "a whole number",
               "bool_type": "true or false", "bool_parsing": "true or false", "list_type": "a list",
               "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
               "int_from_float": "a whole number"}
_ALL_FIELD_NAMES = {name for model in vars(schema).values() if isinstance(model, type)
                    and issubclass(model, schema.BaseModel) for name in model.model_fields} | {"not"}
_TAGS = set(schema.CONDITION_KEYS) | set(schema.CRUFT_KEYS) | {"annotation", "labels"}


_UNION_FIELDS = {"stampWhen", "when", "contributes", "pinCpuOnly", "not", "aware",
                 "deriveInstanceTypes"}  # tagged unions
_UNION_LISTS = {"all", "any", "idPrefix", "cruft"}


def _clean_loc(loc: tuple[Any, ...]) -> Loc:
    """Drop the discriminator tags pydantic inserts after every tagged-union field."""
    cleaned: list[str | int] = []
    expect_tag = False
    for part in loc:
        if expect_tag and isinstance(part, str):
            expect_tag = False
            continue
        expect_tag = False
        cleaned.append(part)
        if isinstance(part, str) and part in _UNION_FIELDS:
            expect_tag = True
        elif isinstance(part, int) and len(cleaned) > 1 and cleaned[-2] in _UNION_LISTS:
            expect_tag = True
    return tuple(cleaned)


def _describe(value: Any) -> str:
    for base, word in ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"),
                       (list, "a list"), (dict, "a mapping")):
        if isinstance(value, base):
            return f"{word} {value!r}" if base not in (list, dict) else word
    return "nothing" if value is None else type(value).__name__


def _friendly(error: Any) -> tuple[str, str]:
    """Our words for a pydantic error: pydantic's own messages never reach the user."""
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "missing":
        return "required key is missing", ""
    if kind == schema.QUANTITY_ERROR:  # schema.Quantity: our own words already
        return str(ctx.get("reason", error["msg"])), str(ctx.get("hint", ""))
    if kind == "string_type" and isinstance(value, (bool, int, float)):  # YAML read `8`, `true` as such
        shown = str(value).lower() if isinstance(value, bool) else value
        return f"expected {_TYPE_WORDS[kind]}, got {_describe(value)}", \
            f'quote it: "{shown}"' if isinstance(value, int) else "quote it"
    if kind == "extra_forbidden":
        name = str(error["loc"][-1])
        return f"unknown key '{name}'", did_you_mean(name, _ALL_FIELD_NAMES - {name})  # a key of another place is unknown here
    if kind in _TYPE_WORDS:
        return f"expected {_TYPE_WORDS[kind]}, got {_describe(value)}", ""
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}, got {value!r}", ""
    if kind == "too_short":
        return "must not be empty" if ctx.get("min_length", 1) <= 1 else \
            f"needs at least {ctx.get('min_length')} entries", ""
    if kind == "too_long":
        return f"has more than {ctx.get('max_length')} entries", ""
    if kind == "string_too_short":
        return "must not be empty", ""
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters", ""
    if kind == "string_pattern_mismatch":
        return f"{value!r} does not match {ctx.get('pattern')}", ""
    if kind in ("greater_than", "greater_than_equal"):
        return f"must be greater than {ctx.get('gt', ctx.get('ge'))}", ""
    if kind in ("union_tag_not_found", "union_tag_invalid"):
        keys = sorted(value) if isinstance(value, dict) else []
        hint = did_you_mean(keys[0], _TAGS) if keys else ""
        return f"not a known entry (keys: {', '.join(keys) or 'none'})", hint
    return f"invalid value {value!r}", ""


RULE_SUFFIXES = (".yaml", ".yml")


def rule_files(rules_dir: Path) -> list[Path]:
    """The files of a rules directory that are read as rule files (``*.yaml``, ``*.yml``), in name order."""
    return sorted(p for p in rules_dir.iterdir() if p.suffix in RULE_SUFFIXES and p.is_file())


def read_documents(rules_dir: Path, problems: list[Problem]) -> list[Document]:
    """Every rule file of ``rules_dir`` that parses and names a known apiVersion and kind."""
    if not rules_dir.is_dir():
        raise UserError.single("rules directory not found", file=str(rules_dir))
    documents: list[Document] = []
    for path in rule_files(rules_dir):
        display = str(path)
        try:
            data = rulesyaml.load(path, display)
        except UserError as err:
            problems.extend(err.problems)
            continue
        if data is None:
            continue
        if (problem := _header_problem(data, display)) is not None:
            problems.append(problem)
            continue
        documents.append(Document(str(data["kind"]), display, data))
    return documents


def _header_problem(data: Any, display: str) -> Problem | None:
    """What is wrong with a rule file's frame (a mapping with our apiVersion and a known kind), at
    the nearest key: the value when it is there, the misspelt key or the document's start when not."""
    if not isinstance(data, dict):
        line, col = start_position(data)
        return Problem("a rule file must be a mapping with apiVersion and kind", file=display, line=line,
                       column=col)
    for key, wanted in (("apiVersion", None), ("kind", schema.FILE_KINDS)):
        value = data.get(key)
        if key == "apiVersion" and value == schema.API_VERSION:
            continue
        if key == "kind" and isinstance(value, str) and value in schema.FILE_KINDS:
            continue
        line, col = position(data, (key,)) if key in data else _nearest_key(data, key)
        if wanted is None:
            return Problem(f"apiVersion must be {schema.API_VERSION}", file=display, line=line, column=col,
                           path=key)
        if isinstance(value, (list, dict)):
            return Problem(f"expected a string, got {_describe(value)}", file=display, line=line, column=col,
                           path=key)
        return Problem(f"unknown rule kind {value!r}", file=display, line=line, column=col, path=key,
                       hint=did_you_mean(str(value), wanted) if isinstance(value, str) else "")
    return None


def start_position(data: Any) -> tuple[int | None, int | None]:
    """Where a parsed document begins (its first key or item), 1-based: the place for a problem of
    the whole document, such as a missing top-level key."""
    start = rulesyaml.start_of(data)
    return (start[0] + 1, start[1] + 1) if start else (1, 1)


def _nearest_key(data: dict[Any, Any], key: str) -> tuple[int | None, int | None]:
    """A missing top-level ``key``: the key that looks like a misspelling of it, else the start."""
    close = [k for k in data if isinstance(k, str) and did_you_mean(k, [key])]
    if close:
        return position(data, (close[0],), at_key=True)
    return start_position(data)


def validate(doc: Document, problems: list[Problem]) -> None:
    """The document's model; plainly valid data is built without pydantic's validators (see
    :mod:`gpustack_render.rules.plain`), anything else validated by pydantic, which words it."""
    try:
        doc.model = _model_of(schema.FILE_KINDS[doc.kind], doc.data)
    except ValidationError as err:
        for error in err.errors():
            loc = _clean_loc(error["loc"])
            message, hint = _friendly(error)
            line, col = position(doc.data, loc, at_key=error["type"] == "extra_forbidden")
            if line is None:  # nothing of ``loc`` is in the file (a missing top-level key)
                line, col = start_position(doc.data)
            problems.append(Problem(message, file=doc.file, line=line, column=col,
                                    path=".".join(str(p) for p in loc), hint=hint))


def default_document(kind: str, rules_dir: Path) -> Document:
    """An optional kind the directory leaves out: its model's defaults (nothing to report on)."""
    data = {"apiVersion": schema.API_VERSION, "kind": kind}
    return Document(kind, str(rules_dir), data, _model_of(schema.RULE_KINDS[kind], data))


def _model_of(model: type[schema.Envelope], data: Any) -> schema.Envelope:
    try:
        return plain.construct(model, data)  # type: ignore[return-value]
    except plain.Declined:
        return model.model_validate(data)


def rule_error(problems: list[Problem]) -> UserError:
    ordered = sorted(problems, key=lambda p: (p.file, p.line or 0, p.column or 0, p.message))
    return UserError([dataclasses.replace(p, compiler_style=True) for p in ordered])


def record_origins(doc: Document, origins: dict[str, str]) -> None:
    """``Kind:path`` → ``file:line`` for every key and list item of a rule file (for ``explain``).

    Same positions as :func:`position`: a scalar's value, a mapping's or list's key."""
    def walk(node: Any, path: tuple[str | int, ...]) -> None:
        if isinstance(node, dict):
            children = [(key, node[key]) for key in node]
        elif isinstance(node, list):
            children = list(enumerate(node))
        else:
            return
        for key, value in children:
            try:
                if isinstance(node, list):
                    pos = item_at(node, key)
                else:
                    pos = key_at(node, key) if isinstance(value, (dict, list)) else value_at(node, key)
            except (KeyError, IndexError, TypeError, AttributeError):
                pos = None
            sub = path + (key,)
            if pos:
                origins.setdefault(f"{doc.kind}:{'.'.join(map(str, sub))}", f"{doc.file}:{pos[0] + 1}")
            walk(value, sub)

    walk(doc.data, ())
