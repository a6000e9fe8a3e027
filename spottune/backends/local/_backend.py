"""The local backend: real worker processes, real checkpoints, a spot market replayed on a fast wall clock.

Each trial segment is a real OS process, ``python -m spottune.backends.local.worker`` (:mod:`spottune.backends.local.worker`), that
restores from the checkpoint store (a folder or S3 through fsspec), trains, reports metrics as JSON
lines on its stdout, and polls ``/latest/meta-data/spot/instance-action`` on the backend's own IMDS
emulator (:class:`spottune.backends.local.imds.ImdsEmulator`), exactly as it would poll the real IMDS on EC2.

The driver contract is the one of :mod:`spottune.backends._base`. :class:`LocalBackend` is a
:class:`~spottune.backends._worker_driver.WorkerDriver` (the lifecycle the aws and ray backends share) with a
:class:`~spottune.backends.local._transport.ProcessTransport`; the differences from the simulator are only in
where effects come from (the [I] decisions of this backend):

- **Clock** (:mod:`spottune.backends.local._clock`). Engine time = ``start_s + (wall seconds since start) *
  time_scale``. Every timed effect (revocation notice, termination, the hourly tick ``HourElapsed``,
  ``ScheduleWakeUp``) is an APScheduler date job at the wall time its engine time maps to. Jobs and
  the workers' reader threads only enqueue; one thread (the caller of :meth:`LocalBackend.run`) talks
  to the orchestrator, so it stays single-threaded.
- **Launch.** The injected revocation model decides fulfilment, notice and termination times, as in
  the simulator (:mod:`spottune.backends._replay`). A fulfilled launch hands the segment to a warm
  worker of the pool (:mod:`spottune.backends.local._pool`), or starts one; its real start-up (imports,
  restore) is the instance's boot time, scaled by ``time_scale``. ``TrialLaunched`` is sent when the
  worker prints ``ready``. Step pacing: a step takes ``speed.seconds_per_step(...) / time_scale`` wall
  seconds (the worker sleeps the rest), or longer if the real step is slower.
- **Revocation.** At the notice time the backend flips the emulator for that instance (the worker
  sees it at its next poll, checkpoints on its own and exits) and sends ``RevocationNotice``; the
  orchestrator's ``Checkpoint`` reaches the worker on stdin, whichever comes first wins. At the
  termination time the worker process is killed (SIGKILL) if still alive; a checkpoint not finished
  by then is lost and the store keeps the previous good version.
- **Checkpoint.** ``Checkpoint`` actions become a ``CheckpointCommand`` on the worker's stdin;
  ``CheckpointSaved`` is sent when the worker reports the published, verified version. Real
  checkpoint and restore times are measured (``meta["worker"]``), not modelled.
- **Terminate.** Kills the worker (the instance is gone) and bills up to now.
- **Lost workers** (decision SV4). Every worker beats every ``heartbeat_wall_s`` wall seconds; one silent for
  ``missed_beats`` beats, or SIGKILLed under the driver, is lost: its unit goes back to the queue and the trial
  relaunches from its latest checkpoint on a new worker (``SegmentEnded(provider)``; ledger reason
  ``worker-lost``). Each launch is a new worker (a pooled process or a new one).
- **Billing** and the ledger are the simulator's (:class:`spotmarket.Billing`).

The instance lifecycle is the driver's table (:data:`spottune.backends._worker_driver.TRANSITIONS`).
Worker reports and commands are typed (:mod:`spottune.backends.local._messages`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spottune.backends._base import Driver, Progress, RunRecord
from spottune.backends._worker_driver import TRANSITIONS, Phase  # noqa: F401 - also importable from here
from spottune.backends._worker_driver import LazyStore, WorkerDriver, driver_attribute
from spottune.backends.local._transport import ProcessInstance, ProcessTransport
from spottune.errors import BackendError
from spottune.orchestrator import Orchestrator

__all__ = ["LocalBackend", "LocalSettings"]

_Instance = ProcessInstance  # the local backend's instance record (a worker process of the pool)


@dataclass(slots=True)
class LocalSettings:
    """Knobs of the local backend.

    Parameters
    ----------
    store_url : str
        Checkpoint store root (folder, ``file://``, ``s3://bucket/prefix``); workers open it themselves,
        so ``memory://`` does not work here.
    storage_options : mapping, default {}
        fsspec options for ``store_url`` (passed to every worker in a mode-0600 file, never on its
        command line).
    time_scale : float, default 600.0
        Simulated seconds per wall-clock second.
    poll_s : float, default 5.0
        Simulated seconds between a worker's IMDS polls (AWS recommends 5 s); the wall interval is
        ``poll_s / time_scale`` but never below 0.05 s.
    max_steps : int, optional
        The trials' ``S_max``, given to every trainable (``Trainable.max_steps``).
    reference_seconds_per_step : float, optional
        Overrides the workload's simulated seconds per step on the reference instance.
    checkpoint_keep : int, default 2
        Versions kept per trial in the store: the worker prunes older ones at each save (the version its
        segment restored excepted), and the driver once the save completes the segment's unit (decision SV4),
        so ``1`` keeps only the latest.
    max_wall_s : float, default 3600.0
        Give up (``BackendError``) after this many wall seconds.
    log_dir : str, optional
        Where each worker's stderr goes (``w00001.log``, ...); default: a temporary folder.
    python : str, default ``sys.executable``
        Interpreter that runs ``-m spottune.backends.local.worker``.
    standby_workers : int, optional
        Spare warm workers (:mod:`spottune.backends.local._pool`) kept during the run; default
        ``min(4, number of trials)``; 0 starts every segment cold. Before the clock starts, one warm
        worker per trial plus the spares are prepared.
    standby_timeout_s : float, default 300.0
        Wall seconds to wait for the pool to warm up before the clock starts.
    store_outage_s : float, default 120.0
        Launches pause while the checkpoint store is unreachable; after this many wall seconds of
        continuous outage the run ends with ``BackendError`` ("... is unreachable ...").
    checkpoint_key : str, optional
        The experiment's checkpoint key (hex, at least 32 digits) in every worker's environment: it
        authenticates the store's manifests and function-API pickles. Default: the driver's
        ``$SPOTTUNE_CHECKPOINT_KEY`` if set, else a new random key per run (the composition root passes
        :func:`spottune.checkpoint._secrets.experiment_key`, kept in the results folder).
    heartbeat_wall_s : float or None, default 2.0
        Wall seconds between two ``beat`` reports of a worker while its segment runs; a worker silent for
        ``missed_beats * heartbeat_wall_s`` wall seconds (hung, stopped) is lost: killed, and its unit (trial,
        segment) relaunched from the trial's latest checkpoint (decision SV4). None: no heartbeats (a worker
        is then lost only when its process is SIGKILLed).
    missed_beats : int, default 3
        Heartbeats a worker may miss before it is lost.
    """

    store_url: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    time_scale: float = 600.0
    poll_s: float = 5.0
    max_steps: int | None = None
    reference_seconds_per_step: float | None = None
    checkpoint_keep: int = 2
    max_wall_s: float = 3600.0
    log_dir: str | None = None
    python: str = sys.executable
    standby_workers: int | None = None
    standby_timeout_s: float = 300.0
    store_outage_s: float = 120.0
    checkpoint_key: str | None = None
    heartbeat_wall_s: float | None = 2.0
    missed_beats: int = 3


class LocalBackend(Driver):
    """Run every trial segment as a real worker process against a market replayed on the wall clock.

    A :class:`~spottune.backends._worker_driver.WorkerDriver` (:attr:`driver`) with a
    :class:`~spottune.backends.local._transport.ProcessTransport` (:attr:`transport`).

    Parameters
    ----------
    orchestrator, history, revocation_model, billing, instance_facts, start_s, progress
        As :class:`~spottune.backends._replay.ReplayDriver`.
    workload : str
        Built-in workload name or ``"module:Class"`` importable by the worker processes.
    trials : mapping trial_id -> (config, seed)
        The configuration and seed of each of the orchestrator's trials.
    settings : LocalSettings

    Raises
    ------
    BackendError
        If a trial has no configuration, or the store is ``memory://`` (the workers are other processes).
    """

    name = "local"

    def __init__(self, orchestrator: Orchestrator, history: Any, revocation_model: Any, billing: Any, workload: str,
                 trials: Mapping[str, tuple[Mapping[str, Any], int]],
                 instance_facts: Callable[[str], tuple[int, float | None]], start_s: float,
                 settings: LocalSettings, progress: Progress | None = None):
        from spottune.checkpoint import StoreMonitor, open_store
        from spottune.workloads import get_workload

        missing = set(orchestrator.trials) - set(trials)
        if missing:
            raise BackendError(f"local backend: no configuration for trials {sorted(missing)}")
        if settings.store_url.startswith("memory://"):
            raise BackendError("the local backend's workers are separate processes: use a folder or s3:// store")
        self.settings = settings
        self.workload = workload
        n = settings.standby_workers
        spares = min(4, len(trials)) if n is None else max(0, int(n))
        ref_sps = float(settings.reference_seconds_per_step or get_workload(workload).reference_seconds_per_step)
        #: How segments reach their worker processes.
        self.transport = ProcessTransport(settings, workload, spares)
        monitor = StoreMonitor(open_store(settings.store_url, settings.storage_options),
                               give_up_after_s=settings.store_outage_s)
        #: The shared lifecycle: queue loop, instance phases, reports, billing, journal replay.
        self.driver = WorkerDriver(orchestrator, history, revocation_model, billing, instance_facts, start_s, progress,
                                   transport=self.transport, trials=trials, time_scale=settings.time_scale,
                                   reference_seconds_per_step=ref_sps, max_wall_s=settings.max_wall_s,
                                   store_monitor=monitor, heartbeat_wall_s=settings.heartbeat_wall_s,
                                   missed_beats=settings.missed_beats)
        store = LazyStore(settings.store_url, settings.storage_options, self.transport.pool.checkpoint_key)
        keep = settings.checkpoint_keep
        self.driver.prune_checkpoints = lambda trial_id: store().retain(trial_id, keep)  # decision SV4
        self.driver.record.meta.update(time_scale=settings.time_scale, store=settings.store_url,
                                       reference_seconds_per_step=ref_sps, poll_s=settings.poll_s)

    orchestrator = driver_attribute("orchestrator", "The orchestrator this backend drives.")
    record = driver_attribute("record", "The run's :class:`~spottune.backends._base.RunRecord` (filled by :meth:`run`).")
    journal = driver_attribute("journal", "The run's :class:`spottune.journal.Journal`, or None (nothing journaled).")
    progress = driver_attribute("progress", "``progress(now_s, orchestrator, usd)`` after every event, or None.")
    budget_usd = driver_attribute("budget_usd", "Spending cap over the run, USD (None: none).")
    max_usd_per_hour = driver_attribute("max_usd_per_hour", "Cap on the live instances' max prices, USD/h (None: none).")
    store_monitor = driver_attribute("store_monitor", "The checkpoint store's reachability (launches pause while down).")
    clock = driver_attribute("clock", "The accelerated wall clock (:class:`~spottune.backends.local._clock.ScaledClock`).")
    start_s = driver_attribute("start_s", "Engine time at the start, seconds since the epoch (UTC).")
    trials = driver_attribute("trials", "trial_id -> (config, seed).")
    ref_sps = driver_attribute("ref_sps", "Simulated seconds per step on the reference instance.")

    def run(self) -> RunRecord:
        """Drive the orchestrator to the end (:meth:`WorkerDriver.run`).

        Returns
        -------
        spottune.backends.RunRecord
            The run's record (:meth:`spottune.backends.Driver.run`).

        Raises
        ------
        BackendError
            Past ``settings.max_wall_s``, when the price history ends first, when the checkpoint store stays
            unreachable for ``settings.store_outage_s``, or when a worker breaks the protocol.
        """
        return self.driver.run()

    def resume(self, records: list[dict[str, Any]]) -> None:
        """Continue a killed run from its journal (:meth:`ProcessTransport.resume`, decision CS4).

        Parameters
        ----------
        records : list of dict
            The killed run's journal (:func:`spottune.journal.read_journal`); the driver's :attr:`journal`
            replays it.

        Raises
        ------
        BackendError
            If no journal is set, or it holds a record out of order.
        """
        self.driver.resume(records)
