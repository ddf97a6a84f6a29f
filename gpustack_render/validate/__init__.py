"""``validate``: would the API server (and Kueue's webhooks) accept these manifests?

Three layers, each one line per problem (``Kind/name: field.path: message``):

* the CRD of the object's apiVersion, when CRDs are known and not skipped: its ``openAPIV3Schema``
  (:mod:`crd_schema`) and its CEL rules (:mod:`cel_rules`), run as the API server runs them on a
  create. The CRDs carry Kueue's size limits (``nodeLabels`` at most 8, ``resourceGroups`` 16,
  ``flavors`` 64, ``coveredResources`` 64 in v1beta2) and rules (flavor resources as many as
  ``coveredResources``, no ``borrowingLimit`` without a cohort, tolerations, Topology levels), so
  none of that is written here: the CRD's own limits and messages are the ones reported;
* what the API server checks although no CRD says it: object metadata (apimachinery's ObjectMeta
  validation: names, namespaces, label keys and values, annotation keys and total size), and the
  label grammar of the maps that end up on Nodes or in node selectors (NodeFeature ``spec.labels``,
  which nfd-master copies onto the Node; ResourceFlavor ``spec.nodeLabels``, which Kueue's webhook
  validates as labels);
* what Kueue's ClusterQueue webhook checks and its CRD does not: each flavor's resource names are
  the group's ``coveredResources``, position by position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

from gpustack_render.validate.crd_schema import BLOCKING_VALIDATORS, Crds, describe
from gpustack_render.k8s import (dns_label, dns_subdomain, field_path, identity, label, label_value, mapping_field,
                                  qualified_name)

KUEUE = "kueue.x-k8s.io"
MAX_ANNOTATIONS_BYTES = 256 * 1024  # TotalAnnotationSizeLimitB in apimachinery
# Kinds whose names must be DNS-1123 labels (used as label values / path segments); others: subdomains.
LABEL_NAMED_KINDS = frozenset({"LocalQueue", "Namespace"})
# Label maps inside spec that become Node labels or node selectors: same grammar as metadata.labels.
SPEC_LABEL_MAPS = {"NodeFeature": ("spec", "labels"), "ResourceFlavor": ("spec", "nodeLabels")}

Issue = tuple[list[Any], str]


def _label_map(path: list[Any], labels: Any) -> Iterator[Issue]:
    if labels is None:
        return
    if not isinstance(labels, dict):
        yield path, "must be a map of strings"
        return
    for key, value in labels.items():
        for message in (qualified_name(str(key)), label_value(value)):
            if message:
                yield path + [key], message


def metadata_issues(obj: dict[str, Any]) -> Iterator[Issue]:
    meta = mapping_field(obj, "metadata")
    kind, name = str(obj.get("kind") or ""), str(meta.get("name") or "")
    message = (dns_label if kind in LABEL_NAMED_KINDS else dns_subdomain)(name)
    if message:
        yield ["metadata", "name"], message
    namespace = meta.get("namespace")
    if namespace and (message := dns_label(str(namespace))):
        yield ["metadata", "namespace"], message
    yield from _label_map(["metadata", "labels"], meta.get("labels"))
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        size = 0
        for key, value in annotations.items():
            if message := qualified_name(str(key)):
                yield ["metadata", "annotations", key], message
            if not isinstance(value, str):
                yield ["metadata", "annotations", key], f"value must be a string, got {value!r}"
            size += len(str(key).encode()) + len(str(value).encode())
        if size > MAX_ANNOTATIONS_BYTES:
            yield ["metadata", "annotations"], f"total size {size} bytes exceeds {MAX_ANNOTATIONS_BYTES} (256 KiB)"
    elif annotations is not None:
        yield ["metadata", "annotations"], "must be a map of strings"
    if kind in SPEC_LABEL_MAPS:
        path = list(SPEC_LABEL_MAPS[kind])
        spec = mapping_field(obj, "spec")
        yield from _label_map(path, spec.get(path[1]))


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def kueue_issues(obj: dict[str, Any]) -> Iterator[Issue]:
    """Kueue's ClusterQueue webhook (``validateFlavorQuotas``): resource ``i`` of every flavor is
    ``coveredResources[i]``. The CRD's CEL rule only compares the counts, which it reports itself."""
    group, kind = identity(obj)[:2]
    if group != KUEUE or kind != "ClusterQueue":
        return
    spec = mapping_field(obj, "spec")
    for i, rg in enumerate(_items(spec.get("resourceGroups"))):
        rg = rg if isinstance(rg, dict) else {}
        covered = _items(rg.get("coveredResources"))
        for j, flavor in enumerate(_items(rg.get("flavors"))):
            resources = _items(flavor.get("resources")) if isinstance(flavor, dict) else []
            for k, (resource, name) in enumerate(zip(resources, covered)):
                if isinstance(resource, dict) and resource.get("name") != name:
                    yield (["spec", "resourceGroups", i, "flavors", j, "resources", k, "name"],
                           f"{resource.get('name')!r} must match the name in coveredResources ({name!r})")


