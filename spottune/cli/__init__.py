"""``spottune`` command line. Each subcommand group lives in its own module; this one only wires them.

Errors of every project package become one line on stderr and exit code 2 (``revpred.cli_runner``).
"""

from __future__ import annotations

import click

from revpred.cli_runner import run_click
from revpred.errors import RevPredError
from spottune.errors import SpottuneError


@click.group(help="spottune: hyperparameter tuning on spot capacity for as few dollars as possible.")
@click.version_option(package_name="spottune")
def cli() -> None:
    pass


def _project_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [SpottuneError, RevPredError]
    try:
        from earlycurve.errors import EarlyCurveError

        errors.append(EarlyCurveError)
    except ImportError:  # pragma: no cover - package not built yet
        pass
    try:
        from provisioner.errors import ProvisionerError

        errors.append(ProvisionerError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(errors)


def _register() -> None:
    from spottune.cli import _prices, _run

    cli.add_command(_prices.prices)
    cli.add_command(_run.run)
    cli.add_command(_run.report)


_register()


def main() -> None:
    """Console-script entry point."""
    run_click(cli, _project_errors(), prog_name="spottune")
