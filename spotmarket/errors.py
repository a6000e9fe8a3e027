"""The spotmarket error family.

Every subclass also inherits the built-in it resembles, so ``except ValueError`` still works. The
command-line tools of ``spottune`` and ``revpred`` catch :class:`SpotMarketError` and turn it into one
line on stderr and exit code 2.
"""


class SpotMarketError(Exception):
    """Base class of every error spotmarket raises on purpose."""


class PriceDataError(SpotMarketError, ValueError):
    """Spot price input is unusable; the message names the file and, where known, the line."""


class MarketError(SpotMarketError, ValueError):
    """A market query or market-model setting is invalid (unknown market, time outside the recorded
    history, a Weibull shape <= 0, ...)."""


class DataNotFoundError(SpotMarketError, FileNotFoundError):
    """A bundled data file (price trace, learning curves, interruption traces) could not be found; the
    message lists every place that was tried."""
