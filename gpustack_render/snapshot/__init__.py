"""Snapshot files → a validated, typed :class:`Snapshot` (inputs.md, cli-contract.md).

Knows nothing of rules beyond where the settings object lives. Bulk parsing stays on C paths
(msgspec / json, YAML by :mod:`.yamlread`); every object is typed by its kind's one model (msgspec,
:mod:`.inputs`), and every problem of every object is reported in one pass (:mod:`.refusal` words them).
"""

from __future__ import annotations

import base64
import binascii
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import msgspec

from gpustack_render.snapshot import fastjson, inputs, refusal, yamlread
from gpustack_render.snapshot.workload_kind import DEFAULT_NAMESPACE, GROUP as WORKLOAD_GROUP, KIND as WORKLOAD_KIND
from gpustack_render.errors import Problem, UserError
from gpustack_render.k8s import field_path, identity, is_list_kind
from gpustack_render.snapshot.yamlread import locate_line, parse_documents
from gpustack_render.yamlio import read_text

SNAPSHOT_SUFFIXES = (".yaml", ".yml", ".json")
# Kinds the renderer does not read but ``diff`` (live objects of rendered kinds) and ``validate``
# (CRDs) need as they are: kept untyped in ``Snapshot.raw`` under their namespace.
RAW_ONLY_KINDS = frozenset({("nfd.k8s-sigs.io", "NodeFeature"), ("kueue.x-k8s.io", "LocalQueue"),
                            ("apiextensions.k8s.io", "CustomResourceDefinition")})


def snapshot_kinds(worker_group: str) -> frozenset[tuple[str, str]]:
    """Every (API group, kind) a snapshot reads, typed or raw: a Workload path (``pin``, ``admit
    --workloads``) holding only these was meant as a snapshot path."""
    return frozenset(inputs.models(worker_group)) | RAW_ONLY_KINDS


@dataclass
class Snapshot:
    nodes: dict[str, inputs.Node] = field(default_factory=dict)
    devices: dict[str, inputs.Devices] = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)
    instance_types: dict[str, inputs.InstanceType] = field(default_factory=dict)
    deleted_instance_types: dict[str, inputs.InstanceType] = field(default_factory=dict)
    cluster_queues: dict[str, inputs.ClusterQueue] = field(default_factory=dict)
    admission_checks: dict[str, inputs.AdmissionCheck] = field(default_factory=dict)
    topologies: dict[str, inputs.Topology] = field(default_factory=dict)
    resource_flavors: dict[str, inputs.ResourceFlavor] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    settings_origin: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    raw: dict[tuple[str, str, str, str], dict[str, Any]] = field(default_factory=dict)
    files: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) → the file it came from
    # Files that held no object the tool reads (empty, a README, only foreign kinds): named in a
    # warning, because a mistyped path must not look like an empty cluster.
    unused_files: list[str] = field(default_factory=list)
    node_objects: int = 0  # every Node read, those being deleted included
    # Kueue Workloads as read, (namespace, name) → (file, the object as plain data or its JSON text):
    # typed on demand only (snapshot/workloads.py), so ``render`` never pays for them nor fails on one.
    workloads: dict[tuple[str, str], tuple[str, dict[str, Any] | fastjson.Kept]] = field(default_factory=dict)
    workload_problems: list[Problem] = field(default_factory=list)  # (two differing copies): raised when typed


@dataclass
class _Source:
    obj: dict[str, Any]
    file: str


_UNTYPED: fastjson.FastModels = lambda group, kind: None  # noqa: E731  (every object as json.loads reads it)


