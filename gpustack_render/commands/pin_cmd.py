"""`gpustack-render pin` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.command("pin", hidden=True)
def command() -> None:
    """Not implemented yet."""
    raise click.UsageError("'pin' is not implemented yet")
