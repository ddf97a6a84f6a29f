"""Desired owned keys → RFC 6902 JSON Patch documents against each Node as it is in the snapshot.

Capacity values are compared by numeric value (``6400k`` equals ``6400000``) and written as the
canonical DecimalSI strings; fit labels are compared as strings.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Mapping

from jsonpointer import escape

from gpustack_render.errors import Diagnostics
from gpustack_render.evaluate.build import Evaluation
from gpustack_render.evaluate.capacity import CapacityEvaluator
from gpustack_render.quantity import format_decimal_si
from gpustack_render.rules import Rules
from gpustack_render.snapshot import Snapshot

Op = dict[str, Any]


def _ops(base: str, current: Mapping[str, Any], desired: Mapping[str, str], owned: Any,
         equal: Any) -> list[Op]:
    ops: list[Op] = []
    for key, value in desired.items():
        path = f"{base}/{escape(key)}"
        if key not in current:
            ops.append({"op": "add", "path": path, "value": value})
        elif not equal(current[key], key):
            ops.append({"op": "replace", "path": path, "value": value})
    for key in current:
        if key not in desired and owned(key):
            ops.append({"op": "remove", "path": f"{base}/{escape(key)}"})
    return sorted(ops, key=lambda op: op["path"])


def node_patches(snapshot: Snapshot, rules: Rules, evaluation: Evaluation, diag: Diagnostics) -> list[dict[str, Any]]:
    capacity_eval = CapacityEvaluator(rules, diag)
    entries: list[dict[str, Any]] = []
    for facts in evaluation.node_facts:
        node = snapshot.nodes[facts.name]
        desired = capacity_eval.desired(node, snapshot.devices.get(facts.name), facts)
        labels = node.metadata.labels
        want_labels = dict(sorted(desired.labels.items()))
        if labels is None:
            label_ops = [{"op": "add", "path": "/metadata/labels", "value": want_labels}] if want_labels else []
        else:
            label_ops = _ops("/metadata/labels", labels, want_labels, capacity_eval.owns_label,
                             lambda have, key: have == want_labels[key])
        capacity = node.status.capacity
        want_capacity = {k: format_decimal_si(v) for k, v in sorted(desired.capacity.items())}
        if capacity is None:
            status_ops = [{"op": "add", "path": "/status/capacity", "value": want_capacity}] if want_capacity else []
        else:
            status_ops = _ops("/status/capacity", capacity, want_capacity, capacity_eval.owns_capacity,
                              lambda have, key: have == desired.capacity[key])
        if label_ops:
            entries.append({"node": facts.name, "subresource": "", "patch": label_ops})
        if status_ops:
            entries.append({"node": facts.name, "subresource": "status", "patch": status_ops})
    return entries


def kubectl_lines(entries: list[dict[str, Any]]) -> str:
    lines = []
    for entry in entries:
        sub = " --subresource=status" if entry["subresource"] == "status" else ""
        patch = json.dumps(entry["patch"], separators=(",", ":"))
        lines.append(f"kubectl patch node {shlex.quote(entry['node'])}{sub} --type=json -p {shlex.quote(patch)}")
    return "\n".join(lines) + ("\n" if lines else "")