@dataclass(eq=False)
class _File:
    """One snapshot file as read: per object its reader handed on, the typed struct of a bulk kind
    (:mod:`.fastjson`, :mod:`.yamlread`) or the :class:`_Source` objects it flattens to (a list).

    The typed objects keep no JSON text, so the file's bytes are freed before the next one is read
    (they were 430 MB of a 1.2 GB peak at 65,000 Nodes); a duplicate identity, rare, reads the
    texts again (:meth:`text`). Stdin cannot be read again: its bytes are kept."""

    name: str
    path: Path | None
    entries: list[Any]
    data: fastjson.Buffer | None = None
    texts: list[Any] | None = None

    def text(self, index: int) -> Any:
        """The JSON text (JSON files) or the object ``json.loads`` reads (YAML files) of entry ``index``."""
        if self.texts is None:
            data = self.data if self.data is not None else _bytes_of(self.path, None)
            texts: list[Any] | None = fastjson.raw_items(data)
            if texts is None:
                texts = yamlread.read_items(data, _UNTYPED)
            self.texts = texts or []
        if index >= len(self.texts):  # the file changed meanwhile
            raise UserError.single("changed while it was read", file=self.name)
        return self.texts[index]


# What ``seen`` keeps of the first object of an identity: a typed one as (its file, its index).
_Seen = _Source | tuple[_File, int]


def _file_of(source: _Seen) -> str:
    return source.file if isinstance(source, _Source) else source[0].name


def _same(first: _Seen, second: _Seen) -> bool:
    """Whether two objects of one identity are the same object: equal as ``json.loads`` reads them
    (as the dicts were compared before); the same JSON text is that without reading it."""
    one, other = _text_or_object(first), _text_or_object(second)
    if isinstance(one, fastjson.TEXTS) and isinstance(other, fastjson.TEXTS) and bytes(one) == bytes(other):
        return True
    return bool(_plain(one) == _plain(other))


def _text_or_object(source: _Seen) -> Any:
    return source.obj if isinstance(source, _Source) else source[0].text(source[1])


def _plain(value: Any) -> Any:
    return fastjson.plain(value) if isinstance(value, fastjson.TEXTS) else value


def expand_paths(paths: Iterable[str]) -> Iterator[tuple[str, Path | None]]:
    """Snapshot-style path arguments: ``-`` is stdin (path ``None``), directories recursively."""
    for raw in paths:
        if raw == "-":
            yield "<stdin>", None
            continue
        path = Path(raw)
        if path.is_dir():
            for child in sorted(p for p in path.rglob("*") if p.suffix in SNAPSHOT_SUFFIXES and p.is_file()):
                yield str(child), child
        elif path.exists():
            yield raw, path
        else:
            raise UserError.single("no such file or directory", file=raw)


def flatten_lists(doc: Any, file: str, problems: list[Problem]) -> Iterator[dict[str, Any]]:
    """A document → its objects (``kind: *List`` items flattened, recursively)."""
    if not isinstance(doc, dict):
        problems.append(Problem("a document must be a mapping (a Kubernetes object)", file=file))
        return
    kind = doc.get("kind")
    if is_list_kind(kind) and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            yield from flatten_lists(item, file, problems)
        return
    yield doc


def read_documents(paths: Iterable[str], problems: list[Problem],
                   files: list[str] | None = None) -> Iterator[tuple[str, Any]]:
    """(file, document) for every document of ``paths``; unreadable files go to ``problems``; every
    file read is appended to ``files`` when given."""
    for display, path in expand_paths(paths):
        if files is not None:
            files.append(display)
        stdin = stdin_text(problems) if path is None else None
        if path is None and stdin is None:
            continue
        for doc in _parse_file(display, path, stdin, problems):
            yield display, doc


def stdin_text(problems: list[Problem]) -> str | None:
    """Standard input as text, or ``None`` with a problem when its bytes are not UTF-8 (as a file's
    are worded): Python reads them strictly (an error) or, under a C locale, as lone surrogates that
    would fail later, in whatever writes them."""
    try:
        text = sys.stdin.read()
        text.encode("utf-8")
    except (UnicodeDecodeError, UnicodeEncodeError):
        problems.append(Problem("not UTF-8 text", file="<stdin>"))
        return None
    return text


def _parse_file(display: str, path: Path | None, stdin_text: str | None, problems: list[Problem]) -> list[Any]:
    """The documents of one file (``path`` ``None``: ``stdin_text``) as plain data (json, YAML by
    :func:`.yamlread.parse_documents`, whose libyaml words every problem); an unreadable or invalid
    file goes to ``problems``. The text, as large
    as the snapshot, is freed before the objects are typed."""
    try:
        return parse_documents(read_text(path, display) if path is not None else stdin_text or "", display)
    except UserError as err:
        problems.extend(err.problems)
        return []


