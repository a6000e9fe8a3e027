"""Optuna's own pruners as SpotTune stop rules (``spottune.orchestrator.StopRule``).

Each simulated trial is mirrored by one trial of an in-memory Optuna study, created in trial order
with ``study.ask()`` (so trial numbers, and Hyperband's bracket hash of ``study_name`` and number, are
deterministic). Every step the orchestrator reports is passed on with ``trial.report(loss, step)`` and
the decision is the pruner's own ``trial.should_prune()``: no re-implementation. A pruned trial is told
``PRUNED`` and the orchestrator stops it at once; a trial reaching ``max_steps`` is told ``COMPLETE`` with
its final loss, which is what ``MedianPruner`` compares against.

[I] Pruner settings (spec-free; Optuna defaults where they work without completed trials):
``MedianPruner(n_startup_trials=5, n_warmup_steps=max_steps // 10)``;
``SuccessiveHalvingPruner(min_resource=max(1, max_steps // 27), reduction_factor=3)`` (``"auto"`` needs
a completed trial, which a fully parallel study does not have before the end);
``HyperbandPruner(min_resource=max(1, max_steps // 27), max_resource=max_steps, reduction_factor=3)``.

Previous runs (opt-in, policies ``optuna-...-seeded``; decision ES22): before the first trial the mirrored study
gets one COMPLETE trial per previous run of the search space, so the pruner compares the new trials with them. Each
is replayed through the pruner's own calls, ``study.ask()``, ``trial.report(loss, step)`` and
``trial.should_prune()`` at every step of its recorded curve below ``max_steps`` (the decision is ignored: a
previous run was trained to the end), then ``study.tell(trial, final)``. Adding trials built by
``optuna.trial.create_trial(intermediate_values=...)`` with ``study.add_trials`` would not do:
``SuccessiveHalvingPruner`` (and Hyperband's brackets) compare against the rung values that its ``prune()`` stores
in the trial's system attributes, which such a trial does not have, so SHA and Hyperband would ignore it. Only
``MedianPruner`` reads ``intermediate_values``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from spottune.errors import ConfigError

PRUNERS = ("median", "sha", "hyperband")


def make_pruner(kind: str, max_steps: int, min_resource: int | None = None, reduction_factor: int = 3) -> Any:
    """The Optuna pruner ``kind`` ("median", "sha", "hyperband") for a study of ``max_steps`` steps.

    ``min_resource`` (steps) and ``reduction_factor`` set SHA's and Hyperband's main knobs (default: the module's
    ``max(1, max_steps // 27)`` and 3; ``optuna-sha-r3-rf4`` policies, the peers at their best settings).

    Parameters
    ----------
    kind : {"median", "sha", "hyperband"}
        :class:`optuna.pruners.MedianPruner` (5 startup trials, warm-up ``max_steps // 10`` steps),
        :class:`optuna.pruners.SuccessiveHalvingPruner` or :class:`optuna.pruners.HyperbandPruner`.
    max_steps : int
        S_max, steps.
    min_resource : int, optional
        Steps of the first rung (SHA, Hyperband).
    reduction_factor : int, default 3
        SHA's and Hyperband's η.

    Returns
    -------
    optuna.pruners.BasePruner
        The pruner (https://optuna.readthedocs.io/en/stable/reference/pruners.html).

    Raises
    ------
    ConfigError
        On an unknown ``kind``.
    """
    import optuna

    r = max(1, max_steps // 27) if min_resource is None else int(min_resource)
    if kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=max(0, max_steps // 10))
    if kind == "sha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=r, reduction_factor=reduction_factor)
    if kind == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=r, max_resource=max_steps, reduction_factor=reduction_factor)
    raise ConfigError(f"pruner is {kind!r}, but must be one of {', '.join(PRUNERS)}")


class OptunaStopRule:
    """Stop decisions of a real Optuna pruner over trials mirrored from the orchestrator.

    Parameters
    ----------
    pruner : optuna.pruners.BasePruner
    trial_ids : sequence of str
        The orchestrator's trials, in launch order.
    max_steps : int
        ``S_max``, steps; a report at this step completes the Optuna trial.
    study_name : str, default="spottune-sim"
        Fixed, so Hyperband's bracket assignment is reproducible.
    previous_runs : sequence of (steps, losses), default ()
        Completed runs of the same search space, in a fixed order, each its steps (1 .. ``max_steps``, increasing) and
        the loss at each; the loss at ``max_steps`` (else the last one) is its final value. They become COMPLETE trials
        numbered 0 .. n-1 before the orchestrator's trials (module docstring); they are never launched or billed, and
        ``pruned`` never names them.

    Attributes
    ----------
    pruned : dict trial_id -> int
        Step at which each pruned trial was stopped.
    """

    def __init__(self, pruner: Any, trial_ids: Sequence[str], max_steps: int, study_name: str = "spottune-sim",
                 previous_runs: Sequence[tuple[Sequence[int], Sequence[float]]] = ()):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.max_steps = int(max_steps)
        self.study = optuna.create_study(study_name=study_name, direction="minimize", pruner=pruner,
                                         sampler=optuna.samplers.RandomSampler(seed=0))
        self.n_previous = 0
        for steps, losses in previous_runs:
            self._seed(steps, losses)
        self._trials = {tid: self.study.ask() for tid in trial_ids}
        self._done: set[str] = set()
        self.pruned: dict[str, int] = {}

    def _seed(self, steps: Sequence[int], losses: Sequence[float]) -> None:
        """One previous run as a COMPLETE trial whose rung values the pruner recorded itself (module docstring)."""
        pairs = [(int(s), float(v)) for s, v in zip(steps, losses)]
        if not pairs or any(b[0] <= a[0] for a, b in zip(pairs, pairs[1:])) or pairs[0][0] < 1:
            raise ValueError("a previous run needs increasing steps >= 1 and a loss at each")
        final = next((v for s, v in pairs if s == self.max_steps), pairs[-1][1])
        trial = self.study.ask()
        for step, loss in pairs:
            if step >= self.max_steps:
                break
            trial.report(loss, step)
            trial.should_prune()  # records the rung values; the run was trained to the end whatever it says
        self.study.tell(trial, final)
        self.n_previous += 1

    def should_stop(self, trial_id: str, step: int, loss: float) -> bool:
        """Report ``loss`` at ``step`` to the mirrored Optuna trial and return ``should_prune()``.

        Parameters
        ----------
        trial_id : str
            The trial.
        step : int
            Steps it has done; at ``max_steps`` the Optuna trial is told its final value.
        loss : float
            Its metric after ``step`` steps, in loss scale.

        Returns
        -------
        bool
            True: the pruner prunes the trial now.
        """
        import optuna

        if trial_id in self._done:
            return False
        trial = self._trials[trial_id]
        if step >= self.max_steps:
            self.study.tell(trial, float(loss))
            self._done.add(trial_id)
            return False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a step replayed after a rollback is reported twice
            trial.report(float(loss), int(step))
            prune = bool(trial.should_prune())
        if prune:
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            self._done.add(trial_id)
            self.pruned[trial_id] = int(step)
        return prune
