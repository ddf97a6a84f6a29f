"""`gpustack-render snapshot` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.command("snapshot", hidden=True)
def command() -> None:
    """Not implemented yet."""
    raise click.UsageError("'snapshot' is not implemented yet")
