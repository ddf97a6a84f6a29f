"""JSON Schemas of the rule files, generated from the pydantic models in :mod:`gpustack_render.rules.schema`.

One schema per rule kind, ``<kind lower-case>.schema.json`` (``naming.schema.json``,
``unitresourcepresets.schema.json``, …). The copies checked in under ``schemas/`` let editors validate
rule files while typing: each file in ``rules/`` starts with
``# yaml-language-server: $schema=../schemas/<kind>.schema.json``. A schema only checks shape (keys,
types, enums); meaning (placeholders, facts, expressions, cross-file references) is what
``gpustack-render lint`` checks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpustack_render.errors import UserError
from gpustack_render.rules import schema
from gpustack_render import rulesyaml

DIALECT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://gpustack.ai/schemas/render/"
MODELINE = "# yaml-language-server: $schema=../schemas/{file}"

DESCRIPTIONS = {
    "Rules": "A rules directory's own switch: inherit: false makes it a full copy of the rules (a missing "
             "kind is an error); by default it is an overlay over the built-in rules.",
    "Settings": "Known settings and their defaults; where the settings object lives in the snapshot.",
    "Manufacturers": "Known accelerator manufacturers: resource bases, partition kinds, profile publishing, "
                     "units per accelerator (M).",
    "Naming": "Name formats: NodeFeature, Topology, ResourceFlavor, pool (ClusterQueue/InstanceType), catalog, "
              "LocalQueue. Placeholders {name} or {name|filter} from a closed vocabulary.",
    "Grouping": "Which Nodes feed CPU and accelerated flavors, grouping keys, pool identity, the managed and "
                "cpu-only labels.",
    "Normalisation": "gKey and aKey derivation and the NormalizeName steps.",
    "UnitResourcePresets": "Unit resources of derived InstanceTypes: tiers and per-manufacturer product prefixes.",
    "Namespaces": "Namespaces that never get LocalQueues.",
    "Topology": "Kueue topology levels, coarsest first; the last must be kubernetes.io/hostname.",
    "Queues": "ClusterQueue quota expressions, the flavor limit and admission checks.",
    "Capacity": "Node capacity key families, formulas, presence gates and per-card fit labels.",
    "Lifecycle": "Queue lifecycle: stop-policy rules in order (first match wins) and warnings.",
    "Diff": "What `diff` compares, owns (may call removed) and ignores: server-owned fields, Kueue defaults.",
    "Output": "Labels and annotations added to every rendered object of a kind; a key the template sets wins.",
    "Admission": "How Kueue counts a Pod's requests against quota (resource transformations into credits, per "
                 "manufacturer) and the quota-check strategy, for `admit`.",
}


def file_name(kind: str) -> str:
    return f"{kind.lower()}.schema.json"


def _tidy(node: Any, in_properties: bool = False) -> Any:
    """Drop pydantic's generated per-property titles ("Pincpuonly"); keep everything else."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "title" and in_properties:
                continue
            out[key] = _tidy(value, in_properties=False)
            if key == "properties" and isinstance(value, dict):
                out[key] = {name: _tidy(prop, in_properties=True) for name, prop in value.items()}
        return out
    if isinstance(node, list):
        return [_tidy(item) for item in node]
    return node


def schema_for(kind: str) -> dict[str, Any]:
    model = schema.FILE_KINDS[kind]
    generated = _tidy(model.model_json_schema(by_alias=True, mode="validation"))
    head = {"$schema": DIALECT, "$id": ID_BASE + file_name(kind), "title": f"gpustack-render {kind} rules",
            "description": DESCRIPTIONS.get(kind, f"gpustack-render {kind} rules.")
            + " Generated from gpustack_render/schema.py by `gpustack-render schema`; do not edit."}
    generated.pop("title", None)
    return {**head, **generated}


def generate() -> dict[str, str]:
    """File name → file text, for every rule kind (deterministic, trailing newline)."""
    return {file_name(kind): json.dumps(schema_for(kind), indent=2, ensure_ascii=False) + "\n"
            for kind in sorted(schema.FILE_KINDS)}


def compare(directory: Path) -> list[str]:
    """What differs between ``directory`` and freshly generated schemas (empty: up to date)."""
    problems = []
    wanted = generate()
    for name, text in wanted.items():
        path = directory / name
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{path}: stale (regenerate with `gpustack-render schema -o {directory}`)")
    if directory.is_dir():
        for path in sorted(directory.glob("*.schema.json")):
            if path.name not in wanted:
                problems.append(f"{path}: no rule kind has this schema any more (delete it)")
    return problems


def write(directory: Path) -> list[Path]:
    """Write every schema into ``directory``; returns the files whose content changed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in generate().items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


# --- the editor link in each rule file ------------------------------------------------------------

MODELINE_PREFIX = "# yaml-language-server: $schema="


def _kind_of(text: str) -> str | None:
    """The rule kind a file declares (``None`` when it is not a readable rule file)."""
    try:
        data = rulesyaml.parse(text, "")  # the rule files' reader
    except UserError:
        return None
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind if kind in schema.FILE_KINDS else None


def linked_text(path: Path, schema_dir: Path) -> str | None:
    """``path``'s text with its first line the modeline pointing at ``schema_dir`` (relative to the
    file, so the link survives moving the repository); ``None`` when the file is no rule file."""
    import os
    text = path.read_text(encoding="utf-8")
    kind = _kind_of(text)
    if kind is None:
        return None
    target = Path(os.path.relpath(schema_dir.resolve() / file_name(kind), path.parent.resolve())).as_posix()
    line = MODELINE_PREFIX + target
    first, newline, rest = text.partition("\n")
    if first.startswith(MODELINE_PREFIX):
        return line + newline + rest
    return line + "\n" + text


def relink(rules_dir: Path, schema_dir: Path) -> tuple[list[Path], list[Path]]:
    """Point every rule file of ``rules_dir`` at the schemas in ``schema_dir``: after copying
    ``rules/`` into a GitOps repository the built-in ``../schemas/`` link would point nowhere.
    Returns (files rewritten, files left alone because they are no rule files); only the first line
    changes, the rest of each file stays byte-identical."""
    changed, skipped = [], []
    from gpustack_render.rules.read import rule_files
    for path in rule_files(rules_dir):
        text = linked_text(path, schema_dir)
        if text is None:
            skipped.append(path)
        elif text != path.read_text(encoding="utf-8"):
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed, skipped


def compare_links(rules_dir: Path, schema_dir: Path) -> list[str]:
    """Rule files whose first line does not point at ``schema_dir`` (empty: all linked)."""
    problems = []
    from gpustack_render.rules.read import rule_files
    for path in rule_files(rules_dir):
        text = linked_text(path, schema_dir)
        if text is not None and text != path.read_text(encoding="utf-8"):
            problems.append(f"{path}: its schema link does not point at {schema_dir} "
                            f"(fix with `gpustack-render schema -o {schema_dir} --rules {rules_dir}`)")
    return problems
