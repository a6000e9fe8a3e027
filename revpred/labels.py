"""Training max prices (Algorithm 2), revocation labels, sample times and class weights (the paper's RevPred).

Label [T]: a record at decision time t with max price b is positive (revoked) iff a price record in
``(t, t + 60 min]`` is above b, i.e. ``next_above(t, b) <= t + 3600``. Labels always use the raw
step-function records, whatever grid method the features use: that is the 2017 revocation rule
(decision M1). Boundary: a record exactly 60 minutes after t counts; one at 60 min + 1 s does not.

Algorithm 2 (reconstructed from the paper): ``b = price(t) + trimmed_mean(|first differences|)`` over the
previous hour, dropping the smallest and largest 20% (``c = floor(0.2 n)`` from each end).

[I] D4, the zero-variation case. On a forward-filled minute grid most first differences are 0 and the
trimmed mean is usually 0, making b equal to the current price. Default (``variations="events"``):
take the absolute differences of the **raw price-change events** in ``(t - 60 min, t]`` (the first one
relative to the price in force at ``t - 60 min``), then floor the resulting delta at the price tick of
$0.0001 (which also covers an hour without any change). ``variations="grid"`` is the literal algorithm on
the 61-point minute grid, with the same floor.
"""

from __future__ import annotations

import zlib

import numpy as np
from numpy.typing import ArrayLike

from revpred.errors import PriceDataError, RevPredError
from revpred.features import HISTORY_S, minute_prices
from spotmarket.prices import PriceSeries, to_timestamp

HORIZON_S = 3600.0
TRIM_FRACTION = 0.2
PRICE_TICK_USD = 1e-4
#: Tributary / paper inference rule: b = price + U[DELTA_LOW, DELTA_HIGH] (decision D1).
DELTA_LOW_USD = 1e-5
DELTA_HIGH_USD = 0.2
VARIATIONS = ("events", "grid")


def trimmed_mean(values: ArrayLike, trim: float = TRIM_FRACTION) -> float:
    """Mean after dropping ``floor(trim * n)`` smallest and as many largest values (Algorithm 2, lines 3-5).

    Parameters
    ----------
    values : array of shape (n,)
    trim : float in [0, 0.5)

    Returns
    -------
    float
        ``nan`` for an empty input.
    """
    v = np.sort(np.asarray(values, dtype=np.float64))
    n = v.size
    if n == 0:
        return float("nan")
    c = int(np.floor(trim * n))
    return float(v[c : n - c].mean())


def _row_trimmed_means(padded: np.ndarray, counts: np.ndarray, trim: float) -> np.ndarray:
    """Trimmed mean of each row's first ``counts[i]`` values (rest are padding). Shape (n,)."""
    v = np.sort(np.where(np.arange(padded.shape[1])[None, :] < counts[:, None], padded, np.inf), axis=1)
    c = np.floor(trim * counts).astype(np.int64)
    col = np.arange(v.shape[1])[None, :]
    keep = (col >= c[:, None]) & (col < (counts - c)[:, None])
    total = np.where(keep, v, 0.0).sum(axis=1)
    k = keep.sum(axis=1)
    return np.where(k > 0, total / np.maximum(k, 1), 0.0)


