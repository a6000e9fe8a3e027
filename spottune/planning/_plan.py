"""The plan of a run under a deadline and a dollar budget: SEER's Algorithms 2-3 in vCPU-seconds (F-S1).

SEER (SoCC'21) budgets in resource-minutes. Here a resource is one **vCPU** (decision DB2,
F-S1): a trial of bracket i runs on an instance with ``P[i]`` vCPUs, ``P = [p_min, p_min nu, ...]`` with
``p_min`` / ``p_max`` the smallest / largest vCPU count of the pool. The dollar budget becomes vCPU-seconds
through the **expected spot price**: per pool market the mean price over the predictor's training window
before the start (USD per instance-hour, :meth:`spotmarket.prices.PriceSeries.mean_price`) divided by its
vCPUs; the plan uses the cheapest market per vCPU (the one a cost-minimising provisioner favours). The cost
band is that market's 10th and 90th price percentiles over the same window.

The shortest round ``t_min`` is one launch (``boot_s``) plus one step on a ``p_min`` instance
(:func:`spottune.speed.seconds_per_step`), so that a round always trains.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spotmarket import HOUR_S
from spottune.errors import ConfigError
from spottune.planning._elastic import seer_schedule
from spottune.planning._lean import InstanceClass, LeanPlan, lean_plan
from spottune.planning._seer import SeerPlan, seer_plan

__all__ = ["Resources", "RunPlan", "format_duration", "instance_classes", "parse_duration", "plan_run", "resources"]

#: SEER's defaults (Algorithm 1): elimination rate eta and parallelism growth nu.
SEER_ETA, SEER_NU = 4.0, 2.0


def parse_duration(value: Any, name: str = "deadline") -> float:
    """Seconds from ``6h``, ``90min``, ``1d``, ``3600s`` or a bare number of seconds.

    Parameters
    ----------
    value : str or float
        A duration with a unit (``h``, ``min``, ``d``, ``s``) or a number of seconds.
    name : str, default "deadline"
        The option's name in the error message.

    Returns
    -------
    float
        Seconds, > 0.

    Raises
    ------
    ConfigError
        On an unreadable, zero or negative duration (one line).
    """
    import pandas as pd

    if isinstance(value, bool):
        raise ConfigError(f"{name} is {value!r}, but must be a duration such as '6h' or a number of seconds > 0")
    if isinstance(value, (int, float)):
        s = float(value)
    else:
        text = str(value).strip()
        try:
            s = float(text)
        except ValueError:
            try:
                s = (float(text[:-1]) * 86400.0 if text[-1:] in "dD" and text[:-1].strip()
                     else pd.Timedelta(text).total_seconds())
            except (ValueError, TypeError):
                raise ConfigError(f"{name} is {value!r}, but must be a duration such as '6h', '90min' or "
                                  "a number of seconds") from None
    if not (math.isfinite(s) and s > 0):
        raise ConfigError(f"{name} is {value!r}, but must be a duration > 0 (e.g. '6h')")
    return s


def format_duration(seconds: float) -> str:
    """``6 h``, ``1.5 h``, ``45 min`` or ``30 s``.

    Parameters
    ----------
    seconds : float
        A duration, seconds.

    Returns
    -------
    str
        Three significant digits in the largest unit that fits (hours, minutes, seconds).
    """
    if seconds >= HOUR_S:
        return f"{seconds / HOUR_S:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What ``spottune run --deadline --budget-usd`` plans before it starts.

    Attributes
    ----------
    deadline_s : float
        Seconds from the start.
    budget_usd : float
    seer : SeerPlan or None
        In vCPU-seconds (None: not even one round fits).
    market : str
        The market whose expected price converts USD to vCPU-seconds.
    usd_per_vcpu_hour : tuple of float
        (10th percentile, mean, 90th percentile) spot price per vCPU-hour of ``market``.
    instance_types : tuple of str
        The instance type of each bracket (the cheapest per vCPU with ``P[i]`` vCPUs, else the largest below).
    seconds_per_step : tuple of float
        Seconds per step of each bracket's instance type.
    boot_s : float
    n_requested : int
        Trials the spec asks for.
    """

    deadline_s: float
    budget_usd: float
    seer: SeerPlan | None
    market: str
    usd_per_vcpu_hour: tuple[float, float, float]
    instance_types: tuple[str, ...]
    seconds_per_step: tuple[float, ...]
    boot_s: float
    n_requested: int

    n_affordable: int = 0
    lean: LeanPlan | None = None
    lean_error: str = ""

    @property
    def n_trials(self) -> int:
        """Trials the plan runs (SEER's sum of N at the smallest budget holding ``n_requested``; 0: none fits)."""
        return 0 if self.seer is None else self.seer.n_trials

    @property
    def feasible(self) -> bool:
        """The requested trials fit: ``1 <= n_requested <= n_affordable``."""
        return 1 <= self.n_requested <= self.n_affordable

    def cost_usd(self) -> tuple[float, float, float]:
        """(low, expected, high) USD of the plan: its vCPU-seconds at the three prices of ``usd_per_vcpu_hour``.

        Returns
        -------
        tuple of (float, float, float)
            USD at the 10th percentile, the mean and the 90th percentile of the price per vCPU-hour; zeros when no
            round fits.
        """
        vs = 0.0 if self.seer is None else self.seer.spend
        return tuple(vs / HOUR_S * p for p in self.usd_per_vcpu_hour)  # type: ignore[return-value]

    @property
    def expected_finish_s(self) -> float:
        """Seconds from the start to the end of the last round (<= ``deadline_s``)."""
        return 0.0 if self.seer is None else self.seer.round_ends[-1]

    def rungs(self) -> list[tuple[int, ...]]:
        """Per used bracket, the cumulative steps a surviving trial has at the end of each round (the
        launch's ``boot_s`` is spent once, in round 1).

        Returns
        -------
        list of tuple of int
            One tuple per bracket with trials, one entry (steps) per round; empty when no round fits.
        """
        out = []
        if self.seer is None:
            return out
        for i, n in enumerate(self.seer.trials):
            if n:
                out.append(tuple(max(0, int((e - self.boot_s) // self.seconds_per_step[i]))
                                 for e in self.seer.round_ends))
        return out

    def refusal(self) -> str:
        """One line: what is feasible (for an infeasible request).

        Returns
        -------
        str
            E.g. ``at most 12 trials by 6 h within 40 USD (the experiment has 16); ...``.
        """
        return (f"at most {self.n_affordable} trials by {format_duration(self.deadline_s)} within "
                f"{self.budget_usd:g} USD (the experiment has {self.n_requested}); lower num_samples or raise "
                "the deadline or the budget")

    def render(self, mode: str | None = None) -> str:
        """The plan as text: trials, brackets and rungs, expected cost with a band, expected finish, and the lean
        plan (DB15) when there is one.

        ``mode`` adds a last line saying what runs: ``"plan"``, the lean plan (SEER's brackets when no lean
        candidate fits); ``"seer"``, SEER's brackets (decision DB14); ``"guard"``, SpotTune's Algorithm 1 under
        the budget cap and the deadline guard; None (default) adds nothing.

        Parameters
        ----------
        mode : {"plan", "seer", "guard"}, optional
            See above.

        Returns
        -------
        str
            Several lines, no trailing newline.
        """
        lo, mid, hi = self.cost_usd()
        lines = [f"plan: deadline {format_duration(self.deadline_s)}, budget {self.budget_usd:g} USD "
                 f"(SEER, eta {self.seer.eta:g}; {self.usd_per_vcpu_hour[1]:.5f} USD per vCPU-hour "
                 f"expected on {self.market})" if self.seer else "plan: no round fits"]
        if self.seer is None:
            return "\n".join(lines)
        s = self.seer
        lines.append(f"trials: {self.n_requested} requested, {self.n_affordable} affordable; plan of {self.n_trials}: "
                     f"{s.rounds} rounds of {', '.join(format_duration(d) for d in s.round_durations)}")
        rungs = iter(self.rungs())
        for i, (n, p) in enumerate(zip(s.trials, s.parallelism)):
            if n:
                lines.append(f"  bracket {i + 1}: {n} trials on {self.instance_types[i]} ({p:g} vCPUs), "
                             f"live per round {[s.live(i, k + 1) for k in range(s.rounds)]}, "
                             f"rungs (steps) {list(next(rungs))}")
        lines.append(f"expected cost: {mid:.2f} USD (band {lo:.2f}-{hi:.2f}, 10th-90th price percentiles)")
        lines.append(f"expected finish: {format_duration(self.expected_finish_s)} after the start "
                     f"(deadline {format_duration(self.deadline_s)})")
        lean = self.lean
        if lean is not None:
            lines.append(self._render_lean(lean))
        elif self.lean_error:
            lines.append(f"lean plan: none ({self.lean_error})")
        if mode == "plan" and lean is not None:
            ends = ", ".join(format_duration(e) for e in _cumsum(lean.schedule.brackets[0].durations))
            lines.append(f"executed (deadline_mode plan): the lean plan ({lean.name}), rounds ending {ends} after the start "
                         "(wall clock); each trial checkpoints and relaunches every instance-hour and trains what fits "
                         "before its round's end after boot, restore, checkpoint and a noise reserve, at most to the "
                         "rung; elimination by EarlyCurve's predicted final value")
        elif mode in ("plan", "seer"):
            ends = ", ".join(format_duration(e) for e in s.round_ends)
            launch = ("each round is one launch per trial" if mode == "seer" else
                      "no lean plan fits, so SEER's; each trial relaunches every instance-hour")
            lines.append(f"executed (deadline_mode {mode}): these brackets and trials, rounds ending {ends} after the "
                         f"start (wall clock); {launch} and trains what fits before its round's end "
                         "after boot, restore, checkpoint and a noise reserve (the rungs are upper bounds); "
                         "elimination by EarlyCurve's predicted final value")
        elif mode == "guard":
            lines.append("not executed (deadline_mode guard): the run is SpotTune's Algorithm 1 (theta barrier, top-k) "
                         "under the budget cap and the deadline guard; the plan is SEER's estimate")
        return "\n".join(lines)

    @staticmethod
    def _render_lean(lean: LeanPlan) -> str:
        others = "; ".join(f"{n} {c:.2f} USD in {format_duration(f)}" + ("" if ok else " (does not fit)")
                           for n, c, f, ok in lean.considered if n != lean.name)
        types = lean.type_map
        if lean.name == "seer":
            shape = "SEER's brackets above, with hourly relaunches"
        else:
            (b,) = lean.schedule.brackets
            shape = ", then ".join(f"{m} trials to step {r} on {types[p]}" for m, r, p in zip(b.live, b.rungs, b.resources))
        return (f"lean plan (the cheapest that fits, DB15): {lean.name}: {shape}; expected cost {lean.cost_usd:.2f} USD, "
                f"expected finish {format_duration(lean.finish_s)} with the noise reserve; others: {others or 'none'}")


def _cumsum(xs: Sequence[float]) -> list[float]:
    out, t = [], 0.0
    for x in xs:
        t += x
        out.append(t)
    return out


def _bracket_type(vcpus: float, types: Sequence[tuple[str, int, float, float | None]]) -> tuple[str, int, float | None]:
    """The cheapest-per-vCPU type with exactly ``vcpus`` vCPUs, else the largest below it (else the smallest)."""
    exact = [t for t in types if t[1] == vcpus]
    below = [t for t in types if t[1] <= vcpus] or [min(types, key=lambda t: t[1])]
    pick = min(exact, key=lambda t: t[2]) if exact else max(below, key=lambda t: (t[1], -t[2]))
    return pick[0], pick[1], pick[3]


def plan_run(*, deadline_s: float, budget_usd: float, history: Any, catalog: Any, markets: Sequence[Any],
             start_s: float, window_s: float, reference_seconds_per_step: float, boot_s: float, n_requested: int,
             eta: float = SEER_ETA, nu: float = SEER_NU, max_steps: int | None = None, top_k: int = 3,
             theta: float = 0.7, overhead_s: float | None = None, step_time_cov: float = 0.0,
             hourly_hop: bool = True, delta_usd_per_hour: float = 0.01) -> RunPlan:
    """Plan a run under a deadline and a budget (SEER's Algorithms 2-3 in vCPU-seconds, see the module).

    Parameters
    ----------
    deadline_s : float
        Seconds from the start, > 0.
    budget_usd : float
        > 0.
    history : spotmarket.prices.PriceHistory
        Spot prices, USD per instance-hour.
    catalog : provisioner.InstanceCatalog
    markets : sequence of Market
        The pool.
    start_s, window_s : float
        Start (s since the epoch) and the length of the price window before it that gives the expected
        prices, seconds.
    reference_seconds_per_step : float
        The workload's seconds per step on the 2-vCPU reference instance.
    boot_s : float
        Launch-to-training latency, seconds.
    n_requested : int
        Trials the experiment asks for.
    eta, nu : float
        SEER's elimination rate and parallelism growth.
    max_steps : int, optional
        S_max. Given, the plan also holds the cost-lean plan (:func:`spottune.planning.lean_plan`, DB15) with
        ``top_k``, ``theta``, ``overhead_s`` (seconds of a launch not spent training; default ``boot_s``) and
        ``step_time_cov``, ``hourly_hop`` and ``delta_usd_per_hour`` (max price above the current price, DB9);
        SEER's schedule is one of its candidates. If no lean candidate fits, ``lean`` is
        None and ``lean_error`` says why.

    Returns
    -------
    RunPlan
        SEER's plan (``seer`` None when no round fits), the trials affordable, the expected cost band (USD) and,
        with ``max_steps``, the lean plan; an infeasible request is a plan with ``n_affordable < n_requested``
        (:meth:`RunPlan.refusal`).

    Raises
    ------
    ConfigError
        One line, on bad input: a deadline <= 0 or shorter than one step on the fastest instance of the
        pool, a budget <= 0 or below one instance-hour of the cheapest market at its expected price.
    """
    from spottune.speed import seconds_per_step

    res = resources(deadline_s=deadline_s, budget_usd=budget_usd, history=history, catalog=catalog, markets=markets,
                    start_s=start_s, window_s=window_s, reference_seconds_per_step=reference_seconds_per_step,
                    boot_s=boot_s, nu=nu)
    per_vcpu, types, p_min, p_max, t_min, B = (res.usd_per_vcpu_hour, res.types, res.p_min, res.p_max, res.t_min,
                                               res.budget_vcpu_s)
    m_best = res.market

    def seer_at(tm: float) -> SeerPlan | None:
        try:
            return seer_plan(deadline_s, B, eta=eta, nu=nu, p_min=p_min, p_max=p_max, t_min=tm)
        except ConfigError:
            return None

    seer = seer_at(t_min)
    n_affordable = 0 if seer is None else seer.n_trials
    if seer is not None and n_affordable > n_requested >= 1:
        # fewer trials asked than affordable: longer rounds (the largest t_min whose plan still holds
        # n_requested, by bisection), so the requested trials use the deadline; the excess is taken from
        # the largest brackets
        lo, hi = t_min, float(deadline_s)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            sp = seer_at(mid)
            lo, hi = (mid, hi) if sp is not None and sp.n_trials >= n_requested else (lo, mid)
        seer = seer_at(lo)
        n = list(seer.trials)
        while sum(n) > n_requested:
            n[max(range(len(n)), key=lambda i: n[i])] -= 1
        seer = dataclasses.replace(seer, trials=tuple(n))
    picks = [] if seer is None else [_bracket_type(p, types) for p in seer.parallelism]
    lean, lean_error = None, ""
    if max_steps is not None and 1 <= n_requested <= n_affordable:
        classes = instance_classes(res, reference_seconds_per_step)
        by_type = {c.instance_type: c for c in classes}
        seer_classes = {float(p): by_type[t] for p, (t, _, _) in zip(seer.parallelism, picks)}
        try:
            lean = lean_plan(n_trials=n_requested, max_steps=max_steps, top_k=top_k, theta=theta,
                             deadline_s=deadline_s, budget_usd=budget_usd, classes=classes,
                             overhead_s=boot_s if overhead_s is None else overhead_s, step_time_cov=step_time_cov,
                             seer=(seer_schedule(seer), seer_classes), hourly_hop=hourly_hop,
                             delta_usd_per_hour=delta_usd_per_hour)
        except ConfigError as exc:
            lean_error = str(exc)
    return RunPlan(deadline_s=float(deadline_s), budget_usd=float(budget_usd), seer=seer, market=str(m_best),
                   usd_per_vcpu_hour=per_vcpu, instance_types=tuple(t for t, _, _ in picks),
                   seconds_per_step=tuple(seconds_per_step(reference_seconds_per_step, v, e) for _, v, e in picks),
                   boot_s=float(boot_s), n_requested=int(n_requested), n_affordable=n_affordable, lean=lean,
                   lean_error=lean_error)


def instance_classes(res: Resources, reference_seconds_per_step: float) -> list[InstanceClass]:
    """Every instance type of the pool as an :class:`~spottune.planning.InstanceClass`: its cheapest zone's expected
    price (USD per instance-hour), its 90th price percentile (:attr:`Resources.high_usd_per_hour`) and the
    workload's seconds per step on it (the speed model).

    Parameters
    ----------
    res : Resources
        The pool's types and prices (:func:`resources`).
    reference_seconds_per_step : float
        The workload's seconds per step on the 2-vCPU reference instance (:mod:`spottune.speed`).

    Returns
    -------
    list of InstanceClass
        One per instance type, sorted by name.
    """
    from spottune.speed import seconds_per_step

    best: dict[str, InstanceClass] = {}
    high = dict(res.high_usd_per_hour)
    for t, v, per_vcpu, ecu in res.types:
        c = InstanceClass(t, int(v), seconds_per_step(reference_seconds_per_step, v, ecu), per_vcpu * v,
                          high.get(t))
        if t not in best or c.usd_per_hour < best[t].usd_per_hour:
            best[t] = c
    return [best[t] for t in sorted(best)]


@dataclass(frozen=True, slots=True)
class Resources:
    """The dollar budget as vCPU-seconds and the pool's vCPU ladder (DB2), shared by every elastic plan.

    Attributes
    ----------
    market : str
        The cheapest market per vCPU at its expected price.
    usd_per_vcpu_hour : tuple of float
        (10th percentile, mean, 90th percentile) of ``market``'s price per vCPU-hour.
    types : tuple of (instance type, vCPUs, expected USD per vCPU-hour, ECU)
    p_min, p_max : int
        The smallest vCPU count of the pool, and the largest ``p_min nu**i`` the pool has.
    t_min : float
        Boot plus one step on the ``p_min`` type, seconds.
    budget_vcpu_s : float
        The budget at the expected price of ``market``, vCPU-seconds.
    high_usd_per_hour : tuple of (instance type, USD per instance-hour)
        Per type, the 90th price percentile over the window of its cheapest zone (by that percentile): the lean
        plan's commitment uses it (DB15).
    """

    market: str
    usd_per_vcpu_hour: tuple[float, float, float]
    types: tuple[tuple[str, int, float, float | None], ...]
    p_min: int
    p_max: int
    t_min: float
    budget_vcpu_s: float
    high_usd_per_hour: tuple[tuple[str, float], ...] = ()

    def instance_type(self, vcpus: float) -> str:
        """The type a trial with ``vcpus`` resources runs on (cheapest per vCPU with that count, DB2).

        Parameters
        ----------
        vcpus : float
            A bracket's resources, vCPUs (one of ``p_min nu**i``).

        Returns
        -------
        str
            An instance type of the pool with exactly that many vCPUs.
        """
        return _bracket_type(vcpus, self.types)[0]


def resources(*, deadline_s: float, budget_usd: float, history: Any, catalog: Any, markets: Sequence[Any],
              start_s: float, window_s: float, reference_seconds_per_step: float, boot_s: float,
              nu: float = SEER_NU) -> Resources:
    """The budget in vCPU-seconds and the pool's vCPU ladder (see :func:`plan_run` for the parameters).

    Parameters
    ----------
    deadline_s, budget_usd, history, catalog, markets, start_s, window_s, reference_seconds_per_step, boot_s
        As in :func:`plan_run` (seconds, USD, USD per instance-hour).
    nu : float, default :data:`SEER_NU` (2)
        Growth factor of the vCPU ladder (SEER's ν).

    Returns
    -------
    Resources
        The budget in vCPU-seconds at the expected price, the vCPU ladder and the pool's prices.

    Raises
    ------
    ConfigError
        One line, on bad input (see :func:`plan_run`).
    """
    from spottune.speed import seconds_per_step

    if not (deadline_s > 0 and math.isfinite(deadline_s)):
        raise ConfigError(f"deadline is {deadline_s!r} s, but must be > 0")
    if not (budget_usd > 0 and math.isfinite(budget_usd)):
        raise ConfigError(f"budget_usd is {budget_usd!r}, but must be > 0")
    if not markets:
        raise ConfigError("plan: the pool has no market")
    lo_s = start_s - window_s
    rows = []  # (market, vcpus, mean USD/h, ecu)
    for m in markets:
        it = catalog[m.instance_type]
        rows.append((m, it.vcpus, float(history[m].mean_price(lo_s, start_s)), it.ecu))
    fastest = min(seconds_per_step(reference_seconds_per_step, v, e) for _, v, _, e in rows)
    if deadline_s < fastest:
        raise ConfigError(f"deadline is {format_duration(deadline_s)}, but one step takes {fastest:.3g} s on the "
                          "fastest instance of the pool")
    cheapest_hour = min(p for _, _, p, _ in rows)
    if budget_usd < cheapest_hour:
        raise ConfigError(f"budget_usd is {budget_usd:g}, but one instance-hour costs {cheapest_hour:.4f} USD at "
                          "the expected spot price of the cheapest market of the pool")
    m_best, v_best, p_best, _ = min(rows, key=lambda r: r[2] / r[1])
    grid = history[m_best].price_at(np.arange(lo_s, start_s, 60.0))
    q10, q90 = (float(x) for x in np.quantile(np.atleast_1d(grid), [0.1, 0.9]))
    per_vcpu = (q10 / v_best, p_best / v_best, q90 / v_best)
    types = sorted({(m.instance_type, v, p / v, e) for m, v, p, e in rows})
    counts = {v for _, v, _, _ in rows}
    p_min = p_max = min(counts)
    while p_max * nu in counts and nu > 1:  # P[i] = p_min nu**i must be a vCPU count of the pool
        p_max *= nu
    t_min = boot_s + seconds_per_step(reference_seconds_per_step, *_bracket_type(p_min, types)[1:])
    B = budget_usd / per_vcpu[1] * HOUR_S  # vCPU-seconds
    high: dict[str, float] = {}
    for m, _, _, _ in rows:
        q = float(np.quantile(np.atleast_1d(history[m].price_at(np.arange(lo_s, start_s, 60.0))), 0.9))
        high[m.instance_type] = min(high.get(m.instance_type, math.inf), q)
    return Resources(market=str(m_best), usd_per_vcpu_hour=per_vcpu, types=tuple(types), p_min=int(p_min),
                     p_max=int(p_max), t_min=float(t_min), budget_vcpu_s=float(B),
                     high_usd_per_hour=tuple(sorted(high.items())))
