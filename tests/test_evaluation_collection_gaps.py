"""Collection gaps of the price data: runs that spend time in one say so (simulate's note column and warning line,
spottune run's warning when its start lies in one)."""

from __future__ import annotations

import pandas as pd
import pytest

from spotmarket.prices import to_seconds
from spottune.evaluation._runner import gap_hours, gap_note

GAP = (to_seconds("2015-06-09T15:44:23Z"), to_seconds("2015-06-12T00:09:14Z"))  # the 2015 trace's 56.4 h gap


def test_gap_hours_is_the_overlap_with_every_gap():
    gaps = [(0.0, 3600.0), (10_800.0, 18_000.0)]
    assert gap_hours(gaps, 1800.0, 14_400.0) == pytest.approx(0.5 + 1.0)
    assert gap_hours(gaps, 3600.0, 10_800.0) == 0.0  # touches both, inside neither
    assert gap_hours([], 0.0, 1e9) == 0.0


def test_gap_note_counts_the_runs_whose_note_names_a_gap():
    table = pd.DataFrame({"note": ["", None, "c3.xlarge; 9.10 h of the run in a collection gap of the prices (read as "
                                   "flat)", "9.10 h of the run in a collection gap of the prices (read as flat)"]})
    assert gap_note(table).startswith("warning: 2 of 4 runs spent time in a collection gap of the price data")
    assert gap_note(pd.DataFrame({"note": ["", "c3.xlarge"]})) is None


def test_a_run_inside_the_2015_gap_is_noted_and_one_outside_is_not():
    from spottune.evaluation import Task, default_starts, run_task
    from spottune.evaluation._runner import environment

    types = ("r3.large", "c3.xlarge")
    env = environment("opda-alexnet", 0, "legacy", None, 4, types, None)
    assert GAP in env["gaps"]  # judged on every market of the data, not only the pool's two types
    inside = to_seconds("2015-06-09T22:00Z")
    outside = default_starts(env["history"], env["markets"], 2)[0]
    rows = {}
    for s in (inside, outside):
        row, _ = run_task(Task(workload="opda-alexnet", policy="single-cheapest", start_index=0, start_s=s,
                               market_mode="legacy", seed=0, train_lo_s=s - 4 * 86400, train_hi_s=s, max_steps=4,
                               instance_types=types))
        assert not row["error"], row["error"]
        rows[s] = row
    hours = float(rows[inside]["note"].split(" h of the run in a collection gap")[0].split("; ")[-1])
    assert hours == pytest.approx(rows[inside]["jct_h"], abs=0.006)  # the whole run lies in the 56 h gap
    assert "collection gap" not in rows[outside]["note"]
    table = pd.DataFrame([rows[inside], rows[outside]])
    assert gap_note(table).startswith("warning: 1 of 2 runs spent time in a collection gap")


def test_gap_warnings_name_a_gap_at_or_within_a_day_of_the_start():
    from spottune.compose import build_market, gap_warnings

    market = build_market(None, market_mode="legacy", seed=0)
    text = ("collection gap of the price data (2015-06-09 15:44 UTC .. 2015-06-12 00:09 UTC: no record in any of its "
            "markets); the replay reads the prices there as flat")
    assert gap_warnings(market, to_seconds("2015-06-09T22:00Z")) == [f"warning: the start lies in a 56.4 h {text}"]
    assert gap_warnings(market, to_seconds("2015-06-09T00:00Z")) == [
        f"warning: the first day of the run meets a 56.4 h {text}"]
    assert gap_warnings(market, to_seconds("2015-06-08T15:00Z")) == []  # the gap begins more than a day later
    assert gap_warnings(market, to_seconds("2015-05-05T00:00Z")) == []  # the default start
    # a pool of one market is judged on all the data's markets: its own silences of hours are ordinary calm
    one = build_market(None, market_mode="legacy", seed=0, instance_types=("r3.large",), availability_zones=("us-east-1a",))
    assert gap_warnings(one, to_seconds("2015-05-05T00:00Z")) == []
    assert len(gap_warnings(one, to_seconds("2015-06-09T22:00Z"))) == 1


def test_spottune_run_prints_the_warning(monkeypatch, capsys):
    from tests.test_papercuts import _main

    code, out, err = _main("spottune", ["run", "--start", "2015-06-09T22:00Z", "--dry-run", "--predictor", "constant"],
                           monkeypatch, capsys)
    assert code == 0, err
    assert "warning: the start lies in a 56.4 h collection gap of the price data" in err
    assert "dry run: nothing is launched" in out


def test_default_starts_move_past_the_collection_gaps():
    # 20 starts on the 2015 trace: the 11th, 2015-06-11 10:00, lies in the 56.4 h gap (to 2015-06-12 00:09:14); it
    # moves to the first whole hour after it, the others (clear for two days after them) stay where they were
    from spottune.compose import build_market
    from spottune.evaluation import default_starts

    market = build_market(None, market_mode="legacy", seed=0)
    moved = default_starts(market.history, market.markets, 20)
    plain = default_starts(market.history, market.markets, 20, gap_window_s=0)
    assert [(p, m) for p, m in zip(plain, moved) if p != m] == [
        (to_seconds("2015-06-11T10:00Z"), to_seconds("2015-06-12T01:00Z"))]
    gaps = market.history.collection_gaps()
    assert all(not (s < b and a < s + 2 * 86400) for s in moved for a, b in gaps)
