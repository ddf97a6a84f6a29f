"""YAML and JSON input/output.

Two loaders on purpose: bulk snapshot data goes through stdlib ``json`` or libyaml (PyYAML's C
loader), because pure-Python YAML loaders take minutes on 40 MB snapshots; rule files go through
ruamel's round-trip loader, slow but it remembers line and column for error messages.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import orjson
import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError, YAMLStreamError
from ruamel.yaml.resolver import implicit_resolvers as _ruamel_implicit_resolvers

from gpustack_render.errors import Problem, UserError
from gpustack_render.memo import Bounded, Memo

# libyaml's classes when PyYAML has them, chosen at run time: typed Any so they can be base classes
# (the stubs type the C and Python classes apart).
_CLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class BulkLoader(_CLoader):
    """libyaml safe loader that keeps timestamps as the strings kubectl printed."""


BulkLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _CLoader.yaml_implicit_resolvers.items()
}


# Which plain scalars must be quoted is decided where PyYAML decides it: implicit resolution. The
# serializer asks the dumper's resolver what a plain scalar would be read as and quotes a string
# whenever the answer is not ``str``. PyYAML's own resolver knows only its YAML 1.1 subset, but the
# output is read by many readers: kubectl / Argo CD (sigs.k8s.io/yaml, go-yaml v2: YAML 1.1 with
# ``y``/``n``, Go number syntax), kustomize and Go yaml.v3, ruamel.yaml (YAML 1.1 or 1.2), PyYAML.
# So the dumper's resolver answers "not a string" when any of them would read something else.
_STR_TAG = "tag:yaml.org,2002:str"
_AMBIGUOUS_TAG = "tag:yaml.org,2002:x-ambiguous-plain-scalar"  # never written: the scalar is quoted

# The YAML 1.1 spec and YAML 1.2 core schema tables as ruamel.yaml ships them (booleans incl.
# y/n/on/off, ints in every base with ``_``, sexagesimals, floats, ``.inf``/``.nan``, null, ``<<``,
# ``=``, timestamps): every entry whose tag is not ``str``, whatever the version.
_SPEC_NON_STRING = tuple(regexp for _versions, tag, regexp, _first in _ruamel_implicit_resolvers
                         if tag != _STR_TAG)

# Go readers (go-yaml v2/v3 behind kubectl, Argo CD, kustomize) drop every ``_`` from a scalar that
# starts like a number, then accept what Go's strconv accepts: base prefixes in either case
# (``0X1F``, ``0O17``, ``0B1``), a leading-zero octal, a decimal float without a digit before the
# point or with an unsigned exponent (``.5e3``), and ``08`` as a float.
_GO_NUMBER_START = frozenset("0123456789+-.")
_GO_NUMBER = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|[0-9]+"
                        r"|(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?)")
# go-yaml's timestamp layouts allow one-digit month, day, hour, minute and second (2006-1-2 3:4:5).
_GO_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
                           r"(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(?:\.[0-9]*)?"
                           r"(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::?[0-9]{2})?))?)?")
# The reserved words in any spelling of their case: no reader should have to agree on ``tRUE``.
_WORDS_ANY_CASE = re.compile(r"(?i:y|n|yes|no|on|off|true|false|null|~|[-+]?\.inf|\.nan)")


@lru_cache(maxsize=None)
def _spec_non_string() -> re.Pattern[str]:
    """:data:`_SPEC_NON_STRING` as one expression (each one's flags scoped to its branch): ``match``
    succeeds exactly when one of them does. Tried one by one through ruamel's lazy wrappers they
    cost 20 us per distinct string, a tenth of a second for the values of a 10,000-Node render."""
    branches = []
    for regexp in _SPEC_NON_STRING:
        pattern, flags = regexp.pattern, regexp.flags
        if flags & ~(re.VERBOSE | re.UNICODE):
            raise AssertionError(f"cannot combine {pattern!r}")
        # verbose: the newline ends a trailing comment before the group closes
        branches.append(f"(?x:{pattern}\n)" if flags & re.VERBOSE else f"(?:{pattern})")
    return re.compile("|".join(branches))


_SPEC_ONE_BY_ONE = [2_000]  # strings tried one expression at a time before the combined one pays its compile


def _spec_match(value: str) -> bool:
    """Whether one of :data:`_SPEC_NON_STRING` matches ``value`` (the same answer either way)."""
    if _SPEC_ONE_BY_ONE[0] > 0:
        _SPEC_ONE_BY_ONE[0] -= 1
        return any(regexp.match(value) for regexp in _SPEC_NON_STRING)
    return _spec_non_string().match(value) is not None


@lru_cache(maxsize=1 << 16)
def read_as_non_string(value: str) -> bool:
    """Whether some YAML reader of our output would read the plain scalar ``value`` as something
    other than that same string (cached: label values repeat across thousands of objects)."""
    if _spec_match(value):
        return True
    if _WORDS_ANY_CASE.fullmatch(value) or _GO_TIMESTAMP.fullmatch(value):
        return True
    return bool(value) and value[0] in _GO_NUMBER_START and bool(_GO_NUMBER.fullmatch(value.replace("_", "")))


class StreamDumper(_CDumper):
    """libyaml dumper; key order is decided by the caller, never re-sorted here. Strings that any
    reader would take for another type are quoted (see :func:`read_as_non_string`)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        tag = super().resolve(kind, value, implicit)
        if kind is yaml.ScalarNode and implicit[0] and tag == _STR_TAG and read_as_non_string(value):
            return _AMBIGUOUS_TAG
        return tag


_JSON_START = re.compile(r"\s*[\[{]")


def parse_documents(text: str, source: str) -> list[Any]:
    """Parse a snapshot file's text (JSON, or a YAML stream) into its documents.

    JSON is tried first only when the text looks like JSON: every JSON document is YAML, but the
    JSON parser is an order of magnitude faster. Two limits of Python's own are input errors too,
    not crashes: nesting deeper than the recursion limit, and an integer longer than the digits
    Python converts (``sys.get_int_max_str_digits()``).
    """
    try:
        return _parse_documents(text, source)
    except RecursionError:
        raise UserError.single("cannot be read: nested too deeply", file=source) from None
    except ValueError as err:  # (JSONDecodeError and YAMLError are worded where they are raised)
        reason = (f"a number longer than {sys.get_int_max_str_digits()} digits"
                  if "integer string conversion" in str(err) else str(err))
        raise UserError.single(f"cannot be read: {reason}", file=source) from None


def _parse_documents(text: str, source: str) -> list[Any]:
    if _JSON_START.match(text):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as err:
            if source.endswith(".json"):
                raise UserError([Problem(f"invalid JSON: {err.msg}", file=source, line=err.lineno,
                                         column=err.colno)]) from None
    try:
        return load_simple_stream(text)
    except NotSimple:
        pass
    try:
        return [doc for doc in yaml.load_all(text, Loader=BulkLoader) if doc is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        reason = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError([Problem(f"invalid YAML: {reason}", file=source,
                                 line=mark.line + 1 if mark else None,
                                 column=mark.column + 1 if mark else None)]) from None


def read_text(path: Path, display: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError.single("not UTF-8 text", file=display) from None
    except OSError as err:
        raise UserError.single(f"cannot read: {err.strerror or err}", file=display) from None


def load_roundtrip(path: Path, display: str) -> Any:
    """Load one rule file (or template) with positions for ``file:line:col`` messages (see
    :func:`parse_roundtrip`)."""
    return parse_roundtrip(read_text(path, display), display)


def parse_roundtrip(text: str, display: str) -> Any:
    """Parse a rule file's (or template's) text with positions: by libyaml when the text is in the
    subset where it builds exactly what ruamel's round-trip loader builds
    (:mod:`gpustack_render.yamlpos`, over ten times faster), else by ruamel, as always (its values,
    positions and error messages)."""
    from gpustack_render import yamlpos
    try:
        return yamlpos.load(text)
    except yamlpos.Declined:
        pass
    loader = YAML(typ="rt")
    try:
        return loader.load(text)
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        raise UserError([Problem(f"invalid YAML: {err.problem or err.context}", file=display,
                                 line=mark.line + 1 if mark else None,
                                 column=mark.column + 1 if mark else None)]) from None
    except (YAMLError, YAMLStreamError, ValueError, LookupError, TypeError) as err:  # ruamel's unmarked errors:
        # a bad character (ReaderError), a tagged scalar its constructor fails on (`!!int x`, `!!bool x`)
        raise UserError([Problem(f"invalid YAML: {str(err).splitlines()[0]}", file=display)]) from None


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
_PLAINLY_PLAIN = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./+-]*\Z")
_DUMPER_RESOLVERS: dict[Any, list[tuple[str, Any]]] = StreamDumper.yaml_implicit_resolvers


def _plainly_plain(value: str) -> bool:
    """A short word of safe characters that every reader takes for a string: written as it is."""
    if len(value) > 128:
        return False
    fast = _LETTER_WORD[0]
    if fast is not None:
        if fast.match(value):
            return True
    elif _ONE_BY_ONE[0] > 0:
        _ONE_BY_ONE[0] -= 1
    else:
        _LETTER_WORD[0] = _letter_word()
    if not _PLAINLY_PLAIN.match(value) or value.startswith("..."):
        return False
    if read_as_non_string(value):
        return False
    return not any(regexp.match(value)
                   for _tag, regexp in _DUMPER_RESOLVERS.get(value[0], []) + _DUMPER_RESOLVERS.get(None, []))


_ONE_BY_ONE = [250]  # words judged the long way before the combined expression pays its compile (the demo: 173)
_LETTER_WORD: list[re.Pattern[str] | None] = [None]  # _letter_word(), once compiled


def _letter_word() -> re.Pattern[str]:
    """What :func:`_plainly_plain` says yes to for a word starting with an ASCII letter, in one
    expression: a :data:`_PLAINLY_PLAIN` word (a letter never starts ``...`` nor a Go number) that
    no expression able to start with a letter matches (:func:`_letter_checks`). One that matches
    nothing when they cannot be combined: every word is then judged the long way."""
    try:
        return re.compile(f"(?!{_letter_checks()})[A-Za-z][A-Za-z0-9_./+-]*\\Z")
    except (AssertionError, re.error):
        return re.compile("(?!)")


def _letter_checks() -> str:
    """One expression (its text) whose ``match`` succeeds on a word starting with an ASCII letter
    whenever one of those :func:`_plainly_plain` asks does: the spec tables, the reserved words and
    Go timestamps (whole), and the dumper's resolvers of every first character (a superset of those
    it tries for one), each only if it can start with a letter (:func:`_first_characters`)."""
    branches = []
    patterns: list[tuple[Any, bool]] = [(regexp, False) for regexp in _SPEC_NON_STRING]  # ruamel's lazy wrappers
    patterns += [(_WORDS_ANY_CASE, True), (_GO_TIMESTAMP, True)]
    patterns += [(regexp, False) for resolvers in _DUMPER_RESOLVERS.values() for _tag, regexp in resolvers]
    for regexp, whole in dict.fromkeys(patterns):
        first = _first_characters(regexp)
        if first is not None and first.isdisjoint(_ASCII_LETTERS):
            continue
        pattern, flags = regexp.pattern, regexp.flags
        if flags & ~(re.VERBOSE | re.UNICODE):
            raise AssertionError(f"cannot combine {pattern!r}")
        # verbose: the newline ends a trailing comment before the group closes
        branch = f"(?x:{pattern}\n)" if flags & re.VERBOSE else f"(?:{pattern})"
        branches.append(branch + r"\Z" if whole else branch)
    return "|".join(branches) or "(?!)"


_ASCII_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _first_characters(regexp: Any) -> frozenset[str] | None:
    """The characters a string ``regexp`` matches at its start can start with, read from the
    expression's parse (Python's own parser); ``None`` when it could be any (an empty match, a
    class the reader does not list, a construct it does not know): a superset, never less."""
    try:
        from re import _parser  # type: ignore[attr-defined]
        tree = _parser.parse(regexp.pattern, regexp.flags)
        first, empty = _sequence_first(list(tree), bool(regexp.flags & re.IGNORECASE))
    except (ImportError, AttributeError, TypeError, ValueError, re.error):  # a parser of another shape
        return None
    return None if first is None or empty else first


def _sequence_first(items: list[Any], fold: bool) -> tuple[frozenset[str] | None, bool]:
    """(the first characters, whether it can match the empty string) of a parsed sequence."""
    found: set[str] = set()
    for op, argument in items:
        first, empty = _item_first(op, argument, fold)
        if first is None:
            return None, True
        found |= first
        if not empty:
            return frozenset(found), False
    return frozenset(found), True


def _item_first(op: Any, argument: Any, fold: bool) -> tuple[frozenset[str] | None, bool]:
    from re import _constants as c  # type: ignore[attr-defined]
    if op is c.LITERAL:
        return _folded({chr(argument)}, fold), False
    if op is c.IN:
        chars: set[str] = set()
        for kind, value in argument:
            if kind is c.LITERAL:
                chars.add(chr(value))
            elif kind is c.RANGE and value[1] - value[0] < 256:
                chars.update(map(chr, range(value[0], value[1] + 1)))
            else:  # a negated class, a category, ...
                return None, True
        return _folded(chars, fold), False
    if op is c.AT:
        return frozenset(), True
    if op is c.SUBPATTERN:
        _group, add, remove, pattern = argument
        return _sequence_first(list(pattern), (fold or bool(add & re.IGNORECASE)) and not remove & re.IGNORECASE)
    if op is c.BRANCH:
        found: set[str] = set()
        empty = False
        for branch in argument[1]:
            first, branch_empty = _sequence_first(list(branch), fold)
            if first is None:
                return None, True
            found |= first
            empty = empty or branch_empty
        return frozenset(found), empty
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
        low, _high, pattern = argument
        first, empty = _sequence_first(list(pattern), fold)
        return first, empty or low == 0
    return None, True


def _folded(chars: set[str], fold: bool) -> frozenset[str] | None:
    """``chars`` with their other ASCII case when the expression ignores case (``None`` when one is
    not ASCII: Unicode folds some of those onto ASCII letters)."""
    if not fold:
        return frozenset(chars)
    if not all(char.isascii() for char in chars):
        return None
    return frozenset(chars | {char.lower() for char in chars} | {char.upper() for char in chars})


def _value_text(value: str) -> str:
    """How the dumper writes the string ``value`` as a mapping value, at column 0 (a line break's
    next line indented by two); a letter word judged in one step (what :func:`_plainly_plain` would
    do first), as most distinct values of a render are."""
    fast = _LETTER_WORD[0]
    if fast is not None and len(value) <= 128 and fast.match(value) or _plainly_plain(value):
        return value
    return _slow_dump({"k": value})[3:-1]


def _write_key(value: str) -> str | None:
    """How the dumper writes the string ``value`` as a key; ``None`` for a key it writes as ``? key``
    (a long or multi-line one)."""
    if _plainly_plain(value):
        return value
    text = _slow_dump({value: 0})
    return None if text.startswith("? ") else text[:-4]


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
        fast = _LETTER_WORD[0]
        text = value if fast is not None and len(value) <= 128 and fast.match(value) \
            else _indented(_value_text(value), self.pad)
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


def load_yaml_text(text: str) -> Iterator[Any]:
    """Fast parse of text the tool produced itself (rendered templates)."""
    return yaml.load_all(text, Loader=BulkLoader)


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


# ---------------------------------------------------------------------------------------------
# Rendered templates: a fast reader for the block YAML subset templates write.
#
# Templates write block mappings and sequences whose values are JSON (the ``q`` filter) or short
# plain words; ``kubectl get -o yaml`` writes block YAML with plain and quoted one-line scalars.
# Parsing 10,000 such documents with PyYAML's pure-Python constructor took a quarter of a render,
# so that subset is read line by line here, JSON and double-quoted values by the C ``json`` module,
# single-quoted ones by hand, plain scalars through PyYAML's own resolver and constructor (so
# ``on``, ``0777`` or ``1:20`` read exactly as libyaml reads them). Anything outside the subset
# (comments after values, anchors, tags, block scalars, multi-line scalars, YAML-only escapes,
# flow collections that are not JSON, ...) raises :class:`NotSimple` and the caller falls back to
# libyaml, which also gives the error messages.
# ---------------------------------------------------------------------------------------------
class NotSimple(Exception):
    """The text is outside the subset :func:`load_simple_stream` reads, or a value outside what the
    block emitter writes: use libyaml."""


# Characters outside this set make libyaml complain or read differently (tabs, CR, BOM, controls).
_SIMPLE_TEXT_BAD = re.compile("[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
                              r"|\\/|\\u[dD][89a-fA-F]")
_JSON_VALUE_START = frozenset('"{[')
_PLAIN_BAD_START = frozenset(",[]{}#&*!|>'\"%@`")
_SAFE_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_RESOLVERS: dict[Any, list[tuple[str, Any]]] = BulkLoader.yaml_implicit_resolvers
_RESOLVED_TAGS = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool",
                            "tag:yaml.org,2002:null"})


