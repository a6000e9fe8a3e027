"""Tuning starts lie between the evaluation starts, on whole hours, never on one."""

import pytest

from spottune.errors import SpottuneError
from spottune.evaluation import supplementary_starts, tuning_starts

H = 3600.0


def test_thirds_between_consecutive_starts_rounded_up_to_the_hour():
    # 0 h, 10 h, 19 h: thirds at 3.33 h and 6.67 h -> 4 h, 7 h; then 13 h and 16 h exactly
    assert tuning_starts([10 * H, 0.0, 19 * H]) == [4 * H, 7 * H, 13 * H, 16 * H]


def test_disjoint_from_the_evaluation_starts_of_the_benchmark():
    ev = [1428217200.0 + i * 15.75 * 86400 for i in range(10)]
    ts = tuning_starts(ev)
    assert len(ts) == 18
    assert min(abs(t - e) for t in ts for e in ev) >= 5.2 * 86400


def test_needs_two_evaluation_starts():
    with pytest.raises(SpottuneError):
        tuning_starts([0.0])


def test_supplementary_starts_sixths_and_half_rounded_up():
    # 0 h and 12 h: 2 h, 6 h, 10 h exactly; 12 h and 21 h: 13.5 h -> 14 h, 16.5 h -> 17 h, 19.5 h -> 20 h
    assert supplementary_starts([0.0, 21 * H, 12 * H]) == [2 * H, 6 * H, 10 * H, 14 * H, 17 * H, 20 * H]


def test_supplementary_starts_disjoint_from_evaluation_and_tuning_starts():
    ev = [1428217200.0 + i * 15.75 * 86400 for i in range(10)]
    sup = supplementary_starts(ev)
    assert len(sup) == 27
    assert min(abs(s - o) for s in sup for o in ev + tuning_starts(ev)) >= 2.58 * 86400
    with pytest.raises(SpottuneError, match="supplementary starts lie between evaluation starts"):
        supplementary_starts([0.0])
