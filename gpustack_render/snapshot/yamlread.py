r"""The one YAML reader of snapshots (and of the other YAML data the tool reads: CRDs, kustomization
files, kubeconfig, case files), with kubectl's YAML 1.1 readings, at C speed where it can.

A file is parsed by rapidyaml (C++), which writes it out as JSON; a snapshot's JSON goes through the
same msgspec reader as JSON snapshots (:mod:`.fastjson`), so Nodes, Devices and Namespaces are
typed straight from it (:func:`read_items`); other text is ``json.loads``-ed (:func:`documents`).
A 10,000-Node List (80 MB) takes 0.75 s this way; PyYAML's loader takes 36 s.

rapidyaml reads YAML 1.2 (``yes``, ``0777``, ``1_000``, ``1:20`` are strings to it, ``1e3`` a
number) and its JSON writer rewrites ``nan``/``inf`` and normalises ``5.``, where the tool has
always read YAML 1.1 as PyYAML does (kubectl's reading; timestamps kept as text). So a file goes to
rapidyaml only when one pre-scan (RE2, linear time, in C) finds in it none of:

* a plain value (after ``key:``, after ``-``, or alone on a line) that either reader could take
  for something the other does not, and a plain key that PyYAML does not read as a string or that
  rapidyaml rewrites, or an empty key: :mod:`gpustack_render.yamlscalars`' ``GUARD_*`` rules,
  which sit beside the writer's quoting rules;
* what would put scalars where the scan does not look or give them a type by other means: flow
  collections other than ``{}``/``[]``, tags, anchors, aliases, block scalars, complex keys,
  directives;
* a tab, CR, control character, BOM or line separator, and the escapes libyaml refuses (``\/``,
  surrogates).

Strings that merely look like numbers to a person (``64Gi``, ``10.0.0.1``, UUIDs, dates) are read
as strings by both and pass. Anything the scan finds, and any file rapidyaml refuses, is read by
libyaml (PyYAML's C loader, :class:`BulkLoader`), which also words every error and gives the lines
of a snapshot's field errors (:func:`locate_line`).
"""

from __future__ import annotations

import json
import os
import re
import sys
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import yaml

from gpustack_render import timing
from gpustack_render.errors import Problem, UserError
from gpustack_render.k8s import is_list_kind
from gpustack_render.snapshot import fastjson
from gpustack_render.yamlscalars import GUARD_ANY_FLOAT, GUARD_KEY_START, GUARD_KEY_WORDS, GUARD_ODD_INT, GUARD_WORDS

# --- the pre-scan (RE2 syntax: no look-around) ----------------------------------------------------
_VALUE_AT = rb"(?:(?::|-) +|^ *)"
_VALUE_END = rb" *(?: #[^\n]*)?$"
_KEY_AT = rb"^ *(?:- +)*"
_KEY_END = rb" *:(?: |$)"
_NOT_PLAIN_KEY = rb"(?:" + GUARD_KEY_START + rb"|-[^ \n])[^\n:]*(?::[^ \n][^\n:]*)*"
_DANGER = (
    rb"(?m)" + _VALUE_AT + rb"(?:" + GUARD_WORDS + rb"|" + GUARD_ODD_INT + rb"|" + GUARD_ANY_FLOAT + rb")" + _VALUE_END
    + rb"|" + _KEY_AT + rb"(?:" + GUARD_KEY_WORDS + rb"|" + _NOT_PLAIN_KEY + rb")?" + _KEY_END
    + rb"|" + _VALUE_AT + rb"(?:[,\]}!&*|>%@`]|\[(?:[^\]]|\] *[^ \n])|\{(?:[^}]|\} *[^ \n])|[?:](?: |$))"
    # RE2 reads a bytes pattern as UTF-8: the class is of code points. Anything but printable ASCII
    # and U+00A0-U+00FF declines (C1 controls and NEL, BOM, U+2028/2029, tabs, CR and all else).
    + rb"|[^\n\x20-\x7e\x{a0}-\x{ff}]|\\/|\\u[dD][89a-fA-F]")
