"""``pin --explain-nodes``: which snapshot Nodes satisfy each pinned PodSet's requirements, judged on
the Nodes' labels after the fit-label patch of ``node-patches`` is applied."""

from __future__ import annotations

import re
from typing import Mapping

from gpustack_render.pin import PinResult, Requirement

_INT64 = re.compile(r"^[+-]?[0-9]+$")
_INT64_RANGE = (-(1 << 63), (1 << 63) - 1)


def _int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``, as the scheduler reads Gt/Lt values and label values."""
    if not _INT64.match(text):
        return None
    value = int(text)
    return value if _INT64_RANGE[0] <= value <= _INT64_RANGE[1] else None


def satisfies(requirement: Requirement, labels: Mapping[str, str]) -> bool:
    """A node selector requirement against a Node's labels (the operators the pin uses: Gt, Lt;
    In, NotIn, Exists, DoesNotExist for completeness)."""
    key, op, values = requirement["key"], requirement["operator"], requirement.get("values") or []
    present = key in labels
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op in ("Gt", "Lt") and present and len(values) == 1:
        have, bound = _int64(labels[key]), _int64(str(values[0]))
        if have is None or bound is None:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def explain_lines(results: list[PinResult], node_labels: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Per pinned PodSet: a header with the requirements and the count, then one line per Node."""
    lines: list[str] = []
    for result in results:
        for podset in (p for p in result.podsets if p.held):
            wanted = ", ".join(f"{r['key']} {r['operator']} {r['values'][0]}" for r in podset.requirements)
            fits = [n for n in sorted(node_labels) if all(satisfies(r, node_labels[n]) for r in podset.requirements)]
            lines.append(f"nodes: {result.workload.ref} podSets[{podset.index}] ({podset.name}): {wanted}: "
                         f"{len(fits)} of {len(node_labels)} snapshot nodes fit"
                         + (f": {', '.join(fits)}" if fits else ""))
            for name in sorted(node_labels):
                labels = node_labels[name]
                shown = ", ".join(f"{r['key']}={labels[r['key']]}" if r["key"] in labels else f"{r['key']} absent"
                                  for r in podset.requirements)
                verdict = "fits" if name in fits else "does not fit"
                lines.append(f"  {name}: {verdict} ({shown})")
    return lines
