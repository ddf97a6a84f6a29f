"""`gpustack-render diff` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.command("diff", hidden=True)
def command() -> None:
    """Not implemented yet."""
    raise click.UsageError("'diff' is not implemented yet")
