"""Reading manifests back (``diff --against``, ``validate --manifests``) and naming objects and fields.

A previous render comes in any of the shapes ``render`` writes: a YAML stream, a JSON ``List``, or
an ``-o`` directory whose ``kustomization.yaml`` lists the files, or ``-`` for standard input (so a
render can be piped in, as SNAPSHOT ``-`` is). Reading it must fail like every other input (exit 2,
one line per problem), never with a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

from gpustack_render.errors import Problem, UserError
from gpustack_render.k8s import identity
from gpustack_render.snapshot import flatten_lists
from gpustack_render.yamlio import parse_documents, read_text

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"  # the path argument that means standard input, as for SNAPSHOT
STDIN_DISPLAY = "<stdin>"  # how messages name it, as the snapshot reader does


def _files(path: Path) -> list[Path]:
    """The files of a manifests path: the file itself; a render directory's kustomization
    ``resources`` in order; or every manifest file of any other directory, recursively."""
    if not path.exists():
        raise UserError.single("no such file or directory", file=str(path))
    if not path.is_dir():
        return [path]
    kustomization = path / "kustomization.yaml"
    if kustomization.is_file():
        docs = parse_documents(read_text(kustomization, str(kustomization)), str(kustomization))
        resources = docs[0].get("resources") if docs and isinstance(docs[0], dict) else None
        if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
            raise UserError.single("has no 'resources' list of file names", file=str(kustomization))
        return [path / r for r in resources]
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)


def is_stdin(path: Path | str | None) -> bool:
    """``-`` (as a string or a ``Path``) means standard input; ``./-`` names a file called ``-``."""
    return path is not None and str(path) == STDIN


def _texts(path: Path | str, problems: list[Problem]) -> Iterator[tuple[str, str]]:
    """(display name, text) of every file of ``path``; standard input read once for ``-``."""
    if is_stdin(path):
        yield STDIN_DISPLAY, sys.stdin.read()
        return
    for file in _files(Path(path)):
        display = str(file)
        if not file.is_file():
            problems.append(Problem("listed in kustomization.yaml but missing", file=display))
            continue
        try:
            yield display, read_text(file, display)
        except UserError as err:
            problems.extend(err.problems)


def read_manifests(path: Path | str) -> list[dict[str, Any]]:
    """Every object under ``path`` (``-``: standard input; lists flattened), checked to have
    apiVersion, kind and name."""
    problems: list[Problem] = []
    objects: list[dict[str, Any]] = []
    for display, text in _texts(path, problems):
        try:
            docs = parse_documents(text, display)
        except UserError as err:
            problems.extend(err.problems)
            continue
        for doc in docs:
            for obj in flatten_lists(doc, display, problems):
                api, kind, _, name = identity(obj)
                if not obj.get("apiVersion") or not kind:
                    problems.append(Problem("document without apiVersion/kind", file=display))
                elif not name:
                    problems.append(Problem("document without metadata.name", file=display, obj=kind))
                else:
                    objects.append(obj)
    if problems:
        raise UserError(problems)
    return objects
