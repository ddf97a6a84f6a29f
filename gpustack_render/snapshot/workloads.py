"""The one reader of Kueue Workloads: ``pin WORKLOAD...``, ``admit --workloads PATH...`` and the
Workloads a snapshot holds, all typed by :mod:`.workload_model`.

Paths are files, directories or ``-``; a file holds single objects, a stream of them, or Lists
(``WorkloadList`` items inherit its ``apiVersion`` and ``kind``). Every problem of every document
is raised at once (exit 2), one line each naming the file (and the line where the file can tell),
the Workload and the field; a Workload stops at its first problem.

A snapshot keeps its Workloads as they were read (``Snapshot.workloads``): ``render`` never types
them, so a bad one cannot fail it; :func:`snapshot_workloads` types them on demand (``admit``,
``explain``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from gpustack_render.errors import Problem, UserError
from gpustack_render.k8s import field_path, is_list_kind, mapping_field
from gpustack_render.snapshot import Snapshot, fastjson, locate_line, read_documents
from gpustack_render.snapshot.workload_model import (DEFAULT_NAMESPACE, GROUP, KIND, DecodeError, Workload, decode,
                                                   decode_json)


@dataclass(frozen=True)
class WorkloadSource:
    """A Workload as read (plain data, or a snapshot's JSON text: :class:`fastjson.Kept`) and the
    file it came from."""

    obj: dict[str, Any] | fastjson.Kept
    file: str

    def identity(self) -> tuple[str, str]:
        """(namespace as written, name)."""
        if isinstance(self.obj, fastjson.Kept):
            return self.obj.namespace, self.obj.name
        meta = mapping_field(self.obj, "metadata")
        namespace = meta.get("namespace")
        return namespace if isinstance(namespace, str) else "", str(meta.get("name"))


def _flatten(doc: Any, inherit: dict[str, Any] | None = None) -> Iterator[Any]:
    """Documents → objects; list items without apiVersion/kind inherit them from a ``WorkloadList``."""
    if isinstance(doc, dict):
        kind = doc.get("kind")
        if is_list_kind(kind) and isinstance(doc.get("items"), list):
            item_type = None
            if kind == KIND + "List" and isinstance(doc.get("apiVersion"), str):
                item_type = {"apiVersion": doc["apiVersion"], "kind": KIND}
            for item in doc["items"]:
                yield from _flatten(item, item_type)
            return
        if inherit and "kind" not in doc and "apiVersion" not in doc:
            doc = {**inherit, **doc}
    yield doc


# (the kinds found in a file that holds only snapshot objects, "Kind: N, …") → the problem's message
Misplaced = Callable[[str], str]


def read_sources(paths: Iterable[str], command: str, snapshot_kinds: frozenset[tuple[str, str]],
                 misplaced: Misplaced) -> list[WorkloadSource]:
    """The Workloads of ``paths`` in input order, as plain data. A document that is not a Kueue
    Workload, or has no name, is a problem; a file holding only objects of ``snapshot_kinds`` is
    one problem worded by ``misplaced`` (it was most likely meant as a snapshot path)."""
    problems: list[Problem] = []
    out: list[WorkloadSource] = []
    for display, docs in groupby(read_documents(paths, problems), key=lambda item: item[0]):
        objects = [obj for _, doc in docs for obj in _flatten(doc)]
        found = _snapshot_file(objects, snapshot_kinds)
        if found:  # one line for the file, not one "not a Kueue Workload" per object
            problems.append(Problem(misplaced(found), file=display))
            continue
        for obj in objects:
            if _is_workload(obj, display, command, problems):
                out.append(WorkloadSource(obj, display))
    if problems:
        raise UserError(problems)
    return out


def _snapshot_file(objects: list[Any], snapshot_kinds: frozenset[tuple[str, str]]) -> str:
    """``Kind: N, …`` when every object is of a snapshot kind (empty when the file holds anything else)."""
    kinds: Counter[str] = Counter()
    for obj in objects:
        api, kind = (obj.get("apiVersion"), obj.get("kind")) if isinstance(obj, dict) else (None, None)
        if not isinstance(api, str) or not isinstance(kind, str):
            return ""
        if (api.rpartition("/")[0], kind) not in snapshot_kinds:
            return ""
        kinds[kind] += 1
    return ", ".join(f"{kind}: {n}" for kind, n in sorted(kinds.items()))


def label(obj: dict[str, Any]) -> str:
    """``Kind/ns/name`` of any object as read (placeholders for what it lacks)."""
    meta = mapping_field(obj, "metadata")
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) and obj.get("kind") else "<no kind>"
    name, namespace = meta.get("name"), meta.get("namespace")
    name = name if isinstance(name, str) and name else "<no name>"
    return f"{kind}/{namespace}/{name}" if isinstance(namespace, str) and namespace else f"{kind}/{name}"


def _is_workload(obj: Any, file: str, command: str, problems: list[Problem]) -> bool:
    if not isinstance(obj, dict):
        problems.append(Problem("a document must be a mapping (a Kueue Workload)", file=file))
        return False
    api, kind = obj.get("apiVersion"), obj.get("kind")
    group = api.rpartition("/")[0] if isinstance(api, str) else None
    if kind != KIND or group != GROUP:
        problems.append(Problem(f"not a Kueue Workload (apiVersion {api!r}, kind {kind!r}); {command} reads only "
                                f"{GROUP} Workloads", file=file, obj=label(obj)))
        return False
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        problems.append(Problem("required field is missing", file=file, obj=label(obj), path="metadata.name"))
        return False
    return True


def type_workloads(sources: Iterable[WorkloadSource], status: bool, require_queue: bool,
                   problems: list[Problem] | None = None) -> list[Workload]:
    """Each source typed (``status=False``: its status ignored, a pending Workload); every problem
    of every Workload raised at once (after ``problems``, those found before). ``require_queue``: a
    Workload without ``spec.queueName`` is a problem (``admit``; ``pin`` leaves such a Workload alone)."""
    problems = list(problems or [])
    out: list[Workload] = []
    for source in sources:
        try:
            obj = source.obj
            workload = (decode_json(obj.text, obj.apiVersion, source.file, status) if isinstance(obj, fastjson.Kept)
                        else decode(obj, source.file, status))
        except DecodeError as err:
            problems.append(problem(err, source))
            continue
        if require_queue and not workload.spec.queueName:
            problems.append(problem(DecodeError("required field is missing (the Workload's LocalQueue)",
                                                ("spec", "queueName")), source))
            continue
        out.append(workload)
    if problems:
        raise UserError(problems)
    return out


def problem(err: DecodeError, source: WorkloadSource) -> Problem:
    """The one line of a Workload's problem: file (and line), ``Workload/ns/name``, field, message."""
    namespace, name = source.identity()
    obj = f"{KIND}/{namespace or DEFAULT_NAMESPACE}/{name}"
    line = locate_line(source.file, KIND, name, err.loc) if _small(source.file) else None
    return Problem(err.message, file=source.file, line=line, obj=obj, path=field_path(err.loc, "dotted"))


# A line is looked up by composing the file again with positions (locate_line): ~30 s for a 50 MB
# file of 50,000 Workloads, so larger files' problems name file, Workload and field without it.
LINE_LOOKUP_MAX_BYTES = 8 << 20


def _small(file: str) -> bool:
    try:
        return Path(file).stat().st_size <= LINE_LOOKUP_MAX_BYTES
    except OSError:  # (stdin, or gone)
        return False


def read_workloads(paths: Iterable[str], command: str, snapshot_kinds: frozenset[tuple[str, str]],
                   misplaced: Misplaced, require_queue: bool = True) -> list[Workload]:
    """``admit --workloads PATH...``: the Workloads of ``paths``, typed, pending (status ignored)."""
    return type_workloads(read_sources(paths, command, snapshot_kinds, misplaced), False, require_queue)


def snapshot_workloads(snapshot: Snapshot) -> list[Workload]:
    """The snapshot's Workloads, typed with their status, in (namespace, name) order; two differing
    copies of one Workload (which ``render`` ignores) are a problem here."""
    sources = (WorkloadSource(obj, file) for file, obj in (snapshot.workloads[key] for key in sorted(snapshot.workloads)))
    return type_workloads(sources, True, True, snapshot.workload_problems)
