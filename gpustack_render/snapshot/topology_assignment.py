"""A ``topologyAssignment`` of a Workload's admission decoded into {domain values → Pods}, from
either form Kueue writes: ``domains`` (v1beta1) or ``slices`` (v1beta2: ``levels``, ``domainCount``,
``valuesPerLevel`` with ``universal`` or ``individual`` ``prefix``/``roots``/``suffix``,
``podCounts``). One that does not decode is a :class:`DecodeError` naming the field. Part of the
Workload model (:mod:`.workload_model`), whose error lives here (its base struct is the snapshot
models' own, :class:`.inputs.Frozen`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Iterator

import msgspec

from gpustack_render.snapshot.inputs import Frozen, Loc


class DecodeError(Exception):
    """One problem of one Workload: a message and the field's location inside the object."""

    def __init__(self, message: str, loc: Loc) -> None:
        super().__init__(message)
        self.message, self.loc = message, loc


class PodCounts(Frozen, frozen=True):
    universal: Annotated[int, msgspec.Meta(ge=1)] | None = None
    individual: list[Annotated[int, msgspec.Meta(ge=1)]] | None = None


class LevelValues(Frozen, frozen=True):
    universal: str | None = None
    individual: Individual | None = None


class Individual(Frozen, frozen=True):
    roots: list[str]
    prefix: str = ""
    suffix: str = ""


class Slice(Frozen, frozen=True):
    domainCount: Annotated[int, msgspec.Meta(ge=1)]
    valuesPerLevel: list[LevelValues]
    podCounts: PodCounts


class Domain(Frozen, frozen=True):
    values: list[str]
    count: Annotated[int, msgspec.Meta(ge=1)]


class TopologyAssignment(Frozen, frozen=True):
    levels: list[str]
    domains: list[Domain] | None = None  # v1beta1's form
    slices: list[Slice] | None = None    # v1beta2's form


@dataclass(frozen=True, eq=False)
class Placement:
    """A decoded ``topologyAssignment``: the levels (node label keys, highest first) and, per domain
    (its value at every level), the number of Pods placed there."""

    levels: tuple[str, ...]
    pods: dict[tuple[str, ...], int]

    def lowest(self) -> dict[str, int]:
        """Pods per value of the lowest level (GPUStack's: the Node's hostname)."""
        out: dict[str, int] = {}
        for values, count in self.pods.items():
            out[values[-1]] = out.get(values[-1], 0) + count
        return out


def decode_topology(topology: TopologyAssignment, loc: Loc) -> Placement:
    """{domain values → Pods} of one ``topologyAssignment``; :class:`DecodeError` when it does not decode."""
    levels = tuple(topology.levels)
    if not levels:
        raise DecodeError("must name at least one level", loc + ("levels",))
    if (topology.domains is None) == (topology.slices is None):
        raise DecodeError("exactly one of domains (v1beta1) or slices (v1beta2) must be set", loc)
    pods: dict[tuple[str, ...], int] = {}
    for values, count in (_domains(topology.domains, levels, loc) if topology.domains is not None
                          else _slices(topology.slices or [], levels, loc)):
        pods[values] = pods.get(values, 0) + count
    return Placement(levels, pods)


def _domains(domains: list[Domain], levels: tuple[str, ...], loc: Loc) -> Iterator[tuple[tuple[str, ...], int]]:
    for i, domain in enumerate(domains):
        if len(domain.values) != len(levels):
            raise DecodeError(f"has {len(domain.values)} value(s) for {len(levels)} level(s)",
                              loc + ("domains", i, "values"))
        yield tuple(domain.values), domain.count


def _slices(slices: list[Slice], levels: tuple[str, ...], loc: Loc) -> Iterator[tuple[tuple[str, ...], int]]:
    for i, piece in enumerate(slices):
        here = loc + ("slices", i)
        n = piece.domainCount
        if len(piece.valuesPerLevel) != len(levels):
            raise DecodeError(f"has {len(piece.valuesPerLevel)} entries for {len(levels)} level(s)",
                              here + ("valuesPerLevel",))
        columns = [_level_values(v, n, here + ("valuesPerLevel", j)) for j, v in enumerate(piece.valuesPerLevel)]
        yield from zip(zip(*columns), _pod_counts(piece.podCounts, n, here + ("podCounts",)))


def _level_values(values: LevelValues, n: int, loc: Loc) -> list[str]:
    if (values.universal is None) == (values.individual is None):
        raise DecodeError("exactly one of universal or individual must be set", loc)
    if values.universal is not None:
        return [values.universal] * n
    individual = values.individual
    assert individual is not None
    if len(individual.roots) != n:
        raise DecodeError(f"has {len(individual.roots)} root(s), domainCount is {n}", loc + ("individual", "roots"))
    return [individual.prefix + root + individual.suffix for root in individual.roots]


def _pod_counts(counts: PodCounts, n: int, loc: Loc) -> list[int]:
    if (counts.universal is None) == (counts.individual is None):
        raise DecodeError("exactly one of universal or individual must be set", loc)
    if counts.universal is not None:
        return [counts.universal] * n
    individual = counts.individual or []
    if len(individual) != n:
        raise DecodeError(f"has {len(individual)} count(s), domainCount is {n}", loc + ("individual",))
    return individual
