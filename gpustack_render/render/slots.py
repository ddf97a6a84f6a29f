"""Rendering a kind without re-reading every object's text: values enter as slots.

Every value enters a template through the ``q`` filter (JSON). Reading back 10,000 rendered texts
line by line cost more than rendering them, although they differ only in those values. So a second
compilation of each template (the *slotted* one) writes, for each ``{{ expr | q }}`` whose output
goes straight into the document, a private token instead of the JSON and records the value. The
text with tokens is the object's *shape*; each distinct shape is read once with the same reader as
before (:func:`gpustack_render.yamlio.load_simple_block`), and every object is then built from its
shape with, at each token's place, exactly what that reader returns for the value's JSON there.

Why that is exact: a token belongs to the same lexical class as the JSON it stands for (a JSON
string, object or array, or a plain scalar), contains nothing the reader's line and separator tests
look at (no newline, ``: ``, `` #``, quote or backslash escape it could misread), and its characters
survive every reading, so a token is recognised only where the reader decoded exactly its span as
that class, which is where it decodes the real JSON the same way:

* a JSON string token (``"<U+E000>N<U+E001>"``) read as a whole string: the real JSON string
  decodes to the value (``json`` round-trips every ``str``);
* an object token (``{"<U+E002>N<U+E001>": 0}``) or an array token (``["<U+E003>N<U+E001>", ": "]``)
  read by the JSON decoder: the real text is decoded by the same decoder (its float and constant
  hooks included). Both carry ``": "``, so where the reader would split a real non-empty object at
  its first ``": "`` (a sequence item, a key) the token fails too and the kind takes the old path;
* a plain token (``<U+E004>N'\\<U+E001>``, for numbers, booleans, null) read as a whole plain
  scalar: the reader resolves the real text as a plain scalar there (``_plain``). Its quote and
  backslash make it unreadable in single or double quotes or in JSON, so it cannot be recognised
  where the real text would be read as a quoted string.

Anything else sends the whole kind down the old path, with the real texts rebuilt from the chunks
the template yielded (no second rendering, so a template that changes its input is not run twice):
a token inside a larger scalar or key, a token missing or repeated, a token character written by
the template or a value outside ``q``, a shape outside the fast reader's subset, a value whose JSON
the fast reader would refuse (characters libyaml must judge, exponent floats, NaN), a template whose
``q`` output is captured rather than written (macros, ``{% set %}`` blocks, filter and call blocks,
recursive loops, inheritance). The object size limit is checked on the real size, computed from the
values' JSON lengths without building the text.

A *straight* template (only text and ``{{ obj.field | q }}``: NodeFeature, LocalQueue) is not run at
all: its fields are read as the sandbox reads them. When every field's values are all strings, all
string maps or all ints, booleans and None, the kind is read a field at a time (:class:`Batch`):
every object then has the same shape, whose builder is mapped over rows of readings (a string's
reading is itself; its JSON is only measured, in bulk). Mappings of strings are read once per
content and copied into each object. Where the builders put data maps in place with fixed keys, the
keys are written in sorted order, which is what the renderer's tidying makes of them.
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from typing import Any, Callable, Iterable, Iterator, Sequence

from jinja2 import Environment, Template, Undefined, nodes
from jinja2.exceptions import TemplateRuntimeError
from jinja2.ext import Extension

from gpustack_render.memo import Bounded
from gpustack_render.render.sandbox import DATA_VALUES, BoundedSandbox, public_fields
from gpustack_render.yamlio import (_JSON, _SIMPLE_TEXT_BAD, NotSimple, _plain, document_writer, has_float,
                                    load_simple_block)

SLOT_FILTER = "q slot"          # a filter name no template can write (it has a space)
_MARKERS = re.compile("[\ue000-\ue004]")
_STRING_TOKEN = re.compile("\ue000([0-9]+)\ue001")
_PLAIN_TOKEN = re.compile("\ue004([0-9]+)'\\\\\ue001")
_OBJECT_KEY = re.compile("\ue002([0-9]+)\ue001")
_ARRAY_ITEM = re.compile("\ue003([0-9]+)\ue001")
_MAX_DEPTH = 60                 # nesting the generated builder may have (Python's parser has limits)
_NEW_SHAPES = 64                # shapes one kind may add beyond a quarter of its objects

STRING, OBJECT, ARRAY, PLAIN = 0, 1, 2, 3
_ONLY_STR = frozenset({str})


def is_text_map(data: dict[Any, Any]) -> bool:
    """Whether a mapping holds only ``str`` keys and values (labels, annotations): such a map is
    tidied by sorting alone and read back from its JSON unchanged. Checked in C."""
    return set(map(type, data)) <= _ONLY_STR and set(map(type, data.values())) <= _ONLY_STR


class NotWritable(TemplateRuntimeError, TypeError):
    """``q`` was given a value JSON cannot write: a template mistake (an undefined name or attribute,
    a plan object instead of its field), reported at the template's line like any other."""


