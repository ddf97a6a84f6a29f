"""Desired owned keys → RFC 6902 JSON Patch documents against each Node as it is in the snapshot.

Capacity values are compared by numeric value (``6400k`` equals ``6400000``) and written as the
canonical DecimalSI strings; fit labels are compared as strings.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Mapping

from functools import lru_cache

from jsonpointer import escape as _escape

from gpustack_render.errors import Diagnostics, UserError
from gpustack_render.evaluate.build import Evaluation
from gpustack_render.evaluate.capacity import CapacityEvaluator, NodeDesired
from gpustack_render.snapshot.inputs import Node
from gpustack_render.k8s import format_decimal_si
from gpustack_render.rules import Rules
from gpustack_render.snapshot import Snapshot

Op = dict[str, Any]

# Keys and quantities repeat on every Node: escaped and formatted once per distinct value.
escape = lru_cache(maxsize=1 << 14)(_escape)
_format_decimal_si = lru_cache(maxsize=1 << 14)(format_decimal_si)


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


NAMED_NODES = 5  # a warning names this many Nodes, then "and N more"


def node_patches(snapshot: Snapshot, rules: Rules, evaluation: Evaluation, diag: Diagnostics) -> list[dict[str, Any]]:
    """Per Node, the patches that bring its owned keys to the desired values (§4.7, §5). Nodes whose
    Devices were evidently not captured (:func:`uncaptured_devices`) get none: removing their keys
    would destroy data the snapshot merely lacks."""
    capacity_eval = CapacityEvaluator(rules, diag)
    skipped = set(uncaptured_devices(snapshot, evaluation, capacity_eval))
    if skipped:
        diag.warn(_uncaptured_message(sorted(skipped)) + "; their capacity keys and fit labels are left untouched")
    entries: list[dict[str, Any]] = []
    for facts in evaluation.node_facts:
        if facts.name in skipped:
            continue
        node = snapshot.nodes[facts.name]
        devices = snapshot.devices.get(facts.name)
        label_ops, status_ops = _node_ops(node, capacity_eval.desired(node, devices, facts), capacity_eval)
        if facts.managed and devices is None:
            _warn_removed_without_devices(diag, facts.name, label_ops, status_ops)
        if label_ops:
            entries.append({"node": facts.name, "subresource": "", "patch": label_ops})
        if status_ops:
            entries.append({"node": facts.name, "subresource": "status", "patch": status_ops})
    return entries


def _node_ops(node: Node, desired: NodeDesired, capacity_eval: CapacityEvaluator) -> tuple[list[Op], list[Op]]:
    """The fit-label ops and the capacity ops for one Node (either may be empty)."""
    labels = node.metadata.labels
    want_labels = dict(sorted(desired.labels.items()))
    if labels is None:
        label_ops = [{"op": "add", "path": "/metadata/labels", "value": want_labels}] if want_labels else []
    else:
        label_ops = _ops("/metadata/labels", labels, want_labels, capacity_eval.owns_label,
                         lambda have, key: have == want_labels[key])
    capacity = node.status.capacity
    want_capacity = {k: _format_decimal_si(v) for k, v in sorted(desired.capacity.items())}
    if capacity is None:
        status_ops = [{"op": "add", "path": "/status/capacity", "value": want_capacity}] if want_capacity else []
    else:
        status_ops = _ops("/status/capacity", capacity, want_capacity, capacity_eval.owns_capacity,
                          lambda have, key: have == desired.capacity[key])
    return label_ops, status_ops


def uncaptured_devices(snapshot: Snapshot, evaluation: Evaluation, capacity_eval: CapacityEvaluator) -> list[str]:
    """The managed Nodes that show accelerators when the snapshot holds no Devices object at all
    (stage3-node.md §4.3). Such a snapshot was captured without Devices, so the Nodes' desired keys
    are unknown rather than empty. Unmanaged Nodes are not listed: their keys go whatever Devices say."""
    if snapshot.devices:
        return []
    return sorted(f.name for f in evaluation.node_facts
                  if f.managed and capacity_eval.shows_accelerator(snapshot.nodes[f.name], f))


def check_devices_captured(snapshot: Snapshot, rules: Rules, evaluation: Evaluation) -> None:
    """``--strict-devices``: refuse (exit 2) a snapshot evidently captured without Devices instead
    of skipping its GPU Nodes with a warning."""
    names = uncaptured_devices(snapshot, evaluation, CapacityEvaluator(rules, Diagnostics()))
    if names:
        raise UserError.single(_uncaptured_message(names) + " (--strict-devices)")


def _uncaptured_message(names: list[str]) -> str:
    shown = ", ".join(names[:NAMED_NODES]) + (f" and {len(names) - NAMED_NODES} more" if len(names) > NAMED_NODES
                                                 else "")
    return (f"the snapshot holds no Devices object at all, yet {len(names)} managed Node(s) show accelerators "
            f"({shown}): it was probably captured without Devices")


def _warn_removed_without_devices(diag: Diagnostics, name: str, label_ops: list[Op], status_ops: list[Op]) -> None:
    """§4.3: with Devices for other Nodes, a Node without one loses its owned keys (upstream's rule),
    but never silently: the missing object may be a capture or device-manager problem."""
    keys = sum(op["op"] == "remove" for op in status_ops)
    labels = sum(op["op"] == "remove" for op in label_ops)
    if keys or labels:
        diag.warn(f"Node/{name}: no Devices object of that name in the snapshot (it holds Devices for other "
                  f"Nodes): removing its {keys} capacity key(s) and {labels} fit label(s)")


def kubectl_lines(entries: list[dict[str, Any]]) -> str:
    lines = []
    for entry in entries:
        sub = " --subresource=status" if entry["subresource"] == "status" else ""
        patch = json.dumps(entry["patch"], separators=(",", ":"))
        lines.append(f"kubectl patch node {shlex.quote(entry['node'])}{sub} --type=json -p {shlex.quote(patch)}")
    return "\n".join(lines) + ("\n" if lines else "")
