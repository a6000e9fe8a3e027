"""What a worker backend supplies to :class:`~spottune.backends._worker_driver.WorkerDriver`: its transport.

The driver holds everything the local, aws and ray backends share (the instance phases, the worker's
reports, the single-threaded queue loop, billing, the journal replay). A transport is the one part that
differs: how a segment's worker is started, told to checkpoint, killed, and watched. There are three:

- :class:`spottune.backends.local._transport.ProcessTransport`: a worker process on this machine (stdin and
  stdout pipes, a warm pool, the IMDS emulator); the market is replayed.
- :class:`spottune.backends.aws._transport.Ec2Transport`: an EC2 spot instance (``run_instances``, commands in
  S3, reports from SQS, ``describe_instances`` for endings).
- :class:`spottune.backends.ray._transport.RayActorTransport`: a Ray actor on a node of the market (a
  streaming generator for reports, ``ray.kill``, the GCS for drains and node deaths).

A transport never talks to the orchestrator. Threads it starts only enqueue items
(:meth:`WorkerDriver.enqueue`); the driver's thread hands them back to :meth:`WorkerTransport.handle`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from spottune.backends._worker_driver import WorkerDriver, WorkerInstance
    from spottune.backends.local._messages import CheckpointCommand, Notice
    from spottune.orchestrator import Launch

__all__ = ["WorkerTransport"]


@runtime_checkable
class WorkerTransport(Protocol):
    """How segments reach their workers; the driver calls these on its one thread (see the module doc).

    Attributes
    ----------
    name : str
        The backend's name (``"local"``, ``"aws"``, ``"ray"``): ``meta["backend"]`` and error messages.
    end_s : float or None
        Engine time (seconds since the epoch) at which the price history ends; the driver raises
        ``BackendError`` when the run passes it. None: no end (prices come from the cloud).
    """

    name: str
    end_s: float | None

    def bind(self, driver: WorkerDriver) -> None:
        """Called once by the driver's constructor: the driver whose queue, clock and records this transport uses.

        Parameters
        ----------
        driver : WorkerDriver
            The driver.
        """

    # -- the four effects ------------------------------------------------------------------------------
    def launch(self, action: Launch) -> None:
        """Start a worker for ``action``'s segment.

        On success the transport registers a :class:`WorkerInstance` with :meth:`WorkerDriver.add_instance`
        (billing starts at its ``started_s``) and its worker later reports ``ready``; otherwise it posts
        ``LaunchFailed`` (:meth:`WorkerDriver.post`), after delivering a ``CapacityRefused``
        (:meth:`WorkerDriver.inform`) where the cloud says the market has no capacity.

        Parameters
        ----------
        action : spottune.orchestrator.Launch
            The trial, market, max price (USD/hour), the step to resume and the target step.
        """

    def command(self, inst: WorkerInstance, cmd: CheckpointCommand) -> None:
        """Hand ``cmd`` to the worker of ``inst`` (a stdin line, an S3 command object, an actor call).

        A worker that is already gone ignores it; its end answers instead.

        Parameters
        ----------
        inst : WorkerInstance
            The instance (its id, trial, market, phase and worker handle).
        cmd : spottune.backends.local._messages.CheckpointCommand
            The checkpoint to take (reason, key).
        """

    def kill(self, inst: WorkerInstance) -> None:
        """End the worker of ``inst`` now (SIGKILL, ``terminate_instances``, ``ray.kill``); idempotent.

        The driver has already moved ``inst`` to ``KILLED``; output the worker wrote before is still read.

        Parameters
        ----------
        inst : WorkerInstance
            The instance (its id, trial, market, phase and worker handle).
        """

    def watch(self) -> None:
        """Start watching the workers, before the driver's clock starts: whatever happens to them from now
        on (reports, exits, revocations, node deaths) becomes queue items. Stops at :meth:`stop`."""

    # -- the run around them ---------------------------------------------------------------------------
    def open(self) -> None:
        """Before :meth:`watch`, outside the driver's cleanup: what the run cannot start without (a log
        folder, the report queue and the lease, the cluster's markets).

        Raises
        ------
        BackendError
            If the run cannot start.
        """

    def handle(self, kind: str, args: list[Any]) -> bool:
        """One queue item the driver does not know (``(kind, *args)``, enqueued by this transport's threads or
        timers); False if this transport does not know it either (a driver bug).

        Parameters
        ----------
        kind : str
            The item's kind.
        args : list
            Its arguments.

        Returns
        -------
        bool
            Whether the transport handled it.
        """

    def recycle(self, inst: WorkerInstance) -> bool:
        """At a ``Terminate``: keep the worker of ``inst`` for another segment instead of killing it.

        Returns True (and moves ``inst`` to ``RECYCLED``) if it did; False and the driver kills it.

        Parameters
        ----------
        inst : WorkerInstance
            The instance (its id, trial, market, phase and worker handle).

        Returns
        -------
        bool
            True if the worker was kept.
        """

    def seen_notice(self, inst: WorkerInstance, report: Notice) -> None:
        """The worker of ``inst`` reports the interruption notice it saw on IMDS: a ``RevocationNotice``
        (:meth:`WorkerDriver.notice_from_worker`) where only the worker can know, a note where the market is
        replayed (the driver already sent it).

        Parameters
        ----------
        inst : WorkerInstance
            The instance (its id, trial, market, phase and worker handle).
        report : spottune.backends.local._messages.Notice
            The worker's report (the termination time it read).
        """

    def ended(self, inst: WorkerInstance) -> None:
        """``inst`` is gone for good (just before its ``SegmentEnded``): free what the transport kept for it.

        Parameters
        ----------
        inst : WorkerInstance
            The instance (its id, trial, market, phase and worker handle).
        """

    def next_instance_id(self) -> str:
        """The id the next launch gets (journaled with its ``launch`` intent, before :meth:`launch`).

        Returns
        -------
        str
            Unique in the experiment.
        """

    def price_series(self, inst: WorkerInstance, end_s: float) -> Any:
        """The prices (``spotmarket.prices.PriceSeries``, USD per instance-hour) ``inst`` is billed at until ``end_s``.

        Parameters
        ----------
        inst : WorkerInstance
            The instance (its id, trial, market, phase and worker handle).
        end_s : float
            Engine seconds of the instance's end.

        Returns
        -------
        spotmarket.prices.PriceSeries
            Its market's prices up to ``end_s`` at least.
        """

    def close_leftovers(self) -> None:
        """After ``ExperimentFinished``: end and bill every instance still alive (how: the transport's rule)."""

    def stop(self) -> None:
        """Stop watching (the threads of :meth:`watch`, the worker processes), before the driver's clock stops."""

    def close(self) -> None:
        """After the clock stopped: release what is left (every cloud instance or actor, temporary files)."""

    # -- crash safety ----------------------------------------------------------------------------------
    def resume(self, records: list[dict[str, Any]]) -> None:
        """Continue a killed run whose journal holds ``records`` (:meth:`spottune.backends._base.Driver.resume`).

        Parameters
        ----------
        records : list of dict
            The killed run's journal (:func:`spottune.journal.read_journal`).

        Raises
        ------
        BackendError
            If this transport cannot continue a run.
        """

    def reconcile(self) -> None:
        """In :meth:`WorkerDriver.run` after a resume, on the driver's thread with the clock running: end or adopt
        what survived the crash and post what was lost (see each transport's ``resume``)."""

    def replay_launch(self, rec: dict[str, Any], action: Launch) -> None:
        """Journal replay: the fulfilled launch ``rec`` of ``action`` becomes an instance again.

        Parameters
        ----------
        rec : dict
            The journaled launch ``outcome`` (``instance_id``, ``time_s`` and the transport's own fields).
        action : spottune.orchestrator.Launch
            The launch it answered.
        """

    def replay_refused(self, rec: dict[str, Any], action: Launch) -> None:
        """Journal replay: the refused launch ``rec`` of ``action`` (a capacity refusal excludes its market again).

        Parameters
        ----------
        rec : dict
            The journaled launch ``outcome`` with ``fulfilled`` false.
        action : spottune.orchestrator.Launch
            The launch it answered.
        """

    def replay_event(self, event: Any) -> None:
        """Journal replay: ``event`` was delivered again; update what the transport keeps of its instance.

        Parameters
        ----------
        event : spottune.orchestrator.Event
            The replayed event.
        """
