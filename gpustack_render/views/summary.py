"""``gpustack-render summary``: one line per pool (ClusterQueue), as ``kubectl get`` prints a table.

Everything comes from the one evaluation ``render`` does (the plan) plus each Node's labels after
its ``node-patches`` fit-label patch (:func:`gpustack_render.pipeline.fit_node_labels`); the fit
label keys are the ``fitLabels`` formats of the Capacity rules, rendered for the pool's aKey.
Pure: :func:`summarise` builds the rows, :func:`format_table` / :func:`as_json` write them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import AbstractSet as Set, Any, Iterable, Mapping, Sequence

from gpustack_render.evaluate.chain import flavor_selector
from gpustack_render.evaluate.flavors import flavor_fields
from gpustack_render.evaluate.plan import ClusterQueuePlan, FlavorPlan
from gpustack_render.k8s import format_decimal_si
from gpustack_render.tables import kubectl_lines
from gpustack_render.diff.quota import queue_quota
from gpustack_render.views.graph import ACTIVE_STOP_POLICY

NONE = "<none>"        # kubectl's text for an empty cell
UNKNOWN = "<unknown>"  # a value the snapshot cannot tell (no Devices, hence no fit labels)
NOT_RENDERED = "-"     # a cell of a pool the render does not have (a Node label meant for it is unusable)
# the refusal of such a pool: its reason (the REFUSAL column) and what it means
LOST = "NotRendered: no flavor of this pool is rendered; its warnings say which Node labels were meant for it"

# A warning names the objects it is about as ``Kind/name`` (or "ClusterQueue name" in running text).
_REFERENCE = re.compile(r"\b(ClusterQueue|InstanceType|ResourceFlavor|Node)[/ ]([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass
class PoolSummary:
    name: str
    acceleratable: bool
    accelerator_group: str
    nodes: int
    cards: int | None               # None for a CPU pool
    quota: tuple[tuple[str, str], ...]
    free_cards: int | None          # None: not an accelerated pool, or no Node has the fit label
    max_free_slice: int | None      # units; None: no Node of the pool has a sliceable card's label
    stop_policy: str
    refusal: str
    flavors: list[str] = field(default_factory=list)
    local_queues: int = 0
    warnings: list[str] = field(default_factory=list)
    local_queue_names: list[str] = field(default_factory=list)  # the distinct LocalQueue names, sorted
    rendered: bool = True  # False: a pool a Node label was meant for, which the render does not have

    def as_json(self) -> dict[str, Any]:
        out = {"name": self.name, "acceleratable": self.acceleratable,
               "acceleratorGroup": self.accelerator_group or None, "nodes": self.nodes, "cards": self.cards,
               "quota": dict(self.quota), "freeCards": self.free_cards, "maxFreeSlice": self.max_free_slice,
               "stopPolicy": self.stop_policy, "refusal": self.refusal or None, "flavors": self.flavors,
               "localQueues": self.local_queues, "warnings": self.warnings}
        return out if self.rendered else {**out, "stopPolicy": None, "rendered": False}


def summarise(ctx: Any, fit_labels: Mapping[str, Mapping[str, str]]) -> list[PoolSummary]:
    """One row per ClusterQueue of the plan, by name. ``fit_labels``: each Node's labels after the
    fit-label patch (``pipeline.fit_node_labels(ctx)``)."""
    from gpustack_render.render import Renderer
    plan = ctx.evaluation.plan
    queues = sorted(plan.cluster_queues, key=lambda q: q.name)
    rendered = {_name(o): o for o in Renderer(None).render_kind("ClusterQueue", queues)}
    local: dict[str, list[str]] = {q.name: [] for q in queues}
    for lq in plan.local_queues:
        local.setdefault(lq.cluster_queue, []).append(lq.name)
    warnings = list(ctx.diagnostics.warnings)
    akey_label = re.compile(re.escape(ctx.rules.normalisation.aKey.labelPrefix) + r"([A-Za-z0-9_-]+)")
    pools = []
    for queue in queues:
        flavors = pool_flavors(queue, plan.flavors, ctx.rules)
        pools.append((queue, flavors, *_accelerator(ctx, queue.name, flavors)))
    groups = {akey for *_, akey in pools if akey}  # the accelerator groups that have a pool
    meant = meant_pools(ctx, warnings, akey_label)
    rows = []
    for queue, flavors, acceleratable, akey in pools:
        nodes = sorted({n for f in flavors for n in f.nodes})
        free, largest = _fit(ctx.rules, akey, nodes, fit_labels) if acceleratable and akey else (None, None)
        rows.append(PoolSummary(
            name=queue.name, acceleratable=acceleratable, accelerator_group=akey, nodes=len(nodes),
            cards=sum(f.capacity for f in flavors) if acceleratable else None,
            quota=queue_quota(rendered[queue.name]), free_cards=free, max_free_slice=largest,
            stop_policy=queue.stop_policy, refusal=queue.refusal, flavors=[f.name for f in flavors],
            local_queues=len(local[queue.name]), local_queue_names=sorted(set(local[queue.name])),
            warnings=pool_warnings(warnings, queue.name, {f.name for f in flavors}, set(nodes), akey,
                                    akey_label, groups, meant)))
    for name, akey in dict(sorted(meant.values())).items():
        if name not in rendered:  # a pool the render lost: a row marked not rendered, with its warnings
            rows.append(PoolSummary(
                name=name, acceleratable=True, accelerator_group=akey, nodes=0, cards=0, quota=(), free_cards=None,
                max_free_slice=None, stop_policy="", refusal=LOST, rendered=False,
                warnings=[w for w in warnings if meant.get(w, ("", ""))[0] == name]))
    return sorted(rows, key=lambda r: r.name)


def meant_pools(ctx: Any, warnings: Iterable[str], akey_label: re.Pattern[str]) -> dict[str, tuple[str, str]]:
    """The warnings about one Node's label of one accelerator group, each with the pool the label
    was meant for and its aKey: the name the accelerated pool's Naming format gives the Node's
    fields with that aKey, as the render names the pool. The render may have lost that pool (a
    count label that is not a number drops the group's flavor on every Node, and with it the pool)."""
    out: dict[str, tuple[str, str]] = {}
    facts: dict[str, Any] | None = None
    name_format = ctx.rules.naming.pool[(ctx.rules.is_aware(ctx.settings), True)]
    for warning in warnings:
        meant = set(akey_label.findall(warning))
        refs = [(kind, name.rstrip(".")) for kind, name in _REFERENCE.findall(warning)]
        nodes = {name for kind, name in refs if kind == "Node"}
        if len(meant) != 1 or len(nodes) != 1 or len(refs) != 1:
            continue
        if facts is None:
            facts = {f.name: f for f in ctx.evaluation.node_facts}
        node, akey = facts.get(nodes.pop()), meant.pop()
        if node is not None:
            out[warning] = (name_format.render(flavor_fields(node, akey, 0)), akey)
    return out


def pool_flavors(queue: ClusterQueuePlan, flavors: Sequence[FlavorPlan], rules: Any) -> list[FlavorPlan]:
    """The flavors the queue's selector picks (stage4-chain.md §2.4 step 1), whether or not its plan
    was kept: the pool's hardware, even when the queue was refused or holds."""
    selector = flavor_selector(queue.labels, rules).items()
    return sorted((f for f in flavors if selector <= f.labels.items() and f.capacity > 0), key=lambda f: f.name)


def _accelerator(ctx: Any, name: str, flavors: Sequence[FlavorPlan]) -> tuple[bool, str]:
    """Whether the pool is accelerated and its aKey: from its flavors, else its InstanceType."""
    if flavors:
        return flavors[0].accelerated, flavors[0].akey if flavors[0].accelerated else ""
    for it in ctx.evaluation.plan.instance_types:
        if it.name == name:
            return it.acceleratable, it.accelerator_group if it.acceleratable else ""
    known = ctx.snapshot.instance_types.get(name) or ctx.snapshot.deleted_instance_types.get(name)
    if known is not None:
        return bool(known.spec.acceleratable), known.spec.acceleratorGroup if known.spec.acceleratable else ""
    return False, ""


def _fit(rules: Any, akey: str, nodes: Iterable[str],
         fit_labels: Mapping[str, Mapping[str, str]]) -> tuple[int | None, int | None]:
    """(free cards summed over the pool's Nodes, the largest free slice on any one card)."""
    shared_key = rules.capacity.fit_shared_label.render({"aKey": akey})
    sliced_key = rules.capacity.fit_sliced_label.render({"aKey": akey})
    shared = [_int(fit_labels.get(n, {}).get(shared_key)) for n in nodes]
    sliced = [_int(fit_labels.get(n, {}).get(sliced_key)) for n in nodes]
    shared_known = [v for v in shared if v is not None]
    sliced_known = [v for v in sliced if v is not None]
    return (sum(shared_known) if shared_known else None), (max(sliced_known) if sliced_known else None)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def pool_warnings(warnings: Iterable[str], queue: str, flavors: set[str], nodes: set[str], akey: str,
                  akey_label: re.Pattern[str], groups: Set[str],
                  meant_pool: Mapping[str, tuple[str, str]]) -> list[str]:
    """The warnings about this pool. A warning that names ClusterQueues is about those queues only
    (another queue's refusal may mention a Node this pool shares); one about a Node label of an
    accelerator group that has a pool (``akey_label`` finds the groups, ``groups`` are those with a
    pool) is about the pools of that group, the pool the label was meant for, not the CPU pool the
    Node is left in; any other is about the pool when it names the pool's InstanceType (same
    name), one of its flavors or one of its Nodes (so a label meant for a pool the render no longer
    has still shows, under the pools the Node is in). A warning in ``meant_pool``
    (:func:`meant_pools`) is about the pool named there only, which may be one the render lost."""
    out = []
    for warning in warnings:
        if warning in meant_pool:
            if meant_pool[warning][0] == queue:
                out.append(warning)
            continue
        refs = [(kind, name.rstrip(".")) for kind, name in _REFERENCE.findall(warning)]
        queues = {name for kind, name in refs if kind == "ClusterQueue"}
        meant = set(akey_label.findall(warning)) & groups
        if queues:
            mine = queue in queues
        elif meant:
            mine = akey in meant
        else:
            mine = any((kind == "InstanceType" and name == queue) or (kind == "ResourceFlavor" and name in flavors)
                       or (kind == "Node" and name in nodes) for kind, name in refs)
        if mine:
            out.append(warning)
    return out


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


# --- output ----------------------------------------------------------------------------------------

COLUMNS = ("NAME", "NODES", "CARDS", "QUOTA", "FREE-CARDS", "MAX-FREE-SLICE", "STOP-POLICY", "REFUSAL", "WARNINGS")
WIDE_COLUMNS = COLUMNS + ("ACCELERATOR", "FLAVORS", "LOCAL-QUEUES", "MESSAGE")


def _cells(row: PoolSummary, wide: bool) -> list[str]:
    def num(value: int | None, missing: str) -> str:
        return missing if value is None else str(value)
    accelerated_missing = NOT_RENDERED if not row.rendered else UNKNOWN if row.acceleratable else NONE
    cells = [row.name, str(row.nodes), num(row.cards, NONE),
             ",".join(f"{r}={v}" for r, v in row.quota) or (NONE if row.rendered else NOT_RENDERED),
             num(row.free_cards, accelerated_missing),  # the slice in units, written as the quota's credits are
             accelerated_missing if row.max_free_slice is None else format_decimal_si(row.max_free_slice),
             row.stop_policy or (ACTIVE_STOP_POLICY if row.rendered else NOT_RENDERED),
             row.refusal.split(":", 1)[0] if row.refusal else NONE,
             str(len(row.warnings))]
    if wide:
        cells += [row.accelerator_group or NONE, str(len(row.flavors)), ",".join(row.local_queue_names) or NONE,
                  (row.refusal if row.rendered else "") or (row.warnings[0] if row.warnings else NONE)]
    return cells


def format_table(rows: Sequence[PoolSummary], wide: bool = False) -> str:
    """``kubectl get`` layout: upper-case headers, left-aligned columns 3 spaces apart, no trailing
    blanks. No rows → no output (the caller says so on stderr, as kubectl does)."""
    if not rows:
        return ""
    table = [list(WIDE_COLUMNS if wide else COLUMNS)] + [_cells(r, wide) for r in rows]
    return "".join(line + "\n" for line in kubectl_lines(table))


def as_json(rows: Sequence[PoolSummary]) -> dict[str, Any]:
    return {"pools": [r.as_json() for r in rows]}
