"""``EarlyCurveScheduler``: SpotTune's early stopping (rank confidence or predictive ASHA) as a Ray Tune trial scheduler.

Needs the optional extra ``spottune[ray]`` (``ray[tune]==2.60.0``). Ray is imported only when
``EarlyCurveScheduler`` is first used, so ``import spottune.integrations.ray`` works without Ray.
Use it like Ray's ``ASHAScheduler`` (``docs/design/earlycurve.md`` §7)::

    from ray import tune
    from spottune.integrations.ray import EarlyCurveScheduler

    tuner = tune.Tuner(train_fn, param_space=space,
                       tune_config=tune.TuneConfig(metric="acc", mode="max", num_samples=32,
                                                   scheduler=EarlyCurveScheduler(max_t=50)))

Every result ``(result[time_attr], result[metric])`` is passed to
:meth:`earlycurve.RankConfidenceStopping.report` (or :meth:`earlycurve.PredictiveStopping.report` with
``rule="predictive"``) (``mode="max"`` metrics negated into losses); a
trial whose ``time_attr`` reaches ``max_t`` is recorded as finished with its last metric and
stopped (as ``ASHAScheduler`` does); a trial that ends earlier on its own (``on_trial_complete``)
is recorded as finished with its last metric. The scheduler is a
``ray.tune.schedulers.FIFOScheduler`` (trials run in submission order) and depends on nothing of
spottune but :mod:`earlycurve`; it shares no code with a Ray *backend* of spottune.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from earlycurve import (
    RUNG_FRACTIONS,
    InvalidCurveError,
    PredictiveStopping,
    RankConfidenceStopping,
    predictive_settings,
    rungs_for,
)

__all__ = ["EarlyCurveScheduler"]

_CLASS: Any = None


def __getattr__(name: str) -> Any:  # PEP 562: build the Ray subclass on first use
    if name == "EarlyCurveScheduler":
        return _scheduler_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _scheduler_class() -> Any:
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    try:
        from ray.tune.schedulers import FIFOScheduler, TrialScheduler
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("EarlyCurveScheduler needs Ray Tune: pip install 'spottune[ray]'") from exc

    class EarlyCurveScheduler(FIFOScheduler):
        """A Ray Tune scheduler that stops a trial when it is unlikely to end in the top-k (module docstring).

        Parameters
        ----------
        time_attr : str, default="training_iteration"
            Result key counting a trial's progress (steps).
        metric : str, optional
            Result key of the metric; or from ``tune.TuneConfig(metric=...)``.
        mode : {"min", "max"}, optional
            Or from ``tune.TuneConfig(mode=...)``.
        max_t : int, default=100
            ``time_attr`` of a full trial; rungs at ``rung_fractions`` of it.
        rule : {"rank", "predictive"}, default="rank"
            :class:`earlycurve.RankConfidenceStopping` or :class:`earlycurve.PredictiveStopping`.
        rungs : sequence of int, optional
            Explicit rung values of ``time_attr`` (override the fractions).
        rung_fractions : sequence of float, optional
            Default: :data:`earlycurve.RUNG_FRACTIONS` (``rank``) or ``PREDICTIVE_DEFAULTS["fractions"]``.
        epsilon, k, sigma_scale, min_completed, cohort_keep, seed
            Of :class:`earlycurve.RankConfidenceStopping` (``rule="rank"``).
        predictive_options : mapping, optional
            Settings of predictive ASHA, keys :data:`earlycurve.PREDICTIVE_KEYS` (``fractions`` instead of
            ``rung_fractions``; the others of :class:`earlycurve.PredictiveStopping`), as ``spottune run
            --predictive-options``; default :data:`earlycurve.PREDICTIVE_DEFAULTS`. Checked by
            :func:`earlycurve.check_predictive_options`.
        prior : sequence of mapping of ``time_attr`` -> metric, optional
            Complete curves of earlier runs of the same model, in the metric's own direction (negated
            with ``mode="max"`` like the results); they calibrate the rule from the first rung on.

        Attributes
        ----------
        rule : earlycurve.RankConfidenceStopping or earlycurve.PredictiveStopping
            Its ``stopped`` maps trial id -> ``time_attr`` at which the trial was stopped early (or at
            which it failed / was removed: ``on_trial_error`` and ``on_trial_remove`` drop a trial that
            has not finished from later comparisons).

        Raises
        ------
        earlycurve.InvalidCurveError
            Bad rungs or rule parameters, ``max_t < 2``, an unknown ``rule`` or a ``prior`` with
            ``rule="predictive"``.
        ValueError
            ``mode`` not "min"/"max"; a trial added with no metric or mode set.
        """

        def __init__(self, time_attr: str = "training_iteration", metric: str | None = None, mode: str | None = None,
                     max_t: int = 100, *, rule: str = "rank", rungs: Sequence[int] | None = None,
                     rung_fractions: Sequence[float] | None = None, epsilon: float = 0.5, k: int = 3,
                     sigma_scale: float = 0.25, min_completed: int = 1, cohort_keep: float | None = None,
                     prior: Sequence[Mapping[int, float]] | None = None, seed: int = 0,
                     predictive_options: Mapping[str, Any] | None = None) -> None:
            super().__init__()
            if mode not in (None, "min", "max"):
                raise ValueError(f"mode is {mode!r}, but must be 'min' or 'max'")
            if rule not in ("rank", "predictive"):
                raise InvalidCurveError(f"rule is {rule!r}, but must be 'rank' or 'predictive'")
            if rule == "predictive" and prior:
                raise InvalidCurveError("prior curves are used by rule='rank' only")
            self._time_attr, self._metric, self._mode, self._max_t = time_attr, metric, mode, int(max_t)
            self._prior = [dict(c) for c in prior or ()]
            if rule == "predictive":
                fr, kw = predictive_settings(predictive_options, rung_fractions)
                self._make = lambda sign: PredictiveStopping(  # noqa: E731
                    rungs if rungs is not None else rungs_for(self._max_t, fr), **kw)
            else:
                fr = rung_fractions if rung_fractions is not None else RUNG_FRACTIONS
                self._make = lambda sign: RankConfidenceStopping(  # noqa: E731
                    rungs if rungs is not None else rungs_for(self._max_t, fr), epsilon=epsilon, k=k,
                    sigma_scale=sigma_scale, min_completed=min_completed, cohort_keep=cohort_keep, seed=seed,
                    prior=[{s: sign * float(v) for s, v in c.items()} for c in self._prior])
            self.rule = self._make(1.0)  # rebuilt with the prior negated once mode "max" is known

        def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
            """Take the metric and mode of ``tune.TuneConfig`` unless given to the constructor.

            Parameters
            ----------
            metric : str or None
                Result key of the metric.
            mode : {"min", "max"} or None
                Its direction.
            **spec
                Ray's other search properties (ignored).

            Returns
            -------
            bool
                False if the constructor already set a metric or mode this call would change, else True.
            """
            if (self._metric and metric) or (self._mode and mode):
                return False
            self._metric = self._metric or metric
            self._mode = self._mode or mode
            return True

        def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
            """Ray's callback for a new trial: check that a metric and a mode are known.

            Parameters
            ----------
            tune_controller : ray.tune.execution.tune_controller.TuneController
                Ray's controller (unused).
            trial : ray.tune.experiment.Trial
                The new trial.

            Raises
            ------
            ValueError
                If no metric or no mode ``min`` / ``max`` was given here or to ``tune.TuneConfig``.
            """
            if not self._metric or self._mode not in ("min", "max"):
                raise ValueError(f"EarlyCurveScheduler needs a metric and a mode 'min'/'max' (got {self._metric!r}, "
                                 f"{self._mode!r}): pass them here or to tune.TuneConfig()")
            if self._prior and self._mode == "max" and not getattr(self, "_signed", False):
                self.rule = self._make(-1.0)
            self._signed = True

        def _loss(self, result: dict) -> float | None:
            if self._time_attr not in result or self._metric not in result:
                return None
            value = float(result[self._metric])
            return -value if self._mode == "max" else value

        def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
            """Ray's callback for a reported result: ask the rule at a rung, complete the trial at ``max_t``.

            Parameters
            ----------
            tune_controller : ray.tune.execution.tune_controller.TuneController
                Ray's controller (unused).
            trial : ray.tune.experiment.Trial
                The trial that reported.
            result : dict
                The result; a result without ``time_attr`` or the metric is ignored.

            Returns
            -------
            str
                ``TrialScheduler.STOP`` (stopped early, or at ``max_t``) or ``TrialScheduler.CONTINUE``.
            """
            loss = self._loss(result)
            if loss is None:
                return TrialScheduler.CONTINUE
            t = int(result[self._time_attr])
            if t >= self._max_t:
                self.rule.complete(trial.trial_id, loss)
                return TrialScheduler.STOP
            return TrialScheduler.STOP if self.rule.report(trial.trial_id, t, loss) else TrialScheduler.CONTINUE

        def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
            """Ray's callback for a finished trial: its last value becomes a complete curve for the rule.

            Parameters
            ----------
            tune_controller : ray.tune.execution.tune_controller.TuneController
                Ray's controller (unused).
            trial : ray.tune.experiment.Trial
                The finished trial.
            result : dict
                Its last result (may be None).
            """
            loss = self._loss(result or {})
            if loss is not None and trial.trial_id not in self.rule.stopped:
                self.rule.complete(trial.trial_id, loss)

        def on_trial_error(self, tune_controller: Any, trial: Any) -> None:
            """Ray's callback for a failed trial: drop it from later comparisons.

            Parameters
            ----------
            tune_controller : ray.tune.execution.tune_controller.TuneController
                Ray's controller (unused).
            trial : ray.tune.experiment.Trial
                The failed trial.
            """
            self.rule.drop(trial.trial_id)  # a failed trial's early losses must not stop the others

        def on_trial_remove(self, tune_controller: Any, trial: Any) -> None:
            """Ray's callback for a removed trial: drop it from later comparisons.

            Parameters
            ----------
            tune_controller : ray.tune.execution.tune_controller.TuneController
                Ray's controller (unused).
            trial : ray.tune.experiment.Trial
                The removed trial.
            """
            self.rule.drop(trial.trial_id)

        def debug_string(self) -> str:
            """One line for Ray's status output.

            Returns
            -------
            str
                The rungs, the rule's settings and how many trials were stopped early.
            """
            if isinstance(self.rule, PredictiveStopping):
                what = f"predictive ASHA, keep {self.rule.keep_first}/{self.rule.keep}"
            else:
                what = f"epsilon {self.rule.epsilon}, top-{self.rule.k}"
            return f"Using EarlyCurveScheduler: rungs {list(self.rule.rungs)}, {what}; {len(self.rule.stopped)} trials stopped early."

    EarlyCurveScheduler.__module__ = __name__
    _CLASS = EarlyCurveScheduler
    return _CLASS
