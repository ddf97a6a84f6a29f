"""The quota accounting admit uses: the rule data's resource transformations and quota-check
strategy (admission.md §3), in Kueue's int64 accounting (cpu in milli-units), × the PodSet count."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

from gpustack_render.admit.inputs import UsageOf
from gpustack_render.rules.admission import quota_usage

def accounting(rules: Any) -> tuple[UsageOf, bool]:
    """``(usage_of, strict)``: rules/admission.yaml's transformations and quota-check strategy."""
    rule = rules.admission

    def usage_of(per_pod: Mapping[str, Fraction], count: int) -> dict[str, int]:
        return quota_usage(per_pod, count, rule)
    return usage_of, rule.strict