def _read_objects(paths: Iterable[str], problems: list[Problem], files: list[str],
                  fast_models: fastjson.FastModels) -> list[_File]:
    """Every object of ``paths`` in order. A JSON file is decoded from bytes, its bulk kinds typed on
    the way (:mod:`.fastjson`), a YAML file in kubectl's block style through rapidyaml's JSON
    (:mod:`.yamlread`); a file those readers decline is read as plain data (:func:`_parse_file`)."""
    out: list[_File] = []
    for display, path in expand_paths(paths):
        files.append(display)
        piped = stdin_text(problems) if path is None else None
        if path is not None and not path.is_file():  # a pipe (``<(cat f)``) can be read once: as stdin is
            piped, path = _read_once(path, display, problems), None
        if path is None and piped is None:
            continue
        data = _bytes_of(path, piped)
        try:
            items = fastjson.read_items(data, fast_models)
            if items is None:  # (JSON fastjson declines: yamlread declines it too)
                items = yamlread.read_items(data, fast_models)
        except (RecursionError, ValueError):  # nested too deeply, a number too long: the slow path words it
            items = None
        kept, data = (data if path is None else None), b""  # the bytes of one file at a time (see _File)
        if items is not None:
            for index, item in enumerate(items):
                if not isinstance(item, fastjson.TYPED) and type(item) is not fastjson.Kept:
                    items[index] = [_Source(obj, display) for obj in flatten_lists(item, display, problems)]
            out.append(_File(display, path, items, kept))
            continue
        docs = _parse_file(display, path, piped, problems)
        piped = None
        out.append(_File(display, path, [[_Source(obj, display) for doc in docs
                                          for obj in flatten_lists(doc, display, problems)]]))
    return out


def _read_once(path: Path, display: str, problems: list[Problem]) -> str | None:
    """The text of a file that is not a regular file (a pipe), read once; ``None`` with a problem
    when it cannot be read. Read a second time, a pipe is empty: its objects would vanish."""
    try:
        return read_text(path, display)
    except UserError as err:
        problems.extend(err.problems)
        return None


def _bytes_of(path: Path | None, stdin_text: str | None) -> fastjson.Buffer:
    """A file's contents for the fast readers (mapped, :func:`fastjson.map_file`); ``b""``
    (which they decline) when only the slow path can word what is wrong (unreadable file, stdin
    that was not UTF-8)."""
    try:
        if path is None:
            return (stdin_text or "").encode("utf-8")
        return fastjson.map_file(path) or path.read_bytes()
    except (OSError, UnicodeEncodeError):
        return b""


def _identity(obj: dict[str, Any]) -> tuple[str, str, str, str] | str:
    """(group, kind, namespace, name), or a message saying what is missing."""
    api, kind, meta = obj.get("apiVersion"), obj.get("kind"), obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}  # no metadata mapping: no name, reported below
    name = meta.get("name")
    if not isinstance(api, str) or not api or not isinstance(kind, str) or not kind:
        return "document without apiVersion/kind"
    if not isinstance(name, str) or not name:
        return "document without metadata.name"
    group, _, namespace, _ = identity(obj)
    # A namespace that is not a string counts as none here (the typed model reports it).
    return group, kind, namespace if isinstance(meta.get("namespace") or "", str) else "", name


