"""``validate``: would the API server (and Kueue) accept these manifests?

Three layers, each one line per problem (``Kind/name: field.path: message``):

* the CRD ``openAPIV3Schema`` of the object's apiVersion (:mod:`crd_schema`), when CRDs are known;
* Kubernetes object metadata: names, namespaces, label keys and values, annotation keys and the
  annotation size limit, also for the label maps that end up on Nodes or in node selectors;
* Kueue limits the renderer can run into (its webhooks and CEL rules): ResourceFlavor node labels,
  ClusterQueue resource groups, flavors per group, covered resources and flavor resources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

from gpustack_render.crd_schema import Crds, describe
from gpustack_render.manifests import field_path, identity, label

KUEUE = "kueue.x-k8s.io"
MAX_FLAVOR_NODE_LABELS = 8        # ResourceFlavorSpec.nodeLabels MaxProperties
MAX_RESOURCE_GROUPS = 16          # ClusterQueueSpec.resourceGroups MaxItems
MAX_FLAVORS_PER_GROUP = 64        # ResourceGroup.flavors MaxItems
MAX_COVERED_RESOURCES = 16        # ResourceGroup.coveredResources MaxItems
MAX_ANNOTATIONS_BYTES = 256 * 1024  # TotalAnnotationSizeLimitB in apimachinery
# Kinds whose names must be DNS-1123 labels (used as label values / path segments); others: subdomains.
LABEL_NAMED_KINDS = frozenset({"LocalQueue", "Namespace"})
# Label maps inside spec that become Node labels or node selectors: same grammar as metadata.labels.
SPEC_LABEL_MAPS = {"NodeFeature": ("spec", "labels"), "ResourceFlavor": ("spec", "nodeLabels")}

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")


def dns_label(value: str) -> str | None:
    if len(value) > 63:
        return f"{value!r} is longer than 63 characters (DNS-1123 label)"
    return None if _DNS_LABEL.match(value) else \
        f"{value!r} is not a DNS-1123 label (lower-case alphanumerics and '-', alphanumeric at both ends)"


def dns_subdomain(value: str) -> str | None:
    if len(value) > 253:
        return f"{value!r} is longer than 253 characters (DNS-1123 subdomain)"
    return None if _DNS_SUBDOMAIN.match(value) else \
        f"{value!r} is not a DNS-1123 subdomain (lower-case alphanumerics, '-' and '.', alphanumeric at both ends)"


def qualified_name(key: str) -> str | None:
    """Label and annotation keys: ``[prefix/]name``, prefix a DNS subdomain, name 63 characters."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return f"key {key!r} has an empty prefix"
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"key {key!r}: prefix is not a DNS-1123 subdomain of at most 253 characters"
    if not name or len(name) > 63:
        return f"key {key!r}: name part must be 1-63 characters"
    if not _QUALIFIED_NAME.match(name):
        return f"key {key!r}: name part must be alphanumerics, '-', '_' or '.', alphanumeric at both ends"
    return None


def label_value(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"value must be a string, got {value!r}"
    if len(value) > 63:
        return f"value {value!r} is longer than 63 characters"
    return None if _LABEL_VALUE.match(value) else \
        f"value {value!r} must be alphanumerics, '-', '_' or '.', alphanumeric at both ends"


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
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
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
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        yield from _label_map(path, spec.get(path[1]))


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def kueue_issues(obj: dict[str, Any]) -> Iterator[Issue]:
    group, kind = identity(obj)[:2]
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if group != KUEUE:
        return
    if kind == "ResourceFlavor":
        node_labels = spec.get("nodeLabels")
        if isinstance(node_labels, dict) and len(node_labels) > MAX_FLAVOR_NODE_LABELS:
            yield ["spec", "nodeLabels"], (f"{len(node_labels)} node labels, Kueue allows at most "
                                           f"{MAX_FLAVOR_NODE_LABELS}")
    if kind != "ClusterQueue":
        return
    groups = _items(spec.get("resourceGroups"))
    if len(groups) > MAX_RESOURCE_GROUPS:
        yield ["spec", "resourceGroups"], f"{len(groups)} resource groups, Kueue allows at most {MAX_RESOURCE_GROUPS}"
    for i, rg in enumerate(groups):
        rg = rg if isinstance(rg, dict) else {}
        at = ["spec", "resourceGroups", i]
        covered = _items(rg.get("coveredResources"))
        if len(covered) > MAX_COVERED_RESOURCES:
            yield at + ["coveredResources"], (f"{len(covered)} covered resources, Kueue allows at most "
                                              f"{MAX_COVERED_RESOURCES}")
        flavors = _items(rg.get("flavors"))
        if len(flavors) > MAX_FLAVORS_PER_GROUP:
            yield at + ["flavors"], f"{len(flavors)} flavors, Kueue allows at most {MAX_FLAVORS_PER_GROUP}"
        for j, flavor in enumerate(flavors):
            resources = _items(flavor.get("resources")) if isinstance(flavor, dict) else []
            names = [r.get("name") if isinstance(r, dict) else None for r in resources]
            if names != covered:
                yield at + ["flavors", j, "resources"], (f"resource names {names} must match the group's "
                                                         f"coveredResources {covered} exactly, in order")


@dataclass
class Outcome:
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    bad_objects: int = 0


def _schema_issues(obj: dict[str, Any], crds: Crds, strict: bool, warnings: list[str]) -> Iterator[Issue]:
    group, kind = identity(obj)[:2]
    versions = crds.kinds.get((group, kind))
    if versions is None:
        note = f"no CRD for {kind}{'.' + group if group else ''}: its schema was not checked"
        if note not in warnings:
            warnings.append(note)
        return
    version = str(obj.get("apiVersion")).rpartition("/")[2]
    served = sorted(v for v, crd in versions.items() if crd.served)
    if version not in served:
        yield ["apiVersion"], f"{obj.get('apiVersion')} is not served by the CRD (served: {', '.join(served) or 'none'})"
        return
    if versions[version].schema is None:
        return
    validator = crds.validator(group, kind, version, strict)
    for error in sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]):
        yield from describe(error)


def validate_objects(objects: Sequence[dict[str, Any]], crds: Crds | None, strict: bool,
                     refusals: Iterable[tuple[str, str]] = ()) -> Outcome:
    """Every problem of every object, in input order; ``refusals`` are (ClusterQueue, reason) pairs
    of queue plans the renderer refused, reported as problems too."""
    out = Outcome()
    if crds is None:
        out.warnings.append("schema validation skipped: no CRDs (give --crds DIR, or include "
                            "CustomResourceDefinitions in the snapshot); metadata and Kueue checks only")
    for obj in objects:
        issues = list(metadata_issues(obj)) + list(kueue_issues(obj))
        if crds is not None:
            limited = {field_path(path) for path, _ in issues}
            issues += [(path, message) for path, message in _schema_issues(obj, crds, strict, out.warnings)
                       if not (field_path(path) in limited and ("at most" in message or "at least" in message))]
        seen = set()
        for path, message in issues:
            line = f"{label(identity(obj))}: {field_path(path) + ': ' if path else ''}{message}"
            if line not in seen:
                seen.add(line)
                out.lines.append(line)
        out.bad_objects += bool(seen)
    for queue, reason in refusals:
        out.lines.append(f"ClusterQueue/{queue}: plan refused ({reason})")
    return out
