"""``EarlyCurvePruner``: SpotTune's early stopping (rank confidence or predictive ASHA) as an Optuna pruner.

Use it like any Optuna pruner (``docs/design/earlycurve.md`` §7)::

    pruner = EarlyCurvePruner(max_resource=50)          # rungs at 10, 20, 40, 70 % of 50 steps
    study = optuna.create_study(direction="maximize", pruner=pruner)
    # in the objective: trial.report(value, step); if trial.should_prune(): raise optuna.TrialPruned()

At each rung (the first reported step at or after it) the trial is judged by
:meth:`earlycurve.RankConfidenceStopping.decide` on a snapshot of the study read from its storage:
finished trials (``COMPLETE``) calibrate the beliefs and count with their final value, ``PRUNED``
trials are out, ``RUNNING`` trials count with their belief at their latest rung. The pruner keeps no
state of its own, so it works with any storage and with parallel workers, like Optuna's own pruners.
With ``rule="predictive"`` (:class:`earlycurve.PredictiveStopping`, ``docs/design/earlycurve.md`` §8) the trial
is judged at every report (its passed rungs are re-judged, and the optimistic bound is checked against
the finished trials); ``PRUNED`` trials then still count at the rungs they reached, as in ASHA.
A trial's *final* value is its last intermediate value (its ``value`` if it reported none).
``direction="maximize"`` values are negated into losses. Multi-objective studies are refused (as
Optuna's own pruners do).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import optuna
from optuna.pruners import BasePruner
from optuna.trial import TrialState

from earlycurve import (
    RUNG_FRACTIONS,
    InvalidCurveError,
    PredictiveStopping,
    RankConfidenceStopping,
    predictive_settings,
    rungs_for,
)

__all__ = ["EarlyCurvePruner"]


class EarlyCurvePruner(BasePruner):
    """An Optuna pruner that stops a trial when it is unlikely to end in the study's top-k.

    Parameters
    ----------
    max_resource : int or "auto", default="auto"
        Steps of a full trial; rungs at ``rung_fractions`` of it (:func:`earlycurve.rungs_for`).
        ``"auto"``: the largest last step of the finished trials (nothing is pruned before one
        finished), as ``SuccessiveHalvingPruner(min_resource="auto")`` does.
    rule : {"rank", "predictive"}, default="rank"
        :class:`earlycurve.RankConfidenceStopping` or :class:`earlycurve.PredictiveStopping`.
    rungs : sequence of int, optional
        Explicit rung steps (override ``max_resource``).
    rung_fractions : sequence of float, optional
        Default: :data:`earlycurve.RUNG_FRACTIONS` (``rank``) or ``PREDICTIVE_DEFAULTS["fractions"]``.
    epsilon, k, sigma_scale, min_completed, cohort_keep, seed
        Of :class:`earlycurve.RankConfidenceStopping` (``rule="rank"``).
    predictive_options : mapping, optional
        Settings of predictive ASHA, keys :data:`earlycurve.PREDICTIVE_KEYS` (``fractions`` instead of
        ``rung_fractions``; ``keep_first``, ``keep``, ``slope``, ``bound_k``, ``bound_quantile``, ``guard``,
        ``retro`` of :class:`earlycurve.PredictiveStopping`), as ``spottune run --predictive-options``; default
        :data:`earlycurve.PREDICTIVE_DEFAULTS`. Checked by :func:`earlycurve.check_predictive_options`.
    prior : sequence of mapping of step -> value, optional
        Complete curves of earlier runs of the same model, in the study's own values and steps (a
        maximized value is negated like the study's); they calibrate the rule from the first rung on.

    Raises
    ------
    earlycurve.InvalidCurveError
        Bad rungs or rule parameters (at construction), ``max_resource`` not ``"auto"`` nor an int ≥ 2,
        an unknown ``rule``, or a ``prior`` with ``rule="predictive"``.
    ValueError
        Used on a multi-objective study.
    """

    def __init__(self, max_resource: int | str = "auto", *, rule: str = "rank", rungs: Sequence[int] | None = None,
                 rung_fractions: Sequence[float] | None = None, epsilon: float = 0.5, k: int = 3,
                 sigma_scale: float = 0.25, min_completed: int = 1, cohort_keep: float | None = None,
                 prior: Sequence[Mapping[int, float]] | None = None, seed: int = 0,
                 predictive_options: Mapping[str, object] | None = None) -> None:
        if rule not in ("rank", "predictive"):
            raise InvalidCurveError(f"rule is {rule!r}, but must be 'rank' or 'predictive'")
        if rule == "predictive" and prior:
            raise InvalidCurveError("prior curves are used by rule='rank' only")
        self._kind = rule
        self._prior = [dict(c) for c in prior or ()]
        if rule == "predictive":
            self._fractions, self._kwargs = predictive_settings(predictive_options, rung_fractions)
        else:
            self._fractions = tuple(rung_fractions if rung_fractions is not None else RUNG_FRACTIONS)
            self._kwargs = dict(epsilon=epsilon, k=k, sigma_scale=sigma_scale, min_completed=min_completed,
                                cohort_keep=cohort_keep, seed=seed)
        self._rungs: tuple[int, ...] | None = None
        if rungs is not None:
            self._rungs = tuple(rungs)
        elif max_resource != "auto":
            self._rungs = rungs_for(int(max_resource), self._fractions)
        self._cache: dict[tuple, RankConfidenceStopping | PredictiveStopping] = {}
        self._rule(self._rungs or (1,), 1.0)  # checks the parameters now

    def _rule(self, rungs: tuple[int, ...], sign: float) -> RankConfidenceStopping | PredictiveStopping:
        """The rule for these rungs, its prior in loss scale (values × ``sign``)."""
        key = (rungs, sign)
        if key not in self._cache:
            if self._kind == "predictive":
                self._cache[key] = PredictiveStopping(rungs, **self._kwargs)
            else:
                prior = [{s: sign * float(v) for s, v in c.items()} for c in self._prior]
                self._cache[key] = RankConfidenceStopping(rungs, prior=prior, **self._kwargs)
        return self._cache[key]

    def prune(self, study: optuna.study.Study, trial: optuna.trial.FrozenTrial) -> bool:
        """Whether ``trial`` should stop at its last reported step (module docstring).

        Parameters
        ----------
        study : optuna.study.Study
            The single-objective study; its trials' intermediate values are the curves compared.
        trial : optuna.trial.FrozenTrial
            The trial that just reported.

        Returns
        -------
        bool
            True: prune the trial now.

        Raises
        ------
        ValueError
            On a multi-objective study.
        """
        if len(study.directions) > 1:
            raise ValueError("EarlyCurvePruner does not support multi-objective studies")
        if not trial.intermediate_values:
            return False
        sign = -1.0 if study.direction == optuna.study.StudyDirection.MAXIMIZE else 1.0
        if (self._kind == "rank" and self._rungs is not None
                and self._rule(self._rungs, sign).rung_to_judge(trial.intermediate_values) is None):
            return False  # not at a rung: nothing to read from the storage
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING))
        curves, finals, stopped = {}, {}, set()
        for t in trials:
            if t.number == trial.number:
                continue
            curves[t.number] = {int(s): sign * float(v) for s, v in t.intermediate_values.items()}
            if t.state == TrialState.COMPLETE:
                last = max(t.intermediate_values) if t.intermediate_values else None
                value = t.intermediate_values[last] if last is not None else t.value
                if value is not None:
                    finals[t.number] = sign * float(value)
            elif t.state == TrialState.PRUNED:
                stopped.add(t.number)
        curves[trial.number] = {int(s): sign * float(v) for s, v in trial.intermediate_values.items()}
        rungs = self._rungs
        if rungs is None:
            done = [max(t.intermediate_values) for t in trials if t.state == TrialState.COMPLETE and t.intermediate_values]
            if not done or max(done) < 2:
                return False
            rungs = rungs_for(max(done), self._fractions)
        rule = self._rule(rungs, sign)
        return rule.decide(trial.number, curves, finals, stopped, order={n: n for n in curves}).stop