@dataclass
class Outcome:
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    bad_objects: int = 0


def _kind_name(group: str, kind: str) -> str:
    return f"{kind}.{group}" if group else kind


@dataclass
class SchemaCheck:
    """CRD schema and CEL rules per object, and what a run says once about them: kinds without a
    CRD (one warning each and a summary), transition rules skipped, rules that cannot be run,
    objects whose schema errors keep the CEL rules from running (as the API server does)."""

    crds: Crds
    strict: bool
    kinds: dict[tuple[str, str], bool] = field(default_factory=dict)  # seen kind -> has a CRD
    plans: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    blocked: int = 0

    def issues(self, obj: dict[str, Any]) -> list[Issue]:
        group, kind = identity(obj)[:2]
        versions = self.crds.kinds.get((group, kind))
        self.kinds.setdefault((group, kind), versions is not None)
        if versions is None:
            return []
        version = str(obj.get("apiVersion")).rpartition("/")[2]
        served = sorted(v for v, crd in versions.items() if crd.served)
        if version not in served:
            return [(["apiVersion"], f"{obj.get('apiVersion')} is not served by the CRD "
                                     f"(served: {', '.join(served) or 'none'})")]
        if versions[version].schema is None:
            return []
        validator = self.crds.validator(group, kind, version, self.strict)
        errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
        issues = [issue for error in errors for issue in describe(error)]
        plan = self.plans.setdefault((group, kind, version), self.crds.cel_plan(group, kind, version))
        if plan.root is not None and any(e.validator in BLOCKING_VALIDATORS for e in errors):
            self.blocked += 1
        else:
            issues += plan.issues(obj)
        return issues

    def warnings(self) -> list[str]:
        missing = [key for key, known in self.kinds.items() if not known]
        if not missing:
            return []
        lines = [f"no CRD for {_kind_name(*key)}: its schema was not checked" for key in missing]
        lines.append(f"schema checked for {len(self.kinds) - len(missing)} of {len(self.kinds)} kinds; "
                     f"no CRD for: {', '.join(sorted(kind for _, kind in missing))}")
        return lines

    def notes(self) -> list[str]:
        notes = [note for plan in self.plans.values() for note in plan.notes]
        transitions = sum(plan.transition_rules for plan in self.plans.values())
        if transitions:
            notes.append(f"{transitions} CEL transition rule(s) skipped: they compare with oldSelf (the object "
                         f"before an update) and the manifests are checked as creates")
        if self.blocked:
            notes.append(f"CEL rules not evaluated for {self.blocked} object(s) with type, required, enum or size "
                         f"errors, as the API server does: correct those first")
        return notes


SKIPPED = ("schema validation skipped: no CRDs (give --crds DIR, or include CustomResourceDefinitions in the "
           "snapshot; --skip-schema skips it without this warning); metadata and Kueue webhook checks only")


def validate_objects(objects: Sequence[dict[str, Any]], crds: Crds | None, strict: bool,
                     refusals: Iterable[tuple[str, str]] = (), skip_schema: bool = False) -> Outcome:
    """Every problem of every object, in input order; ``refusals`` are (ClusterQueue, reason) pairs
    of queue plans the renderer refused, reported as problems too. ``skip_schema``: no CRD check
    and no warning about its absence (callers that have no CRDs by design)."""
    out = Outcome()
    check = SchemaCheck(crds, strict) if crds is not None and not skip_schema else None
    if check is None and not skip_schema:
        out.warnings.append(SKIPPED)
    for obj in objects:
        issues = list(metadata_issues(obj)) + list(kueue_issues(obj))
        if check is not None:
            issues += check.issues(obj)
        seen = set()
        for path, message in issues:
            line = f"{label(identity(obj))}: {field_path(path) + ': ' if path else ''}{message}"
            if line not in seen:
                seen.add(line)
                out.lines.append(line)
        out.bad_objects += bool(seen)
    for queue, reason in refusals:
        out.lines.append(f"ClusterQueue/{queue}: plan refused ({reason})")
    if check is not None:
        out.warnings += check.warnings()
        out.notes += check.notes()
    return out
