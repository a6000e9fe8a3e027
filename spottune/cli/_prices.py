"""``spottune prices info|fetch`` (issue 2)."""

from __future__ import annotations

import click


@click.group(help="Inspect and collect spot price history.")
def prices() -> None:
    pass
