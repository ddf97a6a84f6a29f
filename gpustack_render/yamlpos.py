"""Rule files read by libyaml, with the line and column of every key, value and item.

Rule files used to be read by ruamel.yaml's pure-Python round-trip loader (about 60 ms for the
built-in rules, most of the ``rules`` stage). libyaml's parser (PyYAML's C ``CSafeLoader``) gives the
same events with the same marks, over ten times faster (the built-in rules: 0.13 s → 0.007 s on a
loaded 2-core machine); this module builds the data from them, and :mod:`gpustack_render.rules.read`
reads the positions from :class:`MapPositions` and :class:`SeqPositions` instead of ruamel's ``.lc``.

The data must stay exactly what ruamel builds (rule files are YAML 1.2 for us, and the same values
of the same types reach the models), so this reader takes only the plain subset, where both agree by
construction, and declines everything else with :class:`Declined` (the caller then reads the file
with ruamel, exactly as before):

- plain scalars resolve with ruamel's own YAML 1.2 table (``ruamel.yaml.resolver``), so ``yes``
  stays a string and ``0777`` an int; the values built are what ruamel's round-trip constructor
  builds: ``str``, ``None``, ``bool``, ``int`` and, for ints with a leading zero (``0``),
  ruamel's ``ScalarInt`` with its width. Floats, timestamps, ``<<`` merges, ints in other bases or
  with ``_``, all go to ruamel;
- only single-line scalars, quoted ones without a backslash escape (YAML 1.1 and 1.2 differ in
  escapes and line folding, not there), no block scalars (ruamel builds ``LiteralScalarString``),
  no empty values (``key:`` with nothing: the two mark it in different places);
- no anchors, aliases, tags or directives, no complex keys, one document;
- no duplicate keys, no text libyaml refuses, no tabs, no characters outside ruamel's printable
  set and no line breaks other than ``\\n``: ruamel words those errors, as it always has.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import yaml
from ruamel.yaml.reader import Reader as _RuamelReader
from ruamel.yaml.resolver import implicit_resolvers as _RUAMEL_RESOLVERS
from ruamel.yaml.scalarint import ScalarInt

_Parser: Any = getattr(yaml, "CSafeLoader", None)  # None: PyYAML built without libyaml

Position = tuple[int, int]  # 0-based line and column, as ruamel's marks


class Declined(Exception):
    """The text is outside the subset read here: read it with ruamel."""


class MapPositions:
    """Where a mapping starts and where each of its keys and values starts."""

    __slots__ = ("start", "keys", "values")

    def __init__(self, start: Position) -> None:
        self.start = start
        self.keys: dict[Any, Position] = {}
        self.values: dict[Any, Position] = {}


class SeqPositions:
    """Where a sequence starts and where each of its items starts."""

    __slots__ = ("start", "items")

    def __init__(self, start: Position) -> None:
        self.start = start
        self.items: list[Position] = []


class PositionedMap(dict[Any, Any]):
    """A mapping of a rule file, with its :class:`MapPositions`."""

    __slots__ = ("positions",)
    positions: MapPositions


class PositionedSeq(list[Any]):
    """A sequence of a rule file, with its :class:`SeqPositions`."""

    __slots__ = ("positions",)
    positions: SeqPositions


def _yaml12_resolvers() -> dict[str | None, list[tuple[str, Any]]]:
    """ruamel's implicit resolvers for YAML 1.2 by first character (``None``: any), in its order."""
    table: dict[str | None, list[tuple[str, Any]]] = {}
    for versions, tag, regexp, first in _RUAMEL_RESOLVERS:
        if (1, 2) in versions:
            chars: list[str | None] = list(first) if first else [None]
            for char in chars:
                table.setdefault(char, []).append((tag, regexp))
    return table


_RESOLVERS = _yaml12_resolvers()
_NON_PRINTABLE = _RuamelReader.NON_PRINTABLE
_DECIMAL = re.compile(r"[-+]?[0-9]+")
_AWKWARD = re.compile("[\t\r\x85\u2028\u2029\ufeff]")
_TAG = "tag:yaml.org,2002:"


