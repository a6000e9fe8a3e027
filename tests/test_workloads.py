"""Built-in workloads: registry, declared attributes, 16 configurations, and real training that improves."""

from __future__ import annotations

import time

import numpy as np
import pytest

from spottune.errors import ConfigError
from spottune.trainable import Trainable
from spottune.workloads import Workload, get_workload, list_workloads

NAMES = ["digits-mlp", "logreg", "linreg", "linear-svm", "gbt"]


def test_registry_lists_the_five_builtins():
    assert list_workloads() == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_declared_attributes(name):
    w = get_workload(name)
    assert isinstance(w, Workload) and w.name == name and issubclass(w.trainable, Trainable)
    assert w.mode == "min" and w.metric.startswith("val_") and w.max_steps >= 100
    assert w.n_configs() == len(w.configs()) == 16
    assert w.reference_seconds_per_step >= 10 and w.checkpoint_size_mb > 0
    assert w.reference_seconds_per_step * w.max_steps >= 2 * 3600  # a trial spans hours of simulated time
    assert w.description


@pytest.mark.parametrize("name", NAMES)
def test_metric_improves_with_training(name):
    w = get_workload(name)
    config = w.configs()[len(w.configs()) // 2 + 1]
    t = w.make(config, seed=0)
    n = min(w.max_steps, 60)
    start = time.perf_counter()
    curve = [t.train()[w.metric] for _ in range(n)]
    per_step_ms = (time.perf_counter() - start) / n * 1e3
    assert all(np.isfinite(curve))
    assert np.mean(curve[-5:]) < 0.8 * curve[0], (config, curve[0], curve[-5:])
    assert per_step_ms < 50  # a few ms on an idle core; generous for a loaded CI machine


def test_digits_mlp_learning_rate_decays_in_stages():
    w = get_workload("digits-mlp")
    t = w.make({"lr": 0.2, "hidden": 32, "batch_size": 8}, seed=0, max_steps=20)
    lrs = [t.train()["lr"] for _ in range(20)]
    # milestones after 30 % and 60 % of max_steps (steps 6 and 12); "lr" is the rate the step used
    assert lrs[0] == 0.2 and lrs[5] == pytest.approx(0.2) and lrs[6] == pytest.approx(0.02)
    assert lrs[11] == pytest.approx(0.02) and lrs[12] == pytest.approx(0.002) and lrs[-1] == pytest.approx(0.002)


def test_digits_mlp_leaves_the_global_torch_state_alone():
    import torch

    threads = torch.get_num_threads()
    rng_state = torch.get_rng_state().clone()
    t = get_workload("digits-mlp").make({"lr": 0.1, "hidden": 32, "batch_size": 8}, seed=1)
    t.train()
    assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), rng_state)


def test_same_seed_same_curve_other_seed_differs():
    w = get_workload("gbt")
    cfg = w.configs()[5]
    a = [w.make(cfg, seed=1).train()[w.metric] for _ in range(2)]
    run = lambda seed: [m[w.metric] for m in (lambda t: [t.train() for _ in range(5)])(w.make(cfg, seed=seed))]  # noqa: E731
    assert a[0] == a[1] and run(1) == run(1) and run(1) != run(2)


def test_unknown_and_custom_workloads():
    with pytest.raises(ConfigError, match="did you mean 'logreg'"):
        get_workload("logreg2")
    with pytest.raises(ConfigError, match="cannot be imported"):
        get_workload("no.such.module:Thing")
    with pytest.raises(ConfigError, match="must be a Workload or a Trainable subclass"):
        get_workload("math:pi")
    w = get_workload("spottune.workloads._gbt:GBT")
    assert w.trainable.__name__ == "GBT" and w.metric is None and w.max_steps is None
    assert get_workload("spottune.workloads._gbt:WORKLOAD") is get_workload("gbt")