def _no_constant(name: str) -> Any:
    raise NotSimple(name)  # NaN/Infinity are JSON extensions YAML reads as strings


def _yaml11_float(text: str) -> float:
    if "e" in text or "E" in text:  # PyYAML reads 1e3 as a string, 1.0e+3 as a float: not ours to guess
        raise NotSimple(text)
    return float(text)


_JSON = json.JSONDecoder(parse_constant=_no_constant, parse_float=_yaml11_float)
# The C string scanner json.decoder itself uses; typeshed leaves it out of json.decoder's stub.
_scan_string: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def _plain_ok(text: str) -> bool:
    """Whether ``text`` (stripped, one line) is a whole plain scalar in block context."""
    first = text[0]
    if first in "-?:":
        if len(text) == 1 or text[1] == " ":
            return False
    elif first in _PLAIN_BAD_START:
        return False
    return ": " not in text and " #" not in text and not text.endswith(":") and not text.startswith(("---", "..."))


def _plain(value: str) -> Any:
    """A plain scalar as PyYAML's safe loader reads it (implicit resolution, then construction)."""
    if not _plain_ok(value):
        raise NotSimple(value)
    if value[0] not in _RESOLVERS and None not in _RESOLVERS:
        return value  # no implicit type starts with this character
    return _resolved(value)


