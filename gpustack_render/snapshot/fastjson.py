"""JSON snapshot files read from bytes in one C pass (msgspec), the bulk kinds typed on the way.

A 10,000-Node ``kubectl get -o json`` List is ~65 MB. ``json.loads`` builds a dict for every
object only for msgspec to convert it again; here the file is decoded from its bytes (mapped, not
copied: :func:`map_file`), the Nodes, Devices and Namespaces straight into their models
(``inputs.BULK``, tagged by ``kind``); a Kueue Workload as its JSON text (:class:`Kept`,
typed only when asked for). Every other item is handed back as the dict ``json.loads`` would give
(:func:`plain`), for the unchanged slow path.

Two ways, one result. A List of bulk kinds only (``kubectl get nodes,devices -o json``, the bench
snapshots) is decoded in one call: its items typed as a union of the three structs. Any other
file (another kind among the items, an item msgspec refuses, a group that is not the bulk kind's)
makes that call fail or be thrown away, and the file is read item by item: the List into one raw
slice per item, then each item typed by the same union or, refused, read as plain data. A
file whose last objects are of other kinds (``gpustack-render snapshot`` writes them last, the
NodeFeatures among them) goes item by item at once: the one call would fail at its very end.

Nothing here words an error. Whenever this reader cannot promise the result ``json.loads`` plus
the kind's model would give, it declines: for the whole file (not UTF-8, not JSON msgspec
accepts, not an object at the top) the caller reads it as before; for one item (a typed decode
refused, a kind or group it does not type) that item goes back as a dict, which the snapshot
converts with the same model (:mod:`.refusal` words what it refuses, ``locate_line`` its line).
"""

from __future__ import annotations

import json
import mmap
import re
import sys
from pathlib import Path
from typing import Any, Callable, Union, cast

import msgspec

from gpustack_render.k8s import is_list_kind
from gpustack_render.snapshot import inputs, workload_kind

# A document opening after JSON's insignificant whitespace (RFC 8259), which both json.loads and
# msgspec skip (a match at the start: the file is never copied).
_JSON_START = re.compile(rb"[ \t\r\n]*[\[{]")

Buffer = bytes | bytearray | mmap.mmap
"""What the readers decode: a file's bytes, or the file mapped (:func:`map_file`)."""

TEXTS = (msgspec.Raw, bytes, bytearray, mmap.mmap)
"""The types of a JSON text :func:`raw_items` gives (a slice of a file, or the whole of it)."""

FastModels = Callable[[str, str], "type | None"]
"""``(group, kind)`` → the model of a bulk kind (one of ``inputs.BULK``), else
``None``: which objects are typed, e.g. ``fast_models_for(inputs.models(group))``."""

TYPED: tuple[type, ...] = inputs.BULK
"""The types of the typed objects :func:`read_items` hands back (anything else is plain data)."""

KINDS: dict[type, str] = {struct: struct.__struct_config__.tag for struct in TYPED}  # type: ignore[attr-defined]
"""A typed object's kind (its struct's tag)."""

_Bulk: Any = Union[TYPED]  # type: ignore[valid-type]  # (the tag picks the struct)

_NO_ITEMS = msgspec.Raw(b"")


class Kept(msgspec.Struct, frozen=True, gc=False):
    """A Kueue Workload kept as its JSON text: only ``admit`` and ``explain`` type it
    (snapshot/workloads.py), so a ``render`` builds no objects for 50,000 of them."""

    text: bytes
    apiVersion: str
    name: str
    namespace: str


class _PeekMeta(msgspec.Struct):
    name: Any = None
    namespace: Any = None


class _WorkloadPeek(msgspec.Struct, tag=workload_kind.KIND, tag_field="kind"):
    """What placing a Workload reads (its identity); every other field is skipped unbuilt."""

    apiVersion: Any = None
    metadata: _PeekMeta = msgspec.field(default_factory=_PeekMeta)


class _Top(msgspec.Struct):
    """A whole file: a ``*List`` keeps its items as raw slices; anything else is one object."""

    apiVersion: Any = None
    kind: Any = None
    items: msgspec.Raw = _NO_ITEMS  # (msgspec takes Raw alone, not in a union)


class _TopList(msgspec.Struct):
    """The common case read in one pass: ``items`` a list (or absent)."""

    apiVersion: Any = None
    kind: Any = None
    items: list[msgspec.Raw] | None = None


class _BulkList(msgspec.Struct):
    """A List of bulk kinds only, typed in the same pass."""

    apiVersion: Any = None
    kind: Any = None
    items: list[_Bulk] | None = None


