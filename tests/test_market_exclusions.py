"""provisioner.MarketExclusions: a market that refused a launch for capacity leaves the choice for a while."""

from __future__ import annotations

import numpy as np
import pytest

from provisioner import CheapestMarketChooser, InstanceCatalog, MarketExclusions, Pool
from provisioner.errors import NoMarketAvailable
from tests.test_sim_backend import A, B, T0, history


def chooser():
    return CheapestMarketChooser(history(), InstanceCatalog.load(), Pool(), np.random.default_rng(0))


def test_an_excluded_market_is_skipped_until_the_exclusion_ends():
    c = chooser()
    assert c.choose("t", T0).market == A  # A at 0.02 USD/h is the cheapest
    c.exclusions = MarketExclusions(600.0)
    c.exclusions.exclude(A, T0, "InsufficientInstanceCapacity")
    choice = c.choose("t", T0 + 599.0)
    assert choice.market == B
    assert [(str(s.market), s.reason) for s in choice.explanation.skipped] == [
        (str(A), f"excluded after InsufficientInstanceCapacity until {T0 + 600:.0f} s")]
    assert c.choose("t", T0 + 600.0).market == A  # back after 600 s


def test_excluding_every_market_leaves_nothing_to_choose():
    c = chooser()
    c.exclusions = MarketExclusions()
    for m in (A, B):
        c.exclusions.exclude(m, T0, "InsufficientInstanceCapacity")
    with pytest.raises(NoMarketAvailable):
        c.choose("t", T0 + 1.0)


def test_the_duration_must_be_positive():
    with pytest.raises(ValueError, match="duration_s is 0"):
        MarketExclusions(0.0)
