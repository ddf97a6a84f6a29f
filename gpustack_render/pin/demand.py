"""The demand of one Workload PodSet (fit-pin.md §3): U (slice units per card) and N (shared cards).

Resource names are classified against the manufacturers' resource bases (rules/manufacturers.yaml)
with the Capacity rules' families and ``workloadFit`` formats (rules/capacity.yaml): the same data
the node side publishes capacity under, so there is no second table here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

from gpustack_render.rules import Rules

INT32_MAX = 2147483647  # Kubernetes int32: U and N are clamped to 0…INT32_MAX

# Classes of a resource name. The first three make a demand; the others never pin.
SLICED_CARD = "sliced-card"      # <base>.sliced
SLICED_UNITS = "sliced-units"    # <base>.sliced.units
SHARED_CARDS = "shared-cards"    # <base>.shared
EXCLUSIVE = "exclusive"          # <base> alone
# ... plus the name of the capacity family that owns the key ("sliced", "partitioned").


class ResourceClassifier:
    """Resource name → class, built once from the rules."""

    def __init__(self, rules: Rules) -> None:
        self.worker_group = rules.vocabulary.workerApiGroup  # the operator's kinds (not Workloads) are in it
        self._exact: dict[str, str] = {}
        self._prefixes: list[tuple[str, str]] = []
        pins = ((rules.capacity.pin_sliced_card, SLICED_CARD), (rules.capacity.pin_sliced_units, SLICED_UNITS),
                (rules.capacity.pin_shared_cards, SHARED_CARDS))
        for manufacturer in sorted(rules.manufacturers.by_name.values(), key=lambda m: m.name):
            values = {"base": manufacturer.resource_base}
            for fmt, cls in pins:  # the demand classes win over the families' own keys
                self._exact.setdefault(fmt.render(values), cls)
            self._exact.setdefault(manufacturer.resource_base, EXCLUSIVE)
            for family in rules.capacity.families:
                self._exact.setdefault(family.pool.render(values), family.name)
                for key_fmt, _ in family.keys:
                    self._exact.setdefault(key_fmt.render(values), family.name)
                if family.profile_key and manufacturer.partition_kind:
                    probe = family.profile_key.render({**values, "kind": manufacturer.partition_kind,
                                                       "profile": "\x00"})
                    self._prefixes.append((probe.split("\x00", 1)[0], family.name))

    def classify(self, name: str) -> str | None:
        """The class of ``name``; ``None`` for anything the pin ignores (cpu, unknown bases, …)."""
        found = self._exact.get(name)
        if found is not None:
            return found
        for prefix, cls in self._prefixes:
            if name.startswith(prefix) and len(name) > len(prefix):
                return cls
        return None


@dataclass(frozen=True)
class Demand:
    """Per Pod: ``units`` is U, ``shared`` is N."""

    units: int = 0
    shared: int = 0

    @property
    def pins(self) -> bool:
        return self.units > 0 or self.shared >= 2


def clamp(value: Fraction) -> int:
    """Round a quantity up to a whole number and clamp it to 0…INT32_MAX."""
    return min(max(math.ceil(value), 0), INT32_MAX)


Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Container:
    """One (init) container's merged resources: limits, overridden by requests of the same name."""

    loc: Loc  # e.g. ("spec", "podSets", 0, "template", "spec", "containers", 1)
    resources: dict[str, Fraction]


def podset_demand(containers: Sequence[Container], classifier: ResourceClassifier) -> Demand:
    """U and N of one PodSet from its init containers and containers (fit-pin.md §3).

    - U: the largest ``.sliced.units`` of any container, only when some container asks for a
      ``.sliced`` card (a quantity > 0); otherwise 0.
    - N: the largest ``.shared`` of any single container, init containers included (never a sum:
      containers may take shares of the same card; init containers run before the app containers).
    Every value is rounded up and clamped to 0…INT32_MAX, so a ``.shared`` ≤ 0 counts as 0.
    """
    asks_slice = False
    units = shared = 0
    for container in containers:
        for name, value in container.resources.items():
            cls = classifier.classify(name)
            if cls == SLICED_CARD:
                asks_slice |= value > 0
            elif cls == SLICED_UNITS:
                units = max(units, clamp(value))
            elif cls == SHARED_CARDS:
                shared = max(shared, clamp(value))
    return Demand(units if asks_slice else 0, shared)
