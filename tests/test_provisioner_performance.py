"""Performance matrix T: κ / cores init, rescaling from a measured cell, EMA update (SpotTune's Eq 2)."""

import numpy as np
import pytest

from provisioner import DEFAULT_ALPHA, InstanceCatalog, PerformanceMatrix, ProvisionerConfigError, UnknownInstanceType

CORES = {"r4.large": 2, "r4.xlarge": 4, "m4.4xlarge": 16}


def test_init_is_kappa_over_cores():
    T = PerformanceMatrix(CORES, kappa_s=8.0)
    assert T.instance_types == ["m4.4xlarge", "r4.large", "r4.xlarge"]
    np.testing.assert_array_equal(T.row("h0"), [8.0 / 16, 8.0 / 2, 8.0 / 4])
    assert T.seconds_per_step("h0", "r4.large") == 4.0
    assert not T.measured("h0", "r4.large")
    assert T.to_frame().empty  # reading does not create rows


def test_from_catalog_uses_vcpus():
    T = PerformanceMatrix.from_catalog(InstanceCatalog.load(), ["r4.large", "m4.4xlarge"])
    assert T.seconds_per_step("h", "r4.large") == 0.5 and T.seconds_per_step("h", "m4.4xlarge") == 1 / 16
    with pytest.raises(UnknownInstanceType):
        PerformanceMatrix.from_catalog(InstanceCatalog.load(), ["zz.nope"])


def test_first_measurement_replaces_prior_and_rescales_row():
    T = PerformanceMatrix(CORES)
    assert T.update("h0", "r4.xlarge", seconds=300.0, steps=100) == 3.0
    assert T.measured("h0", "r4.xlarge") and not T.measured("h0", "r4.large")
    # T[h][i] = T[h][j] * cores_j / cores_i, bit for bit
    assert T.seconds_per_step("h0", "r4.large") == 3.0 * 4 / 2
    assert T.seconds_per_step("h0", "m4.4xlarge") == 3.0 * 4 / 16
    assert T.seconds_per_step("h1", "r4.large") == 0.5  # other rows untouched


def test_ema_update_with_documented_alpha():
    assert DEFAULT_ALPHA == 0.5
    T = PerformanceMatrix(CORES)
    T.update("h0", "r4.large", seconds=200.0, steps=100)  # 2.0
    assert T.update("h0", "r4.large", seconds=300.0, steps=100) == 0.5 * 3.0 + 0.5 * 2.0
    assert T.update("h0", "r4.large", seconds=100.0, steps=100) == 0.5 * 1.0 + 0.5 * 2.5
    T9 = PerformanceMatrix(CORES, alpha=0.9)
    T9.update("h", "r4.large", 100.0, 50)
    assert T9.update("h", "r4.large", 400.0, 100) == pytest.approx(0.9 * 4.0 + 0.1 * 2.0)


def test_two_measured_cells_rescale_with_geometric_mean():
    T = PerformanceMatrix(CORES)
    T.update("h", "r4.large", 200.0, 100)  # 2.0 s/step * 2 cores = 4 core-s
    T.update("h", "m4.4xlarge", 100.0, 100)  # 1.0 s/step * 16 cores = 16 core-s
    assert T.seconds_per_step("h", "r4.xlarge") == pytest.approx(np.sqrt(4 * 16) / 4)
    assert T.seconds_per_step("h", "r4.large") == 2.0 and T.seconds_per_step("h", "m4.4xlarge") == 1.0


def test_zero_steps_is_no_information():
    T = PerformanceMatrix(CORES)
    assert T.update("h", "r4.large", seconds=50.0, steps=0) == 0.5
    assert not T.measured("h", "r4.large")


@pytest.mark.parametrize("seconds, steps", [(-1.0, 10), (10.0, -1), (float("nan"), 3), (0.0, 5), (10.0, float("nan"))])
def test_bad_segments_are_rejected(seconds, steps):
    T = PerformanceMatrix(CORES)
    with pytest.raises(ProvisionerConfigError):
        T.update("h", "r4.large", seconds, steps)
    assert not T.measured("h", "r4.large")  # nothing changed


def test_unknown_column_and_bad_config():
    T = PerformanceMatrix(CORES)
    with pytest.raises(UnknownInstanceType):
        T.update("h", "c5.large", 1.0, 1)
    for kw in ({"kappa_s": 0.0}, {"alpha": 0.0}, {"alpha": 1.5}):
        with pytest.raises(ProvisionerConfigError):
            PerformanceMatrix(CORES, **kw)
    with pytest.raises(ProvisionerConfigError):
        PerformanceMatrix({"r4.large": 0})


def test_per_trial_prior_and_rows():
    T = PerformanceMatrix(CORES)
    T.add_trial("slow", kappa_s=32.0)
    assert T.seconds_per_step("slow", "m4.4xlarge") == 2.0
    rows = T.rows(["slow", "new"])
    assert rows.shape == (2, 3)
    np.testing.assert_array_equal(rows[1], 1.0 / np.array([16, 2, 4]))
    T.update("slow", "r4.large", 10.0, 10)
    T.add_trial("slow", kappa_s=1000.0)  # a measured row keeps its measurements
    assert T.seconds_per_step("slow", "r4.large") == 1.0 and T.seconds_per_step("slow", "r4.xlarge") == 0.5