_TOP = msgspec.json.Decoder(_Top)
_TOP_LIST = msgspec.json.Decoder(_TopList)
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_BULK_LIST = msgspec.json.Decoder(_BulkList)
_BULK_ITEMS = msgspec.json.Decoder(list[_Bulk])
_BULK = msgspec.json.Decoder(_Bulk)
_ANY = msgspec.json.Decoder()
_PEEK = msgspec.json.Decoder(_WorkloadPeek)
_WORKLOAD_TAG = f"'{workload_kind.KIND}'"  # in the union's refusal of a Workload ("Invalid value 'Workload'")

# The ``kind`` values near a file's end (see the module docstring: only to choose the way to read).
_KIND_VALUE = re.compile(rb'"kind"[ \t\r\n]*:[ \t\r\n]*"([^"\\]*)"')
_TAIL = 1 << 16
_BULK_TAGS = frozenset(kind.encode() for kind in KINDS.values())


def plain(raw: msgspec.Raw | Buffer) -> Any:
    """The object ``json.loads`` reads from ``raw`` (the slow path's input), decoded by msgspec in a
    third of the time (10,000 NodeFeatures in a ``snapshot`` file: 14 ms, not 45).

    The two give the same objects (numbers, exponents and 300,000 drawn floats, big integers,
    escapes, the last of duplicate keys at the first one's place: measured) where msgspec reads
    the text; where it refuses (NaN, a number out of range, a lone surrogate, too many digits)
    ``json.loads`` reads it, as before. They refuse nesting at different depths (993 and 996
    levels): a text that might nest that deep is left to ``json.loads``."""
    text = bytes(raw)
    if text.count(b"[") + text.count(b"{") < sys.getrecursionlimit() // 2:
        try:
            return _ANY.decode(text)
        except (msgspec.DecodeError, RecursionError):
            pass
    return json.loads(text)


def looks_like_json(data: Buffer) -> bool:
    return _JSON_START.match(data) is not None


def map_file(path: Path) -> mmap.mmap | None:
    """A snapshot file mapped read-only, for msgspec (JSON) or rapidyaml and RE2 (YAML) to read in
    place: reading 66 MB into a new bytes object cost as much as a third of the typed decode (the
    copy and the fresh pages), a mapping of the page cache next to nothing. ``None`` when it cannot
    be mapped (empty, not a regular file): the caller reads its bytes.

    A file truncated in place while it is read (``kubectl ... > file`` over an existing file, run
    meanwhile) ends the process with SIGBUS: no message, a non-zero status, nothing written. Read
    into memory it would have been read half written, which its reader reports as an error
    (kubectl writes a List's ``kind`` after its items). ``snapshot -o`` and editors replace a file
    by a rename, which is safe."""
    try:
        with open(path, "rb") as handle:
            return mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ, flags=_MAP_FLAGS)
    except (OSError, ValueError, OverflowError):  # (ValueError: an empty file)
        return None


_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)  # populated: no page fault per 4 KB
_ASCII_RUN = 1 << 18  # a mapping is checked a run at a time (copied within the cache: it has no isascii)


def is_utf8(data: Buffer) -> bool:
    """msgspec checks UTF-8 only in the strings it keeps; the slow path refuses any bad byte."""
    if isinstance(data, mmap.mmap):
        if all(data[start:start + _ASCII_RUN].isascii() for start in range(0, len(data), _ASCII_RUN)):
            return True
        data = data[:]
    elif data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_items(data: Buffer, fast_models: FastModels) -> list[Any] | None:
    """The objects of one JSON file, in order: a typed struct (one of :data:`TYPED`) for each object
    of a bulk kind, otherwise the item as ``json.loads`` reads it (a dict, or whatever the file
    holds there). ``None``: the file is not for this reader (the caller reads it as before).
    :func:`raw_items` gives the items' JSON texts, index for index."""
    if not looks_like_json(data) or not is_utf8(data):
        return None
    if not _tail_has_other_kinds(data):
        typed = _typed_list(data, fast_models)
        if typed is not None:
            return typed
    items = raw_items(data, checked=True)
    return None if items is None else [_item(raw, fast_models) for raw in items]


def read_list(data: bytes | bytearray, fast_models: FastModels) -> list[Any] | None:
    """The items of a JSON array (a run of a List's items), as :func:`read_items` gives them."""
    try:
        typed = _BULK_ITEMS.decode(data)
    except (msgspec.DecodeError, RecursionError):  # another kind among them (or not JSON: the item-wise read says)
        pass
    else:
        if _all_typed(typed, fast_models):
            return typed
    try:
        items = _ITEMS.decode(data)
    except msgspec.DecodeError:
        return None
    return [_item(raw, fast_models) for raw in items]


