"""Run a click group so that bad input is one line on stderr and exit code 2, never a traceback.

Shared by the ``revpred`` and ``spottune`` console scripts (``spottune`` may import ``revpred``; the
reverse is not allowed). Any exception that is not a project error or a click usage error is a bug
and keeps its traceback.
"""

from __future__ import annotations

import sys

import click


def run_click(group: click.Group, error_types: tuple[type[BaseException], ...], prog_name: str) -> None:
    """Invoke ``group`` and turn ``error_types`` and click usage errors into ``error: ...`` + exit 2."""
    try:
        group.main(prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Exit as exc:  # --help, --version
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        msg = " ".join(exc.format_message().split())
        click.echo(f"error: {msg}", err=True)
        sys.exit(2)
    except error_types as exc:
        msg = " ".join(str(exc).split())
        click.echo(f"error: {msg}", err=True)
        sys.exit(2)
