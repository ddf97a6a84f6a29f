"""`gpustack-render schema` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.command("schema", hidden=True)
def command() -> None:
    """Not implemented yet."""
    raise click.UsageError("'schema' is not implemented yet")
