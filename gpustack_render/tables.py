"""Text tables shared by the commands that print them: ``kubectl get``'s layout and a Markdown cell.

One copy of each, because ``summary``, ``admit`` and ``diff --format markdown`` must look alike."""

from __future__ import annotations

from typing import Sequence


def kubectl_lines(rows: Sequence[Sequence[str]]) -> list[str]:
    """``kubectl get`` layout: left-aligned columns three spaces apart, no trailing blanks (the first
    row is the header, as given)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["   ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def markdown_cell(text: str) -> str:
    """Text that cannot break a Markdown table row: no pipe (escaped, also inside code), no newline."""
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")