@lru_cache(maxsize=1 << 14)
def _resolved(value: str) -> Any:
    for tag, regexp in _RESOLVERS.get(value[0], []) + _RESOLVERS.get(None, []):
        if regexp.match(value):
            break
    else:
        return value
    if tag == _STR_TAG:
        return value
    if tag not in _RESOLVED_TAGS:
        raise NotSimple(value)  # merge keys, values, ...
    constructor = _SAFE_CONSTRUCTOR.yaml_constructors[tag]
    return constructor(_SAFE_CONSTRUCTOR, yaml.ScalarNode(tag, value))


def _single_quoted(text: str) -> tuple[str, int]:
    """A one-line single-quoted scalar at the start of ``text``: its value and where it ends."""
    pos = 1
    while True:
        end = text.find("'", pos)
        if end < 0:
            raise NotSimple(text)  # continues on the next line
        if text[end + 1:end + 2] == "'":
            pos = end + 2
            continue
        return text[1:end].replace("''", "'"), end + 1


def _inline(text: str) -> Any:
    """A value written on its key's (or dash's) line: JSON, a quoted or a plain scalar."""
    first = text[0]
    if first in _JSON_VALUE_START:
        try:
            value, end = _JSON.raw_decode(text)
        except ValueError:
            raise NotSimple(text) from None
        if end != len(text):
            raise NotSimple(text)
        return value
    if first == "'":
        value, end = _single_quoted(text)
        if end != len(text):
            raise NotSimple(text)
        return value
    return _plain(text)


