"""spottune.integrations.optuna.EarlyCurvePruner in a real Optuna study on a real small workload."""

from __future__ import annotations

import optuna
import pytest

from earlycurve import InvalidCurveError
from spottune.integrations.optuna import EarlyCurvePruner
from tests._digits_sgd import EPOCHS, accuracy_curve

N_TRIALS = 16


def _objective(trial: optuna.Trial) -> float:
    alpha = trial.suggest_float("alpha", 1e-5, 1e-1, log=True)
    eta0 = trial.suggest_float("eta0", 1e-4, 1.0, log=True)
    curve = accuracy_curve(alpha, eta0)
    for epoch, acc in enumerate(curve, start=1):
        trial.report(acc, epoch)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return curve[-1]


def test_pruner_prunes_some_trials_and_keeps_the_true_best():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=2),
                                pruner=EarlyCurvePruner(max_resource=EPOCHS))
    study.optimize(_objective, n_trials=N_TRIALS)
    trials = study.trials
    finals = [accuracy_curve(t.params["alpha"], t.params["eta0"])[-1] for t in trials]  # had nobody been pruned
    best = max(finals)
    states = [t.state for t in trials]
    pruned = [t.number for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    assert len(trials) == N_TRIALS
    assert pruned == [4, 8, 9, 10, 11, 13, 14, 15]  # exact for seed 2; the true best is trial 7 (0.9574)
    assert all(states[i] == optuna.trial.TrialState.COMPLETE for i, f in enumerate(finals) if f == best)
    assert study.best_value == best
    # pruned trials stopped at a rung (rungs_for(20) = 2, 4, 8, 14): their last reported step
    assert {trials[i].last_step for i in pruned} <= {2, 4, 8, 14}
    assert sum(len(t.intermediate_values) for t in trials) == 176  # of 16 x 20: 8 full runs + 8 pruned at step 2


def test_auto_max_resource_prunes_nothing_before_a_trial_finishes():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=EarlyCurvePruner())
    trial = study.ask()
    for step in range(1, 5):
        trial.report(0.1, step)
        assert trial.should_prune() is False


def test_bad_settings_are_refused_at_construction():
    with pytest.raises(InvalidCurveError):
        EarlyCurvePruner(epsilon=0.0)
    with pytest.raises(InvalidCurveError):
        EarlyCurvePruner(rungs=(4, 2))


PREDICTIVE = dict(keep_first=0.375, keep=0.25, slope=1.0, bound_k=1, bound_quantile=0.1)
#: exact for seed 2, rungs 2 and 6 of 20 epochs, one trial at a time: trials 2, 4, 8–11 and 13–15 are stopped at
#: epoch 1, before the first rung, by the optimistic bound (trials 0 and 1 have finished); 12 at epoch 2, 5 and 6 at 3
PRUNED_PREDICTIVE = [2, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15]
STEPS_PREDICTIVE = 97  # of 16 x 20 epochs (176 with the rank rule)


def test_predictive_rule_prunes_some_trials_and_keeps_the_true_best():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruner = EarlyCurvePruner(max_resource=EPOCHS, rule="predictive", rung_fractions=(0.1, 0.3),
                              predictive_options=PREDICTIVE)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=2), pruner=pruner)
    study.optimize(_objective, n_trials=N_TRIALS)
    trials = study.trials
    finals = [accuracy_curve(t.params["alpha"], t.params["eta0"])[-1] for t in trials]
    pruned = [t.number for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    assert study.best_value == max(finals)  # the true best (trial 7) trained to the end
    assert pruned == PRUNED_PREDICTIVE
    assert sum(len(t.intermediate_values) for t in trials) == STEPS_PREDICTIVE


def test_predictive_rule_settings_are_checked():
    with pytest.raises(InvalidCurveError):
        EarlyCurvePruner(rule="asha")
    with pytest.raises(InvalidCurveError):
        EarlyCurvePruner(rule="predictive", predictive_options={"keep": 0.0})
    with pytest.raises(InvalidCurveError, match="unknown predictive option kep"):
        EarlyCurvePruner(rule="predictive", predictive_options={"kep": 0.5})
    with pytest.raises(InvalidCurveError, match="given twice"):
        EarlyCurvePruner(rule="predictive", rung_fractions=[0.1], predictive_options={"fractions": [0.2]})
    # the spec's form (fractions inside the options) gives the same rungs as rung_fractions
    pruner = EarlyCurvePruner(50, rule="predictive", predictive_options={"fractions": [0.1, 0.3], "keep": 0.25})
    assert pruner._rungs == EarlyCurvePruner(50, rule="predictive", rung_fractions=[0.1, 0.3])._rungs == (5, 15)
    assert pruner._kwargs["keep"] == 0.25
    with pytest.raises(InvalidCurveError):
        EarlyCurvePruner(rule="predictive", prior=[{1: 0.5}])
