"""The pools of a ``diff``: per ClusterQueue, what serves it before and after applying the render.

A reviewer of a rule change wants the effect on capacity, not YAML: how many Nodes each queue can
use, through how many flavors, with which quota and stop policy. "Before" is the current objects
with the snapshot's Node labels; "after" is the desired objects with the Nodes' converged labels
(what the render means once the NodeFeatures are applied). Everything is read from the manifests
themselves (``spec.resourceGroups``, ``spec.nodeLabels``), so the table follows whatever the
templates write. :mod:`diff_report` turns the rows into markdown.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from gpustack_render.diff import DiffPolicy
from gpustack_render.diff.quota import queue_quota
from gpustack_render.k8s import Key, identity, mapping_field

QUEUE_KIND = "ClusterQueue"
FLAVOR_KIND = "ResourceFlavor"
STOP_POLICY = ("spec", "stopPolicy")

Labels = Mapping[str, str]


@dataclass(frozen=True)
class PoolSide:
    """One ClusterQueue on one side of the diff."""

    nodes: int
    flavors: tuple[str, ...]               # sorted: the order of flavors in a queue is not a pool change
    quota: tuple[tuple[str, str], ...]     # (resource, total nominalQuota), sorted by resource
    stop_policy: str


@dataclass(frozen=True)
class PoolRow:
    name: str
    before: PoolSide | None
    after: PoolSide | None

    @property
    def change(self) -> str:
        """``added`` / ``removed`` / ``changed``, or ``""`` when the pool stays as it is."""
        if self.before is None:
            return "added"
        if self.after is None:
            return "removed"
        return "changed" if self.before != self.after else ""


class NodeCounter:
    """Nodes selected by flavors' ``nodeLabels``, computed once per distinct label signature (10,000
    Nodes share a few dozen signatures)."""

    def __init__(self, selectors: Mapping[str, Labels], nodes: Mapping[str, Labels]) -> None:
        keys = sorted({k for selector in selectors.values() for k in selector})
        position = {k: i for i, k in enumerate(keys)}
        groups = Counter(tuple(labels.get(k) for k in keys) for labels in nodes.values())
        self.sizes = list(groups.values())
        signatures = list(groups)
        self.matches: dict[str, frozenset[int]] = {
            name: frozenset(i for i, sig in enumerate(signatures)
                            if all(sig[position[k]] == str(v) for k, v in selector.items()))
            for name, selector in selectors.items()}

    def count(self, flavors: Iterable[str]) -> int:
        """Nodes selected by any of ``flavors`` (a Node two flavors select counts once); a flavor
        that does not exist on this side selects nothing."""
        chosen: set[int] = set()
        for name in flavors:
            chosen |= self.matches.get(name, frozenset())
        return sum(self.sizes[i] for i in chosen)


def _of_kind(objects: Iterable[dict[str, Any]], kind: str) -> dict[Key, dict[str, Any]]:
    return {key: obj for obj in objects if (key := identity(obj))[1] == kind}


def _selectors(objects: Iterable[dict[str, Any]]) -> dict[str, Labels]:
    out: dict[str, Labels] = {}
    for key, flavor in _of_kind(objects, FLAVOR_KIND).items():
        spec = mapping_field(flavor, "spec")
        labels = spec.get("nodeLabels")
        out[key[3]] = labels if isinstance(labels, dict) else {}
    return out


def _groups(queue: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = mapping_field(queue, "spec")
    groups = spec.get("resourceGroups")
    return [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []


def queue_flavors(queue: Mapping[str, Any]) -> list[str]:
    """The flavor names of a ClusterQueue's resource groups, in order."""
    return [str(f["name"]) for g in _groups(queue) for f in _as_list(g.get("flavors"))
            if isinstance(f, dict) and f.get("name")]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _side(queue: Mapping[str, Any] | None, nodes: NodeCounter, default_stop: str) -> PoolSide | None:
    if queue is None:
        return None
    flavors = queue_flavors(queue)
    spec = mapping_field(queue, "spec")
    return PoolSide(nodes.count(flavors), tuple(sorted(set(flavors))), queue_quota(dict(queue)),
                    str(spec.get(STOP_POLICY[1], default_stop)))


@dataclass
class PoolComparison:
    rows: list[PoolRow]

    def changed_desired(self) -> list[str]:
        """The pools that change and still exist after: what the diagram draws."""
        return [row.name for row in self.rows if row.change and row.after is not None]


def labels_before(nodes: Mapping[str, Labels], converged: Mapping[str, Labels], node_features: Iterable[Any],
                  current: Iterable[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Each Node's labels as the *current* objects leave them: the snapshot's labels, plus what the
    worker sets on a Node directly (converged labels that come from neither the snapshot nor the
    desired NodeFeature, e.g. a computed topology profile), plus the current NodeFeature's
    ``spec.labels`` (NFD copies them onto the Node). Without this, a previous render that was never
    applied, or a snapshot taken before NFD caught up, counts no Node in any pool "before", and a
    rules change that leaves the Nodes alone reads as Nodes ``0 → n``. A current NodeFeature is tied
    to its Node through the plan's NodeFeature of the same namespace and name (``node_features``:
    items with ``namespace``, ``name``, ``node`` and ``labels``)."""
    plan = {(nf.namespace, nf.name): nf for nf in node_features}
    desired_nf = {nf.node: nf.labels for nf in plan.values()}
    out: dict[str, dict[str, str]] = {}
    for name, labels in nodes.items():
        own = desired_nf.get(name, {})
        direct = {k: v for k, v in converged.get(name, {}).items() if k not in labels and k not in own}
        out[name] = {**labels, **direct}
    for obj in current:
        meta = obj.get("metadata") or {}
        nf = plan.get((meta.get("namespace") or "", meta.get("name") or ""))
        nf_labels = (obj.get("spec") or {}).get("labels")
        if obj.get("kind") == "NodeFeature" and nf is not None and nf.node in out and isinstance(nf_labels, dict):
            out[nf.node].update({str(k): str(v) for k, v in nf_labels.items()})
    return out


def compare_pools(desired: Sequence[dict[str, Any]], current: Iterable[dict[str, Any]], policy: DiffPolicy,
                  before_nodes: Mapping[str, Labels], after_nodes: Mapping[str, Labels]) -> PoolComparison:
    """One row per ClusterQueue that is desired or that the tool owns now; changed rows first (each
    group by name), so a cut table still shows what moves."""
    current = [o for o in current if policy.compared(identity(o))]
    want = _of_kind(desired, QUEUE_KIND)
    have = {key: obj for key, obj in _of_kind(current, QUEUE_KIND).items() if key in want or policy.owns(obj)}
    before = NodeCounter(_selectors(current), before_nodes)
    after = NodeCounter(_selectors(desired), after_nodes)
    rows = []
    for key in sorted(want.keys() | have.keys(), key=lambda k: k[3]):
        default_stop = str(policy.default(key, STOP_POLICY) or "")
        rows.append(PoolRow(key[3], _side(have.get(key), before, default_stop),
                            _side(want.get(key), after, default_stop)))
    rows.sort(key=lambda row: not row.change)  # stable: names stay sorted inside each group
    return PoolComparison(rows)
