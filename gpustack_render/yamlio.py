"""YAML and JSON output.

Output: one block emitter for plain data, byte-identical to libyaml's dumper; which strings must be
quoted is decided by :mod:`gpustack_render.yamlscalars` (the YAML 1.1/1.2 scalar rules, shared with
the snapshot reader). JSON by orjson. Rule files and templates are read, with their positions, by
:mod:`gpustack_render.rulesyaml` (ruamel's round-trip loader); snapshot YAML (and the other YAML
inputs) by :mod:`gpustack_render.snapshot.yamlread`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import orjson
import yaml

from gpustack_render.errors import Problem, UserError
from gpustack_render.memo import Bounded, Memo
from gpustack_render.yamlscalars import LETTER_WORD as _LETTER_WORD, STR_TAG as _STR_TAG, read_as_non_string
from gpustack_render.yamlscalars import plainly_plain as _plainly_plain

# libyaml's dumper when PyYAML has it, chosen at run time: typed Any so it can be a base class (the
# stubs type the C and Python classes apart).
_CDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


# Which plain scalars must be quoted is decided where PyYAML decides it, implicit resolution: the
# serializer asks the dumper's resolver what a plain scalar would be read as and quotes a string
# whenever the answer is not ``str``; the resolver also answers so when any other reader of the
# output would read something else (:func:`~gpustack_render.yamlscalars.read_as_non_string`).
_AMBIGUOUS_TAG = "tag:yaml.org,2002:x-ambiguous-plain-scalar"  # never written: the scalar is quoted


class StreamDumper(_CDumper):
    """libyaml dumper; key order is decided by the caller, never re-sorted here. Strings that any
    reader would take for another type are quoted (see :func:`read_as_non_string`)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        tag = super().resolve(kind, value, implicit)
        if kind is yaml.ScalarNode and implicit[0] and tag == _STR_TAG and read_as_non_string(value):
            return _AMBIGUOUS_TAG
        return tag