def _unwritable(value: Any) -> Any:
    """What the encoders do with a value JSON has no form for (called only for those)."""
    if isinstance(value, Undefined):
        value._fail_with_undefined_error()  # raises UndefinedError, worded by jinja
    raise NotWritable(f"the q filter cannot write a {type(value).__name__}: Object of type "
                      f"{type(value).__name__} is not JSON serializable")


# ``json.dumps(value, ensure_ascii=False, sort_keys=...)`` builds an encoder per call with these
# arguments; these are the same encoders, built once (dumps does nothing else with them; the default
# hook is called only for a value they cannot write, where dumps raises TypeError).
_ENCODE = json.JSONEncoder(ensure_ascii=False, default=_unwritable).encode
_ENCODE_SORTED = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=_unwritable).encode
# What that encoder writes for a str (its C string encoder).
_encode_string: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]


def _quote(value: Any) -> str:
    """The ``q`` filter: JSON, which YAML reads back unchanged."""
    return _ENCODE_SORTED(value) if isinstance(value, dict) else _ENCODE(value)


def _token(form: int, index: int) -> str:
    return (f'"\ue000{index}\ue001"', f'{{"\ue002{index}\ue001": 0}}', f'["\ue003{index}\ue001", ": "]',
            f"\ue004{index}'\\\ue001")[form]


# Token texts per form and slot number, made once: the same objects in every render, so a yielded
# chunk is recognised as a token by identity.
_TOKENS: tuple[list[str], ...] = tuple([_token(form, n) for n in range(64)] for form in range(4))


def token(form: int, index: int) -> str:
    texts = _TOKENS[form]
    while len(texts) <= index:
        texts.append(_token(form, len(texts)))
    return texts[index]


class Slot:
    """One ``q`` call: the value's JSON length (it counts for the size limit), what the fast reader
    makes of the JSON there if it reads it (``simple``), and the JSON itself for the old path
    (``None`` for a mapping read without it: :meth:`json_text` writes it again from the reading)."""

    __slots__ = ("form", "reading", "length", "text", "simple", "tidy")

    def __init__(self, form: int, reading: Any, length: int, text: str | None, simple: bool,
                 tidy: bool = False) -> None:
        self.form, self.reading, self.length, self.text, self.simple = form, reading, length, text, simple
        # The reading is a mapping of strings sorted by key (as the renderer tidies it), shared by
        # every object that took the same mapping: whoever puts it into an object copies it.
        self.tidy = tidy

    def json_text(self) -> str:
        return self.text if self.text is not None else _quote(self.reading)


class Recorder:
    """The slots of the object being rendered. Readings of immutable values are memoised per
    distinct value (label values and names repeat across thousands of objects); containers are
    read afresh on every call, so no two objects share a mutable part."""

    def __init__(self) -> None:
        self.slots: list[Slot] = []
        self.delta = 0  # the real text's length minus the shape's
        self.strings: dict[str, Slot] = {}
        self.scalars: dict[tuple[type, Any], Slot] = {}  # ints, booleans, None
        self.maps: dict[tuple[tuple[str, str], ...], Slot] = {}  # str → str mappings, by content
        # Whether a slot's reading may hold a float: JSON output is then written by the stdlib, whose
        # float text orjson does not share (yamlio.dump_json). Only generic readings can: strings and
        # text maps are str, memoised scalars are ints, booleans and None.
        self.floats = False

    def string(self, value: str) -> Slot:
        text = _encode_string(value)
        slot = self.strings[value] = Slot(STRING, value, len(text), text, _SIMPLE_TEXT_BAD.search(text) is None)
        return slot

    def text_map(self, value: dict[Any, Any]) -> Slot:
        """A str → str mapping (labels), read without writing its JSON: the sorted copy, as the
        JSON decoder reads ``{"k": "v", ...}`` back; the JSON's length summed from the strings'
        (``{``, ``"k": "v"`` joined by ``, ``, ``}``); fast-readable when every string is (the
        reader's refusals look inside one string's JSON, never across its quotes). Memoised per
        content (a few dozen distinct label sets among 10,000 Nodes): the slot is shared, marked
        ``tidy``, and the shapes' builders copy its reading into each object (:func:`_source`)."""
        if not is_text_map(value):
            return self.generic(value)
        content = tuple(value.items())
        return self.maps.get(content) or self._text_map(content)

    def text_maps(self, values: Iterable[dict[Any, Any]]) -> list[Slot] | None:
        """:meth:`text_map` of each of ``values``, or ``None`` when one is not a text map."""
        maps_get, out = self.maps.get, []
        for value in values:
            if not is_text_map(value):
                return None
            content = tuple(value.items())
            out.append(maps_get(content) or self._text_map(content))
        return out

    def _text_map(self, content: tuple[tuple[str, str], ...]) -> Slot:
        strings, length, simple = self.strings, 2, True
        for key, item in content:
            key_slot = strings.get(key) or self.string(key)
            item_slot = strings.get(item) or self.string(item)
            length += key_slot.length + item_slot.length + 4
            simple = simple and key_slot.simple and item_slot.simple
        known = self.maps[content] = Slot(OBJECT, dict(sorted(content)), length - 2 if content else 2, None,
                                          simple, True)
        return known

    def other(self, value: Any) -> Slot:
        kind = type(value)
        if kind is dict:
            return self.text_map(value)
        if kind is int or kind is bool or value is None:
            slot = self.scalars.get((kind, value))
            if slot is None:
                slot = self.scalars[(kind, value)] = _generic(value)
            return slot
        return self.generic(value)

    def take(self, value: Any) -> Slot:
        """The slot of ``value``, as :func:`_take` records it."""
        return self.strings.get(value) or self.string(value) if type(value) is str else self.other(value)

    def generic(self, value: Any) -> Slot:
        """:func:`_generic`, noting a reading that holds a float."""
        slot = _generic(value)
        if not self.floats and slot.reading is not None and has_float(slot.reading):
            self.floats = True
        return slot


