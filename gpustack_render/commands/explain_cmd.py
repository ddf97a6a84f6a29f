"""`gpustack-render explain` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.command("explain", hidden=True)
def command() -> None:
    """Not implemented yet."""
    raise click.UsageError("'explain' is not implemented yet")
