"""Output: YAML stream, JSON List, or an ``-o`` directory written atomically."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

from gpustack_render.errors import UserError
from gpustack_render.snapshot import yamlread
from gpustack_render.yamlio import dump_json, dump_yaml, dump_yaml_stream, may_hold_floats


def as_list(objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(objects)}


def format_objects(objects: Sequence[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return dump_json(as_list(objects), floats=may_hold_floats(objects))
    if not objects:
        return ""
    return dump_yaml_stream(objects)


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
KUSTOMIZATION = "kustomization.yaml"
# ``render -o``'s file suffix and writer per --format: what it writes is what ``diff --against DIR``
# recognises byte for byte (diff/manifests.py).
MANIFEST_FORMATS: dict[str, tuple[str, Callable[[Any], str]]] = {"yaml": (".yaml", dump_yaml),
                                                                  "json": (".json", dump_json)}


def render_summary(objects: Sequence[dict[str, Any]], nodes: int) -> str:
    """One line for ``-v``: how many objects of each kind came from how many Nodes."""
    counts: dict[str, int] = {}
    for obj in objects:
        counts[str(obj.get("kind"))] = counts.get(str(obj.get("kind")), 0) + 1
    kinds = ", ".join(f"{kind} {count:,}" for kind, count in counts.items())
    return f"rendered {len(objects):,} objects ({kinds or 'none'}) from {nodes:,} Nodes"


def file_name(obj: dict[str, Any], suffix: str = ".yaml") -> str:
    meta = obj["metadata"]
    kind = str(obj["kind"]).lower()
    if meta.get("namespace"):
        return f"{kind}-{meta['namespace']}-{meta['name']}{suffix}"
    return f"{kind}-{meta['name']}{suffix}"


def _is_manifest(entry: Path) -> bool:
    """Files the render owns or would be confused with: visible YAML/JSON files. Dotfiles,
    ``README*``, ``.gitkeep`` and anything else are an admin's and are carried over untouched."""
    return entry.suffix in MANIFEST_SUFFIXES and not entry.name.startswith(".") \
        and not entry.name.upper().startswith("README")


def kustomization_resources(docs: list[Any]) -> list[Any] | None:
    """The ``resources`` list of a kustomization file's documents (its first), or ``None``."""
    resources = docs[0].get("resources") if docs and isinstance(docs[0], dict) else None
    return resources if isinstance(resources, list) else None


def _previous_resources(target: Path) -> set[str]:
    """The files an earlier render listed in its ``kustomization.yaml`` (what it wrote)."""
    try:
        docs = yamlread.documents((target / KUSTOMIZATION).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yamlread.Invalid):  # unreadable: nothing in it counts as ours
        return set()
    return {str(r) for r in kustomization_resources(docs) or ()}


def _kept_entries(target: Path) -> list[Path]:
    """What must survive the swap: everything that is not a manifest. A manifest the earlier render
    did not write (a hand-added YAML file) is an error naming it: silently deleting it would delete
    its object from the cluster, and keeping it unlisted would hide it from kustomize."""
    if target.is_symlink():
        raise UserError.single("is a symbolic link; give the real directory", file=str(target))
    if not target.exists():
        return []
    if not target.is_dir():
        raise UserError.single("exists and is not a directory", file=str(target))
    cwd = Path.cwd().resolve()
    if target == cwd or target in cwd.parents:
        raise UserError.single("is the current directory or one of its parents; choose a dedicated "
                               "output directory", file=str(target))
    entries = sorted(target.iterdir())
    ours = _previous_resources(target) | {KUSTOMIZATION}
    foreign = [e for e in entries if _is_manifest(e) and (e.name not in ours or not e.is_file())]
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise UserError.single(f"was not written by gpustack-render (not listed in {KUSTOMIZATION}){more}; "
                               f"move it out of the output directory, it would not be applied", file=str(foreign[0]))
    return [e for e in entries if not _is_manifest(e)]


def _carry_over(entries: Sequence[Path], staging: Path) -> None:
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, staging / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, staging / entry.name, follow_symlinks=False)


def _write_manifests(objects: Sequence[dict[str, Any]], staging: Path, fmt: str) -> list[str]:
    suffix, dump = MANIFEST_FORMATS["json" if fmt == "json" else "yaml"]
    if dump is dump_json and not may_hold_floats(objects):
        dump = _dump_json_without_floats
    names: dict[str, dict[str, Any]] = {}
    for obj in objects:
        name = file_name(obj, suffix)
        if name in names:  # e.g. LocalQueue a-b/c and a/b-c
            raise UserError.single(f"two objects would be written to the same file {name}: "
                                   f"{_label(names[name])} and {_label(obj)}", file=str(staging.parent))
        names[name] = obj
        (staging / name).write_text(dump(obj), encoding="utf-8")
    return list(names)


def _dump_json_without_floats(obj: Any) -> str:
    return dump_json(obj, floats=False)


def _label(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
    return f"{obj.get('kind')}/{where}"


def write_directory(objects: Sequence[dict[str, Any]], target: Path, fmt: str = "yaml") -> None:
    """Write one file per object plus ``kustomization.yaml`` into a temporary sibling directory,
    then swap it in with renames, so readers never see a partial directory. Files that are not
    manifests (README, .gitkeep, dotfiles) are carried over and never listed."""
    kept = _kept_entries(target.absolute())
    target = target.resolve()
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    except OSError as err:
        raise UserError.single(f"cannot create output directory: {err.strerror or err}", file=str(target)) \
            from None
    swapped = False
    try:
        _carry_over(kept, staging)
        names = _write_manifests(objects, staging, fmt)
        kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                         "sortOptions": {"order": "fifo"}, "resources": names}
        (staging / KUSTOMIZATION).write_text(dump_yaml(kustomization), encoding="utf-8")
        os.chmod(staging, 0o755)
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=parent))
            os.rename(target, old / "previous")
        os.rename(staging, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        swapped = True
    except OSError as err:
        raise UserError.single(f"cannot write output: {err.strerror or err}", file=str(target)) from None
    finally:
        if not swapped:  # nothing is ever left half written, whatever stopped it
            shutil.rmtree(staging, ignore_errors=True)
