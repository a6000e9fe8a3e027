"""Deadline-aware provisioning: move a trial to stable, fast capacity only when it must (F-S3).

A wrapper around the run's market chooser. At every launch decision of a trial it asks the inner chooser
(SpotTune's cheapest expected USD per step), then checks the deadline with the trial's worst-case remaining
work (to ``max_steps``):

- ``slack`` (default, "as late as possible"): the time left minus the time to finish on the **stable
  option** (the fastest instance type of the pool at a max price equal to its on-demand price: in the legacy
  market a spot instance is then revoked only when the spot price passes on-demand) is the slack; while
  it is at least ``margin_s`` (one hourly decision period plus a boot and a restore, at most 10 % of the
  deadline, by default) the inner choice stands, else the stable option is taken; a trial that cannot
  finish in time even on the stable option keeps the inner choice (switching would only cost more).
- ``uniform``: Can't Be Late's uniform-progress rule (Wu et al., NSDI'24, §4): the trial must have done at
  least ``elapsed / (deadline - start)`` of its work; behind that line it takes the stable option. It
  switches earlier (and pays more) than ``slack``; it is the anchor to compare with.

Limits: the replayed markets have no on-demand capacity, so "up to on-demand" is spot at the on-demand max
price (immune to price revocations in the legacy market, not to the modern market's capacity
interruptions). Source: F-S3; Can't Be Late (NSDI'24).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Sequence
from typing import Any

from spottune.errors import ConfigError

__all__ = ["DEADLINE_RULES", "DeadlineGuard"]

DEADLINE_RULES = ("slack", "uniform")


class DeadlineGuard:
    """A market chooser that meets a deadline: the inner chooser's choice unless the deadline is at risk.

    Parameters
    ----------
    inner : MarketChooser
        The run's chooser (its ``plans_horizon``, ``record_segment`` and other attributes are passed on).
    start_s, deadline_s : float
        Seconds since the epoch (UTC); ``deadline_s > start_s``.
    max_steps : int
        S_max: every trial's work is counted to ``max_steps`` (the worst case).
    markets : sequence of Market
        The pool.
    on_demand_usd_per_hour : callable (Market) -> float
        The on-demand price of a market's instance type in its region, USD/hour.
    seconds_per_step : callable (instance_type) -> float
        Seconds per step of the workload on an instance type.
    overhead_s : float
        Boot plus restore of one launch, seconds.
    margin_s : float, optional
        Slack kept in hand by ``slack`` (default: one hour + ``overhead_s``).
    rule : {"slack", "uniform"}
    max_stable_usd_per_hour : float, optional
        Only types whose on-demand price is at most this are stable options (the fastest of them is taken):
        under a budget cap that commits one hour at the max price, a stable option the budget cannot
        afford would stop the run instead of saving the deadline (DB11). None: every type.

    Raises
    ------
    ConfigError
        On a deadline not after the start, an empty pool, an unknown rule, or no type within
        ``max_stable_usd_per_hour``.
    """

    def __init__(self, inner: Any, *, start_s: float, deadline_s: float, max_steps: int, markets: Sequence[Any],
                 on_demand_usd_per_hour: Any, seconds_per_step: Any, overhead_s: float,
                 margin_s: float | None = None, rule: str = "slack", max_stable_usd_per_hour: float | None = None):
        if not deadline_s > start_s:
            raise ConfigError(f"deadline {deadline_s} is not after the start {start_s}")
        if rule not in DEADLINE_RULES:
            raise ConfigError(f"deadline rule is {rule!r}, but must be one of {', '.join(DEADLINE_RULES)}")
        if not markets:
            raise ConfigError("deadline guard: the pool has no market")
        self.inner, self.rule = inner, rule
        self.start_s, self.deadline_s, self.max_steps = float(start_s), float(deadline_s), int(max_steps)
        self.overhead_s = float(overhead_s)
        span = self.deadline_s - self.start_s
        self.margin_s = min(3600.0 + self.overhead_s, 0.1 * span) if margin_s is None else float(margin_s)
        if max_stable_usd_per_hour is not None:
            markets = [m for m in markets if on_demand_usd_per_hour(m) <= max_stable_usd_per_hour]
            if not markets:
                raise ConfigError(f"deadline guard: no instance type of the pool costs at most "
                                  f"{max_stable_usd_per_hour:g} USD/h on demand")
        speed = {m: float(seconds_per_step(m.instance_type)) for m in markets}
        fastest = min(speed.values())
        # among the fastest type's markets, the cheapest on-demand price (ties: the first in pool order)
        self.stable_market = min((m for m in markets if speed[m] == fastest), key=on_demand_usd_per_hour)
        self.stable_price = float(on_demand_usd_per_hour(self.stable_market))
        self.stable_seconds_per_step = fastest
        self.switches: list[tuple[Hashable, float]] = []  #: (trial, time) of every stable choice

    def __getattr__(self, name: str) -> Any:  # plans_horizon, record_segment, predictor, ...
        return getattr(self.inner, name)

    @property
    def exclusions(self) -> Any:
        """The inner chooser's market exclusions (set on the inner chooser, which is the one that skips them)."""
        return self.inner.exclusions

    @exclusions.setter
    def exclusions(self, value: Any) -> None:
        self.inner.exclusions = value

    def at_risk(self, now_s: float, resume_step: int) -> bool:
        """Whether a trial at ``resume_step`` steps must take the stable option at ``now_s`` (the module's rule).

        Parameters
        ----------
        now_s : float
            Decision time, seconds since the epoch (UTC).
        resume_step : int
            Steps the trial has done (its checkpoint's step).

        Returns
        -------
        bool
            True when the trial must move to the stable option now; False also when the deadline is lost even there.
        """
        left_steps = max(0, self.max_steps - int(resume_step))
        if self.rule == "uniform":
            share = min(1.0, max(0.0, (now_s - self.start_s) / (self.deadline_s - self.start_s)))
            return resume_step < math.floor(share * self.max_steps)
        need = self.overhead_s + left_steps * self.stable_seconds_per_step
        if need > self.deadline_s - now_s:  # lost even on the stable option: switching would only cost more
            return False
        return self.deadline_s - now_s - need < self.margin_s

    def choose(self, trial_id: Hashable, now_s: float, **kw: Any) -> Any:
        """The inner choice, or the stable option when :meth:`at_risk` (``resume_step`` keyword, default 0).

        Parameters
        ----------
        trial_id : hashable
            The trial to launch.
        now_s : float
            Decision time, seconds since the epoch (UTC).
        **kw
            The orchestrator's plan keywords (``steps_left``, ``resume_step``, ``heading``), passed to the inner chooser.

        Returns
        -------
        provisioner.Choice
            The market and max price (USD/hour); the stable one (``explanation.policy`` ``deadline:<rule>``) when at
            risk, and the switch is recorded in :attr:`switches`.
        """
        choice = self.inner.choose(trial_id, now_s, **kw)
        if not self.at_risk(now_s, int(kw.get("resume_step") or 0)):
            return choice
        self.switches.append((trial_id, float(now_s)))
        expl = getattr(choice, "explanation", None)
        if expl is not None and dataclasses.is_dataclass(expl):
            expl = dataclasses.replace(expl, policy=f"deadline:{self.rule}")
        return dataclasses.replace(choice, market=self.stable_market, max_price_usd_per_hour=self.stable_price,
                                   seconds_per_step=self.stable_seconds_per_step, explanation=expl,
                                   expected_step_cost_usd=None, p_revocation=None)

    def choose_many(self, trial_ids: Sequence[Hashable], now_s: float, *args: Any, **kw: Any) -> list[Any]:
        """The inner choices (the dry-run's first round: fresh starts, nothing at risk yet unless the rule says).

        Parameters
        ----------
        trial_ids : sequence of hashable
            The trials, in order.
        now_s : float
            Decision time, seconds since the epoch (UTC).
        *args, **kw
            Passed to the inner chooser.

        Returns
        -------
        list of provisioner.Choice
            In the order of ``trial_ids``.
        """
        out = list(self.inner.choose_many(trial_ids, now_s, *args, **kw))
        return [self._guard(c, now_s) for c in out]

    def _guard(self, choice: Any, now_s: float) -> Any:
        if not self.at_risk(now_s, 0):
            return choice
        return dataclasses.replace(choice, market=self.stable_market, max_price_usd_per_hour=self.stable_price,
                                   seconds_per_step=self.stable_seconds_per_step)
