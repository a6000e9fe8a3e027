"""A study with a trial budget smaller than its search space: configurations picked one at a time by cost-aware
GP-UCB (ease.ml's single-tenant loop; decision SV10), each run as a one-trial experiment through :func:`spottune.tune`.

The loop is :func:`spottune.api.run_rounds`, the one ``spottune.tune(search="gp-ucb")`` runs too (SV13). The study's
folder holds one results folder per tried configuration, ``trial-<round>-c<index>``; a round whose folder has no
``summary.json`` (a killed server) is run again, the others are read back, so a restarted study picks the same
configurations it would have picked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from spottune.api import run_rounds
from spottune.scheduling import check_flat as check_budgetable
from spottune.scheduling import encode_configs

__all__ = ["check_budgetable", "encode_configs", "run_budgeted"]


def run_budgeted(raw: Mapping[str, Any], spec: Any, trial_budget: int, out: Path, *, tune: Callable[..., Any],
                 progress: Callable[..., None]) -> dict[str, Any]:
    """Run ``trial_budget`` of the spec's configurations, each picked by cost-aware GP-UCB (:func:`run_rounds`).

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
        The study's summary: ``total_cost_usd`` (USD), ``trials_tried``, ``tried`` (per round: index, config, value,
        USD) and ``best`` (as :func:`spottune.service._runner.summarise` gives it, ``trial_id`` ``c<index>``).
    """
    found = run_rounds(raw, spec, trial_budget, out, run_one=tune, progress=progress)
    best = found["best"]
    if best is not None:
        index = next(r["index"] for r in found["tried"] if r["trial_id"] == best["trial_id"])
        best = {**best, "trial_id": f"c{index}"}
    return {"total_cost_usd": found["total_cost_usd"], "trials_tried": found["trials_tried"], "best": best,
            "tried": [{k: r[k] for k in ("index", "config", "value", "usd")} for r in found["tried"]]}
