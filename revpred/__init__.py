"""revpred: spot price data and revocation prediction (SpotTune §1.7)."""

from revpred.errors import PriceDataError, RevPredError

__all__ = ["PriceDataError", "RevPredError"]
