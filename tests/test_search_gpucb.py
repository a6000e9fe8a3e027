"""``search: gp-ucb``: the spec's field, the sequential loop's picks, and a real search on the simulator (SV13)."""

from __future__ import annotations

import json

import pytest

from spottune.errors import ConfigError
from spottune.experiment import ExperimentSpec
from spottune.scheduling import search_sequentially

SPACE = {"lr": {"grid_search": [0.001, 0.003, 0.01, 0.03, 0.1, 0.3]}}


@pytest.mark.parametrize("options, message", [
    ({"search": "bayes"}, "search is 'bayes', but must be one of random, grid, gp-ucb"),
    ({"search": "gp-ucb"}, "trial_budget is None, but must be an integer with 1 <= trial_budget <= 6 with search "
                           "'gp-ucb' (how many of the 6 candidate configurations run)"),
    ({"search": "gp-ucb", "trial_budget": 7}, "trial_budget is 7, but must be an integer with 1 <= trial_budget <= 6 "
                                              "(the candidate configurations) with search 'gp-ucb'"),
    ({"search": "gp-ucb", "trial_budget": 0}, "trial_budget is 0, but must be an integer with 1 <= trial_budget <= 6 "
                                              "(the candidate configurations) with search 'gp-ucb'"),
    ({"trial_budget": 2}, "trial_budget is 2, but must be None with search 'random' (every configuration runs; a "
                          "trial budget is a setting of search 'gp-ucb')"),
    ({"search": "gp-ucb", "trial_budget": 2, "rungs": "0.1:3"},
     "rungs is ((0.1, 3),), but must be empty with search 'gp-ucb' (its trials run one at a time, so there are no "
     "barriers to wait at)"),
    ({"search": "gp-ucb", "trial_budget": 2, "search_space": {"net": {"width": {"grid_search": [8, 16]}}}},
     "trial_budget needs a flat search space, but 'net' takes {'width': 8}"),
])
def test_a_bad_search_or_trial_budget_is_one_line_naming_the_rule(options, message):
    with pytest.raises(ConfigError) as err:
        ExperimentSpec(**{"workload": "linreg", "search_space": SPACE, "top_k": 1, **options})
    assert str(err.value) == message


def test_the_search_round_trips_through_yaml_and_grid_is_random_search(tmp_path):
    spec = ExperimentSpec(workload="linreg", search_space=SPACE, top_k=1, search="gp-ucb", trial_budget=3)
    assert ExperimentSpec.from_yaml(_write(tmp_path / "s.yaml", spec.to_yaml())) == spec
    grid = ExperimentSpec(workload="linreg", search_space=SPACE, search="grid")
    assert [t.config for t in grid.trials()] == [t.config for t in ExperimentSpec(workload="linreg",
                                                                                    search_space=SPACE).trials()]


def test_spottune_run_passes_search_and_trial_budget_to_the_spec_before_anything_runs(tmp_path):
    """The command's ConfigError becomes one line and exit code 2 in ``run_click`` (tests/test_bad_input.py checks that rule)."""
    from click.testing import CliRunner

    from spottune.cli import cli

    result = CliRunner().invoke(cli, ["run", "--workload", "linreg", "--search", "gp-ucb", "--output",
                                      str(tmp_path / "out")])
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == ("trial_budget is None, but must be an integer with 1 <= trial_budget <= 16 with "
                                     "search 'gp-ucb' (how many of the 16 candidate configurations run)")
    assert not (tmp_path / "out").exists()


def test_gp_ucb_walks_to_the_optimum_of_a_one_dimensional_bowl_and_a_cheap_arm_goes_first():
    """x = 0..8, value -(x - 6)^2 (max): the flat prior picks the first arm, then the far end, then climbs to x = 6 on
    the fifth round; with arm 7 five times cheaper than the rest, cost-aware GP-UCB starts there (sqrt(beta / c))."""
    configs = [{"x": float(x)} for x in range(9)]
    bowl = lambda r, k: -(k - 6.0) ** 2  # noqa: E731
    assert search_sequentially(configs, bowl, trial_budget=5, mode="max") == [
        (0, -36.0), (8, -4.0), (7, -1.0), (4, -4.0), (6, 0.0)]
    cost = [5.0] * 7 + [1.0, 5.0]
    assert search_sequentially(configs, bowl, trial_budget=1, mode="max", cost_usd=cost) == [(7, -1.0)]
    assert search_sequentially(configs, bowl, trial_budget=1, mode="max", cost_usd=cost, cost_aware=False) == [
        (0, -36.0)]
    stop_after_two = lambda r, k: None if r == 2 else bowl(r, k)  # noqa: E731  (a spent USD budget)
    assert len(search_sequentially(configs, stop_after_two, trial_budget=5, mode="max")) == 2


def test_a_failed_configuration_counts_as_the_worst_value_seen():
    configs = [{"x": float(x)} for x in range(9)]
    seen = []

    def run(r, k):
        seen.append(k)
        return float("nan") if k == 8 else -(k - 6.0) ** 2

    out = search_sequentially(configs, run, trial_budget=4, mode="max")
    assert [k for k, _ in out] == seen and len(set(seen)) == 4 and 8 in seen
    assert out[seen.index(8)][1] != out[seen.index(8)][1]  # NaN is kept as the round's result


@pytest.mark.slow  # two one-trial runs on the simulator, about 2 s
def test_tune_with_gp_ucb_runs_the_budget_sequentially_and_writes_one_results_folder(tmp_path):
    import spottune

    options = dict(workload="linreg", search_space=SPACE, max_steps=4, theta=1.0, top_k=1, predictor="none",
                   search="gp-ucb", trial_budget=2)
    grid = spottune.tune(output=tmp_path / "s", **options)
    frame = grid.get_dataframe()
    tried = grid.summary["search"]["tried"]
    assert list(frame["trial_id"]) == [r["trial_id"] for r in tried] and len(set(frame["trial_id"])) == 2
    assert list(frame["state"]) == ["finished", "finished"] and list(frame["steps"]) == [4, 4]
    folders = sorted(p.name for p in (tmp_path / "s").iterdir() if p.is_dir())
    assert folders == [f"trial-000-c{tried[0]['index']}", f"trial-001-c{tried[1]['index']}"]
    written = [json.loads((tmp_path / "s" / f / "summary.json").read_text()) for f in folders]
    assert grid.summary["total_cost_usd"] == pytest.approx(sum(w["total_cost_usd"] for w in written))
    assert grid.summary["jct_s"] == pytest.approx(sum(w["jct_s"] for w in written))
    # the second round starts where the first ended (one machine running them in turn)
    assert grid.ledger["start_s"].iloc[-1] >= grid.ledger["end_s"].iloc[0]
    best = grid.get_best_result()
    assert best.value == min(frame["metric"]) and best.trial_id == grid.summary["search"]["best"]["trial_id"]
    again = spottune.tune(output=tmp_path / "s", **options)  # the same spec into the same folder: read back
    assert again.summary == grid.summary
    with pytest.raises(ConfigError, match="already holds files but no search of this spec"):
        spottune.tune(output=tmp_path / "s", **{**options, "trial_budget": 3})


def _write(path, text):
    path.write_text(text)
    return path
