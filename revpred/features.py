"""RevPred input features (the SpotTune paper's RevPred): six per-minute features, the 59-minute history window,
the present record with the max price, and standardisation fitted on the training window only.

Every sample is a decision time ``t`` (seconds since the epoch, UTC; any second, not only whole
minutes). Its records are the 60 one-minute points ``t - 59 min, ..., t - 1 min, t``: the first 59 are
the history fed to the LSTM, the last one is the present record fed to the fully connected branch.
Features of a record at minute ``m`` are computed **only from price records at or before t** (no
look-ahead), so the same code builds training samples and answers online queries.

Per-record features, in this order (``SEQ_FEATURES``):

1. ``price`` -- price on the one-minute grid at m, USD per instance-hour.
2. ``mean_price_60min`` -- mean of the grid prices at m - 59 min, ..., m (60 points), USD/hour.
   [I] a mean over the grid (what the paper's preprocessed dataset would give), not a time integral.
3. ``n_changes_60min`` -- number of raw price-change records in (m - 60 min, m]. [I] raw change events,
   not interpolated minutes (the paper counts price changes).
4. ``minutes_since_set`` -- minutes since the last raw record that changed the price, at or before m
   (the first record of a series counts as a change). [I] capped at ``MAX_MINUTES_SINCE_SET`` = 1440
   (one day) so that the slow post-2017 series do not produce unbounded values.
5. ``is_workday`` -- 1.0 if m falls on Monday..Friday in **UTC**, else 0.0. [I] UTC, not US/Eastern: the
   traces are in UTC and the markets span regions.
6. ``hour_of_day`` -- UTC hour of m, integer 0..23 as a float.

Present record (``PRESENT_FEATURES``): the six features at t, the max price ``b`` (USD/hour), and
``delta = b - price(t)``. [I] ``delta`` is added (the paper's RevPred text suggests it) because it carries the
max price relative to the current level, which generalises across price levels.

Grid method (decision D3): ``"ffill"`` (default) holds the last record, the posted step function.
``"linear"`` interpolates between consecutive records, **but only between records known at t**; the
minutes after the last record at or before t are held flat. [I] This keeps "linear" causal; the
paper's offline interpolation would look up to one inter-record gap into the future.

Input matrix layout (``make_inputs``): ``X`` of shape ``(n, 59 * 6 + 8)``: the 59 history records
row-major (record, feature), then the 8 present values. :class:`FeatureScaler` standardises it.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from revpred.errors import PriceDataError, RevPredError
from spotmarket.prices import PriceSeries, to_timestamp

SEQ_FEATURES: tuple[str, ...] = (
    "price",
    "mean_price_60min",
    "n_changes_60min",
    "minutes_since_set",
    "is_workday",
    "hour_of_day",
)
PRESENT_FEATURES: tuple[str, ...] = SEQ_FEATURES + ("max_price", "delta")
N_SEQ = len(SEQ_FEATURES)
N_PRESENT = len(PRESENT_FEATURES)
N_HISTORY = 59
N_RECORDS = N_HISTORY + 1
MEAN_WINDOW = 60
#: Grid points needed per sample: 60 records, each with a 60-point mean -> 119 minutes.
N_GRID = N_RECORDS + MEAN_WINDOW - 1
#: History a sample needs before t, seconds (118 minutes).
HISTORY_S = (N_GRID - 1) * 60.0
N_INPUTS = N_HISTORY * N_SEQ + N_PRESENT
MAX_MINUTES_SINCE_SET = 1440.0
GRID_METHODS = ("ffill", "linear")
#: Smallest value put through a log transform (prices, max prices, deltas), USD/hour.
LOG_FLOOR = 1e-6


@lru_cache(maxsize=512)
def _change_times(series: PriceSeries) -> np.ndarray:
    """Times of records that set a new price (the first record counts), seconds, ascending."""
    changed = np.concatenate([[True], np.diff(series.prices) != 0])
    return series.times_s[changed]


def _check_times(series: PriceSeries, times_s: np.ndarray) -> None:
    if times_s.ndim != 1:
        raise PriceDataError(f"decision times must be a 1-d array, got shape {times_s.shape}")
    if times_s.size == 0:
        return
    if not np.all(np.isfinite(times_s)):
        raise PriceDataError(f"market {series.market}: decision times must be finite")
    lo, hi = float(times_s.min()), float(times_s.max())
    if lo - HISTORY_S < series.start_s:
        raise PriceDataError(
            f"market {series.market}: a decision at {to_timestamp(lo)} needs {HISTORY_S / 60:.0f} minutes of "
            f"price history, but the history starts at {to_timestamp(series.start_s)}"
        )
    if hi > series.end_s:
        raise PriceDataError(
            f"market {series.market}: decision time {to_timestamp(hi)} is after the end of the price history "
            f"({to_timestamp(series.end_s)})"
        )


def grid_offsets_s() -> np.ndarray:
    """Offsets of the 119 grid points relative to t, seconds: ``-118*60, ..., -60, 0``. Shape (119,)."""
    return (np.arange(N_GRID, dtype=np.float64) - (N_GRID - 1)) * 60.0


def minute_prices(series: PriceSeries, times_s: ArrayLike, method: str = "ffill") -> np.ndarray:
    """Causal one-minute price grid before each decision time.

    Parameters
    ----------
    series : PriceSeries
        One market's price records.
    times_s : array of shape (n,)
        Decision times, seconds since the epoch (UTC).
    method : {"ffill", "linear"}
        Grid method (decision D3); "linear" interpolates only between records at or before each t.

    Returns
    -------
    grid : ndarray of shape (n, 119)
        ``grid[i, k]`` is the price (USD per instance-hour) at ``t_i - (118 - k) * 60`` seconds, using
        records at or before ``t_i`` only.

    Raises
    ------
    PriceDataError
        If a t lacks 118 minutes of history, lies after the end of the history, or the method is unknown.
    """
    t = np.asarray(times_s, dtype=np.float64)
    _check_times(series, t)
    if method not in GRID_METHODS:
        raise PriceDataError(f"grid method {method!r} is unknown; use one of {GRID_METHODS}")
    m = t[:, None] + grid_offsets_s()[None, :]
    idx = np.searchsorted(series.times_s, m, side="right") - 1
    values = series.prices[idx]
    if method == "linear":
        nxt = np.minimum(idx + 1, series.times_s.size - 1)
        t0, t1 = series.times_s[idx], series.times_s[nxt]
        known = (nxt > idx) & (t1 <= t[:, None])  # the next record is known at decision time t
        frac = np.where(known, (m - t0) / np.where(known, t1 - t0, 1.0), 0.0)
        values = values + frac * (series.prices[nxt] - values)
    return values


def record_features(series: PriceSeries, times_s: ArrayLike, method: str = "ffill") -> np.ndarray:
    """The six features of the 60 records before and at each decision time.

    Parameters
    ----------
    series : PriceSeries
    times_s : array of shape (n,)
        Decision times, seconds since the epoch (UTC).
    method : {"ffill", "linear"}

    Returns
    -------
    feats : ndarray of shape (n, 60, 6), float64
        ``feats[i, j]`` describes minute ``t_i - (59 - j) * 60``; ``feats[i, -1]`` is the present record.
        Columns as in ``SEQ_FEATURES`` (USD/hour, USD/hour, count, minutes, 0/1, hour 0..23).
    """
    t = np.asarray(times_s, dtype=np.float64)
    grid = minute_prices(series, t, method)
    n = t.size
    csum = np.concatenate([np.zeros((n, 1)), np.cumsum(grid, axis=1)], axis=1)
    # record j sits at grid column k = j + 59; its mean covers columns k-59 .. k
    k = np.arange(MEAN_WINDOW - 1, N_GRID)
    mean60 = (csum[:, k + 1] - csum[:, k + 1 - MEAN_WINDOW]) / MEAN_WINDOW
    price = grid[:, k]
    m = t[:, None] + grid_offsets_s()[None, k]
    flat = m.ravel()
    ct = _change_times(series)
    upto = np.searchsorted(ct, flat, side="right")
    # raw change records in (m - 60 min, m]; the first record of the series sets a price but is no change
    # (same count as PriceSeries.changes_between, without its O(n records) pass per call)
    n_changes = (upto - np.maximum(np.searchsorted(ct, flat - 3600.0, side="right"), 1)).clip(min=0)
    n_changes = n_changes.reshape(m.shape).astype(np.float64)
    last_set = ct[upto - 1].reshape(m.shape)
    since = np.minimum((m - last_set) / 60.0, MAX_MINUTES_SINCE_SET)
    day = np.floor(m / 86400.0)
    weekday = (day + 3.0) % 7.0  # 1970-01-01 was a Thursday; Monday = 0
    workday = (weekday < 5.0).astype(np.float64)
    hour = np.floor((m - day * 86400.0) / 3600.0)
    return np.stack([price, mean60, n_changes, since, workday, hour], axis=-1)


def make_inputs(feats: np.ndarray, max_prices_usd_per_hour: ArrayLike) -> np.ndarray:
    """Model input rows from record features and max prices (unscaled).

    Parameters
    ----------
    feats : ndarray of shape (n, 60, 6)
        From :func:`record_features`.
    max_prices_usd_per_hour : float or array of shape (n,)
        Max price b of each sample, USD per instance-hour.

    Returns
    -------
    X : ndarray of shape (n, 362)
        59 x 6 history values (row-major), then the present record's 6 features, b and
        ``delta = b - price(t)``.
    """
    n = feats.shape[0]
    b = np.broadcast_to(np.asarray(max_prices_usd_per_hour, dtype=np.float64), (n,))
    present = feats[:, -1, :]
    delta = b - present[:, 0]
    return np.concatenate([feats[:, :-1, :].reshape(n, N_HISTORY * N_SEQ), present, b[:, None], delta[:, None]], axis=1)


def split_inputs(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``X`` of shape (n, 362) -> history (n, 59, 6) and present (n, 8)."""
    n = X.shape[0]
    return X[:, : N_HISTORY * N_SEQ].reshape(n, N_HISTORY, N_SEQ), X[:, N_HISTORY * N_SEQ :]