def _split(content: str) -> tuple[Any, str] | None:
    """A mapping line's key and what follows ``: `` (``""`` for a nested block); ``None`` when the
    line is a scalar, not a mapping entry."""
    first = content[0]
    if first == '"' or first == "'":
        if first == '"':
            try:
                key, end = _scan_string(content, 1)
            except ValueError:
                raise NotSimple(content) from None
        else:
            key, end = _single_quoted(content)
        if end == len(content):
            return None
        if content[end] != ":" or content[end + 1:end + 2] not in ("", " "):
            raise NotSimple(content)
        return key, content[end + 1:].strip(" ")
    cut = content.find(": ")
    if cut < 0:
        if not content.endswith(":"):
            return None
        cut = len(content) - 1
    key_text = content[:cut].rstrip(" ")
    if not key_text:
        raise NotSimple(content)
    return _plain(key_text), content[cut + 1:].strip(" ")


def _is_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


class _Block:
    """Lines as (indent, content); a dash line's content is rewritten in place into the line of
    its item, as if it had been written on its own line at the item's column."""

    def __init__(self, text: str) -> None:
        self.lines: list[list[Any]] = []
        for raw in text.split("\n"):
            content = raw.strip(" ")
            if content and content[0] != "#":
                self.lines.append([len(raw) - len(raw.lstrip(" ")), content])
        self.pos = 0

    def indent(self) -> int:
        return self.lines[self.pos][0] if self.pos < len(self.lines) else -1

    def node(self, indent: int) -> Any:
        if _is_item(self.lines[self.pos][1]):
            return self.sequence(indent)
        return self.mapping(indent)

    def nested(self, parent: int, in_mapping: bool) -> Any:
        """The value of ``key:`` or ``-`` left empty on its line: a deeper block, a sequence at the
        key's own column (YAML allows that for a mapping's value), else null."""
        if self.pos < len(self.lines):
            indent = self.indent()
            if indent > parent:
                return self.node(indent)
            if indent == parent and in_mapping and _is_item(self.lines[self.pos][1]):
                return self.sequence(indent)
        return None

    def after_inline(self, indent: int) -> None:
        if self.indent() > indent:  # a continuation line (multi-line scalar) or a stray block
            raise NotSimple("continuation")

    def mapping(self, indent: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        while self.pos < len(self.lines) and self.indent() == indent:
            content = self.lines[self.pos][1]
            if _is_item(content):
                raise NotSimple(content)
            entry = _split(content)
            if entry is None:
                raise NotSimple(content)
            key, rest = entry
            self.pos += 1
            if rest:
                out[key] = _inline(rest)
                self.after_inline(indent)
            else:
                out[key] = self.nested(indent, True)
        return out

    def sequence(self, indent: int) -> list[Any]:
        out: list[Any] = []
        while self.pos < len(self.lines) and self.indent() == indent and _is_item(self.lines[self.pos][1]):
            line = self.lines[self.pos]
            rest = line[1][1:]
            stripped = rest.lstrip(" ")
            if not stripped:
                self.pos += 1
                out.append(self.nested(indent, False))
                continue
            column = indent + 1 + len(rest) - len(stripped)
            if _is_item(stripped) or _split(stripped) is not None:
                line[0], line[1] = column, stripped  # the item's first line, at its own column
                out.append(self.node(column))
            else:
                self.pos += 1
                out.append(_inline(stripped))
                self.after_inline(indent)
        return out


_DOCUMENT_START = re.compile(r"^---[ \t]*$", re.MULTILINE)


def load_simple_stream(text: str) -> list[Any]:
    """The non-empty documents of a YAML stream (``---`` separated) in the subset above, or
    :class:`NotSimple`. Used for YAML snapshots (``kubectl get -o yaml`` writes block YAML): the
    positions libyaml would give are recovered on the error path only (snapshot.locate_line)."""
    if _SIMPLE_TEXT_BAD.search(text):
        raise NotSimple("characters")
    documents = []
    for part in _DOCUMENT_START.split(text):
        block = _Block(part)
        if not block.lines:
            continue
        if block.lines[0][1][0] == "%":
            raise NotSimple("directive")
        value = block.node(block.indent())
        if block.pos != len(block.lines):
            raise NotSimple("trailing lines")
        if value is not None:
            documents.append(value)
    return documents

