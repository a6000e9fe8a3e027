"""Recorded studies of any size (``opda-alexnet:64``): what ``spottune simulate --workload`` and bench_deadline read."""

from __future__ import annotations

import pytest

from spottune.errors import ConfigError
from spottune.evaluation import load_study
from spottune.evaluation._studies import is_study


@pytest.mark.parametrize(("name", "ok"), [
    ("opda-alexnet", True), ("digits-mlp", True), ("opda-alexnet:64", True), ("opda-convnext:2", True),
    ("opda-alexnet:1", False), ("opda-alexnet:x", False), ("opda-alexnet:", False), ("digits-mlp:64", False),
    ("nope", False), ("opda-alexnet:64:2", False),
])
def test_is_study(name, ok):
    assert is_study(name) is ok


def test_a_sized_recorded_study_samples_that_many_configurations():
    study = load_study("opda-alexnet:64", seed=3)
    assert study.trial_ids == [f"t{i:02d}" for i in range(64)]
    assert len({c["iteration"] for c in study.configs.values()}) == 64
    assert all(len(study.curves[t]) == 50 for t in study.trial_ids)
    assert study.source.startswith("opda_alexnet_imagenet_tuning.jsonl.gz: 64 of ")
    same = load_study("opda-alexnet", seed=3, n_configs=64)  # the size in the name is n_configs
    assert same.configs == study.configs and same.curves == study.curves


def test_a_size_beyond_the_recorded_curves_is_refused():
    with pytest.raises(ConfigError, match=r"opda-alexnet: only \d+ complete curves, 100000 asked"):
        load_study("opda-alexnet:100000")
