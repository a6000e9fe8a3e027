"""Features of a (market, decision time t, max price b) query for the calibrated predictor (decision P1).

Every feature reads only prices recorded at or before t (no leakage). With ``delta = b - price(t)``
(floored at :data:`MIN_DELTA_USD`), the columns (:data:`FEATURES`) are:

====================  ========================================================================  =========
column                meaning                                                                    in b
====================  ========================================================================  =========
``log_rel_delta``     ``log(delta / price(t))``                                                  up
``log_delta``         ``log(delta)``, USD/h                                                      up
``cross_day``         share of the past day's hours whose price rose by more than delta         down
``cross_week``        the same over the past week                                                down
``headroom_day``      ``log(b / highest price of the past day)``                                 up
``headroom_week``     ``log(b / highest price of the past week)``                                up
``headroom_ever``     ``log(b / highest price ever recorded up to t)``                           up
``b_over_on_demand``  ``log(b / on-demand price)`` (NaN without on-demand prices)                up
``price_vs_week``     ``log(price(t) / mean of the past week's 10-minute prices)``               -
``changes_hour``      price records in ``(t - 1 h, t]``                                          -
``changes_day``       price records in ``(t - 1 day, t]``                                        -
``log_since_change``  ``log(1 + seconds since the last price record)``                           -
``instance_type``     category code (NaN: unknown type)                                          -
``zone``              category code (NaN: unknown zone)                                          -
====================  ========================================================================  =========

Extra columns ("sharper" short-window features; opt-in through a named feature set, :data:`FEATURE_SETS`):

====================  ========================================================================  =========
column                meaning                                                                    in b
====================  ========================================================================  =========
``cross_3h``          share of the past 3 hours' grid hours whose price rose by more than delta  down
``cross_6h``          the same over the past 6 hours                                             down
``rise_hour_rel``     ``log((r + 1e-6) / delta)``, r = largest rise over price(t - 1 h) within   down
                      ``(t - 1 h, t]`` (0 when none)
``log_since_rise``    ``log(1 + min(t - s, 1 week))``, s = start of the latest grid hour that    up
                      ended by t and rose by more than delta (1 week when none in the history)
``hour_sin/cos``      ``sin/cos(2 pi hour-of-day / 24)`` (UTC)                                   -
``dow_sin/cos``       ``sin/cos(2 pi day-of-week / 7)`` (UTC, continuous)                        -
====================  ========================================================================  =========

"Hours whose price rose by more than delta": on a grid ``s = k * 600 s`` the largest rise over the
price at s within ``(s, s + 1 h]`` (:func:`revpred.labels.max_rise`), taken only for ``s + 1 h <= t``.
For any delta the share is read from cumulative counts on a fixed log grid of deltas (which holds the
ladder's deltas exactly) and interpolated linearly in ``log delta`` between grid points, so it never
increases with b. Every "up" column never decreases and every "down" column never increases when only
b increases; :data:`MONOTONE_CST` makes the model's p non-increasing in each of them, hence in b.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from revpred.errors import RevPredError
from revpred.labels import HORIZON_S, max_rise
from revpred.ladder import check_ladder, on_demand_of
from revpred.queries import group_by_market
from spotmarket import HOUR_S
from spotmarket.prices import Market, PriceHistory

__all__ = ["FEATURES", "FEATURE_SETS", "GRID_S", "MIN_DELTA_USD", "MONOTONE_CST", "CATEGORICAL", "LadderFeatures",
           "feature_set"]

FEATURES = ("log_rel_delta", "log_delta", "cross_day", "cross_week", "headroom_day", "headroom_week",
            "headroom_ever", "b_over_on_demand", "price_vs_week", "changes_hour", "changes_day",
            "log_since_change", "instance_type", "zone")
#: Sign of the required monotone effect of each feature on p (scikit-learn ``monotonic_cst``).
MONOTONE_CST = (-1, -1, 1, 1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0)
CATEGORICAL = (12, 13)
#: Short-window columns and their monotone signs ("sharper" features; docs/design/revpred.md).
SHORT = ("cross_3h", "cross_6h", "rise_hour_rel", "log_since_rise")
#: Calendar columns (unconstrained).
CALENDAR = ("hour_sin", "hour_cos", "dow_sin", "dow_cos")
_SIGN = {**dict(zip(FEATURES, MONOTONE_CST)), "cross_3h": 1, "cross_6h": 1, "rise_hour_rel": 1, "log_since_rise": -1,
         **{c: 0 for c in CALENDAR}}
#: Named feature sets; ``"base"`` (:data:`FEATURES`) is the default everywhere.
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "base": FEATURES, "short": FEATURES + SHORT, "calendar": FEATURES + CALENDAR,
    "short+calendar": FEATURES + SHORT + CALENDAR}
#: Spacing of the rise grid, seconds.
GRID_S = 600.0
#: Smallest delta the features see, USD/hour (b = price gives delta 0).
MIN_DELTA_USD = 1e-6
DAY_S = 86400.0
WEEK_S = 7 * DAY_S
_LOG_GRID = np.logspace(-6, 2, 49)  # 1e-6 .. 100 USD/h, 6 points per decade


def feature_set(name: str) -> tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]:
    """(columns, monotone signs, categorical column positions) of a named set of :data:`FEATURE_SETS`.

    Parameters
    ----------
    name : str
        A key of :data:`FEATURE_SETS`, e.g. ``"base"``.

    Returns
    -------
    columns : tuple of str
    monotone : tuple of int
        -1, 0 or 1 per column (scikit-learn ``monotonic_cst``).
    categorical : tuple of int
        Positions of the categorical columns.

    Raises
    ------
    RevPredError
        On an unknown name.
    """
    if name not in FEATURE_SETS:
        raise RevPredError(f"feature set is {name!r}, but must be one of {', '.join(FEATURE_SETS)}")
    cols = FEATURE_SETS[name]
    return cols, tuple(_SIGN[c] for c in cols), tuple(i for i, c in enumerate(cols) if c in ("instance_type", "zone"))


_lookup_set = feature_set  # LadderFeatures' parameter of the same name shadows it


class _MarketTables:
    """Per-market precomputed arrays on the 10-minute grid (built once, on first use)."""

    def __init__(self, series, deltas: np.ndarray):
        self.series = series
        k0 = int(np.ceil(series.start_s / GRID_S))
        k1 = int(np.floor((series.end_s - HORIZON_S) / GRID_S))
        self.k0 = k0
        s = GRID_S * np.arange(k0, max(k1, k0 - 1) + 1)
        self.s = s
        rise = max_rise(series, s) if s.size else np.empty(0)
        price_s = np.asarray(series.price_at(s), dtype=np.float64) if s.size else np.empty(0)
        self.top = price_s + rise  # highest record price in (s, s + 1 h] (-inf when none)
        self.top = np.maximum(self.top, price_s)  # price in force over the hour is at least price(s)
        self.deltas = deltas
        # cum[g, i] = number of grid hours j < i with rise_j > deltas[g]
        above = rise[None, :] > deltas[:, None]
        self.cum = np.concatenate([np.zeros((deltas.size, 1)), np.cumsum(above, axis=1)], axis=1)
        self._above = above
        self._last: np.ndarray | None = None
        self.cum_price = np.concatenate([[0.0], np.cumsum(price_s)])
        self.cummax = np.maximum.accumulate(series.prices)
        self._rolling: dict[int, np.ndarray] = {}

    def window(self, t: np.ndarray, width_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Grid positions [lo, hi) of the hours fully observed by t within ``width_s`` before t."""
        n = self.s.size
        hi = np.clip(np.floor((t - HORIZON_S) / GRID_S).astype(np.int64) - self.k0 + 1, 0, n)
        lo = np.clip(np.ceil((t - width_s) / GRID_S).astype(np.int64) - self.k0, 0, n)
        return np.minimum(lo, hi), hi

    def cross_share(self, t: np.ndarray, delta: np.ndarray, width_s: float) -> np.ndarray:
        """Share of the window's hours with rise > delta (NaN for an empty window), non-increasing in delta."""
        lo, hi = self.window(t, width_s)
        counts = self.cum[:, hi] - self.cum[:, lo]  # (G, n)
        g, w = self._interp(delta)
        cols = np.arange(t.size)
        c = (1.0 - w) * counts[g, cols] + w * counts[g + 1, cols]
        n = (hi - lo).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, c / n, np.nan)

    def _interp(self, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Grid row g and weight w with log delta = (1 - w) log deltas[g] + w log deltas[g + 1] (clipped)."""
        x = np.log(np.clip(delta, self.deltas[0], self.deltas[-1]))
        lg = np.log(self.deltas)
        g = np.clip(np.searchsorted(lg, x, side="right") - 1, 0, lg.size - 2)
        return g, (x - lg[g]) / (lg[g + 1] - lg[g])

    def log_since_rise(self, t: np.ndarray, delta: np.ndarray, cap_s: float = WEEK_S) -> np.ndarray:
        """``log(1 + min(t - s, cap))`` for the latest grid hour s ended by t with rise > delta; non-decreasing in delta."""
        if self._last is None:  # last[g, i] = latest grid position j < i with rise_j > deltas[g], -1 if none
            pos = np.where(self._above, np.arange(self.s.size)[None, :], -1)
            self._last = np.concatenate([np.full((self.deltas.size, 1), -1), np.maximum.accumulate(pos, axis=1)],
                                        axis=1) if self.s.size else np.full((self.deltas.size, 1), -1)
        _, hi = self.window(t, cap_s)
        g, w = self._interp(delta)
        cols = np.arange(t.size)

        def at(rows):
            j = self._last[rows, hi[cols]]
            since = np.where(j >= 0, t - self.s[np.clip(j, 0, None)] if self.s.size else cap_s, cap_s)
            return np.log1p(np.clip(since, 0.0, cap_s))

        return (1.0 - w) * at(g) + w * at(g + 1)

    def window_max(self, t: np.ndarray, width_s: float) -> np.ndarray:
        """Highest price seen in the window before t (at least the current price); a rolling maximum."""
        w = int((width_s - HORIZON_S) / GRID_S) + 1
        if w not in self._rolling:
            self._rolling[w] = pd.Series(self.top).rolling(w, min_periods=1).max().to_numpy()
        lo, hi = self.window(t, width_s)
        out = np.asarray(self.series.price_at(t), dtype=np.float64)
        seen = self._rolling[w][np.clip(hi - 1, 0, None)] if self.top.size else np.full(t.size, -np.inf)
        return np.where(hi > lo, np.maximum(out, seen), out)

    def window_mean_price(self, t: np.ndarray, width_s: float) -> np.ndarray:
        lo, hi = self.window(t, width_s)
        n = (hi - lo).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, (self.cum_price[hi] - self.cum_price[lo]) / n, np.nan)


class LadderFeatures:
    """Feature rows (:data:`FEATURES`) of revocation queries on one price history.

    Parameters
    ----------
    history : PriceHistory
        Spot prices, USD per instance-hour. Features at t read only records at or before t.
    ladder : sequence of float
        The provisioner's deltas (USD/hour); added to the interpolation grid so their crossing shares
        are exact.
    on_demand : mapping Market (or str) -> float, optional
        On-demand prices, USD/hour (column ``b_over_on_demand``; NaN without).
    instance_types, zones : sequence of str
        Category codes (position in the sequence); anything else is NaN (unknown).
    feature_set : str, default "base"
        A name of :data:`FEATURE_SETS`; sets :attr:`columns`, :attr:`monotone_cst` and :attr:`categorical`.

    Raises
    ------
    RevPredError
        On an unknown feature set or a bad ladder.
    """

    def __init__(self, history: PriceHistory, ladder: Sequence[float], on_demand: Mapping | None,
                 instance_types: Sequence[str], zones: Sequence[str], feature_set: str = "base"):
        self.columns, self.monotone_cst, self.categorical = _lookup_set(feature_set)
        self.feature_set = feature_set
        self.history = history
        self.on_demand = on_demand
        self.deltas = np.unique(np.concatenate([_LOG_GRID, check_ladder(ladder)]))
        self.type_code = {x: i for i, x in enumerate(instance_types)}
        self.zone_code = {x: i for i, x in enumerate(zones)}
        self._tables: dict[Market, _MarketTables] = {}

    def tables(self, market: Market) -> _MarketTables:
        """Per-market arrays the features are read from (built once per market, then cached).

        Parameters
        ----------
        market : Market

        Returns
        -------
        _MarketTables
            The market's series and its arrays precomputed on the 10-minute grid.
        """
        if market not in self._tables:
            self._tables[market] = _MarketTables(self.history[market], self.deltas)
        return self._tables[market]

    def ceiling(self, market: Market, t: np.ndarray) -> np.ndarray:
        """Highest price recorded at or before each t, USD/hour, shape (n,).

        Parameters
        ----------
        market : Market
        t : ndarray of shape (n,)
            Decision times, seconds since the epoch (UTC).

        Returns
        -------
        ndarray of shape (n,)
            USD per instance-hour.
        """
        tab = self.tables(market)
        idx = np.searchsorted(tab.series.times_s, t, side="right") - 1
        return tab.cummax[np.clip(idx, 0, None)]

    def transform(self, markets: Sequence[Market], t: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Feature matrix of shape (n, len(self.columns)) for queries (markets (n,), t (n,) s, b (n,) USD/h).

        Parameters
        ----------
        markets : sequence of Market, length n
        t : ndarray of shape (n,)
            Decision times, seconds since the epoch (UTC).
        b : ndarray of shape (n,)
            Max prices, USD per instance-hour.

        Returns
        -------
        ndarray of shape (n, len(columns))
        """
        X = np.empty((len(markets), len(self.columns)))
        for m, idx in group_by_market(markets).items():
            X[idx] = self._market_rows(m, t[idx], b[idx])
        return X

    def _market_rows(self, m: Market, t: np.ndarray, b: np.ndarray) -> np.ndarray:
        tab = self.tables(m)
        series = tab.series
        price = np.asarray(series.price_at(t), dtype=np.float64)
        delta = np.maximum(b - price, MIN_DELTA_USD)
        bpos = np.maximum(b, MIN_DELTA_USD)
        od = on_demand_of(self.on_demand, m)
        times = series.times_s
        i_t = np.searchsorted(times, t, side="right")
        last = times[np.clip(i_t - 1, 0, None)]
        cols = {
            "log_rel_delta": lambda: np.log(delta / price),
            "log_delta": lambda: np.log(delta),
            "cross_day": lambda: tab.cross_share(t, delta, DAY_S),
            "cross_week": lambda: tab.cross_share(t, delta, WEEK_S),
            "headroom_day": lambda: np.log(bpos / tab.window_max(t, DAY_S)),
            "headroom_week": lambda: np.log(bpos / tab.window_max(t, WEEK_S)),
            "headroom_ever": lambda: np.log(bpos / self.ceiling(m, t)),
            "b_over_on_demand": lambda: np.log(bpos / od) if od else np.full(t.size, np.nan),
            "price_vs_week": lambda: np.log(price / tab.window_mean_price(t, WEEK_S)),
            "changes_hour": lambda: (i_t - np.searchsorted(times, t - HORIZON_S, side="right")).astype(np.float64),
            "changes_day": lambda: (i_t - np.searchsorted(times, t - DAY_S, side="right")).astype(np.float64),
            "log_since_change": lambda: np.log1p(t - last),
            "instance_type": lambda: np.full(t.size, self.type_code.get(m.instance_type, np.nan), dtype=np.float64),
            "zone": lambda: np.full(t.size, self.zone_code.get(m.availability_zone, np.nan), dtype=np.float64),
            "cross_3h": lambda: tab.cross_share(t, delta, 3 * HOUR_S),
            "cross_6h": lambda: tab.cross_share(t, delta, 6 * HOUR_S),
            "rise_hour_rel": lambda: np.log((_past_hour_rise(series, t) + MIN_DELTA_USD) / delta),
            "log_since_rise": lambda: tab.log_since_rise(t, delta),
            "hour_sin": lambda: np.sin(2 * np.pi * (t % DAY_S) / DAY_S),
            "hour_cos": lambda: np.cos(2 * np.pi * (t % DAY_S) / DAY_S),
            "dow_sin": lambda: np.sin(2 * np.pi * _week_phase(t)),
            "dow_cos": lambda: np.cos(2 * np.pi * _week_phase(t)),
        }
        return np.column_stack([cols[c]() for c in self.columns])


def _past_hour_rise(series, t: np.ndarray) -> np.ndarray:
    """Largest rise over ``price(t - 1 h)`` of the records in ``(t - 1 h, t]``, USD/h, shape (n,).

    0 when no record rose (or none fell in the hour), and when ``t - 1 h`` precedes the series. Reads only
    records at or before t (:func:`revpred.labels.max_rise` from ``t - 1 h``).
    """
    out = np.zeros(t.size)
    ok = t - HOUR_S >= series.start_s
    if ok.any():
        out[ok] = np.maximum(max_rise(series, t[ok] - HOUR_S, HOUR_S), 0.0)
    return out


def _week_phase(t: np.ndarray) -> np.ndarray:
    """Position in the UTC week in [0, 1), Monday 00:00 = 0 (1970-01-01 was a Thursday)."""
    return ((t / DAY_S + 3.0) % 7.0) / 7.0
