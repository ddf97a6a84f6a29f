"""The case runner's view of ``admit --format json`` (admission.md §9): the printed document checked
for its shape, the golden read, and the two compared.

A *run view* is ``{"chain", "workloads": [...], "queues": [...]}``; ``--chain compare`` prints
``{"live": VIEW, "rendered": VIEW, "changed": [...]}``. Workload entries (and ``changed`` entries)
are matched by (namespace, name), queues by name; each matched entry is compared whole, field by
field and type-strict (:func:`semantic.diff_values`), as objects are. A golden gives what it is
about: ``workloads`` always (every Workload the run lists, no more, no fewer), ``queues`` and
``chain`` when it cares; for ``compare``, ``changed`` always and a view of ``live`` / ``rendered``
when it cares.
"""

from __future__ import annotations

from typing import Any, Callable

from gpustack_render.casetest.semantic import compare_keyed, string_fields

CHAINS = ("rendered", "live", "compare")
VIEW_FIELDS = ("chain", "workloads", "queues")
COMPARE_FIELDS = ("live", "rendered", "changed")


class ShapeError(Exception):
    """A document (output or golden) that is not what admission.md §9 describes."""


def _workload_key(entry: Any) -> tuple[str, str] | None:
    return string_fields(entry, "namespace", "name")


def _queue_key(entry: Any) -> str | None:
    name = entry.get("name") if isinstance(entry, dict) else None
    return name if isinstance(name, str) else None


def _mapping(doc: Any, known: tuple[str, ...], required: tuple[str, ...], where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ShapeError(f"{where}: not a mapping but a {type(doc).__name__}")
    unknown = sorted(set(doc) - set(known))
    if unknown:
        raise ShapeError(f"{where}: unexpected field(s) {', '.join(map(str, unknown))} (known: {', '.join(known)})")
    missing = [key for key in required if key not in doc]
    if missing:
        raise ShapeError(f"{where}: missing field(s) {', '.join(missing)}")
    for key in ("workloads", "queues", "changed"):
        if key in doc and not isinstance(doc[key], list):
            raise ShapeError(f"{where}: {key} is not a list")
    return doc


def check_output(doc: Any, chain: str) -> dict[str, Any]:
    """The printed document, whole: every field §9 names for ``chain`` and no other."""
    if chain == "compare":
        out = _mapping(doc, COMPARE_FIELDS, COMPARE_FIELDS, "stdout")
        for side in ("live", "rendered"):
            _check_view(out[side], side, f"stdout.{side}")
        return out
    return _check_view(doc, chain, "stdout")


def _check_view(doc: Any, chain: str, where: str) -> dict[str, Any]:
    view = _mapping(doc, VIEW_FIELDS, VIEW_FIELDS, where)
    if view["chain"] != chain:
        raise ShapeError(f"{where}: chain is {view['chain']!r}, expected {chain!r}")
    return view


def check_golden(doc: Any, chain: str, where: str) -> dict[str, Any]:
    """A golden: ``workloads`` (``changed`` for compare) required, the rest optional."""
    if chain == "compare":
        golden = _mapping(doc, COMPARE_FIELDS, ("changed",), where)
        for side in ("live", "rendered"):
            if side in golden:
                _mapping(golden[side], VIEW_FIELDS, ("workloads",), f"{where}: {side}")
        return golden
    return _mapping(doc, VIEW_FIELDS, ("workloads",), where)


def _show_workload(key: tuple[str, str]) -> str:
    return f"Workload {key[0]}/{key[1]}"


def _compare_view(expected: dict[str, Any], actual: dict[str, Any], prefix: str) -> list[str]:
    problems: list[str] = []
    if "chain" in expected and expected["chain"] != actual.get("chain"):
        problems.append(f"chain: expected {expected['chain']!r}, got {actual.get('chain')!r}")
    problems += compare_keyed(expected["workloads"], actual["workloads"], _workload_key, _show_workload)
    if "queues" in expected:
        problems += compare_keyed(expected["queues"], actual["queues"], _queue_key, lambda k: f"queue {k}")
    return [prefix + p for p in problems]


def compare(expected: dict[str, Any], actual: dict[str, Any], chain: str) -> list[str]:
    """An empty result means the output says what the golden says."""
    if chain != "compare":
        return _compare_view(expected, actual, "")
    show: Callable[[tuple[str, str]], str] = lambda k: f"changed Workload {k[0]}/{k[1]}"
    problems = compare_keyed(expected["changed"], actual["changed"], _workload_key, show)
    for side in ("live", "rendered"):
        if side in expected:
            problems += _compare_view(expected[side], actual[side], f"{side}: ")
    return problems