def _take(value: Any, recorder: Recorder) -> str:
    """The slot filter: record ``value``, write its token."""
    if type(value) is str:
        slot = recorder.strings.get(value) or recorder.string(value)
    else:
        slot = recorder.other(value)
    slots = recorder.slots
    index = len(slots)
    slots.append(slot)
    texts = _TOKENS[slot.form]
    text = texts[index] if index < len(texts) else token(slot.form, index)
    recorder.delta += slot.length - len(text)
    return text


def _generic(value: Any) -> Slot:
    """A value read exactly as the reader reads its JSON text (any error ``q`` raises, raised
    the same, when the template calls it)."""
    text = _quote(value)
    first = text[0]
    form = STRING if first == '"' else OBJECT if first == "{" else ARRAY if first == "[" else PLAIN
    if _SIMPLE_TEXT_BAD.search(text):
        return Slot(form, None, len(text), text, False)
    try:
        if form == PLAIN:
            reading = _plain(text)
        else:
            reading, end = _JSON.raw_decode(text)
            if end != len(text):
                raise NotSimple(text)
    except NotSimple:
        return Slot(form, None, len(text), text, False)
    return Slot(form, reading, len(text), text, True)


class SlotExtension(Extension):
    """Holds the recorder the slotted templates write to; templates cannot reach it (it is named
    only by the rewritten syntax tree, as ``environment.extensions[...]``)."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.recorder = Recorder()


# Statements whose body is written straight to the output (not captured into a value).
_STRAIGHT = (nodes.If, nodes.With, nodes.Scope)


def _rewrite(body: Iterable[nodes.Node], identifier: str) -> int:
    """Turn every ``{{ expr | q }}`` written straight to the output into a slot; returns how many."""
    count = 0
    for node in body:
        if isinstance(node, nodes.Output):
            for child in node.nodes:
                if isinstance(child, nodes.Filter) and child.name == "q" and child.node is not None \
                        and not child.args and not child.kwargs and child.dyn_args is None \
                        and child.dyn_kwargs is None:
                    child.name = SLOT_FILTER
                    child.args = [nodes.ExtensionAttribute(identifier, "recorder", lineno=child.lineno)]
                    count += 1
        elif isinstance(node, nodes.If):
            count += _rewrite(node.body, identifier) + _rewrite(node.elif_, identifier) \
                + _rewrite(node.else_, identifier)
        elif isinstance(node, nodes.For) and not node.recursive:
            count += _rewrite(node.body, identifier) + _rewrite(node.else_, identifier)
        elif isinstance(node, _STRAIGHT):
            count += _rewrite(node.body, identifier)
    return count


class Slotted:
    """A template compiled with slots, or its straight form (never compiled: it is not run)."""

    def __init__(self, template: Template | None, straight: Straight | None) -> None:
        self.template, self.straight = template, straight


class Straight:
    """A template that is one run of text and slots: no statement, and every output either text or
    the ``q`` of an attribute chain of ``obj`` (``{{ obj.a.b | q }}``). Rendering it is reading
    those chains with the sandbox's ``getattr`` and recording each value, in order, exactly as its
    compiled code does; its text differs from object to object only in the tokens, so the chunks
    and the shape are made once per sequence of token forms."""

    def __init__(self, parts: list[str | tuple[str, ...]]) -> None:
        self.parts = parts
        self.chains = [part for part in parts if isinstance(part, tuple)]
        # per sequence of token forms: the chunks, the shape, and the shape's length without its tokens
        self.shapes: dict[tuple[int, ...], tuple[list[str], str, int]] = {}
        # Every chain one attribute: all of them read at once, in C (see _render_straight).
        self.names = [chain[0] for chain in self.chains] if all(len(c) == 1 for c in self.chains) else None
        self.read: Callable[[Any], tuple[Any, ...]] | None = None
        if self.names:
            getter = operator.attrgetter(*self.names)
            self.read = getter if len(self.names) > 1 else lambda item: (getter(item),)

    def learn(self, forms: tuple[int, ...]) -> tuple[list[str], str, int]:
        chunks, index, fixed = [], 0, 0
        for part in self.parts:
            if isinstance(part, tuple):
                chunks.append(token(forms[index], index))
                index += 1
            else:
                chunks.append(part)
                fixed += len(part)
        known = self.shapes[forms] = (chunks, "".join(chunks), fixed)
        return known


def _chain(node: nodes.Node) -> tuple[str, ...] | None:
    """``obj.a.b`` as ``("a", "b")``; ``None`` for any other expression."""
    names: list[str] = []
    while isinstance(node, nodes.Getattr):
        names.append(node.attr)
        node = node.node
    if isinstance(node, nodes.Name) and node.name == "obj" and node.ctx == "load" and names:
        return tuple(reversed(names))
    return None


def _straight(tree: nodes.Template) -> Straight | None:
    parts: list[str | tuple[str, ...]] = []
    for node in tree.body:
        if not isinstance(node, nodes.Output):
            return None
        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                if parts and isinstance(parts[-1], str):
                    parts[-1] += child.data
                else:
                    parts.append(child.data)
            elif isinstance(child, nodes.Filter) and child.name == SLOT_FILTER and child.node is not None \
                    and (chain := _chain(child.node)) is not None:
                parts.append(chain)
            else:
                return None
    return Straight(parts)


def slotted_template(env: Environment, name: str) -> Slotted | None:
    """``name`` compiled with its straight ``q`` outputs as slots, or ``None`` when it has none or
    uses inheritance (a child's top-level output is not written)."""
    if env.loader is None:
        return None
    try:
        source, filename, uptodate = env.loader.get_source(env, name)
        key = (name, filename or "", source)
        if key not in _COMPILED:
            _COMPILED[key] = _compile_slotted(env, source, name, filename)
        compiled = _COMPILED[key]
        if compiled is None:
            return None
        code, straight = compiled
        if code is None:
            return Slotted(None, straight)
        return Slotted(env.template_class.from_code(env, code, env.make_globals(None), uptodate), straight)
    except Exception:  # the real template was compiled already; this one is only a shortcut
        return None


# Slotted code per template name, file and source. Every Renderer configures its environment the same
# way (the sandbox class, this extension, the same options), which is all the compiled code depends
# on besides the source: a process that makes many Renderers (explain makes one per object, the test
# suite thousands) compiles each template once.
_COMPILED: Bounded[tuple[str, str, str], tuple[Any, Straight | None] | None] = Bounded(64)


def _compile_slotted(env: Environment, source: str, name: str,
                     filename: str | None) -> tuple[Any, Straight | None] | None:
    tree = env.parse(source, name, filename)
    if tree.find(nodes.Extends) is not None:
        return None
    if not _rewrite(tree.body, SlotExtension.identifier):
        return None
    straight = _straight(tree)
    return (None if straight is not None else env.compile(tree, name, filename)), straight


def install(env: Environment) -> Recorder:
    """Register the slot filter and extension on ``env``; the recorder the slotted templates use."""
    env.add_extension(SlotExtension)
    env.filters[SLOT_FILTER] = _take
    extension = env.extensions[SlotExtension.identifier]
    assert isinstance(extension, SlotExtension)
    return extension.recorder


class _Untidy(Exception):
    """A data map holds more than strings: the object is built plain and tidied the general way."""


def _tidy_strings(data: dict[Any, Any]) -> dict[Any, Any]:
    """What the renderer's ``_tidy`` makes of a data map of strings (sorted by key); anything else
    is left to it (raising :class:`_Untidy`), so its errors come where they always came."""
    if is_text_map(data):
        return dict(sorted(data.items()))
    raise _Untidy


class _Shape:
    """One distinct shape: how to build an object from its slots' readings (``None`` when the shape
    cannot be used, see the module docstring), and, when the data maps the renderer tidies sit at
    places the shape fixes, a builder that tidies them as it builds (``tidy``)."""

    __slots__ = ("build", "tidy", "floats")

    def __init__(self, build: Callable[[list[Slot]], Any] | None,
                 tidy: Callable[[list[Slot]], Any] | None = None, floats: bool = False) -> None:
        self.build, self.tidy, self.floats = build, tidy, floats


def _shape_tree(text: str, slots: int) -> Any:
    """The shape as the reader reads it, or ``None`` when it cannot be used."""
    if len(_MARKERS.findall(text)) != 2 * slots:
        return None
    try:
        return load_simple_block(text)
    except NotSimple:
        return None
    except Exception:  # the reader failed where libyaml must give the message: the old path does
        return None


def _compile_shape(text: str, slots: int, data_maps: Sequence[tuple[str, str]]) -> _Shape:
    tree = _shape_tree(text, slots)
    if tree is None:
        return _Shape(None)
    try:
        targets = _tidy_targets(tree, data_maps)
        build, floats = _builder(tree, slots, set())
        tidy = _builder(tree, slots, targets)[0] if targets else build
    except NotSimple:
        return _Shape(None)
    return _Shape(build, None if targets is None else tidy, floats)


def _builder(tree: Any, slots: int, tidy: set[int], rows: bool = False) -> tuple[Callable[[Any], Any], bool]:
    """The compiled :func:`_source` of a shape (over its slots, or with ``rows`` over a row of
    readings), and whether one of its constants is a float; :class:`NotSimple` when it cannot be
    built or does not hold each of the ``slots`` tokens once."""
    constants: list[Any] = []
    found: list[int] = []
    source = _source(tree, constants, found, 0, tidy, rows)
    if sorted(found) != list(range(slots)):
        raise NotSimple("slots")
    build = eval(compile(f"lambda {'r' if rows else 's'}: {source}", "<shape>", "eval"),  # noqa: S307 (indices only)
                 {"c": constants, "t": _tidy_strings})
    return build, any(type(constant) is float for constant in constants)


class _RowShape:
    """A shape's builder over a row of readings (:class:`Batch`), ``None`` when the shape cannot be
    used; whether it tidies as it builds (``tidied``), and whether a constant is a float."""

    __slots__ = ("build", "tidied", "floats", "writers")

    def __init__(self, build: Callable[[tuple[Any, ...]], Any] | None, tidied: bool = False,
                 floats: bool = False) -> None:
        self.build, self.tidied, self.floats = build, tidied, floats
        # per sequence of token forms: how yamlio writes an object of the shape (see writer)
        self.writers: dict[tuple[int, ...], Callable[[Sequence[Any]], str] | None] = {}

    def writer(self, forms: tuple[int, ...]) -> Callable[[Sequence[Any]], str] | None:
        """:func:`gpustack_render.yamlio.document_writer` of the objects this shape builds from rows
        of these forms: the object built from a row of words that each stand for one value (its
        mappings are mappings of strings: a batch takes no other)."""
        if forms not in self.writers:
            words = tuple(f"zzslot{index}q{len(forms)}z" for index in range(len(forms)))
            writer = None
            if self.build is not None and self.tidied:
                try:
                    sample = self.build(words)
                except _Untidy:
                    sample = None
                if sample is not None:
                    writer = document_writer(sample, [(word, index, form == OBJECT)
                                                      for index, (word, form) in enumerate(zip(words, forms))])
            self.writers[forms] = writer
        return self.writers[forms]


def _compile_row_shape(text: str, slots: int, data_maps: Sequence[tuple[str, str]]) -> _RowShape:
    """What :func:`_compile_shape` builds, over rows whose mappings are the sorted text maps'
    copies (a batch takes no other mapping): the tidy builder where there is one, else the plain."""
    tree = _shape_tree(text, slots)
    if tree is None:
        return _RowShape(None)
    try:
        targets = _tidy_targets(tree, data_maps)
        build, floats = _builder(tree, slots, targets or set(), rows=True)
    except NotSimple:
        return _RowShape(None)
    return _RowShape(build, targets is not None, floats)


def _tidy_targets(tree: Any, data_maps: Sequence[tuple[str, str]]) -> set[int] | None:
    """The nodes (by ``id``) the renderer's ``_tidy`` would tidy in every object of this shape,
    or ``None`` when that depends on the values (a slot as a key or as a whole parent)."""
    if _slot_index(tree) is not None or type(tree) is not dict or any(_slot_index(k) for k in tree):
        return None
    targets = set()
    for outer, inner in data_maps:
        parent = tree.get(outer)
        if _slot_index(parent) is not None:
            return None
        if type(parent) is not dict:
            continue
        if any(_slot_index(k) is not None for k in parent):
            return None
        child = parent.get(inner)
        slot = _slot_index(child)
        if (slot is not None and slot[0] == OBJECT) or (slot is None and type(child) is dict):
            targets.add(id(child))
    return targets


def _slot_index(value: Any) -> tuple[int, int] | None:
    """``(form, index)`` when ``value`` is a token's reading."""
    kind = type(value)
    if kind is str:
        match = _STRING_TOKEN.fullmatch(value)
        if match:
            return STRING, int(match.group(1))
        match = _PLAIN_TOKEN.fullmatch(value)
        if match:
            return PLAIN, int(match.group(1))
        if _MARKERS.search(value):
            raise NotSimple("token inside a scalar")
    elif kind is dict and len(value) == 1:
        ((key, item),) = value.items()
        match = _OBJECT_KEY.fullmatch(key) if type(key) is str else None
        if match and type(item) is int and item == 0:
            return OBJECT, int(match.group(1))
    elif kind is list and len(value) == 2 and type(value[0]) is str and value[1] == ": ":
        match = _ARRAY_ITEM.fullmatch(value[0])
        if match:
            return ARRAY, int(match.group(1))
    return None


def _source(value: Any, constants: list[Any], found: list[int], depth: int, tidy: set[int],
            rows: bool = False) -> str:
    """A Python expression building ``value`` afresh, slots as ``s[i]`` (``r[i]``, their
    readings, with ``rows``), leaves as ``c[i]``; the nodes in ``tidy`` wrapped in ``t(...)``, or,
    for a mapping whose keys are fixed strings and whose values are strings (fixed, or string
    slots: a JSON string reads as ``str``), written with its keys in sorted order: what ``t``
    makes of it for every object."""
    if depth > _MAX_DEPTH:
        raise NotSimple("deep")
    wrap = id(value) in tidy
    slot = _slot_index(value)
    if slot is not None:
        found.append(slot[1])
        if rows:  # a row's mapping is its own sorted copy already (Batch)
            return f"r[{slot[1]}]"
        expression = f"s[{slot[1]}].reading"
        if slot[0] != OBJECT:
            return expression
        # a shared mapping of strings (Recorder.text_map) is copied; any other is the object's own
        return f"({expression}.copy() if s[{slot[1]}].tidy else {f't({expression})' if wrap else expression})"
    kind = type(value)
    if kind is dict:
        entries = list(value.items())
        if wrap and all(type(k) is str and _slot_index(k) is None and _is_text(v) for k, v in entries):
            entries.sort(key=_FIRST)
            wrap = False
        parts = [f"{_source(k, constants, found, depth + 1, tidy, rows)}: "
                 f"{_source(v, constants, found, depth + 1, tidy, rows)}" for k, v in entries]
        expression = "{" + ", ".join(parts) + "}"
        return f"t({expression})" if wrap else expression
    if kind is list:
        return "[" + ", ".join(_source(v, constants, found, depth + 1, tidy, rows) for v in value) + "]"
    if kind not in (str, int, float, bool, type(None)):
        raise NotSimple(kind.__name__)
    constants.append(value)
    return f"c[{len(constants) - 1}]"


_FIRST = operator.itemgetter(0)


def _is_text(value: Any) -> bool:
    """Whether ``value`` (a shape's node) is a ``str`` in every object: a fixed string or a string slot."""
    slot = _slot_index(value)
    return type(value) is str and slot is None or slot is not None and slot[0] == STRING


class Rendered:
    """One object as the slotted template wrote it; ``simple`` when every slot is."""

    __slots__ = ("chunks", "slots", "shape", "simple")

    def __init__(self, chunks: list[str], slots: list[Slot], shape: str, simple: bool) -> None:
        self.chunks, self.slots, self.shape, self.simple = chunks, slots, shape, simple

    def real_text(self) -> str:
        """The text the template renders (the slots' JSON at the tokens' places)."""
        out, slots, index = [], self.slots, 0
        for chunk in self.chunks:
            if index < len(slots) and chunk is token(slots[index].form, index):
                out.append(slots[index].json_text())
                index += 1
            else:
                out.append(chunk)
        if index != len(slots):
            raise NotSimple("tokens out of order")
        return "".join(out)


class Batch:
    """Objects of one straight template whose values all took the same token forms: one shape,
    each object's slots' readings a row (``rows[i]``, mappings already the object's own copies).
    The slots themselves are made again only for the old path (``__iter__``)."""

    __slots__ = ("chunks", "shape", "simple", "rows", "columns", "recorder", "forms")

    def __init__(self, chunks: list[str], shape: str, simple: bool, rows: list[tuple[Any, ...]],
                 columns: list[list[Any]], recorder: Recorder, forms: tuple[int, ...]) -> None:
        self.chunks, self.shape, self.simple, self.rows = chunks, shape, simple, rows
        self.columns, self.recorder, self.forms = columns, recorder, forms

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Rendered]:
        """Each object as :func:`_render_straight` renders it (taking a value never raises here)."""
        take = self.recorder.take
        chunks, shape, simple = self.chunks, self.shape, self.simple
        for values in zip(*self.columns):
            yield Rendered(chunks, [take(value) for value in values], shape, simple)