def price_variation(series: PriceSeries, times_s: ArrayLike, *, variations: str = "events",
                    method: str = "ffill", trim: float = TRIM_FRACTION) -> np.ndarray:
    """Trimmed mean absolute price variation over the hour before each t (Algorithm 2, lines 1-5).

    Parameters
    ----------
    series : PriceSeries
    times_s : array of shape (n,)
        Decision times, seconds since the epoch (UTC).
    variations : {"events", "grid"}
        ``events``: differences between consecutive raw records in ``(t - 60 min, t]`` [I, D4];
        ``grid``: the 60 first differences of the minute grid ``P(t - 60), ..., P(t)`` (literal).
    method : {"ffill", "linear"}
        Grid method for ``variations="grid"``.
    trim : float
        Fraction dropped from each end.

    Returns
    -------
    delta : ndarray of shape (n,)
        USD per instance-hour, >= 0, **before** the tick floor (0 for an hour without variation).
    """
    t = np.asarray(times_s, dtype=np.float64)
    if variations == "grid":
        w = minute_prices(series, t, method)[:, -61:]
        d = np.abs(np.diff(w, axis=1))
        return _row_trimmed_means(d, np.full(t.size, d.shape[1]), trim)
    if variations != "events":
        raise RevPredError(f"variations {variations!r} is unknown; use one of {VARIATIONS}")
    if t.size and (t.min() - HORIZON_S < series.start_s or t.max() > series.end_s):
        raise PriceDataError(f"market {series.market}: Algorithm 2 needs the hour before every t inside the history")
    i0 = np.searchsorted(series.times_s, t - HORIZON_S, side="right") - 1  # record in force at t - 60 min
    i1 = np.searchsorted(series.times_s, t, side="right") - 1  # record in force at t
    counts = i1 - i0
    width = int(counts.max()) if counts.size else 0
    if width == 0:
        return np.zeros(t.size)
    cols = np.arange(1, width + 1)[None, :]
    j = np.minimum(i0[:, None] + cols, series.prices.size - 1)
    diffs = np.abs(series.prices[j] - series.prices[j - 1])
    # drop records that repeat the previous price: they are not change events
    is_change = (cols <= counts[:, None]) & (diffs > 0)
    order = np.argsort(~is_change, axis=1, kind="stable")
    packed = np.take_along_axis(diffs, order, axis=1)
    return _row_trimmed_means(packed, is_change.sum(axis=1), trim)


def alg2_max_prices(series: PriceSeries, times_s: ArrayLike, *, variations: str = "events", method: str = "ffill",
                    floor_usd: float = PRICE_TICK_USD, trim: float = TRIM_FRACTION) -> np.ndarray:
    """Training max prices by Algorithm 2: ``b = price(t) + max(trimmed mean variation, floor)``.

    Parameters
    ----------
    series : PriceSeries
    times_s : array of shape (n,)
        Decision times, seconds since the epoch (UTC).
    variations, method, trim
        See :func:`price_variation`.
    floor_usd : float, default=0.0001
        Smallest delta, USD/hour [I, D4: the price tick].

    Returns
    -------
    b : ndarray of shape (n,)
        USD per instance-hour; ``price(t)`` is the step-function price at t.
    """
    t = np.asarray(times_s, dtype=np.float64)
    delta = np.maximum(price_variation(series, t, variations=variations, method=method, trim=trim), floor_usd)
    return np.asarray(series.price_at(t), dtype=np.float64) + delta


def market_seed(seed: int, market: object) -> int:
    """Deterministic per-market seed from the run seed and the market name (``str(market)``): an int in [0, 2**31 - 1),
    the seed of the market's random max-price draws (:func:`random_max_prices`) and of its model's training."""
    return (int(seed) * 1_000_003 + zlib.crc32(str(market).encode())) % (2**31 - 1)


def random_max_prices(series: PriceSeries, times_s: ArrayLike, rng: np.random.Generator,
                      low_usd: float = DELTA_LOW_USD, high_usd: float = DELTA_HIGH_USD) -> np.ndarray:
    """Tributary / inference max prices: ``b = price(t) + U[low, high]`` (decision D1), seeded.

    Returns
    -------
    b : ndarray of shape (n,), USD per instance-hour.
    """
    t = np.asarray(times_s, dtype=np.float64)
    return np.asarray(series.price_at(t), dtype=np.float64) + rng.uniform(low_usd, high_usd, size=t.size)