# Lines at column 0 that are not an item of a column-0 sequence (nor a comment or blank line): the
# first line, and any after a newline (RE2 finds ``\n`` followed by one 4× faster than ``(?m)^``:
# 0.025 s, not 0.105, over a 10,000-Node List).
_TOP_LINE = rb"(?:[^ \-#\n]|-[^ \n])"


class _Engines(NamedTuple):
    ryml: Any  # the rapidyaml module (untyped), None when missing
    danger: Any  # re2 compiled patterns (re2 ships no type information)
    first_top_line: Any
    later_top_line: Any


@cache
def _engines() -> _Engines:
    """rapidyaml and the compiled scans, loaded on the first YAML file: a JSON snapshot (every large
    one) never pays for them (~7 ms of imports and compiles)."""
    import re2
    try:  # rapidyaml: without it YAML is read by libyaml (correct, far slower)
        import ryml  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a declared dependency; kept so a stripped install still works
        ryml = None
    return _Engines(ryml, re2.compile(_DANGER), re2.compile(_TOP_LINE), re2.compile(b"\n" + _TOP_LINE))


def read_items(data: fastjson.Buffer, fast_models: Callable[[str, str], type | None]) -> list[Any] | None:
    """The objects of one YAML file, as :func:`fastjson.read_items` gives them, or ``None`` when
    the pre-scan cannot prove that rapidyaml reads it as PyYAML does, or rapidyaml refuses it (the
    caller reads the file as before).

    A ``kind: *List`` whose items start at column 0 (kubectl's layout) is parsed about a megabyte
    of items at a time: rapidyaml's tree takes ~140 bytes a node, 2.5 GB for 65,000 Nodes at once.
    """
    if not data or fastjson.looks_like_json(data) or not fastjson.is_utf8(data):
        return None
    engines = _engines()
    if engines.ryml is None:
        return None
    danger, chunked = engines.danger, _list_chunks(data)
    if chunked is not None and len(data) >= _THREADED_SCAN:  # each run of items scanned as the one before is parsed
        if danger.search(chunked[0]):  # the List's own lines, scanned before they are parsed
            return None
        if _is_list(chunked[0]):
            return _chunked_items(data, chunked[1], fast_models, danger)
        chunked = None  # an object itself: parsed whole, below
    if danger.search(data):
        return None
    if chunked is not None and _is_list(chunked[0]):
        return _chunked_items(data, chunked[1], fast_models)
    return _whole_items(data, fast_models)


class _Scans:
    """The pre-scan of a List's runs of items, one run ahead of the parse, in a thread: RE2
    releases the GIL while it searches and rapidyaml keeps it, so on two cores the scan (0.10 s
    over a 10,000-Node List) takes no wall time. Every run is scanned before it is parsed, as the
    whole file was before: text the scan rejects (deep flow nesting that rapidyaml would take
    gigabytes for) is never parsed, and the copy scanned is the copy parsed. Where no thread can be
    started (a container's process limit), each run is scanned when it is asked for."""

    def __init__(self, danger: Any) -> None:
        import queue
        import threading
        self._danger = danger
        self._asked: queue.SimpleQueue[bytearray | None] = queue.SimpleQueue()
        self._found: queue.SimpleQueue[bool | BaseException] = queue.SimpleQueue()
        self._waiting: bytearray | None = None
        self._worker: threading.Thread | None = threading.Thread(target=self._run, daemon=True)
        try:
            self._worker.start()
        except RuntimeError:
            self._worker = None

    def _run(self) -> None:
        while (text := self._asked.get()) is not None:
            try:
                self._found.put(self._danger.search(text) is not None)
            except BaseException as err:  # handed to the parsing thread: raised there
                self._found.put(err)

    def ask(self, text: bytearray) -> None:
        """Scan ``text`` (meanwhile, in the thread); :meth:`clean` says the verdict."""
        if self._worker is None:
            self._waiting = text
        else:
            self._asked.put(text)

    def clean(self) -> bool:
        """Whether the text asked for last passes the scan."""
        if self._worker is None:
            text, self._waiting = self._waiting, None
            return self._danger.search(text) is None
        found = self._found.get()
        if isinstance(found, BaseException):  # RE2 does not raise on bytes: a bug of ours (exit 3)
            raise RuntimeError("the YAML pre-scan did not finish") from found
        return not found

    def close(self) -> None:
        if self._worker is not None:
            self._asked.put(None)


