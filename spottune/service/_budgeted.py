"""A study with a trial budget smaller than its search space: configurations picked one at a time by cost-aware
GP-UCB (ease.ml's single-tenant loop; decision SV10), each run as a one-trial experiment through :func:`spottune.tune`.

The study's folder holds one results folder per tried configuration, ``trial-<round>-c<index>``; a round whose
folder has no ``summary.json`` (a killed server) is run again, the others are read back, so a restarted study picks
the same configurations it would have picked.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from spottune.errors import ConfigError
from spottune.scheduling import CostAwareGPUCB

__all__ = ["check_budgetable", "encode_configs", "run_budgeted"]


def check_budgetable(configs: list[dict[str, Any]]) -> None:
    """Refuse configurations GP-UCB cannot place: every value must be a number, a string or a bool (no nesting).

    Raises
    ------
    ConfigError
        Naming the first nested value.
    """
    for config in configs:
        for key, value in config.items():
            if not isinstance(value, (int, float, str, bool)) or value is None:
                raise ConfigError(f"trial_budget needs a flat search space, but {key!r} takes {value!r}")


def encode_configs(configs: list[dict[str, Any]]) -> np.ndarray:
    """Numeric features of the configurations, shape (n_configs, n_features).

    A numeric hyperparameter is one column, on a log scale when all its values are > 0 and span more than a factor
    of 10; any other hyperparameter is one-hot (one column per value, in order of appearance).
    """
    columns: list[np.ndarray] = []
    for key in sorted({k for c in configs for k in c}):
        values = [c.get(key) for c in configs]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if numeric:
            x = np.asarray(values, dtype=float)
            if (x > 0).all() and x.max() / x.min() > 10:
                x = np.log(x)
            columns.append(x)
        else:
            for level in dict.fromkeys(map(repr, values)):
                columns.append(np.asarray([repr(v) == level for v in values], dtype=float))
    return np.column_stack(columns) if columns else np.zeros((len(configs), 1))


def _one_config_spec(raw: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    return {**raw, "search_space": {k: {"grid_search": [v]} for k, v in config.items()}, "num_samples": 1,
            "top_k": 1}


def run_budgeted(raw: Mapping[str, Any], spec: Any, trial_budget: int, out: Path, *, tune: Callable[..., Any],
                 progress: Callable[..., None]) -> dict[str, Any]:
    """Run ``trial_budget`` of the spec's configurations, each picked by cost-aware GP-UCB.

    Parameters
    ----------
    raw : mapping
        The submitted spec keys (each round runs them with a one-configuration search space and ``top_k = 1``).
    spec : spottune.experiment.ExperimentSpec
        The parsed spec: its trials' configurations, metric and mode.
    trial_budget : int
        Configurations to try, >= 1 (at most the spec's number of trials).
    out : Path
        The study's folder.
    tune : callable
        :func:`spottune.tune`.
    progress : callable
        Passed to each run (it raises to cancel).

    Returns
    -------
    dict
        The study's summary: ``total_cost_usd``, ``trials_tried``, ``tried`` (per round: index, config, value, USD)
        and ``best`` (as :func:`spottune.service._runner.summarise` gives it).
    """
    configs = [t.config for t in spec.trials()]
    check_budgetable(configs)
    arms = encode_configs(configs)
    picker = CostAwareGPUCB(mode=spec.mode, random_state=spec.seed)
    tried: list[int] = []
    values: list[float] = []
    usd: list[float] = []
    rounds = []
    for r in range(min(trial_budget, len(configs))):
        finite = [v for v in values if math.isfinite(v)]
        worst = (max(finite) if spec.mode == "min" else min(finite)) if finite else 0.0
        observed = [v if math.isfinite(v) else worst for v in values]
        # one cost for every configuration until a per-configuration estimate exists: the mean USD of a trial so far
        cost = np.full(len(configs), float(np.mean(usd)) if usd and np.mean(usd) > 0 else 1.0)
        k = picker.suggest(arms, cost, tried, observed)
        folder = out / f"trial-{r:03d}-c{k}"
        if (folder / "summary.json").exists():
            from spottune.api import ResultGrid

            grid = ResultGrid.from_path(folder)
        else:
            shutil.rmtree(folder, ignore_errors=True)
            grid = tune(_one_config_spec(raw, configs[k]), output=folder, progress=progress)
        frame = grid.get_dataframe()
        value = float(frame["metric"].iloc[0]) if len(frame) else math.nan
        tried.append(k)
        values.append(value)
        usd.append(float(grid.summary.get("total_cost_usd", 0.0)))
        rounds.append({"index": k, "config": configs[k], "value": value if math.isfinite(value) else None,
                       "usd": usd[-1]})
    finite = [(v, i) for i, v in enumerate(values) if math.isfinite(v)]
    best = None
    if finite:
        v, i = (min if spec.mode == "min" else max)(finite)
        best = {"trial_id": f"c{tried[i]}", "config": configs[tried[i]], "value": v, "metric": spec.metric,
                "usd": usd[i]}
    return {"total_cost_usd": float(sum(usd)), "trials_tried": len(tried), "tried": rounds, "best": best}
