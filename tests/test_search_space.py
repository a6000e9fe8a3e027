"""Search spaces: Ray semantics, YAML form, seeded determinism, and errors that name value and rule."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from spottune.errors import ConfigError
from spottune.search_space import (Choice, GridSearch, LogUniform, RandInt, Uniform, choice, count_configs,
                                   generate_configs, grid_search, loguniform, parse_space, randint,
                                   space_to_dict, uniform)

SPACE = {"lr": grid_search([0.01, 0.1, 1.0]), "opt": {"momentum": uniform(0.5, 0.99), "nesterov": choice([True, False])},
         "wd": loguniform(1e-6, 1e-2), "layers": randint(1, 4), "act": grid_search(["relu", "tanh"]), "const": 7}


def test_grid_cross_product_times_num_samples():
    configs = generate_configs(SPACE, num_samples=2, seed=0)
    assert len(configs) == 2 * 3 * 2 == count_configs(SPACE, 2)
    # last grid key varies fastest, the whole grid repeats per sample
    assert [(c["lr"], c["act"]) for c in configs[:6]] == [(0.01, "relu"), (0.01, "tanh"), (0.1, "relu"),
                                                         (0.1, "tanh"), (1.0, "relu"), (1.0, "tanh")]
    assert [(c["lr"], c["act"]) for c in configs[6:]] == [(c["lr"], c["act"]) for c in configs[:6]]
    for c in configs:
        assert 0.5 <= c["opt"]["momentum"] < 0.99 and c["opt"]["nesterov"] in (True, False)
        assert 1e-6 <= c["wd"] < 1e-2 and c["layers"] in (1, 2, 3) and c["const"] == 7
        assert type(c["layers"]) is int and type(c["wd"]) is float
    json.dumps(configs)  # plain Python values only


def test_same_seed_same_configs_other_seed_differs():
    a = generate_configs(SPACE, num_samples=3, seed=42)
    assert a == generate_configs(SPACE, num_samples=3, seed=42)
    assert a != generate_configs(SPACE, num_samples=3, seed=43)
    assert [c["lr"] for c in a] == [c["lr"] for c in generate_configs(SPACE, num_samples=3, seed=43)]


def test_random_domains_are_drawn_anew_for_each_config():
    configs = generate_configs({"x": uniform(0, 1)}, num_samples=50, seed=1)
    assert len({c["x"] for c in configs}) == 50


def test_yaml_form_equals_python_form():
    text = """
    lr: {grid_search: [0.01, 0.1, 1.0]}
    opt:
      momentum: {uniform: [0.5, 0.99]}
      nesterov: {choice: [true, false]}
    wd: {loguniform: [1.0e-6, 1.0e-2]}
    layers: {randint: [1, 4]}
    act: {grid_search: [relu, tanh]}
    const: 7
    """
    from_yaml = yaml.safe_load(text)
    assert parse_space(from_yaml) == parse_space(SPACE)
    assert generate_configs(from_yaml, 2, seed=5) == generate_configs(SPACE, 2, seed=5)


def test_space_to_dict_round_trips_through_yaml():
    text = yaml.safe_dump(space_to_dict(SPACE))
    assert parse_space(yaml.safe_load(text)) == parse_space(SPACE)


def test_empty_space_is_one_empty_config():
    assert generate_configs(None) == [{}]
    assert generate_configs({}, num_samples=3) == [{}, {}, {}]


def test_loguniform_is_uniform_in_log_space():
    xs = np.array([c["x"] for c in generate_configs({"x": loguniform(1e-4, 1.0)}, 4000, seed=0)])
    assert abs(np.median(np.log10(xs)) - (-2.0)) < 0.1


def test_constant_lists_are_copied_per_config():
    configs = generate_configs({"layers": [64, 32], "lr": grid_search([1, 2])})
    configs[0]["layers"].append(16)
    assert configs[1]["layers"] == [64, 32]


@pytest.mark.parametrize("space, match", [
    ({"lr": {"uniform": [1.0, 0.1]}}, r"search space key 'lr': uniform is \[1.0, 0.1\], but must have lo < hi"),
    ({"lr": {"loguniform": [0.0, 1.0]}}, r"loguniform is \[0.0, 1.0\], but must have 0 < lo < hi"),
    ({"lr": {"loguniform": [1e-3]}}, r"loguniform is \[0.001\], but must be a list of two bounds"),
    ({"n": {"randint": [1.5, 4]}}, r"randint is \[1.5, 4\], but both bounds must be integers"),
    ({"n": {"randint": [4, 4]}}, r"randint is \[4, 4\], but must have lo < hi"),
    ({"a": {"choice": []}}, r"choice is \(\), but must be a non-empty list"),
    ({"a": {"grid_search": "abc"}}, r"grid_search is 'abc', but must be a non-empty list"),
    ({"a": {"uniform": ["a", 1]}}, r"uniform is \['a', 1\], but both bounds must be finite numbers"),
    ({"a": {"grid_serch": [1, 2]}}, r"'grid_serch' is not a domain; did you mean 'grid_search'"),
    ({"a": {"b": {"uniform": [2, 1]}}}, r"search space key 'a.b': uniform"),
])
def test_bad_specs_raise_config_error_with_value_and_rule(space, match):
    with pytest.raises(ConfigError, match=match):
        generate_configs(space)


def test_bad_num_samples_and_space_type():
    with pytest.raises(ConfigError, match="num_samples is 0, but must be an integer >= 1"):
        generate_configs({}, num_samples=0)
    with pytest.raises(ConfigError, match="search space is"):
        parse_space([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        uniform(0, float("inf"))


def test_python_constructors_build_domains():
    assert grid_search([1, 2]) == GridSearch((1, 2)) and choice("ab" and ["a"]) == Choice(("a",))
    assert uniform(0, 1) == Uniform(0, 1) and loguniform(1, 2) == LogUniform(1, 2) and randint(0, 3) == RandInt(0, 3)


@settings(max_examples=40, deadline=None)
@given(lo=st.floats(-1e6, 1e6), width=st.floats(1e-3, 1e6), seed=st.integers(0, 2**32 - 1), n=st.integers(1, 20))
def test_uniform_samples_stay_in_bounds_and_are_reproducible(lo, width, seed, n):
    space = {"x": uniform(lo, lo + width), "k": randint(-3, 3)}
    a = generate_configs(space, n, seed)
    assert a == generate_configs(space, n, seed)
    assert all(lo <= c["x"] <= lo + width and -3 <= c["k"] < 3 for c in a)
