"""`gpustack-render validate` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.command("validate", hidden=True)
def command() -> None:
    """Not implemented yet."""
    raise click.UsageError("'validate' is not implemented yet")