def read_text(path: Path, display: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError.single("not UTF-8 text", file=display) from None
    except OSError as err:
        raise UserError.single(f"cannot read: {err.strerror or err}", file=display) from None


def dump_yaml_stream(objects: Iterable[Any]) -> str:
    """A multi-document YAML stream, every document opened by ``---``."""
    documents = list(objects)
    out: list[str] = []
    try:
        for doc in documents:
            out.append("---\n")  # what follows it starts its own line, as in an empty document
            _emit_document(doc, out)
        return "".join(out)
    except NotSimple as err:
        from gpustack_render import timing
        timing.note(f"write: YAML by libyaml's dumper, not the block emitter (a value it does not write: {err})")
    return yaml.dump_all(documents, Dumper=StreamDumper, sort_keys=False, explicit_start=True,
                         default_flow_style=False, allow_unicode=True, width=1 << 20)


def dump_yaml(obj: Any) -> str:
    try:
        return _fast_document(obj)
    except NotSimple:
        pass
    return _slow_dump(obj)


def _slow_dump(obj: Any) -> str:
    return yaml.dump(obj, Dumper=StreamDumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 20)


# ---------------------------------------------------------------------------------------------
# A block-style emitter for plain data, byte-identical to the dumper above.
#
# PyYAML's representer chain costs about 30 us per scalar in Python; a render has hundreds of
# thousands. The layout of libyaml's block style is simple (two-space mappings, sequences in a
# mapping not indented, ``{}``/``[]`` for empty collections), and how each scalar is written is
# asked of the real dumper once per distinct value (cached), except for the common words that are
# plainly plain. Anything else (floats, other types, shared objects that would get anchors, long
# keys, multi-line scalars, non-mapping roots) raises :class:`NotSimple` and the dumper writes it.
# ---------------------------------------------------------------------------------------------
def _new_scalar_text(value: str) -> str:
    """How the dumper writes the string ``value`` as a mapping value; a letter word judged in one
    step (what :func:`_plainly_plain` would do first), as most distinct values of a render are."""
    fast = _LETTER_WORD[0]
    return value if fast is not None and len(value) <= 128 and fast.match(value) else _write_scalar(value)


def _write_scalar(value: str) -> str:
    """How the dumper writes the string ``value`` as a mapping value."""
    if _plainly_plain(value):
        return value
    text = _slow_dump({"k": value})
    if not text.startswith("k: ") or not text.endswith("\n") or len(text.splitlines()) != 1:  # YAML line breaks
        raise NotSimple(value)
    return text[3:-1]


def _write_key(value: str) -> str:
    """How the dumper writes ``value`` as a key (a long or multi-line key becomes ``? key``)."""
    if _plainly_plain(value):
        return value
    text = _slow_dump({value: 0})
    if text.startswith("?") or not text.endswith(": 0\n") or len(text.splitlines()) != 1:
        raise NotSimple(value)
    return text[:-4]


# How each distinct string is written, as a value and as a key (label values and keys repeat across
# thousands of objects), read by subscription in the emitter's loop.
_SCALAR_TEXTS: Memo[str, str] = Memo(_new_scalar_text, 1 << 17)
_KEY_TEXTS: Memo[str, str] = Memo(_write_key, 1 << 17)
_scalar_text = _SCALAR_TEXTS.__getitem__
_key_text = _KEY_TEXTS.__getitem__


def _scalar(value: Any, kind: type) -> str:
    if kind is str:
        return _scalar_text(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    raise NotSimple(kind.__name__)


def _fast_document(doc: Any) -> str:
    out: list[str] = []
    _emit_document(doc, out)
    return "".join(out)


def _emit_document(doc: Any, out: list[str]) -> None:
    if type(doc) is dict and doc:
        _emit_mapping(doc, "", "", out, set())
    elif type(doc) is list and doc:
        _emit_sequence(doc, "", out, set())
    else:
        raise NotSimple("root")


def _emit_mapping(mapping: dict[Any, Any], pad: str, lead: str, out: list[str], seen: set[int]) -> None:
    """``pad`` starts every line but the first, which ``lead`` starts: ``pad`` on a line of its
    own, ``""`` after the ``- `` the caller wrote. Written by the writer of its key sequence
    (:func:`_mapping_writer`)."""
    key = (lead, pad, tuple(mapping))
    write = _MAPPING_WRITERS.get(key)
    if write is None:
        write = _MAPPING_WRITERS[key] = _mapping_writer(key, mapping)
    write(mapping, out, seen)


def _emit_entry(prefix: str, value: Any, pad: str, out: list[str], seen: set[int]) -> None:
    """One entry: ``prefix`` is its line up to the key's colon."""
    kind = type(value)
    if kind is str:
        out.append(f"{prefix} {_SCALAR_TEXTS[value]}\n")
    elif kind is dict:
        if value:
            out.append(prefix + "\n")
            inner = pad + "  "
            if len(value) >= _TEXT_BLOCK_MIN and is_text_map(value):  # labels: their block once per content
                _not_seen(value, seen)
                out.append(_TEXT_BLOCKS[(inner, tuple(value.items()))])
            else:
                _emit_mapping(value, inner, inner, out, seen)
        else:
            _not_seen(value, seen)
            out.append(prefix + " {}\n")
    elif kind is list:
        if value:
            out.append(prefix + "\n")
            _emit_sequence(value, pad, out, seen)
        else:
            _not_seen(value, seen)
            out.append(prefix + " []\n")
    else:
        out.append(f"{prefix} {_scalar(value, kind)}\n")


Writer = Callable[[dict[Any, Any], list[str], set[int]], None]
_INLINE_DEPTH = 4  # nested mappings written out inside their parent's writer


def _mapping_writer(content: tuple[str, str, tuple[Any, ...]], example: dict[Any, Any]) -> Writer:
    """The writer of the mappings with one key sequence at one indentation (a kind's objects share a
    few), generated from the first one written: every entry written out, a string value in one step
    (its text memoised, the key's line prefix a constant), a nested mapping with the example's keys
    written out in place (its keys checked first), anything else by :func:`_emit_entry`. Every
    mapping it writes is written from its own content; one written twice in a document is an
    anchor for the dumper (:class:`NotSimple`)."""
    lead, pad, keys = content
    code = _WriterCode()
    code.mapping("m", example, lead, pad, 1, 0)
    namespace = {"P": code.prefixes, "K": code.keys, "S": _SCALAR_TEXTS, "ENTRY": _emit_entry,
                 "NotSimple": NotSimple, "TB": _TEXT_BLOCKS, "TEXT_MAP": is_text_map, "MIN": _TEXT_BLOCK_MIN}
    exec("def write(m, out, seen):\n" + "\n".join(code.lines), namespace)  # our generated code
    write: Writer = namespace["write"]  # type: ignore[assignment]
    return write


class _WriterCode:
    """The source of one generated mapping writer (:func:`_mapping_writer`)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.prefixes: list[str] = []
        self.keys: list[tuple[str, ...]] = []
        self.count = 0

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def mapping(self, var: str, example: dict[Any, Any], lead: str, pad: str, depth: int, nesting: int) -> None:
        if not all(type(key) is str for key in example):  # 1 and True are one key of the memo: the dumper decides
            raise NotSimple("key")
        self.line(depth, f"if id({var}) in seen: raise NotSimple('shared')")
        self.line(depth, f"seen.add(id({var}))")
        names = []
        for _key in example:
            self.count += 1
            names.append(f"v{self.count}")
        self.line(depth, f"{''.join(n + ', ' for n in names)}= {var}.values()")
        for index, (key, name) in enumerate(zip(example, names)):
            prefix = len(self.prefixes)
            self.prefixes.append((lead if index == 0 else pad) + _key_text(key) + ":")
            self.entry(name, example[key], prefix, pad, depth, nesting)

    def entry(self, name: str, sample: Any, prefix: int, pad: str, depth: int, nesting: int) -> None:
        self.line(depth, f"if type({name}) is str: out.append(f'{{P[{prefix}]}} {{S[{name}]}}\\n')")
        inner = pad + "  "
        if type(sample) is dict and sample and nesting < _INLINE_DEPTH \
                and not (len(sample) >= _TEXT_BLOCK_MIN and is_text_map(sample)):
            self.keys.append(tuple(sample))
            self.line(depth, f"elif type({name}) is dict and tuple({name}) == K[{len(self.keys) - 1}]:")
            self.line(depth + 1, f"out.append(P[{prefix}] + '\\n')")
            self.mapping(name, sample, inner, inner, depth + 1, nesting + 1)
        elif type(sample) is dict and sample:  # a labels block
            self.line(depth, f"elif type({name}) is dict and len({name}) >= MIN and TEXT_MAP({name}):")
            self.line(depth + 1, f"if id({name}) in seen: raise NotSimple('shared')")
            self.line(depth + 1, f"seen.add(id({name}))")
            self.line(depth + 1, f"out.append(P[{prefix}] + '\\n'); out.append(TB[({inner!r}, tuple({name}.items()))])")
        self.line(depth, f"else: ENTRY(P[{prefix}], {name}, {pad!r}, out, seen)")


_MAPPING_WRITERS: Bounded[tuple[str, str, tuple[Any, ...]], Writer] = Bounded(4096)


_ONLY_STR = frozenset({str})


def is_text_map(data: dict[Any, Any]) -> bool:
    """Whether a mapping holds only ``str`` keys and values (labels, annotations); checked in C."""
    return set(map(type, data)) <= _ONLY_STR and set(map(type, data.values())) <= _ONLY_STR


def _new_text_block(content: tuple[str, tuple[tuple[str, str], ...]]) -> str:
    pad, items = content
    lines: list[str] = []
    _emit_mapping(dict(items), pad, pad, lines, set())
    return "".join(lines)


# The block of a mapping of strings per indentation and content: label sets repeat across
# thousands of objects (every NodeFeature's labels are one of a few dozen).
_TEXT_BLOCK_MIN = 4
_TEXT_BLOCKS: Memo[tuple[str, tuple[tuple[str, str], ...]], str] = Memo(_new_text_block, 4096)


def _emit_sequence(items: list[Any], pad: str, out: list[str], seen: set[int]) -> None:
    if id(items) in seen:
        raise NotSimple("shared")
    seen.add(id(items))
    inner = pad + "  "
    for index, value in enumerate(items):
        dash = pad + "- " if index or not out or not out[-1].endswith("- ") else "- "
        kind = type(value)
        if kind is dict and value:
            out.append(dash)
            _emit_mapping(value, inner, "", out, seen)
        elif kind is list and value:
            out.append(dash)
            _emit_sequence(value, inner, out, seen)
        elif kind is dict or kind is list:
            _not_seen(value, seen)
            out.append(dash + ("{}\n" if kind is dict else "[]\n"))
        else:
            out.append(f"{dash}{_scalar(value, kind)}\n")


def _not_seen(value: Any, seen: set[int]) -> None:
    if id(value) in seen:
        raise NotSimple("shared")
    seen.add(id(value))


class Manifests(list[dict[str, Any]]):
    """Rendered objects, and what the render knows of them: whether a float may be among their
    values (``floats``: JSON output is written without looking for one when none can be, see
    :func:`dump_json`)."""

    def __init__(self, objects: Iterable[dict[str, Any]], floats: bool) -> None:
        super().__init__(objects)
        self.floats = floats


def may_hold_floats(objects: Sequence[Any]) -> bool:
    """``False`` only for rendered objects known to hold no float."""
    return not isinstance(objects, Manifests) or objects.floats


# What the writers (and the text's encoding) raise for an object they cannot write: a type they do
# not know (orjson's JSONEncodeError is a TypeError, PyYAML's RepresenterError a YAMLError), a lone
# surrogate (UnicodeEncodeError), nesting deeper than the interpreter's stack.
WRITE_ERRORS = (TypeError, ValueError, yaml.YAMLError, RecursionError)


def dump_json(obj: Any, floats: bool = True) -> str:
    """``json.dumps(obj, indent=2, ensure_ascii=False)`` plus a newline, written by orjson when the
    two agree byte for byte: ``indent`` sends the stdlib to its pure-Python encoder (0.16 s for a
    10,000-Node render, orjson 0.006 s). They differ on floats (``1e+16`` / ``1e16``, ``NaN`` /
    ``null``), non-string keys and ints over 64 bits, so those go to the stdlib. orjson refuses the
    last two itself; floats are looked for unless the caller knows there is none (``floats=False``:
    a render knows where each of its values came from, and looking costs more than writing)."""
    if not (floats and has_float(obj)):
        try:
            return orjson.dumps(obj, default=_not_plain_json, option=_ORJSON_OPTIONS).decode()
        except TypeError:  # a non-string key, a huge int, a lone surrogate, a type json would refuse
            pass
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


_ORJSON_OPTIONS = (orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATACLASS
                   | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS)


def _not_plain_json(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def has_float(obj: Any) -> bool:
    """Whether a float is anywhere in ``obj`` (an explicit stack: output nests only a few levels,
    but there are hundreds of thousands of values)."""
    stack = [obj]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif kind is float:
            return True
    return False


class NotSimple(Exception):
    """A value outside what the block emitter writes: libyaml's dumper writes it."""