def raw_items(data: Buffer, checked: bool = False) -> list[msgspec.Raw | Buffer] | None:
    """The JSON text of each object :func:`read_items` gives for ``data`` (``None`` where it gives
    ``None``): a List's items, or the whole file when it is one object (``flatten_lists``' rule).
    ``checked``: the caller has seen that ``data`` looks like UTF-8 JSON."""
    if not checked and (not looks_like_json(data) or not is_utf8(data)):
        return None
    try:
        try:
            listed = _TOP_LIST.decode(data)
            items = listed.items if is_list_kind(listed.kind) else None
        except msgspec.ValidationError:  # ``items`` of another type, or not an object: read apart
            items = _list_items(_TOP.decode(data))
    except msgspec.DecodeError:  # not JSON msgspec reads (NaN, a lone surrogate, ...) or not an object
        return None
    return cast("list[msgspec.Raw | Buffer]", items) if items is not None else [data]


def _list_items(top: _Top) -> list[msgspec.Raw] | None:
    """A List's items, or ``None`` when the file is one object (``flatten_lists``' rule)."""
    if not is_list_kind(top.kind) or top.items is _NO_ITEMS:
        return None
    try:
        return _ITEMS.decode(top.items)
    except msgspec.ValidationError:  # ``items`` is not a list: the document is an object itself
        return None


def _tail_has_other_kinds(data: Buffer) -> bool:
    """Whether a ``kind`` other than a bulk kind's or a List's is named near the end of ``data``."""
    return any(kind not in _BULK_TAGS and not kind.endswith(b"List")
               for kind in _KIND_VALUE.findall(data, max(0, len(data) - _TAIL)))


def _typed_list(data: Buffer, fast_models: FastModels) -> list[Any] | None:
    """A List of bulk-kind objects only, typed in one call; ``None`` for any other file (read item
    by item: every way this call fails, the item-wise read decides alike)."""
    try:
        top = _BULK_LIST.decode(data)
    except (msgspec.DecodeError, RecursionError):  # (nesting ~1,000 deep: as the item-wise read words it)
        return None
    if not is_list_kind(top.kind) or top.items is None:
        return None
    return top.items if _all_typed(top.items, fast_models) else None


def _all_typed(items: list[Any], fast_models: FastModels) -> bool:
    """Whether :func:`_item` would keep every one of ``items`` typed (its group is the kind's)."""
    known: dict[tuple[type, str], bool] = {}
    for item in items:
        api = item.apiVersion
        if type(api) is not str:
            return False
        struct = type(item)
        good = known.get((struct, api))
        if good is None:
            good = known[(struct, api)] = _is_typed(struct, api, fast_models)
        if not good:
            return False
    return True


def _is_typed(struct: type, api: str, fast_models: FastModels) -> bool:
    return bool(api) and fast_models(api.rpartition("/")[0], KINDS[struct]) is struct


def _item(raw: msgspec.Raw | Buffer, fast_models: FastModels) -> Any:
    """One item typed, or as ``json.loads`` reads it. The union decodes exactly when the item's
    kind is a bulk kind (every ``kind`` key names it) and its struct accepts it, which is when the
    one struct ``fast_models`` gives for it would."""
    try:
        typed = _BULK.decode(raw)
    except msgspec.ValidationError as err:  # another kind, not a mapping, or refused by its struct
        # The union names the kind it refused: only a Workload is peeked (no second pass over the
        # other kinds, 10,000 NodeFeatures among them; a message worded otherwise only costs speed).
        kept = None
        if _WORKLOAD_TAG in str(err) and fast_models(workload_kind.GROUP, workload_kind.KIND) is Kept:
            kept = _kept(raw)
        return kept if kept is not None else plain(raw)
    api = typed.apiVersion
    if type(api) is str and _is_typed(type(typed), api, fast_models):
        return typed
    return plain(raw)


def _kept(raw: msgspec.Raw | Buffer) -> Kept | None:
    """A Kueue Workload with a usable identity as its text; ``None`` for anything else (read as
    plain data: an identity problem is worded by the slow path, as before)."""
    try:
        peek = _PEEK.decode(raw)
    except msgspec.ValidationError:
        return None
    api, name, namespace = peek.apiVersion, peek.metadata.name, peek.metadata.namespace
    if type(api) is not str or api.rpartition("/")[0] != workload_kind.GROUP or type(name) is not str or not name:
        return None
    if namespace is not None and type(namespace) is not str:
        return None
    return Kept(bytes(raw), api, name, namespace or "")


def fast_models_for(models: dict[tuple[str, str], inputs.Model]) -> FastModels:
    """``(group, kind)`` → the model of a bulk kind among ``models``."""
    table: dict[tuple[str, str], type] = {key: model for key, model in models.items() if model in inputs.BULK}
    table[(workload_kind.GROUP, workload_kind.KIND)] = Kept  # kept as text (see Kept)
    return lambda group, kind: table.get((group, kind))
