"""A study with a trial budget: cost-aware GP-UCB picks which configurations run, one at a time (decision SV10)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from spottune.errors import ConfigError
from spottune.experiment import ExperimentSpec
from spottune.service._budgeted import check_budgetable, encode_configs, run_budgeted

RAW = {"workload": "linreg", "search_space": {"lr": {"grid_search": [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0]}},
       "max_steps": 8, "theta": 1, "top_k": 1, "predictor": "none"}


class _Grid:
    def __init__(self, value, usd):
        self.summary = {"total_cost_usd": usd}
        self._frame = pd.DataFrame({"metric": [value]})

    def get_dataframe(self):
        return self._frame


def test_encoding_puts_wide_positive_ranges_on_a_log_scale_and_one_hot_encodes_the_rest():
    x = encode_configs([{"lr": 0.001, "opt": "adam"}, {"lr": 0.1, "opt": "sgd"}, {"lr": 0.01, "opt": "adam"}])
    assert x == pytest.approx(np.array([[np.log(0.001), 1, 0], [np.log(0.1), 0, 1], [np.log(0.01), 1, 0]]))
    with pytest.raises(ConfigError, match=r"trial_budget needs a flat search space, but 'net' takes \{'width': 8\}"):
        check_budgetable([{"net": {"width": 8}}])


def test_the_budget_runs_that_many_configurations_each_once_and_keeps_the_best(tmp_path):
    """A stand-in for spottune.tune (a val_mse of (log10 lr + 1.5)^2): the test is about which configurations GP-UCB
    asks for and what the study keeps, not about running them (tests/test_service_api.py runs real ones)."""
    asked = []

    def tune(raw, *, output, progress):
        (lr,) = raw["search_space"]["lr"]["grid_search"]
        assert (raw["top_k"], raw["num_samples"]) == (1, 1)
        asked.append(lr)
        return _Grid((np.log10(lr) + 1.5) ** 2, 0.01)

    spec = ExperimentSpec.from_dict(RAW)
    summary = run_budgeted(RAW, spec, 4, tmp_path, tune=tune, progress=lambda *a: None)
    assert len(asked) == len(set(asked)) == 4 == summary["trials_tried"]
    assert summary["total_cost_usd"] == pytest.approx(0.04)
    assert summary["best"]["config"] == {"lr": min(asked, key=lambda lr: (np.log10(lr) + 1.5) ** 2)}
    assert summary["best"]["config"]["lr"] in (0.03, 0.01)  # the two closest to the optimum 10^-1.5
    assert [r["config"]["lr"] for r in summary["tried"]] == asked


@pytest.mark.server
@pytest.mark.slow  # two real one-trial runs on the simulator
def test_a_study_with_a_trial_budget_runs_only_that_many_configurations(tmp_path):
    from spottune.service import Service, ServiceClient

    svc = Service(admin_token="a", data_dir=tmp_path, port=0).start()
    try:
        with ServiceClient(svc.url, "a") as admin:
            admin.create_team("vision")
            study = admin.submit(RAW, team="vision", name="budget", trial_budget=2)
            done = admin.wait("budget", timeout_s=120)
        assert done["state"] == "finished", done["error"]
        assert done["summary"]["trials_tried"] == 2
        folders = sorted(p.name for p in (tmp_path / "studies" / str(study["id"])).iterdir())
        assert len(folders) == 2 and folders[0].startswith("trial-000-c") and folders[1].startswith("trial-001-c")
        written = sum(json.loads((tmp_path / "studies" / str(study["id"]) / f / "summary.json").read_text())
                      ["total_cost_usd"] for f in folders)
        assert done["summary"]["total_cost_usd"] == pytest.approx(written)
    finally:
        svc.stop()
