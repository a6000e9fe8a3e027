"""SEER's plan of elastic successive halving under a deadline and a budget (Algorithms 2-3).

Source: Dunlap et al., "Elastic Hyperparameter Tuning on the Cloud" (SEER), SoCC'21, Algorithms 1-3 and
Fact 1. Recomputed, the paper's worked example shows typos: its bracket budgets are [34.283, 34.283, 11.432],
and round 2 ends at 4.29, not 2.84.

Units are the caller's: the deadline ``T`` and the shortest round ``t_min`` in one time unit (seconds in
spottune), the budget ``B`` in resource x that unit (vCPU-seconds in spottune, see :mod:`spottune.planning._plan`).
A "resource" is what ``P[i]`` counts per trial.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from spottune.errors import ConfigError

__all__ = ["SeerPlan", "bracket_budgets", "seer_plan"]

#: Relative slack of the floors: ``floor(8 - 1e-15)`` must be 8 (the worked example's N[1] is exactly 8).
_EPS = 1e-9


def _floor(x: float) -> int:
    return int(math.floor(x * (1.0 + _EPS) + _EPS))


def _ceil_log(r: float, eta: float) -> int:
    """``ceil(log_eta r)`` for r > 1, exact at powers of eta."""
    k = max(1, math.ceil(math.log(r) / math.log(eta) - _EPS))
    while eta ** (k - 1) >= r * (1.0 + _EPS):
        k -= 1
    while eta**k < r * (1.0 - _EPS):
        k += 1
    return k


@dataclass(frozen=True, slots=True)
class SeerPlan:
    """A SEER plan (Algorithm 2's output, with Algorithm 3's bracket budgets).

    Attributes
    ----------
    r_star : float
        R*, the longest total training of one trial, in units of ``t_min``.
    rounds : int
        K = ceil(log_eta R*), successive-halving rounds per bracket.
    t1 : float
        Duration of the first round (time unit of T); round k lasts ``t1 * eta**(k-1)``.
    b0 : float
        B_0, resource-time of one bracket's first round at p_min.
    budgets : tuple of float
        B[i], resource-time per bracket (Algorithm 3), summing to B.
    parallelism : tuple of int or float
        P[i], resources per trial of bracket i.
    trials : tuple of int
        N[i] = floor(B[i] / (K t1 P[i])); brackets with 0 trials are kept (the worked example's third).
    eta : float
    """

    r_star: float
    rounds: int
    t1: float
    b0: float
    budgets: tuple[float, ...]
    parallelism: tuple[float, ...]
    trials: tuple[int, ...]
    eta: float

    @property
    def n_trials(self) -> int:
        """Trials sampled, sum of N."""
        return int(sum(self.trials))

    @property
    def round_durations(self) -> tuple[float, ...]:
        """Duration of each round, ``t1 * eta**(k-1)`` for k = 1..K (time unit of T)."""
        return tuple(self.t1 * self.eta**k for k in range(self.rounds))

    @property
    def round_ends(self) -> tuple[float, ...]:
        """When each round ends, from the start (time unit of T); the last is the plan's finish."""
        return tuple(float(x) for x in _cumsum(self.round_durations))

    def live(self, bracket: int, k: int) -> int:
        """Trials of bracket ``bracket`` (0-based) trained in round ``k`` (1-based): floor(N[i] / eta**(k-1)).

        Parameters
        ----------
        bracket : int
            Bracket index, 0-based.
        k : int
            Round, 1-based.

        Returns
        -------
        int
            Trials trained, >= 0.
        """
        return _floor(self.trials[bracket] / self.eta ** (k - 1))

    @property
    def spend(self) -> float:
        """Resource-time the plan uses: sum over rounds and brackets of live trials x P[i] x round duration.

        At most ``K t1 sum_i N[i] P[i] <= B`` (Fact 1)."""
        return float(sum(self.live(i, k + 1) * p * d for i, p in enumerate(self.parallelism)
                         for k, d in enumerate(self.round_durations)))

    def rungs(self, t_min: float = 1.0) -> tuple[float, ...]:
        """Cumulative training time of a surviving trial at the end of each round, in units of ``t_min``.

        Parameters
        ----------
        t_min : float, default 1.0
            The unit, in the plan's time unit (seconds in spottune).

        Returns
        -------
        tuple of float
            One entry per round.
        """
        return tuple(e / t_min for e in self.round_ends)


def _cumsum(xs: tuple[float, ...]) -> list[float]:
    out, s = [], 0.0
    for x in xs:
        s += x
        out.append(s)
    return out


def _r_star(T: float, B: float, eta: float, p_min: float, t_min: float) -> float:
    """The largest R > 1 with ``R eta/(eta-1) (1 - eta**-ceil(log_eta R)) <= T/t_min`` and
    ``p_min R ceil(log_eta R) <= B/t_min`` (Algorithm 2, line 2), in closed form per K = ceil(log_eta R):
    on ``(eta**(K-1), eta**K]`` both left sides are linear in R."""
    best = 0.0
    k = 1
    while True:
        lo, hi = eta ** (k - 1), eta**k
        # both left sides grow with K at R = eta**(K-1): once one fails there, no larger K can work
        if (eta**k - 1) / (eta - 1) > T / t_min * (1 + _EPS) or lo * p_min * k > B / t_min * (1 + _EPS):
            break
        cap = min(hi, T / t_min * (eta - 1) / (eta * (1 - eta**-k)), B / (t_min * p_min * k))
        if cap > lo:
            best = max(best, cap)
        k += 1
    return best


def bracket_budgets(B: float, b0: float, nu: float, p_min: float = 1.0,
                    p_max: float = math.inf) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Algorithm 3: (B[i], P[i]) per bracket.

    q* is the largest integer q >= 1 with ``q nu**(q-1) <= B/B_0``. If ``p_min nu**(q*-1) < p_max``,
    ``P = [p_min, p_min nu, ..., p_min nu**(q*-1), min(p_max, p_min nu**q*)]``, ``B[i] = B_0 nu**(q*-1)``
    for i <= q* and the rest ``B - B_0 q* nu**(q*-1)`` to the last; else P stops at p_max and the budget
    is split equally.

    Parameters
    ----------
    B : float
        Total budget (resources x time unit; vCPU-seconds in spottune).
    b0 : float
        B_0, the smallest bracket's budget.
    nu : float
        Growth factor of the resources per trial between brackets (SEER's ν).
    p_min, p_max : float, default 1 and inf
        Smallest and largest resources per trial (vCPUs).

    Returns
    -------
    budgets : tuple of float
        B[i] per bracket (they sum to B).
    parallelism : tuple of float
        P[i], resources per trial of each bracket.

    Raises
    ------
    ConfigError
        If ``B < b0`` (no bracket fits) or nu < 1.
    """
    if nu < 1 or b0 <= 0 or B < b0 * (1 - _EPS):
        raise ConfigError(f"bracket budgets: need nu >= 1 and B >= B_0 > 0, got B {B:g}, B_0 {b0:g}, nu {nu:g}")
    ratio = B / b0 * (1 + _EPS)
    q = 1
    while (q + 1) * nu**q <= ratio and q < 64:
        q += 1
    if p_min * nu ** (q - 1) < p_max:
        P = [p_min * nu**i for i in range(q)] + [min(p_max, p_min * nu**q)]
        per = b0 * nu ** (q - 1)
        budgets = [per] * q + [max(0.0, B - b0 * q * nu ** (q - 1))]
    else:
        qp = 0
        while p_min * nu ** (qp + 1) < p_max and qp < 64:
            qp += 1
        P = [p_min * nu**i for i in range(qp + 1)] + [p_max]
        budgets = [B / len(P)] * len(P)
    return tuple(budgets), tuple(P)


def seer_plan(T: float, B: float, *, eta: float = 4.0, nu: float = 2.0, p_min: float = 1.0,
              p_max: float = math.inf, t_min: float = 1.0) -> SeerPlan:
    """Algorithm 2 (with Algorithm 3): SEER's rounds, first-round time, trials and parallelism per bracket.

    Parameters
    ----------
    T : float
        Deadline (time unit; seconds in spottune).
    B : float
        Budget, resource x time unit.
    eta : float, default 4
        Elimination rate (> 1): round k keeps ``1/eta`` of round k-1's trials and lasts eta times longer.
    nu : float, default 2
        Parallelism growth between brackets (>= 1).
    p_min, p_max : float
        Resources per trial of the first / at most of any bracket.
    t_min : float
        Shortest useful round (time unit of T).

    Returns
    -------
    SeerPlan
        With ``sum(round_durations) <= T`` and ``spend <= B`` (Fact 1).

    Raises
    ------
    ConfigError
        On a non-positive T, B, t_min or p_min, eta <= 1, nu < 1, p_max < p_min, or when not even one
        trial of one round of ``t_min`` fits (T < t_min or B < p_min t_min, scaled: R* <= 1).
    """
    if not (T > 0 and B > 0 and t_min > 0 and p_min > 0 and eta > 1 and nu >= 1 and p_max >= p_min):
        raise ConfigError(f"SEER plan: need T, B, t_min, p_min > 0, eta > 1, nu >= 1, p_max >= p_min; got T {T:g}, "
                          f"B {B:g}, eta {eta:g}, nu {nu:g}, p_min {p_min:g}, p_max {p_max:g}, t_min {t_min:g}")
    r = _r_star(T, B, eta, p_min, t_min)
    if r <= 1.0:
        raise ConfigError(f"SEER plan: deadline {T:g} and budget {B:g} do not fit one round of {t_min:g} "
                          f"at {p_min:g} resources")
    k = _ceil_log(r, eta)
    t1 = t_min * r * eta ** -(k - 1)
    b0 = p_min * t_min * r * k
    budgets, P = bracket_budgets(B, b0, nu, p_min, p_max)
    N = tuple(_floor(b / (k * t1 * p)) if math.isfinite(p) else 0 for b, p in zip(budgets, P))
    return SeerPlan(r_star=r, rounds=k, t1=t1, b0=b0, budgets=budgets, parallelism=P, trials=N, eta=eta)
