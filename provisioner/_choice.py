"""What a chooser returns: the choice, and an explanation listing every candidate (frozen values).

Everything serialises to plain JSON (``to_dict()``; markets as ``"AZ/TYPE/PRODUCT"`` strings, no NaN),
so the orchestrator can write it to the event log unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

import pandas as pd

from spotmarket.prices import Market


def _num(x: float | None) -> float | None:
    """JSON-safe number: None for None, NaN and ±inf (e.g. a candidate expected to make no progress)."""
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One market considered for one trial at one decision time.

    Parameters
    ----------
    market : Market
    rank : int
        Position in the chooser's order, 0 = chosen.
    current_price_usd_per_hour : float
        Spot price in force at the decision time, USD per instance-hour.
    mean_price_usd_per_hour : float
        P̄, time-weighted mean over the last hour (or since the first record, if later), USD/hour.
    max_price_usd_per_hour : float
        b used for the prediction and for the request, USD per instance-hour.
    p_revocation : float or None
        P(revoked within the hour) at b; None for choosers without a predictor.
    expected_hour_cost_usd : float or None
        Eq 1, ``(1 − p) · P̄``, USD.
    seconds_per_step : float
        T[h][i], seconds per step.
    measured : bool
        Whether T[h][i] is measured (else the cores prior).
    step_cost_usd : float or None
        The objective (Eq 2 by default), USD per step.
    expected_usd : float or None
        Refund-aware objective only: expected USD paid until the horizon.
    expected_useful_steps : float or None
        Refund-aware objective only: expected steps kept until the horizon.
    horizon_s : float or None
        Refund-aware objective only: the decision horizon H, seconds.
    p_objective : float or None
        Refund-aware objective with ``p_shrink`` > 0 or a ceiling ``p_cap`` below 0.999 only: the p the
        objective priced, shrunk and capped (``p_revocation`` stays the predictor's).
    """

    market: Market
    rank: int
    current_price_usd_per_hour: float
    mean_price_usd_per_hour: float
    max_price_usd_per_hour: float
    p_revocation: float | None
    expected_hour_cost_usd: float | None
    seconds_per_step: float
    measured: bool
    step_cost_usd: float | None
    expected_usd: float | None = None
    expected_useful_steps: float | None = None
    horizon_s: float | None = None
    p_objective: float | None = None

    def to_dict(self) -> dict:
        """Plain-JSON dict (market as a string; the refund-aware fields only when set).

        Returns
        -------
        dict
            The candidate's fields (prices in USD/hour, step costs in USD, times in seconds).
        """
        out = {
            "market": str(self.market),
            "rank": self.rank,
            "current_price_usd_per_hour": self.current_price_usd_per_hour,
            "mean_price_usd_per_hour": self.mean_price_usd_per_hour,
            "max_price_usd_per_hour": self.max_price_usd_per_hour,
            "p_revocation": _num(self.p_revocation),
            "expected_hour_cost_usd": _num(self.expected_hour_cost_usd),
            "seconds_per_step": self.seconds_per_step,
            "measured": self.measured,
            "step_cost_usd": _num(self.step_cost_usd),
        }
        for name in ("expected_usd", "expected_useful_steps", "horizon_s", "p_objective"):
            if getattr(self, name) is not None:
                out[name] = _num(getattr(self, name))
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedMarket:
    """A pool market left out of a decision, and why (e.g. no price known at the decision time)."""

    market: Market
    reason: str

    def to_dict(self) -> dict:
        """Plain-JSON dict.

        Returns
        -------
        dict
            ``market`` (a string) and ``reason``.
        """
        return {"market": str(self.market), "reason": self.reason}


#: Candidates an explanation writes to the event log (:meth:`Explanation.to_dict`); the object keeps all.
EXPLAINED_CANDIDATES = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Explanation:
    """Why a market was chosen: every candidate in rank order, and every skipped market.

    Parameters
    ----------
    policy : str
        Chooser name (``spottune``, ``cheapest``, ``fastest``, ``fixed:TYPE``).
    objective : str
        Objective name (``eq2`` or ``useful-step``).
    order : tuple of str
        Sort keys of the ranking, primary first (the last is always the market order).
    candidates : tuple of Candidate
        Rank order, best first.
    skipped : tuple of SkippedMarket
    """

    policy: str
    objective: str
    order: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    skipped: tuple[SkippedMarket, ...]

    def to_dict(self, max_candidates: int | None = EXPLAINED_CANDIDATES) -> dict:
        """Plain-JSON dict with the best ``max_candidates`` candidates (None: all).

        When candidates are left out, ``n_candidates`` gives how many there were. [I] An event log line
        per launch that lists 100 markets costs more than the decision itself at scale
        (``benchmarks/bench_scale.py``); the runners-up beyond the first 20 explain little.

        Parameters
        ----------
        max_candidates : int or None, default 20
            How many of the best candidates to list; None lists all.

        Returns
        -------
        dict
            ``policy``, ``objective``, ``order``, ``candidates``, ``skipped`` and, when some are left out,
            ``n_candidates``.
        """
        shown = self.candidates if max_candidates is None else self.candidates[:max_candidates]
        out = {
            "policy": self.policy,
            "objective": self.objective,
            "order": list(self.order),
            "candidates": [c.to_dict() for c in shown],
            "skipped": [s.to_dict() for s in self.skipped],
        }
        if len(shown) < len(self.candidates):
            out["n_candidates"] = len(self.candidates)
        return out

    def to_frame(self) -> pd.DataFrame:
        """Candidates as a DataFrame, one row per market in rank order.

        Returns
        -------
        pandas.DataFrame
            Columns as :meth:`Candidate.to_dict`.
        """
        return pd.DataFrame([c.to_dict() for c in self.candidates])


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """The market a trial should run on next, with the max price to request.

    Parameters
    ----------
    trial_id : hashable
    time_s : float
        Decision time, seconds since the Unix epoch (UTC).
    market : Market
    max_price_usd_per_hour : float
        b: the max price to place the spot request with (the one p was predicted for), USD/hour.
    expected_step_cost_usd : float or None
        The chosen candidate's objective value, USD per step (None without a predictor).
    p_revocation : float or None
        The chosen candidate's P(revoked within the hour).
    seconds_per_step : float
        T[h][chosen type], seconds per step.
    explanation : Explanation
    """

    trial_id: Hashable
    time_s: float
    market: Market
    max_price_usd_per_hour: float
    expected_step_cost_usd: float | None
    p_revocation: float | None
    seconds_per_step: float
    explanation: Explanation

    def to_dict(self) -> dict:
        """Plain-JSON dict for the event log (``json.dumps(..., allow_nan=False)`` works).

        Returns
        -------
        dict
            The choice's fields and its explanation (:meth:`Explanation.to_dict`).
        """
        return {
            "trial_id": self.trial_id,
            "time_s": self.time_s,
            "market": str(self.market),
            "max_price_usd_per_hour": self.max_price_usd_per_hour,
            "expected_step_cost_usd": _num(self.expected_step_cost_usd),
            "p_revocation": _num(self.p_revocation),
            "seconds_per_step": self.seconds_per_step,
            "explanation": self.explanation.to_dict(),
        }