# Per-feature transform before standardising [I]: logs for prices (spikes are multiplicative), log1p for
# counts and durations, identity for the calendar flags.
_TRANSFORMS = ("log", "log", "log1p", "log1p", "id", "id", "log", "log")


def _column_kinds() -> np.ndarray:
    """Transform kind of each of the 362 input columns."""
    return np.array(list(_TRANSFORMS[:N_SEQ]) * N_HISTORY + list(_TRANSFORMS))


_KINDS = _column_kinds()
_LOG = _KINDS == "log"
_LOG1P = _KINDS == "log1p"
#: Feature index (0..7) of each of the 362 input columns, for the per-feature statistics.
_FEATURE_OF_COLUMN = np.array(list(range(N_SEQ)) * N_HISTORY + list(range(N_PRESENT)))


def _transform_inputs(X: np.ndarray) -> np.ndarray:
    """Apply ``_TRANSFORMS`` column-wise to inputs of shape (n, 362); returns a new float64 array."""
    Z = np.array(X, dtype=np.float64)
    Z[:, _LOG] = np.log(np.maximum(Z[:, _LOG], LOG_FLOOR))
    Z[:, _LOG1P] = np.log1p(np.maximum(Z[:, _LOG1P], 0.0))
    return Z


class FeatureScaler(TransformerMixin, BaseEstimator):
    """Log-transform and standardise RevPred inputs with statistics of the training window only.

    Transforms [I]: ``log`` for price, 60-min mean, max price and delta (delta floored at 1e-6 USD/h,
    so ``b <= price`` maps to the floor); ``log1p`` for the change count and minutes since set; none for
    the workday flag and hour. Then z-scores; a history feature uses the same statistics as the same
    feature of the present record. Standardised values are clipped to ``[-clip, clip]``.

    Parameters
    ----------
    clip : float, default=10.0
        Bound on standardised values (guards the networks against far out-of-range queries, e.g. a
        random delta of $0.2 when training deltas were cents).

    Attributes
    ----------
    mean_ : ndarray of shape (8,)
        Mean of each transformed present feature over the training rows.
    scale_ : ndarray of shape (8,)
        Standard deviation (1.0 where it is 0).
    n_features_in_ : int
        362.
    """

    def __init__(self, *, clip: float = 10.0):
        self.clip = clip

    def fit(self, X: ArrayLike, y: object = None) -> "FeatureScaler":
        """Learn per-feature mean and scale from training inputs ``X`` of shape (n, 362).

        Parameters
        ----------
        X : array of shape (n, 362)
            Unscaled inputs of :func:`make_inputs`, training window only.
        y : ignored
            For scikit-learn's API.

        Returns
        -------
        FeatureScaler
            ``self``, fitted.

        Raises
        ------
        RevPredError
            If ``X`` is not of shape (n, 362).
        """
        X = self._check(X)
        Z = _transform_inputs(X)
        hist, present = split_inputs(Z)
        # sequence features: pool all 60 records; b and delta: present record only
        seq = np.concatenate([hist.reshape(-1, N_SEQ), present[:, :N_SEQ]], axis=0)
        mean = np.concatenate([seq.mean(axis=0), present[:, N_SEQ:].mean(axis=0)])
        std = np.concatenate([seq.std(axis=0), present[:, N_SEQ:].std(axis=0)])
        self.mean_ = mean
        self.scale_ = np.where(std > 1e-12, std, 1.0)
        self.n_features_in_ = N_INPUTS
        return self

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Standardised inputs, shape (n, 362), float32.

        Parameters
        ----------
        X : array of shape (n, 362)
            Unscaled inputs of :func:`make_inputs`.

        Returns
        -------
        ndarray of float32, shape (n, 362)
            Clipped to ``[-clip, clip]``.

        Raises
        ------
        RevPredError
            If ``X`` is not of shape (n, 362).
        """
        if not hasattr(self, "mean_"):  # cheaper than check_is_fitted on the inference hot path
            check_is_fitted(self)
        Z = _transform_inputs(self._check(X))
        Z -= self.mean_[_FEATURE_OF_COLUMN]
        Z /= self.scale_[_FEATURE_OF_COLUMN]
        return np.clip(Z, -self.clip, self.clip, out=Z).astype(np.float32)

    @staticmethod
    def _check(X: ArrayLike) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != N_INPUTS:
            raise RevPredError(f"RevPred inputs must have shape (n, {N_INPUTS}), got {X.shape}")
        return X

    def to_dict(self) -> dict:
        """JSON-able state (for :mod:`revpred.store`).

        Returns
        -------
        dict
            ``clip``, ``mean``, ``scale``, ``features`` and ``transforms``.
        """
        check_is_fitted(self)
        return {"clip": float(self.clip), "mean": self.mean_.tolist(), "scale": self.scale_.tolist(),
                "features": list(PRESENT_FEATURES), "transforms": list(_TRANSFORMS)}

    @classmethod
    def from_dict(cls, d: dict) -> "FeatureScaler":
        """Inverse of :meth:`to_dict`; refuses statistics for a different feature list.

        Parameters
        ----------
        d : dict
            As :meth:`to_dict` returns it.

        Returns
        -------
        FeatureScaler
            Fitted.

        Raises
        ------
        RevPredError
            If the features, transforms or lengths differ from this version's.
        """
        if list(d.get("features", [])) != list(PRESENT_FEATURES) or list(d.get("transforms", [])) != list(_TRANSFORMS):
            raise RevPredError("stored feature scaling is for a different feature set")
        s = cls(clip=float(d["clip"]))
        s.mean_ = np.asarray(d["mean"], dtype=np.float64)
        s.scale_ = np.asarray(d["scale"], dtype=np.float64)
        if s.mean_.shape != (N_PRESENT,) or s.scale_.shape != (N_PRESENT,):
            raise RevPredError("stored feature scaling has the wrong length")
        s.n_features_in_ = N_INPUTS
        return s