def revocation_labels(series: PriceSeries, times_s: ArrayLike, max_prices_usd_per_hour: ArrayLike,
                      horizon_s: float = HORIZON_S) -> np.ndarray:
    """``y = 1`` iff the price exceeds b at some record in ``(t, t + horizon]`` (the paper's RevPred labels).

    Parameters
    ----------
    series : PriceSeries
    times_s : array of shape (n,)
        Decision times, seconds since the epoch (UTC).
    max_prices_usd_per_hour : array of shape (n,)
    horizon_s : float, default=3600

    Returns
    -------
    y : ndarray of shape (n,), int64 in {0, 1}

    Raises
    ------
    PriceDataError
        If ``t + horizon`` is after the end of the history (the label would be unknown).
    """
    t = np.asarray(times_s, dtype=np.float64)
    if t.size and t.max() + horizon_s > series.end_s:
        raise PriceDataError(
            f"market {series.market}: label of {to_timestamp(t.max())} needs prices up to "
            f"{to_timestamp(t.max() + horizon_s)}, after the end of the history ({to_timestamp(series.end_s)})"
        )
    first = np.asarray(series.next_above(t, max_prices_usd_per_hour), dtype=np.float64)
    return (first <= t + horizon_s).astype(np.int64)


def max_rise(series: PriceSeries, times_s: ArrayLike, horizon_s: float = HORIZON_S) -> np.ndarray:
    """Largest rise over the current price in ``(t, t + horizon]``: ``max record price - price(t)``.

    ``y = 1`` iff ``max_rise > b - price(t)``, so this gives the labels of every max price at once (used
    by the empirical-rate baseline). ``-inf`` where no record falls in the horizon.

    Returns
    -------
    rise : ndarray of shape (n,), USD per instance-hour.
    """
    t = np.asarray(times_s, dtype=np.float64)
    if t.size and t.max() + horizon_s > series.end_s:
        raise PriceDataError(f"market {series.market}: max rise needs prices up to t + {horizon_s:.0f} s")
    lo = np.searchsorted(series.times_s, t, side="right")  # first record strictly after t
    hi = np.searchsorted(series.times_s, t + horizon_s, side="right")  # one past the last record <= t + h
    out = np.full(t.size, -np.inf)
    nonempty = hi > lo
    if nonempty.any():
        starts = np.stack([lo[nonempty], hi[nonempty]], axis=1).ravel()
        p = np.append(series.prices, -np.inf)  # sentinel so hi == n is a valid reduceat index
        out[nonempty] = np.maximum.reduceat(p, starts)[::2]
    return out - np.asarray(series.price_at(t), dtype=np.float64)


def sample_times(series: PriceSeries, start_s: float, end_s: float, stride_min: int = 5,
                 horizon_s: float = HORIZON_S) -> np.ndarray:
    """Whole-minute decision times in a window, every ``stride_min`` minutes.

    A sample at t needs 118 minutes of history before it (inputs, which may lie before ``start_s``) and
    its label horizon inside the window: ``max(start, series start + 118 min) <= t <= end - horizon``.
    So labels of a training window never look into the test window that follows it.

    Returns
    -------
    times_s : ndarray of shape (n,), seconds since the epoch; empty if the window is too short.
    """
    if stride_min < 1:
        raise RevPredError(f"stride is {stride_min} minutes, but must be >= 1")
    lo = max(float(start_s), series.start_s + HISTORY_S)
    hi = min(float(end_s), series.end_s) - horizon_s
    first = np.ceil(lo / 60.0) * 60.0
    if hi < first:
        return np.empty(0)
    step = 60.0 * stride_min
    return first + step * np.arange(int(np.floor((hi - first) / step + 1e-9)) + 1)


def class_weights(y: ArrayLike) -> tuple[float, float]:
    """Paper class weights (RevPred's training): ``w_neg = r_p``, ``w_pos = r_n``, rescaled to mean 1.

    [R] Inverse-frequency weighting. [I] The pair is rescaled by ``1 / (2 r_p r_n)`` so the average sample
    weight is 1 (same minimiser, same Eq 3 correction, since only the ratio matters). With one class only
    both weights are 1.

    Returns
    -------
    (w_neg, w_pos) : tuple of float
    """
    y = np.asarray(y)
    if y.size == 0:
        raise RevPredError("no training labels")
    r_p = float(np.mean(y == 1))
    r_n = 1.0 - r_p
    if r_p in (0.0, 1.0):
        return 1.0, 1.0
    norm = 2.0 * r_p * r_n
    return r_p / norm, r_n / norm
