"""Recorded studies of any size (``opda-alexnet:64``): what ``spottune simulate --workload`` and bench_deadline read."""

from __future__ import annotations

import pytest

from spottune.errors import ConfigError
from spottune.evaluation import load_study
from spottune.evaluation._studies import is_study


@pytest.mark.parametrize(("name", "ok"), [
    ("opda-alexnet", True), ("digits-mlp", True), ("opda-alexnet:64", True), ("opda-convnext:2", True),
    ("opda-alexnet:1", False), ("opda-alexnet:x", False), ("opda-alexnet:", False), ("digits-mlp:64", False),
    ("nope", False), ("opda-alexnet:64:2", False), ("cakelab-resnet32", True), ("cakelab-resnet32:8", True),
    ("builtin-digits-mlp", True), ("builtin-logreg:32", True), ("builtin-linear-svm", True), ("builtin-gbt", False),
    ("opda-alexnet@test", True), ("cakelab-resnet32@tuning", True), ("builtin-logreg:32@test", True),
    ("opda-alexnet@train", False), ("opda-alexnet@", False), ("digits-mlp@test", False), ("nope@test", False),
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


def test_the_cakelab_study_replays_recorded_points_on_16_progress_steps():
    study = load_study("cakelab-resnet32", seed=0)
    assert study.max_steps == 16 and study.trial_ids == [f"t{i:02d}" for i in range(16)]
    assert study.source == "cakelab_resnet32_cifar10_curves.csv.gz: 16 of 386 complete curves, seed 0"
    assert study.checkpoint_size_mb == 3.7 and study.metric == "loss" and study.mode == "min"
    # t00 is 1ps2v#4: recorded at 0, 4006, 8007, ... 64001 iterations; step k sits at k/16 of 64001
    assert study.configs["t00"]["curve_id"] == "data/training/experiment_1ps_vs_2ps/1ps2v/train_data.csv#4"
    first = 0.1014999970793724 + 4000.0625 / 4006 * (0.5817000269889832 - 0.1014999970793724)
    assert study.curves["t00"][0]["loss"] == pytest.approx(1 - first, abs=1e-12)
    assert study.curves["t00"][-1]["accuracy"] == pytest.approx(0.9300000071525574, abs=1e-12)
    # seconds per step: the wall time from the first to the last record over the 16 steps
    assert study.reference_seconds_per_step["t00"] == pytest.approx((1551000890.899483 - 1550998575.268866) / 16)
    four = load_study("cakelab-resnet32:4", seed=0)
    assert four.max_steps == 16 and four.trial_ids == ["t00", "t01", "t02", "t03"]
    assert len(load_study("cakelab-resnet32", seed=0, max_steps=32).curves["t05"]) == 32
    assert load_study("cakelab-resnet32", seed=1).configs != study.configs


def test_a_random_search_builtin_study_samples_the_recorded_curves_at_the_workloads_speed():
    study = load_study("builtin-digits-mlp", seed=0)
    assert study.max_steps == 50 and study.trial_ids == [f"t{i:02d}" for i in range(16)]
    assert study.source == "builtin_digits-mlp_curves.csv.gz: 16 of 128 random-search curves, seed 0"
    assert (study.metric, study.mode, study.checkpoint_size_mb) == ("val_cross_entropy", "min", 100.0)
    # t00 is digits-mlp-001 (read from the file): progress step k of 50 is real step 6k of the workload's 300
    assert study.configs["t00"] == {"config_id": "digits-mlp-001", "lr": 0.019858672199578317, "hidden": 32,
                                    "batch_size": 8}
    assert study.curves["t00"][0]["val_cross_entropy"] == 2.2555062770843506
    assert study.curves["t00"][-1]["val_cross_entropy"] == 0.5888087153434753
    # every trial runs at the workload's 60 s per real step: 6 real steps per progress step
    assert set(study.reference_seconds_per_step.values()) == {360.0}
    assert len(load_study("builtin-logreg:32", seed=3).trial_ids) == 32
    assert load_study("builtin-digits-mlp", seed=1).configs != study.configs


# the halves of the step benchmarks' split (earlycurve.evaluation.split_pool, seed 0) over each set's curve file
HALF_SETS = {"opda-alexnet": "opda_alexnet_imagenet_tuning.jsonl.gz",
             "opda-convnext": "opda_convnext-tiny_imagenet_tuning.jsonl.gz",
             "cakelab-resnet32": "cakelab_resnet32_cifar10_curves.csv.gz",
             "builtin-digits-mlp": "builtin/builtin_digits-mlp_curves.csv.gz",
             "builtin-logreg": "builtin/builtin_logreg_curves.csv.gz",
             "builtin-linear-svm": "builtin/builtin_linear-svm_curves.csv.gz"}


def _config_key(config: dict) -> str:
    """The recorded curve a trial replays: opda's iteration, cakelab's and the random searches' curve id."""
    return str(config.get("iteration", config.get("curve_id", config.get("config_id"))))


@pytest.mark.parametrize("name", sorted(HALF_SETS))
def test_a_half_study_samples_only_its_half_of_the_step_benchmarks_split(name):
    from earlycurve.evaluation import StudyPool, load_curves, split_pool
    from spottune.evaluation._studies import learning_curves_dir

    curves = load_curves(learning_curves_dir() / HALF_SETS[name], name)
    pool = StudyPool.from_curves(curves, 16)
    halves = {h: {c.curve_id.rpartition("#")[2] if name.startswith("opda") else c.curve_id
                  for c in (curves.curves[i] for i in rows)} for h, rows in split_pool(pool, 0).items()}
    assert halves["tuning"].isdisjoint(halves["test"]) and len(halves["tuning"]) == len(curves.curves) // 2
    seen = {}
    for half in ("tuning", "test"):
        keys = [_config_key(c) for seed in range(3) for c in load_study(f"{name}@{half}", seed).configs.values()]
        assert set(keys) <= halves[half], half
        seen[half] = set(keys)
    assert len(seen["tuning"]) > 16 and len(seen["test"]) > 16  # the seeds sample different configurations
    assert load_study(f"{name}@test", 3).source.endswith("(the test half), seed 3")
    whole = load_study(name, 3)  # without a half: the whole file, as before
    assert "half" not in whole.source


def test_a_half_too_small_for_the_study_is_refused():
    with pytest.raises(ConfigError, match=r"opda-alexnet: only 182 complete curves, 200 asked"):
        load_study("opda-alexnet:200@tuning")
    with pytest.raises(ConfigError, match=r"digits-mlp@test: only a recorded study has halves"):
        load_study("digits-mlp@test")  # a built-in workload trains its own curves: it has no halves
    with pytest.raises(ConfigError, match=r"opda-alexnet@half: the half must be one of tuning, test"):
        load_study("opda-alexnet@half")


@pytest.mark.parametrize(("name", "max_steps"), [("opda-alexnet:24@test", None), ("cakelab-resnet32", None),
                                                  ("builtin-logreg", 20), ("logreg", None), ("digits-mlp", 7)])
def test_the_study_shape_is_the_loaded_studys(name, max_steps):
    from spottune.evaluation._studies import study_shape

    study = load_study(name, 1, max_steps=max_steps)
    assert study_shape(name, 1, max_steps) == (len(study.trial_ids), study.max_steps)


def test_a_curve_file_is_read_once_and_again_once_it_changed(tmp_path, monkeypatch):
    """Studies of one file share its parsed curves (a benchmark builds one per seed and half); a changed file (here:
    only its first 20 configurations kept) is read again, so the studies follow the file."""
    import gzip
    import shutil

    from spottune.evaluation import _studies

    src = _studies.learning_curves_dir() / "builtin" / "builtin_logreg_curves.csv.gz"
    dst = tmp_path / "learning_curves" / "builtin" / src.name
    dst.parent.mkdir(parents=True)
    shutil.copyfile(src, dst)
    monkeypatch.setenv("SPOTTUNE_DATA", str(tmp_path))
    _studies._read_recorded.cache_clear()
    assert load_study("builtin-logreg", seed=0).source.startswith(f"{src.name}: 16 of 128 random-search curves")
    assert load_study("builtin-logreg", seed=1).configs != load_study("builtin-logreg", seed=0).configs
    assert _studies._read_recorded.cache_info().misses == 1  # three studies, one read
    lines = gzip.decompress(src.read_bytes()).decode().splitlines()
    kept = [lines[0]] + [x for x in lines[1:] if int(x.split(",")[0].rpartition("-")[2]) < 20]
    dst.write_bytes(gzip.compress(("\n".join(kept) + "\n").encode()))
    assert load_study("builtin-logreg", seed=0).source.startswith(f"{src.name}: 16 of 20 random-search curves")
    assert _studies._read_recorded.cache_info().misses == 2
