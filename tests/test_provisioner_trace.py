"""One provisioning round on the real 2015 us-east-1 trace (15 markets) for 16 trials."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from provisioner import CheapestMarketChooser, InstanceCatalog, Pool, Provisioner
from spotmarket.prices import PriceHistory, read_prices
from revpred.protocol import ConstantRevocation

TRACE = Path(__file__).resolve().parents[1] / "data" / "spot_prices" / "us-east-1_2015.csv.gz"


@pytest.fixture(scope="module")
def trace():
    return PriceHistory(read_prices(TRACE))


def test_round_over_the_2015_trace(trace):
    catalog = InstanceCatalog.load()
    prov = Provisioner(trace, catalog, ConstantRevocation(0.3), Pool(), np.random.default_rng(0))
    assert len(prov.markets) == 15
    now = pd.Timestamp("2015-06-01T00:00Z").value / 1e9
    trials = [f"t{i:02d}" for i in range(16)]
    choices = prov.choose_many(trials, now)
    assert [c.trial_id for c in choices] == trials
    for c in choices:
        costs = [x.step_cost_usd for x in c.explanation.candidates]
        assert len(costs) + len(c.explanation.skipped) == 15
        assert c.expected_step_cost_usd == min(costs) and costs == sorted(costs)
        assert c.max_price_usd_per_hour > trace[c.market].price_at(now)
    json.dumps([c.to_dict() for c in choices], allow_nan=False)
    again = Provisioner(trace, catalog, ConstantRevocation(0.3), Pool(), np.random.default_rng(0)).choose_many(trials, now)
    assert [c.to_dict() for c in again] == [c.to_dict() for c in choices]


def test_before_d2_records_the_d2_markets_are_skipped(trace):
    prov = CheapestMarketChooser(trace, InstanceCatalog.load(), Pool(), np.random.default_rng(0))
    c = prov.choose("t", pd.Timestamp("2015-03-20T00:00Z").value / 1e9)  # d2.8xlarge starts 2015-03-31
    assert sorted(s.market.instance_type for s in c.explanation.skipped) == ["d2.8xlarge"] * 3
    assert len(c.explanation.candidates) == 12


def test_market_state_agrees_with_price_series(trace):
    prov = CheapestMarketChooser(trace, InstanceCatalog.load(), Pool(), np.random.default_rng(0))
    rng = np.random.default_rng(5)
    times = rng.uniform(min(s.start_s for s in trace), trace.end_s, size=40).tolist()
    times += [s.start_s for s in trace] + [s.start_s + 1800.0 for s in trace] + [trace.end_s]
    for t in times:
        current, mean, skipped = prov.market_state(t)
        skipped_markets = {s.market for s in skipped}
        for j, m in enumerate(prov.markets):
            s = trace[m]
            if m in skipped_markets:
                assert np.isnan(current[j]) and not (s.start_s <= t <= s.end_s)
                continue
            assert current[j] == s.price_at(t)
            assert mean[j] == pytest.approx(s.mean_price(max(t - 3600.0, s.start_s), t), rel=1e-9, abs=1e-12)
