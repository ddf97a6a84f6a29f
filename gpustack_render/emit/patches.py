"""Desired owned keys → RFC 6902 JSON Patch documents against each Node as it is in the snapshot.

Capacity values are compared by numeric value (``6400k`` equals ``6400000``) and written as the
canonical DecimalSI strings; fit labels are compared as strings.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Mapping

from functools import lru_cache
from operator import itemgetter

import orjson
from jsonpointer import escape as _escape

from gpustack_render.errors import Diagnostics, UserError
from gpustack_render.evaluate.build import Evaluation
from gpustack_render.evaluate.capacity import CapacityEvaluator
from gpustack_render.k8s import format_decimal_si
from gpustack_render.rules import Rules
from gpustack_render.snapshot import Snapshot
from gpustack_render.timing import stage

Op = dict[str, Any]

# Keys and quantities repeat on every Node: escaped and formatted once per distinct value.
escape = lru_cache(maxsize=1 << 14)(_escape)
_format_decimal_si = lru_cache(maxsize=1 << 14)(format_decimal_si)


class _Paths(dict[str, str]):
    """JSON Pointer paths under one base, one string per distinct key (keys repeat on every Node)."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base

    def __missing__(self, key: str) -> str:
        path = self[key] = f"{self.base}/{escape(key)}"
        return path


_by_path = itemgetter("path")


def _ops(paths: _Paths, current: Mapping[str, Any], desired: list[tuple[str, Any, Any]], wanted: Mapping[str, Any],
         owned: tuple[str, ...]) -> list[Op]:
    """The ops that bring ``current`` to ``desired`` (key, value written, value compared with the
    current one; ``wanted`` has the same keys), removing the ``owned`` keys of ``current`` that are
    not desired; sorted by path."""
    ops: list[Op] = []
    for key, value, compared in desired:
        have = current.get(key, _ABSENT)
        if have is _ABSENT:
            ops.append({"op": "add", "path": paths[key], "value": value})
        elif not have == compared:
            ops.append({"op": "replace", "path": paths[key], "value": value})
    return _with_removals(ops, paths, wanted, owned)


_ABSENT = object()


def _with_removals(ops: list[Op], paths: _Paths, wanted: Mapping[str, Any], owned: tuple[str, ...]) -> list[Op]:
    """``ops`` and a remove of each ``owned`` key that is not ``wanted``, sorted by path (what every
    patch of labels or capacity ends with)."""
    for key in owned:
        if key not in wanted:
            ops.append({"op": "remove", "path": paths[key]})
    if len(ops) > 1:
        ops.sort(key=_by_path)
    return ops


class _StatusOps:
    """The capacity ops of each Node, decided once per distinct input. Nodes with equal cards share
    one desired mapping (:meth:`CapacityEvaluator.desired_parts`) and equal quantities are
    mostly one shared object (the snapshot parses each text once), so the ops are a function of the
    desired mapping, the owned keys (one tuple per key tuple) and the objects the Node holds under
    the desired keys; all three are kept alive by their owners for the whole pass, so their ids
    name them. Each Node gets its own copy of the op objects (a YAML writer would otherwise alias
    them)."""

    def __init__(self, paths: _Paths) -> None:
        self.paths = paths
        self._wanted: dict[int, tuple[Mapping[str, int], tuple[str, ...], list[tuple[str, str, int]]]] = {}
        self._ops: dict[tuple[object, ...], list[Op]] = {}

    def ops(self, capacity: Mapping[str, Any], desired: Mapping[str, int], owned: tuple[str, ...]) -> list[Op]:
        wanted = self._wanted.get(id(desired))
        if wanted is None or wanted[0] is not desired:  # (the entry keeps ``desired`` alive)
            wanted = self._wanted[id(desired)] = (desired, tuple(desired), [
                (k, _format_decimal_si(v), v) for k, v in sorted(desired.items())])
        memo = (id(desired), id(owned), tuple(map(id, map(capacity.get, wanted[1]))))
        ops = self._ops.get(memo)
        if ops is None:
            ops = self._ops[memo] = _ops(self.paths, capacity, wanted[2], desired, owned)
        return [op.copy() for op in ops] if ops else []


NAMED_NODES = 5  # a warning names this many Nodes, then "and N more"