_SIMPLE = operator.attrgetter("simple")
_LENGTH = operator.attrgetter("length")
_FORM = operator.attrgetter("form")
_READING = operator.attrgetter("reading")
_DICT_ONLY = frozenset({dict})
_MEMO_SCALARS = frozenset({int, bool, type(None)})


def _plain_json_strings(texts: list[str]) -> bool:
    """Whether none of these JSON strings holds what the fast reader refuses
    (``_SIMPLE_TEXT_BAD``): ASCII JSON from the encoder has no raw control character (it escapes
    them), so only DEL or a backslash sequence could match; else each is searched."""
    joined = "\n".join(texts)
    if joined.isascii() and "\\" not in joined and "\x7f" not in joined:
        return True
    return not any(map(_SIMPLE_TEXT_BAD.search, texts))


def _render_columns(env: Environment, straight: Straight, items: Sequence[Any], recorder: Recorder,
                    check_size: Callable[[int], None]) -> Batch | None:
    """:func:`_render_straight` a field at a time instead of an item at a time, when that cannot
    be told apart: every chain is one public dataclass field (read as the sandbox reads it, see
    sandbox.py), and every field's values are all strings, all text maps or all ints, booleans and
    None, whose readings are made without raising or running anything (a string's reading is
    itself; its JSON is only measured); the size limit is checked in item order. Anything else
    (``None``) takes the item-at-a-time way from the start."""
    names = straight.names
    if not names or type(env).getattr is not BoundedSandbox.getattr \
            or not all(frozenset(names) <= public_fields(cls) for cls in set(map(type, items))):
        return None
    other = recorder.other
    columns: list[list[Any]] = []
    readings: list[list[Any]] = []
    lengths: list[list[int]] = []
    forms: list[int] = []
    simple = True
    for name in names:
        try:
            values = list(map(operator.attrgetter(name), items))
        except Exception:  # raised again, where the template reads it
            return None
        kinds = set(map(type, values))
        if kinds <= _ONLY_STR:
            texts = list(map(_encode_string, values))
            forms.append(STRING)
            readings.append(values)
            lengths.append(list(map(len, texts)))
            simple = simple and _plain_json_strings(texts)
        else:
            if kinds <= _DICT_ONLY:
                slots = recorder.text_maps(values)
            elif kinds <= _MEMO_SCALARS:
                slots = [other(value) for value in values]
            else:
                return None
            if slots is None or len(set(map(_FORM, slots))) > 1:
                return None
            forms.append(slots[0].form)
            readings.append([slot.reading.copy() for slot in slots] if kinds <= _DICT_ONLY
                            else list(map(_READING, slots)))
            lengths.append(list(map(_LENGTH, slots)))
            simple = simple and all(map(_SIMPLE, slots))
        columns.append(values)
    chunks, shape, fixed = straight.shapes.get(tuple(forms)) or straight.learn(tuple(forms))
    totals = list(map(sum, zip(*lengths)))
    try:
        check_size(fixed + max(totals))
    except Exception:
        for total in totals:  # the first object over the limit is the one named
            check_size(fixed + total)
        raise
    return Batch(chunks, shape, simple, list(zip(*readings)), columns, recorder, tuple(forms))


