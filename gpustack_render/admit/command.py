"""``admit``'s command body below the CLI: its options' values in, its output text, notes and exit code
out (``pipeline.admit_command`` composes these with the pipeline), so the CLI and the in-process case
runner run the same code and the CLI only parses arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Sequence

from gpustack_render.admit import COMPARE, Preview
from gpustack_render.errors import EXIT_NEGATIVE, UserError


@dataclass(frozen=True)
class AdmitRequest:
    """The values of ``admit``'s options (admission.md §1), as the CLI parsed them."""

    snapshot: Sequence[str]
    sets: Sequence[str] = ()
    rules_dir: Path | None = None
    workloads: Sequence[str] = ()
    chain: str = "rendered"
    reserve: Sequence[str] = ()  # RESOURCE=QTY, as written
    fmt: str = "text"
    templates_dir: Path | None = None


@dataclass
class AdmitRun:
    """What ``admit`` prints: ``text`` on stdout, each note on stderr, and its exit code."""

    text: str
    notes: list[str] = field(default_factory=list)
    exit_code: int | None = None


def parse_reserve(values: Sequence[str]) -> dict[str, Fraction]:
    """``--reserve RESOURCE=QTY`` (repeatable; a repeated resource adds up)."""
    from gpustack_render.k8s import QuantityError, parse_quantity
    out: dict[str, Fraction] = {}
    for value in values:
        resource, sep, quantity = value.partition("=")
        try:
            if not sep or not resource:
                raise QuantityError("expected RESOURCE=QTY")
            amount = parse_quantity(quantity)
            if amount < 0:
                raise QuantityError(f"{quantity!r} is negative")
        except QuantityError as err:
            raise UserError.single(f"--reserve {value}: {err}") from None
        out[resource] = out.get(resource, Fraction(0)) + amount
    return out


def check_inputs(request: AdmitRequest) -> dict[str, Fraction]:
    """The reserve amounts, once the options are known to fit together (before any file is read)."""
    amounts = parse_reserve(request.reserve)
    if "-" in request.workloads and "-" in request.snapshot:
        raise UserError.single("standard input (-) can feed SNAPSHOT or --workloads, not both")
    return amounts


def outcome(preview: Preview, request: AdmitRequest) -> AdmitRun:
    """The preview in the requested format; exit 1 (``EXIT_NEGATIVE``) with ``--chain compare`` when
    some outcome differs."""
    from gpustack_render.admit import output
    from gpustack_render.yamlio import dump_json
    if request.fmt == "json":
        text = dump_json(preview.doc)
    elif request.fmt == "markdown":
        text = output.markdown(preview.doc if request.chain == COMPARE else output.compare(preview.doc, preview.doc))
    else:
        text = output.text(preview.doc)
    changed = request.chain == COMPARE and preview.changed
    return AdmitRun(text, list(preview.notes), EXIT_NEGATIVE if changed else None)