def node_patches(snapshot: Snapshot, rules: Rules, evaluation: Evaluation, diag: Diagnostics) -> list[dict[str, Any]]:
    """Per Node, the patches that bring its owned keys to the desired values (§4.7, §5). Nodes whose
    Devices were evidently not captured (:func:`uncaptured_devices`) get none: removing their keys
    would destroy data the snapshot merely lacks."""
    with stage("patches"):  # -v
        return _node_patches(snapshot, rules, evaluation, diag)


def _node_patches(snapshot: Snapshot, rules: Rules, evaluation: Evaluation, diag: Diagnostics) -> list[dict[str, Any]]:
    """One pass over the Nodes, each step written out in the loop (a call per step and Node was a
    third of the stage): the desired keys (the capacity shared by Nodes with equal cards), then the
    fit-label ops and the capacity ops (:class:`_StatusOps`)."""
    capacity_eval = CapacityEvaluator(rules, diag)
    skipped = set(uncaptured_devices(snapshot, evaluation, capacity_eval))
    if skipped:
        diag.warn(_uncaptured_message(sorted(skipped)) + "; their capacity keys and fit labels are left untouched")
    entries: list[dict[str, Any]] = []
    append = entries.append
    label_paths, status = _Paths("/metadata/labels"), _StatusOps(_Paths("/status/capacity"))
    status_ops_of, owned_in = status.ops, capacity_eval.owned_in
    desired_parts = capacity_eval.desired_parts
    nodes, all_devices = snapshot.nodes, snapshot.devices
    for facts in evaluation.node_facts:
        name = facts.name
        if name in skipped:
            continue
        node = nodes[name]
        devices = all_devices.get(name)
        managed = facts.managed
        want_capacity: Mapping[str, int]
        want_labels: Mapping[str, str]
        if managed and devices is not None:
            want_capacity, want_labels = desired_parts(node, devices, facts)
        else:
            want_capacity, want_labels = _NO_CAPACITY, _NO_LABELS
        labels = node.metadata.labels
        if labels is None:
            label_ops = ([{"op": "add", "path": "/metadata/labels", "value": dict(sorted(want_labels.items()))}]
                         if want_labels else [])
        else:
            label_ops = _label_ops(label_paths, labels, want_labels, owned_in(facts.label_keys, False))
        capacity = node.status.capacity
        if capacity is None:
            status_ops = ([{"op": "add", "path": "/status/capacity", "value": {
                k: _format_decimal_si(v) for k, v in sorted(want_capacity.items())}}] if want_capacity else [])
        else:
            status_ops = status_ops_of(capacity, want_capacity, owned_in(tuple(capacity), True))
        if managed and devices is None:
            _warn_removed_without_devices(diag, name, label_ops, status_ops)
        if label_ops:
            append({"node": name, "subresource": "", "patch": label_ops})
        if status_ops:
            append({"node": name, "subresource": "status", "patch": status_ops})
    return entries


_NO_CAPACITY: Mapping[str, int] = {}
_NO_LABELS: Mapping[str, str] = {}


def _label_ops(paths: _Paths, labels: Mapping[str, str], wanted: Mapping[str, str], owned: tuple[str, ...]) -> list[Op]:
    """The fit-label ops (:func:`_ops` for string values, written as they are compared)."""
    return _ops(paths, labels, [(key, value, value) for key, value in sorted(wanted.items())], wanted, owned)


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


def _compact_json(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"))``, written by orjson when the two agree: on text
    that is printable ASCII without a ``\\u`` escape (the stdlib escapes DEL and every non-ASCII
    character, orjson neither) — the patches' values are strings, so nothing else differs."""
    try:
        text = orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value, separators=(",", ":"))
    if text.isascii() and text.isprintable() and "\\u" not in text:
        return text
    return json.dumps(value, separators=(",", ":"))


def kubectl_lines(entries: list[dict[str, Any]]) -> str:
    lines = []
    for entry in entries:
        sub = " --subresource=status" if entry["subresource"] == "status" else ""
        patch = _compact_json(entry["patch"])
        lines.append(f"kubectl patch node {shlex.quote(entry['node'])}{sub} --type=json -p {shlex.quote(patch)}")
    return "\n".join(lines) + ("\n" if lines else "")
