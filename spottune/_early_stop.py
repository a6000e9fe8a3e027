"""The orchestrator's early stopping: the θ barrier by the last value (default), the paper's EarlyCurve, the
rank-confidence rule or predictive ASHA.

``stopper="rank"``: :class:`earlycurve.RankConfidenceStopping` at the rungs of
:data:`earlycurve.RUNG_FRACTIONS` that lie before the θ barrier, asked after every reported step
through the orchestrator's :class:`~spottune.orchestrator.StopRule` interface, and at the barrier
(θ is the last rung) the top-k by the **last observed value** (``earlycurve.LastValue``, which ranks
as well as or better than EarlyCurve on every recorded set, ``docs/design/earlycurve.md`` §3–§6) with the
plateau rule. In a fully parallel run no trial finishes before the barrier, so the rungs work in
the rule's *cohort* mode (a trial is stopped when ``top_k`` trials not stopped were lower at the same
rung).

``stopper="predictive"`` (``docs/design/earlycurve.md`` §8): :class:`earlycurve.PredictiveStopping`
with the shipped :data:`earlycurve.PREDICTIVE_DEFAULTS`, or the settings of the spec's ``predictive_options``
(``--predictive-options``; a family's own settings, chosen on tuning studies as for ASHA) (rungs at their fractions
of ``max_steps`` that lie before the θ barrier, every passed rung re-judged at every step, the slope-corrected score and the
optimistic bound against the best finished trial), then at the barrier the top-k by the last value,
as for ``rank``.

``stopper="barrier"`` (``docs/design/earlycurve.md`` §8.10): no rungs; every trial trains to the θ barrier
and the top-k by the last observed value continue (Algorithm 1's own early stopping with the last value instead of
EarlyCurve). With θ and ``top_k`` chosen on tuning studies (θ 0.1-0.2, keep 2-3 on the recorded sets) it met
the early-stopping cost target (at most 0.8x the cost of the best-tuned SHA/ASHA/Hyperband at mean top-3
accuracy ≥ 0.95) on opda-alexnet and cakelab. It is the default (design ES18): at the user's θ it costs what
``paper`` costs, and at θ 0.7 the trial it returns is among the true top-3 at least as often as with EarlyCurve on
every curve set measured (``docs/design/earlycurve.md`` §8.11).

``stopper="hparams"`` (``docs/design/earlycurve.md`` §8.19): ``barrier`` (with its rungs) with every barrier ranked
by :class:`earlycurve.HyperparameterCurvePredictor`, the final loss predicted from the trial's hyperparameters and its
curve so far, learned from previous runs of the same search space (:func:`hparams_predictor`; in ``spottune run`` the
``stopper_curves`` file, which must record each run's hyperparameters). Where the previous runs do not show that it
ranks better than the last value (cross-validated), a barrier falls back to the last value.

``stopper_curves`` (spec field, ``--stopper-curves``; ``rank``, ``predictive`` and ``barrier``): the top-k at the
barrier is ranked by :class:`earlycurve.ResidualCurvePredictor` fitted on a file of finished curves of the same
workload (:func:`learned_final_predictor`) instead of by the last value (``docs/design/earlycurve.md`` §8.7).

``stopper="paper"``: SpotTune as published: no rungs, EarlyCurve's predicted final value (Eq 4–7,
paper settings) at θ, and the plateau rule.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from earlycurve import RUNG_FRACTIONS, PredictiveStopping, RankConfidenceStopping, predictive_settings, rungs_for
from spottune.experiment import STOPPERS

__all__ = ["STOPPERS", "RankStopRule", "early_stopping", "hparams_predictor", "learned_final_predictor"]


class RankStopRule:
    """:class:`earlycurve.RankConfidenceStopping` (or another rule) as a :class:`spottune.orchestrator.StopRule`.

    Parameters
    ----------
    rungs : sequence of int
        Steps at which a trial may be stopped.
    max_steps : int
        ``S_max``; a report at this step records the trial as finished (never stopped).
    top_k : int
    seed : int, default=0
    rule : object with ``report(trial, step, loss) -> bool`` and ``complete(trial, final)``, optional
        The rule to drive (e.g. :class:`earlycurve.PredictiveStopping`); default
        ``RankConfidenceStopping(rungs, k=top_k, seed=seed)``.

    Attributes
    ----------
    rule : earlycurve.RankConfidenceStopping or earlycurve.PredictiveStopping
        ``rule.stopped`` maps each trial stopped early to its step.
    """

    def __init__(self, rungs: Any, max_steps: int, top_k: int, seed: int = 0, rule: Any = None) -> None:
        self.max_steps = int(max_steps)
        self.rule = rule if rule is not None else RankConfidenceStopping(rungs, k=top_k, seed=seed)

    def should_stop(self, trial_id: str, step: int, loss: float) -> bool:
        """Record ``loss`` (loss scale) after ``step`` steps; True = stop the trial now.

        Parameters
        ----------
        trial_id : str
            The trial.
        step : int
            Steps it has done.
        loss : float
            Its metric after ``step`` steps, in loss scale (lower is better; ``mode="max"`` metrics negated).

        Returns
        -------
        bool
            True: stop the trial now (ranked out at a rung).
        """
        if step >= self.max_steps:
            self.rule.complete(trial_id, loss)
            return False
        return self.rule.report(trial_id, step, loss)


def learned_final_predictor(path: str, seed: int = 0, stopper: str = "barrier", barriers: Sequence[float] = (),
                            max_steps: int | None = None, keys: Collection[str] | None = None) -> Any:
    """The predictor fitted on the finished curves of a curve file (``stopper_curves``):
    :class:`earlycurve.ResidualCurvePredictor`, or with ``stopper="hparams"`` :func:`hparams_predictor` on the curves
    and the hyperparameters the file records.

    Parameters
    ----------
    path : str
        A curve file in any layout :func:`earlycurve.evaluation.load_curves` reads (values a loss); each curve's
        last recorded step is its ``S_max``.
    seed : int, default=0
        ``random_state`` of the cross-validation (deterministic for a seed).
    stopper : str, default "barrier"
    barriers : sequence of float, default ()
        ``hparams``: the barriers' fractions of ``S_max`` (rungs and θ), where its models are fitted.
    max_steps : int, optional
        ``hparams``: the run's S_max; every curve of the file must end there (the model learns at fractions of S_max,
        which mean the same only for runs of the same length and schedule).
    keys : collection of str, optional
        ``hparams``: the live trials' hyperparameters (:func:`hparams_predictor`).

    Returns
    -------
    earlycurve.ResidualCurvePredictor or earlycurve.HyperparameterCurvePredictor or None
        Fitted on the file's curves (None: ``hparams`` with no barrier before S_max).

    Raises
    ------
    ConfigError
        The file is missing or unreadable, holds too few usable curves (fewer than 5 with a positive loss), or
        (``hparams``) records none of the trials' hyperparameters or runs of another S_max.
    """
    from earlycurve import EarlyCurveError, ResidualCurvePredictor
    from earlycurve.evaluation import load_curves
    from spottune.errors import ConfigError

    try:
        curves = load_curves(Path(path)).curves
        if stopper == "hparams":
            other = sorted({float(c.steps[-1]) for c in curves} - {float(max_steps)}) if max_steps else []
            if other:
                raise ConfigError(f"stopper 'hparams' learns at fractions of S_max, and the file's runs end at step(s) "
                                  f"{', '.join(f'{x:g}' for x in other[:3])}, not at max_steps {max_steps}")
            return hparams_predictor([(c.steps, c.values, float(c.steps[-1]), c.config) for c in curves], barriers, seed,
                                     keys)
        return ResidualCurvePredictor(random_state=seed).fit([(c.steps, c.values, float(c.steps[-1])) for c in curves])
    except (OSError, ValueError, EarlyCurveError) as e:  # ConfigError is a ValueError: the path is added
        raise ConfigError(f"stopper_curves {path!r}: {e}") from None


def hparams_predictor(previous: Sequence[tuple[Any, Any, float, Mapping[str, Any]]], barriers: Sequence[float],
                      seed: int = 0, keys: Collection[str] | None = None) -> Any:
    """:class:`earlycurve.HyperparameterCurvePredictor` fitted on previous runs, with one model per barrier.

    Parameters
    ----------
    previous : sequence of (steps, loss, max_steps, hyperparameters)
        Finished previous runs of the same search space (e.g. :attr:`spottune.evaluation.Study.extra`
        ``previous_runs``), values in loss scale.
    barriers : sequence of float
        The barriers' fractions of ``S_max`` (the rungs' and θ); those at or past S_max rank nothing and are dropped,
        and with none left (θ = 1) the answer is None.
    seed : int, default=0
    keys : collection of str, optional
        The hyperparameters the live trials have (their configs' keys): the model learns from these only, so a
        column of the previous runs that the trials lack (e.g. a recorded result) is never a feature.

    Returns
    -------
    earlycurve.HyperparameterCurvePredictor or None
        Fitted at the barriers before S_max; None when there is none (θ = 1).

    Raises
    ------
    ConfigError
        No run records one of ``keys`` (or any hyperparameter), or too few usable runs.
    """
    from earlycurve import EarlyCurveError, HyperparameterCurvePredictor
    from spottune.errors import ConfigError

    thetas = sorted({float(b) for b in barriers if 0 < b < 1})
    if not thetas:  # θ = 1: no barrier to rank
        return None
    configs = [dict(p[3]) if keys is None else {k: v for k, v in p[3].items() if k in keys} for p in previous]
    if not any(configs):
        raise ConfigError("stopper 'hparams' needs previous runs that record their hyperparameters"
                          + ("" if keys is None else f" ({', '.join(sorted(keys))})") + " (none do)")
    try:
        return HyperparameterCurvePredictor(thetas=thetas, random_state=seed).fit([p[:3] for p in previous], configs)
    except EarlyCurveError as e:
        raise ConfigError(f"stopper 'hparams': {e}") from None


def early_stopping(stopper: str, max_steps: int, theta_steps: int, top_k: int, seed: int = 0,
                   final_predictor: Any = None, predictive: Mapping[str, Any] | None = None) -> tuple[Any, Any, Any]:
    """``(final-metric predictor, plateau rule, stop rule or None)`` of ``stopper`` (module docstring).

    Parameters
    ----------
    stopper : {"paper", "rank", "predictive", "barrier", "hparams"}
    max_steps : int
        ``S_max``, steps.
    theta_steps : int
        Steps before the θ barrier (``max_steps`` when θ = 1); ``rank`` and ``predictive`` use the rungs
        below it, and none when θ = 1 (θ = 1 trains every trial to the end, as in the paper).
    top_k : int
    seed : int, default=0
    final_predictor : earlycurve.FinalMetricPredictor, optional
        ``rank``, ``predictive`` and ``barrier``: ranks the top-k at θ instead of :class:`earlycurve.LastValue` (e.g.
        :func:`learned_final_predictor`); ``hparams``: required, a fitted
        :class:`earlycurve.HyperparameterCurvePredictor` (:func:`hparams_predictor`), which the caller also gives the
        orchestrator as its ``rung_predictor``; ignored by ``paper`` and when θ = 1.
    predictive : mapping, optional
        ``predictive``: settings that replace :data:`earlycurve.PREDICTIVE_DEFAULTS`' (keys
        :data:`earlycurve.PREDICTIVE_KEYS`), as the spec and the policies check them
        (:func:`spottune.experiment.parse_predictive_options`); ignored by the other stoppers.

    Returns
    -------
    final_predictor : earlycurve.FinalMetricPredictor
        Ranks the trials at θ: EarlyCurve (``paper``), else the given predictor or the last value.
    plateau_rule : callable (steps, values, max_steps) -> bool
        :func:`earlycurve.is_plateau` (the paper's plateau rule, §III-C; decision D8).
    stop_rule : StopRule or None
        The rule asked after every step at the rungs before θ (``rank``, ``predictive``), or None.

    Raises
    ------
    ValueError
        On an unknown ``stopper`` (the spec and the CLI check it first, with a ConfigError), or ``hparams``
        without a ``final_predictor``.
    """
    from earlycurve import EarlyCurve, LastValue, is_plateau

    plateau = lambda steps, values, smax: is_plateau(steps, values, smax)  # noqa: E731
    if stopper == "paper":
        return EarlyCurve(max_steps), plateau, None
    if stopper not in ("rank", "predictive", "barrier", "hparams"):
        raise ValueError(f"stopper is {stopper!r}, but must be one of {', '.join(STOPPERS)}")
    if theta_steps >= max_steps or max_steps < 2:  # θ = 1: no early stopping at all, as in the paper
        return LastValue(), plateau, None
    if stopper == "hparams" and final_predictor is None:
        raise ValueError("stopper 'hparams' needs its fitted predictor (hparams_predictor)")
    at_theta = LastValue() if final_predictor is None else final_predictor
    if stopper in ("barrier", "hparams"):  # Algorithm 1's θ barrier (and rungs), by the last value or the model
        return at_theta, plateau, None
    if stopper == "predictive":
        fractions, kw = predictive_settings(predictive)
        rungs = [r for r in rungs_for(max_steps, fractions) if r < theta_steps]
        if not rungs:
            return at_theta, plateau, None
        return at_theta, plateau, RankStopRule(rungs, max_steps, top_k, seed, rule=PredictiveStopping(rungs, **kw))
    rungs = [r for r in rungs_for(max_steps, RUNG_FRACTIONS) if r < theta_steps]
    return at_theta, plateau, (RankStopRule(rungs, max_steps, top_k, seed) if rungs else None)
