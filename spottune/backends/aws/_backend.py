"""The AWS backend: every trial segment on its own EC2 spot instance, driven through boto3.

The driver contract is :mod:`spottune.backends._base`'s, and the instance lifecycle, the report handlers
and the delivery loop are the worker driver's (:class:`spottune.backends._worker_driver.WorkerDriver`, shared
with the local and ray backends); only the effects differ, and they are the EC2/SQS transport's
(:class:`spottune.backends.aws._transport.Ec2Transport`; [I] decisions, docs/design/decisions.md AWS1-AWS8):

- **Launch** (:mod:`._launch`): the segment description goes to S3, then one ``run_instances`` (spot,
  max price, zone, IMDSv2 hop limit 2, shutdown = terminate, instance profile, tags, user data). A refusal
  is ``LaunchFailed`` with the AWS error code; a capacity refusal also excludes the market for
  ``exclusion_s`` (a ``CapacityRefused`` event; the chooser's :class:`provisioner.MarketExclusions`). Throttling is retried by
  botocore (``standard`` mode). Spending caps are checked first, by the driver as in every backend (DB5):
  before each launch and at each hour boundary of a live instance; a budget that runs short stops the run.
- **Reports** come from the experiment's SQS FIFO queue (:mod:`._channel`): the worker's own report lines,
  relayed by the agent (:mod:`spottune.backends.aws.agent`); the worker's ``notice`` report (it saw
  ``spot/instance-action`` on IMDS) becomes ``RevocationNotice`` with the deadline IMDS gave.
- **Commands** (``Checkpoint``) go to the segment's command object in S3; ``Terminate`` is
  ``terminate_instances``.
- **Endings** (:mod:`._discovery`): ``describe_instances`` by tag every ``describe_every_s``; a state
  reason ``Server.SpotInstanceTermination`` ends the segment as ``provider``; an instance that ended on
  its own otherwise (its agent gave up) fails the segment and is billed as ``user``.
- **Billing**: :class:`spotmarket.Billing` at the market's prices from ``describe_spot_price_history``
  over the run (:mod:`._prices`), with the first-hour refund when the provider ended it.
- **Lease**: renewed in S3 every ``lease_s / 4``; agents power their instances off when it goes stale.
- **End**: revoked-and-saved instances are left to the provider for up to ``linger_s`` (refundable), then
  every live instance tagged with the experiment is terminated: a run ends with none running.
- **Signals** (:mod:`._signals`): Spot placement scores (read at the start of a live run) and rebalance
  recommendations are ``MarketSignal`` events for the revocation predictor, journaled (AWS15).
- **Resume** (:meth:`AwsBackend.resume`, AWS14): the journal is replayed, then the experiment's instances
  are reconciled by tag: running ones terminated and their trials relaunched from the last confirmed
  checkpoint, revoked ones adopted, those that ended while the orchestrator was down billed by state reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spottune.backends._base import Driver, Progress, RunRecord
from spottune.backends._worker_driver import WorkerDriver, driver_attribute
from spottune.backends.aws._settings import AwsSettings
from spottune.backends.aws._transport import Ec2Transport
from spottune.errors import BackendError
from spottune.orchestrator import Orchestrator

__all__ = ["AwsBackend", "AwsClients"]


@dataclass(slots=True)
class AwsClients:
    """The boto3 clients of one run (tests pass clients with failure-injection hooks).

    Parameters
    ----------
    ec2, s3, sqs : botocore.client.BaseClient
        The clients (:func:`spottune.backends.aws._session.client`).
    """

    ec2: Any
    s3: Any
    sqs: Any

    @classmethod
    def create(cls, settings: AwsSettings) -> "AwsClients":
        """New clients for the settings' region and endpoint.

        Parameters
        ----------
        settings : AwsSettings
            ``region``, ``endpoint_url`` and ``max_attempts``.

        Returns
        -------
        AwsClients
            EC2 (without retries of capacity errors), S3 and SQS.
        """
        from spottune.backends.aws._session import client

        kw = dict(region=settings.region, endpoint_url=settings.endpoint_url, max_attempts=settings.max_attempts)
        return cls(client("ec2", **kw), client("s3", **kw), client("sqs", **kw))


class AwsBackend(Driver):
    """Run every trial segment on an EC2 spot instance (see the module docstring).

    A :class:`~spottune.backends._worker_driver.WorkerDriver` (:attr:`driver`) with an
    :class:`~spottune.backends.aws._transport.Ec2Transport` (:attr:`transport`).

    Parameters
    ----------
    orchestrator : Orchestrator
    billing : spotmarket.Billing
    workload : str
        Built-in workload name or ``"module:Class"`` importable in the worker image.
    trials : mapping trial_id -> (config, seed)
    instance_facts : callable instance_type -> (vcpus, ecu or None)
    start_s : float
        Engine time at the start (now on AWS; the replay's start in tests), seconds since the epoch.
    settings : AwsSettings
    clients : AwsClients, optional
        Default: :meth:`AwsClients.create`.
    progress : callable, optional

    Raises
    ------
    BackendError
        If a trial has no configuration, or the store is ``memory://`` (the workers run on other machines).
    """

    name = "aws"

    def __init__(self, orchestrator: Orchestrator, billing: Any, workload: str,
                 trials: Mapping[str, tuple[Mapping[str, Any], int]],
                 instance_facts: Callable[[str], tuple[int, float | None]], start_s: float, settings: AwsSettings,
                 *, clients: AwsClients | None = None, progress: Progress | None = None):
        from spottune.workloads import get_workload

        missing = set(orchestrator.trials) - set(trials)
        if missing:
            raise BackendError(f"aws backend: no configuration for trials {sorted(missing)}")
        if settings.store_url.startswith("memory://"):
            raise BackendError("aws backend: the workers run on other machines: use an s3:// checkpoint store")
        self.settings = settings
        self.workload = workload
        ref_sps = float(settings.reference_seconds_per_step or get_workload(workload).reference_seconds_per_step)
        #: How segments reach their instances (EC2, S3 commands, SQS reports).
        self.transport = Ec2Transport(settings, workload, clients or AwsClients.create(settings))
        #: The shared lifecycle: queue loop, instance phases, reports, billing, journal replay.
        self.driver = WorkerDriver(orchestrator, None, None, billing, instance_facts, start_s, progress,
                                   transport=self.transport, trials=trials, time_scale=settings.time_scale,
                                   reference_seconds_per_step=ref_sps, max_wall_s=settings.max_wall_s)
        # the spending caps are the driver's, as in every backend: checked before each launch and at each hour
        # boundary of a live instance; a budget that runs short stops the run (decision DB5)
        self.driver.budget_usd, self.driver.max_usd_per_hour = settings.budget_usd, settings.max_usd_per_hour
        self.driver.record.meta.update(
            experiment=settings.experiment, region=settings.region, time_scale=settings.time_scale,
            store=settings.store_url, reference_seconds_per_step=ref_sps, poll_s=settings.poll_s,
            lease_s=settings.lease_s, exclusion_s=settings.exclusion_s, max_usd_per_hour=settings.max_usd_per_hour,
            budget_usd=settings.budget_usd)

    orchestrator = driver_attribute("orchestrator", "The orchestrator this backend drives.")
    record = driver_attribute("record", "The run's :class:`~spottune.backends._base.RunRecord` (filled by :meth:`run`).")
    journal = driver_attribute("journal", "The run's :class:`spottune.journal.Journal`, or None (nothing journaled).")
    progress = driver_attribute("progress", "``progress(now_s, orchestrator, usd)`` after every event, or None.")
    clock = driver_attribute("clock", "The engine clock (:class:`~spottune.backends.local._clock.ScaledClock`).")
    start_s = driver_attribute("start_s", "Engine time at the start, seconds since the epoch (UTC).")
    trials = driver_attribute("trials", "trial_id -> (config, seed).")
    ref_sps = driver_attribute("ref_sps", "Simulated seconds per step on the reference instance.")
    budget_usd = driver_attribute("budget_usd", "Spending cap over the run, USD (None: none; ``AwsSettings.budget_usd``).")
    max_usd_per_hour = driver_attribute("max_usd_per_hour",
                                        "Cap on the live instances' max prices, USD/h (None: none).")
    clients = driver_attribute("clients", "The run's :class:`AwsClients`.", part="transport")
    ec2 = driver_attribute("ec2", "The run's boto3 EC2 client.", part="transport")
    control = driver_attribute("control", "The experiment's S3 control objects (segments, commands, lease).",
                               part="transport")
    prices = driver_attribute("prices", "Spot prices from ``describe_spot_price_history`` (billing).", part="transport")
    queue_url = driver_attribute("queue_url", "URL of the experiment's SQS FIFO report queue (set by :meth:`run`).",
                                 part="transport")
    placement_scores = driver_attribute(
        "placement_scores", "Spot placement score (1..10) per market, handed to the predictor at the start.",
        part="transport")

    def run(self) -> RunRecord:
        """Drive the orchestrator to the end on EC2 (see the module docstring).

        Returns
        -------
        spottune.backends.RunRecord
            The run's record (:meth:`spottune.backends.Driver.run`).

        Raises
        ------
        BackendError
            On an AWS error the run cannot go on with (a missing bucket, no credentials, a refused
            permission: one line naming the call), or a run longer than ``max_wall_s``. Every instance of the
            experiment is terminated on the way out. A spending cap that runs short is no error: the run stops
            (``record.meta["budget_exhausted"]`` says why) and keeps the best trials so far.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.driver.run()
        except (BotoCoreError, ClientError) as exc:
            raise BackendError(f"aws backend: {type(exc).__name__}: {exc}") from None

    def resume(self, records: list[dict[str, Any]]) -> None:
        """Continue a killed run from its journal (:meth:`Ec2Transport.resume`, decision AWS14).

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
