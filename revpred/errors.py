"""The revpred error family."""


from spotmarket.errors import PriceDataError  # noqa: F401  (re-exported: price data errors live in spotmarket)


class RevPredError(Exception):
    """Base class of every error revpred raises on purpose."""


class OneClassError(RevPredError):
    """A training period whose labels hold one class only (a calm market: no revocation at any max price).

    Parameters
    ----------
    message : str
        The error text.
    revoked : bool
        True if every label is a revocation, False if none is.
    """

    def __init__(self, message: str, revoked: bool):
        super().__init__(message)
        self.revoked = bool(revoked)
