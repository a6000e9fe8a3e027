"""Market choice on hand-made price histories with hand-set revocation probabilities."""

import json

import numpy as np
import pandas as pd
import pytest

from provisioner import (
    CheapestMarketChooser,
    FastestMarketChooser,
    FixedMaxPrice,
    FixedTypeChooser,
    InstanceCatalog,
    MarketChooser,
    MaxPriceRule,
    NoMarketAvailable,
    PerformanceMatrix,
    Pool,
    Provisioner,
    ProvisionerConfigError,
    ProvisionerError,
    UnknownInstanceType,
    UsefulStepCost,
)
from spotmarket.prices import Market, PriceHistory
from revpred.protocol import ConstantRevocation

R4 = Market("us-east-1a", "r4.large")
M4 = Market("us-east-1a", "m4.4xlarge")
T0 = pd.Timestamp("2017-05-05T00:00Z").value / 1e9
NOW = T0 + 2 * 3600.0


def history(rows, end=None):
    """rows: (seconds after T0, market, price USD/hour)."""
    table = pd.DataFrame({
        "timestamp": pd.to_datetime([T0 + dt for dt, _, _ in rows], unit="s", utc=True),
        "availability_zone": [m.availability_zone for _, m, _ in rows],
        "instance_type": [m.instance_type for _, m, _ in rows],
        "product_description": [m.product_description for _, m, _ in rows],
        "price": [p for _, _, p in rows],
    })
    return PriceHistory(table, end=end)


@pytest.fixture(scope="module")
def catalog():
    return InstanceCatalog.load()


@pytest.fixture
def paper_history():
    # constant prices, so P̄ over the last hour is exactly the price (the paper-style example of Eq 2)
    return history([(0, R4, 0.030), (0, M4, 0.150), (86400, R4, 0.030), (86400, M4, 0.150)])


class Recorder:
    """A predictor that records its calls and answers a fixed p per market."""

    def __init__(self, p):
        self.p, self.calls = p, []

    def predict_proba(self, markets, times_s, max_prices_usd_per_hour):
        self.calls.append((list(markets), times_s, np.asarray(max_prices_usd_per_hour).copy()))
        return np.array([self.p[m] for m in markets])


def paper_provisioner(h, catalog, predictor=None, **kw):
    prov = Provisioner(h, catalog, predictor or ConstantRevocation({R4: 0.6, M4: 0.1}), Pool(), np.random.default_rng(0), **kw)
    prov.record_segment("h", "r4.large", seconds=200.0, steps=100)  # T = 2.0 s/step
    prov.record_segment("h", "m4.4xlarge", seconds=40.0, steps=100)  # T = 0.4 s/step
    return prov


def test_paper_example_r4_large_wins(paper_history, catalog):
    prov = paper_provisioner(paper_history, catalog)
    choice = prov.choose("h", NOW)
    assert isinstance(prov, MarketChooser)
    assert choice.market == R4
    assert choice.p_revocation == 0.6 and choice.seconds_per_step == 2.0
    assert choice.expected_step_cost_usd == pytest.approx((1 - 0.6) * 0.030 * 2.0 / 3600, rel=1e-12)  # 6.667e-6
    cands = {c.market: c for c in choice.explanation.candidates}
    assert cands[M4].step_cost_usd == pytest.approx((1 - 0.1) * 0.150 * 0.4 / 3600, rel=1e-12)  # 1.5e-5
    assert cands[M4].expected_hour_cost_usd == pytest.approx(0.135, rel=1e-12)
    assert cands[R4].mean_price_usd_per_hour == pytest.approx(0.030, rel=1e-12)
    assert [c.rank for c in choice.explanation.candidates] == [0, 1]
    assert choice.explanation.policy == "spottune" and choice.explanation.objective == "eq2"


def test_same_b_for_prediction_and_request(paper_history, catalog):
    rec = Recorder({R4: 0.6, M4: 0.1})
    prov = paper_provisioner(paper_history, catalog, predictor=rec)
    choice = prov.choose("h", NOW)
    assert len(rec.calls) == 1
    markets, t, b = rec.calls[0]
    assert markets == [R4, M4] or markets == [M4, R4]
    assert t == NOW
    asked = dict(zip(markets, b.tolist()))
    assert choice.max_price_usd_per_hour == asked[R4]
    # D1: b = current + U[0.00001, 0.2] from the injected generator, in pool order (zone, type)
    deltas = np.random.default_rng(0).uniform(0.00001, 0.2, size=(1, 2))[0]
    pool_order = sorted([R4, M4])
    for m, d in zip(pool_order, deltas):
        assert asked[m] == pytest.approx({R4: 0.030, M4: 0.150}[m] + d, rel=1e-12)


