"""The deadline-and-budget plan (spottune.planning._plan, decisions DB1-DB3): dollar conversion, bad input, refusal,
``spottune run --deadline --budget-usd [--dry-run]``."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from provisioner import InstanceCatalog
from spotmarket.prices import Market, PriceHistory
from spottune.errors import ConfigError
from spottune.experiment import ExperimentSpec
from spottune.planning import parse_duration, plan_run, seer_plan

DAY = 86400.0
R3, C3 = Market("us-east-1a", "r3.large"), Market("us-east-1a", "c3.xlarge")


def _history(p_r3=0.02, p_c3=0.04):
    t0 = pd.Timestamp("2020-01-01T00:00Z")
    rows = [dict(timestamp=t0 + pd.Timedelta(hours=h), availability_zone="us-east-1a", instance_type=it,
                 product_description="Linux/UNIX", price=p) for h in range(0, 24 * 10, 6)
            for it, p in (("r3.large", p_r3), ("c3.xlarge", p_c3))]
    return PriceHistory(pd.DataFrame(rows)), t0.timestamp() + 8 * DAY


def _plan(deadline_s, budget_usd, n=4, **kw):
    h, start = _history(**kw)
    return plan_run(deadline_s=deadline_s, budget_usd=budget_usd, history=h, catalog=InstanceCatalog.load(),
                    markets=[R3, C3], start_s=start, window_s=4 * DAY, reference_seconds_per_step=60.0, boot_s=0.0,
                    n_requested=n)


def test_dollars_become_vcpu_seconds_at_the_expected_price():
    """0.01 USD per vCPU-hour (0.02 USD/h for 2 vCPUs): 0.4 USD = 40 vCPU-hours = 144,000 vCPU-s; p 2..4 vCPUs;
    t_min = one 60 s step on r3.large (the reference instance)."""
    p = _plan(6 * 3600, 0.4, n=10_000)
    ref = seer_plan(6 * 3600, 144_000, eta=4, nu=2, p_min=2, p_max=4, t_min=60.0)
    assert p.seer == ref
    assert p.n_affordable == ref.n_trials
    assert p.usd_per_vcpu_hour == pytest.approx((0.01, 0.01, 0.01))
    lo, mid, hi = p.cost_usd()
    assert mid == pytest.approx(ref.spend / 3600 * 0.01) and mid <= 0.4
    assert p.instance_types[:2] == ("r3.large", "c3.xlarge")
    assert p.expected_finish_s <= 6 * 3600
    assert not p.feasible and p.refusal().startswith(f"at most {ref.n_trials} trials by 6 h within 0.4 USD")


def test_fewer_trials_than_affordable_use_the_deadline():
    p = _plan(6 * 3600, 0.4, n=4)
    assert p.feasible and p.n_trials == 4
    assert p.seer.spend / 3600 * 0.01 <= 0.4
    assert sum(p.seer.round_durations) <= 6 * 3600 * (1 + 1e-9) and p.expected_finish_s > 3 * 3600
    text = p.render()
    assert "expected cost" in text and "expected finish" in text and "bracket 1" in text


@pytest.mark.parametrize("deadline, budget, words", [
    (30.0, 1.0, "one step takes"),           # shorter than one step (60 s / 1.3 on c3.xlarge) on the fastest type
    (3600.0, 0.01, "one instance-hour costs"),  # below one hour of the cheapest market (0.02 USD/h)
    (0.0, 1.0, "must be > 0"), (3600.0, -1.0, "must be > 0"),
])
def test_bad_input_is_one_clear_error(deadline, budget, words):
    with pytest.raises(ConfigError, match=words):
        _plan(deadline, budget)


@pytest.mark.parametrize("text, seconds", [("6h", 21600), ("90min", 5400), ("1d", 86400), ("3600", 3600), (120, 120)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["0", "-1h", "soon", True, float("nan")])
def test_parse_duration_refuses(bad):
    with pytest.raises(ConfigError):
        parse_duration(bad)


def test_spec_field_round_trips():
    s = ExperimentSpec(deadline="6h", budget_usd=40)
    assert s.deadline == 21600.0 and ExperimentSpec.from_dict(s.to_dict()) == s


def _main(argv, monkeypatch, capsys):
    from spottune.cli import main

    monkeypatch.setattr(sys, "argv", ["spottune", *argv])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_dry_run_prints_the_plan_alone(monkeypatch, capsys):
    code, out, err = _main(["run", "--deadline", "6h", "--budget-usd", "40", "--dry-run"], monkeypatch, capsys)
    assert code == 0, err
    assert out.startswith("plan: deadline 6 h, budget 40 USD") and "expected finish" in out
    assert "dry run: nothing is launched" not in out


@pytest.mark.parametrize("argv, words", [
    (["--deadline", "1h", "--budget-usd", "0.2", "--num-samples", "20"], "at most 29 trials by 1 h within 0.2 USD"),
    (["--deadline", "0", "--budget-usd", "40"], "deadline is '0'"),
    (["--deadline", "6h", "--budget-usd", "0.001"], "one instance-hour costs"),
    (["--deadline", "10s", "--budget-usd", "10"], "one step takes"),
])
def test_cli_refuses_in_one_line(argv, words, monkeypatch, capsys):
    code, out, err = _main(["run", *argv, "--dry-run"], monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and words in lines[0], err


def test_tune_refuses_an_infeasible_request(tmp_path):
    from spottune import tune

    with pytest.raises(ConfigError, match="at most 29 trials by 1 h within 0.2 USD"):
        tune(deadline="1h", budget_usd=0.2, num_samples=20, output=tmp_path / "r", progress=False)


def test_the_plan_holds_the_lean_plan_by_hand():
    """Flat prices, r3.large 60 s/step at 0.02 USD/h is the cheapest per step (c3.xlarge: 37.1 s at 0.04 USD/h):
    4 trials to 10 steps, the best to 20, all on r3.large: 50 steps x 60 s x 0.02 / 3600 = 1/60 USD, 2 x 11 x 60 s
    needed (the floor's extra step), stretched to the deadline; commitment 4 x (0.02 + 0.01) USD (DB15)."""
    import dataclasses

    h, start = _history()
    p = plan_run(deadline_s=6 * 3600, budget_usd=0.4, history=h, catalog=InstanceCatalog.load(), markets=[R3, C3],
                 start_s=start, window_s=4 * DAY, reference_seconds_per_step=60.0, boot_s=0.0, n_requested=4,
                 max_steps=20, top_k=1, theta=0.5, hourly_hop=False)
    lean = p.lean
    assert lean.name == "theta-top-k" and lean.target_steps == 20 and lean.type_map == {2.0: "r3.large"}
    assert lean.cost_usd == pytest.approx(1 / 60) and lean.finish_s == pytest.approx(1320.0)
    assert lean.commitment_usd == pytest.approx(0.12)
    (b,) = lean.schedule.brackets
    assert b.live == (4, 1) and b.rungs == (10, 20) and b.durations == pytest.approx((10800.0, 10800.0))
    lines = p.render(mode="plan").splitlines()
    assert lines[-2].startswith("lean plan (the cheapest that fits, DB15): theta-top-k: 4 trials to step 10 on "
                                "r3.large, then 1 trials to step 20 on r3.large; expected cost 0.02 USD")
    assert lines[-1].startswith("executed (deadline_mode plan): the lean plan (theta-top-k), rounds ending 3 h, 6 h")
    # no lean plan: SEER's brackets run, with hourly relaunches, and the plan says why
    none = dataclasses.replace(p, lean=None, lean_error="no plan of 4 trials ...")
    lines = none.render(mode="plan").splitlines()
    assert lines[-2] == "lean plan: none (no plan of 4 trials ...)"
    assert lines[-1].startswith("executed (deadline_mode plan): these brackets and trials") and "no lean plan fits" in lines[-1]
    assert p.render(mode="seer").splitlines()[-1].startswith("executed (deadline_mode seer): these brackets")
