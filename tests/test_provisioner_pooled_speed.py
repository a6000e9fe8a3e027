"""PooledSpeedMatrix: speed ratios between instance types learned jointly by a study's trials (design R9)."""

import math

import numpy as np
import pytest

from provisioner import InstanceCatalog, PerformanceMatrix, ProvisionerConfigError, PooledSpeedMatrix
from spottune.backends._speed import seconds_per_step

CORES = {"a.large": 2, "b.xlarge": 4, "c.4xlarge": 16}
SIG = {"sigma_trial": 0.3, "sigma_exponent": 0.5, "sigma_type": 0.3, "sigma_noise": 0.1}


def test_without_measurements_rows_are_the_spec_prior():
    T = PooledSpeedMatrix(CORES, kappa_s=8.0, reference_cores=2)
    np.testing.assert_allclose(T.row("h"), PerformanceMatrix(CORES, kappa_s=8.0).row("h"), rtol=1e-12)
    np.testing.assert_allclose(T.row("h"), [8 / 2, 8 / 4, 8 / 16], rtol=1e-12)  # columns in sorted order
    assert T.pooled_fit()[0] == pytest.approx(1.0)


def test_one_measurement_matches_gaussian_conditioning_by_hand():
    # One observation r = log(measured / prior) at type c splits over the four independent terms of the model in
    # proportion to their prior variances: a' = σt² r / v, β = 1 − x σβ² r / v, u_c = σu² r / v, with
    # v = σt² + x² σβ² + σu² + σe² and x = log(16 / 2).
    T = PooledSpeedMatrix(CORES, kappa_s=8.0, reference_cores=2, **SIG)
    assert T.update("h0", "c.4xlarge", seconds=200.0, steps=100) == 2.0  # the measured cell is kept exactly
    r, x = math.log(2.0 / 0.5), math.log(8.0)
    v = 0.3**2 + x * x * 0.5**2 + 0.3**2 + 0.1**2
    a, beta, u_c = 0.09 * r / v, 1 - x * 0.25 * r / v, 0.09 * r / v
    beta_fit, u = T.pooled_fit()
    assert beta_fit == pytest.approx(beta, rel=1e-12) and u["c.4xlarge"] == pytest.approx(u_c, rel=1e-12)
    assert u["a.large"] == 0.0 and u["b.xlarge"] == 0.0
    level = math.log(8.0 / 2)  # seconds per step at the 2-core reference
    assert T.seconds_per_step("h0", "b.xlarge") == pytest.approx(math.exp(level + a - beta * math.log(2)), rel=1e-12)
    assert T.seconds_per_step("h0", "c.4xlarge") == 2.0
    # another trial never measured: its level is the prior, but β and u are shared
    assert T.seconds_per_step("h1", "c.4xlarge") == pytest.approx(math.exp(level - beta * x + u_c), rel=1e-12)
    assert T.seconds_per_step("h1", "c.4xlarge") > 0.5  # it learned that the large type is slower than believed
    assert T.seconds_per_step("h1", "a.large") == pytest.approx(4.0)  # the pivot: the reference type stays put
    assert not T.measured("h1", "c.4xlarge") and T.measured("h0", "c.4xlarge")
    np.testing.assert_allclose(T.to_frame().loc["h0"].to_numpy(), T.row("h0"))


def test_integrating_out_the_trial_levels_equals_the_joint_map():
    # The fit integrates each a_h out in closed form (Sherman–Morrison). The joint MAP over (a_h, β, u), a plain
    # ridge regression, must give the same β, u and levels: two trials, one measured on two types.
    T = PooledSpeedMatrix(CORES, kappa_s=8.0, reference_cores=2, **SIG)
    T.update("h0", "a.large", 500.0, 100)
    T.update("h0", "c.4xlarge", 300.0, 100)
    T.update("h1", "b.xlarge", 250.0, 100)
    x = np.log(np.array([2, 4, 16]) / 2)  # columns a.large, b.xlarge, c.4xlarge
    cells = [(0, 0, 5.0), (0, 2, 3.0), (1, 1, 2.5)]  # (trial, column, seconds per step)
    rows, ys = [], []
    for h, j, t in cells:  # variables a0, a1, β, u0, u1, u2 (levels relative to log(κ / 2))
        r = np.zeros(6)
        r[h], r[2], r[3 + j] = 1.0, -x[j], 1.0
        rows.append(r / 0.1), ys.append((math.log(t) - math.log(8.0 / 2)) / 0.1)
    prior_sd, prior_mean = np.array([0.3, 0.3, 0.5, 0.3, 0.3, 0.3]), np.array([0, 0, 1.0, 0, 0, 0])
    A = np.vstack([np.array(rows), np.diag(1 / prior_sd)])
    b = np.r_[ys, prior_mean / prior_sd]
    joint = np.linalg.lstsq(A, b, rcond=None)[0]
    beta, u = T.pooled_fit()
    assert beta == pytest.approx(joint[2], rel=1e-10)
    np.testing.assert_allclose([u["a.large"], u["b.xlarge"], u["c.4xlarge"]], joint[3:], rtol=1e-9, atol=1e-12)
    # h1's prediction on c.4xlarge uses its own level a1
    expected = math.exp(math.log(4.0) + joint[1] - joint[2] * x[2] + joint[5])
    assert T.seconds_per_step("h1", "c.4xlarge") == pytest.approx(expected, rel=1e-10)


def test_ema_of_a_measured_cell_is_the_spec_matrix_one():
    T, P = PooledSpeedMatrix(CORES), PerformanceMatrix(CORES)
    for M in (T, P):
        M.update("h", "a.large", 200.0, 100)
        M.update("h", "a.large", 300.0, 100)
    assert T.seconds_per_step("h", "a.large") == P.seconds_per_step("h", "a.large") == 2.5


def test_learns_the_simulators_sublinear_speed_from_other_trials():
    # Trials h0..h5 each measured on one type, at the simulator's true speed (Amdahl f = 0.8 with ECU); a new trial
    # h9 is then predicted within 25 % on every type, where the spec's linear prior is off by up to 6.9x.
    catalog = InstanceCatalog.load()
    types = ["m3.medium", "m3.large", "r3.large", "c3.xlarge", "g2.2xlarge", "c3.8xlarge", "d2.8xlarge"]
    true = {t: seconds_per_step(60.0, catalog[t].vcpus, catalog[t].ecu) for t in types}
    T = PooledSpeedMatrix.from_catalog(catalog, types, kappa_s=120.0, reference_cores=2)
    spec = PerformanceMatrix.from_catalog(catalog, types, kappa_s=120.0)
    for k, t in enumerate(["d2.8xlarge", "m3.medium", "g2.2xlarge", "c3.xlarge", "r3.large", "c3.8xlarge"]):
        T.update(f"h{k}", t, true[t] * 50, 50)
    err = np.abs(np.log(T.row("h9") / np.array([true[t] for t in T.instance_types])))
    spec_err = np.abs(np.log(spec.row("h9") / np.array([true[t] for t in spec.instance_types])))
    assert err.max() < math.log(1.25) and spec_err.max() > math.log(6.5)
    assert 0.3 < T.pooled_fit()[0] < 0.7  # sublinear


@pytest.mark.parametrize("kw", [{"sigma_trial": 0.0}, {"sigma_noise": -1.0}, {"sigma_type": float("nan")},
                                {"reference_cores": 0}])
def test_bad_settings_are_refused(kw):
    with pytest.raises(ProvisionerConfigError, match=next(iter(kw))):
        PooledSpeedMatrix(CORES, **kw)
