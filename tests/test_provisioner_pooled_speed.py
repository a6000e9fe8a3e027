"""PooledSpeedMatrix: speed ratios between instance types learned jointly by a study's trials (design R9)."""

import math

import numpy as np
import pytest

from provisioner import InstanceCatalog, PerformanceMatrix, ProvisionerConfigError, PooledSpeedMatrix
from spottune.speed import seconds_per_step

CORES = {"a.large": 2, "b.xlarge": 4, "c.4xlarge": 16}
SIG = {"sigma_scale": 1.0, "sigma_trial": 0.3, "sigma_exponent": 0.5, "sigma_type": 0.3, "sigma_noise": 0.1}


def test_without_measurements_rows_are_the_spec_prior():
    T = PooledSpeedMatrix(CORES, kappa_s=8.0, reference_cores=2)
    np.testing.assert_allclose(T.row("h"), PerformanceMatrix(CORES, kappa_s=8.0).row("h"), rtol=1e-12)
    np.testing.assert_allclose(T.row("h"), [8 / 2, 8 / 4, 8 / 16], rtol=1e-12)  # columns in sorted order
    assert T.pooled_fit()[:2] == (0.0, 1.0)


def test_one_measurement_matches_gaussian_conditioning_by_hand():
    # One observation r = log(measured / prior) at type c splits over the five independent terms of the model in
    # proportion to their prior variances: g = σs² r / v, a' = σt² r / v, β = 1 − x σβ² r / v, u_c = σu² r / v,
    # with v = σs² + σt² + x² σβ² + σu² + σe² and x = log(16 / 2).
    T = PooledSpeedMatrix(CORES, kappa_s=8.0, reference_cores=2, **SIG)
    assert T.update("h0", "c.4xlarge", seconds=200.0, steps=100) == 2.0  # the measured cell is kept exactly
    r, x = math.log(2.0 / 0.5), math.log(8.0)
    v = 1.0 + 0.3**2 + x * x * 0.5**2 + 0.3**2 + 0.1**2
    g, a, beta, u_c = r / v, 0.09 * r / v, 1 - x * 0.25 * r / v, 0.09 * r / v
    g_fit, beta_fit, u = T.pooled_fit()
    assert g_fit == pytest.approx(g, rel=1e-12) and beta_fit == pytest.approx(beta, rel=1e-12)
    assert u["c.4xlarge"] == pytest.approx(u_c, rel=1e-12) and u["a.large"] == 0.0 and u["b.xlarge"] == 0.0
    level = math.log(8.0 / 2)  # seconds per step at the 2-core reference
    assert T.seconds_per_step("h0", "b.xlarge") == pytest.approx(math.exp(level + g + a - beta * math.log(2)),
                                                                 rel=1e-12)
    assert T.seconds_per_step("h0", "c.4xlarge") == 2.0
    # another trial never measured: its own level is the prior, but g, β and u are shared
    assert T.seconds_per_step("h1", "c.4xlarge") == pytest.approx(math.exp(level + g - beta * x + u_c), rel=1e-12)
    assert T.seconds_per_step("h1", "c.4xlarge") > 0.5  # it learned that the large type is slower than believed
    assert T.seconds_per_step("h1", "a.large") == pytest.approx(4.0 * math.exp(g), rel=1e-12)
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
    for h, j, t in cells:  # variables g, a0, a1, β, u0, u1, u2 (levels relative to log(κ / 2))
        r = np.zeros(7)
        r[0], r[1 + h], r[3], r[4 + j] = 1.0, 1.0, -x[j], 1.0
        rows.append(r / 0.1), ys.append((math.log(t) - math.log(8.0 / 2)) / 0.1)
    prior_sd, prior_mean = np.array([1.0, 0.3, 0.3, 0.5, 0.3, 0.3, 0.3]), np.array([0, 0, 0, 1.0, 0, 0, 0])
    A = np.vstack([np.array(rows), np.diag(1 / prior_sd)])
    b = np.r_[ys, prior_mean / prior_sd]
    joint = np.linalg.lstsq(A, b, rcond=None)[0]
    g, beta, u = T.pooled_fit()
    assert g == pytest.approx(joint[0], rel=1e-10) and beta == pytest.approx(joint[3], rel=1e-10)
    np.testing.assert_allclose([u["a.large"], u["b.xlarge"], u["c.4xlarge"]], joint[4:], rtol=1e-9, atol=1e-12)
    # h1's prediction on c.4xlarge uses its own level g + a1
    expected = math.exp(math.log(4.0) + joint[0] + joint[2] - joint[3] * x[2] + joint[6])
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
    T = _simulated_study(1.0)
    true = {t: seconds_per_step(60.0, catalog[t].vcpus, catalog[t].ecu) for t in T.instance_types}
    spec = PerformanceMatrix.from_catalog(catalog, T.instance_types, kappa_s=120.0)
    err = np.abs(np.log(T.row("h9") / np.array([true[t] for t in T.instance_types])))
    spec_err = np.abs(np.log(spec.row("h9") / np.array([true[t] for t in spec.instance_types])))
    assert err.max() < math.log(1.25) and spec_err.max() > math.log(6.5)
    assert 0.3 < T.pooled_fit()[1] < 0.7  # sublinear


def _simulated_study(declared_error, **kw):
    """Six trials, each measured on one type at the simulator's true speed times ``declared_error``."""
    catalog = InstanceCatalog.load()
    types = ["m3.medium", "m3.large", "r3.large", "c3.xlarge", "g2.2xlarge", "c3.8xlarge", "d2.8xlarge"]
    T = PooledSpeedMatrix.from_catalog(catalog, types, kappa_s=120.0, reference_cores=2, **kw)
    for k, t in enumerate(["d2.8xlarge", "m3.medium", "g2.2xlarge", "c3.xlarge", "r3.large", "c3.8xlarge"]):
        T.update(f"h{k}", t, declared_error * seconds_per_step(60.0, catalog[t].vcpus, catalog[t].ecu) * 50, 50)
    return T


@pytest.mark.parametrize("error", [1 / 3, 3.0])
def test_a_common_error_of_the_declared_speed_lands_in_the_scale_not_in_the_ratios(error):
    # Every trial takes `error` times its declared seconds per step (a live run whose declared speed is off).
    # The learned scale g takes the error; the ratios between types barely move, and not at all as σ_scale → ∞.
    right, off = _simulated_study(1.0), _simulated_study(error)
    ratio_shift = np.log(off.row("h9") / right.row("h9")) - math.log(error)  # 0 when only the level moved
    assert np.abs(ratio_shift).max() < 0.06
    assert off.pooled_fit()[0] - right.pooled_fit()[0] == pytest.approx(math.log(error), abs=0.06)
    flat = [_simulated_study(e, sigma_scale=1e6).row("h9") for e in (1.0, error)]
    np.testing.assert_allclose(flat[1] / flat[0], error, rtol=1e-9)
    # without the scale term (σ_scale → 0) the same error distorts the ratios between types by a factor 3
    stiff = [_simulated_study(e, sigma_scale=1e-3).row("h9") for e in (1.0, error)]
    assert np.ptp(np.log(stiff[1] / stiff[0])) > 1.0


@pytest.mark.parametrize("kw", [{"sigma_trial": 0.0}, {"sigma_scale": 0.0}, {"sigma_noise": -1.0}, {"sigma_type": float("nan")},
                                {"reference_cores": 0}])
def test_bad_settings_are_refused(kw):
    with pytest.raises(ProvisionerConfigError, match=next(iter(kw))):
        PooledSpeedMatrix(CORES, **kw)
