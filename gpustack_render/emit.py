"""Output: YAML stream, JSON List, or an ``-o`` directory written atomically."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

from gpustack_render.errors import UserError
from gpustack_render.yamlio import dump_json, dump_yaml, dump_yaml_stream


def as_list(objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(objects)}


def format_objects(objects: Sequence[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return dump_json(as_list(objects))
    return dump_yaml_stream(objects) if objects else ""


def file_name(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    kind = str(obj["kind"]).lower()
    if meta.get("namespace"):
        return f"{kind}-{meta['namespace']}-{meta['name']}.yaml"
    return f"{kind}-{meta['name']}.yaml"


def _check_replaceable(target: Path) -> None:
    """Only an earlier render (``kustomization.yaml`` and ``*.yaml`` files, nothing else) may be
    replaced: ``-o .`` in a project must never wipe it."""
    if target.is_symlink():
        raise UserError.single("is a symbolic link; give the real directory", file=str(target))
    if not target.exists():
        return
    if not target.is_dir():
        raise UserError.single("exists and is not a directory", file=str(target))
    cwd = Path.cwd().resolve()
    if target == cwd or target in cwd.parents:
        raise UserError.single("is the current directory or one of its parents; choose a dedicated "
                               "output directory", file=str(target))
    entries = list(target.iterdir())
    if entries and (not (target / "kustomization.yaml").is_file()
                    or any(not e.is_file() or e.suffix != ".yaml" for e in entries)):
        raise UserError.single("is not empty and does not look like an earlier render (kustomization.yaml "
                               "and *.yaml files only); refusing to replace it", file=str(target))


def write_directory(objects: Sequence[dict[str, Any]], target: Path) -> None:
    """Write one file per object plus ``kustomization.yaml`` into a temporary sibling directory,
    then swap it in with renames, so readers never see a partial directory."""
    _check_replaceable(target.absolute())
    target = target.resolve()
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    except OSError as err:
        raise UserError.single(f"cannot create output directory: {err.strerror or err}", file=str(target)) \
            from None
    try:
        names = []
        for obj in objects:
            name = file_name(obj)
            (staging / name).write_text(dump_yaml(obj), encoding="utf-8")
            names.append(name)
        kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                         "sortOptions": {"order": "fifo"}, "resources": names}
        (staging / "kustomization.yaml").write_text(dump_yaml(kustomization), encoding="utf-8")
        os.chmod(staging, 0o755)
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=parent))
            os.rename(target, old / "previous")
        os.rename(staging, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError.single(f"cannot write output: {err.strerror or err}", file=str(target)) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
