"""What the orchestrator is given: its configuration (checked at once) and its own injected rules.

The two injected models are defined once, in the package that implements them, and only imported here:
the market chooser is :class:`provisioner.MarketChooser` (``provisioner.Provisioner`` and the baseline
choosers satisfy it; :class:`provisioner.HorizonChooser` when it prices the trial's plan,
:class:`provisioner.LearningChooser` when it learns from the run's model events), the final-metric predictor is :class:`earlycurve.FinalMetricPredictor` (EarlyCurve,
SLAQ, and :class:`earlycurve.LastValue`, the "no EarlyCurve" default).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from earlycurve import FinalMetricPredictor, LastValue
from provisioner import HorizonChooser, LearningChooser, MarketChooser
from spottune.errors import ConfigError

__all__ = ["FinalMetricPredictor", "HorizonChooser", "LastValue", "LearningChooser", "MarketChooser", "OrchestratorConfig", "PlateauRule", "StopRule",
           "check_rungs", "steps_at"]

PlateauRule = Callable[[np.ndarray, np.ndarray, int], bool]


class StopRule(Protocol):
    """An external early-stopping rule (e.g. an Optuna pruner): "stop this trial now".

    Called by the orchestrator for every step a RUNNING trial reports on its current timeline, the
    final step included (so a rule that mirrors trials elsewhere also learns when a trial completes).
    Returning True before the trial reaches its target stops it at once: its instance is terminated
    (no checkpoint) and the trial becomes STOPPED_EARLY (``TerminateReason.PRUNE``). It must compute
    and do no I/O, like every injected object.
    """

    def should_stop(self, trial_id: str, step: int, loss: float) -> bool:
        """Whether to stop ``trial_id`` after ``step`` steps whose metric, in loss scale, is ``loss``.

        Parameters
        ----------
        trial_id : str
            The trial.
        step : int
            Steps it has done.
        loss : float
            Its metric after ``step`` steps, in loss scale (lower is better).

        Returns
        -------
        bool
            True: stop the trial now.
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class OrchestratorConfig:
    """Table I parameters and the orchestrator's own knobs, checked at once.

    Parameters
    ----------
    max_steps : int
        ``S_max``, steps.
    theta : float, default=0.7
        Early-shutdown rate, 0 < theta <= 1 (1 disables the θ phase).
    top_k : int, default=3
    metric : str, default="loss"
        Key of the metric in ``MetricReported.metrics``.
    mode : {"min", "max"}, default="min"
    max_failures : int, default=2
        Retries of a failing trainable before FAILED (Ray's ``max_failures``).
    launch_retry_s : float, default=60.0
        Back-off after ``LaunchFailed`` or when no market is available, seconds. A launch refused for capacity
        in a market the chooser now excludes is retried at once elsewhere instead (design E12).
    hourly_hop : bool, default=True
        Answer ``HourElapsed`` with a HOP checkpoint and re-provisioning (Algorithm 1). False keeps a
        trial on its instance until it finishes or is revoked (the single-instance and spot-with-restart
        baselines of the evaluation; the paper's single-spot baselines, §IV-A4).
    rungs : sequence of (float, int), default ()
        Synchronous barriers before θ (``docs/design/earlycurve.md`` §8.12): ``(fraction, keep)`` pairs; every
        trial trains to ``ceil(fraction·S_max)`` steps and waits there (checkpointed) until every trial has reached
        it or ended, then the ``keep`` trials with the lowest last observed loss continue to the next barrier and
        the rest stop; θ is the last barrier, where ``top_k`` continue. Checked by :func:`check_rungs`; a string
        ``"0.06:6,0.1:4"`` is accepted. Empty: Algorithm 1's one barrier at θ.

    Raises
    ------
    ConfigError
        On ``max_steps`` < 1, θ outside (0, 1], ``top_k`` < 1, a mode other than ``min`` / ``max``, a negative
        ``max_failures``, ``launch_retry_s`` <= 0, rungs :func:`check_rungs` refuses, or ``max_concurrent_trials``
        neither None nor an integer >= 1.
    """

    max_steps: int
    theta: float = 0.7
    top_k: int = 3
    metric: str = "loss"
    mode: str = "min"
    max_failures: int = 2
    launch_retry_s: float = 60.0
    hourly_hop: bool = True
    rungs: tuple[tuple[float, int], ...] = ()
    max_concurrent_trials: int | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.max_steps, int) and self.max_steps >= 1):
            raise ConfigError(f"`max_steps` is {self.max_steps!r}, but must be an integer >= 1")
        if not 0 < self.theta <= 1:
            raise ConfigError(f"`theta` is {self.theta!r}, but must be 0 < theta <= 1")
        if not (isinstance(self.top_k, int) and self.top_k >= 1):
            raise ConfigError(f"`top_k` is {self.top_k!r}, but must be an integer >= 1")
        if self.mode not in ("min", "max"):
            raise ConfigError(f"`mode` is {self.mode!r}, but must be 'min' or 'max'")
        if not (isinstance(self.max_failures, int) and self.max_failures >= 0):
            raise ConfigError(f"`max_failures` is {self.max_failures!r}, but must be an integer >= 0")
        if not self.launch_retry_s > 0:
            raise ConfigError(f"`launch_retry_s` is {self.launch_retry_s!r}, but must be > 0")
        n = self.max_concurrent_trials
        if n is not None and not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
            raise ConfigError(f"`max_concurrent_trials` is {n!r}, but must be an integer >= 1 or None")
        object.__setattr__(self, "rungs", check_rungs(self.rungs, self.theta, self.top_k, self.max_steps))

    @property
    def barriers(self) -> tuple[tuple[int, int], ...]:
        """``(steps, keep)`` of every barrier in order: the rungs, then θ with ``top_k``; empty when θ = 1."""
        if self.theta >= 1:
            return ()
        return tuple((steps_at(f, self.max_steps), k) for f, k in self.rungs) + ((self.theta_steps, self.top_k),)

    @property
    def barrier_fractions(self) -> tuple[float, ...]:
        """Each barrier's step as a fraction of ``max_steps``, in order (where a learned ranking is fitted)."""
        return tuple(s / self.max_steps for s, _ in self.barriers)

    @property
    def theta_steps(self) -> int:
        """Phase-1 target ``ceil(θ·S_max)`` (Algorithm 1, line 7), steps.

        A 1e-9 tolerance absorbs floating-point noise (``0.07 * 100`` is ``7.000000000000001``, whose
        ceiling would be 8); the result is clamped to ``[1, S_max]``. Same rule as
        :attr:`spottune.experiment.ExperimentSpec.theta_steps`.
        """
        return self.max_steps if self.theta >= 1 else steps_at(self.theta, self.max_steps)


