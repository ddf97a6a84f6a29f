"""Workloads for ``pin``: read and typed by the one Workload reader (snapshot/workloads.py).

Every input Workload is checked up front, whatever its queue, so that bad input is exit 2 the same
way whether or not the Workload would be pinned: a document that is not a Kueue Workload, a PodSet
without a template, a resource quantity that does not parse, an affinity of the wrong shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from gpustack_render.pin.demand import Container, Demand, ResourceClassifier, podset_demand
from gpustack_render.snapshot import snapshot_kinds
from gpustack_render.snapshot.workload_model import Workload
from gpustack_render.snapshot.workloads import WorkloadSource, read_sources, type_workloads

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@dataclass
class PodSetInput:
    index: int
    name: str
    demand: Demand


@dataclass
class WorkloadInput:
    obj: dict[str, Any]
    file: str
    namespace: str
    name: str
    queue: str | None
    podsets: list[PodSetInput] = field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def _unshared(value: Any) -> Any:
    """A copy in which no two places share one mapping or list (YAML aliases do share them): the
    pin edits one PodSet's affinity, never another's through an alias."""
    if isinstance(value, dict):
        return {k: _unshared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshared(v) for v in value]
    return value


def _misplaced(found: str) -> str:
    return (f"holds no Kueue Workload, only snapshot objects ({found}); a snapshot path goes after --snapshot "
            f"(pin WORKLOAD... --snapshot SNAPSHOT...; every path after --snapshot up to the next option is one)")


def read_workloads(paths: Iterable[str], classifier: ResourceClassifier) -> list[WorkloadInput]:
    """All Workloads of ``paths`` in input order; every problem of every document raised at once."""
    read = read_sources(paths, "pin", snapshot_kinds(classifier.worker_group), _misplaced)
    objs: list[dict[str, Any]] = [_unshared(source.obj) for source in read]  # (files give plain data)
    typed = type_workloads([WorkloadSource(obj, s.file) for obj, s in zip(objs, read)], status=False,
                           require_queue=False)
    return [_input(obj, workload, classifier) for obj, workload in zip(objs, typed)]


def _input(obj: dict[str, Any], workload: Workload, classifier: ResourceClassifier) -> WorkloadInput:
    out = WorkloadInput(obj, workload.file, workload.namespace, workload.name, workload.spec.queueName or None)
    for index, podset in enumerate(workload.spec.podSets):
        pod = podset.template.spec
        base = ("spec", "podSets", index, "template", "spec")
        containers = [Container(base + (section, j), c.requests)
                      for section, items in (("initContainers", pod.initContainers), ("containers", pod.containers))
                      for j, c in enumerate(items)]
        name = podset.name if podset.name is not None else str(index)
        out.podsets.append(PodSetInput(index, name, podset_demand(containers, classifier)))
    return out
