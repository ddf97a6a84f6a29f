"""YAML and JSON output.

Output: one block emitter for plain data, byte-identical to libyaml's dumper; which strings must be
quoted is decided by :mod:`gpustack_render.yamlscalars` (the YAML 1.1/1.2 scalar rules, shared with
the snapshot reader). JSON by orjson. Rule files and templates are read, with their positions, by
:mod:`gpustack_render.rulesyaml` (ruamel's round-trip loader); snapshot YAML (and the other YAML
inputs) by :mod:`gpustack_render.snapshot.yamlread`.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import orjson
import yaml

from gpustack_render.errors import UserError
from gpustack_render.memo import Bounded, Memo
from gpustack_render.yamlscalars import STR_TAG as _STR_TAG, read_as_non_string
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
    """A multi-document YAML stream, every document opened by ``---``: byte for byte what libyaml's
    dumper (:class:`StreamDumper`) writes for it, written by the block emitter below."""
    return _write_documents(list(objects), "---")


def dump_yaml(obj: Any) -> str:
    """One YAML document, without ``---``."""
    return _write_documents([obj], "")


def _slow_dump(obj: Any) -> str:
    """libyaml's text of one value: asked once per distinct scalar (and for a scalar document)."""
    return yaml.dump(obj, Dumper=StreamDumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 20)


# ---------------------------------------------------------------------------------------------
# The YAML writer: a block-style emitter, byte-identical to the dumper above, which it never hands
# a document to.
#
# PyYAML's representer chain costs about 30 us per scalar in Python; a render has hundreds of
# thousands. The layout of libyaml's block style is simple (two-space mappings, sequences in a
# mapping not indented, ``{}``/``[]`` for empty collections, ``? key`` / ``: value`` for a long or
# multi-line key, ``&id001`` / ``*id001`` for an object written twice, ``!!set`` for a set), and how
# each scalar is written (a string, a float, a date, bytes; a scalar document) is asked of the real
# dumper once per distinct value (cached), except for the common words that are plainly plain. A
# scalar's text spanning lines is written at column 0 and shifted to where it stands.
# ---------------------------------------------------------------------------------------------
def _value_text(value: str) -> str:
    """How the dumper writes the string ``value`` as a mapping value, at column 0 (a line break's
    next line indented by two)."""
    if _plainly_plain(value):  # (a letter word in one step, as most distinct values of a render are)
        return value
    return _slow_dump({"k": value})[3:-1]


def _write_key(value: str) -> str | None:
    """How the dumper writes the string ``value`` as a key; ``None`` for a key it writes as ``? key``
    (a long or multi-line one)."""
    return value if _plainly_plain(value) else _other_key(value)


def _indented(text: str, pad: str) -> str:
    """A scalar's text (written at column 0) as written under ``pad``: shifted by it after each
    line break that a character follows (libyaml's breaks: ``\\n``, ``\\r``, NEL, LS, PS)."""
    if not pad or not _LINE_BREAK.search(text):
        return text
    return _LINE_BREAK.sub(lambda match: match.group() + pad, text)


_BREAKS = "\r\n\x85\u2028\u2029"
_LINE_BREAK = re.compile(f"[{_BREAKS}](?=[^{_BREAKS}])")


class _Texts(dict[str, str]):
    """How each distinct string is written as a value under one indentation (label values repeat
    across thousands of objects): a hit is a dict lookup in C."""

    def __init__(self, pad: str) -> None:
        super().__init__()
        self.pad = pad

    def __missing__(self, value: str) -> str:
        kind: type = type(value)
        if kind is not str:  # written, not kept: 1, True and 1.0 are one key
            if kind in _ALIASED:
                raise _Off(kind.__name__)
            return _scalar_text(value, kind, self.pad)
        text = _indented(_value_text(value), self.pad)
        if len(self) >= 1 << 17:
            self.clear()
        self[value] = text
        return text


_TEXTS: dict[str, _Texts] = {}


def _texts(pad: str) -> _Texts:
    texts = _TEXTS.get(pad)
    if texts is None:
        texts = _TEXTS[pad] = _Texts(pad)
    return texts


