"""The performance matrix T: seconds per training step, per trial (row) and instance type (column).

Source: the SpotTune paper, Eq 2's performance matrix: "T is initiated according to the number of
CPU cores of each instance" and "updated in an online manner according to the latest runs". The
details are [I] decisions, recorded in ``docs/design/provisioner.md``:

- **Init** ``T0[h][i] = κ_h / cores_i`` (κ_h: seconds per step on one core; default 1.0, or a per-trial
  prior from :meth:`PerformanceMatrix.add_trial`). Only ratios within a row matter for the argmin.
- **Rescale** the unmeasured cells of a row once a cell (h, j) is measured:
  ``T[h][i] = T[h][j] · cores_j / cores_i``. With several measured cells, κ̂_h is the geometric mean of
  ``T[h][j] · cores_j`` over them (exactly the paper's formula with one).
- **Online update**: the first measurement of a cell replaces its prior; later ones are blended with an
  exponential moving average ``T ← α · measured + (1 − α) · T``, α = 0.5 by default.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from provisioner._catalog import InstanceCatalog
from provisioner.errors import ProvisionerConfigError, UnknownInstanceType

#: Default EMA factor. The paper measured a per-step time COV < 0.1 within a job (SpotTune paper), so one
#: segment is already a good estimate; α = 0.5 makes the latest segment count as much as all history,
#: so a real change (other hardware in another zone, a noisy neighbour) is tracked within 2–3 segments,
#: while in steady state it keeps the variance at α / (2 − α) = 1/3 of a single segment's.
DEFAULT_ALPHA = 0.5


class PerformanceMatrix:
    """T[h][i], seconds per step of trial h on instance type i (the SpotTune paper's T in Eq 2).

    Parameters
    ----------
    cores : mapping instance type -> float
        Cores per instance type (vCPUs by default; pass ECUs for a different speed basis). > 0.
    kappa_s : float
        Default κ: seconds per step on one core, for trials without their own prior. > 0.
    alpha : float
        EMA factor in (0, 1] for updates after a cell's first measurement (1 = keep the latest only).

    Raises
    ------
    ProvisionerConfigError
        If ``cores`` is empty or holds a value that is not > 0, ``kappa_s`` is not > 0, or ``alpha`` is outside
        (0, 1].

    Notes
    -----
    Rows are created on the first :meth:`add_trial` or :meth:`update`; reading a trial never seen
    returns the κ / cores prior without storing anything. Trial ids are any hashable (str or int for
    JSON event logs).
    """

    def __init__(self, cores: Mapping[str, float], *, kappa_s: float = 1.0, alpha: float = DEFAULT_ALPHA):
        if not cores:
            raise ProvisionerConfigError("cores is empty, but the matrix needs at least one instance type")
        for it, c in cores.items():
            if not (math.isfinite(float(c)) and float(c) > 0):
                raise ProvisionerConfigError(f"cores of {it} is {c}, but must be > 0")
        _check_kappa(kappa_s)
        if not (0.0 < float(alpha) <= 1.0):
            raise ProvisionerConfigError(f"alpha is {alpha}, but must be 0 < alpha <= 1")
        self.instance_types: list[str] = sorted(cores)
        self.cores = np.array([float(cores[it]) for it in self.instance_types])
        self.kappa_s = float(kappa_s)
        self.alpha = float(alpha)
        self._col = {it: j for j, it in enumerate(self.instance_types)}
        self._rows: dict[Hashable, np.ndarray] = {}
        self._measured: dict[Hashable, np.ndarray] = {}
        self._kappa: dict[Hashable, float] = {}

    @classmethod
    def from_catalog(cls, catalog: InstanceCatalog, instance_types: Iterable[str], *, units: str = "vcpus",
                     **kwargs) -> "PerformanceMatrix":
        """Matrix over ``instance_types`` with cores = the catalog's vCPUs, or its GPUs for a GPU trainable.

        Parameters
        ----------
        catalog : InstanceCatalog
        instance_types : iterable of str
            The columns, e.g. the pool's types.
        units : {"vcpus", "gpus"}, default "vcpus"
            What the prior ``κ / cores`` divides by: the paper's vCPUs, or the GPUs of each type when the
            trainable declares ``gpu`` > 0 (decisions.md IC3: its steps run on the GPUs, so a type's vCPUs say
            little about its speed).
        **kwargs
            ``kappa_s`` and ``alpha`` of the constructor (and ``reference_cores`` of a subclass).

        Returns
        -------
        PerformanceMatrix

        Raises
        ------
        UnknownInstanceType
            If a type is not in the catalog.
        ProvisionerConfigError
            If ``units`` is unknown, or is ``gpus`` and a type has no GPU.
        """
        if units not in ("vcpus", "gpus"):
            raise ProvisionerConfigError(f"units is {units!r}, but must be 'vcpus' or 'gpus'")
        return cls({it: getattr(catalog[it], units) for it in instance_types}, **kwargs)

    # -- reading --------------------------------------------------------------------------------------
    def column(self, instance_type: str) -> int:
        """Column index of an instance type.

        Parameters
        ----------
        instance_type : str

        Returns
        -------
        int
            Index into :attr:`instance_types`.

        Raises
        ------
        UnknownInstanceType
            If the matrix lacks the type.
        """
        try:
            return self._col[instance_type]
        except KeyError:
            raise UnknownInstanceType(
                f"instance type {instance_type!r} is not a column of the performance matrix ({', '.join(self.instance_types)})"
            ) from None

    def _prior(self, trial_id: Hashable) -> np.ndarray:
        return self._kappa.get(trial_id, self.kappa_s) / self.cores

    def row(self, trial_id: Hashable) -> np.ndarray:
        """T[h], seconds per step on each instance type (order: :attr:`instance_types`), a copy.

        Parameters
        ----------
        trial_id : hashable
            Trial h; one never seen gets the κ / cores prior.

        Returns
        -------
        ndarray of shape (n_types,)
            Seconds per step.
        """
        r = self._rows.get(trial_id)
        return self._prior(trial_id) if r is None else r.copy()

    def rows(self, trial_ids: Sequence[Hashable]) -> np.ndarray:
        """T for several trials, ndarray of shape (n_trials, n_types), seconds per step.

        Parameters
        ----------
        trial_ids : sequence of hashable

        Returns
        -------
        ndarray of shape (n_trials, n_types)
            Seconds per step; columns in the order of :attr:`instance_types`.
        """
        out = np.empty((len(trial_ids), self.cores.size))
        for k, h in enumerate(trial_ids):
            r = self._rows.get(h)
            out[k] = self._prior(h) if r is None else r
        return out

    def seconds_per_step(self, trial_id: Hashable, instance_type: str) -> float:
        """T[h][i], seconds per step.

        Parameters
        ----------
        trial_id : hashable
        instance_type : str

        Returns
        -------
        float
            Seconds per step.

        Raises
        ------
        UnknownInstanceType
            If the matrix lacks the type.
        """
        return float(self.row(trial_id)[self.column(instance_type)])

    def measured(self, trial_id: Hashable, instance_type: str) -> bool:
        """Whether T[h][i] comes from a measured segment (not from the cores prior).

        Parameters
        ----------
        trial_id : hashable
        instance_type : str

        Returns
        -------
        bool

        Raises
        ------
        UnknownInstanceType
            If the matrix lacks the type.
        """
        m = self._measured.get(trial_id)
        return bool(m is not None and m[self.column(instance_type)])

    def measured_row(self, trial_id: Hashable) -> np.ndarray:
        """Boolean mask over :attr:`instance_types`: which cells of T[h] are measured.

        Parameters
        ----------
        trial_id : hashable

        Returns
        -------
        ndarray of bool, shape (n_types,)
            A copy.
        """
        m = self._measured.get(trial_id)
        return np.zeros(self.cores.size, dtype=bool) if m is None else m.copy()

    # -- writing --------------------------------------------------------------------------------------
    def add_trial(self, trial_id: Hashable, *, kappa_s: float | None = None) -> None:
        """Register a trial with its own prior κ (seconds per step on one core).

        Use it when a workload declares its speed on a reference instance: ``κ = T_ref · cores_ref``.
        Measured cells are kept; unmeasured ones are re-derived.

        Parameters
        ----------
        trial_id : hashable
        kappa_s : float, optional
            κ, seconds per step on one core (> 0); None keeps the trial's current κ (the default κ at first).

        Raises
        ------
        ProvisionerConfigError
            If ``kappa_s`` is not > 0.
        """
        if kappa_s is not None:
            _check_kappa(kappa_s)
            self._kappa[trial_id] = float(kappa_s)
        if trial_id not in self._rows:
            self._rows[trial_id] = self._prior(trial_id)
            self._measured[trial_id] = np.zeros(self.cores.size, dtype=bool)
        else:
            self._rescale(trial_id)

    def update(self, trial_id: Hashable, instance_type: str, seconds: float, steps: int) -> float:
        """Fold a measured run segment into T[h][i] and rescale the row's unmeasured cells.

        Parameters
        ----------
        trial_id : hashable
            Trial h.
        instance_type : str
            Instance type i the segment ran on.
        seconds : float
            Training seconds of the segment (exclude boot, restore and checkpoint time).
        steps : int
            Training steps completed in the segment. 0 carries no speed information: no change.

        Returns
        -------
        float
            The new T[h][i], seconds per step.

        Raises
        ------
        UnknownInstanceType
            If the type is not a column.
        ProvisionerConfigError
            If steps < 0, seconds < 0 or not finite, or seconds == 0 with steps > 0.
        """
        j = self.column(instance_type)
        seconds = float(seconds)
        if not steps >= 0 or not math.isfinite(seconds) or seconds < 0:  # "not >=" also refuses NaN
            raise ProvisionerConfigError(
                f"trial {trial_id}: segment of {seconds} s and {steps} steps, but both must be >= 0 and finite"
            )
        if steps == 0:
            return self.seconds_per_step(trial_id, instance_type)
        if seconds == 0:
            raise ProvisionerConfigError(f"trial {trial_id}: {steps} steps in 0 s, but a step takes > 0 s")
        if trial_id not in self._rows:
            self.add_trial(trial_id)
        measured = seconds / steps
        row, mask = self._rows[trial_id], self._measured[trial_id]
        row[j] = measured if not mask[j] else self.alpha * measured + (1.0 - self.alpha) * row[j]
        mask[j] = True
        self._rescale(trial_id)
        return float(row[j])

    def _rescale(self, trial_id: Hashable) -> None:
        row, mask = self._rows[trial_id], self._measured[trial_id]
        if not mask.any():
            row[:] = self._prior(trial_id)
            return
        idx = np.flatnonzero(mask)
        if idx.size == 1:  # the paper's formula, bit for bit: T[h][i] = T[h][j] * cores_j / cores_i
            j = idx[0]
            row[~mask] = row[j] * self.cores[j] / self.cores[~mask]
        else:  # κ̂_h = geometric mean of T[h][j] * cores_j over the measured cells
            kappa = math.exp(float(np.mean(np.log(row[idx] * self.cores[idx]))))
            row[~mask] = kappa / self.cores[~mask]

    def to_frame(self) -> pd.DataFrame:
        """Stored rows as a DataFrame (index: trial id, columns: instance types), seconds per step.

        Returns
        -------
        pandas.DataFrame
            One row per trial added or updated (trials only read are not stored).
        """
        return pd.DataFrame([self._rows[h] for h in self._rows], index=list(self._rows), columns=self.instance_types)


def _check_kappa(kappa_s: float) -> None:
    if not (math.isfinite(float(kappa_s)) and float(kappa_s) > 0):
        raise ProvisionerConfigError(f"kappa_s is {kappa_s}, but must be > 0 (seconds per step on one core)")
