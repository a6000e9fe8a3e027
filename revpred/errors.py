"""The revpred error family."""


from spotmarket.errors import PriceDataError  # noqa: F401  (re-exported: price data errors live in spotmarket)


class RevPredError(Exception):
    """Base class of every error revpred raises on purpose."""