def steps_at(fraction: float, max_steps: int) -> int:
    """``ceil(fraction·max_steps)`` clamped to ``[1, max_steps]``, steps (Algorithm 1, line 7).

    A 1e-9 tolerance absorbs floating-point noise (``0.07 * 100`` is ``7.000000000000001``, whose ceiling would be 8).

    Parameters
    ----------
    fraction : float
        A fraction of S_max, e.g. θ.
    max_steps : int
        S_max, steps.

    Returns
    -------
    int
        Steps, in ``[1, max_steps]``.
    """
    return min(max_steps, max(1, math.ceil(fraction * max_steps - 1e-9)))


def check_rungs(rungs: object, theta: float, top_k: int, max_steps: int) -> tuple[tuple[float, int], ...]:
    """The barrier rungs before θ as ``((fraction, keep), ...)``, checked (:class:`OrchestratorConfig` ``rungs``).

    Parameters
    ----------
    rungs : str or sequence of (float, int)
        ``"0.06:6,0.1:4"`` (the CLI's ``--rungs``) or pairs; empty or None for none.
    theta, top_k, max_steps
        The run's θ, top-k and ``S_max`` (steps).

    Returns
    -------
    tuple of (float, int)
        ``(fraction, keep)`` pairs in order; empty for none.

    Raises
    ------
    ConfigError
        Unless every fraction lies in (0, θ) with θ < 1, the fractions and their steps ``ceil(fraction·S_max)``
        rise strictly and stay below θ's, and the keeps are integers that fall strictly and exceed ``top_k``.
    """
    if rungs is None or (not rungs.strip() if isinstance(rungs, str) else getattr(rungs, "__len__", None) and not len(rungs)):
        return ()
    try:
        pairs = [p.split(":") for p in rungs.split(",")] if isinstance(rungs, str) else list(rungs)
        out = tuple((float(f), int(k)) for f, k in pairs)
        ok = all(float(k) == int(k) for _, k in pairs) and all(math.isfinite(f) for f, _ in out)
    except (TypeError, ValueError, OverflowError):
        out, ok = (), False
    if not ok:
        out = ()
    steps = [steps_at(f, max_steps) for f, _ in out] + [steps_at(theta, max_steps)]
    keeps = [k for _, k in out] + [top_k]
    for bad, rule in ((not ok or not out, "fraction:keep pairs of finite fractions and whole keeps, e.g. '0.06:6,0.1:4'"),
                      (theta >= 1, "empty when theta is 1 (no barrier)"),
                      (not all(0 < f < theta for f, _ in out), f"fractions in (0, theta = {theta:g})"),
                      (not all(a < b for a, b in zip(steps, steps[1:])),
                       f"fractions that rise on distinct steps below theta's (steps {steps} of {max_steps})"),
                      (not all(a > b for a, b in zip(keeps, keeps[1:])), f"keeps that fall and exceed top_k ({top_k})")):
        if bad:
            raise ConfigError(f"rungs is {rungs!r}, but must be {rule}")
    return out