def render_all(env: Environment, slotted: Slotted, items: Sequence[Any], recorder: Recorder,
               check_size: Callable[[int], None]) -> Sequence[Rendered] | Batch:
    """Every item through the slotted template, as ``template.render(obj=item)`` would run it
    (a context of the template's globals plus ``obj``, errors raised through jinja's handler)."""
    if slotted.straight is not None:
        return _render_columns(env, slotted.straight, items, recorder, check_size) \
            or _render_straight(env, slotted.straight, items, recorder, check_size)
    template = slotted.template
    assert template is not None  # compiled whenever the template is not straight
    root, context_class = template.root_render_func, env.context_class
    name, blocks = template.name, template.blocks
    flat = dict(template.globals)  # the same keys and values as the ChainMap, read in C
    out = []
    for item in items:
        recorder.slots = []
        recorder.delta = 0
        parent = flat.copy()
        parent["obj"] = item
        try:
            chunks = list(root(context_class(env, parent, name, blocks, globals=flat)))
        except Exception:
            env.handle_exception()
        shape = "".join(chunks)
        check_size(len(shape) + recorder.delta)
        out.append(Rendered(chunks, recorder.slots, shape, all([slot.simple for slot in recorder.slots])))
    return out


def _render_straight(env: Environment, straight: Straight, items: Sequence[Any], recorder: Recorder,
                     check_size: Callable[[int], None]) -> list[Rendered]:
    """What the straight template's code does per item (``environment.getattr`` along each chain,
    the slot filter on the value, in output order), without writing the text.

    When every chain is one public dataclass field, the sandbox's ``getattr`` is reading the
    field and returning it as it is when it is a data value (sandbox.py): so the fields are read
    at once and taken in order; the first value of another type (or a failing read) sends the item
    the sandbox's way from the start, which reads and takes the same values again (taking a value
    twice records nothing new). The size checked is the real text's: the shape's text around its
    tokens plus the values' JSON lengths."""
    getattr_, chains, shapes = env.getattr, straight.chains, straight.shapes
    read = straight.read if type(env).getattr is BoundedSandbox.getattr else None
    names = frozenset(straight.names or ())
    direct: dict[type, bool] = {}
    strings_get, string, other = recorder.strings.get, recorder.string, recorder.other
    out = []
    for item in items:
        slots: list[Slot] = []
        try:
            cls = type(item)
            fast = direct.get(cls)
            if fast is None:
                fast = direct[cls] = read is not None and names <= public_fields(cls)
            values: tuple[Any, ...] | None = None
            if fast:
                try:
                    values = read(item)  # type: ignore[misc]
                except Exception:  # the sandbox's way raises it, with jinja's handling
                    values = None
            if values is not None:
                append = slots.append
                for value in values:
                    kind = type(value)
                    if kind is str:
                        append(strings_get(value) or string(value))
                    elif kind in DATA_VALUES:
                        append(other(value))
                    else:
                        values = None
                        break
            if values is None:
                slots = []
                recorder.slots = slots
                recorder.delta = 0
                for chain in chains:
                    value = item
                    for attribute in chain:
                        value = getattr_(value, attribute)
                    _take(value, recorder)
        except Exception:
            env.handle_exception()
        forms = tuple([slot.form for slot in slots])
        chunks, shape, fixed = shapes.get(forms) or straight.learn(forms)
        check_size(fixed + sum([slot.length for slot in slots]))
        out.append(Rendered(chunks, slots, shape, all([slot.simple for slot in slots])))
    return out