_THREADED_SCAN = 1 << 22  # smaller files: scanned whole, then parsed only if they pass (no thread)


def _whole_items(data: fastjson.Buffer, fast_models: Callable[[str, str], type | None]) -> list[Any] | None:
    """The objects of a YAML file (that passed the pre-scan) parsed whole, document by document."""
    documents = _json_documents(bytearray(data))  # parsed in place: a copy
    if documents is None:
        return None
    items: list[Any] = []
    while documents:
        document = documents.pop(0)  # each document's JSON is freed once typed
        found = fastjson.read_items(document, fast_models)
        if found is None:  # not an object: what the slow reader makes of it (None: an empty document)
            try:
                value = json.loads(document)
            except ValueError:
                return None
            found = [] if value is None else [value]
        items.extend(found)
    return items


_CHUNK = 1 << 20  # measured: 1 MB runs parse fastest (4 MB +25 %, 16 MB 2×)
_ITEMS_LINE = b"items:\n"


def top_lines(data: fastjson.Buffer) -> Iterator[int]:
    """Where each line at column 0 that is not an item of a column-0 sequence starts (see _TOP_LINE)."""
    engines = _engines()
    if engines.first_top_line.match(data):
        yield 0
    for match in engines.later_top_line.finditer(data):
        yield match.start() + 1


def _list_chunks(data: fastjson.Buffer) -> tuple[bytes, list[tuple[int, int]]] | None:
    """For one document whose ``items:`` sequence starts at column 0: the document without it, and
    the byte ranges of runs of whole items (each a column-0 sequence of its own). ``None`` for any
    other layout (parsed whole)."""
    tops = []
    for top in top_lines(data):
        tops.append(top)
        if len(tops) > 64 or data[top:top + 3] in (b"---", b"..."):  # a stream: parsed whole
            return None
    starts = [top for top in tops if data[top:top + len(_ITEMS_LINE)] == _ITEMS_LINE]
    if len(starts) != 1:
        return None
    begin = starts[0] + len(_ITEMS_LINE)
    end = next((top for top in tops if top > starts[0]), len(data))
    if data[begin:begin + 2] not in (b"- ", b"-\n"):
        return None
    chunks = []
    while begin < end:
        cut = min(begin + _CHUNK, end)
        if cut < end:  # cut before the next item (every column-0 line here starts one)
            found = data.find(b"\n-", cut, end)
            cut = end if found < 0 else found + 1
        chunks.append((begin, cut))
        begin = cut
    return bytes(data[:starts[0]] + data[end:]), chunks


def _is_list(rest: bytes) -> bool:
    """Whether the document without its items is a ``kind: *List`` (else it is an object itself,
    and is parsed whole)."""
    head = _json_documents(bytearray(rest))
    try:
        top = json.loads(head[0]) if head is not None and len(head) == 1 else None
    except ValueError:
        return False
    return isinstance(top, dict) and is_list_kind(top.get("kind"))


def _chunked_items(data: fastjson.Buffer, chunks: list[tuple[int, int]],
                   fast_models: Callable[[str, str], type | None], danger: Any = None) -> list[Any] | None:
    """The items of a column-0 List read chunk by chunk (see :func:`_list_chunks`), in one tree
    reused (its memory, reserved once, is not touched anew for every chunk). ``danger``: each chunk
    is pre-scanned first (see :class:`_Scans`); else the caller has scanned the whole file."""
    items: list[Any] = []
    tree = _engines().ryml.Tree()
    copies = (bytearray(memoryview(data)[begin:end]) for begin, end in chunks)  # one copy, parsed in place
    scans: _Scans | None = None
    try:
        scans = _Scans(danger) if danger is not None else None
        chunk = next(copies, None)
        if scans is not None and chunk is not None:
            scans.ask(chunk)
        while chunk is not None:
            following = next(copies, None)
            if scans is not None:
                if not scans.clean():
                    return None
                if following is not None:
                    scans.ask(following)  # scanned while this one is parsed
            documents = _json_documents(chunk, tree)
            found = fastjson.read_list(documents[0], fast_models) if documents is not None and len(documents) == 1 \
                else None
            if found is None:
                return None
            items.extend(found)
            tree.clear()
            tree.clear_arena()
            chunk = following
    finally:
        if scans is not None:
            scans.close()
    return items


