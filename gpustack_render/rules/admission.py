"""Kueue's resource transformations and quota-check strategy as rule data (rules/admission.yaml),
and Kueue's accounting of a PodSet's quota usage (admission.md §3).

The rule file names its inputs by the rules that already spell them (Manufacturers resourceBase,
Capacity workloadFit and families) and its output by the Queues quota format, so the table here is
derived per manufacturer (:func:`derive`) and never restates a resource name.

Kueue's semantics (pkg/workload ``applyResourceTransformations``, pkg/resources ``ResourceValue``):
when a Pod requests any transformed resource, each transformed input is first multiplied by the
integer value (rounded up) of its ``multiplyBy`` resource when the Pod requests it; every output
gets factor × the input's integer value (rounded up), summed over inputs; ``Retain`` keeps the
input, ``Replace`` drops it; untransformed resources count as themselves. The per-Pod result is
then converted to Kueue's int64 (cpu in milli-units, everything else rounded up to a whole number)
and multiplied by the PodSet's count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable, Mapping

from gpustack_render.k8s import quantity_ceil

CPU = "cpu"  # Kubernetes' own resource name, which Kueue counts in milli-units
STRICT = "Strict"  # admission.md's name of Kueue's default quota-check strategy ...
STRICT_NAMES = frozenset({STRICT, "BlockUndeclared"})  # ... which Kueue's Configuration calls BlockUndeclared


@dataclass(frozen=True)
class Transformation:
    """One input resource's transformation (for one manufacturer)."""

    input: str
    strategy: str                                # "Retain" | "Replace"
    outputs: Mapping[str, int] = field(default_factory=dict)  # output resource → factor per unit
    multiply_by: str | None = None
    entry: str = ""                              # its rule entry ("Admission:transformations.2"): rules.origins


@dataclass(frozen=True)
class AdmissionRule:
    """rules/admission.yaml, derived per manufacturer."""

    strategy: str                                # "IgnoreUndeclared" | "Strict" (BlockUndeclared is read as Strict)
    transformations: Mapping[str, Transformation] = field(default_factory=dict)
    credits: frozenset[str] = frozenset()        # the credits resources (outputs)

    @property
    def strict(self) -> bool:
        return self.strategy == STRICT


@dataclass(frozen=True)
class Entry:
    """One compiled ``transformations`` entry, before it is derived per manufacturer."""

    index: int
    input: str | None       # resourceBase | slicedCard | slicedUnits | sharedCards
    family: str | None
    strategy: str
    credits: int | None
    multiply_by: str | None


@dataclass(frozen=True)
class Resources:
    """One manufacturer's resource names, as the other rule kinds spell them."""

    name: str
    inputs: Mapping[str, str]                # input name (resourceBase, slicedCard, …) → resource
    families: Mapping[str, tuple[str, ...]]  # Capacity family → its pool and keys
    credits: str                             # its credits resource (Queues quota.accelerated.resource)


def derive(strategy: str, entries: Iterable[Entry], manufacturers: Iterable[Resources]) -> AdmissionRule:
    """The concrete table: every entry for every manufacturer; a resource named by an input entry
    is not also taken by a family entry."""
    table: dict[str, Transformation] = {}
    credits: set[str] = set()
    ordered = sorted(entries, key=lambda e: e.family is not None)  # named inputs before families
    for manufacturer in manufacturers:
        for entry in ordered:
            names = ((manufacturer.inputs[entry.input],) if entry.input
                     else manufacturer.families.get(entry.family or "", ()))
            outputs = {manufacturer.credits: entry.credits} if entry.credits is not None else {}
            credits.update(outputs)
            multiply = manufacturer.inputs[entry.multiply_by] if entry.multiply_by else None
            for resource in names:
                table.setdefault(resource, Transformation(resource, entry.strategy, outputs, multiply,
                                                          f"Admission:transformations.{entry.index}"))
    return AdmissionRule(STRICT if strategy in STRICT_NAMES else strategy, table, frozenset(credits))


def kueue_value(resource: str, value: Fraction) -> int:
    """Kueue's int64 of one resource: cpu in milli-units, everything else whole (both rounded up)."""
    return math.ceil(value * 1000) if resource == CPU else quantity_ceil(value)


def transform(requests: Mapping[str, Fraction], rule: AdmissionRule) -> dict[str, Fraction]:
    """One Pod's requests after the transformations (still quantities)."""
    table = rule.transformations
    if not any(name in table for name in requests):
        return dict(requests)
    out: dict[str, Fraction] = {}
    for name, value in requests.items():
        step = table.get(name)
        if step is None:
            out[name] = out.get(name, Fraction(0)) + value
            continue
        if step.multiply_by is not None and step.multiply_by in requests:
            value = value * quantity_ceil(requests[step.multiply_by])  # (Kubernetes' Quantity.Value())
        for output, factor in step.outputs.items():
            out[output] = out.get(output, Fraction(0)) + factor * quantity_ceil(value)
        if step.strategy == "Retain":
            out[name] = out.get(name, Fraction(0)) + value
    return out


def quota_usage(pod_requests: Mapping[str, Fraction], count: int, rule: AdmissionRule) -> dict[str, int]:
    """A PodSet's quota usage per resource (Kueue's int64 accounting): the per-Pod requests
    transformed, each converted to Kueue's integer, × ``count``."""
    return {name: kueue_value(name, value) * count for name, value in transform(pod_requests, rule).items()}


def entries_used(requests: Mapping[str, Fraction], rule: AdmissionRule) -> list[str]:
    """The rule entries (``"Admission:transformations.N"``, keys of ``Rules.origins``) that transform
    some of ``requests``, in entry order: what ``explain`` cites for a PodSet's quota usage."""
    used = {step.entry for name in requests if (step := rule.transformations.get(name)) is not None}
    return sorted(used, key=lambda entry: int(entry.rpartition(".")[2]))
