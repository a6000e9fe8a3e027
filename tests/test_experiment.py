"""ExperimentSpec: defaults, validation at construction, YAML round trip, CLI overrides."""

from __future__ import annotations

import dataclasses
import re

import pandas as pd
import pytest

from spottune.errors import ConfigError
from spottune.experiment import ExperimentSpec, TrialSpec
from spottune.search_space import grid_search


def test_default_experiment_is_digits_mlp_on_the_2015_trace():
    spec = ExperimentSpec()
    assert (spec.workload, spec.theta, spec.top_k, spec.backend, spec.market_mode) == ("digits-mlp", 0.7, 3, "sim", "legacy")
    assert spec.prices == "us-east-1_2015.csv.gz" and spec.instance_types is None and spec.availability_zones is None
    assert (spec.metric, spec.mode, spec.max_steps, spec.n_trials) == ("val_cross_entropy", "min", 300, 16)
    assert spec.theta_steps == 210  # ceil(0.7 * 300), not 211 from floating-point noise


def test_trials_have_stable_ids_configs_and_distinct_seeds():
    trials = ExperimentSpec().trials()
    assert [t.trial_id for t in trials[:3]] == ["t00", "t01", "t02"] and len(trials) == 16
    assert len({t.seed for t in trials}) == 16 and trials == ExperimentSpec().trials()
    assert isinstance(trials[0], TrialSpec) and trials[0].config == {"lr": 0.05, "hidden": 32, "batch_size": 8}
    assert [t.seed for t in ExperimentSpec(seed=1).trials()] != [t.seed for t in trials]


@pytest.mark.parametrize("kwargs, message", [
    ({"theta": 1.5}, "theta is 1.5, but must be 0 < theta <= 1"),
    ({"theta": 0}, "theta is 0.0, but must be 0 < theta <= 1"),
    ({"top_k": 0}, "top_k is 0, but must be an integer with 1 <= top_k <= 16"),
    ({"top_k": 17}, "top_k is 17, but must be an integer with 1 <= top_k <= 16"),
    ({"mode": "maximize"}, "mode is 'maximize', but must be 'min' or 'max'"),
    ({"max_steps": 0}, "max_steps is 0, but must be an integer >= 1"),
    ({"backend": "dask"}, "backend is 'dask', but must be one of sim, local, aws, ray"),
    ({"market_mode": "2017"}, "market_mode is '2017', but must be one of legacy, modern"),
    ({"max_failures": -1}, "max_failures is -1, but must be an integer >= 0"),
    ({"seed": -3}, "seed is -3, but must be an integer >= 0"),
    ({"time_scale": 0}, "time_scale is 0.0, but must be a number > 0"),
    ({"checkpoint_keep": 0}, "checkpoint_keep is 0, but must be an integer >= 1"),
    ({"instance_types": []}, "instance_types is [], but must be a non-empty list"),
    ({"workload": "digit-mlp"}, "did you mean 'digits-mlp'"),
    ({"start_utc": "yesterday-ish"}, "start_utc is 'yesterday-ish', but must be a time"),
    ({"search_space": {"lr": {"uniform": [1, 0]}}}, "uniform is [1, 0], but must have lo < hi"),
    ({"billing": "minute"}, "billing is 'minute', but must be one of second, hour"),
])
def test_invalid_values_raise_config_error_naming_value_and_rule(kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        ExperimentSpec(**kwargs)


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError):
        ExperimentSpec(theta=2.0)


def test_yaml_round_trip(tmp_path):
    spec = ExperimentSpec(workload="logreg", search_space={"lr": grid_search([0.01, 0.1]), "l2": {"loguniform": [1e-4, 1e-1]}},
                          num_samples=3, theta=0.8, top_k=2, instance_types=("r3.large", "c3.xlarge"),
                          start_utc="2015-05-05T00:00Z", storage_path="s3://bucket/prefix",
                          storage_options={"endpoint_url": "http://127.0.0.1:1"}, seed=7, backend="local")
    path = tmp_path / "exp.yaml"
    spec.to_yaml(path)
    back = ExperimentSpec.from_yaml(path)
    assert back == spec
    assert back.start_utc == pd.Timestamp("2015-05-05", tz="UTC") and back.n_trials == 6
    assert back.trials() == spec.trials()


def test_yaml_file_with_aliases_and_hyphens(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("trainable: gbt\ntop-k: 2\nzones: us-east-1a, us-east-1b\nstart: 2015-06-01 12:00\ntheta: 1\n")
    spec = ExperimentSpec.from_yaml(path)
    assert (spec.workload, spec.top_k, spec.theta, spec.metric, spec.max_steps) == ("gbt", 2, 1.0, "val_mse", 200)
    assert spec.availability_zones == ("us-east-1a", "us-east-1b") and spec.theta_steps == 200
    assert spec.start_utc == pd.Timestamp("2015-06-01 12:00", tz="UTC")


def test_bad_yaml_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        ExperimentSpec.from_yaml(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("theta: [0.7\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        ExperimentSpec.from_yaml(tmp_path / "bad.yaml")
    (tmp_path / "typo.yaml").write_text("thetta: 0.5\n")
    with pytest.raises(ConfigError, match="option 'thetta' is unknown; did you mean 'theta'"):
        ExperimentSpec.from_yaml(tmp_path / "typo.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        ExperimentSpec.from_yaml(tmp_path / "list.yaml")
    (tmp_path / "theta.yaml").write_text("theta: 1.5\n")
    with pytest.raises(ConfigError, match="theta is 1.5, but must be 0 < theta <= 1"):
        ExperimentSpec.from_yaml(tmp_path / "theta.yaml")


def test_cli_flags_override_the_file(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("workload: logreg\ntheta: 0.8\ntop_k: 2\nseed: 3\n")
    spec = ExperimentSpec.from_yaml(path).with_overrides(theta=0.5, top_k=None, **{"max-steps": 100})
    assert (spec.theta, spec.top_k, spec.seed, spec.max_steps, spec.workload) == (0.5, 2, 3, 100, "logreg")
    with pytest.raises(ConfigError, match="option 'thta' is unknown"):
        spec.with_overrides(thta=0.1)
    with pytest.raises(ConfigError, match="theta is 1.5"):
        spec.with_overrides(theta=1.5)


def test_changing_the_workload_rederives_its_defaults_but_keeps_explicit_ones():
    spec = ExperimentSpec(max_steps=50)
    other = spec.with_overrides(workload="linreg")
    assert (other.metric, other.mode, other.max_steps, other.n_trials) == ("val_mse", "min", 50, 16)
    assert set(other.search_space) == {"lr", "l2"}
    again = other.with_overrides(theta=0.9).with_overrides(workload="gbt")
    assert again.metric == "val_mse" and set(again.search_space) == {"learning_rate", "max_depth"}


def test_spec_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ExperimentSpec().theta = 0.5  # type: ignore[misc]


def test_custom_trainable_needs_metric_and_max_steps():
    with pytest.raises(ConfigError, match="metric is None, but must be given"):
        ExperimentSpec(workload="tests.test_experiment:Tiny")
    spec = ExperimentSpec(workload="tests.test_experiment:Tiny", metric="loss", max_steps=5, top_k=1)
    assert spec.n_trials == 1 and spec.make_trainable(spec.trials()[0]).train()["loss"] == 1.0


from spottune.trainable import from_function  # noqa: E402

Tiny = from_function(lambda config, state, rng: {"loss": 1.0}, name="Tiny")
