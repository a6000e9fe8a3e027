"""The provisioner error family.

Each subclass also inherits the built-in it resembles, so generic handlers (``except KeyError``,
``except ValueError``) still work. Only ``spottune.cli`` catches the base and turns it into one line.
"""


class ProvisionerError(Exception):
    """Base class of every error the provisioner raises on purpose."""


class UnknownInstanceType(ProvisionerError, KeyError):
    """An instance type is missing from the catalog (never defaulted)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class NoMarketAvailable(ProvisionerError, RuntimeError):
    """No market in the pool passes the filters or has a known price at the decision time."""


class ProvisionerConfigError(ProvisionerError, ValueError):
    """An argument is invalid; the message names the value and the rule."""


class CatalogError(ProvisionerError, ValueError):
    """An instance catalog file is missing or unreadable; the message names the file and the row."""
