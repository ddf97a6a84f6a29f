"""The current objects of ``diff --against DIR`` when DIR is what ``render -o`` wrote, read fast.

:func:`~gpustack_render.diff.manifests.read_manifests` is the one meaning of reading manifests
back; this module only reaches the same list sooner for the directory ``render -o`` writes (a
10,000-Node one holds 10,957 files), and hands every other input to it unchanged:

* ``kustomization.yaml`` is read as ``read_manifests`` reads it (the one YAML reader); its
  ``resources`` are taken here when each is a file name in the form every object name gives
  (:data:`_NAME`, see :func:`_listed`).
* each listed file is opened relative to the directory (no ``pathlib`` and no path walk per
  file), and one holding exactly the bytes ``render -o`` writes for a desired object is that
  object, as ``read_manifests`` takes it.
* any file that is neither a desired object's bytes nor parses into complete objects without a
  problem (missing, unreadable, invalid, incomplete) sends the whole directory back to
  ``read_manifests``: the error is then its error, word for word and in its order. Problems end
  the run, so doing the work twice costs only a failing run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Sequence

from gpustack_render.errors import Problem, UserError
from gpustack_render.emit import KUSTOMIZATION, kustomization_resources
from gpustack_render.k8s import is_list_kind
from gpustack_render.diff.manifests import _plain, _read_bytes, _Written, file_objects, is_stdin, read_manifests
from gpustack_render.snapshot.yamlread import parse_documents
from gpustack_render.yamlio import WRITE_ERRORS, dump_yaml_stream

# A listed file in the form ``render -o`` names files (lower-case kind, DNS-style namespace and name, a
# manifest suffix): not ``.`` nor a path with ``/``, so DIR joined with it is DIR + "/" + name, as
# pathlib joins it.
_NAME = re.compile(r"[a-z0-9][a-z0-9.-]*\.(?:yaml|yml|json)")


def read_current(path: Path | str, desired: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``read_manifests(path, desired)`` returns (or raises), sooner for a ``render -o``
    directory and for a file that is exactly what ``render`` printed for the desired objects."""
    if not desired or is_stdin(path):
        return read_manifests(path, desired)
    directory = Path(path)
    if not directory.is_dir():  # a pipe is not opened here: an open and close of a named pipe
        whole = _printed(directory, desired) if directory.is_file() else None  # can lose its text
        return whole if whole is not None else read_manifests(path, desired)
    if os.open not in os.supports_dir_fd:
        return read_manifests(path, desired)
    names = _listed(directory / KUSTOMIZATION)
    if names is None:
        return read_manifests(path, desired)
    try:
        dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return read_manifests(path, desired)
    try:
        objects = _objects(dir_fd, str(directory / "x")[:-1], names, _Written(desired))
    finally:
        os.close(dir_fd)
    return read_manifests(path, desired) if objects is None else objects


def _objects(dir_fd: int, prefix: str, names: Sequence[str], expected: _Written) -> list[dict[str, Any]] | None:
    """The objects of the listed files in their order; ``None`` at the first file ``read_manifests``
    would report a problem for. ``prefix`` joined with a name is the path ``read_manifests`` names
    the file by ("" for ".", "/" for "/", as pathlib joins a plain name)."""
    objects: list[dict[str, Any]] = []
    for name in names:
        data = _read_bytes(name, dir_fd)
        if data is None:
            return None
        same = expected.object(name, data)
        if same is not None and _complete(same):
            objects.append(same)
            continue
        found = _parsed(prefix + name, data, same)
        if found is None:
            return None
        objects.extend(found)
    return objects


# Objects written and compared at a time when a YAML stream is checked, from its end (after a look
# at its head): a render's last kinds (queues, flavors) are the ones a rule change touches, so a
# changed stream is told from the first piece, not after writing 10,000 NodeFeatures; a changed
# NodeFeature costs the writing of those after it.
_PIECE = 256


def _printed(file: Path, desired: Sequence[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The desired objects themselves when ``file`` holds exactly the YAML stream ``render`` prints
    for them and each reads back as itself (plain and complete, as in a directory); else ``None``:
    ``read_manifests`` reads it (a JSON ``List`` too: the JSON reader is quicker than writing).

    The stream is compared piece by piece: each piece is the stream of some consecutive objects
    (every document opened by ``---``), and streams put one after the other are the stream of all
    of their documents, so matching every piece in place is matching the whole."""
    data = _read_bytes(file)
    if data is None or not data.startswith(b"---\n") or b"\r" in data or not all(_complete(obj) for obj in desired):
        return None
    try:  # a quick look at the head first (the writer writes a document alike in any stream)
        if not data.startswith(dump_yaml_stream(desired[:_PIECE]).encode("utf-8")):
            return None
    except WRITE_ERRORS:  # an object the writer refuses is simply read back as usual
        return None
    end = len(data)
    for stop in range(len(desired), 0, -_PIECE):
        piece = desired[max(stop - _PIECE, 0):stop]
        if not all(_plain(obj) for obj in piece):
            return None
        try:
            text = dump_yaml_stream(piece).encode("utf-8")
        except WRITE_ERRORS:  # an object the writer refuses is simply read back as usual
            return None
        if not data.endswith(text, 0, end):
            return None
        end -= len(text)
    return list(desired) if end == 0 else None


def _listed(kustomization: Path) -> list[str] | None:
    """The ``resources`` of a kustomization, as ``read_manifests`` reads them, when each is a file
    name of :data:`_NAME`'s form; ``None`` for any other file (it then reads it itself)."""
    data = _read_bytes(kustomization)
    if data is None or b"\r" in data:  # (read_manifests reads it with universal newlines)
        return None
    try:
        docs = parse_documents(data.decode("utf-8"), str(kustomization))
    except (UnicodeDecodeError, UserError):
        return None
    resources = kustomization_resources(docs) if len(docs) == 1 else None
    if resources is None \
            or not all(isinstance(name, str) and _NAME.fullmatch(name) for name in resources):
        return None
    return resources


def _complete(obj: dict[str, Any]) -> bool:
    """Whether ``obj``, a taken (plain) object, is one object (not a ``*List`` to flatten) with
    apiVersion, kind and name: what ``read_manifests`` keeps as it is. A desired object always is,
    unless a template renders a list kind or leaves them out: then it goes the general way
    (:func:`_parsed`)."""
    kind = obj.get("kind")
    if type(kind) is not str or not kind or is_list_kind(kind):
        return False
    meta = obj.get("metadata")
    # identity()'s name is str(name or ""): for the plain values a taken object holds (str, int,
    # bool, null), empty exactly when the name is falsy
    return bool(obj.get("apiVersion")) and type(meta) is dict and bool(meta.get("name"))


def _parsed(display: str, data: bytes, same: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The objects of one file as ``read_manifests`` reads them (``same``: the desired object its
    bytes are, if any); ``None`` when it would report a problem (it then reads the whole path, and
    words every problem)."""
    problems: list[Problem] = []
    objects = file_objects(display, data, same, problems)
    return None if problems else objects
