"""A query batch of the revocation-predictor protocol: (markets, decision times, max prices).

Shared by every predictor that answers :meth:`~revpred.protocol.RevocationPredictor.predict_proba`
(:class:`revpred.predictor.RevPred` and the baselines of :mod:`revpred.baselines`), so neither imports the
other.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from revpred.errors import RevPredError
from spotmarket.prices import Market

__all__ = ["broadcast_queries", "group_by_market"]


def broadcast_queries(markets: Sequence[Market], times_s: ArrayLike,
                      max_prices_usd_per_hour: ArrayLike) -> tuple[list[Market], np.ndarray, np.ndarray]:
    """Validate and broadcast a query batch to (markets, times (n,), max prices (n,)).

    Parameters
    ----------
    markets : sequence of Market or str, length n
    times_s : float or array of shape (n,)
        Decision times, seconds since the epoch (UTC).
    max_prices_usd_per_hour : float or array of shape (n,)
        USD per instance-hour.

    Returns
    -------
    markets : list of Market
    times_s : ndarray of shape (n,)
    max_prices : ndarray of shape (n,)

    Raises
    ------
    RevPredError
        If the shapes do not broadcast to (n,) or a value is not finite.
    PriceDataError
        If a market string is not of the form ``AZ/TYPE[/PRODUCT]``.
    """
    ms = [Market.parse(m) if isinstance(m, str) else m for m in markets]
    n = len(ms)
    try:
        t = np.broadcast_to(np.asarray(times_s, dtype=np.float64), (n,)).copy()
        b = np.broadcast_to(np.asarray(max_prices_usd_per_hour, dtype=np.float64), (n,)).copy()
    except ValueError:
        raise RevPredError(f"{n} markets, but times and max prices have shapes {np.shape(times_s)} and "
                           f"{np.shape(max_prices_usd_per_hour)}; give scalars or arrays of shape ({n},)") from None
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(b))):
        raise RevPredError("decision times and max prices must be finite")
    return ms, t, b


def group_by_market(markets: Sequence[Market]) -> dict[Market, np.ndarray]:
    """Query positions per market, in first-seen order: ``{market: int ndarray of shape (n_m,)}``.

    Parameters
    ----------
    markets : sequence of Market

    Returns
    -------
    dict of Market -> ndarray of int
    """
    groups: dict[Market, list[int]] = {}
    last, rows = None, None
    for i, m in enumerate(markets):
        if m is not last:  # queries of one market usually come together: hash only when it changes
            last, rows = m, groups.setdefault(m, [])
        rows.append(i)
    return {m: np.asarray(rows) for m, rows in groups.items()}
