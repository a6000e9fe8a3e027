"""The Ray backend: every trial segment is a Ray actor on a node of its spot market, in an existing cluster.

spottune never launches a node here: the cluster's autoscaler does (docs/guide/ray.md). The driver contract is
:mod:`spottune.backends._base`'s; the instance lifecycle table, the report handlers (``ready``, ``metric``,
``checkpoint``, ``failed``), the deferral of notices before ``ready`` and the single-threaded queue loop are
the worker driver's (:class:`spottune.backends._worker_driver.WorkerDriver`, shared with the local and aws
backends); only the effects differ, and they are the Ray-actor transport's
(:class:`spottune.backends.ray._transport.RayActorTransport`; docs/design/decisions.md RY1-RY8):

- **Markets are node types** (:mod:`._cluster`): the markets the cluster offers (custom resource
  ``market:<type>/<zone>`` or the labels ``ray.io/market-type``, ``ray.io/availability-zone``,
  ``ray.io/instance-type``) are the chooser's pool; a ``Launch`` for a market the cluster does not offer
  is answered ``LaunchFailed``.
- **Launch** = a :class:`~._actor.SegmentActor` (``max_restarts=0``, ``max_concurrency=5``) pinned to a
  node of the chosen market by its resource or a ``label_selector``; billing starts at the ``Launch``
  (the autoscaler starts a node if none is free), ``TrialLaunched`` at the worker's ``ready``.
- **Reports** stream from the actor's generator method (one reader thread per segment); **commands**
  (``Checkpoint``) go to its second concurrency slot; ``Terminate`` is ``ray.kill``.
- **Ends**: a watcher thread polls the GCS every ``watch_s`` for draining nodes (deadline) and dead
  nodes. A drain becomes ``RevocationNotice`` (deadline = the drain's) for every segment on the node; the
  node's death (or an ``ActorDiedError`` with ``preempted``, or "its node has died") ends them as
  ``provider``; any other actor death is ``SegmentFailed``.
- **Billing**: one ledger row per segment at the market's price (the replayed history, or
  :attr:`RaySettings.prices`); node time per market is in ``meta["nodes"]``. Every USD figure is an
  estimate (``meta["billing"]``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spottune.backends._base import Driver, Progress, RunRecord
from spottune.backends._worker_driver import WorkerDriver, driver_attribute
from spottune.backends.ray._cluster import OfferedMarket
from spottune.backends.ray._settings import RaySettings
from spottune.backends.ray._transport import NODE_LOST, PREEMPTED, RayActorTransport
from spottune.errors import BackendError
from spottune.orchestrator import Orchestrator

__all__ = ["NODE_LOST", "PREEMPTED", "RayBackend"]


class RayBackend(Driver):
    """Run every trial segment as a Ray actor on a node of its market (see the module docstring).

    A :class:`~spottune.backends._worker_driver.WorkerDriver` (:attr:`driver`) with a
    :class:`~spottune.backends.ray._transport.RayActorTransport` (:attr:`transport`).

    Parameters
    ----------
    orchestrator : Orchestrator
    history : spotmarket.prices.PriceHistory
        Prices (USD per instance-hour) of the markets; billed unless :attr:`RaySettings.prices` names one.
    billing : spotmarket.Billing
    workload : str
        Built-in workload name or ``"module:Class"`` importable on every node of the cluster.
    trials : mapping trial_id -> (config, seed)
    instance_facts : callable instance_type -> (vcpus, ecu or None)
    start_s : float
        Engine time at the start, seconds since the epoch (UTC).
    settings : RaySettings
    markets : sequence of OfferedMarket, optional
        The markets the cluster offers (default: read from the cluster when :meth:`run` connects).
    progress : callable, optional

    Raises
    ------
    BackendError
        If a trial has no configuration, the store is ``memory://``, or Ray is not installed (one line:
        ``pip install 'spottune[ray]'``).
    """

    name = "ray"

    def __init__(self, orchestrator: Orchestrator, history: Any, billing: Any, workload: str,
                 trials: Mapping[str, tuple[Mapping[str, Any], int]],
                 instance_facts: Callable[[str], tuple[int, float | None]], start_s: float, settings: RaySettings,
                 *, markets: Sequence[OfferedMarket] | None = None, progress: Progress | None = None):
        from spottune.workloads import get_workload

        missing = set(orchestrator.trials) - set(trials)
        if missing:
            raise BackendError(f"ray backend: no configuration for trials {sorted(missing)}")
        if settings.store_url.startswith("memory://"):
            raise BackendError("ray backend: the segments run in other processes: use a folder or s3:// store")
        self.settings = settings
        self.workload = workload
        #: How segments reach their actors (placement, streamed reports, ray.kill, the GCS watcher).
        self.transport = RayActorTransport(settings, workload, markets)
        ref_sps = float(settings.reference_seconds_per_step or get_workload(workload).reference_seconds_per_step)
        #: The shared lifecycle: queue loop, instance phases, reports, billing.
        self.driver = WorkerDriver(orchestrator, history, None, billing, instance_facts, start_s, progress,
                                   transport=self.transport, trials=trials, time_scale=settings.time_scale,
                                   reference_seconds_per_step=ref_sps, max_wall_s=settings.max_wall_s)
        self.driver.record.meta.update(time_scale=settings.time_scale, store=settings.store_url,
                                       reference_seconds_per_step=ref_sps, ray_address=settings.address,
                                       imds_url=settings.imds_url, watch_s=settings.watch_s,
                                       billing="estimate", price_table=sorted(settings.prices))

    orchestrator = driver_attribute("orchestrator", "The orchestrator this backend drives.")
    history = driver_attribute("history", "The markets' prices (``spotmarket.prices.PriceHistory``), or None.")
    record = driver_attribute("record", "The run's :class:`~spottune.backends._base.RunRecord` (filled by :meth:`run`).")
    journal = driver_attribute("journal", "The run's :class:`spottune.journal.Journal`, or None (nothing journaled).")
    progress = driver_attribute("progress", "``progress(now_s, orchestrator, usd)`` after every event, or None.")
    budget_usd = driver_attribute("budget_usd", "Spending cap over the run, USD (None: none).")
    max_usd_per_hour = driver_attribute("max_usd_per_hour", "Cap on the live instances' max prices, USD/h (None: none).")
    clock = driver_attribute("clock", "The accelerated wall clock (:class:`~spottune.backends.local._clock.ScaledClock`).")
    start_s = driver_attribute("start_s", "Engine time at the start, seconds since the epoch (UTC).")
    trials = driver_attribute("trials", "trial_id -> (config, seed).")
    ref_sps = driver_attribute("ref_sps", "Simulated seconds per step on the reference instance.")
    markets = driver_attribute("markets", "The markets the cluster offers, keyed ``<type>/<zone>``.", part="transport")

    def discover_markets(self) -> list[OfferedMarket]:
        """Connect to the cluster (unless this process already is) and read the markets it offers.

        Returns
        -------
        list of OfferedMarket
            The markets the cluster's spot nodes offer (instance type, zone).

        Raises
        ------
        BackendError
            If the cluster cannot be reached, or it offers no market.
        """
        return self.transport.discover_markets()

    def run(self) -> RunRecord:
        """Drive the orchestrator to the end on the Ray cluster (see the module docstring).

        Returns
        -------
        spottune.backends.RunRecord
            The run's record (:meth:`spottune.backends.Driver.run`).

        Raises
        ------
        BackendError
            If the cluster cannot be reached or offers no market, the price history ends first, or the run
            takes longer than ``max_wall_s``. Every actor of the run is killed on the way out.
        """
        return self.driver.run()

    def resume(self, records: list[dict[str, Any]]) -> None:
        """Continue a killed run from its journal: the killed run's live actors save what they trained and
        are killed, each running trial continues from that save (:meth:`RayActorTransport.resume`, decision RY11).

        Parameters
        ----------
        records : list of dict
            The killed run's journal (:func:`spottune.journal.read_journal`).

        Raises
        ------
        BackendError
            If the cluster cannot be reached, or the journal holds a record out of order.
        """
        self.driver.resume(records)
