"""Reading Workloads for ``pin``: files, directories or stdin; single objects, streams or Lists.

Every input Workload is checked up front, whatever its queue, so that bad input is exit 2 the same
way whether or not the Workload would be pinned: a document that is not a Kueue Workload, a PodSet
without a template, a resource quantity that does not parse, an affinity of the wrong shape.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, Iterable, Iterator

from gpustack_render.snapshot import inputs
from gpustack_render.errors import Problem, UserError
from gpustack_render.k8s import field_path, is_list_kind, mapping_field
from gpustack_render.pin.demand import (Container, Demand, Loc, Report, ResourceClassifier, merge_resources,
                                        podset_demand)
from gpustack_render.snapshot import RAW_ONLY_KINDS, locate_line, read_documents

WORKLOAD_GROUP = "kueue.x-k8s.io"
WORKLOAD_KIND = "Workload"
DEFAULT_NAMESPACE = "default"  # a Workload without metadata.namespace, as `kubectl apply` would place it
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


def _flatten(doc: Any, inherit: dict[str, Any] | None = None) -> Iterator[Any]:
    """Documents → objects; list items without apiVersion/kind inherit them from a ``WorkloadList``."""
    if isinstance(doc, dict):
        kind = doc.get("kind")
        if is_list_kind(kind) and isinstance(doc.get("items"), list):
            item_type = None
            if kind == WORKLOAD_KIND + "List" and isinstance(doc.get("apiVersion"), str):
                item_type = {"apiVersion": doc["apiVersion"], "kind": WORKLOAD_KIND}
            for item in doc["items"]:
                yield from _flatten(item, item_type)
            return
        if inherit and "kind" not in doc and "apiVersion" not in doc:
            doc = {**inherit, **doc}
    yield doc


def _unshared(value: Any) -> Any:
    """A copy in which no two places share one mapping or list (YAML aliases do share them): the
    pin edits one PodSet's affinity, never another's through an alias."""
    if isinstance(value, dict):
        return {k: _unshared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshared(v) for v in value]
    return value


def read_workloads(paths: Iterable[str], classifier: ResourceClassifier) -> list[WorkloadInput]:
    """All Workloads of ``paths`` in input order; every problem of every document raised at once."""
    problems: list[Problem] = []
    workloads: list[WorkloadInput] = []
    snapshot_kinds = frozenset(inputs.models(classifier.worker_group)) | RAW_ONLY_KINDS
    for display, docs in groupby(read_documents(paths, problems), key=lambda item: item[0]):
        objects = [obj for _, doc in docs for obj in _flatten(doc)]
        misplaced = _snapshot_file(objects, snapshot_kinds)
        if misplaced:  # one line for the file, not one "not a Kueue Workload" per object
            problems.append(Problem(misplaced, file=display))
            continue
        for obj in objects:
            workload = _check(_unshared(obj), display, classifier, problems)
            if workload is not None:
                workloads.append(workload)
    if problems:
        raise UserError(problems)
    return workloads


def _snapshot_file(objects: list[Any], snapshot_kinds: frozenset[tuple[str, str]]) -> str:
    """A WORKLOAD file that holds only objects a snapshot is made of was most likely meant for
    ``--snapshot``: the message says so (empty when the file holds anything else)."""
    kinds: Counter[str] = Counter()
    for obj in objects:
        api, kind = (obj.get("apiVersion"), obj.get("kind")) if isinstance(obj, dict) else (None, None)
        if not isinstance(api, str) or not isinstance(kind, str):
            return ""
        group = api.rpartition("/")[0]
        if (group, kind) not in snapshot_kinds:
            return ""
        kinds[kind] += 1
    if not kinds:
        return ""
    found = ", ".join(f"{kind}: {n}" for kind, n in sorted(kinds.items()))
    return (f"holds no Kueue Workload, only snapshot objects ({found}); a snapshot path goes after --snapshot "
            f"(pin WORKLOAD... --snapshot SNAPSHOT...; every path after --snapshot up to the next option is one)")


def _label(obj: dict[str, Any]) -> str:
    meta = mapping_field(obj, "metadata")
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) and obj.get("kind") else "<no kind>"
    name, namespace = meta.get("name"), meta.get("namespace")
    name = name if isinstance(name, str) and name else "<no name>"
    return f"{kind}/{namespace}/{name}" if isinstance(namespace, str) and namespace else f"{kind}/{name}"


@dataclass
class _Reporter:
    """Records a problem of one Workload, with the line of the field when the file can tell."""

    file: str
    name: str
    obj: str
    problems: list[Problem]

    def __call__(self, message: str, loc: Loc) -> None:
        line = locate_line(self.file, WORKLOAD_KIND, self.name, loc)
        self.problems.append(Problem(message, file=self.file, line=line, obj=self.obj, path=field_path(loc, "dotted")))


def _check(obj: Any, file: str, classifier: ResourceClassifier, problems: list[Problem]) -> WorkloadInput | None:
    if not isinstance(obj, dict):
        problems.append(Problem("a document must be a mapping (a Kueue Workload)", file=file))
        return None
    api, kind = obj.get("apiVersion"), obj.get("kind")
    group = api.rpartition("/")[0] if isinstance(api, str) else None
    if kind != WORKLOAD_KIND or group != WORKLOAD_GROUP:
        problems.append(Problem(f"not a Kueue Workload (apiVersion {api!r}, kind {kind!r}); pin reads only "
                                f"{WORKLOAD_GROUP} Workloads", file=file, obj=_label(obj)))
        return None
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        problems.append(Problem("required field is missing", file=file, obj=_label(obj), path="metadata.name"))
        return None
    namespace = meta.get("namespace") or DEFAULT_NAMESPACE  # type: ignore[union-attr]
    before = len(problems)
    report = _Reporter(file, name, f"Workload/{namespace}/{name}", problems)
    if not isinstance(namespace, str):
        report("expected a string", ("metadata", "namespace"))
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        report("required field is missing" if spec is None else "expected a mapping", ("spec",))
        return None
    queue = spec.get("queueName")
    if queue is not None and not isinstance(queue, str):
        report("expected a string", ("spec", "queueName"))
    podsets = spec.get("podSets")
    if not isinstance(podsets, list):
        report("required field is missing" if podsets is None else "expected a list", ("spec", "podSets"))
        return None
    workload = WorkloadInput(obj, file, str(namespace), name, queue or None)
    for i, podset in enumerate(podsets):
        checked = _check_podset(podset, ("spec", "podSets", i), classifier, report)
        if checked is not None:
            workload.podsets.append(checked)
    return workload if len(problems) == before else None


def _check_podset(podset: Any, loc: Loc, classifier: ResourceClassifier, report: Report) -> PodSetInput | None:
    if not isinstance(podset, dict):
        report("expected a mapping", loc)
        return None
    name = podset.get("name")
    template = podset.get("template")
    if not isinstance(template, dict):
        report("a PodSet needs a template" if template is None else "expected a mapping", loc + ("template",))
        return None
    pod = template.get("spec")
    pod_loc = loc + ("template", "spec")
    if not isinstance(pod, dict):
        report("a PodSet template needs a spec" if pod is None else "expected a mapping", pod_loc)
        return None
    containers: list[Container] = []
    for section in ("initContainers", "containers"):
        items = pod.get(section)
        if items is None:
            continue
        if not isinstance(items, list):
            report("expected a list", pod_loc + (section,))
            continue
        for j, container in enumerate(items):
            if not isinstance(container, dict):
                report("expected a mapping", pod_loc + (section, j))
                continue
            containers.append(merge_resources(container, pod_loc + (section, j), report))
    _check_affinity(pod, pod_loc, report)
    index = loc[-1]
    assert isinstance(index, int)
    return PodSetInput(index, name if isinstance(name, str) else str(index), podset_demand(containers, classifier))


def _check_affinity(pod: dict[str, Any], loc: Loc, report: Report) -> None:
    """The parts of the required node affinity the pin reads or extends must have their API shape."""
    node = pod
    for key in ("affinity", "nodeAffinity", REQUIRED):
        value = node.get(key)
        loc = loc + (key,)
        if value is None:
            return
        if not isinstance(value, dict):
            report("expected a mapping", loc)
            return
        node = value
    terms = node.get("nodeSelectorTerms")
    if terms is None:
        return
    if not isinstance(terms, list):
        report("expected a list", loc + ("nodeSelectorTerms",))
        return
    for j, term in enumerate(terms):
        term_loc = loc + ("nodeSelectorTerms", j)
        if term is None:
            continue
        if not isinstance(term, dict):
            report("expected a mapping", term_loc)
            continue
        for key in ("matchExpressions", "matchFields"):
            entries = term.get(key)
            if entries is None:
                continue
            if not isinstance(entries, list):
                report("expected a list", term_loc + (key,))
                continue
            for k, entry in enumerate(entries):
                if not isinstance(entry, dict):
                    report("expected a mapping", term_loc + (key, k))
