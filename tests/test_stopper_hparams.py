"""Stopper ``hparams`` end to end (decision ES21, docs/design/earlycurve.md §8.19): curve files give their runs'
hyperparameters, a simulated study learns from the runs it did not sample, and its rungs keep the trials the learned
model ranks first."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from earlycurve.evaluation import load_curves
from spottune._early_stop import hparams_predictor, learned_final_predictor
from spottune.errors import ConfigError
from spottune.evaluation._studies import learning_curves_dir, load_study
from spottune.experiment import ExperimentSpec

CONVNEXT = learning_curves_dir() / "opda_convnext-tiny_imagenet_tuning.jsonl.gz"
HYPER = {"epochs", "batch_size", "lr", "lr_peak_epoch", "momentum", "weight_decay", "label_smoothing"}


def test_curve_files_give_each_runs_hyperparameters(tmp_path):
    opda = load_curves(CONVNEXT).curves[0]
    assert set(opda.config) == HYPER
    path = tmp_path / "c.csv"
    path.write_text("config_id,step,value,max_steps,lr,optimizer\n"
                    "a,1,0.9,2,0.01,adam\na,2,0.5,2,0.01,adam\nb,1,0.8,2,,sgd\nb,2,0.7,2,,sgd\n")
    a, b = load_curves(path).curves
    assert a.config == {"lr": 0.01, "optimizer": "adam"} and b.config == {"optimizer": "sgd"}  # an empty field: absent
    assert load_curves(learning_curves_dir() / "cakelab_resnet32_cifar10_curves.csv.gz").curves[0].config == {}


def test_a_study_learns_from_the_recorded_runs_it_did_not_sample():
    study = load_study("opda-convnext", seed=3)
    previous = study.extra["previous_runs"]
    with gzip.open(CONVNEXT, "rt") as fh:
        n_complete = sum('"nan_train_loss": false' in line and '"learning_curve": []' not in line for line in fh)
    assert len(previous) == 288 - 16 and n_complete >= 288
    own = {tuple(sorted((k, c[k]) for k in HYPER)) for c in study.configs.values()}
    assert not own & {tuple(sorted(cfg.items())) for _, _, _, cfg in previous}  # leave-study-out
    steps, loss, s_max, _ = previous[0]
    assert s_max == study.max_steps == 50 and steps.tolist() == list(range(1, 51)) and loss.shape == (50,)
    assert load_study("builtin-logreg", seed=0).extra["previous_runs"][0][3].keys() == {"lr", "l2"}


def test_previous_runs_without_hyperparameters_are_refused_and_theta_one_needs_no_model():
    grid = np.arange(1.0, 5.0)
    with pytest.raises(ConfigError, match="record their hyperparameters"):
        hparams_predictor([(grid, np.ones(4), 4, {})] * 8, [0.5])
    assert hparams_predictor([(grid, np.ones(4), 4, {})] * 8, []) is None
    with pytest.raises(ConfigError, match="stopper_curves"):
        learned_final_predictor(str(learning_curves_dir() / "cakelab_resnet32_cifar10_curves.csv.gz"), 0, "hparams",
                                [0.5])


def test_only_the_trials_hyperparameters_are_learned_from_and_barriers_at_s_max_rank_nothing(tmp_path):
    grid = np.arange(1.0, 11.0)
    rng = np.random.default_rng(0)
    runs = [(grid, np.exp(-a * grid / 10), 10, {"a": float(a), "final_loss": float(np.exp(-a))})
            for a in rng.uniform(0.5, 3.0, 40)]
    model = hparams_predictor(runs, [0.2, 1.0], 0, keys={"a", "seed"})  # a recorded result is not a feature
    assert model.thetas == (0.2,) and model.encoder_.columns_ == [("a", "linear")]
    assert hparams_predictor(runs, [1.0], 0) is None  # θ's barrier at S_max: nothing to rank (as θ = 1)
    with pytest.raises(ConfigError, match=r"record their hyperparameters \(lr\)"):
        hparams_predictor(runs, [0.2], 0, keys={"lr"})
    path = tmp_path / "runs.csv"
    path.write_text("config_id,step,value,max_steps,a\n" + "".join(
        f"c{i},{s},{v},{n},{cfg['a']}\n" for i, (g, vals, n, cfg) in enumerate(runs) for s, v in zip(g, vals)))
    assert learned_final_predictor(str(path), 0, "hparams", [0.2], 10, {"a"}).thetas == (0.2,)
    with pytest.raises(ConfigError, match="not at max_steps 50"):
        learned_final_predictor(str(path), 0, "hparams", [0.2], 50, {"a"})


def test_spottune_run_gives_the_model_and_the_trials_configs_to_the_orchestrator(tmp_path):
    from spottune.compose import build

    path = learning_curves_dir() / "builtin" / "builtin_logreg_curves.csv.gz"
    spec = ExperimentSpec(workload="logreg", stopper="hparams", stopper_curves=str(path), theta=0.2, top_k=2,
                          rungs="0.1:6", predictor="constant")
    exp = build(spec, output=tmp_path / "out")
    orch = exp.orchestrator
    assert orch.rung_predictor is orch.predictor and orch.predictor.thetas == (0.1, 0.2)
    assert orch.configs == {t.trial_id: t.config for t in spec.trials()} and set(orch.configs["t00"]) == {"lr", "l2"}


def test_the_spec_needs_previous_runs_and_takes_rungs():
    with pytest.raises(ConfigError, match="stopper_curves"):
        ExperimentSpec(stopper="hparams")
    spec = ExperimentSpec(stopper="hparams", stopper_curves=str(CONVNEXT), theta=0.2, top_k=2, rungs="0.04:6")
    assert spec.rungs == ((0.04, 6),)


def test_simulated_rungs_keep_the_trials_the_learned_model_ranks_first():
    from spottune.evaluation import Task
    from spottune.compose import get_policy
    from spottune.evaluation._runner import environment, replay
    from spotmarket.prices import to_seconds

    start = to_seconds("2015-05-05T00:00Z")
    task = Task(workload="opda-convnext", policy="spottune-0.2-constant", start_index=0, start_s=start,
                market_mode="legacy", seed=1, train_lo_s=start - 4 * 86400, train_hi_s=start, stopper="hparams",
                rungs="0.04:6", top_k=2, instance_types=("r3.large", "c3.xlarge"))
    env = environment(task.workload, task.seed, task.market_mode, None, None, task.instance_types, None)
    study = env["study"]
    asm, record, _ = replay(task, get_policy(task.policy, stopper="hparams", rungs="0.04:6"), env, study)
    trials = asm.orchestrator.trials
    assert sorted(tr.step for tr in trials.values()) == [2] * 10 + [10] * 4 + [50] * 2  # rung keeps 6, θ keeps 2
    past_rung = {t for t, tr in trials.items() if tr.step > 2}
    # the same model, fitted again on the same previous runs, ranks the trials at the rung's step 2
    model = hparams_predictor(study.extra["previous_runs"], [2 / 50, 10 / 50], task.seed)
    assert model.use_model_[0.04]
    grid = np.arange(1.0, 3.0)
    predicted = {t: model.predict_final(grid, np.array([c["loss"] for c in study.curves[t][:2]]), 50,
                                        config=study.configs[t]).value for t in study.trial_ids}
    assert past_rung == set(sorted(predicted, key=predicted.get)[:6])
    by_last_value = set(sorted(study.trial_ids, key=lambda t: study.curves[t][1]["loss"])[:6])
    assert past_rung != by_last_value  # the ranking is not the last value's: the test can tell them apart
    assert len(asm.orchestrator.top_k) == 2 and record.end_s is not None
