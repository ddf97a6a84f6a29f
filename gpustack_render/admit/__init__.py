"""``admit``: which Workloads Kueue would admit with a chain, where, and why not (admission.md).

A feature beside ``pin``: it reads the plan (through the callables the pipeline hands it) and the
snapshot, and imports forward only. The engine (``engine``) is pure over ``model``'s dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from gpustack_render.admit.chain import KUEUE_GROUP, read_chain
from gpustack_render.admit.engine import Result, admit
from gpustack_render.admit.inputs import demands, node_rooms
from gpustack_render.admit.model import Cluster, WorkloadDemand
from gpustack_render.admit.output import compare, document

RENDERED, LIVE, COMPARE = "rendered", "live", "compare"


@dataclass
class Preview:
    """The JSON document of admission.md §9, the notes for stderr, and the runs it came from."""

    doc: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    runs: dict[str, Result] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.doc.get("changed"))


def run_preview(ctx: Any, workload_paths: Sequence[str], chain: str, reserve: Mapping[str, Fraction],
                rendered_objects: Callable[[], list[dict[str, Any]]],
                rendered_labels: Callable[[], dict[str, dict[str, str]]]) -> Preview:
    from gpustack_render.snapshot import snapshot_kinds
    from gpustack_render.snapshot.workloads import read_workloads, snapshot_workloads
    from gpustack_render.rules.admission import quota_usage
    rule = ctx.rules.admission  # the quota accounting (admission.md §3) and the quota-check strategy
    extra = []
    if workload_paths:
        kinds = snapshot_kinds(ctx.rules.vocabulary.workerApiGroup)
        extra = read_workloads(workload_paths, "admit", kinds, _misplaced)
    workloads = demands(snapshot_workloads(ctx.snapshot), extra, partial(quota_usage, rule=rule))
    preview = Preview({})
    modes = (LIVE, RENDERED) if chain == COMPARE else (chain,)
    docs = {}
    for mode in modes:
        if mode == RENDERED:
            objects, labels = rendered_objects(), rendered_labels()
        else:
            objects = [obj for key, obj in sorted(ctx.snapshot.raw.items()) if key[0] == KUEUE_GROUP]
            labels = {}
        result = run_chain(objects, labels, ctx.snapshot, workloads, reserve, rule.strict, evict=mode == RENDERED)
        preview.runs[mode] = result
        docs[mode] = document(result, mode)
        preview.notes += [n for n in result.notes if n not in preview.notes]
    preview.doc = compare(docs[LIVE], docs[RENDERED]) if chain == COMPARE else docs[chain]
    return preview


def run_chain(objects: Sequence[Mapping[str, Any]], labels: Mapping[str, Mapping[str, str]], snapshot: Any,
              workloads: list[WorkloadDemand], reserve: Mapping[str, Fraction], strict: bool, evict: bool) -> Result:
    rooms, notes = node_rooms(snapshot, labels)
    if reserve:
        notes[0] = ("--reserve takes " + ", ".join(f"{r}={q}" for r, q in sorted(reserve.items()))
                    + " from every Node's room for Pods that no Workload accounts for")
    cluster = Cluster(read_chain(objects), rooms, workloads, dict(reserve), strict, notes)
    return admit(cluster, evict)


def _misplaced(found: str) -> str:
    return (f"holds no Kueue Workload, only snapshot objects ({found}); snapshot paths go before --workloads "
            f"(admit SNAPSHOT... --workloads PATH...)")