def _object_label(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"




def load_snapshot(paths: Iterable[str], settings_source: tuple[str, str], worker_group: str) -> Snapshot:
    """``worker_group``: the operator's API group of Devices and InstanceType (the rules' Vocabulary
    ``workerApiGroup``)."""
    problems: list[Problem] = []
    models = inputs.models(worker_group)
    files: list[str] = []
    read = _read_objects(paths, problems, files, fastjson.fast_models_for(models))
    placing = _Placing(Snapshot(), models, settings_source, problems)
    for file in read:
        placing.file(file)
    snap = placing.snap
    _resolve_settings(snap, placing.settings_objects, problems)
    if problems:
        raise UserError(problems)
    snap.namespaces.sort()
    snap.unused_files = sorted(set(files) - placing.used)
    return snap


@dataclass
class _Placing:
    """The objects of the files read, placed into ``snap`` in order (:func:`load_snapshot`), with
    what that reads (``models``, ``settings_source``) and keeps: the first object of each identity
    (``seen``), the files that held a kind the tool reads (``used``), the settings objects found."""

    snap: Snapshot
    models: dict[tuple[str, str], inputs.Model]
    settings_source: tuple[str, str]
    problems: list[Problem]
    seen: dict[tuple[str, str, str, str], _Seen] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    settings_objects: list[tuple[str, str, inputs.SettingsObject]] = field(default_factory=list)

    def file(self, file: _File) -> None:
        """Every object of one file in order. A typed object (a bulk kind: cluster-scoped, never the
        settings object) is placed here without a call per step: 18,645 of them at 10,000 Nodes."""
        snap, seen, problems = self.snap, self.seen, self.problems
        groups: dict[str, str] = {}  # apiVersion → its group
        for index, entry in enumerate(file.entries):
            if type(entry) is list:
                for source in entry:
                    self.source(source)
                continue
            self.used.add(file.name)
            if type(entry) is fastjson.Kept:
                self.workload(file, index, entry)
                continue
            kind = fastjson.KINDS[type(entry)]
            api = entry.apiVersion
            group = groups.get(api)
            if group is None:
                group = groups[api] = api.rpartition("/")[0]
            ident = (group, kind, "", entry.metadata.name)
            if ident in seen:
                _first_seen(seen, ident, (file, index), problems)
            else:  # (_first_seen's common case, without its call)
                seen[ident] = (file, index)
                _place_bulk(snap, kind, entry, file.name)

    def workload(self, file: _File, index: int, kept: fastjson.Kept) -> None:
        """A Workload kept as its text (:class:`fastjson.Kept`): its identity, its place."""
        self._workload(kept.namespace, kept.name, (file, index), (file.name, kept))

    def _workload(self, namespace: str, name: str, seen: _Seen, kept: tuple[str, dict[str, Any] | fastjson.Kept]) -> None:
        """A Workload's place; its namespace defaulted first, so that a copy without one and a copy in
        ``default`` are one Workload (two that differ are a problem when typed)."""
        namespace = namespace or DEFAULT_NAMESPACE
        if _first_seen(self.seen, (WORKLOAD_GROUP, WORKLOAD_KIND, namespace, name), seen, self.snap.workload_problems):
            self.snap.workloads[(namespace, name)] = kept

    def source(self, source: _Source) -> None:
        """An object read as plain data: its identity, its model (:mod:`.refusal` words its problems), its place."""
        problems = self.problems
        ident = _identity(source.obj)
        if isinstance(ident, str):
            problems.append(Problem(ident, file=source.file))
            return
        group, kind, namespace, name = ident
        model = self.models.get((group, kind))
        if model is None:
            if (group, kind) in RAW_ONLY_KINDS:
                self.used.add(source.file)
                _keep_raw(self.snap, ident, source, self.seen, problems)
            elif group == WORKLOAD_GROUP and kind == WORKLOAD_KIND:
                self.used.add(source.file)
                self._workload(namespace, name, source, (source.file, source.obj))
            return
        is_settings = kind in ("Secret", "ConfigMap")
        if is_settings and (namespace, name) != self.settings_source:
            return
        self.used.add(source.file)
        if not is_settings:
            namespace = ""  # every other kind read is cluster-scoped (Namespace included)
            ident = (group, kind, "", name)
        if not _first_seen(self.seen, ident, source, problems):
            return
        try:
            typed = refusal.convert(model, source.obj)
        except refusal.Refused as err:
            label = _object_label(kind, namespace, name)
            for loc, message in err.refusals:
                line = locate_line(source.file, kind, name, loc)
                problems.append(Problem(message, file=source.file, line=line, obj=label,
                                        path=field_path(loc, "dotted")))
            return
        _place(self.snap, kind, typed, source, self.settings_objects, problems)


def _keep_raw(snap: Snapshot, ident: tuple[str, str, str, str], source: _Source,
              seen: dict[tuple[str, str, str, str], _Seen], problems: list[Problem]) -> None:
    """Keep an object of a :data:`RAW_ONLY_KINDS` kind."""
    if _first_seen(seen, ident, source, problems):
        snap.raw[ident] = source.obj


def _first_seen(seen: dict[tuple[str, str, str, str], _Seen], ident: tuple[str, str, str, str],
                source: _Seen, problems: list[Problem]) -> bool:
    """Whether ``source`` is the first object of identity ``ident`` (then recorded in ``seen``). A
    later one must be the same object; a different one is a problem naming the first one's file."""
    if ident not in seen:
        seen[ident] = source
        return True
    if not _same(seen[ident], source):
        problems.append(Problem(f"conflicts with a different object of the same identity in {_file_of(seen[ident])}",
                                file=_file_of(source), obj=_object_label(*ident[1:])))
    return False


_BULK_KINDS = frozenset({"Node", "Devices", "Namespace"})


def _place_bulk(snap: Snapshot, kind: str, typed: Any, file: str) -> None:
    """A Node, Devices or Namespace (its model, decoded from JSON or converted from plain data)."""
    meta: inputs.Meta = typed.metadata
    deleting = meta.deletionTimestamp is not None
    snap.files[(kind, meta.name)] = file
    if kind == "Node":
        snap.node_objects += 1
        if not deleting:
            snap.nodes[meta.name] = typed
    elif kind == "Devices":
        snap.devices[meta.name] = typed
    elif not deleting and typed.status.phase != "Terminating":  # a Namespace
        snap.namespaces.append(meta.name)


def _place(snap: Snapshot, kind: str, typed: Any, source: _Source,
           settings_objects: list[tuple[str, str, inputs.SettingsObject]], problems: list[Problem]) -> None:
    if kind in _BULK_KINDS:
        _place_bulk(snap, kind, typed, source.file)
        return
    meta: inputs.Meta = typed.metadata
    deleting = meta.deletionTimestamp is not None
    snap.files[(kind, meta.name)] = source.file
    if kind == "InstanceType":
        spec = typed.spec
        if spec.acceleratable and not spec.acceleratorGroup:
            problems.append(Problem("required when spec.acceleratable is true", file=source.file,
                                    obj=f"InstanceType/{meta.name}", path="spec.acceleratorGroup"))
        (snap.deleted_instance_types if deleting else snap.instance_types)[meta.name] = typed
    elif kind == "ClusterQueue":
        snap.cluster_queues[meta.name] = msgspec.structs.replace(
            typed, raw_resource_groups=(source.obj.get("spec") or {}).get("resourceGroups"))
    elif kind == "AdmissionCheck":
        snap.admission_checks[meta.name] = typed
    elif kind == "Topology":
        snap.topologies[meta.name] = typed
    elif kind == "ResourceFlavor":
        snap.resource_flavors[meta.name] = typed
    else:
        settings_objects.append((kind, source.file, typed))
    if kind not in ("Secret", "ConfigMap"):
        api = source.obj["apiVersion"]
        snap.raw[(api.rpartition("/")[0], kind, meta.namespace or "", meta.name)] = source.obj


def _resolve_settings(snap: Snapshot, objects: list[tuple[str, str, inputs.SettingsObject]],
                      problems: list[Problem]) -> None:
    """Merge the settings Secret and ConfigMap; the Secret wins, ``stringData`` over ``data``."""
    for kind, file, obj in sorted(objects, key=lambda o: o[0] == "Secret"):
        label = _object_label(kind, obj.metadata.namespace, obj.metadata.name)
        values: list[tuple[str, str, tuple[str, str, str]]] = []
        for key, value in (obj.data or {}).items():
            if kind == "Secret":
                try:
                    value = base64.b64decode(value, validate=True).decode("utf-8")
                except (binascii.Error, UnicodeDecodeError):
                    problems.append(Problem("is not valid base64", file=file, obj=label, path=f"data.{key}"))
                    continue
            values.append((key, value, (file, label, f"data.{key}")))
        values.extend((key, value, (file, label, f"stringData.{key}"))
                      for key, value in (obj.stringData or {}).items())
        for key, value, origin in values:
            snap.settings[key] = value
            snap.settings_origin[key] = origin
