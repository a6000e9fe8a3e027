"""Small hand-made stand-ins shared by several test files (re-exported by ``conftest.py``).

- :class:`FakeChoice`, :class:`FakeChooser`: a market chooser that always answers one market
  (``provisioner.MarketChooser``), optionally failing its first calls with ``NoMarketAvailable``;
- :class:`StopAt`: a stop rule that stops one trial at a step and records every call;
- :class:`FakeTrial`, :class:`FakeOrchestrator`, :class:`FakeRecord`: the parts of a finished run that
  the evaluation and results code read, with numbers chosen by hand;
- :func:`price_history`: a :class:`~spotmarket.prices.PriceHistory` of us-east-1a from (t, type, price) rows;
- :func:`toy_study`: a recorded study whose losses ``0.1 i + 1 / k`` never cross (trial i, step k).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from provisioner.errors import NoMarketAvailable
from spotmarket.prices import Market, PriceHistory

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


def price_history(rows: list[tuple[float, str, float]]) -> PriceHistory:
    """Spot prices of us-east-1a, Linux/UNIX, from ``(t_s, instance_type, usd_per_hour)`` rows."""
    table = pd.DataFrame(rows, columns=["t", "instance_type", "price"])
    table["timestamp"] = pd.to_datetime(table.pop("t"), unit="s", utc=True)
    table["availability_zone"], table["product_description"] = "us-east-1a", "Linux/UNIX"
    return PriceHistory(table)


def toy_study(n: int, steps: int, sps: float = 300.0, checkpoint_size_mb: float = 0.0) -> Any:
    """``n`` trials of ``steps`` steps, ``sps`` reference seconds per step; trial i's loss at step k is
    ``0.1 i + 1 / k`` (t0 is the best at every step)."""
    from spottune.evaluation import Study

    ids = [f"t{i}" for i in range(n)]
    curves = {t: [{"loss": 0.1 * i + 1.0 / k} for k in range(1, steps + 1)] for i, t in enumerate(ids)}
    return Study(name="toy", trial_ids=ids, configs={t: {"i": i} for i, t in enumerate(ids)}, curves=curves,
                 metric="loss", mode="min", max_steps=steps, reference_seconds_per_step={t: sps for t in ids},
                 checkpoint_size_mb=checkpoint_size_mb)
