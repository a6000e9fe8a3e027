"""``spottune`` command line. Each subcommand group lives in its own module; this one only wires them.

Errors of every project package become one line on stderr and exit code 2 (``revpred.cli_runner``).
"""

from __future__ import annotations

import click

from earlycurve.errors import EarlyCurveError
from provisioner.errors import ProvisionerError
from revpred.cli_runner import run_click
from revpred.errors import RevPredError
from spotmarket.errors import SpotMarketError
from spottune.errors import SpottuneError


@click.group(help="spottune: hyperparameter tuning on spot capacity for as few dollars as possible.")
@click.version_option(package_name="spottune")
def cli() -> None:
    pass


PROJECT_ERRORS = (SpottuneError, SpotMarketError, RevPredError, EarlyCurveError, ProvisionerError)


def _register() -> None:
    from spottune.cli import _aws, _curves, _dashboard, _prices, _run, _serve, _simulate

    cli.add_command(_aws.cleanup)

    cli.add_command(_curves.curves)
    cli.add_command(_dashboard.dashboard)
    cli.add_command(_prices.prices)
    cli.add_command(_run.run)
    cli.add_command(_run.report)
    cli.add_command(_run.resume)
    cli.add_command(_simulate.simulate)
    for command in (_serve.serve, _serve.submit, _serve.status, _serve.cancel, _serve.team):
        cli.add_command(command)


_register()


def main() -> None:
    """Console-script entry point."""
    run_click(cli, PROJECT_ERRORS, prog_name="spottune")
