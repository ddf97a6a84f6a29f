"""`gpustack-render lint` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.command("lint", hidden=True)
def command() -> None:
    """Not implemented yet."""
    raise click.UsageError("'lint' is not implemented yet")