_KEY_TEXTS: Memo[str, str | None] = Memo(_write_key, 1 << 17)
_OTHER_TEXTS: Bounded[tuple[type, str], str] = Bounded(4096)
_ALIASED = (dict, list, tuple, set, datetime.date, datetime.datetime)  # what the dumper anchors when shared


def _scalar_text(value: Any, kind: type, pad: str) -> str:
    """Any value but a string or a collection: libyaml's text of it, once per distinct value (a type
    it cannot write raises its RepresenterError)."""
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    key = (kind, repr(value))
    text = _OTHER_TEXTS.get(key)
    if text is None:
        text = _OTHER_TEXTS[key] = _slow_dump({"k": value})[3:-1]
    return _indented(text, pad)


def _key_line(key: Any, held: list[Any], anchors: _Anchors | None) -> str | None:
    """A key's text up to its colon, ``None`` for a key written as ``? key``."""
    if type(key) is str:
        return _KEY_TEXTS[key]
    if anchors is not None and type(key) is tuple and id(key) in anchors.written:
        return f"*{anchors.names[id(key)]} "  # an alias is a short key; the tuple's first use is ? key
    if type(key) is datetime.date or type(key) is datetime.datetime:  # a tuple: held where it is written
        held.append(key)
        if anchors is not None:
            mark, alias = anchors.mark(key)
            if alias:
                return mark + " "
            if mark:
                text = _other_key(key)
                return None if text is None else f"{mark} {text}"
    return _other_key(key)


def _other_key(key: Any) -> str | None:
    text = _slow_dump({key: 0})
    return None if text.startswith("? ") else text[:-4]


class _Anchors:
    """The anchors of one document whose objects are shared, named as the dumper's serializer names
    them: ``id001``, ... in the order their second use is met walking the document (keys before
    values)."""

    def __init__(self, doc: Any) -> None:
        self.names: dict[int, str] = {}
        self.written: set[int] = set()
        seen: set[int] = set()
        self._walk(doc, seen)

    def _walk(self, value: Any, seen: set[int]) -> None:
        kind = type(value)
        if kind not in _ALIASED or (kind is tuple and not value):
            return
        if id(value) in seen:
            if id(value) not in self.names:
                self.names[id(value)] = f"id{len(self.names) + 1:03d}"
            return
        seen.add(id(value))
        if kind is dict:
            for key, item in value.items():
                self._walk(key, seen)
                self._walk(item, seen)
        elif kind is not datetime.date and kind is not datetime.datetime:
            for item in value:
                self._walk(item, seen)

    def mark(self, value: Any) -> tuple[str, bool]:
        """``&name`` where a shared object is first written, ``*name`` (and ``True``) after."""
        name = self.names.get(id(value))
        if name is None:
            return "", False
        if id(value) in self.written:
            return "*" + name, True
        self.written.add(id(value))
        return "&" + name, False


def _write_documents(documents: list[Any], start: str) -> str:
    """Every document written as if no object were shared, the objects written kept in ``held``:
    when one is held twice, each document is written again by itself (:func:`_written_alone`)."""
    out: list[str] = []
    held: list[Any] = []
    head = start + "\n" if start else ""  # a mapping's first line: its first key's after it
    try:
        for doc in documents:
            if type(doc) is dict and doc:  # not held: a root inside itself recurses
                _mapping(doc, head, "", out, held, None)
            else:
                _document(doc, start, out, held, None)
    except RecursionError:  # an object inside itself (or nesting deeper than the stack)
        return "".join([_written_alone(doc, start) for doc in documents])
    if len(set(map(id, held))) == len(held):
        return "".join(out)
    return "".join([_written_alone(doc, start) for doc in documents])


def _written_alone(doc: Any, start: str) -> str:
    """One document, with the dumper's anchors and aliases if it holds an object twice or holds
    itself (which writing it without them finds by recursing); plain deep nesting raises the
    RecursionError again."""
    out: list[str] = []
    held: list[Any] = []
    try:
        _document(doc, start, out, held, None)
        if len(set(map(id, held))) == len(held):
            return "".join(out)
    except RecursionError:
        pass
    return _anchored(doc, start)


def _anchored(doc: Any, start: str) -> str:
    out: list[str] = []
    _document(doc, start, out, [], _Anchors(doc))
    return "".join(out)


