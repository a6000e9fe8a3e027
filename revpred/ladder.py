"""The provisioner's own revocation queries, with exact legacy labels (decision P1).

Every hour, for every market, the provisioner asks the revocation predictor about the max prices
``b = price(t) + delta`` for each ``delta`` of a fixed ladder (:data:`DELTA_LADDER_USD_PER_HOUR`) and
about ``b = the market's on-demand price``. :func:`ladder_queries` generates exactly those queries on
a grid of decision times and labels them with the legacy (2017) rule
(:class:`spotmarket.LegacyBidRevocation`, notice at the first price record above b, decision M1):

    y = 1  iff  the launch is fulfilled (price(t) <= b) and the first record after t with price > b
                lies in (t, t + 3600 s].

An on-demand max price below the current price would be refused at launch; such queries have no
revocation label and are left out (they are counted in the frame's ``attrs["refused"]``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from revpred.errors import RevPredError
from revpred.labels import HORIZON_S, sample_times
from spotmarket import LegacyBidRevocation
from spotmarket.prices import Market, PriceHistory

__all__ = ["DELTA_LADDER_USD_PER_HOUR", "ON_DEMAND", "check_ladder", "ladder_queries", "on_demand_of"]

#: Max-price offsets over the current price the provisioner tries, USD per instance-hour (decision P1).
DELTA_LADDER_USD_PER_HOUR: tuple[float, ...] = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3)
#: ``rung`` value of the on-demand query (the ladder's rungs are 0 .. len(ladder) - 1).
ON_DEMAND = -1


def check_ladder(ladder: Sequence[float]) -> tuple[float, ...]:
    """The ladder as a tuple of floats.

    Parameters
    ----------
    ladder : sequence of float
        Max-price offsets δ over the current price, USD per instance-hour.

    Returns
    -------
    tuple of float

    Raises
    ------
    RevPredError
        Unless non-empty, finite, > 0 and strictly increasing.
    """
    out = tuple(float(d) for d in ladder)
    if not out or not all(np.isfinite(d) and d > 0 for d in out) or any(b <= a for a, b in zip(out, out[1:])):
        raise RevPredError(f"the max-price ladder must be non-empty, > 0 and strictly increasing USD/hour, got {ladder!r}")
    return out


def on_demand_of(on_demand: Mapping | None, market: Market) -> float | None:
    """On-demand price of ``market`` (USD/hour) from a mapping keyed by Market or its string; None if absent.

    Parameters
    ----------
    on_demand : mapping of Market or str -> float, or None
    market : Market

    Returns
    -------
    float or None
        USD per instance-hour.
    """
    if on_demand is None:
        return None
    v = on_demand.get(market, on_demand.get(str(market)))
    return None if v is None else float(v)


def ladder_queries(history: PriceHistory, markets: Sequence[Market], start_s: float, end_s: float, *,
                   stride_min: int = 60, ladder: Sequence[float] = DELTA_LADDER_USD_PER_HOUR,
                   on_demand: Mapping | None = None, horizon_s: float = HORIZON_S) -> pd.DataFrame:
    """The provisioner's queries in ``[start_s, end_s]`` with their exact legacy labels.

    Decision times: :func:`revpred.labels.sample_times` (whole minutes every ``stride_min`` minutes, each
    label hour inside the window, so a window's labels never look past ``end_s``).

    Parameters
    ----------
    history : PriceHistory
        Spot prices, USD per instance-hour.
    markets : sequence of Market
    start_s, end_s : float
        Window, seconds since the epoch (UTC).
    stride_min : int, default 60
        Minutes between decision times (the provisioner decides every hour).
    ladder : sequence of float, default :data:`DELTA_LADDER_USD_PER_HOUR`
        Max-price offsets over the current price, USD/hour.
    on_demand : mapping Market (or str) -> float, optional
        On-demand price per market, USD/hour; adds the query ``b = on-demand`` where it is >= the price.
    horizon_s : float, default 3600

    Returns
    -------
    pandas.DataFrame
        One row per query: ``market`` (Market), ``t`` (s), ``price`` (USD/h at t), ``b`` (max price,
        USD/h), ``rung`` (ladder index, :data:`ON_DEMAND` for the on-demand query), ``y`` (int 0/1).
        ``attrs["refused"]``: on-demand queries left out because ``b < price(t)``.

    Raises
    ------
    RevPredError
        On a bad ladder or an empty window.
    """
    ladder = check_ladder(ladder)
    if end_s <= start_s:
        raise RevPredError("the query window ends before it starts")
    model = LegacyBidRevocation(history)
    frames, refused = [], 0
    for m in markets:
        series = history[m]
        t = sample_times(series, start_s, end_s, stride_min, horizon_s)
        if t.size == 0:
            continue
        price = np.asarray(series.price_at(t), dtype=np.float64)
        bs = [price + d for d in ladder]
        rungs = [np.full(t.size, k) for k in range(len(ladder))]
        ts = [t] * len(ladder)
        od = on_demand_of(on_demand, m)
        if od is not None:
            ok = price <= od
            refused += int((~ok).sum())
            bs.append(np.full(int(ok.sum()), od))
            rungs.append(np.full(int(ok.sum()), ON_DEMAND))
            ts.append(t[ok])
        tt, bb = np.concatenate(ts), np.concatenate(bs)
        rev = model.batch(m, tt, bb)
        y = (rev.fulfilled & (rev.notice_s <= tt + horizon_s)).astype(np.int64)
        frames.append(pd.DataFrame({"market": [m] * tt.size, "t": tt, "price": series.price_at(tt), "b": bb,
                                    "rung": np.concatenate(rungs), "y": y}))
    if not frames:
        raise RevPredError("the window holds no decision time of any market")
    out = pd.concat(frames, ignore_index=True).sort_values(["t", "rung"], kind="stable", ignore_index=True)
    out.attrs["refused"] = refused
    return out
