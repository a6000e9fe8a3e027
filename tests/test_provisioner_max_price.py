"""Max price rule D1 (docs/design/decisions.md): b = current price + U[0.00001, 0.2], seeded, capped on request."""

import numpy as np
import pytest

from provisioner import FixedMaxPrice, MaxPriceRule, ProvisionerConfigError

CURRENT = np.array([0.02, 0.15, 0.30])


def test_same_seed_same_draws():
    rule = MaxPriceRule()
    a = rule.max_prices(np.random.default_rng(42), CURRENT, None, 4)
    b = rule.max_prices(np.random.default_rng(42), CURRENT, None, 4)
    np.testing.assert_array_equal(a, b)
    c = rule.max_prices(np.random.default_rng(43), CURRENT, None, 4)
    assert not np.array_equal(a, c)


def test_draws_are_current_plus_uniform_delta():
    rule = MaxPriceRule()
    b = rule.max_prices(np.random.default_rng(0), CURRENT, None, 2000)
    delta = b - CURRENT
    assert b.shape == (2000, 3)
    assert delta.min() >= 0.00001 and delta.max() <= 0.2
    expected = np.random.default_rng(0).uniform(0.00001, 0.2, size=(2000, 3))
    np.testing.assert_array_equal(b, CURRENT + expected)


def test_batch_draw_equals_sequential_draws():
    rule = MaxPriceRule()
    batch = rule.max_prices(np.random.default_rng(7), CURRENT, None, 3)
    rng = np.random.default_rng(7)
    seq = np.vstack([rule.max_prices(rng, CURRENT, None, 1) for _ in range(3)])
    np.testing.assert_array_equal(batch, seq)


def test_cap_at_on_demand():
    rule = MaxPriceRule(cap_at_on_demand=True)
    on_demand = np.array([0.133, 0.2, 0.25])  # third market trades above on-demand
    b = rule.max_prices(np.random.default_rng(1), CURRENT, on_demand, 50)
    assert np.all(b <= on_demand) and np.all(b[:, 2] == 0.25)
    assert rule.needs_on_demand
    with pytest.raises(ProvisionerConfigError):
        rule.max_prices(np.random.default_rng(1), CURRENT, None, 1)


def test_fixed_delta_and_fixed_price():
    b = MaxPriceRule(delta_low_usd_per_hour=0.1, delta_high_usd_per_hour=0.1).max_prices(np.random.default_rng(0), CURRENT, None, 2)
    np.testing.assert_allclose(b, np.vstack([CURRENT + 0.1] * 2))
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    np.testing.assert_array_equal(FixedMaxPrice(100.0).max_prices(rng, CURRENT, None, 2), np.full((2, 3), 100.0))
    assert rng.bit_generator.state == state  # draws nothing


def test_bad_rules():
    with pytest.raises(ProvisionerConfigError):
        MaxPriceRule(delta_low_usd_per_hour=0.3, delta_high_usd_per_hour=0.2)
    with pytest.raises(ProvisionerConfigError):
        FixedMaxPrice(0.0)
    with pytest.raises(ProvisionerConfigError, match="numpy.random.Generator"):
        MaxPriceRule().deltas(np.random.RandomState(0), 1, 1)