class ShapeCache:
    """Distinct shapes of one renderer, compiled once. ``data_maps`` are the renderer's tidied
    ``(parent, map)`` places."""

    def __init__(self, data_maps: Sequence[tuple[str, str]]) -> None:
        self._shapes: dict[str, _Shape] = {}
        self._rows: dict[str, _RowShape] = {}
        self._data_maps = data_maps
        self.floats = False  # whether a shape this cache compiled has a float among its constants
        # Objects built from batches (by id, with the object, its row and its YAML writer), while a
        # caller collects them (Renderer.render_plan); else None.
        self.documents: dict[int, tuple[Any, tuple[Any, ...], Callable[[Sequence[Any]], str]]] | None = None

    def build(self, rendered: Sequence[Rendered] | Batch) -> tuple[list[Any], list[int]] | None:
        """The objects and the indices of those the renderer must still tidy; ``None`` when one
        of them must be read from its real text (then nothing built counts)."""
        if isinstance(rendered, Batch):
            return self._build_batch(rendered)
        shapes, budget = self._shapes, max(_NEW_SHAPES, len(rendered) // 4)
        objects: list[Any] = []
        untidy: list[int] = []
        append = objects.append
        for index, one in enumerate(rendered):
            if not one.simple:
                return None
            shape = shapes.get(one.shape)
            if shape is None:
                budget -= 1
                if budget < 0:  # nearly every object its own shape: compiling them would cost more
                    return None
                shape = shapes[one.shape] = _compile_shape(one.shape, len(one.slots), self._data_maps)
                self.floats = self.floats or shape.floats
            if shape.build is None:
                return None
            if shape.tidy is not None:
                try:
                    append(shape.tidy(one.slots))
                    continue
                except _Untidy:
                    pass
            append(shape.build(one.slots))
            untidy.append(index)
        return objects, untidy

    def _build_batch(self, batch: Batch) -> tuple[list[Any], list[int]] | None:
        """:meth:`build` of a batch: its one shape's row builder mapped over the rows. Objects built
        tidy are noted in ``documents`` (when given) with their rows and the shape's YAML writer."""
        if not batch.simple:
            return None
        shape = self._rows.get(batch.shape)
        if shape is None:
            shape = self._rows[batch.shape] = _compile_row_shape(batch.shape, len(batch.columns), self._data_maps)
            self.floats = self.floats or shape.floats
        if shape.build is None:
            return None
        if shape.tidied:
            try:
                objects = list(map(shape.build, batch.rows))
            except _Untidy:  # a fixed map of the shape holds more than strings: built one by one
                return self.build(list(batch))
            documents = self.documents
            writer = shape.writer(batch.forms) if documents is not None else None
            if writer is not None and documents is not None:
                documents.update(zip(map(id, objects), zip(objects, batch.rows, itertools.repeat(writer))))
            return objects, []
        return list(map(shape.build, batch.rows)), list(range(len(batch.rows)))