def test_mean_price_is_time_weighted_over_last_hour(catalog):
    # r4.large 0.02 until 1.5 h, then 0.04: P̄ over [1 h, 2 h] = 0.03
    h = history([(0, R4, 0.02), (5400, R4, 0.04), (0, M4, 0.15), (86400, R4, 0.04), (86400, M4, 0.15)])
    prov = Provisioner(h, catalog, ConstantRevocation(0.0), Pool(), np.random.default_rng(0))
    cands = {c.market: c for c in prov.choose("h", NOW).explanation.candidates}
    assert cands[R4].mean_price_usd_per_hour == pytest.approx(0.03, rel=1e-12)
    assert cands[R4].current_price_usd_per_hour == 0.04


def test_first_decision_uses_cores_prior(paper_history, catalog):
    # with T0 = κ / cores the first choice is argmin (1 - p) P̄ / cores:
    # r4 0.4 * 0.03 / 2 = 0.006 < m4 0.9 * 0.15 / 16 = 0.0084; with p(r4) = 0 it flips (0.015 > 0.0084)
    prov = Provisioner(paper_history, catalog, ConstantRevocation({R4: 0.6, M4: 0.1}), Pool(), np.random.default_rng(0))
    c = prov.choose("new", NOW)
    assert c.market == R4 and c.seconds_per_step == 1 / 2
    assert c.expected_step_cost_usd == pytest.approx(0.4 * 0.03 * 0.5 / 3600, rel=1e-12)
    prov0 = Provisioner(paper_history, catalog, ConstantRevocation({R4: 0.0, M4: 0.1}), Pool(), np.random.default_rng(0))
    assert prov0.choose("new", NOW).market == M4
    assert not any(x.measured for x in c.explanation.candidates)


def test_explanation_lists_every_candidate_and_serialises(catalog):
    h = history([(0, R4, 0.03), (0, M4, 0.15), (3 * 3600, Market("us-east-1b", "r4.large"), 0.02),
                 (86400, R4, 0.03)])
    prov = Provisioner(h, catalog, ConstantRevocation(0.2), Pool(), np.random.default_rng(0))
    choice = prov.choose("h", NOW)
    expl = choice.explanation
    assert {c.market for c in expl.candidates} == {R4, M4}
    assert [s.market for s in expl.skipped] == [Market("us-east-1b", "r4.large")]
    assert "price unknown" in expl.skipped[0].reason
    text = json.dumps(choice.to_dict(), allow_nan=False)
    back = json.loads(text)
    assert back["market"] == str(choice.market) and len(back["explanation"]["candidates"]) == 2
    frame = expl.to_frame()
    assert list(frame["market"]) == [str(c.market) for c in expl.candidates]
    assert {"p_revocation", "mean_price_usd_per_hour", "seconds_per_step", "step_cost_usd"} <= set(frame.columns)


def test_no_known_price_raises(catalog):
    h = history([(3 * 3600, R4, 0.03), (3 * 3600, M4, 0.15), (86400, R4, 0.03)])
    prov = Provisioner(h, catalog, ConstantRevocation(0.0), Pool(), np.random.default_rng(0))
    with pytest.raises(NoMarketAvailable, match="no market of the pool has a known price"):
        prov.choose("h", NOW)
    with pytest.raises(NoMarketAvailable):  # after the end of the recorded history
        prov.choose("h", T0 + 2 * 86400)
    assert prov.choose("h", T0 + 3 * 3600).market in (R4, M4)  # at the first record: known


def test_partial_hour_at_the_start_uses_prices_since_first_record(catalog):
    h = history([(0, R4, 0.03), (1800, R4, 0.06), (0, M4, 0.15), (86400, R4, 0.06)])
    prov = Provisioner(h, catalog, ConstantRevocation(0.0), Pool(), np.random.default_rng(0))
    cands = {c.market: c for c in prov.choose("h", T0 + 2700).explanation.candidates}
    assert cands[R4].mean_price_usd_per_hour == pytest.approx((0.03 * 1800 + 0.06 * 900) / 2700)


