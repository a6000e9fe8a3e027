"""``revpred`` command line: train, eval, info (issue 3). Errors: one line, exit code 2."""

from __future__ import annotations

import click

from revpred.cli_runner import run_click
from revpred.errors import RevPredError


@click.group(help="RevPred: revocation prediction from spot price history (SpotTune §1.7).")
def cli() -> None:
    pass


def main() -> None:
    """Console-script entry point."""
    run_click(cli, (RevPredError,), prog_name="revpred")