def _document(doc: Any, start: str, out: list[str], held: list[Any], anchors: _Anchors | None) -> None:
    kind = type(doc)
    if kind is not dict and kind is not list and kind is not tuple and kind is not set or not doc:
        out.append(yaml.dump_all([doc], Dumper=StreamDumper, explicit_start=bool(start), allow_unicode=True,
                                 default_flow_style=False, width=1 << 20))  # a scalar's text
        return
    held.append(doc)
    if anchors is not None or kind is set:
        head = _head(start, anchors.mark(doc)[0] if anchors is not None else "", kind)
        if head:
            out.append(head + "\n")
    elif start:
        out.append(start + "\n")
    if kind is dict:
        _mapping(doc, "", "", out, held, anchors)
    elif kind is set:
        _entries(dict.fromkeys(doc), "", "", out, held, anchors)
    else:
        _sequence(doc, "", "", out, held, anchors)


def _head(start: str, mark: str, kind: type) -> str:
    """What precedes a collection's content on its first line: ``start``, an anchor, a set's tag."""
    return " ".join(word for word in (start, mark, "!!set" if kind is set else "") if word)


def _mapping(mapping: dict[Any, Any], lead: str, pad: str, out: list[str], held: list[Any],
             anchors: _Anchors | None) -> None:
    """``pad`` starts every line but the first, which ``lead`` starts: ``pad`` on a line of its
    own, ``"- "`` (with its indentation) after a sequence's dash. Written by the writer of its key
    sequence (:func:`_mapping_writer`) unless anchors are written."""
    if anchors is not None:
        _entries(mapping, lead, pad, out, held, anchors)
        return
    key = (lead, pad, tuple(mapping))
    writers = _MAPPING_WRITERS.get(key)
    if writers is None:
        writers = _MAPPING_WRITERS[key] = [_mapping_writer(key, mapping)]
    try:
        writers[0](mapping, out, held)
    except _OFF_SHAPE:  # the writer took back what it wrote
        _other_shape(writers, key, mapping, out, held)


_SHAPES = 16  # writers kept per key sequence (kinds that share their top-level keys)
_DISTINCT_CHECKS = 6  # a one-step document's mappings told apart by identity up to this many, else held


def _other_shape(writers: list[Writer], key: tuple[str, str, tuple[Any, ...]], mapping: dict[Any, Any],
                 out: list[str], held: list[Any]) -> None:
    """A mapping its key sequence's first writer does not write (another kind with the same keys
    at the top, a value of another type): the next writer that does is moved first, or one
    generated from this mapping joins them; entry by entry when that one fails too or enough are
    kept."""
    for index, write in enumerate(writers[1:], 1):
        try:
            write(mapping, out, held)
        except _OFF_SHAPE:
            continue
        writers.insert(0, writers.pop(index))
        return
    if len(writers) < _SHAPES:
        writers.insert(0, _mapping_writer(key, mapping))
        try:
            writers[0](mapping, out, held)
            return
        except _OFF_SHAPE:
            pass
    _entries(mapping, key[0], key[1], out, held, None)


def _entries(mapping: dict[Any, Any], lead: str, pad: str, out: list[str], held: list[Any],
             anchors: _Anchors | None) -> None:
    """A mapping's entries one by one: ``key: value``, or ``? key`` and ``: value`` for a key the
    dumper writes so."""
    line = lead
    for key, value in mapping.items():
        text = _key_line(key, held, anchors)
        if text is None:
            _item(line + "? ", key, pad, out, held, anchors)
            _item(pad + ": ", value, pad, out, held, anchors)
        else:
            _entry(line + text + ":", value, pad, out, held, anchors)
        line = pad


def _on_its_line(value: Any, pad: str, held: list[Any], anchors: _Anchors | None) -> tuple[str | None, str]:
    """The text of a value written where it stands (a scalar, an alias, a date with its anchor), or
    ``None`` and the anchor of a collection, which is laid out by its caller."""
    kind = type(value)
    if kind is str:
        return _texts(pad)[value], ""
    if kind not in _ALIASED:
        return _scalar_text(value, kind, pad), ""
    held.append(value)
    mark, alias = anchors.mark(value) if anchors is not None else ("", False)
    if alias:
        return mark, ""
    if kind is datetime.date or kind is datetime.datetime:
        return (mark + " " if mark else "") + _scalar_text(value, kind, pad), ""
    return None, mark


