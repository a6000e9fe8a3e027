"""Bad input that only shows while a run goes on, and what a refused run leaves behind.

- A trainable whose metric is NaN or infinite: the trial fails with the reason (never "finishes" with a NaN metric),
  and every results file stays strict JSON.
- A run refused after its output folder was prepared (the journal opened) leaves the folder as it found it: a new
  folder is removed, an existing one keeps exactly its files; the same folder then takes a run.
- ``spottune.tune`` reports its notes on the ``spottune.api`` logger, not with ``print``.
"""

from __future__ import annotations

import json
import logging
import uuid

import pytest

import spottune
from spottune.errors import ConfigError
from tests.test_bad_input_corpus import PRICES

NAN_WORKLOAD = '''
import math

from spottune.trainable import Trainable
from spottune.workloads import Workload


class Diverges(Trainable):
    reference_seconds_per_step = 60.0

    def setup(self, config):
        self.bad = config["bad"]

    def step(self):
        return {"loss": {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[self.bad] if self.iteration >= 1 else 1.0}

    def save_checkpoint(self, checkpoint_dir):
        pass

    def load_checkpoint(self, checkpoint_dir):
        pass


WORKLOAD = Workload(name="diverges", trainable=Diverges, metric="loss", mode="min", max_steps=3,
                    search_space={"bad": {"grid_search": ["nan", "inf", "-inf"]}})
'''


def _strict(text: str):
    def refuse(name):
        raise AssertionError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def case(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.dont_write_bytecode", True)
    (tmp_path / "prices.csv").write_text(PRICES)
    return tmp_path


def test_a_nan_or_infinite_metric_fails_the_trial_with_a_reason_and_files_stay_strict_json(case):
    name = f"diverges_{uuid.uuid4().hex[:8]}"
    (case / f"{name}.py").write_text(NAN_WORKLOAD)
    grid = spottune.tune(workload=f"{name}:WORKLOAD", prices=str(case / "prices.csv"), start_utc="2015-05-05",
                         train_days=1, predictor="none", theta=1, top_k=1, max_failures=0, output=case / "out")
    df = grid.get_dataframe()
    assert list(df["state"]) == ["failed"] * 3
    assert df["metric"].isna().all() or not df["metric"].isin([float("inf"), float("-inf")]).any()
    events = (case / "out" / "events.jsonl").read_text()
    reasons = [r for r in map(_strict, events.splitlines()) if r.get("type") == "SegmentFailed"]
    assert len(reasons) == 3
    for word in ("'loss' is nan", "'loss' is inf", "'loss' is -inf"):
        assert sum(word in json.dumps(r) for r in reasons) == 1, reasons
    assert "must be a finite number" in json.dumps(reasons[0])
    summary = _strict((case / "out" / "summary.json").read_text())
    assert summary["top_k"] == [] or all(t["metric"] is None for t in summary["top_k"])
    with pytest.raises(ValueError, match="no finished trial"):
        grid.get_best_result()


def test_results_json_writes_non_finite_numbers_as_null():
    from spottune.results import _json

    assert _json({"a": float("nan"), "b": [float("inf"), 1.5], "c": (float("-inf"),)}) == \
        '{"a": null, "b": [null, 1.5], "c": [null]}'


@pytest.mark.parametrize("existing", [False, True])
def test_a_run_refused_after_the_journal_opened_leaves_the_folder_as_it_found_it(case, existing):
    out = case / "deep" / "out"
    if existing:
        out.mkdir(parents=True)
        (out / "notes.txt").write_text("the user's own file\n")
        (out / "sub").mkdir()
    with pytest.raises(ConfigError, match="must lie in"):  # refused in the build, after open_run wrote the journal
        spottune.tune(prices=str(case / "prices.csv"), start_utc="2015-04-01", train_days=1, predictor="none",
                      output=out)
    if existing:
        assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "sub"]
        assert (out / "notes.txt").read_text() == "the user's own file\n"
    else:
        assert not (case / "deep").exists()


def test_a_crash_after_the_first_event_keeps_the_journal_for_resume(case, monkeypatch):
    import spottune.compose as compose

    def crash(spec, *, journal, **_):
        journal.append("event", e={"type": "ExperimentStarted"})
        raise RuntimeError("killed")

    monkeypatch.setattr(compose, "run", crash)
    with pytest.raises(RuntimeError, match="killed"):
        spottune.tune(prices=str(case / "prices.csv"), start_utc="2015-05-05", train_days=1, predictor="none",
                      output=case / "out")
    assert (case / "out" / "journal.jsonl").read_text().count("\n") == 2


def test_tune_logs_its_notes_instead_of_printing(case, monkeypatch, caplog, capsys):
    import spottune.compose as compose

    def note_then_refuse(spec, *, log_fn, **_):
        log_fn("training calibrated for 2 markets ...")
        raise ConfigError("refused after a note")

    monkeypatch.setattr(compose, "run", note_then_refuse)
    with caplog.at_level(logging.INFO, logger="spottune"), pytest.raises(ConfigError, match="refused after a note"):
        spottune.tune(prices=str(case / "prices.csv"), start_utc="2015-05-05", train_days=1, predictor="none",
                      output=case / "out")
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("spottune.api", "WARNING", "training calibrated for 2 markets ...")]
    assert capsys.readouterr().out == ""
    assert not (case / "out").exists()