def test_tie_break_prefers_faster_then_cheaper_then_market_order(catalog):
    a, b = Market("us-east-1a", "r4.large"), Market("us-east-1b", "r4.large")
    x = Market("us-east-1a", "r4.xlarge")
    # equal step cost: r4.large 0.04 * 1/2 = r4.xlarge 0.08 * 1/4 = 0.02 (bit-equal here)
    h = history([(0, a, 0.04), (0, b, 0.04), (0, x, 0.08), (86400, a, 0.04)])
    prov = Provisioner(h, catalog, ConstantRevocation(0.0), Pool(), np.random.default_rng(0),
                       performance=PerformanceMatrix({"r4.large": 2, "r4.xlarge": 4}, kappa_s=1.0))
    order = [c.market for c in prov.choose("h", NOW).explanation.candidates]
    assert order == [x, a, b]  # faster type first; then zone a before zone b
    assert prov.choose("h", NOW).explanation.order == ("step_cost_usd", "seconds_per_step", "current_price_usd_per_hour", "market")


def test_batch_equals_sequential_and_calls_predictor_once(paper_history, catalog):
    rec = Recorder({R4: 0.6, M4: 0.1})
    trials = [f"t{i}" for i in range(5)]
    batch = Provisioner(paper_history, catalog, rec, Pool(), np.random.default_rng(3)).choose_many(trials, NOW)
    assert len(rec.calls) == 1 and len(rec.calls[0][0]) == 5 * 2
    seq_prov = Provisioner(paper_history, catalog, ConstantRevocation({R4: 0.6, M4: 0.1}), Pool(), np.random.default_rng(3))
    seq = [seq_prov.choose(t, NOW) for t in trials]
    assert [c.to_dict() for c in batch] == [c.to_dict() for c in seq]
    assert [c.trial_id for c in batch] == trials


def test_same_seed_same_choices_different_seed_different_bids(paper_history, catalog):
    def run(seed):
        prov = Provisioner(paper_history, catalog, ConstantRevocation(0.5), Pool(), np.random.default_rng(seed))
        return [c.to_dict() for c in prov.choose_many(["a", "b"], NOW)]
    assert run(1) == run(1)
    assert run(1) != run(2)


def test_pool_filters(catalog):
    r3 = Market("us-east-1b", "r3.xlarge")
    h = history([(0, R4, 0.03), (0, M4, 0.15), (0, r3, 0.05), (86400, R4, 0.03)])
    mk = lambda pool: [m for m in Provisioner(h, catalog, ConstantRevocation(0.0), pool, np.random.default_rng(0)).markets]
    assert mk(Pool()) == sorted([R4, M4, r3])
    assert mk(Pool(min_vcpus=4)) == sorted([M4, r3])
    assert mk(Pool(min_memory_gib=32)) == [M4]  # r3.xlarge 30.5 GiB, m4.4xlarge 64 GiB
    assert mk(Pool(availability_zones=["us-east-1b"])) == [r3]
    assert mk(Pool(instance_types=["r4.large", "r3.xlarge"])) == sorted([R4, r3])
    assert mk(Pool(markets=[M4, R4])) == sorted([R4, M4])
    with pytest.raises(NoMarketAvailable, match="no market passes the pool filters"):
        mk(Pool(min_vcpus=64))
    with pytest.raises(ProvisionerConfigError, match="have no Linux/UNIX market"):
        mk(Pool(instance_types=["c4.large"]))
    with pytest.raises(ProvisionerConfigError, match="single value"):
        Pool(instance_types="r4.large")


def test_missing_catalog_entry_errors():
    odd = Market("us-east-1a", "zz9.huge")
    h = history([(0, R4, 0.03), (0, odd, 1.0), (86400, R4, 0.03)])
    cat = InstanceCatalog.load()
    # the default pool leaves an uncatalogued type out; naming it is an error
    assert Pool().resolve(h, cat) == [R4]
    with pytest.raises(UnknownInstanceType, match="zz9.huge"):
        Provisioner(h, cat, ConstantRevocation(0.0), Pool(instance_types=["zz9.huge"]), np.random.default_rng(0))
    # on-demand cap needs every pool type's price in the market's region
    ap = Market("ap-south-1a", "r4.large")
    h_ap = history([(0, ap, 0.03), (86400, ap, 0.03)])
    with pytest.raises(UnknownInstanceType, match="ap-south-1"):
        Provisioner(h_ap, cat, ConstantRevocation(0.0), Pool(instance_types=["r4.large"]), np.random.default_rng(0),
                    max_price_rule=MaxPriceRule(cap_at_on_demand=True))


