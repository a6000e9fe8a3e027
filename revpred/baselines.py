"""Baselines a sceptical reviewer asks for, each a :class:`~revpred.protocol.RevocationPredictor`.

- **Tributary-style LSTM** [R, Tributary: Harlap et al., USENIX ATC 2018]: :class:`revpred.model.RevPredClassifier` with
  ``architecture="tributary"``, trained on max prices ``price + U[0.00001, 0.2]``; wrapped in
  :class:`revpred.predictor.RevPred` (see :mod:`revpred.training`).
- **Logistic regression on the present record** [I]: :class:`PresentRecordLogistic`, the 8 standardised
  present-record values (6 features, max price, delta), Algorithm 2 labels like RevPred, unweighted (so
  its output is already a probability), also wrapped in ``RevPred``.
- **Empirical rate** :class:`EmpiricalRate`: the share of training-window decision times whose price rose
  by more than delta within the next hour. [I] Every distinct training rise is a bucket edge (the
  empirical survival function of the hourly max rise), with (k + 0.5) / (n + 1) smoothing.
- **Constant hazard** :class:`ConstantHazard`: ``p = 1 - exp(-lambda * 1 h)`` with lambda fitted on the
  training window as ``-log(1 - r)`` from the positive share r of the training labels under a given
  max-price rule. [I] It is fitted once per max-price rule (random delta, Algorithm 2), so it is the
  "climatology" reference of each evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import check_is_fitted

from revpred.errors import RevPredError
from revpred.features import N_INPUTS, N_PRESENT
from revpred.labels import HORIZON_S
from revpred.queries import broadcast_queries, group_by_market
from spotmarket.prices import Market, PriceHistory


class PresentRecordLogistic(ClassifierMixin, BaseEstimator):
    """Logistic regression on the last 8 columns (present record) of standardised RevPred inputs.

    Parameters
    ----------
    C : float, default=1.0
        Inverse L2 strength (scikit-learn ``LogisticRegression``).
    max_iter : int, default=1000

    Attributes
    ----------
    coef_ : ndarray of shape (8,)
    intercept_ : float
    classes_ : ndarray of shape (2,)
    n_features_in_ : int
        362.
    """

    def __init__(self, *, C: float = 1.0, max_iter: int = 1000):
        self.C = C
        self.max_iter = max_iter

    def fit(self, X: ArrayLike, y: ArrayLike) -> "PresentRecordLogistic":
        """Fit on standardised rows ``X`` (n, 362) and 0/1 labels ``y`` (n,); returns self.

        Parameters
        ----------
        X : array of shape (n, 362)
            Standardised rows of :func:`revpred.features.make_inputs`; only the last 8 (the present record) are used.
        y : array of shape (n,)
            1 = revoked within the hour.

        Returns
        -------
        PresentRecordLogistic
            ``self``, fitted.

        Raises
        ------
        RevPredError
            If the shapes are wrong.
        """
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y).astype(np.int64)
        if X.ndim != 2 or X.shape[1] != N_INPUTS or y.shape != (X.shape[0],):
            raise RevPredError(f"PresentRecordLogistic expects X (n, {N_INPUTS}) and y (n,), got {X.shape}, {y.shape}")
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = N_INPUTS
        if y.min() == y.max():  # one class: constant at the (smoothed) training share
            r = (y.sum() + 0.5) / (y.size + 1.0)
            self.coef_ = np.zeros(N_PRESENT)
            self.intercept_ = float(math.log(r / (1.0 - r)))
            return self
        lr = LogisticRegression(C=self.C, max_iter=self.max_iter).fit(X[:, -N_PRESENT:], y)
        self.coef_ = lr.coef_[0].astype(np.float64)
        self.intercept_ = float(lr.intercept_[0])
        return self

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Shape (n, 2); column 1 = P(revoked within the hour).

        Parameters
        ----------
        X : array of shape (n, 362)
            Standardised rows.

        Returns
        -------
        ndarray of shape (n, 2)
        """
        check_is_fitted(self, "coef_")
        X = np.asarray(X, dtype=np.float64)
        z = X[:, -N_PRESENT:] @ self.coef_ + self.intercept_
        p = 0.5 * (1.0 + np.tanh(0.5 * z))
        return np.column_stack([1.0 - p, p])

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Class labels 0/1, shape (n,): 1 where P(revoked within the hour) >= 0.5.

        Parameters
        ----------
        X : array of shape (n, 362)
            Standardised rows.

        Returns
        -------
        ndarray of int64, shape (n,)
        """
        return (self.predict_proba(X)[:, 1] >= 0.5).astype(np.int64)

    def export_state(self) -> dict:
        """JSON-able parameters and coefficients (for :mod:`revpred.store`).

        Returns
        -------
        dict
            ``params``, ``coef`` (8 floats) and ``intercept``.
        """
        check_is_fitted(self, "coef_")
        return {"params": self.get_params(), "coef": self.coef_.tolist(), "intercept": self.intercept_}

    @classmethod
    def from_state(cls, d: dict) -> "PresentRecordLogistic":
        """Inverse of :meth:`export_state`.

        Parameters
        ----------
        d : dict
            As :meth:`export_state` returns it.

        Returns
        -------
        PresentRecordLogistic
            Fitted.

        Raises
        ------
        RevPredError
            If the coefficients have the wrong length.
        """
        est = cls(**d["params"])
        est.coef_ = np.asarray(d["coef"], dtype=np.float64)
        if est.coef_.shape != (N_PRESENT,):
            raise RevPredError("stored logistic regression has the wrong number of coefficients")
        est.intercept_ = float(d["intercept"])
        est.classes_ = np.array([0, 1])
        est.n_features_in_ = N_INPUTS
        return est


class EmpiricalRate:
    """P(rise over the current price within the hour > b - price(t)) from the training window's hours.

    Parameters
    ----------
    history : PriceHistory
        Used for the current price at each query time.
    rises : mapping Market -> array of shape (k,)
        Max rise (USD/hour) over the hour after each training decision time (``revpred.labels.max_rise``).

    Raises
    ------
    RevPredError
        If a market has no training hours.
    """

    def __init__(self, history: PriceHistory, rises: Mapping[Market, ArrayLike]):
        self.history = history
        self.rises = {m: np.sort(np.asarray(r, dtype=np.float64)) for m, r in rises.items()}
        for m, r in self.rises.items():
            if r.size == 0:
                raise RevPredError(f"empirical rate for {m}: no training hours")

    def predict_proba(self, markets: Sequence[Market], times_s: ArrayLike, max_prices_usd_per_hour: ArrayLike) -> np.ndarray:
        """See :class:`~revpred.protocol.RevocationPredictor`. Shape (n,).

        Parameters
        ----------
        markets : sequence of Market, length n
        times_s : float or array of shape (n,)
            Decision times, seconds since the Unix epoch (UTC). A scalar applies to every query.
        max_prices_usd_per_hour : float or array of shape (n,)
            Max price b of each query, USD per instance-hour.

        Returns
        -------
        p : ndarray of shape (n,), float64 in [0, 1]
            P(revoked within the hour after t at max price b).

        Raises
        ------
        RevPredError
            If a market has no empirical rate.
        PriceDataError
            If a decision time is outside the market's price history.
        """
        ms, t, b = broadcast_queries(markets, times_s, max_prices_usd_per_hour)
        out = np.empty(len(ms))
        for m, idx in group_by_market(ms).items():
            r = self.rises.get(m)
            if r is None:
                raise RevPredError(f"no empirical rate for market {m}")
            delta = b[idx] - np.asarray(self.history[m].price_at(t[idx]), dtype=np.float64)
            k = r.size - np.searchsorted(r, delta, side="right")  # training hours with rise > delta
            out[idx] = np.where(delta < 0, 1.0, (k + 0.5) / (r.size + 1.0))
        return out


class ConstantHazard:
    """A constant revocation hazard per market: ``p = 1 - exp(-lambda_per_hour * horizon)``.

    Parameters
    ----------
    hazards_per_hour : mapping Market -> float
        lambda >= 0 per market, per hour.
    horizon_s : float, default=3600
        The question's horizon, seconds.

    Raises
    ------
    RevPredError
        If a hazard is negative (or NaN).
    """

    def __init__(self, hazards_per_hour: Mapping[Market, float], horizon_s: float = HORIZON_S):
        for m, lam in hazards_per_hour.items():
            if not lam >= 0.0:
                raise RevPredError(f"hazard of {m} is {lam}, but must be >= 0")
        self.hazards_per_hour = dict(hazards_per_hour)
        self.horizon_s = horizon_s

    @classmethod
    def from_rates(cls, rates: Mapping[Market, float]) -> "ConstantHazard":
        """From the positive share r of hourly labels per market: ``lambda = -log(1 - r)``, r clipped to [0, 0.999].

        Parameters
        ----------
        rates : mapping Market -> float
            Share of positive hourly labels, in [0, 1].

        Returns
        -------
        ConstantHazard
        """
        return cls({m: -math.log1p(-min(max(float(r), 0.0), 0.999)) for m, r in rates.items()})

    def predict_proba(self, markets: Sequence[Market], times_s: ArrayLike, max_prices_usd_per_hour: ArrayLike) -> np.ndarray:
        """See :class:`~revpred.protocol.RevocationPredictor`. Shape (n,); times and max prices are ignored.

        Parameters
        ----------
        markets : sequence of Market, length n
        times_s : float or array of shape (n,)
            Decision times, seconds since the Unix epoch (UTC). A scalar applies to every query.
        max_prices_usd_per_hour : float or array of shape (n,)
            Max price b of each query, USD per instance-hour.

        Returns
        -------
        p : ndarray of shape (n,), float64 in [0, 1]
            P(revoked within the hour after t at max price b).

        Raises
        ------
        RevPredError
            If a market has no hazard.
        """
        ms, _, _ = broadcast_queries(markets, times_s, max_prices_usd_per_hour)
        try:
            lam = np.array([self.hazards_per_hour[m] for m in ms], dtype=np.float64)
        except KeyError as exc:
            raise RevPredError(f"no hazard for market {exc.args[0]}") from None
        return -np.expm1(-lam * self.horizon_s / 3600.0)
