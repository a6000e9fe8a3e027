"""A performance matrix whose speed ratios between instance types are learned jointly by a study's trials.

The paper's matrix (:class:`provisioner.PerformanceMatrix`, the T of the SpotTune paper's Eq 2) starts every trial at
``T[h][i] = κ_h / cores_i`` and rescales a trial's unmeasured cells from its own measured ones by the same rule. Two
things go wrong when speed does not grow linearly with vCPUs (decision R9; docs/design/evaluation.md, "What the
provisioner buys"): the prior is optimistic about large types, and every trial has to find that out for itself.

:class:`PooledSpeedMatrix` keeps the measured cells exactly as the paper's matrix does (first measurement, then an
EMA) and predicts the unmeasured ones from a log-linear model shared by all rows ([I], design R9)::

    log T[h][i] = g + a_h − β · log(cores_i / c_ref) + u_i + ε

- ``g ~ N(0, σ_scale²)``: how far every declared speed is off, shared (a live run whose declared seconds per step
  is not what the workers take, or a recorded study whose trials get their mean). Its prior is wide, so a common
  error of the declared κ lands here and leaves the ratios between types alone (design R9, "scale");
- ``a_h ~ N(log(κ_h / c_ref), σ_trial²)``: the trial's own level, its seconds per step on ``c_ref`` cores (the
  reference instance a workload declares its speed on: 2 vCPUs in ``spottune.trainable``); a change of β pivots
  around it;
- ``β ~ N(1, σ_exponent²)``: how speed scales with cores, shared; the prior mean 1 is the paper's linear rule,
  which stays optimistic until a large type is measured (so the argmin still tries it);
- ``u_i ~ N(0, σ_type²)``: what the type's cores do not explain (per-core speed, memory bandwidth), shared;
- ``ε ~ N(0, σ_noise²)``: a measured cell's noise (the paper's per-step COV < 0.1).

Each measured cell ``(h, i)`` is one observation ``log T[h][i]``. The MAP estimate of (g, β, u) integrates the a_h out
(a trial's observations share its level: covariance σ_noise² I + σ_trial² 11ᵀ, inverted by Sherman–Morrison), so one
solve of size 2 + n_types serves any number of trials; a_h is then its posterior mean given (g, β, u). One trial
measured on d2.8xlarge thus moves every trial's belief about d2.8xlarge (through u) and about every other large type
(through β), and a trial nobody measured takes the learned scale g. With no measurement at all the rows equal the
paper's prior ``κ_h / cores_i``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np
import pandas as pd

from provisioner._performance import DEFAULT_ALPHA, PerformanceMatrix
from provisioner.errors import ProvisionerConfigError

#: Prior spreads (natural-log units) of :class:`PooledSpeedMatrix`: common scale of the declared speeds, trial level,
#: exponent, per-type residual, noise.
DEFAULT_SIGMAS = {"sigma_scale": 1.0, "sigma_trial": 0.3, "sigma_exponent": 0.5, "sigma_type": 0.3,
                  "sigma_noise": 0.1}


class PooledSpeedMatrix(PerformanceMatrix):
    """T[h][i], seconds per step, with speed ratios between types pooled over all trials (module docstring).

    Parameters
    ----------
    cores : mapping instance type -> float
        Cores per instance type (vCPUs), > 0.
    kappa_s, alpha
        As :class:`PerformanceMatrix`: the default κ (seconds per step on one core) and the EMA factor of a
        measured cell.
    reference_cores : float, default 1
        c_ref, > 0: the core count at which κ / c_ref is the declared seconds per step (module docstring).
    sigma_scale, sigma_trial, sigma_exponent, sigma_type, sigma_noise : float
        Prior standard deviations, natural-log units, > 0 (defaults :data:`DEFAULT_SIGMAS`).

    Raises
    ------
    ProvisionerConfigError
        On an empty ``cores``, a core count, κ or σ that is not > 0, or α outside (0, 1].
    """

    def __init__(self, cores: Mapping[str, float], *, kappa_s: float = 1.0, alpha: float = DEFAULT_ALPHA,
                 sigma_scale: float = DEFAULT_SIGMAS["sigma_scale"], sigma_trial: float = DEFAULT_SIGMAS["sigma_trial"],
                 sigma_exponent: float = DEFAULT_SIGMAS["sigma_exponent"],
                 sigma_type: float = DEFAULT_SIGMAS["sigma_type"], sigma_noise: float = DEFAULT_SIGMAS["sigma_noise"],
                 reference_cores: float = 1.0):
        super().__init__(cores, kappa_s=kappa_s, alpha=alpha)
        self.sigmas = {"sigma_scale": sigma_scale, "sigma_trial": sigma_trial, "sigma_exponent": sigma_exponent,
                       "sigma_type": sigma_type, "sigma_noise": sigma_noise}
        for name, v in {**self.sigmas, "reference_cores": reference_cores}.items():
            if not (math.isfinite(float(v)) and float(v) > 0):
                raise ProvisionerConfigError(f"{name} is {v}, but must be > 0")
        self.sigmas = {k: float(v) for k, v in self.sigmas.items()}
        self.reference_cores = float(reference_cores)
        self._x = np.log(self.cores / self.reference_cores)
        self._log_ref = math.log(self.reference_cores)
        self._fitted: tuple[float, float, np.ndarray, dict[Hashable, float]] | None = None
        self._measured_ids: dict[Hashable, None] = {}  # trials with a measured cell, in first-measured order

    # -- the pooled model ----------------------------------------------------------------------------------
    def _fit(self) -> tuple[float, float, np.ndarray, dict[Hashable, float]]:
        """(g, β, u, {measured trial: g + a_h − log(κ_h / c_ref)}) at the MAP; cached until the next measurement."""
        if self._fitted is not None:
            return self._fitted
        s, n = self.sigmas, self.cores.size
        ids = list(self._measured_ids)
        if not ids:
            self._fitted = (0.0, 1.0, np.zeros(n), {})
            return self._fitted
        # unknowns φ = (g, β, u_1..u_n); prior precision and precision-weighted mean (β = 1)
        lam = np.diag(np.r_[1.0 / s["sigma_scale"] ** 2, 1.0 / s["sigma_exponent"] ** 2,
                            np.full(n, 1.0 / s["sigma_type"] ** 2)])
        eta = np.zeros(n + 2)
        eta[1] = 1.0 / s["sigma_exponent"] ** 2
        mask = np.array([self._measured[h] for h in ids])  # (trials, types)
        level0 = np.log([self._kappa.get(h, self.kappa_s) for h in ids]) - self._log_ref
        trial, col = np.nonzero(mask)  # one observation per measured cell
        y = np.log(np.array([self._rows[h] for h in ids])[trial, col]) - level0[trial]
        z = np.zeros((y.size, n + 2))  # design of φ: log T − log(κ_h / c_ref) − a_h = g − β x_i + u_i
        z[:, 0] = 1.0
        z[:, 1] = -self._x[col]
        z[np.arange(y.size), 2 + col] = 1.0
        zs, ys = np.zeros((len(ids), n + 2)), np.bincount(trial, weights=y, minlength=len(ids))
        np.add.at(zs, trial, z)
        # a trial's observations share its level: covariance σ_noise² I + σ_trial² 11ᵀ, whose inverse is
        # (I − c 11ᵀ) / σ_noise² with c = σ_trial² / (σ_noise² + n_h σ_trial²) (Sherman–Morrison)
        c = s["sigma_trial"] ** 2 / (s["sigma_noise"] ** 2 + mask.sum(axis=1) * s["sigma_trial"] ** 2)
        lam += (z.T @ z - (zs * c[:, None]).T @ zs) / s["sigma_noise"] ** 2
        eta += (z.T @ y - zs.T @ (c * ys)) / s["sigma_noise"] ** 2
        phi = np.linalg.solve(lam, eta)
        g = float(phi[0])
        levels = dict(zip(ids, (g + c * (ys - zs @ phi)).tolist()))  # g + posterior mean of each a_h given φ
        self._fitted = (g, float(phi[1]), phi[2:], levels)
        return self._fitted

    # -- PerformanceMatrix's hooks -----------------------------------------------------------------------
    def row(self, trial_id: Hashable) -> np.ndarray:
        """T[h], seconds per step on each instance type: measured cells as measured, the others from the model.

        Parameters
        ----------
        trial_id : hashable

        Returns
        -------
        ndarray of shape (n_types,)
            Seconds per step, in the order of :attr:`instance_types`.
        """
        return self.rows([trial_id])[0]

    def rows(self, trial_ids: Sequence[Hashable]) -> np.ndarray:
        """T for several trials, shape (n_trials, n_types), seconds per step.

        Parameters
        ----------
        trial_ids : sequence of hashable

        Returns
        -------
        ndarray of shape (n_trials, n_types)
            Seconds per step (one MAP fit of the pooled model, cached until the next measurement).
        """
        g, beta, u, levels = self._fit()
        a = [math.log(self._kappa.get(h, self.kappa_s)) - self._log_ref + levels.get(h, g) for h in trial_ids]
        out = np.exp(np.array(a, dtype=float)[:, None] - beta * self._x + u)
        for k, h in enumerate(trial_ids):
            if h in levels:  # measured cells as measured
                mask = self._measured[h]
                out[k, mask] = self._rows[h][mask]
        return out

    _prior = row  # PerformanceMatrix.add_trial's first row of a trial: the model's prediction

    def _rescale(self, trial_id: Hashable) -> None:
        self._fitted = None  # every row depends on the pooled fit; the stored unmeasured cells are never read
        if self._measured[trial_id].any():
            self._measured_ids[trial_id] = None

    def to_frame(self) -> pd.DataFrame:
        """Rows of the trials seen so far, as :meth:`rows` gives them (index: trial id, columns: instance types).

        Returns
        -------
        pandas.DataFrame
            Seconds per step.
        """
        ids = list(self._rows)
        return pd.DataFrame(self.rows(ids), index=ids, columns=self.instance_types)

    def pooled_fit(self) -> tuple[float, float, dict[str, float]]:
        """(g, β, {instance type: u_i}): the learned common error of the declared speeds, the exponent of cores
        and each type's residual (natural-log units; T = exp(g) · κ / c_ref on c_ref cores for a trial nobody
        measured).

        Returns
        -------
        g : float
            Common log-error of the declared speeds.
        beta : float
            Exponent of the vCPU count (1 = the paper's linear rule).
        u : dict of str -> float
            Per-type log-residual.
        """
        g, beta, u, _ = self._fit()
        return g, beta, dict(zip(self.instance_types, u.tolist()))
