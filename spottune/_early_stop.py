"""The orchestrator's early stopping: the rank-confidence rule (default) or the paper's EarlyCurve.

``stopper="rank"`` (issue 13): :class:`earlycurve.RankConfidenceStopping` at the rungs of
:data:`earlycurve.RUNG_FRACTIONS` that lie before the θ barrier, asked after every reported step
through the orchestrator's :class:`~spottune.orchestrator.StopRule` interface, and at the barrier
(θ is the last rung) the top-k by the **last observed value** (``earlycurve.LastValue``, which ranks
as well as or better than EarlyCurve on every recorded set, ``docs/earlycurve.md`` §3–§6) with the
plateau rule. In a fully parallel run no trial finishes before the barrier, so the rungs work in
the rule's *cohort* mode (a trial is stopped when ``top_k`` trials not stopped were lower at the same
rung).

``stopper="paper"``: SpotTune as published: no rungs, EarlyCurve's predicted final value (Eq 4–7,
paper settings) at θ, and the plateau rule.
"""

from __future__ import annotations

from typing import Any

from earlycurve import RUNG_FRACTIONS, RankConfidenceStopping, rungs_for
from spottune.experiment import STOPPERS

__all__ = ["STOPPERS", "RankStopRule", "early_stopping"]


class RankStopRule:
    """:class:`earlycurve.RankConfidenceStopping` as a :class:`spottune.orchestrator.StopRule`.

    Parameters
    ----------
    rungs : sequence of int
        Steps at which a trial may be stopped.
    max_steps : int
        ``S_max``; a report at this step records the trial as finished (never stopped).
    top_k : int
    seed : int, default=0

    Attributes
    ----------
    rule : earlycurve.RankConfidenceStopping
        ``rule.stopped`` maps each trial stopped early to its step.
    """

    def __init__(self, rungs: Any, max_steps: int, top_k: int, seed: int = 0) -> None:
        self.max_steps = int(max_steps)
        self.rule = RankConfidenceStopping(rungs, k=top_k, seed=seed)

    def should_stop(self, trial_id: str, step: int, loss: float) -> bool:
        """Record ``loss`` (loss scale) after ``step`` steps; True = stop the trial now."""
        if step >= self.max_steps:
            self.rule.complete(trial_id, loss)
            return False
        return self.rule.report(trial_id, step, loss)


def early_stopping(stopper: str, max_steps: int, theta_steps: int, top_k: int, seed: int = 0) -> tuple[Any, Any, Any]:
    """``(final-metric predictor, plateau rule, stop rule or None)`` of ``stopper`` (module docstring).

    Parameters
    ----------
    stopper : {"rank", "paper"}
    max_steps : int
        ``S_max``, steps.
    theta_steps : int
        Steps before the θ barrier (``max_steps`` when θ = 1); ``rank`` uses the rungs below it, and
        none when θ = 1 (θ = 1 trains every trial to the end, as in the paper).
    top_k : int
    seed : int, default=0

    Raises
    ------
    ValueError
        On an unknown ``stopper`` (the spec and the CLI check it first, with a ConfigError).
    """
    from earlycurve import EarlyCurve, LastValue, is_plateau

    plateau = lambda steps, values, smax: is_plateau(steps, values, smax)  # noqa: E731
    if stopper == "paper":
        return EarlyCurve(max_steps), plateau, None
    if stopper != "rank":
        raise ValueError(f"stopper is {stopper!r}, but must be one of {', '.join(STOPPERS)}")
    if theta_steps >= max_steps or max_steps < 2:  # θ = 1: no early stopping at all, as in the paper
        return LastValue(), plateau, None
    rungs = [r for r in rungs_for(max_steps, RUNG_FRACTIONS) if r < theta_steps]
    return LastValue(), plateau, (RankStopRule(rungs, max_steps, top_k, seed) if rungs else None)