def _plain_value(text: str) -> Any:
    """A plain scalar as ruamel's round-trip constructor builds it under YAML 1.2."""
    for tag, regexp in _RESOLVERS.get(text[:1], []) + _RESOLVERS.get(None, []):
        if regexp.match(text):
            break
    else:
        return text
    if tag == _TAG + "null":
        return None
    if tag == _TAG + "bool":
        return text.lower() == "true"
    if tag == _TAG + "int" and _DECIMAL.fullmatch(text):
        sign, digits = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
        if digits[0] == "0":  # ruamel keeps the width of a leading zero
            return ScalarInt(sign * int(digits), width=len(digits), underscore=None, anchor=None)
        return sign * int(digits)
    raise Declined(f"a {tag} scalar")


class _Builder:
    """The data of one document from libyaml's events; ``text`` is the source, to look at what the
    events do not tell (a scalar's escapes, what follows a key)."""

    def __init__(self, text: str, events: Iterator[Any]) -> None:
        self.text = text
        self.events = events

    def scalar(self, event: Any) -> Any:
        if event.anchor is not None or event.tag is not None:
            raise Declined("anchor or tag")
        start, end = event.start_mark, event.end_mark
        if start.line != end.line:
            raise Declined("multi-line scalar")
        style = event.style
        if style == "'" or (style == '"' and "\\" not in self.text[start.index:end.index]):
            return event.value
        if style or not event.implicit[0]:
            raise Declined("escapes or a block scalar")
        if not event.value:  # ruamel marks an empty value where the next token starts, libyaml after the colon
            raise Declined("an empty value")
        return _plain_value(event.value)

    def node(self, event: Any) -> Any:
        kind = type(event)
        if kind is yaml.ScalarEvent:
            return self.scalar(event)
        if kind is yaml.MappingStartEvent:
            return self.mapping(event)
        if kind is yaml.SequenceStartEvent:
            return self.sequence(event)
        raise Declined(kind.__name__)  # an alias

    def key(self, event: Any) -> Any:
        if type(event) is not yaml.ScalarEvent:
            raise Declined("a complex key")
        end: Any = event.end_mark
        after = self.text[end.index:end.index + 2]
        if event.style and after[:1] == ":" and after[1:] not in ("", " ", "\n"):  # 'key':value
            raise Declined("a quoted key glued to its value")  # libyaml takes it, ruamel not always
        return self.scalar(event)

    def mapping(self, start: Any) -> PositionedMap:
        out = PositionedMap()
        positions = out.positions = MapPositions(_collection_start(start))
        for event in self.events:
            if type(event) is yaml.MappingEndEvent:
                return out
            key = self.key(event)
            if key in out:
                raise Declined("a duplicate key")  # ruamel words the error
            value_event = next(self.events)
            out[key] = self.node(value_event)
            positions.keys[key] = _start(event)
            positions.values[key] = _start(value_event)
        raise Declined("unterminated mapping")

    def sequence(self, start: Any) -> PositionedSeq:
        out = PositionedSeq()
        positions = out.positions = SeqPositions(_collection_start(start))
        for event in self.events:
            if type(event) is yaml.SequenceEndEvent:
                return out
            out.append(self.node(event))
            positions.items.append(_start(event))
        raise Declined("unterminated sequence")


def _start(event: Any) -> Position:
    return event.start_mark.line, event.start_mark.column


def _collection_start(event: Any) -> Position:
    if event.anchor is not None or event.tag is not None:
        raise Declined("anchor or tag")
    return _start(event)


def load(text: str) -> Any:
    """The single document of ``text`` as ruamel's round-trip loader (YAML 1.2) reads it, with
    positions; :class:`Declined` for anything outside the subset this reader is exact on."""
    if _Parser is None or _AWKWARD.search(text) or _NON_PRINTABLE.search(text):
        raise Declined("characters")
    try:
        events = iter(yaml.parse(text, Loader=_Parser))
        first, document = next(events), next(events)
        if type(first) is not yaml.StreamStartEvent or type(document) is not yaml.DocumentStartEvent \
                or document.version is not None or document.tags:
            raise Declined("directives or an empty stream")
        data = _Builder(text, events).node(next(events))
        if type(next(events)) is not yaml.DocumentEndEvent or type(next(events)) is not yaml.StreamEndEvent:
            raise Declined("more than one document")
    except (yaml.YAMLError, StopIteration, RecursionError) as err:
        raise Declined(type(err).__name__) from None
    return data
