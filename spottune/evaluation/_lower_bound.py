"""A true lower bound on what any schedule pays to do a trial's work by a deadline (legacy market).

The bound knows the replay's whole future: every market's price series, hence (legacy 2017 rule,
:class:`spotmarket.LegacyBidRevocation`) when an instance launched at any time with any max price is
revoked. For one trial that must run ``W`` steps by the deadline ``D`` it gives a number of USD that no
schedule can beat, whatever it chooses: markets (instance type x availability zone, and the on-demand
capacity of every type), max prices, launch times, hold / hop and user terminations.

**The relaxed model** (every simplification is optimistic, so the model's minimum <= the truth's):

- a *segment* is one instance run of the trial. Segments that leave nothing in the trial's final
  progress are dropped (they only cost). The progress intervals of the kept segments are disjoint: a
  launch needs the previous checkpoint (``Launch.resume_step`` = the store's step).
- a *user* segment ``[t, e]`` in market m costs ``∫_t^e price_m`` (:class:`spotmarket.Billing`, per
  second). A user segment never needs a max price (billing uses the market price), so it is never
  revoked. A provider end after >= 3600 s pays the same for the same run, so it is a user segment too.
- a *refunded* segment ends by the provider within its first hour and is free. In legacy mode it is
  revoked at an *up-tick* s of the price (the first record above the max price b): launched at t with
  ``max(price on [t, s)) <= b < price(s)`` and ``s + 120 - t < 3600`` (notice at s, termination s + 120,
  the paper's §II-A). Its progress may last until the termination ``s + 120`` (or stop earlier, freeing the
  trial for the next launch).
- progress of a segment = (progress time - overheads) / seconds per step. Overheads are the
  simulator's (:mod:`spottune.backends.sim._backend`): ``boot_s`` on every segment; restore
  (``checkpoint_overhead_s + size / bandwidth(vCPUs)``) on every segment but the first; the checkpoint
  before a hop is moved to the next segment as the cheapest checkpoint of any market, in steps (the
  last segment needs none).
- step time noise: the simulator multiplies each step by a log-normal factor with mean 1 and
  coefficient of variation ``step_time_cov``; the bound uses steps faster by ``1 - 3 cov`` (a
  segment's mean factor is below that with probability < 1e-3 for one step, and never in practice for
  ten or more; with cov = 0 the bound is exact in this respect).

**Computation** (Lagrangian relaxation). For a price λ >= 0 (USD per step) weak duality gives, for
every schedule with progress >= W finishing by D: ``cost >= cost - λ (progress - W) >= V_λ(D) + λ W``
where ``V_λ(D)`` is the minimum of ``cost - λ progress`` over all schedules in ``[start, D]``. With
progress linear in the segment lengths the objective is piecewise linear in the decision times, so
some optimal schedule has every time in a finite set X: the start, the deadline, every price record,
every termination ``s + 120`` and every earliest refunded launch ``max(r, s - 3480)`` (r = when the
price last fell below price(s)). ``V_λ`` is a forward dynamic program over X (states: idle, in a user
segment of market m, in a refunded segment of up-tick s), vectorised over a grid of λ; the bound is
the best λ of the grid (every λ is valid, so a grid loses tightness, never validity). A trial's bound
is ``max(0, max_λ min(0, V_λ(D)) + λ W)``; an experiment's is the sum over its trials (trials are
independent in cost).

**Modern mode** has no bound here: its per-instance lifetimes are keyed on the instance id and the
exact launch time (:mod:`spotmarket._modern`), so a schedule free to choose launch times can pick,
among launches a microsecond apart, one whose draw ends it for free within the hour; the infimum
over schedules is then close to 0 USD and says nothing. :func:`run_lower_bound` reports NaN.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spotmarket import FREE_WINDOW_S, HOUR_S, NOTICE_LEAD_S
from spottune.speed import seconds_per_step, transfer_seconds
from spottune.errors import ConfigError

__all__ = ["LowerBoundSettings", "NOISE_Z", "bound_columns", "lower_bound_usd", "run_lower_bound", "trial_lower_bounds"]

NOISE_Z = 3.0  #: step times in the bound are faster by NOISE_Z x step_time_cov (see the module doc)
N_LAMBDA = 64  #: λ grid: 0 and N_LAMBDA - 1 geometric points over LAMBDA_SPAN around the typical USD/step
LAMBDA_SPAN = (1e-3, 1e3)
N_REFINE = 16  #: λ points per refinement pass (per profile and work)
REFINE_PASSES = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class LowerBoundSettings:
    """The simulator's overheads the bound charges (seconds, MB), as in :class:`spottune.backends.SimSettings`.

    Parameters
    ----------
    boot_s : float
        Boot latency of every launch, seconds.
    checkpoint_overhead_s : float
        Fixed part of one checkpoint or restore, seconds.
    checkpoint_size_mb : float
        Checkpoint size, MB (transfer time = size / bandwidth(vCPUs), :mod:`spottune.speed`).
    step_time_cov : float
        Coefficient of variation of the simulator's step-time noise (0 = exact).
    notice_lead_s : float
        Legacy notice-to-termination time, seconds (the paper's §II-A: 120).
    """

    boot_s: float = 0.0
    checkpoint_overhead_s: float = 1.0
    checkpoint_size_mb: float = 1.0
    step_time_cov: float = 0.0
    notice_lead_s: float = NOTICE_LEAD_S


def _upticks(series: Any, lo_s: float, hi_s: float, notice_lead_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Up-ticks s in (lo_s, hi_s) and each one's earliest refunded launch (seconds since the epoch).

    A launch at t is revoked at s (with a refund) iff ``max(price on [t, s)) < price(s)`` and
    ``s + notice_lead_s - t < 3600``: t >= the record after the last one at or above price(s), and
    t > s + notice_lead_s - 3600 (the closure is used: optimistic).
    """
    t, p = series.times_s, series.prices
    i0 = max(int(np.searchsorted(t, lo_s - 2 * HOUR_S, side="right")) - 1, 0)
    i1 = int(np.searchsorted(t, hi_s, side="left"))
    tt, pp = t[i0:i1], p[i0:i1]
    n = tt.size
    prev_ge = np.full(n, -1, dtype=np.int64)
    stack: list[int] = []
    for k in range(n):  # last j < k with pp[j] >= pp[k] (a monotonic stack)
        while stack and pp[stack[-1]] < pp[k]:
            stack.pop()
        prev_ge[k] = stack[-1] if stack else -1
        stack.append(k)
    k = np.flatnonzero((np.arange(n) > 0) & (pp > np.roll(pp, 1)) & (tt > lo_s))
    if k.size == 0:
        return np.empty(0), np.empty(0)
    after = np.where(prev_ge[k] >= 0, tt[np.minimum(prev_ge[k] + 1, n - 1)], -math.inf)
    return tt[k], np.maximum(after, tt[k] + notice_lead_s - FREE_WINDOW_S)


def _lambda_grid(typical_usd_per_step: float) -> np.ndarray:
    base = max(float(typical_usd_per_step), 1e-12)
    return np.concatenate([[0.0], base * np.geomspace(*LAMBDA_SPAN, N_LAMBDA - 1)])


def trial_lower_bounds(history: Any, markets: Sequence[Any], *, start_s: float, deadline_s: float,
                       work_steps: Sequence[float], seconds_per_step_by_market: np.ndarray,
                       vcpus: Sequence[int], settings: LowerBoundSettings,
                       on_demand_usd_per_hour: Sequence[float] | None = None,
                       on_demand_vcpus: Sequence[int] | None = None,
                       on_demand_seconds_per_step: np.ndarray | None = None) -> np.ndarray:
    """Lower bound (USD) for each trial to run its ``work_steps`` between ``start_s`` and ``deadline_s`` (legacy).

    Parameters
    ----------
    history : spotmarket.prices.PriceHistory
        Spot prices (USD per instance-hour) of ``markets``, known over ``[start_s, deadline_s + 3600]``.
    markets : sequence of Market, length M
    start_s, deadline_s : float
        Seconds since the epoch (UTC); ``deadline_s >= start_s``.
    work_steps : sequence of float, length n
        Steps each trial must run (>= 0).
    seconds_per_step_by_market : array of shape (n, M)
        Seconds per step of each trial in each market (the simulator's speed model, no noise).
    vcpus : sequence of int, length M
        vCPUs of each market's type (checkpoint bandwidth).
    settings : LowerBoundSettings
    on_demand_usd_per_hour : sequence of float, optional, length K
        On-demand capacity the schedule may also use (never revoked, no refund).
    on_demand_vcpus : sequence of int, length K
    on_demand_seconds_per_step : array of shape (n, K)

    Returns
    -------
    ndarray of shape (n,)
        USD, >= 0.

    Raises
    ------
    ConfigError
        On a deadline before the start or shapes that do not match.
    """
    work = np.asarray(work_steps, dtype=float)
    sps = np.atleast_2d(np.asarray(seconds_per_step_by_market, dtype=float))
    n, m_spot = work.size, len(markets)
    if not deadline_s >= start_s:
        raise ConfigError(f"lower bound: deadline {deadline_s} is before the start {start_s}")
    if sps.shape != (n, m_spot) or len(vcpus) != m_spot:
        raise ConfigError(f"lower bound: seconds_per_step has shape {sps.shape}, expected {(n, m_spot)}")
    od_price = np.asarray(on_demand_usd_per_hour if on_demand_usd_per_hour is not None else [], dtype=float)
    od_sps = (np.zeros((n, 0)) if on_demand_seconds_per_step is None
              else np.atleast_2d(np.asarray(on_demand_seconds_per_step, dtype=float)))
    od_vcpus = list(on_demand_vcpus or [])
    if od_sps.shape != (n, od_price.size) or len(od_vcpus) != od_price.size:
        raise ConfigError("lower bound: on-demand prices, vCPUs and seconds per step do not match")
    out = np.zeros(n)
    if n == 0 or not np.any(work > 0):
        return out
    # the DP is shared by trials with the same speeds (a profile) and the same work
    all_sps = np.concatenate([sps, od_sps], axis=1) * max(1.0 - NOISE_Z * settings.step_time_cov, 1e-3)
    profiles, inverse = np.unique(all_sps, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    all_vcpus = list(vcpus) + od_vcpus
    transfer = np.array([transfer_seconds(settings.checkpoint_size_mb, v, settings.checkpoint_overhead_s)
                         for v in all_vcpus])
    dp = _Program(history, markets, start_s, deadline_s, profiles, transfer, od_price, settings)
    keys = sorted({(int(inverse[i]), float(work[i])) for i in range(n) if work[i] > 0})
    # λ: a wide geometric grid per profile, then REFINE_PASSES zooms on each (profile, work)'s best point
    typical = dp.typical_usd_per_step()
    grids = {p: _lambda_grid(typical[p]) for p in {k[0] for k in keys}}
    prof = np.concatenate([np.full(grids[p].size, p) for p in grids])
    lam = np.concatenate(list(grids.values()))
    vals = dp.values(prof, lam)
    best: dict[tuple[int, float], tuple[float, float, float]] = {}  # key -> (bound, lo, hi) bracket of λ
    for key in keys:
        sel = np.flatnonzero(prof == key[0])
        dual = np.minimum(vals[sel], 0.0) + lam[sel] * key[1]
        j = int(np.argmax(dual))
        best[key] = (float(dual[j]), float(lam[sel][max(j - 1, 0)]), float(lam[sel][min(j + 1, sel.size - 1)]))
    for _ in range(REFINE_PASSES):
        prof = np.concatenate([np.full(N_REFINE, k[0]) for k in keys])
        lam = np.concatenate([np.linspace(best[k][1], best[k][2], N_REFINE) for k in keys])
        vals = dp.values(prof, lam)
        for i, key in enumerate(keys):
            sl = slice(i * N_REFINE, (i + 1) * N_REFINE)
            dual = np.minimum(vals[sl], 0.0) + lam[sl] * key[1]
            j = int(np.argmax(dual))
            if dual[j] > best[key][0]:
                best[key] = (float(dual[j]), float(lam[sl][max(j - 1, 0)]), float(lam[sl][min(j + 1, N_REFINE - 1)]))
            else:
                step = (best[key][2] - best[key][1]) / (N_REFINE - 1)
                best[key] = (best[key][0], best[key][1] + step * max(j - 1, 0), best[key][1] + step * min(j + 1, N_REFINE - 1))
    for i in range(n):
        if work[i] > 0:
            out[i] = max(0.0, best[(int(inverse[i]), float(work[i]))][0])
    return out


class _Program:
    """The forward dynamic program of ``V_λ(D)`` over the time points X (see the module doc)."""

    def __init__(self, history: Any, markets: Sequence[Any], start_s: float, deadline_s: float,
                 profiles: np.ndarray, transfer_s: np.ndarray, od_price: np.ndarray, st: LowerBoundSettings):
        self.m_spot = m_spot = len(markets)
        self.series = series = [history[m] for m in markets]
        self.profiles, self.transfer_s, self.od_price, self.st = profiles, transfer_s, od_price, st
        lead = st.notice_lead_s
        # up-tick candidates whose refunded launch window meets [start, D)
        cm, cs, clo = [], [], []
        for j, s in enumerate(series):
            s_up, lo = _upticks(s, start_s, deadline_s + FREE_WINDOW_S, lead)
            lo = np.maximum(lo, start_s)
            keep = lo < np.minimum(s_up, deadline_s)
            cm.append(np.full(int(keep.sum()), j)), cs.append(s_up[keep]), clo.append(lo[keep])
        self.cm = np.concatenate(cm).astype(np.int64) if cm else np.empty(0, dtype=np.int64)
        cs_a = np.concatenate(cs) if cs else np.empty(0)
        clo_a = np.concatenate(clo) if clo else np.empty(0)
        cend = np.minimum(cs_a + lead, deadline_s)
        pts = [np.array([start_s, deadline_s]), clo_a, cend]
        for s in series:
            t = s.times_s
            pts.append(t[(t > start_s) & (t < deadline_s)])
        x = np.unique(np.concatenate(pts))
        self.x = x = x[(x >= start_s) & (x <= deadline_s)]
        self.rel = x - start_s
        self.dt = np.diff(self.rel)
        # user-segment cost of each interval, USD: spot markets, then on-demand capacity
        cost = np.zeros((m_spot + od_price.size, max(x.size - 1, 0)))
        if x.size > 1:
            for j, s in enumerate(series):
                cost[j] = s.cost_usd(x[:-1], x[1:])
            for k, price in enumerate(od_price):
                cost[m_spot + k] = price * self.dt / HOUR_S
        self.cost = cost
        self.clo_r, self.cs_r, self.cend_r = clo_a - start_s, cs_a - start_s, cend - start_s
        self._median_price = float(np.median([float(np.median(s.price_at(x))) for s in series] + list(od_price)))

    def typical_usd_per_step(self) -> np.ndarray:
        """Per profile: a typical market price x a typical seconds per step, USD per step (centres the λ grid)."""
        return np.median(self.profiles, axis=1) * self._median_price / HOUR_S

    def values(self, prof: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """``V_λ(D)`` for each column (profile index ``prof[c]``, λ = ``lam[c]`` USD per step); shape (C,)."""
        profiles, st = self.profiles, self.st
        rate = lam[None, :] / profiles[prof].T  # (M+K, C): USD of progress credit per second of progress
        ckpt_steps = np.min(self.transfer_s[None, :] / profiles, axis=1)[prof]  # cheapest checkpoint, steps
        oh_first = rate * st.boot_s
        oh_later = rate * (st.boot_s + self.transfer_s[:, None]) + lam[None, :] * ckpt_steps[None, :]
        cm, rel, dt, cost = self.cm, self.rel, self.dt, self.cost
        f1 = np.full(lam.size, math.inf)  # best value with >= 1 segment done, free at the current point
        user = np.full((rate.shape[0], lam.size), math.inf)  # inside a user segment of each market
        g = np.full((cm.size, lam.size), math.inf)  # refunded candidates: min(launch value + rate * launch time)
        c_rate = rate[cm]
        clo_r, cs_r, cend_r = self.clo_r, self.cs_r, self.cend_r
        for i in range(1, rel.size):
            a, b = rel[i - 1], rel[i]
            launch = np.minimum(oh_first, f1[None, :] + oh_later)  # value of launching at a, per market
            user = np.minimum(user, launch) + (cost[:, i - 1, None] - rate * dt[i - 1])
            new = np.minimum(f1, user.min(axis=0))
            if cm.size:
                on = (clo_r <= a) & (a < cs_r)
                if on.any():
                    g[on] = np.minimum(g[on], launch[cm[on]] + c_rate[on] * a)
                cr = (b <= cend_r) & (clo_r < b)
                if cr.any():
                    new = np.minimum(new, (g[cr] - c_rate[cr] * b).min(axis=0))
            f1 = new
        return f1


def lower_bound_usd(history: Any, markets: Sequence[Any], **kwargs: Any) -> float:
    """Sum over trials of :func:`trial_lower_bounds` (same parameters), USD.

    Parameters
    ----------
    history : spotmarket.prices.PriceHistory
        The replayed prices, USD per instance-hour.
    markets : sequence of Market
        The pool.
    **kwargs
        As in :func:`trial_lower_bounds`.

    Returns
    -------
    float
        USD.
    """
    return float(np.sum(trial_lower_bounds(history, markets, **kwargs)))


_WARNED: set[str] = set()


def run_lower_bound(*, market: Any, study: Any, orchestrator: Any, record: Any, start_s: float,
                    jct_h: float | None, sim_settings: Any) -> dict[str, float]:
    """The ``lower_bound_usd`` of one simulated run: the bound at the run's own per-trial steps and JCT.

    Parameters
    ----------
    market : spottune.compose.MarketSetup
        History, catalog, markets and ``market_mode`` of the run.
    study : spottune.evaluation.Study
        Per-trial reference seconds per step and checkpoint size.
    orchestrator : Orchestrator
        After the run: each trial's reached step is its work.
    record : RunRecord
        The run's event log (the last reported step bounds the deadline from below).
    start_s : float
        Experiment start, seconds since the epoch.
    jct_h : float or None
        The run's JCT, hours (the deadline is ``start + JCT``).
    sim_settings : spottune.backends.SimSettings
        The simulator's overheads and step-time noise.

    Returns
    -------
    dict
        ``lower_bound_usd`` (NaN in modern mode or without a JCT, with a warning).
    """
    if market.market_mode != "legacy" or jct_h is None or not math.isfinite(jct_h):
        why = "modern mode has no valid bound" if market.market_mode != "legacy" else "the run has no JCT"
        if why not in _WARNED:
            _WARNED.add(why)
            warnings.warn(f"lower bound undefined: {why} (see spottune/evaluation/_lower_bound.py)", stacklevel=2)
        return {"lower_bound_usd": math.nan}
    last_metric = max((r["t"] for r in record.log if r.get("type") == "MetricReported"), default=start_s)
    deadline = max(start_s + jct_h * HOUR_S, float(last_metric))
    catalog, markets = market.catalog, list(market.markets)
    trials = list(orchestrator.trials)
    work = [float(orchestrator.trials[t].step) for t in trials]
    ref = [float(study.reference_seconds_per_step[t]) for t in trials]
    facts = [(catalog[m.instance_type].vcpus, catalog[m.instance_type].ecu) for m in markets]
    sps = np.array([[seconds_per_step(r, v, e) for v, e in facts] for r in ref])
    types = sorted({m.instance_type for m in markets})
    region = markets[0].region
    od_price = [float(catalog.on_demand_usd_per_hour(t, region)) for t in types]
    od_facts = [(catalog[t].vcpus, catalog[t].ecu) for t in types]
    od_sps = np.array([[seconds_per_step(r, v, e) for v, e in od_facts] for r in ref])
    size = sim_settings.checkpoint_size_mb if sim_settings.checkpoint_size_mb is not None else study.checkpoint_size_mb
    settings = LowerBoundSettings(boot_s=sim_settings.boot_s, checkpoint_overhead_s=sim_settings.checkpoint_overhead_s,
                                  checkpoint_size_mb=float(size), step_time_cov=sim_settings.step_time_cov)
    lb = lower_bound_usd(market.history, markets, start_s=start_s, deadline_s=deadline, work_steps=work,
                         seconds_per_step_by_market=sps, vcpus=[v for v, _ in facts], settings=settings,
                         on_demand_usd_per_hour=od_price, on_demand_vcpus=[v for v, _ in od_facts],
                         on_demand_seconds_per_step=od_sps)
    return {"lower_bound_usd": lb}



def bound_columns(row: dict[str, Any], **kwargs: Any) -> dict[str, float]:
    """The table columns ``lower_bound_usd`` and ``cost_vs_lower_bound`` (= ``cost_usd`` / bound) of one run.

    ``kwargs`` are those of :func:`run_lower_bound` except ``jct_h`` (read from ``row``). The ratio is
    NaN where the bound is undefined or 0 USD (nothing to compare with); ``spottune simulate`` says in one
    line how many runs that was (:func:`undefined_ratio_note`).

    Parameters
    ----------
    row : dict
        One run's table row (``cost_usd``, ``jct_h``).
    **kwargs
        See above.

    Returns
    -------
    dict of str to float
        ``lower_bound_usd`` (USD) and ``cost_vs_lower_bound`` (dimensionless).
    """
    lb = run_lower_bound(jct_h=row["jct_h"], **kwargs)["lower_bound_usd"]
    ratio = float(row["cost_usd"]) / lb if math.isfinite(lb) and lb > 0 else math.nan
    return {"lower_bound_usd": lb, "cost_vs_lower_bound": ratio}


def undefined_ratio_note(table: Any) -> str | None:
    """One line on the runs whose ``cost_vs_lower_bound`` is undefined because the bound is 0 USD, or None."""
    lb = table["lower_bound_usd"].astype(float)
    zero = int((lb == 0).sum())
    if not zero:
        return None
    return (f"warning: the lower bound is 0 USD in {zero} of {int(lb.notna().sum())} bounded runs (a schedule that "
            f"knows the prices chains refunded runs), so cost_vs_lower_bound is undefined there")