def _json_documents(data: bytearray, tree: Any = None) -> list[bytearray] | None:
    """Each document of ``data`` as rapidyaml writes it in JSON, or ``None`` when it refuses."""
    ryml = _engines().ryml
    if tree is None:
        tree = ryml.Tree()
    nodes = len(data) // 20 + 64  # kubectl YAML: ~29 bytes a node (a line, one more an item); regrows if short
    if tree.capacity() < nodes:
        tree.reserve(nodes)
    try:
        with _quiet_stderr():  # (the emitter prints its errors too: nesting over 64 levels)
            ryml.parse_in_place(data, tree=tree)
            root = tree.root_id()
            ids = list(ryml.children(tree, root)) if tree.is_stream(root) else [root]
            return [_json_of(tree, node, len(data) * 8 // 5 // len(ids) + 64) for node in ids]
    except (ryml.ExceptionBasic, RuntimeError):  # rapidyaml's parse and emit errors, a JSON length change
        return None


def _json_of(tree: Any, node: int, guess: int) -> bytearray:
    """One node as JSON, written in one pass when ``guess`` is large enough (kubectl's two-space
    block YAML grows by about half as indented JSON, shrinks a little as compact JSON).

    A container is written as compact JSON (rapidyaml writes a whole subtree in the style of its
    top, and indents only block style): over a 10,000-Node List, 69 MB instead of 112, written
    0.03 s and decoded 0.05 s faster; the values are the same."""
    ryml = _engines().ryml
    if tree.is_container(node):
        tree.set_container_style(node, ryml.FLOW_SL)
    buffer = bytearray(guess)
    failed, size = ryml.emit_json_to_substr(tree, node, buffer)
    if failed:
        buffer = bytearray(size)
        failed, size = ryml.emit_json_to_substr(tree, node, buffer)
        if failed:
            raise RuntimeError("rapidyaml: JSON length changed")
    del buffer[size:]
    return buffer


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """rapidyaml prints a parse error on stderr before raising it: libyaml words it instead."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real stderr (an embedding host)
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


# --- text: JSON, rapidyaml behind the pre-scan, else libyaml -----------------------------------------
# libyaml's loader when PyYAML has it, chosen at run time: typed Any so it can be a base class.
_CLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class BulkLoader(_CLoader):
    """libyaml safe loader that keeps timestamps as the strings kubectl printed."""


BulkLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _CLoader.yaml_implicit_resolvers.items()
}


class Invalid(Exception):
    """Text libyaml refuses: its words (``reason``, one line) and 1-based position, where it has
    one; ``str()`` is libyaml's whole message."""

    def __init__(self, err: yaml.YAMLError) -> None:
        super().__init__(str(err))
        mark = getattr(err, "problem_mark", None)
        self.reason: str = getattr(err, "problem", None) or str(err).splitlines()[0]
        self.line: int | None = mark.line + 1 if mark else None
        self.column: int | None = mark.column + 1 if mark else None


def _libyaml(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except yaml.YAMLError as err:
        raise Invalid(err) from None


def _rapid_documents(text: str) -> list[Any] | None:
    """The non-empty documents of a YAML stream by rapidyaml, or ``None`` when the pre-scan cannot
    prove it reads them as libyaml does (or it refuses the text)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (stdin under a C locale): libyaml refuses it
        return None
    if not data or _engines().ryml is None or _engines().danger.search(data):
        return None
    found = _json_documents(bytearray(data))
    try:
        return None if found is None else [doc for doc in map(json.loads, found) if doc is not None]
    except ValueError:
        return None


def documents(text: str) -> list[Any]:
    """The non-empty documents of a YAML stream, as PyYAML reads YAML 1.1 (timestamps as text);
    :class:`Invalid` when it is not YAML."""
    found = _rapid_documents(text)
    if found is not None:
        return found
    timing.note("read: YAML by libyaml, not rapidyaml (a scalar whose YAML 1.1 reading the pre-scan cannot"
                " prove rapidyaml shares, or text rapidyaml refuses)")
    return _libyaml(lambda: [doc for doc in yaml.load_all(text, Loader=BulkLoader) if doc is not None])


def document(text: str) -> Any:
    """The one document of a YAML text (``None`` when empty; a stream of several is :class:`Invalid`)."""
    found = _rapid_documents(text)
    if found is not None and len(found) <= 1 and "\n---" not in text and not text.startswith("---"):
        return found[0] if found else None
    return _libyaml(lambda: yaml.load(text, Loader=BulkLoader))


_JSON_START = re.compile(r"\s*[\[{]")


def parse_documents(text: str, source: str) -> list[Any]:
    """Parse a file's text (JSON, or a YAML stream) into its documents; a problem is a
    :class:`UserError` naming ``source`` (and the line and column, when the reader knows them).

    JSON is tried first only when the text looks like JSON: every JSON document is YAML, but the
    JSON parser is an order of magnitude faster. Two limits of Python's own are input errors too,
    not crashes: nesting deeper than the recursion limit, and an integer longer than the digits
    Python converts (``sys.get_int_max_str_digits()``).
    """
    try:
        if _JSON_START.match(text):
            try:
                return [json.loads(text)]
            except json.JSONDecodeError as err:
                if source.endswith(".json"):
                    raise UserError([Problem(f"invalid JSON: {err.msg}", file=source, line=err.lineno,
                                             column=err.colno)]) from None
        return documents(text)
    except Invalid as err:
        if "maximum nesting depth" not in err.reason:
            raise UserError([Problem(f"invalid YAML: {err.reason}", file=source, line=err.line,
                                     column=err.column)]) from None
        # libyaml's own limit on nesting: worded as the interpreter's (json.loads, msgspec)
        raise UserError.single("cannot be read: nested too deeply", file=source) from None
    except RecursionError:
        raise UserError.single("cannot be read: nested too deeply", file=source) from None
    except ValueError as err:  # (JSONDecodeError and YAMLError are worded above)
        reason = (f"a number longer than {sys.get_int_max_str_digits()} digits"
                  if "integer string conversion" in str(err) else str(err))
        raise UserError.single(f"cannot be read: {reason}", file=source) from None


# --- where a snapshot object's field is: libyaml's nodes keep their marks ---------------------------
_COMPOSED: dict[str, dict[tuple[str, str], yaml.Node]] = {}


def locate_line(file: str, kind: str, name: str, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of ``loc`` inside object ``kind/name`` of ``file``, or ``None``.

    Only called on the error path: the file is composed again (libyaml keeps marks) so the bulk
    read never pays for positions.
    """
    if file == "<stdin>":
        return None
    index = _COMPOSED.get(file)
    if index is None:
        try:
            index = _COMPOSED[file] = _objects_by_identity(Path(file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return None
    node = index.get((kind, name))
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            match = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part]
            if not match:
                break
            key, node = match[0]
            line = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _objects_by_identity(text: str) -> dict[tuple[str, str], yaml.Node]:
    """The node of every object of a YAML text by (kind, metadata.name), ``*List`` items included."""
    index: dict[tuple[str, str], yaml.Node] = {}
    stack = [root for root in yaml.compose_all(text, Loader=BulkLoader) if root is not None]
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.MappingNode):
            fields = _scalar_keys(current)
            meta, kind_node = fields.get("metadata"), fields.get("kind")
            if isinstance(kind_node, yaml.ScalarNode) and isinstance(meta, yaml.MappingNode):
                name_node = _scalar_keys(meta).get("name")
                if isinstance(name_node, yaml.ScalarNode):
                    index[(kind_node.value, name_node.value)] = current
            items = fields.get("items")
            if isinstance(items, yaml.SequenceNode):
                stack.extend(items.value)
    return index


def _scalar_keys(node: yaml.MappingNode) -> dict[str, yaml.Node]:
    return {key.value: value for key, value in node.value if isinstance(key, yaml.ScalarNode)}
