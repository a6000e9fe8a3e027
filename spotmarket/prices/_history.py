"""Step-function spot price series and the vectorised queries every other part needs.

A spot price record says "from this time on, the price is p" (event-based, not a regular grid). So the
price at t is the last record at or before t; before a market's first record it is unknown, and after the
end of the recorded history (``end_s``) it is unknown too. Both raise :class:`PriceDataError`, never a guess.

Engine time is float seconds since the Unix epoch, UTC (``*_s``); prices are USD per instance-hour.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from spotmarket.errors import PriceDataError
from spotmarket.prices._market import Market

CANONICAL_COLUMNS = [
    "timestamp",
    "region",
    "availability_zone",
    "instance_type",
    "product_description",
    "price",
]


def to_seconds(t: object) -> float:
    """UTC timestamp (str, datetime, pandas.Timestamp) or seconds -> float seconds since the epoch.

    A timestamp without a time zone (``"2015-06-01"``, ``"2015-06-01 12:00"``) is read as UTC, as AWS
    reports every time in UTC.

    Parameters
    ----------
    t : str, datetime, pandas.Timestamp, int or float
        A timestamp (ISO-8601, e.g. ``"2015-05-01T00:00Z"``) or seconds since the epoch.

    Returns
    -------
    float
        Seconds since the Unix epoch, UTC.

    Raises
    ------
    PriceDataError
        If ``t`` is not finite or not a date and time.
    """
    if isinstance(t, (int, float, np.integer, np.floating)):
        if not np.isfinite(t):
            raise PriceDataError(f"time {t!r} is not finite; give seconds since the epoch or a UTC timestamp")
        return float(t)
    try:
        ts = pd.Timestamp(t)
    except (ValueError, TypeError, OverflowError):
        raise PriceDataError(f"timestamp {t!r} is not a date and time; use UTC ISO-8601, e.g. '2015-05-01T00:00Z'") from None
    if ts is pd.NaT:
        raise PriceDataError(f"timestamp {t!r} is not a date and time; use UTC ISO-8601, e.g. '2015-05-01T00:00Z'")
    if ts.tzinfo is None:
        ts = ts.tz_localize("UTC")  # naive = UTC, as AWS reports times
    return ts.value / 1e9


def to_timestamp(t_s: float) -> pd.Timestamp:
    """Float seconds since the epoch -> tz-aware UTC ``pandas.Timestamp``.

    Parameters
    ----------
    t_s : float
        Seconds since the Unix epoch, UTC; rounded to the nanosecond.

    Returns
    -------
    pandas.Timestamp
        The same instant, time zone UTC.
    """
    return pd.Timestamp(round(float(t_s) * 1e9), unit="ns", tz="UTC")


class PriceSeries:
    """One market's price history as a step function.

    Parameters
    ----------
    market : Market
    times_s : array of shape (n,)
        Record times, seconds since the epoch (UTC), strictly increasing.
    prices_usd_per_hour : array of shape (n,)
        Price in force from each record time on.
    end_s : float
        End of the recorded history (>= last record). Queries after it raise PriceDataError.

    Raises
    ------
    PriceDataError
        If the arrays are empty or of different lengths, the times are not strictly increasing, or ``end_s``
        is before the last record.
    """

    __slots__ = ("market", "times_s", "prices", "end_s", "_cum", "_sparse", "_changed")

    def __init__(self, market: Market, times_s: ArrayLike, prices_usd_per_hour: ArrayLike, end_s: float):
        t = np.asarray(times_s, dtype=np.float64)
        p = np.asarray(prices_usd_per_hour, dtype=np.float64)
        if t.ndim != 1 or t.shape != p.shape or t.size == 0:
            raise PriceDataError(f"market {market}: need equal-length, non-empty time and price arrays")
        if np.any(np.diff(t) <= 0):
            raise PriceDataError(f"market {market}: record times must be strictly increasing")
        if end_s < t[-1]:
            raise PriceDataError(f"market {market}: end_s {end_s} is before the last record {t[-1]}")
        self.market = market
        self.times_s = t
        self.prices = p
        self.end_s = float(end_s)
        # cumulative integral of price over time at each record: USD*s/h
        self._cum = np.concatenate([[0.0], np.cumsum(p[:-1] * np.diff(t))])
        self._sparse: list[np.ndarray] | None = None
        self._changed: np.ndarray | None = None

    def __len__(self) -> int:
        return self.times_s.size

    def __repr__(self) -> str:
        return f"PriceSeries({self.market}, {len(self)} records, {to_timestamp(self.start_s)} .. {to_timestamp(self.end_s)})"

    @property
    def start_s(self) -> float:
        """Time of the first record: the price is unknown before it."""
        return float(self.times_s[0])

    @property
    def n_changes(self) -> int:
        """Number of records whose price differs from the previous record's."""
        return int(np.count_nonzero(np.diff(self.prices)))

    # -- point queries --------------------------------------------------------------------------------
    def _index(self, t_s: np.ndarray) -> np.ndarray:
        outside = ~((t_s >= self.times_s[0]) & (t_s <= self.end_s))  # NaN is outside too
        if outside.any():
            bad = t_s[outside][0]
            raise PriceDataError(
                f"market {self.market}: price at {to_timestamp(bad) if np.isfinite(bad) else bad} is unknown; "
                f"the history covers {to_timestamp(self.start_s)} .. {to_timestamp(self.end_s)}"
            )
        return np.searchsorted(self.times_s, t_s, side="right") - 1

    def price_at(self, t_s: ArrayLike) -> np.ndarray | float:
        """Price in force at t (last record at or before t), USD per instance-hour.

        Parameters
        ----------
        t_s : float or array of shape (m,)

        Returns
        -------
        float or ndarray of shape (m,)

        Raises
        ------
        PriceDataError
            If any t is before the first record or after ``end_s``.
        """
        t = np.asarray(t_s, dtype=np.float64)
        out = self.prices[self._index(np.atleast_1d(t))]
        return float(out[0]) if t.ndim == 0 else out

    def integral(self, t_s: ArrayLike) -> np.ndarray:
        """Integral of the price from the first record to t, in USD*s/h (divide by 3600 for USD).

        Parameters
        ----------
        t_s : float or array of shape (m,)
            Times, seconds since the epoch (UTC), within the history.

        Returns
        -------
        ndarray of shape (m,)
            USD·s/h per time (shape (1,) for a scalar).

        Raises
        ------
        PriceDataError
            If any t is before the first record or after ``end_s``.
        """
        t = np.atleast_1d(np.asarray(t_s, dtype=np.float64))
        i = self._index(t)
        return self._cum[i] + self.prices[i] * (t - self.times_s[i])

    def cost_usd(self, start_s: ArrayLike, end_s: ArrayLike) -> np.ndarray | float:
        """Exact per-second cost of running from start to end at the market price in force each second.

        Price changes during the run are integrated exactly. Shapes broadcast; scalar in, float out.

        Parameters
        ----------
        start_s, end_s : float or array
            Run bounds, seconds since the epoch (UTC), within the history; broadcast together.

        Returns
        -------
        float or ndarray of the broadcast shape
            Cost in USD of one instance over each run.

        Raises
        ------
        PriceDataError
            If a run ends before it starts or lies outside the history.
        """
        s, e = np.broadcast_arrays(np.asarray(start_s, dtype=float), np.asarray(end_s, dtype=float))
        if np.any(e < s):
            raise PriceDataError(f"market {self.market}: a run cannot end before it starts")
        out = (self.integral(e.ravel()) - self.integral(s.ravel())) / 3600.0
        return float(out[0]) if s.ndim == 0 else out.reshape(s.shape)

    def mean_price(self, start_s: ArrayLike, end_s: ArrayLike) -> np.ndarray | float:
        """Time-weighted mean price over [start, end], USD per instance-hour (Eq 1's P̄ with a 1 h window).

        ``start == end`` gives the price at that instant.

        Parameters
        ----------
        start_s, end_s : float or array
            Window bounds, seconds since the epoch (UTC), within the history; broadcast together.

        Returns
        -------
        float or ndarray of the broadcast shape
            Mean price, USD per instance-hour.

        Raises
        ------
        PriceDataError
            If a window ends before it starts or lies outside the history.
        """
        s, e = np.broadcast_arrays(np.asarray(start_s, dtype=float), np.asarray(end_s, dtype=float))
        flat_s, flat_e = s.ravel(), e.ravel()
        width = flat_e - flat_s
        if np.any(width < 0):
            raise PriceDataError(f"market {self.market}: mean price over a window that ends before it starts")
        area = self.integral(flat_e) - self.integral(flat_s)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(width > 0, area / np.where(width > 0, width, 1.0), self.prices[self._index(flat_s)])
        return float(out[0]) if s.ndim == 0 else out.reshape(s.shape)

    def changes_between(self, start_s: ArrayLike, end_s: ArrayLike) -> np.ndarray:
        """Number of records with start < time <= end whose price differs from the previous one.

        Parameters
        ----------
        start_s, end_s : float or array of shape (m,)
            Window bounds, seconds since the epoch (UTC).

        Returns
        -------
        ndarray of int, shape (m,)
            Price changes in each window (shape (1,) for scalars).
        """
        s = np.atleast_1d(np.asarray(start_s, dtype=float))
        e = np.atleast_1d(np.asarray(end_s, dtype=float))
        changed = self._changed_cumulative()
        i0 = np.searchsorted(self.times_s, s, side="right") - 1
        i1 = np.searchsorted(self.times_s, e, side="right") - 1
        return changed[np.maximum(i1, 0)] - changed[np.maximum(i0, 0)]  # changed[0] == 0

    def _changed_cumulative(self) -> np.ndarray:
        # changed[i]: price changes among records 1..i (computed once, then cached)
        if self._changed is None:
            self._changed = np.concatenate([[0], np.cumsum(np.diff(self.prices) != 0)])
        return self._changed

    # -- threshold queries ----------------------------------------------------------------------------
    def _sparse_table(self) -> list[np.ndarray]:
        if self._sparse is None:
            levels = [self.prices]
            width = 1
            while 2 * width <= self.prices.size:
                prev = levels[-1]
                levels.append(np.maximum(prev[:-width], prev[width:]))
                width *= 2
            self._sparse = levels
        return self._sparse

    def next_above(self, t_s: ArrayLike, max_price_usd_per_hour: ArrayLike) -> np.ndarray | float:
        """First record time strictly after t at which the price exceeds the max price b.

        The legacy (2017) revocation rule: an instance launched at t with max price b is revoked at the
        first time the market price rises above b (decision M1). Returns ``inf`` if that does not happen
        before ``end_s``. Vectorised: O(log n) per query with a sparse table of range maxima.

        Parameters
        ----------
        t_s : float or array of shape (m,)
        max_price_usd_per_hour : float or array of shape (m,)

        Returns
        -------
        float or ndarray of shape (m,)
            Seconds since the epoch, or ``inf``.
        """
        t, b = np.broadcast_arrays(np.asarray(t_s, dtype=float), np.asarray(max_price_usd_per_hour, dtype=float))
        flat_t, flat_b = t.ravel(), b.ravel()
        pos = self._index(flat_t) + 1  # first candidate record strictly after t
        n = self.prices.size
        table = self._sparse_table()
        for k in range(len(table) - 1, -1, -1):
            width = 1 << k
            ok = pos + width <= n
            idx = np.where(ok, pos, 0)
            level = table[k]
            jump = ok & (level[np.minimum(idx, level.size - 1)] <= flat_b)
            pos = np.where(jump, pos + width, pos)
        out = np.where(pos < n, self.times_s[np.minimum(pos, n - 1)], np.inf)
        return float(out[0]) if t.ndim == 0 else out.reshape(t.shape)

    # -- grids ----------------------------------------------------------------------------------------
    def minute_grid(self, start_s: float | None = None, end_s: float | None = None, method: str = "ffill") -> pd.Series:
        """Price on a one-minute grid, indexed by tz-aware UTC minute timestamps.

        Parameters
        ----------
        start_s, end_s : float, optional
            Grid bounds; default: the first whole minute at or after the first record, and ``end_s``.
        method : {"ffill", "linear"}
            ``ffill`` is the step function (use it for anything that decides a revocation or a bill);
            ``linear`` interpolates between records, the literal reading of the paper (decision D3), for
            RevPred experiments only.

        Returns
        -------
        pandas.Series of shape (n_minutes,)
            USD per instance-hour, named ``str(market)``, index ``timestamp`` (whole UTC minutes).

        Raises
        ------
        PriceDataError
            If the grid reaches outside [first record, ``end_s``] or the method is unknown.
        """
        lo = self.start_s if start_s is None else float(start_s)
        hi = self.end_s if end_s is None else float(end_s)
        grid = _minutes(lo, hi)
        if grid.size:
            self._index(grid[[0, -1]])  # bounds check: the grid is sorted
        if method == "ffill":
            values = self.prices[self._ffill_index(grid)]
        elif method == "linear":
            values = np.interp(grid, self.times_s, self.prices)
        else:
            raise PriceDataError(f"grid method {method!r} is unknown; use 'ffill' or 'linear'")
        return pd.Series(values, index=_minute_index(grid), name=str(self.market))

    def _ffill_index(self, grid: np.ndarray) -> np.ndarray:
        """Index of the record in force at each time of a sorted grid (-1 before the first record).

        Same answer as ``searchsorted(times_s, grid, side="right") - 1``, but it searches the (fewer)
        record times in the (longer) grid and fills forward: ~5x faster for a minute grid.
        """
        pos = np.searchsorted(grid, self.times_s, side="left")  # first grid point at or after each record
        last = np.ones(pos.size, dtype=bool)
        last[:-1] = pos[1:] != pos[:-1]  # of several records before one grid point, the last one counts
        marks = np.full(grid.size + 1, -1, dtype=np.int64)
        marks[pos[last]] = np.flatnonzero(last)
        return np.maximum.accumulate(marks[:-1])


