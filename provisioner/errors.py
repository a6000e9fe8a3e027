"""The provisioner error family."""


class ProvisionerError(Exception):
    """Base class of every error the provisioner raises on purpose."""


class UnknownInstanceType(ProvisionerError, KeyError):
    """An instance type is missing from the catalog (never defaulted)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class NoMarketAvailable(ProvisionerError, RuntimeError):
    """No market in the pool passes the filters or has a known price at the decision time."""
