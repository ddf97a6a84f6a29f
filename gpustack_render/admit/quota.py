"""The quota accounting admit uses: the rule data's resource transformations and quota-check
strategy (admission.md §3), in Kueue's int64 accounting (cpu in milli-units), × the PodSet count."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

from gpustack_render.admit.chain import resource_value
from gpustack_render.admit.inputs import UsageOf


def accounting(rules: Any) -> tuple[UsageOf, bool]:
    """``(usage_of, strict)``. (Provisional until the rule data lands: no transformation.)"""
    def usage_of(per_pod: Mapping[str, Fraction], count: int) -> dict[str, int]:
        return {r: resource_value(r, q) * count for r, q in per_pod.items()}
    return usage_of, False