def _entry(prefix: str, value: Any, pad: str, out: list[str], held: list[Any], anchors: _Anchors | None) -> None:
    """One mapping entry's value: ``prefix`` is its line up to the key's colon, ``pad`` the
    mapping's indentation."""
    text, mark = _on_its_line(value, pad, held, anchors)
    if text is not None:
        out.append(f"{prefix} {text}\n")
        return
    kind = type(value)
    head = _head(prefix, mark, kind)
    inner = pad + "  "
    if not value:
        out.append(head + (" {}\n" if kind is dict or kind is set else " []\n"))
    elif kind is dict:
        out.append(head + "\n")
        if anchors is None and len(value) >= _TEXT_BLOCK_MIN and is_text_map(value):
            out.append(_TEXT_BLOCKS[(inner, tuple(value.items()))])  # labels: their block once per content
        else:
            _mapping(value, inner, inner, out, held, anchors)
    elif kind is set:
        out.append(head + "\n")
        _entries(dict.fromkeys(value), inner, inner, out, held, anchors)
    else:
        out.append(head + "\n")
        _sequence(value, pad, pad, out, held, anchors)


def _item(lead: str, value: Any, pad: str, out: list[str], held: list[Any], anchors: _Anchors | None) -> None:
    """A node after ``lead`` (a sequence's ``- ``, a long key's ``? `` or its value's ``: ``, with
    their indentation ``pad``): what it holds is indented by two more."""
    text, mark = _on_its_line(value, pad, held, anchors)
    if text is not None:
        out.append(f"{lead}{text}\n")
        return
    kind = type(value)
    head = _head("", mark, kind)
    inner = pad + "  "
    if not value:
        out.append(f"{lead}{head + ' ' if head else ''}{'{}' if kind is dict or kind is set else '[]'}\n")
        return
    if head:  # the content on the next lines; a sequence there after ? or : not indented
        out.append(lead + head + "\n")
        lead = inner if kind is not list and kind is not tuple or lead.endswith("- ") else pad
    if kind is dict:
        _mapping(value, lead, inner, out, held, anchors)
    elif kind is set:
        _entries(dict.fromkeys(value), lead, inner, out, held, anchors)
    else:
        _sequence(value, lead, lead if head else inner, out, held, anchors)


def _sequence(items: Sequence[Any], lead: str, pad: str, out: list[str], held: list[Any],
              anchors: _Anchors | None) -> None:
    """A block sequence at ``pad``, its first dash after ``lead``."""
    line = lead
    for value in items:
        _item(line + "- ", value, pad, out, held, anchors)
        line = pad


Writer = Callable[[dict[Any, Any], list[str], list[Any]], None]
_INLINE_DEPTH = 4  # nested mappings written out inside their parent's writer


class _Off(Exception):
    """A value a generated writer does not write in its one step (a collection where its example
    had a string, keys other than its example's): the mapping is written entry by entry."""


def _mapping_writer(content: tuple[str, str, tuple[Any, ...]], example: dict[Any, Any]) -> Writer:
    """The writer of the mappings with one key sequence at one indentation (a kind's objects share a
    few), generated from the first one written: its lines as one string built in one step, each
    string value's text memoised per indentation, each key's line a constant, a nested mapping
    with the example's keys written out in place (its keys checked first), a labels block once per
    content, anything else by :func:`_entry`. Every mapping it writes is written from its own
    content: what it does not write so raises :class:`_Off` (or the TypeError of looking an
    unhashable value up) and :func:`_mapping` writes that one entry by entry. Keys that are not all
    short strings: always entry by entry (:func:`_entries`)."""
    lead, pad, keys = content
    if not all(type(key) is str and _KEY_TEXTS[key] is not None for key in keys):
        return lambda mapping, out, held: _entries(mapping, lead, pad, out, held, None)
    code = _WriterCode()
    code.mapping("m", example, lead, pad, 0)
    code.flush()
    if not code.calls and not pad and len(code.held) <= _DISTINCT_CHECKS:
        # a whole document written in one step: no other part of it can share its mappings
        names = ["m", *code.held]
        pairs = [f"{a} is {b}" for index, a in enumerate(names) for b in names[index + 1:]]
        if pairs:
            code.lines.insert(len(code.lines) - 1, f"    if {' or '.join(pairs)}: raise OFF")
    elif code.held:
        code.line(f"held += ({', '.join(code.held)},)")
    if code.calls:  # what it wrote before a value it does not write is taken back
        code.lines = ["    written, kept = len(out), len(held)", "    try:",
                      *("    " + line for line in code.lines),
                      "    except OFF_SHAPE:", "        del out[written:], held[kept:]", "        raise"]
    namespace: dict[str, Any] = {"ENTRY": _entry, "TB": _TEXT_BLOCKS, "OFF": _Off, "OFF_SHAPE": _OFF_SHAPE}
    namespace.update({f"K{index}": keys for index, keys in enumerate(code.keys)})
    namespace.update({f"S{len(pad)}": _texts(pad) for pad in code.pads})
    exec("def write(m, out, held):\n" + "\n".join(code.lines), namespace)  # our generated code
    write: Writer = namespace["write"]
    return write


