"""Everything the orchestrator knows about one trial (mutable; owned by the orchestrator)."""

from __future__ import annotations

from dataclasses import dataclass, field
from earlycurve import Prediction
from spotmarket.prices import Market
from spottune.orchestrator._state import TrialState


@dataclass(slots=True, kw_only=True)
class TrialRecord:
    """Everything the orchestrator knows about one trial (read it, never write it from outside).

    Curve values are stored in loss scale (``1 − value`` for ``mode="max"``).

    Attributes
    ----------
    trial_id : str
        The trial.
    state : TrialState
        Its state in the transition table.
    target_steps : int
        The step of its next planned stop (a barrier or S_max).
    instance_id : str or None
        Its current instance; None between instances.
    market : spotmarket.prices.Market or None
        The current instance's market.
    launch_market : spotmarket.prices.Market or None
        The market of its latest Launch.
    started_s, train_end_s : float
        Training start of the current segment and the start of its checkpoint, engine seconds.
    segment_start_step, step : int
        Steps at the segment's start and the latest reported step.
    reported_s : float or None
        Engine seconds of the latest report; ``reported_step`` its step.
    checkpoint_step : int
        Its last good checkpoint (0: none).
    failures, revocations, hops, lost_steps : int
        Counts over the run.
    plateaued : bool
        Finished by the plateau rule.
    pruned_at : int or None
        Step at which an external stop rule stopped it.
    instance_ids, markets_used : list
        Every instance it ran on and their markets, in order.
    noticed : set of str
        Instances whose revocation notice arrived.
    steps, losses : list
        Its curve (steps, values in loss scale).
    predicted_loss : float or None
        The final loss predicted at the θ barrier; ``prediction`` the predictor's full answer.
    """

    trial_id: str
    state: TrialState = TrialState.PENDING
    target_steps: int = 0
    instance_id: str | None = None
    market: Market | None = None
    launch_market: Market | None = None  #: market of the trial's latest Launch (in flight, refused or fulfilled)
    started_s: float = 0.0  #: training start of the current segment (TrialLaunched.time_s)
    train_end_s: float | None = None  #: when the current checkpoint began
    segment_start_step: int = 0
    step: int = 0  #: latest reported step on the current timeline
    reported_s: float | None = None  #: engine seconds of the latest MetricReported
    reported_step: int = 0  #: its step
    checkpoint_step: int = 0  #: last good checkpoint (0: none, fresh start)
    failures: int = 0
    revocations: int = 0
    hops: int = 0
    lost_steps: int = 0
    plateaued: bool = False
    pruned_at: int | None = None  #: step at which an external stop rule stopped the trial
    instance_ids: list[str] = field(default_factory=list)
    markets_used: list[Market] = field(default_factory=list)
    noticed: set[str] = field(default_factory=set)
    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    predicted_loss: float | None = None
    prediction: Prediction | None = None  #: the predictor's answer at the θ barrier

    def last_loss(self) -> float | None:
        """The latest reported value of the trial's metric.

        Returns
        -------
        float or None
            In loss scale; None before the first report.
        """
        return self.losses[-1] if self.losses else None
