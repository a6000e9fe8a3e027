"""The two fallbacks that used to pass silently now log a warning with the exception."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest


def test_an_unusable_revpred_cache_is_logged_and_retrained(tmp_path, monkeypatch, caplog):
    import revpred.store
    import revpred.training
    from spottune.compose import predictors as _compose

    (tmp_path / revpred.store.INDEX).write_text("{")
    trained = []

    class ModelSet:
        def predictor(self, kind):
            return f"fresh {kind}"

    def broken(*args, **kwargs):
        raise ValueError("truncated index")

    monkeypatch.setattr(_compose, "model_set_dir", lambda *a, **k: tmp_path)
    monkeypatch.setattr(revpred.store, "load_model_set", broken)
    monkeypatch.setattr(revpred.store, "save_model_set", lambda path, ms: None)
    monkeypatch.setattr(revpred.training, "train_markets", lambda *a, **k: trained.append(a) or ModelSet())
    with caplog.at_level(logging.WARNING, logger="spottune.compose.predictors"):
        predictor, desc = _compose._learned("revpred", None, ["m"], 0.0, 86400.0, 0, ("revpred",), "revpred", None)
    assert predictor == "fresh revpred" and len(trained) == 1 and not desc.endswith("cached")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", f"model cache {tmp_path} is unreadable (ValueError: truncated index); retraining")]


def test_a_failed_earlycurve_fit_in_the_report_is_logged(tmp_path, monkeypatch, caplog):
    pytest.importorskip("matplotlib")
    import earlycurve
    from spottune import report

    class Failing:
        def __init__(self, *args, **kwargs):
            pass

        def fit(self, steps, values):
            raise RuntimeError("no convergence")

    monkeypatch.setattr(earlycurve, "EarlyCurve", Failing)
    curves = pd.DataFrame({"trial_id": ["t0"] * 10, "step": range(1, 11), "value": [1.0 / k for k in range(1, 11)]})
    res = {"summary": {"settings": {"max_steps": 20, "theta": 0.5, "metric": "loss", "mode": "min"}},
           "trials": pd.DataFrame({"trial_id": ["t0"], "selected": [True]}), "curves": curves}
    with caplog.at_level(logging.WARNING, logger="spottune.report"):
        report.plot_learning_curves(res, Path(tmp_path / "curves.png"))
    assert (tmp_path / "curves.png").stat().st_size > 0
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "EarlyCurve fit of trial t0 not drawn (RuntimeError: no convergence)")]
