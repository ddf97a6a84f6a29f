"""Per-kind extra metadata from ``rules/output.yaml``, added to rendered objects.

Admins need marks the templates do not carry — a GitOps tool's prune switch on create-only
InstanceTypes, a team label — without editing templates. This is the one step that adds them, a
pure function over the rendered objects: it never mutates its input, so the same render can be
emitted with and without it.

The template wins: a label or annotation key the template already set keeps the template's value
(the template writes the keys the operator's own controllers read, and a rule must not be able to
change those by accident). :func:`overridden_keys` names such keys, for a warning.
"""

from __future__ import annotations

from typing import Any, Mapping

from gpustack_render.k8s import mapping_field
from gpustack_render.rules import KindMetadata
from gpustack_render.yamlio import Manifests

SECTIONS = ("labels", "annotations")


def _extra(meta: KindMetadata, section: str) -> tuple[tuple[str, str], ...]:
    return meta.labels if section == "labels" else meta.annotations


def _with_metadata(obj: dict[str, Any], meta: KindMetadata) -> dict[str, Any]:
    """A copy of ``obj`` with the kind's keys added; the maps sorted, like the renderer's own."""
    metadata = dict(obj.get("metadata") or {})
    for section in SECTIONS:
        extra = _extra(meta, section)
        if not extra:
            continue
        merged = dict(mapping_field(metadata, section))
        for key, value in extra:
            merged.setdefault(key, value)
        metadata[section] = dict(sorted(merged.items()))
    return {**obj, "metadata": metadata}


def apply_output_metadata(objects: list[dict[str, Any]], output: Mapping[str, KindMetadata]) -> list[dict[str, Any]]:
    """``objects`` with every kind's labels and annotations of ``output`` added (the template wins
    on a key it set). Objects of kinds without extra metadata are passed through as they are."""
    result = []
    for obj in objects:
        meta = output.get(str(obj.get("kind")))
        result.append(_with_metadata(obj, meta) if meta and (meta.labels or meta.annotations) else obj)
    if isinstance(objects, Manifests):  # what the render knows of its floats holds for what is added
        added = [value for meta in output.values() for _key, value in meta.labels + meta.annotations]
        return Manifests(result, objects.floats or not all(type(value) is str for value in added))
    return result


def overridden_keys(objects: list[dict[str, Any]], output: Mapping[str, KindMetadata]) -> list[str]:
    """``Kind/name: metadata.labels.KEY`` for every rule key a template set to another value: the rule
    does not apply there (see the module docstring), which an admin should hear about."""
    found = []
    for obj in objects:
        meta = output.get(str(obj.get("kind")))
        metadata = mapping_field(obj, "metadata")
        if not meta:
            continue
        for section in SECTIONS:
            current = mapping_field(metadata, section)
            for key, value in _extra(meta, section):
                if key in current and current[key] != value:
                    found.append(f"{obj.get('kind')}/{metadata.get('name')}: metadata.{section}.{key}: the template "
                                 f"sets {current[key]!r}, so rules/output.yaml's {value!r} is not applied")
    return found
