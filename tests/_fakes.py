"""Small hand-made stand-ins shared by several test files (re-exported by ``conftest.py``).

- :class:`FakeChoice`, :class:`FakeChooser`: a market chooser that always answers one market
  (``provisioner.MarketChooser``), optionally failing its first calls with ``NoMarketAvailable``;
- :class:`StopAt`: a stop rule that stops one trial at a step and records every call;
- :class:`FakeTrial`, :class:`FakeOrchestrator`, :class:`FakeRecord`: the parts of a finished run that
  the evaluation and results code read, with numbers chosen by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provisioner.errors import NoMarketAvailable
from spotmarket.prices import Market

A = Market("us-east-1a", "r3.large")


@dataclass(frozen=True)
class FakeChoice:
    market: Market = A
    max_price_usd_per_hour: float = 0.05
    explanation: str = "test"


class FakeChooser:
    """Always ``market`` at ``max_price_usd_per_hour``; the first ``fail`` calls raise NoMarketAvailable.

    ``segments`` keeps every ``record_segment`` call as (trial_id, instance_type, seconds, steps).
    """

    def __init__(self, market: Market = A, max_price_usd_per_hour: float = 0.05, *, fail: int = 0):
        self.market, self.max_price_usd_per_hour, self.fail = market, max_price_usd_per_hour, fail
        self.segments: list[tuple] = []

    def choose(self, trial_id, now_s):
        if self.fail:
            self.fail -= 1
            raise NoMarketAvailable("none")
        return FakeChoice(self.market, self.max_price_usd_per_hour)

    def choose_many(self, trial_ids, now_s):
        return [self.choose(t, now_s) for t in trial_ids]

    def record_segment(self, trial_id, instance_type, seconds, steps):
        self.segments.append((trial_id, instance_type, seconds, steps))
        return seconds / steps if steps else 0.0


class StopAt:
    """Stop rule: stop trial ``who`` once it reports ``step``; records every call."""

    def __init__(self, who, step):
        self.who, self.step, self.calls = who, step, []

    def should_stop(self, trial_id, step, loss):
        self.calls.append((trial_id, step))
        return trial_id == self.who and step >= self.step


@dataclass
class FakeTrial:
    state: Any
    revocations: int = 0
    hops: int = 0
    failures: int = 0
    losses: list[float] = field(default_factory=lambda: [0.5])

    def last_loss(self):
        return self.losses[-1] if self.losses else None


@dataclass
class FakeOrchestrator:
    """What ``measure``/``summary_dict`` read of an orchestrator (loss scale = user scale: mode min)."""

    trials: dict[str, FakeTrial]
    top_k: tuple[str, ...] = ()
    selected: tuple[str, ...] = ()

    def to_user(self, loss):
        return loss


@dataclass
class FakeRecord:
    """What ``measure``/``summary_dict`` read of a backend's run record."""

    ledger: list
    instance_steps: dict[str, tuple[int, int]]
    log: list[dict]
    start_s: float
    end_s: float | None
    meta: dict = field(default_factory=dict)
