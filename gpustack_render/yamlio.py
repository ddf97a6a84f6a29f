"""YAML and JSON input/output.

Bulk snapshot data goes through stdlib ``json`` or libyaml (PyYAML's C loader), because
pure-Python YAML loaders take minutes on 40 MB snapshots; rule files and templates are read, with
their positions, by :mod:`gpustack_render.rulesyaml` (ruamel's round-trip loader).
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import orjson
import yaml
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