def _minutes(lo_s: float, hi_s: float) -> np.ndarray:
    """Whole minutes in [lo, hi], seconds since the epoch (float, exact)."""
    return np.arange(np.ceil(lo_s / 60.0) * 60.0, np.floor(hi_s / 60.0) * 60.0 + 1.0, 60.0)


def _minute_index(grid_s: np.ndarray) -> pd.DatetimeIndex:
    ns = (grid_s.astype(np.int64) * 1_000_000_000).view("datetime64[ns]")
    return pd.DatetimeIndex(ns, name="timestamp").tz_localize("UTC")


def _number(x: object) -> float:
    """``x`` as a float, NaN when it is not a number (so every comparison with it is False)."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


#: Default shortest collection gap, seconds: no record in any market for this long is missing data
#: (:meth:`PriceHistory.collection_gaps`).
COLLECTION_GAP_S = 7200.0
#: A collection gap is also at least this many times the median interval between consecutive records of the markets, so
#: a file of few (or quiet) markets, whose silences of hours are ordinary calm, is not read as missing data.
GAP_MEDIAN_RATIO = 300.0


class PriceHistory:
    """All markets of a canonical price table, each as a :class:`PriceSeries`.

    Parameters
    ----------
    table : pandas.DataFrame
        Canonical layout (``CANONICAL_COLUMNS``): ``timestamp`` tz-aware UTC, ``price`` USD/hour.
    end : timestamp or float seconds, optional
        End of the recorded history; default: the last timestamp in the table (all markets share it,
        since a collector that stopped recording stopped for every market).

    Raises
    ------
    PriceDataError
        If the table lacks a canonical column, or holds several records of one market at one timestamp.

    Notes
    -----
    Several records of one market at the same timestamp are ambiguous and raise PriceDataError (exact
    duplicate rows must already have been dropped by the reader).
    """

    def __init__(self, table: pd.DataFrame, end: object | None = None):
        missing = [c for c in ("timestamp", "availability_zone", "instance_type", "product_description", "price") if c not in table.columns]
        if missing:
            raise PriceDataError(f"price table lacks columns {missing}")
        if table.empty:
            raise PriceDataError("price table is empty")
        self.table = table
        ts = table["timestamp"]
        times = ts.dt.tz_convert("UTC").astype("datetime64[ns, UTC]").array.asi8 / 1e9
        self.end_s = float(times.max()) if end is None else to_seconds(end)
        self._series: dict[Market, PriceSeries] = {}
        # group by market with integer codes and one sort (a pandas groupby loop is ~10x slower on 4,700 markets)
        codes, uniques = [], []
        for col in ("availability_zone", "instance_type", "product_description"):
            c, u = pd.factorize(table[col], sort=True)
            if (c < 0).any():
                raise PriceDataError(f"price table has a missing {col} in row {int(np.flatnonzero(c < 0)[0])}")
            codes.append(c)
            uniques.append(np.asarray(u, dtype=object))
        price = table["price"].to_numpy(dtype=float)
        order = np.lexsort((times, codes[2], codes[1], codes[0]))
        key = [c[order] for c in codes]
        t_sorted, p_sorted = times[order], price[order]
        new_market = np.ones(order.size, dtype=bool)
        new_market[1:] = (key[0][1:] != key[0][:-1]) | (key[1][1:] != key[1][:-1]) | (key[2][1:] != key[2][:-1])
        bounds = np.append(np.flatnonzero(new_market), order.size)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            market = Market(str(uniques[0][key[0][lo]]), str(uniques[1][key[1][lo]]), str(uniques[2][key[2][lo]]))
            t = t_sorted[lo:hi]
            same = np.flatnonzero(np.diff(t) == 0)
            if same.size:
                j = lo + same[0]
                what = "two different prices" if p_sorted[j] != p_sorted[j + 1] else "a duplicate record"
                raise PriceDataError(f"market {market}: {what} at {to_timestamp(t[same[0]])} "
                                     "(read the table with read_prices, which drops exact duplicates)")
            self._series[market] = PriceSeries(market, t, p_sorted[lo:hi], self.end_s)

    @property
    def markets(self) -> list[Market]:
        """Markets, sorted."""
        return sorted(self._series)

    def __contains__(self, market: object) -> bool:
        return market in self._series

    def __getitem__(self, market: Market | str) -> PriceSeries:
        key = Market.parse(market) if isinstance(market, str) else market
        try:
            return self._series[key]
        except KeyError:
            known = ", ".join(str(m) for m in self.markets[:5])
            raise PriceDataError(f"market {key} is not in the price data (known: {known}, ...)") from None

    def __iter__(self) -> Iterable[PriceSeries]:
        return iter(self._series[m] for m in self.markets)

    def __len__(self) -> int:
        return len(self._series)

    def price_at(self, market: Market | str, t_s: ArrayLike) -> np.ndarray | float:
        """Shortcut for ``self[market].price_at(t_s)``.

        Parameters
        ----------
        market : Market or str
            The market (``"AZ/TYPE/PRODUCT"`` for a string).
        t_s : float or array of shape (m,)
            Times, seconds since the epoch (UTC).

        Returns
        -------
        float or ndarray of shape (m,)
            Price in force at each time, USD per instance-hour.

        Raises
        ------
        PriceDataError
            If the market is not in the history or a time is outside it.
        """
        return self[market].price_at(t_s)

    def minute_grid(self, markets: Iterable[Market | str] | None = None, *, start_s: float | None = None,
                    end_s: float | None = None, method: str = "ffill") -> pd.DataFrame:
        """Prices of several markets on one shared one-minute grid.

        Parameters
        ----------
        markets : iterable of Market or str, optional
            Default: every market, sorted.
        start_s, end_s : float, optional
            Grid bounds, seconds since the epoch (UTC); default: the first whole minute at or after the
            earliest first record of the chosen markets, and ``end_s`` of the history.
        method : {"ffill", "linear"}
            As :meth:`PriceSeries.minute_grid`.

        Returns
        -------
        pandas.DataFrame of shape (n_minutes, n_markets)
            USD per instance-hour; index: tz-aware UTC minutes named ``timestamp``; one column per market
            (``str(market)``). A cell before a market's first record is NaN: the price is unknown there
            (the per-series :meth:`PriceSeries.minute_grid` raises instead).

        Raises
        ------
        PriceDataError
            For an unknown market or method, or bounds outside the history.
        """
        chosen = [self[m] for m in (self.markets if markets is None else markets)]
        if not chosen:
            raise PriceDataError("minute grid of no markets")
        if method not in ("ffill", "linear"):
            raise PriceDataError(f"grid method {method!r} is unknown; use 'ffill' or 'linear'")
        lo = min(s.start_s for s in chosen) if start_s is None else float(start_s)
        hi = self.end_s if end_s is None else float(end_s)
        if hi > self.end_s:
            raise PriceDataError(f"grid end {to_timestamp(hi)} is after the end of the history {to_timestamp(self.end_s)}")
        grid = _minutes(lo, hi)
        values = np.full((grid.size, len(chosen)), np.nan)
        for j, s in enumerate(chosen):
            if method == "ffill":
                idx = s._ffill_index(grid)
                values[:, j] = np.where(idx >= 0, s.prices[np.maximum(idx, 0)], np.nan)
            else:
                known = grid >= s.start_s
                values[known, j] = np.interp(grid[known], s.times_s, s.prices)
        return pd.DataFrame(values, index=_minute_index(grid), columns=[str(s.market) for s in chosen])

    def describe(self) -> pd.DataFrame:
        """One row per market: time range, record and change counts, min/median/max price.

        Returns
        -------
        pandas.DataFrame
            Columns ``market`` (str), ``first_utc``, ``last_utc`` (first and last record, tz-aware UTC),
            ``records`` (int), ``changes`` (records whose price differs from the previous one),
            ``min_usd_per_hour``, ``median_usd_per_hour``, ``max_usd_per_hour`` (over records, not
            time-weighted); sorted by market.
        """
        rows = [(str(s.market), to_timestamp(s.start_s), to_timestamp(s.times_s[-1]), len(s), s.n_changes,
                 float(s.prices.min()), float(np.median(s.prices)), float(s.prices.max())) for s in self]
        return pd.DataFrame(rows, columns=["market", "first_utc", "last_utc", "records", "changes",
                                           "min_usd_per_hour", "median_usd_per_hour", "max_usd_per_hour"])

    def collection_gaps(self, min_s: float = COLLECTION_GAP_S, markets: Iterable[Market | str] | None = None, *,
                        median_ratio: float = GAP_MEDIAN_RATIO) -> list[tuple[float, float]]:
        """Stretches in which none of ``markets`` has a record for far longer than usual: the collector was down.

        On an event trace of many markets some market changes price every few minutes (the 2015 us-east-1 trace:
        a median of 67 s between consecutive records of its 15 markets), so hours without a record in *any* market
        are missing data, not a calm market. A replay reads them as flat prices (the step function), so no price
        crossing, hence no revocation and no refund, can happen inside them (``data/spot_prices/README.md``,
        "Quirks"). A stretch counts when it is longer than ``min_s`` and longer than ``median_ratio`` times the
        median interval between consecutive records of the chosen markets: one quiet market alone is silent for hours
        as a matter of course (r3.large in us-east-1a: a median of 472 s, and 152 silences of over 2 h in 2015), so
        the bar rises with the typical interval (there, 39.3 h; only the 56 h gap passes it). With all 15 markets the
        bar is 5.6 h, and the 13.1 h and 56.4 h gaps pass it.

        Only the time in which every chosen market has a known price counts: from the latest first record of the
        chosen markets to their last record (before it, a market's price is unknown and a replay skips it; after the
        last record, up to :attr:`end_s`, nothing is missing that a later record would show).

        Parameters
        ----------
        min_s : float, default :data:`COLLECTION_GAP_S` (7200)
            Shortest silence reported, seconds (> 0).
        markets : Market, str or iterable of them, optional
            Default: every market of the history (the right choice for "was the collector down": the more markets, the
            shorter the ordinary silence).
        median_ratio : float, default :data:`GAP_MEDIAN_RATIO` (300)
            The silence must also exceed this many median intervals (>= 0; 0: ``min_s`` alone).

        Returns
        -------
        list of (float, float)
            ``(last record before, first record after)`` of each silence, seconds since the epoch (UTC), in time
            order.

        Raises
        ------
        PriceDataError
            On a ``min_s`` that is not a number > 0, a negative ``median_ratio``, no markets, or an unknown market.

        Examples
        --------
        >>> table = pd.DataFrame({"timestamp": pd.to_datetime([0, 600, 9000, 9600], unit="s", utc=True),
        ...                       "availability_zone": ["us-east-1a", "us-east-1b", "us-east-1a", "us-east-1b"],
        ...                       "instance_type": "m3.medium", "product_description": "Linux/UNIX",
        ...                       "price": [0.01, 0.02, 0.011, 0.021]})
        >>> PriceHistory(table).collection_gaps(3600.0, median_ratio=0.0)  # four records: the threshold alone
        [(600.0, 9000.0)]

        On the shipped 2015 us-east-1 trace the gaps over 10 h are 2015-04-10 03:45:34 .. 16:52:55 (13.1 h) and
        2015-06-09 15:44:23 .. 06-12 00:09:14 (56.4 h).
        """
        if not (np.isfinite(_number(min_s)) and _number(min_s) > 0):
            raise PriceDataError(f"min_s is {min_s!r}, but must be a finite number of seconds > 0")
        if not _number(median_ratio) >= 0:
            raise PriceDataError(f"median_ratio is {median_ratio!r}, but must be a number >= 0")
        min_s, median_ratio = float(min_s), float(median_ratio)
        if isinstance(markets, (str, Market)):
            markets = [markets]
        chosen = [self[m] for m in (self.markets if markets is None else markets)]
        if not chosen:
            raise PriceDataError("collection gaps of no markets")
        t = np.unique(np.concatenate([s.times_s for s in chosen]))
        t = t[t >= max(s.start_s for s in chosen)]
        d = np.diff(t)
        if d.size == 0:
            return []
        wide = np.flatnonzero(d > max(min_s, median_ratio * float(np.median(d))))
        return [(float(t[j]), float(t[j + 1])) for j in wide]

    def select(self, *, instance_types: Iterable[str] | None = None, availability_zones: Iterable[str] | None = None,
               product_description: str | None = None) -> list[Market]:
        """Markets matching every given filter (None = no filter), sorted.

        Parameters
        ----------
        instance_types : iterable of str, optional
            E.g. ``["r4.large", "m4.xlarge"]``.
        availability_zones : iterable of str, optional
            E.g. ``["us-east-1a"]``.
        product_description : str, optional
            E.g. ``"Linux/UNIX"``.

        Returns
        -------
        list of Market
        """
        its = set(instance_types) if instance_types is not None else None
        azs = set(availability_zones) if availability_zones is not None else None
        return [m for m in self.markets
                if (its is None or m.instance_type in its)
                and (azs is None or m.availability_zone in azs)
                and (product_description is None or m.product_description == product_description)]
