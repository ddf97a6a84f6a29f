"""Reading manifests back (``diff --against``, ``validate --manifests``) and naming objects and fields.

A previous render comes in any of the shapes ``render`` writes: a YAML stream, a JSON ``List``, or
an ``-o`` directory whose ``kustomization.yaml`` lists the files, or ``-`` for standard input (so a
render can be piped in, as SNAPSHOT ``-`` is). Reading it must fail like every other input (exit 2,
one line per problem), never with a traceback.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from gpustack_render.emit import KUSTOMIZATION, MANIFEST_SUFFIXES, kustomization_resources
from gpustack_render.errors import Problem, UserError
from gpustack_render.k8s import identity
from gpustack_render.snapshot import flatten_lists, stdin_text
from gpustack_render.snapshot.yamlread import parse_documents
from gpustack_render.yamlio import WRITE_ERRORS, dump_json, read_text

STDIN = "-"  # the path argument that means standard input, as for SNAPSHOT
STDIN_DISPLAY = "<stdin>"  # how messages name it, as the snapshot reader does


def _files(path: Path) -> list[Path]:
    """The files of a manifests path: the file itself; a render directory's kustomization
    ``resources`` in order; or every manifest file of any other directory, recursively."""
    if not path.exists():
        raise UserError.single("no such file or directory", file=str(path))
    if not path.is_dir():
        return [path]
    kustomization = path / KUSTOMIZATION
    if kustomization.is_file():
        docs = parse_documents(read_text(kustomization, str(kustomization)), str(kustomization))
        resources = kustomization_resources(docs)
        if resources is None or not all(isinstance(r, str) for r in resources):
            raise UserError.single("has no 'resources' list of file names", file=str(kustomization))
        return [path / r for r in resources]
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)


def is_stdin(path: Path | str | None) -> bool:
    """``-`` (as a string or a ``Path``) means standard input; ``./-`` names a file called ``-``."""
    return path is not None and str(path) == STDIN


def _texts(path: Path | str, problems: list[Problem]) -> Iterator[tuple[str, str | bytes]]:
    """(display name, content) of every file of ``path``; standard input read once for ``-``. A
    file's content is its bytes (decoded by :func:`_decoded`, or compared as they are with what
    ``render -o`` writes); standard input is text."""
    if is_stdin(path):
        text = stdin_text(problems)
        if text is not None:
            yield STDIN_DISPLAY, text
        return
    given = Path(path)
    for file in _files(given):
        display = str(file)
        # The path given is looked at first: opening a named pipe only to close it again (as the
        # non-blocking probe does) can let its writer's text go to that probe, or kill the writer.
        data = _read_bytes(file) if file != given or given.is_file() else None
        if data is not None:
            yield display, data
        elif file == given:  # the path given is not a regular file (a pipe, ``<(cat f)``), or unreadable
            try:
                yield display, read_text(file, display)
            except UserError as err:
                problems.extend(err.problems)
        elif not file.is_file():  # not a regular file, or unreadable: as the plain sequence words it
            problems.append(Problem("listed in kustomization.yaml but missing", file=display))
        else:
            try:
                yield display, read_text(file, display)
            except UserError as err:
                problems.extend(err.problems)


def _read_bytes(file: Path | str, dir_fd: int | None = None) -> bytes | None:
    """A regular file's bytes in four system calls, with no ``stat`` of the path first (one per file
    is a tenth of a second on a 10,000-Node ``-o`` directory); ``None`` for anything else, or on
    any error. Non-blocking, so a FIFO listed by mistake is not waited on. ``dir_fd``: ``file`` is
    a name in that open directory (one name looked up per file, not the directory's path again)."""
    try:
        fd = os.open(file, _OPEN_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        chunks = [os.read(fd, info.st_size + 1)]  # one byte more than the size: a short read is EOF
        while len(chunks[-1]) > (info.st_size if len(chunks) == 1 else 0):  # it grew meanwhile
            chunks.append(os.read(fd, 1 << 20))
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)


def _decoded(data: str | bytes, display: str) -> str:
    """A file's bytes as :func:`~gpustack_render.yamlio.read_text` reads them (UTF-8, universal
    newlines)."""
    if isinstance(data, str):
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError.single("not UTF-8 text", file=display) from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


_PLAIN_SCALARS = frozenset((str, int, bool, type(None)))


_ONLY_STR = frozenset((str,))


def _plain(value: Any) -> bool:
    """Whether ``value`` holds only what both of our writers write and our readers read back as the
    same value: string keys, and strings, ints, booleans, null, mappings and lists (no floats: NaN
    reads back as another NaN). A loop, not recursion: it walks every value of a 10,000-Node render."""
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is dict:
            if not _ONLY_STR.issuperset(map(type, node)):  # (in C: no generator step per key)
                return False
            items = node.values()
        elif kind is list:
            items = node
        else:
            return kind in _PLAIN_SCALARS
        for item in items:
            item_kind = type(item)
            if item_kind is dict or item_kind is list:
                stack.append(item)
            elif item_kind not in _PLAIN_SCALARS:
                return False
    return True


class _Written:
    """The desired objects by the file ``render -o`` writes each to (the first object for a name,
    in either format) and the writer of that format: a current file holding exactly the bytes the
    writer gives for its object reads back as that object, so it is not parsed (a 10,000-Node
    render directory is 45 MB of YAML). Anything else is read as usual."""

    def __init__(self, desired: Sequence[dict[str, Any]]) -> None:
        from gpustack_render.emit import MANIFEST_FORMATS, file_name
        self.writers: list[tuple[str, Callable[[Any], str]]] = list(MANIFEST_FORMATS.values())
        self.by_stem: dict[str, dict[str, Any]] = {}
        for obj in desired:
            try:
                stem = file_name(obj, "")
            except (KeyError, TypeError, AttributeError):
                continue
            self.by_stem.setdefault(stem, obj)

    def _candidate(self, name: str) -> tuple[dict[str, Any] | None, Callable[[Any], str] | None]:
        """The desired object written to the file ``name``, and the writer it is written with."""
        for suffix, dump in self.writers:
            if name.endswith(suffix):
                return self.by_stem.get(name[:-len(suffix)]), dump
        return None, None

    def object(self, display: str, data: str | bytes) -> dict[str, Any] | None:
        """The desired object that the file ``display`` holds byte for byte, if any."""
        if not isinstance(data, bytes) or b"\r" in data:
            return None
        obj, dump = self._candidate(display.rsplit("/", 1)[-1])
        if obj is None or dump is None or not _plain(obj):
            return None
        try:  # a plain object holds no float: the JSON writer need not look for one
            written = (dump_json(obj, floats=False) if dump is dump_json else dump(obj)).encode("utf-8")
        except WRITE_ERRORS:  # an object the writers refuse is simply read back as usual
            return None
        return obj if written == data else None


def read_manifests(path: Path | str, desired: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Every object under ``path`` (``-``: standard input; lists flattened), checked to have
    apiVersion, kind and name. A file that holds exactly what ``render -o`` writes for one of the
    ``desired`` objects is that object (``diff --against DIR``: see :class:`_Written`)."""
    problems: list[Problem] = []
    objects: list[dict[str, Any]] = []
    written = _Written(desired) if desired and not is_stdin(path) and Path(path).is_dir() else None
    for display, data in _texts(path, problems):
        same = written.object(display, data) if written is not None else None
        objects.extend(file_objects(display, data, same, problems))
    if problems:
        raise UserError(problems)
    return objects


def file_objects(display: str, data: str | bytes, same: dict[str, Any] | None,
                 problems: list[Problem]) -> list[dict[str, Any]]:
    """The objects :func:`read_manifests` keeps from one file's content (``same``: the desired
    object its bytes are, if any); what is wrong with them is added to ``problems``."""
    try:
        docs = [same] if same is not None else parse_documents(_decoded(data, display), display)
    except UserError as err:
        problems.extend(err.problems)
        return []
    objects: list[dict[str, Any]] = []
    for doc in docs:
        for obj in flatten_lists(doc, display, problems):
            _, kind, _, name = identity(obj)
            if not obj.get("apiVersion") or not kind:
                problems.append(Problem("document without apiVersion/kind", file=display))
            elif not name:
                problems.append(Problem("document without metadata.name", file=display, obj=kind))
            else:
                objects.append(obj)
    return objects
