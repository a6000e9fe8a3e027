"""Spending caps checked before every launch (:mod:`spottune.backends._caps`, shared by every backend), and
the dry-run plan.

Two caps (``spottune run --max-usd-per-hour``, ``--budget-usd``):

- **hourly**: the max prices of the live instances plus the new one's, USD/hour, never above the cap. One
  instance whose max price alone exceeds it can never launch: ``CapExceeded`` ends the run; otherwise the
  launch is refused (``LaunchFailed``, retried by the orchestrator when others have ended).
- **budget**: USD billed so far plus what the live instances have accrued plus the rest of their current hour
  and one hour of the new instance, both at their max prices, never above the budget (decision DB5, the
  driver's check in every backend, also at each hour boundary of a live instance): else the run stops, every
  live instance is ended and the best trials so far are kept.

:meth:`Plan.render` says, before anything runs, how the first launches meet both caps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spottune.backends._caps import CapExceeded, check_caps  # noqa: F401 - re-exported (spottune.backends.aws)

__all__ = ["CapExceeded", "Plan", "check_caps", "plan"]


@dataclass(frozen=True, slots=True)
class Plan:
    """What a run would launch first: one (trial, market, max price USD/hour) per trial, and the bound.

    Parameters
    ----------
    launches : tuple of (str, str, float)
        (trial id, market, max price USD/hour), in trial order.
    """

    launches: tuple[tuple[str, str, float], ...]

    @property
    def hourly_bound_usd(self) -> float:
        """Sum of the max prices: no hour of these instances can cost more (USD/hour)."""
        return float(sum(p for _, _, p in self.launches))

    def render(self, *, max_usd_per_hour: float | None = None, budget_usd: float | None = None) -> str:
        """The plan as text: one line per launch, the hourly bound and how it meets the caps.

        Parameters
        ----------
        max_usd_per_hour : float, optional
            The run's ``--max-usd-per-hour``, USD/hour: says whether the first launches fit under it.
        budget_usd : float, optional
            The run's ``--budget-usd``, USD: the verdict of the budget guard (DB5) on the first launches, in
            trial order (each commits its first hour at its max price; a launch held back by the hourly cap
            commits nothing yet): ok with what is left, or the launch at which the run would stop.

        Returns
        -------
        str
            Several lines, no trailing newline.
        """
        lines = ["dry run: nothing is launched", f"{'trial':<10} {'market':<36} {'max price USD/h':>16}"]
        lines += [f"{t:<10} {m:<36} {p:>16.5f}" for t, m, p in self.launches]
        lines.append(f"hourly cost bound (sum of max prices): {self.hourly_bound_usd:.5f} USD/h")
        if max_usd_per_hour is not None:
            lines.append(f"--max-usd-per-hour {max_usd_per_hour:g}: "
                         + ("ok" if self.hourly_bound_usd <= max_usd_per_hour else "launches would wait for the cap"))
        if budget_usd is not None:
            lines.append(self.budget_verdict(budget_usd, max_usd_per_hour))
        return "\n".join(lines)

    def budget_verdict(self, budget_usd: float, max_usd_per_hour: float | None = None) -> str:
        """One line: whether the budget guard (decision DB5) lets the first launches go.

        Each launch, in trial order, commits its first hour at its max price; a launch the hourly cap holds back
        commits nothing yet (it waits). The guard stops the run at the first launch whose commitment would
        take the total above the budget.

        Parameters
        ----------
        budget_usd : float
            ``--budget-usd``, USD.
        max_usd_per_hour : float, optional
            ``--max-usd-per-hour``, USD/hour.

        Returns
        -------
        str
            ``--budget-usd B: ok ...`` or ``--budget-usd B: the run would stop at its start ...``.
        """
        committed, waiting, running = 0.0, 0, 0.0
        for i, (trial, _, price) in enumerate(self.launches):
            if max_usd_per_hour is not None and running + price > max_usd_per_hour + 1e-12:
                waiting += 1
                continue
            if committed + price > budget_usd:
                return (f"--budget-usd {budget_usd:g}: the run would stop at its start: launch {i + 1} of "
                        f"{len(self.launches)} ({trial}) would commit {committed + price:.5f} USD (first hours at "
                        f"max price) > {budget_usd:g}, and nothing would be trained; raise --budget-usd, run fewer "
                        "trials or cheaper instance types")
            committed += price
            running += price
        held = f", {waiting} launch(es) waiting for the hourly cap" if waiting else ""
        return (f"--budget-usd {budget_usd:g}: ok, the first launches commit {committed:.5f} USD (first hours at "
                f"max price{held}), {budget_usd - committed:.5f} USD left; the guard checks again before every "
                "launch and at every instance-hour")


def plan(chooser: Any, trial_ids: Sequence[str], now_s: float, steps_left: float | None = None) -> Plan:
    """The first choice of every trial at ``now_s`` (the orchestrator's first round: fresh starts with
    ``steps_left`` steps to their first stop, all of them heading there), without launching anything.

    Parameters
    ----------
    chooser : provisioner.MarketChooser
        The run's market chooser.
    trial_ids : sequence of str
        The trials, in launch order.
    now_s : float
        Decision time, seconds since the epoch (UTC).
    steps_left : float, optional
        Steps to the first stop (θ·S_max), for a chooser that plans the horizon.

    Returns
    -------
    Plan
        Nothing is launched.
    """
    ids = list(trial_ids)
    if getattr(chooser, "plans_horizon", False) and steps_left is not None:
        choices = chooser.choose_many(ids, now_s, [float(steps_left)] * len(ids), [0] * len(ids), [len(ids)] * len(ids))
    else:
        choices = chooser.choose_many(ids, now_s)
    return Plan(tuple((str(t), str(c.market), float(c.max_price_usd_per_hour)) for t, c in zip(trial_ids, choices)))
