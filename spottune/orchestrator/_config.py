"""What the orchestrator is given: its configuration (checked at once) and its own injected rules.

The two injected models are defined once, in the package that implements them, and only imported here:
the market chooser is :class:`provisioner.MarketChooser` (``provisioner.Provisioner`` and the baseline
choosers satisfy it), the final-metric predictor is :class:`earlycurve.FinalMetricPredictor` (EarlyCurve,
SLAQ, and :class:`earlycurve.LastValue`, the "no EarlyCurve" default).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from earlycurve import FinalMetricPredictor, LastValue
from provisioner import MarketChooser
from spottune.errors import ConfigError

__all__ = ["FinalMetricPredictor", "LastValue", "MarketChooser", "OrchestratorConfig", "PlateauRule", "StopRule"]

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
        """Whether to stop ``trial_id`` after ``step`` steps whose metric, in loss scale, is ``loss``."""
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
        Back-off after ``LaunchFailed`` or when no market is available, seconds.
    hourly_hop : bool, default=True
        Answer ``HourElapsed`` with a HOP checkpoint and re-provisioning (Algorithm 1). False keeps a
        trial on its instance until it finishes or is revoked (the single-instance and spot-with-restart
        baselines of the evaluation, spec §1.9).
    """

    max_steps: int
    theta: float = 0.7
    top_k: int = 3
    metric: str = "loss"
    mode: str = "min"
    max_failures: int = 2
    launch_retry_s: float = 60.0
    hourly_hop: bool = True

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

    @property
    def theta_steps(self) -> int:
        """Phase-1 target ``ceil(θ·S_max)`` (Algorithm 1, line 7), steps.

        A 1e-9 tolerance absorbs floating-point noise (``0.07 * 100`` is ``7.000000000000001``, whose
        ceiling would be 8); the result is clamped to ``[1, S_max]``. Same rule as
        :attr:`spottune.experiment.ExperimentSpec.theta_steps`.
        """
        if self.theta >= 1:
            return self.max_steps
        return min(self.max_steps, max(1, math.ceil(self.theta * self.max_steps - 1e-9)))
