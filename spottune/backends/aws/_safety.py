"""Spending caps checked before every launch, and the dry-run plan.

Two caps (``spottune run --max-usd-per-hour``, ``--budget-usd``):

- **hourly**: the max prices of the live instances plus the new one's, USD/hour, never above the cap. One
  instance whose max price alone exceeds it can never launch: ``CapExceeded`` ends the run; otherwise the
  launch is refused (``LaunchFailed``, retried by the orchestrator when others have ended).
- **budget**: USD billed so far plus an upper bound of what the live instances have accrued (max price x
  time alive) plus one hour of the new instance at its max price, never above the budget: else
  ``CapExceeded`` ends the run (every instance is terminated on the way out).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from spottune.errors import BackendError

__all__ = ["CapExceeded", "Plan", "check_caps", "plan"]


class CapExceeded(BackendError):
    """A spending cap makes every further launch impossible."""


def check_caps(*, max_price: float, live: Iterable[tuple[float, float]], now_s: float, spent_usd: float,
               max_usd_per_hour: float | None, budget_usd: float | None) -> str | None:
    """None if the launch may go ahead, or why it must wait (a refusal the orchestrator retries).

    Parameters
    ----------
    max_price : float
        The new instance's max price, USD/hour.
    live : iterable of (max_price USD/hour, started_s)
        The live instances.
    now_s : float
    spent_usd : float
        USD billed so far (ledger).
    max_usd_per_hour, budget_usd : float or None
        The caps (None: none).

    Raises
    ------
    CapExceeded
        If the launch could never go ahead (see the module docstring).
    """
    live = list(live)
    if max_usd_per_hour is not None:
        if max_price > max_usd_per_hour:
            raise CapExceeded(f"one instance at max price {max_price:.4f} USD/h exceeds --max-usd-per-hour "
                              f"{max_usd_per_hour:g}")
        running = sum(p for p, _ in live)
        if running + max_price > max_usd_per_hour + 1e-12:
            return (f"max-usd-per-hour cap: {running:.4f} USD/h of live instances + {max_price:.4f} "
                    f"> {max_usd_per_hour:g}")
    if budget_usd is not None:
        accrued = sum(p * max(0.0, now_s - t0) / 3600.0 for p, t0 in live)
        if spent_usd + accrued + max_price > budget_usd:
            raise CapExceeded(f"budget: {spent_usd:.4f} USD billed + {accrued:.4f} accrued + one hour at "
                              f"{max_price:.4f} USD/h would exceed --budget-usd {budget_usd:g}")
    return None


@dataclass(frozen=True, slots=True)
class Plan:
    """What a run would launch first: one (trial, market, max price USD/hour) per trial, and the bound."""

    launches: tuple[tuple[str, str, float], ...]

    @property
    def hourly_bound_usd(self) -> float:
        """Sum of the max prices: no hour of these instances can cost more (USD/hour)."""
        return float(sum(p for _, _, p in self.launches))

    def render(self, *, max_usd_per_hour: float | None = None, budget_usd: float | None = None) -> str:
        lines = ["dry run: nothing is launched", f"{'trial':<10} {'market':<36} {'max price USD/h':>16}"]
        lines += [f"{t:<10} {m:<36} {p:>16.5f}" for t, m, p in self.launches]
        lines.append(f"hourly cost bound (sum of max prices): {self.hourly_bound_usd:.5f} USD/h")
        if max_usd_per_hour is not None:
            lines.append(f"--max-usd-per-hour {max_usd_per_hour:g}: "
                         + ("ok" if self.hourly_bound_usd <= max_usd_per_hour else "launches would wait for the cap"))
        if budget_usd is not None:
            lines.append(f"--budget-usd {budget_usd:g}")
        return "\n".join(lines)


def plan(chooser: Any, trial_ids: Sequence[str], now_s: float, steps_left: float | None = None) -> Plan:
    """The first choice of every trial at ``now_s`` (the orchestrator's first round: fresh starts with
    ``steps_left`` steps to their first stop), without launching anything."""
    ids = list(trial_ids)
    if getattr(chooser, "plans_horizon", False) and steps_left is not None:
        choices = chooser.choose_many(ids, now_s, [float(steps_left)] * len(ids), [0] * len(ids))
    else:
        choices = chooser.choose_many(ids, now_s)
    return Plan(tuple((str(t), str(c.market), float(c.max_price_usd_per_hour)) for t, c in zip(trial_ids, choices)))
