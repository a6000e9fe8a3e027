"""Where the simulator's metrics come from: really running a trainable, or a recorded curve.

Both answer ``metrics(trial_id, step)`` for step k >= 1. :class:`TrainableCurves` runs each trial's
:class:`~spottune.trainable.Trainable` forward lazily and caches every step's metrics; a step replayed
after a rollback (lost segment) returns the cached value without training again. That is exact because
the trainable API guarantees that a resumed trial produces the same curve as an uninterrupted one (the
"no work lost" test of the trainable/worker); the simulator therefore never writes real
checkpoint files, it only charges their simulated duration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spottune.errors import ConfigError


class TrialFailure(Exception):
    """The trainable raised; carries the error text for ``SegmentFailed``."""


class TrainableCurves:
    """Metrics from really running trainables, each step at most once.

    Parameters
    ----------
    factories : mapping trial_id -> callable () -> Trainable
        Builds a fresh trainable (``setup`` done), e.g. ``lambda: MLP(config, seed=s)``.
    """

    def __init__(self, factories: Mapping[str, Callable[[], Any]]):
        self._factories = dict(factories)
        self._live: dict[str, Any] = {}
        self._cache: dict[str, list[dict[str, float]]] = {t: [] for t in self._factories}
        self._probe: Any = None

    def _trainable(self, trial_id: str) -> Any:
        if trial_id not in self._live:
            self._live[trial_id] = self._factories[trial_id]()
            # a rebuilt trainable (after a failure) must be brought back to the cached steps
            for _ in range(len(self._cache[trial_id])):
                self._live[trial_id].train()
        return self._live[trial_id]

    def attribute(self, name: str, default: float) -> float:
        """A class attribute of the workload (``reference_seconds_per_step``, ``checkpoint_size_mb``).

        Parameters
        ----------
        name : str
            The attribute.
        default : float
            Returned when the workload does not set it.

        Returns
        -------
        float
            Seconds per step on the reference instance, or MB.

        Raises
        ------
        ConfigError
            If the workload's ``setup`` raised.
        """
        first = next(iter(self._factories))
        if self._probe is None:
            try:
                self._probe = self._trainable(first)
            except Exception as exc:  # noqa: BLE001 - the user's setup failed before any step: bad input
                from spottune.errors import ConfigError

                raise ConfigError(f"trial {first}: the workload's setup raised {type(exc).__name__}: {exc}") from None
        return float(getattr(self._probe, name, default))

    def metrics(self, trial_id: str, step: int) -> dict[str, float]:
        """Metrics after ``step`` steps (1-based). Raises :class:`TrialFailure` if the trainable raised.

        Parameters
        ----------
        trial_id : str
            The trial.
        step : int
            Steps done, >= 1.

        Returns
        -------
        dict of str to float
            What ``Trainable.step`` returned at that step.

        Raises
        ------
        TrialFailure
            If the trainable raised (the run turns it into a ``SegmentFailed``).
        """
        cache = self._cache[trial_id]
        try:
            while len(cache) < step:
                cache.append(dict(self._trainable(trial_id).train()))
        except Exception as exc:  # the user's code failed: a SegmentFailed, never a crash of the driver
            self._live.pop(trial_id, None)
            raise TrialFailure(f"{type(exc).__name__}: {exc}") from exc
        return cache[step - 1]

    def curve(self, trial_id: str) -> list[dict[str, float]]:
        """Every step computed so far for the trial.

        Parameters
        ----------
        trial_id : str
            The trial.

        Returns
        -------
        list of dict of str to float
            One metrics dict per step, step 1 first.
        """
        return list(self._cache[trial_id])

    def preload(self, trial_id: str, metrics: list[dict[str, float]]) -> None:
        """Take steps 1..len(metrics) of a trial as already computed (a resumed run's journaled metrics).

        The trial's trainable is rebuilt and brought forward through these steps only when a later
        step is asked for (the trainable API's resume guarantee makes that exact).

        Parameters
        ----------
        trial_id : str
            The trial.
        metrics : list of dict of str to float
            The journaled metrics of steps 1, 2, ... in order.
        """
        if len(metrics) > len(self._cache[trial_id]):
            self._cache[trial_id] = [dict(m) for m in metrics]
            self._live.pop(trial_id, None)  # (the attribute probe may keep it: it only reads class attributes)


class RecordedCurves:
    """Metrics from recorded learning curves (benchmarks, replays): no training at all.

    Parameters
    ----------
    curves : mapping trial_id -> sequence of dict
        ``curves[t][k - 1]`` = metrics after k steps.
    reference_seconds_per_step : float
    checkpoint_size_mb : float
    """

    def __init__(self, curves: Mapping[str, Sequence[Mapping[str, float]]], *,
                 reference_seconds_per_step: float = 60.0, checkpoint_size_mb: float = 1.0):
        self._curves = {t: list(c) for t, c in curves.items()}
        self._attrs = {"reference_seconds_per_step": float(reference_seconds_per_step),
                       "checkpoint_size_mb": float(checkpoint_size_mb)}

    def attribute(self, name: str, default: float) -> float:
        """A workload attribute recorded with the curves (``reference_seconds_per_step``, ``checkpoint_size_mb``).

        Parameters
        ----------
        name : str
            The attribute.
        default : float
            Returned when the workload does not set it.

        Returns
        -------
        float
            Seconds per step on the reference instance, or MB.
        """
        return self._attrs.get(name, default)

    def metrics(self, trial_id: str, step: int) -> dict[str, float]:
        """Metrics after ``step`` steps (1-based), as recorded.

        Parameters
        ----------
        trial_id : str
            The trial.
        step : int
            Steps done, >= 1.

        Returns
        -------
        dict of str to float
            What ``Trainable.step`` returned at that step.

        Raises
        ------
        ConfigError
            If the recorded curve has fewer than ``step`` steps.
        """
        curve = self._curves[trial_id]
        if not 1 <= step <= len(curve):
            raise ConfigError(f"trial {trial_id}: the recorded curve has {len(curve)} steps, step {step} was asked")
        return dict(curve[step - 1])

    def curve(self, trial_id: str) -> list[dict[str, float]]:
        """The trial's whole recorded curve.

        Parameters
        ----------
        trial_id : str
            The trial.

        Returns
        -------
        list of dict of str to float
            One metrics dict per step, step 1 first.
        """
        return list(self._curves[trial_id])
