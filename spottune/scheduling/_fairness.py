"""Max-min fairness of the org's USD/hour over team entitlements and demands, and its per-hour loss.

Kandasamy, Sela, Gonzalez, Jordan, Stoica, "Online learning demands in max-min fairness" (arXiv 2012.08648),
Algorithm 1 as reconstructed from the proofs of its Properties 1-5 [R], and the loss of their Section 2
(decision SV2 in ``docs/design/decisions.md``). Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spottune.errors import ConfigError

__all__ = ["RoundLoss", "max_min_fair", "round_loss"]


def _vector(name: str, values: Sequence[float], *, positive: bool) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ConfigError(f"{name} has shape {arr.shape}, but must be one value per team")
    bad = ~np.isfinite(arr) | ((arr <= 0) if positive else (arr < 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        rule = "> 0" if positive else ">= 0"
        raise ConfigError(f"{name}[{i}] is {float(arr[i])!r}, but must be a finite number {rule}")
    return arr


def _bounded(name: str, values: Sequence[float | None] | None, n: int, default: float) -> np.ndarray:
    if values is None:
        return np.full(n, default)
    arr = np.asarray([default if v is None else v for v in values], dtype=float)
    if arr.shape != (n,):
        raise ConfigError(f"{name} has {arr.size} values, but must have one per team ({n})")
    bad = np.isnan(arr) | (arr < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ConfigError(f"{name}[{i}] is {float(arr[i])!r}, but must be a number >= 0 (or None)")
    return arr


def _water_fill(e: np.ndarray, lo: np.ndarray, hi: np.ndarray, capacity: float) -> np.ndarray:
    """``clamp(e_i · R, lo_i, hi_i)`` with the level R at which the sum is ``capacity`` (exact, piecewise linear)."""
    if hi.sum() <= capacity:
        return hi.copy()
    if lo.sum() >= capacity:  # the guarantees alone exceed the capacity: each is cut in proportion
        return lo * (capacity / lo.sum()) if lo.sum() > 0 else np.zeros_like(lo)
    points = np.unique(np.concatenate([[0.0], lo / e, hi / e]))
    level = np.clip(np.outer(points, e), lo, hi).sum(axis=1)  # non-decreasing in the level
    k = int(np.searchsorted(level, capacity, side="right")) - 1
    r0, r1 = points[k], points[k + 1]  # level[k] <= capacity < level[k + 1]: sum(hi) > capacity
    free = (lo / e <= r0) & (hi / e >= r1)  # teams on the water line between r0 and r1 (the same breakpoints)
    r = r0 + (capacity - level[k]) / e[free].sum()
    return np.clip(e * r, lo, hi)


def max_min_fair(entitlements: Sequence[float], demands: Sequence[float], capacity: float = 1.0, *,
                 minimums: Sequence[float | None] | None = None,
                 caps: Sequence[float | None] | None = None) -> np.ndarray:
    """Split ``capacity`` among teams by max-min fairness with entitlements (Algorithm 1 [R]).

    Teams are visited by ``demand / entitlement`` ascending; a team whose demand fits its entitled part of what
    is left gets its demand, and once one does not fit, every remaining team gets its entitled part of the rest.
    A team never gets more than its demand (capacity may stay unallocated).

    With ``minimums`` or ``caps`` (per team, as YARN's FairScheduler ``minResources`` / ``maxResources``,
    decision SV14) the split is the weighted water-filling that Algorithm 1 computes, with bounds: team i gets
    ``clamp(e_i · R, lo_i, hi_i)`` where ``hi_i = min(demand_i, cap_i)``, ``lo_i = min(minimum_i, hi_i)`` and the
    level R makes the sum the capacity (or every team gets ``hi_i`` when that fits). Minimums come first: when
    they alone exceed the capacity, each team gets its ``lo_i`` cut in proportion and nothing else.

    Parameters
    ----------
    entitlements : sequence of float, shape (n_teams,)
        Shares of the capacity, each > 0; normalised by their sum (they need not sum to 1).
    demands : sequence of float, shape (n_teams,)
        Each team's demand (reported or learned), >= 0, in the capacity's unit (USD/hour for the org budget).
    capacity : float, default 1.0
        What is split (the org's USD/hour), >= 0.
    minimums : sequence of float or None, optional
        Each team's guaranteed minimum (the capacity's unit, >= 0; None: 0), granted up to its demand.
    caps : sequence of float or None, optional
        Each team's cap (the capacity's unit, >= 0; None: none): a ceiling on its demand.

    Returns
    -------
    allocations : ndarray of shape (n_teams,)
        In the capacity's unit; ``allocations <= min(demands, caps)`` and ``allocations.sum() <= capacity``.

    Raises
    ------
    ConfigError
        On a length mismatch, a non-finite or negative demand, an entitlement <= 0, a negative capacity, minimum
        or cap.

    Examples
    --------
    >>> max_min_fair([0.25] * 4, [0.1, 0.3, 0.5, 0.6]).round(6).tolist()
    [0.1, 0.3, 0.3, 0.3]
    >>> max_min_fair([1, 1, 1], [5, 5, 5], 6.0, minimums=[3, 0, 0], caps=[None, 1, None]).round(6).tolist()
    [3.0, 1.0, 2.0]
    """
    e = _vector("entitlements", entitlements, positive=True)
    d = _vector("demands", demands, positive=False)
    if len(e) != len(d):
        raise ConfigError(f"demands has {len(d)} values, but must have one per team ({len(e)})")
    if not (math.isfinite(capacity) and capacity >= 0):
        raise ConfigError(f"capacity is {capacity!r}, but must be a finite number >= 0")
    if minimums is not None or caps is not None:
        hi = np.minimum(d, _bounded("caps", caps, len(d), np.inf))
        lo = np.minimum(_bounded("minimums", minimums, len(d), 0.0), hi)
        return _water_fill(e / e.sum(), lo, hi, float(capacity))
    a = np.zeros_like(d)
    rest, weight = float(capacity), float(e.sum())
    order = np.argsort(d / e, kind="stable")
    for k, i in enumerate(order):
        if d[i] <= e[i] * rest / weight:  # line 5: the demand fits the team's entitled part of what is left
            a[i] = d[i]
            rest -= d[i]
            weight -= e[i]
        else:  # line 8: every remaining team gets its entitled part of the rest
            left = order[k:]
            a[left] = e[left] * rest / weight
            break
    return a


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundLoss:
    """One round's (one hour's) efficiency accounting, all in the capacity's unit (USD/hour).

    Attributes
    ----------
    unallocated : float
        U = capacity - sum of allocations.
    over_allocated : float
        O = sum of (allocation - demand)+.
    unmet : float
        M = sum of (demand - allocation)+.
    loss : float
        min(U + O, M): capacity that was idle or wasted while some demand went unmet.
    """

    unallocated: float
    over_allocated: float
    unmet: float
    loss: float


def round_loss(demands: Sequence[float], allocations: Sequence[float], capacity: float = 1.0) -> RoundLoss:
    """The loss of one round, ``min(U + O, M)`` (Kandasamy et al., Section 2 [R]).

    Parameters
    ----------
    demands, allocations : sequence of float, shape (n_teams,)
        True demands and what was allocated, >= 0, in the capacity's unit (USD/hour).
    capacity : float, default 1.0

    Returns
    -------
    RoundLoss

    Raises
    ------
    ConfigError
        On a length mismatch or a negative or non-finite value.

    Examples
    --------
    >>> round_loss([0.1, 0.3], [0.25, 0.25], 0.5)
    RoundLoss(unallocated=0.0, over_allocated=0.15, unmet=0.04999999999999999, loss=0.04999999999999999)
    """
    d = _vector("demands", demands, positive=False)
    a = _vector("allocations", allocations, positive=False)
    if len(d) != len(a):
        raise ConfigError(f"allocations has {len(a)} values, but must have one per team ({len(d)})")
    u = max(float(capacity) - float(a.sum()), 0.0)
    o = float(np.clip(a - d, 0, None).sum())
    m = float(np.clip(d - a, 0, None).sum())
    return RoundLoss(unallocated=u, over_allocated=o, unmet=m, loss=min(u + o, m))
