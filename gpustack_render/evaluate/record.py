"""Decisions as data: what the evaluator decided, the rule entry that decided it and the inputs it read.

``explain`` formats these records instead of computing anything again, so a change to evaluation is
made once. Recording is opt-in: every evaluator takes ``recorder: Recorder | None`` and each
recording site is guarded by ``if recorder is not None``, so ``render`` (which passes none) pays
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gpustack_render.rules.expressions import Verdict


@dataclass(frozen=True)
class Decision:
    """One decision: ``what`` names it (``flavor.cpu``, ``queue.selection``, ...), ``rule`` the rule
    entry (``Grouping:flavor.cpu.contributes``, the key of ``rules.origins``), ``origin`` its
    file:line, ``inputs`` what it read (label keys and values, settings, snapshot objects), ``result``
    what it decided; ``verdict`` when a condition decided it, ``steps`` for a derivation."""

    what: str
    result: Any
    rule: str = ""
    origin: str = ""
    inputs: tuple[tuple[str, Any], ...] = ()
    verdict: Verdict | None = None
    steps: tuple[Any, ...] = ()

    def input(self, name: str, default: Any = None) -> Any:
        return next((v for k, v in self.inputs if k == name), default)


class Recorder(Protocol):
    def record(self, subject: str, decision: Decision) -> None: ...


@dataclass
class Records:
    """A :class:`Recorder` that keeps every decision per subject (``Node/NAME``, ``ClusterQueue/NAME``,
    ``InstanceType/NAME``), in the order they were made."""

    by_subject: dict[str, list[Decision]] = field(default_factory=dict)

    def record(self, subject: str, decision: Decision) -> None:
        self.by_subject.setdefault(subject, []).append(decision)

    def of(self, subject: str, what: str | None = None) -> list[Decision]:
        return [d for d in self.by_subject.get(subject, []) if what is None or d.what == what]

    def first(self, subject: str, what: str) -> Decision | None:
        found = self.of(subject, what)
        return found[0] if found else None