class _WriterCode:
    """The source of one generated mapping writer (:func:`_mapping_writer`)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.parts: list[str] = []  # string literals and f-strings of the text not yet appended
        self.keys: list[tuple[str, ...]] = []
        self.pads: set[str] = set()
        self.held: list[str] = []  # the mappings written in place (the caller holds "m")
        self.calls = False  # whether an entry is written by _entry (the text then goes out in parts)
        self.count = 0

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def text(self, literal: str) -> None:
        self.parts.append(repr(literal))

    def flush(self) -> None:
        if self.parts:
            self.line(f"out.append({' '.join(self.parts)})")
            self.parts = []

    def mapping(self, var: str, example: dict[Any, Any], lead: str, pad: str, nesting: int) -> None:
        names = []
        for _key in example:
            self.count += 1
            names.append(f"v{self.count}")
        self.line(f"{''.join(n + ', ' for n in names)}= {var}.values()")
        self.pads.add(pad)
        for index, (key, name) in enumerate(zip(example, names)):
            self.entry(name, example[key], (lead if index == 0 else pad) + str(_KEY_TEXTS[key]) + ":", pad, nesting)

    def entry(self, name: str, sample: Any, prefix: str, pad: str, nesting: int) -> None:
        inner = pad + "  "
        if type(sample) is str:
            self.text(prefix + " ")
            self.parts.append(f"f'{{S{len(pad)}[{name}]}}'")
            self.text("\n")
        elif type(sample) is dict and sample and nesting < _INLINE_DEPTH \
                and not (len(sample) >= _TEXT_BLOCK_MIN and is_text_map(sample)) \
                and all(type(key) is str and _KEY_TEXTS[key] is not None for key in sample):
            self.keys.append(tuple(sample))
            self.line(f"if type({name}) is not dict or tuple({name}) != K{len(self.keys) - 1}: raise OFF")
            self.held.append(name)
            self.text(prefix + "\n")
            self.mapping(name, sample, inner, inner, nesting + 1)
        elif type(sample) is dict and sample and is_text_map(sample):  # a labels block
            self.held.append(name)
            self.text(prefix + "\n")
            self.parts.append(f'f"{{TB[({inner!r}, tuple({name}.items()))]}}"')  # the pad: spaces in quotes
        else:
            self.flush()
            self.calls = True
            self.line(f"ENTRY({prefix!r}, {name}, {pad!r}, out, held, None)")


_MAPPING_WRITERS: Bounded[tuple[str, str, tuple[Any, ...]], list[Writer]] = Bounded(4096)
# What a generated writer raises for a mapping not of its example's shape (a string's memo refuses an
# unhashable value, a labels block's lookup a value that is not a mapping).
_OFF_SHAPE = (_Off, TypeError, AttributeError)


_ONLY_STR = frozenset({str})


def is_text_map(data: dict[Any, Any]) -> bool:
    """Whether a mapping holds only ``str`` keys and values (labels, annotations); checked in C."""
    return set(map(type, data)) <= _ONLY_STR and set(map(type, data.values())) <= _ONLY_STR


def _new_text_block(content: tuple[str, tuple[tuple[str, str], ...]]) -> str:
    pad, items = content
    if not items or not is_text_map(dict(items)):
        raise _Off("not a labels block")
    keys = [_KEY_TEXTS[key] for key, _value in items]
    if None not in keys:  # short keys: a line each
        texts = _texts(pad)
        return "".join([f"{pad}{key}: {texts[value]}\n" for key, (_key, value) in zip(keys, items)])
    lines: list[str] = []
    _entries(dict(items), pad, pad, lines, [], None)
    return "".join(lines)


# The block of a mapping of strings per indentation and content: label sets repeat across
# thousands of objects (every NodeFeature's labels are one of a few dozen).
_TEXT_BLOCK_MIN = 4
_TEXT_BLOCKS: Memo[tuple[str, tuple[tuple[str, str], ...]], str] = Memo(_new_text_block, 4096)




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
    """``json.dumps(obj, indent=2, ensure_ascii=False)`` plus a newline, byte for byte, written by
    orjson (``indent`` sends the stdlib to its pure-Python encoder: 0.16 s for a 10,000-Node render,
    orjson 0.006 s). Where orjson would write a value otherwise (a float: ``1e+16`` / ``1e16``,
    ``NaN`` / ``null``; an int over 64 bits, a key that is not a string, a subclass of a JSON type,
    which it refuses), the value is first given as the stdlib writes it (:func:`_json_ready`).
    Floats are looked for unless the caller knows there is none (``floats=False``: a render knows
    where each of its values came from, and looking costs more than writing)."""
    if floats and has_float(obj):
        obj = _json_ready(obj)
    try:
        return orjson.dumps(obj, default=_as_json, option=_ORJSON_OPTIONS).decode()
    except TypeError:  # an int over 64 bits, a key that is not a string: given as json writes them
        ready = _json_ready(obj)
    return orjson.dumps(ready, default=_as_json, option=_ORJSON_OPTIONS).decode()


_ORJSON_OPTIONS = (orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATACLASS
                   | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS)
_ORJSON_INT = 1 << 63  # orjson writes ints within 64 bits (json: any)


def _json_float(value: float) -> str:
    """A float as ``json.dumps`` writes it (``float.__repr__``; NaN and the infinities by name)."""
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _json_key(key: Any) -> str:
    """A key as ``json.dumps`` writes it."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return _json_float(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _json_ready(value: Any, depth: int = 0) -> Any:
    """``value`` with every value orjson would write otherwise than ``json.dumps`` given as the
    stdlib writes it: floats and big ints as :class:`orjson.Fragment` text, keys as strings, a
    subclass of a JSON type as that type, and a mapping whose keys meet as strings (``1`` and
    ``"1"``: json writes both) as its text, each entry written by orjson (``depth``: its indentation)."""
    kind = type(value)
    if kind is dict or kind is not str and isinstance(value, dict):
        keys = [_json_key(key) for key in value]
        if len(set(keys)) == len(keys):
            return {key: _json_ready(item, depth + 1) for key, item in zip(keys, value.values())}
        pad = "\n" + "  " * (depth + 1)  # each entry's text written at depth 0, then indented
        entries = [orjson.dumps(key).decode() + ": " + orjson.dumps(_json_ready(item), default=_as_json,
                                                                   option=_ORJSON_OPTIONS).decode()[:-1].replace("\n", pad)
                   for key, item in zip(keys, value.values())]
        return orjson.Fragment("{" + pad + ("," + pad).join(entries) + "\n" + "  " * depth + "}")
    if kind is list or kind is tuple or isinstance(value, (list, tuple)):
        return [_json_ready(item, depth + 1) for item in value]
    if kind is str or value is None or kind is bool:
        return value
    if kind is int and -_ORJSON_INT <= value < _ORJSON_INT:
        return value
    if isinstance(value, (int, float, str)):
        return _as_json(value)
    return value  # orjson's own types (a Fragment); anything else: _as_json refuses it


def _as_json(value: Any) -> Any:
    """orjson's hook for a value it does not write itself: a subclass of ``str``, ``int`` or ``float``
    as json writes it; anything else json's TypeError (a subclass of a collection too, so that
    :func:`dump_json` gives the whole object to :func:`_json_ready`)."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return orjson.Fragment(int.__repr__(value))
    if isinstance(value, float):
        return orjson.Fragment(_json_float(value))
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


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
