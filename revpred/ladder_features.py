"""Features of a (market, decision time t, max price b) query for the calibrated predictor (issue 12).

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

from revpred.labels import HORIZON_S, max_rise
from revpred.ladder import check_ladder, on_demand_of
from revpred.queries import group_by_market
from spotmarket.prices import Market, PriceHistory

__all__ = ["FEATURES", "GRID_S", "MIN_DELTA_USD", "MONOTONE_CST", "CATEGORICAL", "LadderFeatures"]

FEATURES = ("log_rel_delta", "log_delta", "cross_day", "cross_week", "headroom_day", "headroom_week",
            "headroom_ever", "b_over_on_demand", "price_vs_week", "changes_hour", "changes_day",
            "log_since_change", "instance_type", "zone")
#: Sign of the required monotone effect of each feature on p (scikit-learn ``monotonic_cst``).
MONOTONE_CST = (-1, -1, 1, 1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0)
CATEGORICAL = (12, 13)
#: Spacing of the rise grid, seconds.
GRID_S = 600.0
#: Smallest delta the features see, USD/hour (b = price gives delta 0).
MIN_DELTA_USD = 1e-6
DAY_S = 86400.0
WEEK_S = 7 * DAY_S
_LOG_GRID = np.logspace(-6, 2, 49)  # 1e-6 .. 100 USD/h, 6 points per decade


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
        x = np.log(np.clip(delta, self.deltas[0], self.deltas[-1]))
        lg = np.log(self.deltas)
        g = np.clip(np.searchsorted(lg, x, side="right") - 1, 0, lg.size - 2)
        w = (x - lg[g]) / (lg[g + 1] - lg[g])
        cols = np.arange(t.size)
        c = (1.0 - w) * counts[g, cols] + w * counts[g + 1, cols]
        n = (hi - lo).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, c / n, np.nan)

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
    """

    def __init__(self, history: PriceHistory, ladder: Sequence[float], on_demand: Mapping | None,
                 instance_types: Sequence[str], zones: Sequence[str]):
        self.history = history
        self.on_demand = on_demand
        self.deltas = np.unique(np.concatenate([_LOG_GRID, check_ladder(ladder)]))
        self.type_code = {x: i for i, x in enumerate(instance_types)}
        self.zone_code = {x: i for i, x in enumerate(zones)}
        self._tables: dict[Market, _MarketTables] = {}

    def tables(self, market: Market) -> _MarketTables:
        if market not in self._tables:
            self._tables[market] = _MarketTables(self.history[market], self.deltas)
        return self._tables[market]

    def ceiling(self, market: Market, t: np.ndarray) -> np.ndarray:
        """Highest price recorded at or before each t, USD/hour, shape (n,)."""
        tab = self.tables(market)
        idx = np.searchsorted(tab.series.times_s, t, side="right") - 1
        return tab.cummax[np.clip(idx, 0, None)]

    def transform(self, markets: Sequence[Market], t: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Feature matrix of shape (n, len(FEATURES)) for queries (markets (n,), t (n,) s, b (n,) USD/h)."""
        X = np.empty((len(markets), len(FEATURES)))
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
        cols = [
            np.log(delta / price),
            np.log(delta),
            tab.cross_share(t, delta, DAY_S),
            tab.cross_share(t, delta, WEEK_S),
            np.log(bpos / tab.window_max(t, DAY_S)),
            np.log(bpos / tab.window_max(t, WEEK_S)),
            np.log(bpos / self.ceiling(m, t)),
            np.log(bpos / od) if od else np.full(t.size, np.nan),
            np.log(price / tab.window_mean_price(t, WEEK_S)),
            (i_t - np.searchsorted(times, t - HORIZON_S, side="right")).astype(np.float64),
            (i_t - np.searchsorted(times, t - DAY_S, side="right")).astype(np.float64),
            np.log1p(t - last),
            np.full(t.size, self.type_code.get(m.instance_type, np.nan), dtype=np.float64),
            np.full(t.size, self.zone_code.get(m.availability_zone, np.nan), dtype=np.float64),
        ]
        return np.column_stack(cols)
