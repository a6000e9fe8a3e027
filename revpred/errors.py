"""The revpred error family."""


class RevPredError(Exception):
    """Base class of every error revpred raises on purpose."""


class PriceDataError(RevPredError, ValueError):
    """Spot price input is unusable; the message names the file and, where known, the line."""
