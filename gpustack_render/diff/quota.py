"""A ClusterQueue manifest's nominal quota, summed per resource over its flavors: what ``graph``,
``summary`` and ``diff``'s pool comparison show of a queue. Pure: no I/O."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable

from gpustack_render.k8s import QuantityError, format_decimal_si, parse_quantity


@dataclass(frozen=True)
class QuotaEdge:
    """A ClusterQueue's use of one flavor: (resource, nominalQuota) pairs, in manifest order."""

    flavor: str
    queue: str
    quotas: tuple[tuple[str, str], ...]


def queue_quota(queue: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """A ClusterQueue manifest's nominal quota per resource, summed over its flavors (sorted)."""
    return quota_totals(quota_edges(queue))


def quota_edges(queue: dict[str, Any]) -> Iterable[QuotaEdge]:
    """One edge per (flavor, queue): a flavor listed in two resource groups gets one merged edge."""
    merged: dict[str, list[tuple[str, str]]] = {}
    for group in list_value(object_spec(queue).get("resourceGroups")):
        for flavor in list_value(group.get("flavors") if isinstance(group, dict) else None):
            if not isinstance(flavor, dict) or not flavor.get("name"):
                continue
            quotas = merged.setdefault(str(flavor["name"]), [])
            for res in list_value(flavor.get("resources")):
                if isinstance(res, dict) and res.get("name"):
                    quotas.append((str(res["name"]), str(res.get("nominalQuota", "0"))))
    for flavor, quotas in merged.items():
        yield QuotaEdge(flavor, object_name(queue), tuple(quotas))


def quota_totals(edges: Iterable[QuotaEdge]) -> tuple[tuple[str, str], ...]:
    """The queue's nominal quota per resource, summed over its flavors (sorted by resource)."""
    sums: dict[str, Fraction] = defaultdict(Fraction)
    texts: dict[str, str] = {}
    broken: set[str] = set()
    for edge in edges:
        for resource, value in edge.quotas:
            texts[resource] = value
            try:
                sums[resource] += parse_quantity(value)
            except QuantityError:
                broken.add(resource)  # shown as "?" rather than failing a picture over one value
    return tuple((r, "?" if r in broken else format_quantity(sums[r])) for r in sorted(texts))


def format_quantity(value: Fraction) -> str:
    """A summed quantity as Kubernetes would print it: DecimalSI for whole numbers, milli-units else."""
    if value.denominator == 1:
        return format_decimal_si(int(value))
    milli = value * 1000
    if milli.denominator == 1:
        return f"{int(milli)}m"
    return format(float(value), "g")


def object_name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, dict) else ""


def object_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def list_value(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
