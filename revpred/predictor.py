"""RevPred as a :class:`~revpred.protocol.RevocationPredictor`: one trained model per market, many queries at once.

A query is (market, decision time t, max price b). Inputs are built by :mod:`revpred.features` from the
price records at or before t only (no look-ahead, even when the :class:`PriceHistory` holds the future,
as in a replay), standardised with the market's training statistics, and fed to that market's
estimator. Queries are grouped by market, and queries sharing (market, t) share one feature build, so a
provisioning round (all markets, one t, a few max prices) costs one small forward pass per market.

[I] A max price below the current price gives p = 1: under the 2017 rule the instance is revoked at once
(decision M2). Markets without a model raise :class:`RevPredError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from revpred.errors import RevPredError
from revpred.features import N_HISTORY, N_RECORDS, N_SEQ, FeatureScaler, make_inputs, record_features
from revpred.queries import broadcast_queries, group_by_market
from spotmarket.prices import Market, PriceHistory

#: Column of the present price (USD/hour, unscaled) in the input rows.
PRESENT_PRICE_COLUMN = N_HISTORY * N_SEQ


@dataclass
class MarketModel:
    """A fitted feature-based model for one market.

    Attributes
    ----------
    market : Market
    kind : str
        ``"revpred"``, ``"tributary"`` or ``"logreg"``.
    scaler : FeatureScaler
        Fitted on the training window of this market only.
    estimator : object
        Has ``predict_proba(X) -> (n, 2)`` on standardised rows; LSTM models also ``predict_raw(X) -> (n,)``.
    grid_method : str
        ``"ffill"`` or ``"linear"`` (decision D3).
    train_start_s, train_end_s : float
        Training window, seconds since the epoch (UTC). Labels of training rows end at ``train_end_s``.
    info : dict
        Training facts (row counts, positive share, seconds, ...), JSON-able.
    """

    market: Market
    kind: str
    scaler: FeatureScaler
    estimator: Any
    grid_method: str
    train_start_s: float
    train_end_s: float
    info: dict = field(default_factory=dict)

    def raw_inputs(self, history: PriceHistory, times_s: np.ndarray, max_prices: np.ndarray) -> np.ndarray:
        """Unscaled inputs of shape (n, 362) for queries on this market (features built once per distinct t).

        Parameters
        ----------
        history : PriceHistory
        times_s : ndarray of shape (n,)
            Decision times, seconds since the epoch (UTC).
        max_prices : ndarray of shape (n,)
            Max prices b, USD per instance-hour.

        Returns
        -------
        ndarray of shape (n, 362)
        """
        series = history[self.market]
        if times_s.size == 1 or np.all(times_s == times_s[0]):
            feats = np.broadcast_to(record_features(series, times_s[:1], self.grid_method), (times_s.size, N_RECORDS, N_SEQ))
        else:
            uniq, inv = np.unique(times_s, return_inverse=True)
            feats = record_features(series, uniq, self.grid_method)[inv.ravel()]
        return make_inputs(feats, max_prices)

    def inputs(self, history: PriceHistory, times_s: np.ndarray, max_prices: np.ndarray) -> np.ndarray:
        """Standardised inputs of shape (n, 362) for queries on this market.

        Parameters
        ----------
        history : PriceHistory
        times_s : ndarray of shape (n,)
            Decision times, seconds since the epoch (UTC).
        max_prices : ndarray of shape (n,)
            Max prices b, USD per instance-hour.

        Returns
        -------
        ndarray of shape (n, 362)
        """
        return self.scaler.transform(self.raw_inputs(history, times_s, max_prices))

    def proba(self, history: PriceHistory, times_s: np.ndarray, max_prices: np.ndarray, raw: bool = False) -> np.ndarray:
        """P(revoked within the hour) for queries on this market, shape (n,); 1 where b < price(t).

        Parameters
        ----------
        history : PriceHistory
        times_s : ndarray of shape (n,)
            Decision times, seconds since the epoch (UTC).
        max_prices : ndarray of shape (n,)
            Max prices b, USD per instance-hour.
        raw : bool, default False
            Return the network's uncalibrated output o (LSTM models) instead of Eq 3's p.

        Returns
        -------
        ndarray of shape (n,)
            In [0, 1].
        """
        X = self.raw_inputs(history, times_s, max_prices)
        Z = self.scaler.transform(X)
        if raw and hasattr(self.estimator, "predict_raw"):
            p = np.asarray(self.estimator.predict_raw(Z), dtype=np.float64)
        else:
            p = np.asarray(self.estimator.predict_proba(Z)[:, 1], dtype=np.float64)
        p[max_prices < X[:, PRESENT_PRICE_COLUMN]] = 1.0
        return p


class RevPred:
    """Per-market RevPred models behind the :class:`~revpred.protocol.RevocationPredictor` protocol.

    Parameters
    ----------
    history : PriceHistory
        Price records to build features from (only records at or before each query time are used).
    models : mapping Market -> MarketModel
    raw : bool, default=False
        Return the uncalibrated network output o instead of Eq 3's p (for evaluation only).

    Examples
    --------
    >>> rp = load_model_set("models/", history).predictor("revpred")  # doctest: +SKIP
    >>> rp.predict_proba(markets, t_s, prices + 0.05)               # doctest: +SKIP
    array([0.12, 0.03, ...])
    """

    def __init__(self, history: PriceHistory, models: Mapping[Market, MarketModel], *, raw: bool = False):
        self.history = history
        self.models = dict(models)
        self.raw = raw

    @property
    def markets(self) -> list[Market]:
        """Markets with a model, sorted."""
        return sorted(self.models)

    def uncalibrated(self) -> "RevPred":
        """The same models returning the raw class-weighted output o (before Eq 3).

        Returns
        -------
        RevPred
        """
        return RevPred(self.history, self.models, raw=True)

    def with_history(self, history: PriceHistory) -> "RevPred":
        """The same models reading features from another price history (e.g. a replay's).

        Parameters
        ----------
        history : PriceHistory

        Returns
        -------
        RevPred
        """
        return RevPred(history, self.models, raw=self.raw)

    def predict_proba(self, markets: Sequence[Market], times_s: ArrayLike, max_prices_usd_per_hour: ArrayLike) -> np.ndarray:
        """P(price > b at some time in (t, t + 3600 s]) for each query.

        Parameters
        ----------
        markets : sequence of Market (or ``"AZ/TYPE[/PRODUCT]"`` strings), length n
        times_s : float or array of shape (n,)
            Decision times, seconds since the epoch (UTC); each needs 118 minutes of price history.
        max_prices_usd_per_hour : float or array of shape (n,)
            Max price b, USD per instance-hour.

        Returns
        -------
        p : ndarray of shape (n,), float64 in [0, 1]

        Raises
        ------
        RevPredError
            A market has no model, or a time is outside the price history.
        """
        ms, t, b = broadcast_queries(markets, times_s, max_prices_usd_per_hour)
        out = np.empty(len(ms))
        for m, idx in group_by_market(ms).items():
            model = self.models.get(m)
            if model is None:
                raise RevPredError(f"no RevPred model for market {m} (have: {', '.join(map(str, self.markets[:5]))})")
            out[idx] = model.proba(self.history, t[idx], b[idx], raw=self.raw)
        return np.clip(out, 0.0, 1.0)
