"""A revocation predictor trained on the provisioner's own queries, monotone in the max price (decisions P1-P3).

RevPred is trained on Algorithm 2 max prices and queried at others, so its p means little for the
questions the provisioner asks (docs/design/revpred.md, "Calibrated predictor"). :class:`CalibratedRevocation`
is trained on exactly those questions:

1. **Queries** (:func:`revpred.ladder.ladder_queries`): every market, decision times every
   ``stride_min`` minutes of the training period, ``b = price + delta`` for each ladder delta and
   ``b = on-demand``; exact labels from :class:`spotmarket.LegacyBidRevocation`.
2. **Model**: scikit-learn ``HistGradientBoostingClassifier`` on :data:`revpred.ladder_features.FEATURES`
   with ``monotonic_cst`` (:data:`revpred.ladder_features.MONOTONE_CST`): each feature that moves with b
   moves p the right way, so the raw p never increases when only b increases. [I]
3. **Calibration** on a separate, later period: isotonic regression (default; non-decreasing, so it
   keeps the order) or Platt scaling with a non-negative slope (scikit-learn).
4. **Edges**: ``p = 0`` when b is above the highest price the market has recorded up to t (so p -> 0
   as b passes the trace's highest price); ``p = 1`` when b is below the current price (the launch would
   be refused at once).

Source: docs/design/decisions.md, "Calibrated revocation probabilities" (P1-P3); scikit-learn user guide 1.11 (monotonic
constraints) and 1.16 (probability calibration).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from revpred.errors import OneClassError, RevPredError
from revpred.ladder import DELTA_LADDER_USD_PER_HOUR, check_ladder, ladder_queries
from revpred.ladder_features import LadderFeatures
from revpred.queries import broadcast_queries, group_by_market
from spotmarket.prices import Market, PriceHistory

__all__ = ["CALIBRATION_METHODS", "CalibratedRevocation"]

log = logging.getLogger(__name__)
CALIBRATION_METHODS = ("isotonic", "platt", "none")
_EPS = 1e-6


class CalibratedRevocation:
    """P(revoked within the hour) for (market, t, max price b), trained on the provisioner's queries.

    Parameters
    ----------
    history : PriceHistory
        Spot prices, USD per instance-hour (training labels and query features; features at t read
        only records at or before t).
    markets : sequence of Market
        Markets it is trained on and answers for.
    ladder : sequence of float, default :data:`revpred.ladder.DELTA_LADDER_USD_PER_HOUR`
        The provisioner's max-price offsets, USD/hour.
    on_demand : mapping Market (or str) -> float, optional
        On-demand price per market, USD/hour: adds the ``b = on-demand`` queries and a feature.
    stride_min : int, default 20
        Minutes between training decision times.
    calibration : {"isotonic", "platt", "none"}, default "isotonic"
    max_iter, learning_rate, min_samples_leaf, l2_regularization
        ``HistGradientBoostingClassifier`` settings.
    seed : int, default 0
    query_grid_s : float or None, default None
        If set, the model answers a query ``(t, b)`` as the query ``(t_grid, b - price(t) + price(t_grid))``
        at the grid time ``t_grid = floor(t / query_grid_s) * query_grid_s``, the same offset above the
        price in force (the edge rules still use t and b), and remembers the answers of the current grid
        period, so the many per-trial queries of one provisioning period cost one model call. [I] Set it
        to the training stride (the queries it was trained and calibrated on lie on that grid); it reads
        no record after t. (The on-demand rung is moved by the same offset.)
    feature_set : str, default "base"
        Columns of the model, a name of :data:`revpred.ladder_features.FEATURE_SETS` (``"base"``: the 14
        columns of :data:`revpred.ladder_features.FEATURES`); every set keeps p non-increasing in b.

    Raises
    ------
    RevPredError
        On an unknown calibration method or feature set, no markets, or a bad ladder or grid.

    Attributes (after :meth:`fit`)
    ------------------------------
    model_ : HistGradientBoostingClassifier
    calibrator_ : IsotonicRegression, (slope, intercept) for Platt, or None
    base_rate_ : float
        Positive share of the training queries.
    periods_ : dict
        Training and calibration windows (seconds since the epoch).
    """

    def __init__(self, history: PriceHistory, markets: Sequence[Market], *,
                 ladder: Sequence[float] = DELTA_LADDER_USD_PER_HOUR, on_demand: Mapping | None = None,
                 stride_min: int = 20, calibration: str = "isotonic", max_iter: int = 150,
                 learning_rate: float = 0.1, min_samples_leaf: int = 100, l2_regularization: float = 1.0,
                 seed: int = 0, query_grid_s: float | None = None, feature_set: str = "base"):
        if calibration not in CALIBRATION_METHODS:
            raise RevPredError(f"calibration is {calibration!r}, but must be one of {', '.join(CALIBRATION_METHODS)}")
        if not markets:
            raise RevPredError("the calibrated predictor needs at least one market")
        self.history = history
        self.markets = [Market.parse(m) if isinstance(m, str) else m for m in markets]
        self._known = frozenset(self.markets)
        self.ladder = check_ladder(ladder)
        self.on_demand = on_demand
        self.stride_min = int(stride_min)
        self.calibration = calibration
        self.max_iter = int(max_iter)
        self.learning_rate = float(learning_rate)
        self.min_samples_leaf = int(min_samples_leaf)
        self.l2_regularization = float(l2_regularization)
        self.seed = int(seed)
        if query_grid_s is not None and not query_grid_s > 0:
            raise RevPredError(f"query_grid_s is {query_grid_s}, but must be > 0 seconds or None")
        self.query_grid_s = None if query_grid_s is None else float(query_grid_s)
        self.forget()
        self.features = LadderFeatures(history, self.ladder, on_demand,
                                       sorted({m.instance_type for m in self.markets}),
                                       sorted({m.availability_zone for m in self.markets}), feature_set)

    # -- training -------------------------------------------------------------------------------------
    @classmethod
    def train(cls, history: PriceHistory, markets: Sequence[Market], lo_s: float, hi_s: float, *,
              calibration_share: float = 0.25, **kwargs) -> "CalibratedRevocation":
        """Fit on ``[lo_s, hi_s]``: the first ``1 - calibration_share`` trains, the rest calibrates.

        Parameters
        ----------
        history, markets
            As for the constructor; ``kwargs`` go to it too.
        lo_s, hi_s : float
            The whole window, seconds since the epoch (UTC); nothing after ``hi_s`` is read for labels.
        calibration_share : float in (0, 1), default 0.25

        Returns
        -------
        CalibratedRevocation
            The fitted predictor.

        Raises
        ------
        RevPredError
            If ``calibration_share`` is outside (0, 1), or as :meth:`fit`.
        """
        if not 0.0 < calibration_share < 1.0:
            raise RevPredError(f"calibration_share is {calibration_share}, but must be in (0, 1)")
        cut = hi_s - calibration_share * (hi_s - lo_s)
        return cls(history, markets, **kwargs).fit(lo_s, cut, cut, hi_s)

    def fit(self, train_lo_s: float, train_hi_s: float, cal_lo_s: float, cal_hi_s: float) -> "CalibratedRevocation":
        """Train the model on ``[train_lo_s, train_hi_s]`` and the calibration on ``[cal_lo_s, cal_hi_s]``.

        Labels of each period stay inside it (their hour ends by the period's end). The calibration
        period must not start before the training period ends.

        Parameters
        ----------
        train_lo_s, train_hi_s : float
            Training period, seconds since the epoch (UTC).
        cal_lo_s, cal_hi_s : float
            Calibration period, seconds since the epoch (UTC); ``cal_lo_s >= train_hi_s``.

        Returns
        -------
        CalibratedRevocation
            ``self``, fitted.

        Raises
        ------
        RevPredError
            Overlapping periods; :class:`revpred.errors.OneClassError` for a training period whose labels hold
            one class only.
        """
        from sklearn.ensemble import HistGradientBoostingClassifier

        if cal_lo_s < train_hi_s:
            raise RevPredError("the calibration period must start after the training period ends")
        train = self.queries(train_lo_s, train_hi_s)
        y = train["y"].to_numpy()
        if y.min() == y.max():
            raise OneClassError(f"the training period holds only {'revoked' if y[0] else 'unrevoked'} queries; "
                                "train on a longer period", revoked=bool(y[0]))
        X = self._X(train)
        # [I] one OpenMP thread, as in _predict: on a busy machine OpenMP's spinning threads stall the fit; on one
        # thread the trees are the same (the predictions were checked equal)
        with _threads().limit(limits=1, user_api="openmp"):
            self.model_ = HistGradientBoostingClassifier(
                max_iter=self.max_iter, learning_rate=self.learning_rate, min_samples_leaf=self.min_samples_leaf,
                l2_regularization=self.l2_regularization, monotonic_cst=list(self.features.monotone_cst),
                categorical_features=list(self.features.categorical), early_stopping=False,
                random_state=self.seed).fit(X, y)
            self.base_rate_ = float(y.mean())
            self.calibrator_ = None
            if self.calibration != "none":
                cal = self.queries(cal_lo_s, cal_hi_s)
                self._fit_calibration(self.model_.predict_proba(self._X(cal))[:, 1], cal["y"].to_numpy())
        self.periods_ = {"train": (float(train_lo_s), float(train_hi_s)), "calibration": (float(cal_lo_s), float(cal_hi_s)),
                         "n_train": int(y.size), "n_calibration": 0 if self.calibration == "none" else int(len(cal))}
        return self

    def queries(self, lo_s: float, hi_s: float):
        """:func:`revpred.ladder.ladder_queries` of this predictor's markets, ladder and on-demand prices.

        Parameters
        ----------
        lo_s, hi_s : float
            Period, seconds since the epoch (UTC); every label's hour ends by ``hi_s``.

        Returns
        -------
        pandas.DataFrame
            One row per (market, decision time, max price) query with its exact legacy label ``y``.
        """
        return ladder_queries(self.history, self.markets, lo_s, hi_s, stride_min=self.stride_min, ladder=self.ladder,
                              on_demand=self.on_demand)

    def _X(self, frame) -> np.ndarray:
        return self.features.transform(list(frame["market"]), frame["t"].to_numpy(), frame["b"].to_numpy())

    def _fit_calibration(self, raw: np.ndarray, y: np.ndarray) -> None:
        if y.size == 0 or y.min() == y.max():
            log.warning("calibration period holds one class only (%d queries); p is left uncalibrated", y.size)
            return
        if self.calibration == "isotonic":
            from sklearn.isotonic import IsotonicRegression

            self.calibrator_ = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(raw, y)
            return
        from sklearn.linear_model import LogisticRegression

        z = _logit(raw)[:, None]
        lr = LogisticRegression(C=1e4, max_iter=1000).fit(z, y)
        a, c = float(lr.coef_[0, 0]), float(lr.intercept_[0])
        if a < 0:  # a negative slope would reverse the order: keep the model's p
            log.warning("Platt slope %.3g < 0 on the calibration period; p is left uncalibrated", a)
            return
        self.calibrator_ = (a, c)

    # -- persistence ----------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the fitted state (model, calibrator, base rate, periods) to ``path``, skops format, atomically.

        The settings and the price data are not written: :meth:`load` restores the state into a predictor
        built with the same ones. Used by the on-disk cache (``spottune.compose.calibrated_predictor``).

        Parameters
        ----------
        path : str or path-like
            File to write (its folder is created).

        Raises
        ------
        RevPredError
            If the predictor is not fitted.
        """
        import skops.io as sio

        if not hasattr(self, "model_"):
            raise RevPredError("the calibrated predictor is not fitted; call fit() or train() first")
        calibrator = list(self.calibrator_) if isinstance(self.calibrator_, tuple) else self.calibrator_
        state = {"model": self.model_, "calibrator": calibrator, "base_rate": self.base_rate_,
                 "periods": {k: list(v) if isinstance(v, tuple) else v for k, v in self.periods_.items()}}
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            sio.dump(state, tmp)
            os.replace(tmp, path)  # a reader sees the old file or the whole new one, never a partial one
        finally:
            tmp.unlink(missing_ok=True)

    def load(self, path: str | os.PathLike) -> "CalibratedRevocation":
        """Restore a state written by :meth:`save` into this predictor (built with the same settings); returns it.

        Only scikit-learn's own types are accepted (skops' defaults and :data:`_TRUSTED`), so a file that
        holds anything else is refused, not executed.

        Parameters
        ----------
        path : str or path-like
            A file written by :meth:`save`.

        Returns
        -------
        CalibratedRevocation
            ``self``, fitted.

        Raises
        ------
        RevPredError
            If the file cannot be read or holds anything but a saved state.
        """
        import skops.io as sio

        try:
            state = sio.load(path, trusted=list(_TRUSTED))
            model, calibrator = state["model"], state["calibrator"]
            periods = {k: tuple(v) if isinstance(v, list) else v for k, v in state["periods"].items()}
            base_rate = float(state["base_rate"])
        except Exception as exc:  # OSError, skops' UntrustedTypesFoundException, KeyError, zip errors ...
            raise RevPredError(f"cannot load a calibrated predictor from {path}: {type(exc).__name__}: {exc}") from exc
        self.model_, self.base_rate_, self.periods_ = model, base_rate, periods
        self.calibrator_ = tuple(calibrator) if isinstance(calibrator, list) else calibrator
        self.forget()
        return self

    # -- prediction -----------------------------------------------------------------------------------
    def raw_proba(self, markets: Sequence[Market], times_s: ArrayLike, max_prices_usd_per_hour: ArrayLike) -> np.ndarray:
        """The boosted model's p before calibration and edge rules, shape (n,).

        Parameters
        ----------
        markets : sequence of Market, length n
        times_s : float or array of shape (n,)
            Decision times, seconds since the Unix epoch (UTC). A scalar applies to every query.
        max_prices_usd_per_hour : float or array of shape (n,)
            Max price b of each query, USD per instance-hour.

        Returns
        -------
        ndarray of shape (n,)
            Uncalibrated probabilities in [0, 1].

        Raises
        ------
        RevPredError
            If the predictor is not fitted or a market was not trained on.
        """
        ms, t, b = broadcast_queries(markets, times_s, max_prices_usd_per_hour)
        self._check_fitted(ms)
        if not ms:
            return np.empty(0)
        return self.model_.predict_proba(self.features.transform(ms, t, b))[:, 1]

    def predict_proba(self, markets: Sequence[Market], times_s: ArrayLike, max_prices_usd_per_hour: ArrayLike) -> np.ndarray:
        """See :class:`~revpred.protocol.RevocationPredictor`: p of shape (n,), float64 in [0, 1].

        Non-increasing in the max price by construction; 0 above the highest price recorded up to t,
        1 below the current price.

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
            Not fitted, a market it was not trained on, or non-finite queries.
        PriceDataError
            A decision time outside the market's price history.
        """
        ms, t, b = broadcast_queries(markets, times_s, max_prices_usd_per_hour)
        groups = group_by_market(ms)
        self._check_fitted(groups)
        out = np.empty(len(ms))
        if not ms:
            return out
        p = self._model_p(ms, groups, t, b)
        one_t = float(t[0]) if bool((t == t[0]).all()) else None  # the provisioner asks at one time
        price, ceiling = np.empty(len(ms)), np.empty(len(ms))
        for m, idx in groups.items():
            tab = self.features.tables(m)
            series = tab.series
            tm = t[idx] if one_t is None else one_t
            if one_t is None and not np.all((tm >= series.start_s) & (tm <= series.end_s)) or (
                    one_t is not None and not series.start_s <= one_t <= series.end_s):
                series.price_at(tm)  # raises PriceDataError naming the time
            i = series.times_s.searchsorted(tm, side="right") - 1  # the record in force at t
            price[idx], ceiling[idx] = series.prices[i], tab.cummax[i]  # current price; highest price up to t
        out = np.where(b < price, 1.0, np.where(b > ceiling, 0.0, p))
        return np.clip(out, 0.0, 1.0)

    def _model_p(self, ms: Sequence[Market], groups: dict, t: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Calibrated model p before the edge rules; on the query grid when ``query_grid_s`` is set."""
        if self.query_grid_s is None:
            return self._predict(ms, t, b)
        tq, bq = self._on_grid(groups, t, b)
        period = float(np.floor(float(t.min()) / self.query_grid_s))
        if self._memo[0] != period:  # queries come in time order: remember the current grid period only
            self._memo = (period, {}, {})  # (grid period, (market, grid time, max price) -> p, whole calls -> p)
        known, calls = self._memo[1], self._memo[2]
        whole = (tuple(map(id, ms)), bq.tobytes(), tq.tobytes())
        hit = calls.get(whole)  # the same questions as an earlier call: one lookup
        if hit is None:
            keys = list(zip(ms, tq.tolist(), bq.tolist()))
            out = np.array([known.get(k, np.nan) for k in keys])
            todo = np.flatnonzero(np.isnan(out))
            if todo.size:
                out[todo] = self._predict([ms[i] for i in todo.tolist()], tq[todo], bq[todo])
                known.update((keys[i], out[i]) for i in todo.tolist())
            # the entry holds the markets too, so their ids cannot be reused while it lives
            hit = calls[whole] = (list(ms), out)
        return hit[1].copy()

    def _on_grid(self, groups: dict, t: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each query moved to its grid time with the same offset above the price in force: (times, max prices).

        [I] A query ``b = price(t) + delta`` becomes ``price(t_grid) + delta`` at ``t_grid``: the questions the
        model was trained and calibrated on (a decision time on the stride grid, a ladder offset above the
        price then). Asked with the absolute ``b`` instead, a price change since the grid time would shift
        the offset the model sees.
        """
        tq = np.floor(t / self.query_grid_s) * self.query_grid_s
        bq = np.empty_like(b)
        for m, idx in groups.items():
            series = self.features.tables(m).series
            at = series.times_s.searchsorted(np.concatenate([t[idx], tq[idx]]), side="right") - 1
            price = series.prices[np.clip(at, 0, None)]
            bq[idx] = np.round(b[idx] - price[:idx.size] + price[idx.size:], 9)
        return tq, bq

    def forget(self) -> None:
        """Drop the answers remembered on the query grid (a new run replays the same times afresh)."""
        self._memo = (float("nan"), {}, {})

    def _predict(self, ms: Sequence[Market], t: np.ndarray, b: np.ndarray) -> np.ndarray:
        X = self.features.transform(ms, t, b)
        if len(ms) > _SERIAL_ROWS:
            return self._calibrate(self.model_.predict_proba(X)[:, 1])
        # [I] one OpenMP region per tree costs a scheduler quantum on a busy machine (measured 14 ms per
        # tree, 2 s per call, under load): a provisioner's few hundred queries run faster on one thread
        with _threads().limit(limits=1, user_api="openmp"):
            return self._calibrate(self.model_.predict_proba(X)[:, 1])

    def _calibrate(self, raw: np.ndarray) -> np.ndarray:
        if self.calibrator_ is None:
            return raw
        if isinstance(self.calibrator_, tuple):
            a, c = self.calibrator_
            return 0.5 * (1.0 + np.tanh(0.5 * (a * _logit(raw) + c)))
        return np.asarray(self.calibrator_.predict(raw), dtype=np.float64)

    def _check_fitted(self, markets) -> None:
        if not hasattr(self, "model_"):
            raise RevPredError("the calibrated predictor is not fitted; call fit() or train() first")
        known = self._known
        for m in markets:
            if m not in known:
                raise RevPredError(f"the calibrated predictor was not trained on market {m}")

    def describe(self) -> str:
        """One line: method, periods and sizes.

        Returns
        -------
        str
        """
        tr, ca = self.periods_["train"], self.periods_["calibration"]
        cols = "" if self.features.feature_set == "base" else f", features {self.features.feature_set!r}"
        return (f"calibrated (gradient boosting{cols}, monotone in the max price, {self.calibration} calibration; "
                f"{(tr[1] - tr[0]) / 86400:g} days training, {(ca[1] - ca[0]) / 86400:g} days calibration, "
                f"{self.periods_['n_train']} queries)")


#: Types a saved state may hold beyond skops' defaults: the boosted model's trees and its input check (a
#: ``functools.partial`` of scikit-learn's ``check_array``; skops audits the wrapped function on its own).
_TRUSTED = ("sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor", "functools.partial",
            "sklearn.utils.validation.check_array")
_SERIAL_ROWS = 20_000  # queries up to this many are predicted on one thread


@functools.cache
def _threads():
    """threadpoolctl's controller (scikit-learn's own dependency), built once: each limit() then costs µs."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), _EPS, 1.0 - _EPS)
    return np.log(p) - np.log1p(-p)

