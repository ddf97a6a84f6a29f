"""`gpustack-render test` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.command("test", hidden=True)
def command() -> None:
    """Not implemented yet."""
    raise click.UsageError("'test' is not implemented yet")
