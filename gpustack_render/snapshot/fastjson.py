"""JSON snapshot files read from bytes in one C pass (msgspec), the bulk kinds typed on the way.

A 10,000-Node ``kubectl get -o json`` List is ~65 MB. ``json.loads`` builds a dict for every
object only for msgspec to convert it again; here the file is decoded once from bytes: the List
into one raw slice per item, each item's ``apiVersion``/``kind`` by a two-field header, and the
Nodes, Devices and Namespaces straight into their typed structs (``inputs.FAST_MODELS``). Every
other item is handed back as the dict ``json.loads`` would give, for the unchanged slow path.

Nothing here words an error. Whenever this reader cannot promise the result ``json.loads`` plus
``inputs.fast_validate`` would give, it declines: for the whole file (not UTF-8, not JSON msgspec
accepts, not an object at the top) the caller reads it as before; for one item (a typed decode
refused, a header it does not expect) that item goes back as a dict, so pydantic and
``locate_line`` word its problems exactly as before.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import msgspec

from gpustack_render.snapshot import inputs

# A document opening after JSON's insignificant whitespace (RFC 8259), which both json.loads and
# msgspec skip (a match at the start: the file is never copied).
_JSON_START = re.compile(rb"[ \t\r\n]*[\[{]")


_NO_ITEMS = msgspec.Raw(b"")


class _Top(msgspec.Struct):
    """A whole file: a ``*List`` keeps its items as raw slices; anything else is one object."""

    apiVersion: Any = None
    kind: Any = None
    items: msgspec.Raw = _NO_ITEMS  # (msgspec takes Raw alone, not in a union)


class _Head(msgspec.Struct):
    """What decides an item's model (a field of any type: the slow path words a wrong one)."""

    apiVersion: Any = None
    kind: Any = None


class _TopList(msgspec.Struct):
    """The common case read in one pass: ``items`` a list (or absent)."""

    apiVersion: Any = None
    kind: Any = None
    items: list[msgspec.Raw] | None = None


_TOP = msgspec.json.Decoder(_Top)
_TOP_LIST = msgspec.json.Decoder(_TopList)
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_HEAD = msgspec.json.Decoder(_Head)


@lru_cache(maxsize=None)
def _typed_decoder(struct: type) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(struct)


@dataclass
class TypedItem:
    """A bulk-kind object already typed; ``raw`` is its exact JSON text (for duplicate checks;
    ``None`` once the caller let it go)."""

    group: str
    kind: str
    typed: Any
    raw: msgspec.Raw | bytes | bytearray | None


def plain(raw: msgspec.Raw | bytes | bytearray) -> Any:
    """The object ``json.loads`` reads from ``raw`` (the slow path's input)."""
    return json.loads(bytes(raw))


def looks_like_json(data: bytes | bytearray) -> bool:
    return _JSON_START.match(data) is not None


def is_utf8(data: bytes | bytearray) -> bool:
    """msgspec checks UTF-8 only in the strings it keeps; the slow path refuses any bad byte."""
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_items(data: bytes | bytearray, fast_models: Callable[[str, str], type | None]) -> list[TypedItem | Any] | None:
    """The objects of one JSON file, in order: :class:`TypedItem` for the bulk kinds, otherwise
    the item as ``json.loads`` reads it (a dict, or whatever the file holds there). ``None``: the
    file is not for this reader (the caller reads it as before).

    ``fast_models(group, kind)`` gives the fast struct of a bulk kind, else ``None``.
    """
    if not looks_like_json(data) or not is_utf8(data):
        return None
    try:
        try:
            listed = _TOP_LIST.decode(data)
            is_list = isinstance(listed.kind, str) and listed.kind.endswith("List")
            items = listed.items if is_list else None
        except msgspec.ValidationError:  # ``items`` of another type, or not an object: read apart
            items = _list_items(_TOP.decode(data))
    except msgspec.DecodeError:  # not JSON msgspec reads (NaN, a lone surrogate, ...) or not an object
        return None
    return [_item(raw, fast_models) for raw in (items if items is not None else [data])]


def read_list(data: bytes | bytearray, fast_models: Callable[[str, str], type | None]) -> list[TypedItem | Any] | None:
    """The items of a JSON array (a run of a List's items), as :func:`read_items` gives them."""
    try:
        items = _ITEMS.decode(data)
    except msgspec.DecodeError:
        return None
    return [_item(raw, fast_models) for raw in items]


def _list_items(top: _Top) -> list[msgspec.Raw] | None:
    """A List's items, or ``None`` when the file is one object (``flatten_lists``' rule)."""
    if not (isinstance(top.kind, str) and top.kind.endswith("List")) or top.items is _NO_ITEMS:
        return None
    try:
        return _ITEMS.decode(top.items)
    except msgspec.ValidationError:  # ``items`` is not a list: the document is an object itself
        return None


def _item(raw: msgspec.Raw | bytes | bytearray, fast_models: Callable[[str, str], type | None]) -> TypedItem | Any:
    try:
        head = _HEAD.decode(raw)
    except msgspec.ValidationError:  # not a mapping
        return plain(raw)
    api, kind = head.apiVersion, head.kind
    if not isinstance(api, str) or not api or not isinstance(kind, str) or not kind:
        return plain(raw)
    group = api.rpartition("/")[0]
    struct = fast_models(group, kind)
    if struct is None:
        return plain(raw)
    try:
        typed = _typed_decoder(struct).decode(raw)
    except msgspec.ValidationError:
        return plain(raw)
    return TypedItem(group, kind, typed, raw)


def fast_models_for(models: dict[tuple[str, str], type[inputs.Model]]) -> Callable[[str, str], type | None]:
    """``(group, kind)`` → the fast struct of a bulk kind among ``models``."""
    table = {key: inputs.FAST_MODELS[model] for key, model in models.items() if model in inputs.FAST_MODELS}
    return lambda group, kind: table.get((group, kind))