def test_cap_at_on_demand_skips_markets_above_on_demand(catalog):
    # m4.4xlarge trades at 1.0 > on-demand 0.8: capped b < price, cannot launch
    h = history([(0, R4, 0.03), (0, M4, 1.0), (86400, R4, 0.03)])
    prov = Provisioner(h, catalog, ConstantRevocation(0.0), Pool(), np.random.default_rng(0),
                       max_price_rule=MaxPriceRule(cap_at_on_demand=True))
    c = prov.choose("h", NOW)
    assert c.market == R4 and c.max_price_usd_per_hour <= 0.13
    assert [s.market for s in c.explanation.skipped] == [M4]
    assert "below the current price" in c.explanation.skipped[0].reason
    low = Provisioner(h, catalog, ConstantRevocation(0.0), Pool(), np.random.default_rng(0), max_price_rule=FixedMaxPrice(0.01))
    with pytest.raises(NoMarketAvailable, match="trial h: no pool market can be launched"):
        low.choose("h", NOW)


def test_useful_step_objective_flips_the_choice(catalog):
    h = history([(0, R4, 0.030), (0, M4, 0.150), (86400, R4, 0.030)])
    def prov(objective=None):
        p = Provisioner(h, catalog, ConstantRevocation({R4: 0.9, M4: 0.1}), Pool(), np.random.default_rng(0), objective=objective)
        p.record_segment("h", "r4.large", 200.0, 100)
        p.record_segment("h", "m4.4xlarge", 10.0, 100)
        return p.choose("h", NOW)
    assert prov().market == R4
    c = prov(UsefulStepCost(restart_s=300.0, checkpoint_s=300.0, lost_s=600.0))
    assert c.market == M4 and c.explanation.objective == "useful-step"
    assert c.expected_step_cost_usd == pytest.approx(0.9 * 0.150 * 0.1 / (0.9 * 3000 + 0.1 * 800), rel=1e-12)


def test_bad_predictor_output_is_reported(paper_history, catalog):
    class Bad:
        def predict_proba(self, markets, times_s, b):
            return np.full(len(markets), 1.5)
    with pytest.raises(ProvisionerError, match="Bad returned"):
        Provisioner(paper_history, catalog, Bad(), Pool(), np.random.default_rng(0)).choose("h", NOW)


def test_constructor_checks(paper_history, catalog):
    with pytest.raises(ProvisionerConfigError, match="numpy.random.Generator"):
        Provisioner(paper_history, catalog, ConstantRevocation(0.0), Pool(), np.random)
    with pytest.raises(ProvisionerConfigError, match="needs a revocation predictor"):
        Provisioner(paper_history, catalog, None, Pool(), np.random.default_rng(0))
    with pytest.raises(UnknownInstanceType):  # a given T must cover the pool's types
        Provisioner(paper_history, catalog, ConstantRevocation(0.0), Pool(), np.random.default_rng(0),
                    performance=PerformanceMatrix({"r4.large": 2}))


# -- alternative choosers ---------------------------------------------------------------------------

def test_cheapest_fastest_fixed(catalog):
    r4b = Market("us-east-1b", "r4.large")
    h = history([(0, R4, 0.030), (0, r4b, 0.025), (0, M4, 0.150), (86400, R4, 0.030)])
    args = (h, catalog, Pool(), np.random.default_rng(0))
    cheap = CheapestMarketChooser(*args).choose("h", NOW)
    assert cheap.market == r4b and cheap.p_revocation is None and cheap.expected_step_cost_usd is None
    assert cheap.explanation.policy == "cheapest"
    json.dumps(cheap.to_dict(), allow_nan=False)
    fast = FastestMarketChooser(h, catalog, Pool(), np.random.default_rng(0))
    assert fast.choose("h", NOW).market == M4
    fast.record_segment("h", "r4.large", 10.0, 100)  # 0.1 s/step; m4 rescaled to 0.1 * 2 / 16, still faster
    assert fast.choose("h", NOW).market == M4
    fast.record_segment("h", "m4.4xlarge", 100.0, 100)  # measured 1.0 s/step: r4.large is faster for this trial
    assert fast.choose("h", NOW).market == r4b  # fastest type, cheapest zone of it
    fixed = FixedTypeChooser("r4.large", h, catalog, Pool(), np.random.default_rng(0),
                             predictor=ConstantRevocation(0.3), max_price_rule=FixedMaxPrice(100.0))
    c = fixed.choose("h", NOW)
    assert c.market == r4b and c.max_price_usd_per_hour == 100.0 and c.p_revocation == 0.3
    assert c.explanation.policy == "fixed:r4.large" and len(c.explanation.candidates) == 2
    with pytest.raises(UnknownInstanceType):
        FixedTypeChooser("zz.large", h, catalog, Pool(), np.random.default_rng(0))
    with pytest.raises(ProvisionerConfigError, match="no market in the pool"):
        FixedTypeChooser("c3.xlarge", h, catalog, Pool(), np.random.default_rng(0))
