"""spottune.integrations.ray.EarlyCurveScheduler: unit decisions, and a real local Ray Tune run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests._digits_sgd import EPOCHS, accuracy_curve

ROOT = Path(__file__).resolve().parents[1]
ray = pytest.importorskip("ray")
pytestmark = pytest.mark.solo  # `make test` runs it after the parallel tests, alone (pyproject.toml: markers)
from ray import tune  # noqa: E402

from spottune.integrations.ray import EarlyCurveScheduler  # noqa: E402

#: 16 configurations (alpha, eta0) of the digits SGD workload, log-uniform from a seeded generator.
_rng = np.random.default_rng(0)
CONFIGS = [(float(10 ** _rng.uniform(-5, -1)), float(10 ** _rng.uniform(-4, 0))) for _ in range(16)]


def test_importing_the_module_does_not_import_ray():
    code = "import sys, spottune.integrations.ray as m; assert 'ray' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_scheduler_decisions_without_a_cluster():
    s = EarlyCurveScheduler(metric="acc", mode="max", max_t=10, rungs=(2,), k=1)
    a, b = SimpleNamespace(trial_id="a"), SimpleNamespace(trial_id="b")
    s.on_trial_add(None, a)
    assert s.on_trial_result(None, a, {"training_iteration": 2, "acc": 0.9}) == "CONTINUE"
    # b is lower (accuracy 0.8 -> loss -0.8 > -0.9) at the same rung, k = 1: stopped (cohort mode)
    assert s.on_trial_result(None, b, {"training_iteration": 2, "acc": 0.8}) == "STOP"
    assert s.on_trial_result(None, a, {"training_iteration": 10, "acc": 0.95}) == "STOP"  # max_t reached
    assert s.rule.stopped == {"b": 2}
    c = SimpleNamespace(trial_id="c")
    s.on_trial_result(None, c, {"training_iteration": 1, "acc": 0.99})
    s.on_trial_error(None, c)  # a failed trial leaves the comparison; a finished one stays
    s.on_trial_remove(None, a)
    assert s.rule.stopped == {"b": 2, "c": 1}
    with pytest.raises(ValueError):
        EarlyCurveScheduler().on_trial_add(None, a)  # no metric/mode anywhere


def test_scheduler_predictive_rule_without_a_cluster():
    from earlycurve import InvalidCurveError

    s = EarlyCurveScheduler(metric="acc", mode="max", max_t=10, rule="predictive", rungs=(2,),
                            predictive_options=dict(keep_first=0.5, keep=0.5, slope=0.0, bound_k=0))
    t = {n: SimpleNamespace(trial_id=n) for n in "abcd"}
    s.on_trial_add(None, t["a"])
    r = lambda n, it, acc: s.on_trial_result(None, t[n], {"training_iteration": it, "acc": acc})  # noqa: E731
    assert r("a", 2, 0.90) == "CONTINUE"
    assert r("b", 2, 0.80) == "STOP"      # 2 at the rung, 1 lower needed: a
    assert r("c", 2, 0.95) == "CONTINUE"  # 3 at the rung, 2 lower needed
    assert r("a", 3, 0.91) == "CONTINUE"  # rung 2 re-judged: only c lower
    assert r("d", 2, 0.97) == "CONTINUE"
    assert r("a", 4, 0.92) == "STOP"      # rung 2 re-judged: c and d lower of 4
    assert s.rule.stopped == {"b": 2, "a": 4}
    assert "predictive ASHA" in s.debug_string()
    with pytest.raises(InvalidCurveError):
        EarlyCurveScheduler(rule="asha")


def _train(config):
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.linear_model import SGDClassifier
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xtr, Xva, ytr, yva = train_test_split(X / 16.0, y, test_size=0.3, random_state=0)
    alpha, eta0 = config["cfg"]
    clf = SGDClassifier(loss="log_loss", alpha=alpha, learning_rate="constant", eta0=eta0, random_state=0)
    for _ in range(config["epochs"]):
        clf.partial_fit(Xtr, ytr, classes=np.arange(10))
        tune.report({"acc": float(clf.score(Xva, yva))})


@pytest.mark.slow
def test_real_ray_tune_run_prunes_some_trials_and_keeps_the_best(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # stay on loopback
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})  # workers import this module
    try:
        scheduler = EarlyCurveScheduler(max_t=EPOCHS)
        tuner = tune.Tuner(_train, param_space={"cfg": tune.grid_search(CONFIGS), "epochs": EPOCHS},
                           tune_config=tune.TuneConfig(metric="acc", mode="max", scheduler=scheduler,
                                                       max_concurrent_trials=1, reuse_actors=True),
                           run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0))
        grid = tuner.fit()
    finally:
        ray.shutdown()
    df = grid.get_dataframe()
    cfgs = [tuple(c) for c in df["config/cfg"]]
    steps = dict(zip(cfgs, df["training_iteration"]))
    finals = {c: accuracy_curve(*c)[-1] for c in CONFIGS}  # had nobody been stopped (same computation)
    best = max(finals, key=finals.get)
    assert len(df) == 16 and not grid.errors
    assert steps[best] == EPOCHS  # the true best trained to the end
    assert sorted(CONFIGS.index(c) for c, s in steps.items() if s < EPOCHS) == [5, 6, 7, 9, 10, 12, 13, 15]  # exact for seed 0
    assert len(scheduler.rule.stopped) == 8 and set(scheduler.rule.stopped.values()) == {2}  # removals of finished
    # or stopped trials (Ray calls on_trial_remove after a STOP) add nothing
    assert tuple(grid.get_best_result().config["cfg"]) == best == CONFIGS[11]
