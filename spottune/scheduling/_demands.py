"""Learning each team's demand online, then splitting the org budget by max-min fairness every hour.

Kandasamy et al. (arXiv 2012.08648), the deterministic feedback model [R]: a team's reward in an hour is whether
the allocation per unit of load reached its unit demand θ (USD/hour per active trial needed for its trials to be
on track); θ is unknown, below a known ``theta_max``, and found by binary search on the threshold feedback.
Two modes (decision SV3): ``efficient`` (their Algorithm 3: MMF on the current probe every hour, learning from
every hour's feedback) and ``strategy-proof`` (their Algorithm 2: brackets that open with one report-independent
exploration hour per team, where only that team is served, followed by ``2**bracket`` hours of MMF on the
upper bounds, so inflating a report gains nothing once the bound is tight). Noisy rewards: a Hoeffding-pooled
binary search, or the paper's nonparametric tree (decision SV15). Minimums and caps per team bound every MMF hour
(SV14). Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spottune.errors import ConfigError
from spottune.scheduling._fairness import max_min_fair

__all__ = ["FAIR_SHARE_MODES", "NOISY_SEARCHES", "BinarySearchDemand", "FairShareRound", "NoisyBinarySearchDemand",
           "NonparametricTreeDemand", "OnlineFairShare"]

#: The two mechanisms of :class:`OnlineFairShare`.
FAIR_SHARE_MODES = ("efficient", "strategy-proof")
#: How :class:`OnlineFairShare` learns from noisy rewards: Hoeffding-pooled binary search, or the paper's tree.
NOISY_SEARCHES = ("hoeffding", "tree")


def _positive(name: str, value: float) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} is {value!r}, but must be a finite number > 0")
    return float(value)


class BinarySearchDemand:
    """An interval ``[low, high]`` that holds a unit demand θ, halved by every informative threshold feedback.

    Parameters
    ----------
    theta_max : float
        Known upper bound on θ (USD/hour per unit of load), > 0.
    tolerance : float, optional
        Width below which the search stops probing and answers ``high``; default ``theta_max / 1024``.

    Raises
    ------
    ConfigError
        On a ``theta_max`` or ``tolerance`` that is not a finite number > 0.
    """

    def __init__(self, theta_max: float, tolerance: float | None = None):
        self.theta_max = _positive("theta_max", theta_max)
        self.tolerance = _positive("tolerance", tolerance) if tolerance is not None else self.theta_max / 1024
        self.low, self.high = 0.0, self.theta_max
        self.probes = 0

    @property
    def width(self) -> float:
        """``high - low`` (USD/hour per unit of load)."""
        return self.high - self.low

    def probe(self) -> float:
        """The next value to try: the midpoint while the interval is wider than the tolerance, then ``high``."""
        return (self.low + self.high) / 2 if self.width > self.tolerance else self.high

    def observe(self, per_unit: float, met: bool) -> None:
        """Record that an allocation of ``per_unit`` (USD/hour per unit of load) did (``met``) or did not reach θ.

        Parameters
        ----------
        per_unit : float
            Allocation divided by load.
        met : bool
            Whether the team's reward reached its threshold τ, i.e. ``per_unit >= θ`` in the deterministic model.
        """
        before = (self.low, self.high)
        if met:
            self.high = min(self.high, per_unit)
        else:
            self.low = max(self.low, per_unit)
        self.low = min(self.low, self.high)
        if (self.low, self.high) != before:
            self.probes += 1


class NoisyBinarySearchDemand(BinarySearchDemand):
    """Binary search on noisy rewards: each allocation is repeated until a Hoeffding interval of the mean reward lies
    on one side of the threshold τ (or ``max_samples`` are in), then the interval's end moves there (decision SV3) [I].

    The paper's noisy models use a quasi-MLE (parametric) or an infinite binary tree with monotone confidence bounds
    (nonparametric); this is the simpler sequential test of each midpoint, correct with probability ``1 - delta`` per
    probe when rewards are ``noise_scale``-sub-Gaussian around a non-decreasing f(x) whose threshold crossing is θ.

    Parameters
    ----------
    theta_max : float
        Upper bound on θ (USD/hour per unit of load), > 0.
    threshold : float
        τ, the reward that counts as "met" (e.g. 0.95 of the team's trials on track).
    tolerance : float, optional
        Default ``theta_max / 1024``.
    noise_scale : float, default 0.5
        Sub-Gaussian scale of one reward (0.5 bounds any reward in [0, 1]).
    delta : float, default 0.01
        Error probability per probe.
    max_samples : int, default 200
        Rewards after which a probe is decided by the sign of ``mean - threshold``.
    """

    def __init__(self, theta_max: float, threshold: float, tolerance: float | None = None, *,
                 noise_scale: float = 0.5, delta: float = 0.01, max_samples: int = 200):
        super().__init__(theta_max, tolerance)
        self.threshold = float(threshold)
        self.noise_scale, self.delta, self.max_samples = noise_scale, delta, max_samples
        self._x: float | None = None
        self._sum, self._n = 0.0, 0

    def observe_reward(self, per_unit: float, reward: float) -> None:
        """Record one reward at an allocation of ``per_unit`` (USD/hour per unit of load).

        Rewards are pooled while the allocation stays the same (the probe, or less when contention cut it: a test at
        any point is informative); a new allocation starts a new test. Once a test is decided,
        :meth:`BinarySearchDemand.observe` moves the interval's end to that point.
        """
        if self.width <= self.tolerance or not (self.low < per_unit < self.high):
            return  # decided already, or outside the interval: nothing to learn there
        if self._x is None or not math.isclose(per_unit, self._x, rel_tol=1e-9, abs_tol=1e-12):
            self._x, self._sum, self._n = per_unit, 0.0, 0
        self._sum += float(reward)
        self._n += 1
        mean = self._sum / self._n
        half = self.noise_scale * math.sqrt(2.0 * math.log(2.0 / self.delta) / self._n)
        if abs(mean - self.threshold) > half or self._n >= self.max_samples:
            x, self._x, self._sum, self._n = self._x, None, 0.0, 0
            self.observe(x, mean >= self.threshold)


class NonparametricTreeDemand:
    """The paper's nonparametric model: an infinite binary tree over ``[0, theta_max]`` whose expanded nodes hold the
    rewards at allocations in their interval and monotone confidence bounds on the payoff there (Kandasamy et al.,
    Section 3.3 and Algorithms 7-10 [R]; decision SV15).

    Node (h, i) covers ``[theta_max (i - 1) / 2**h, theta_max i / 2**h]``. A reward ``y`` at allocation ``x`` (per
    unit of load) with sub-Gaussian constant ``sigma`` is assigned to the nodes containing ``x`` from the root down
    (12), (13), stopping at a leaf or at a node with too little data, ``N < beta_t / rho_h**2``, where ``N`` is the
    node's sum of ``1 / sigma**2``, ``rho_h = lipschitz * theta_max / 2**h`` bounds the payoff's variation over the
    node and ``beta_t = 2 log(2 t**2 / delta)`` (``t`` the points so far) [R: the paper's constants (11) were not
    recovered]; a leaf with enough data is expanded into its two children. Per node, with the weighted mean ``m``,
    ``lcb = m - sqrt(beta_t / N) - rho_h`` bounds ``inf f`` on the interval from below and ``ucb = m +
    sqrt(beta_t / N) + rho_h`` bounds ``sup f`` from above (14). These are made monotone as (15), (16) do, and across
    heights [I]: f is non-decreasing, so a node's ``lower`` is the largest ``lcb`` of any tree node whose interval
    starts at or left of its own (its left child, its left neighbours, and deeper or shallower nodes alike), and its
    ``upper`` the smallest ``ucb`` of any tree node that ends at or right of its own; neither moves back from the
    previous round's. Without the cross-height part, a deep node that knows f > τ at some x does not tell the
    shallow nodes to its right, and under contention (the team always gets the same x) the efficient descent stayed
    in a node whose Lipschitz term hid that (measured: L_T/T stuck at 0.17 instead of falling).

    Two ways to read the tree, as the mechanism needs:

    - ``upper_bound=False`` (Algorithm 3, the efficient mode): :meth:`probe` descends from the root to the child
      with the larger confidence score ``phi = min(upper - tau, tau - lower)`` (17) (the child more likely to hold
      θ; ties to the right) until a leaf or a node with too little data, and recommends that node's midpoint;
    - ``upper_bound=True`` (Algorithm 2, the strategy-proof mode): :attr:`high`, the demand of the exploitation
      hours, is the left end of the left-most tree node whose ``lower`` exceeds τ (so f > τ there: θ is left of it),
      an upper confidence bound on θ; the paper's descent to the right child unless its ``lower`` exceeds τ reaches
      the same point once the tree is deep enough. :meth:`probe`, the exploration hour's allocation, is the midpoint
      of ``[l, high]``, ``l`` the right end of the right-most node whose ``upper`` is below τ: a bisection whose
      every step is decided by the tree's bounds [I: the paper explores at a point of the node its descent reaches;
      that descent goes right by default, and with L = 10-30 and 14-140 exploration hours per team it explored
      only ever finer nodes at the right end of [0, theta_max] and its bound stayed at theta_max in 10^4 hours].

    Parameters
    ----------
    theta_max : float
        Upper bound on θ (USD/hour per unit of load), > 0.
    threshold : float
        τ, the reward that counts as "met".
    lipschitz : float
        L: the payoff changes by at most ``L · |x - x'|`` (reward per USD/hour per unit of load), > 0.
    noise_scale : float, default 0.5
        Sub-Gaussian constant sigma of one reward (0.5 bounds any reward in [0, 1]).
    delta : float, default 0.01
        Error probability of the confidence bounds.
    upper_bound : bool, default False
        Read the tree as Algorithm 2 does (see above).

    Raises
    ------
    ConfigError
        On a ``theta_max``, ``lipschitz``, ``noise_scale`` or ``delta`` that is not a finite number > 0.
    """

    def __init__(self, theta_max: float, threshold: float, *, lipschitz: float, noise_scale: float = 0.5,
                 delta: float = 0.01, upper_bound: bool = False):
        self.theta_max = _positive("theta_max", theta_max)
        self.threshold = float(threshold)
        self.lipschitz = _positive("lipschitz", lipschitz)
        self.noise_scale = _positive("noise_scale", noise_scale)
        self.delta = _positive("delta", delta)
        self.upper_bound = upper_bound
        # the tree's nodes, by index (0 is the root): height, position, data (13), bounds (15)-(16), children
        self._h: list[int] = []
        self._i: list[int] = []
        self._children: list[tuple[int, int] | None] = []
        self._precision: list[float] = []  # N (13)
        self._weighted: list[float] = []  # sum of y / sigma**2
        self._lower: list[float] = []  # (15)
        self._upper: list[float] = []  # (16)
        self._inv_rho2: list[float] = []
        self._mid: list[float] = []
        self.points = 0
        self.probes = 0
        self._node = 0  # the node of the latest probe
        self._add(0, 1)

    # -- the tree ------------------------------------------------------------------------------------------------
    def _add(self, h: int, i: int) -> int:
        k = len(self._h)
        self._h.append(h)
        self._i.append(i)
        self._children.append(None)
        self._precision.append(0.0)
        self._weighted.append(0.0)
        self._lower.append(-math.inf)
        self._upper.append(math.inf)
        self._inv_rho2.append((self.lipschitz * self.theta_max * 2.0 ** -h) ** -2)
        self._mid.append(self.theta_max * (i - 0.5) * 2.0 ** -h)
        self._rho = self.lipschitz * self.theta_max * np.ldexp(1.0, -np.array(self._h))
        # orders by left end and by right end (descending), with the last index of each run of equal ends
        self._left = left = np.ldexp(np.array(self._i, dtype=float) - 1, -np.array(self._h))
        self._right = right = np.ldexp(np.array(self._i, dtype=float), -np.array(self._h))
        self._by_left = np.argsort(left, kind="stable")
        self._left_run = np.searchsorted(left[self._by_left], left[self._by_left], side="right") - 1
        self._by_right = np.argsort(-right, kind="stable")
        self._right_run = np.searchsorted(-right[self._by_right], -right[self._by_right], side="right") - 1
        return k

    def _beta(self) -> float:
        t = max(self.points, 1)
        return 2.0 * math.log(2.0 * t**2 / self.delta)

    def _enough(self, k: int, beta: float) -> bool:
        return self._precision[k] >= beta * self._inv_rho2[k]

    def _ends(self, k: int) -> tuple[float, float]:
        w = self.theta_max * 2.0 ** -self._h[k]
        return (self._i[k] - 1) * w, self._i[k] * w

    def _refresh(self) -> None:
        """The bounds (14), made monotone (15), (16) across the whole tree (see the class docstring)."""
        beta = self._beta()
        precision = np.array(self._precision)
        seen = precision > 0
        n = np.where(seen, precision, 1.0)
        half = np.sqrt(beta / n) + self._rho
        mean = np.array(self._weighted) / n
        lcb = np.where(seen, mean - half, -np.inf)
        ucb = np.where(seen, mean + half, np.inf)
        lower, upper = np.array(self._lower), np.array(self._upper)
        best = np.maximum.accumulate(lcb[self._by_left])[self._left_run]
        lower[self._by_left] = np.maximum(lower[self._by_left], best)
        best = np.minimum.accumulate(ucb[self._by_right])[self._right_run]
        upper[self._by_right] = np.minimum(upper[self._by_right], best)
        self._lower, self._upper = lower.tolist(), upper.tolist()

    # -- the demand search's interface ---------------------------------------------------------------------------
    @property
    def low(self) -> float:
        """The left end of the latest probe's node (USD/hour per unit of load)."""
        return self._ends(self._node)[0]

    @property
    def high(self) -> float:
        """The right end of the latest probe's node; with ``upper_bound``, the upper confidence bound on θ: the left
        end of the left-most tree node whose ``lower`` exceeds τ, else ``theta_max`` (USD/hour per unit of load)."""
        if self.upper_bound:
            return self._bracket()[1]
        return self._ends(self._node)[1]

    def _bracket(self) -> tuple[float, float]:
        """``(l, u)``: θ is above the right end of every tree node whose ``upper`` is below τ (the largest is l) and
        below the left end of every one whose ``lower`` is above it (the smallest is u), on the confidence event."""
        lower, upper = np.array(self._lower), np.array(self._upper)
        above, below = lower > self.threshold, upper < self.threshold
        u = float(self._left[above].min()) * self.theta_max if above.any() else self.theta_max
        l = float(self._right[below].max()) * self.theta_max if below.any() else 0.0
        return min(l, u), u

    @property
    def width(self) -> float:
        """``high - low`` (USD/hour per unit of load)."""
        return self.high - self.low

    @property
    def depth(self) -> int:
        """The height of the deepest tree node."""
        return max(self._h)

    @property
    def size(self) -> int:
        """The tree's nodes."""
        return len(self._h)

    def bounds(self, per_unit: float) -> tuple[float, float]:
        """``(lower, upper)`` on the payoff at ``per_unit`` from the deepest tree node that contains it."""
        x, k = min(max(float(per_unit), 0.0), self.theta_max), 0
        while (children := self._children[k]) is not None:
            k = children[0 if x < self._mid[k] else 1]
        return self._lower[k], self._upper[k]

    def probe(self) -> float:
        """The next unit demand to allocate at: the midpoint of the node the confidence-score descent (17) reaches
        (USD/hour per unit of load); in the strategy-proof mode, the exploration hour's allocation."""
        self.probes += 1
        if self.upper_bound:
            l, u = self._bracket()
            return (l + u) / 2
        beta, tau, k = self._beta(), self.threshold, 0
        lower, upper = self._lower, self._upper
        while (children := self._children[k]) is not None and self._enough(k, beta):
            left, right = children
            k = left if min(upper[left] - tau, tau - lower[left]) > min(upper[right] - tau, tau - lower[right]) else right
        self._node = k
        return self._mid[k]

    def observe_reward(self, per_unit: float, reward: float, sigma: float | None = None) -> None:
        """Record one reward at an allocation of ``per_unit`` (USD/hour per unit of load; clipped to the tree).

        Parameters
        ----------
        per_unit : float
        reward : float
        sigma : float, optional
            The reward's sub-Gaussian constant; default ``noise_scale``.
        """
        x = min(max(float(per_unit), 0.0), self.theta_max)
        weight = 1.0 / (sigma if sigma is not None else self.noise_scale) ** 2
        self.points += 1
        beta, k, y = self._beta(), 0, weight * float(reward)
        while True:
            self._precision[k] += weight
            self._weighted[k] += y
            if not self._enough(k, beta):
                break
            children = self._children[k]
            if children is None:  # a leaf with enough data: expand it
                h, i = self._h[k] + 1, 2 * self._i[k]
                self._children[k] = (self._add(h, i - 1), self._add(h, i))
                break
            k = children[0 if x < self._mid[k] else 1]
        self._refresh()


@dataclass(frozen=True, slots=True, kw_only=True)
class FairShareRound:
    """One hour's split.

    Attributes
    ----------
    hour : int
        0, 1, ... in the order :meth:`OnlineFairShare.allocate` was called.
    allocations : dict of str to float
        USD/hour per team.
    demands : dict of str to float
        The demands MMF was run on (load times the probe or the upper bound), USD/hour; empty in an exploration hour.
    exploring : str or None
        The team served alone in a strategy-proof exploration hour.
    """

    hour: int
    allocations: dict[str, float]
    demands: dict[str, float] = field(default_factory=dict)
    exploring: str | None = None


class OnlineFairShare:
    """The org budget (USD/hour) split each hour among teams by MMF on demands learned from their rewards.

    Parameters
    ----------
    entitlements : mapping of str to float
        Each team's share, > 0 (normalised by the sum).
    capacity_usd_per_hour : float
        The org budget, > 0.
    theta_max_usd_per_hour : float
        Upper bound on any team's unit demand (USD/hour per active trial), > 0.
    mode : {"efficient", "strategy-proof"}, default "efficient"
        See the module docstring (decision SV3).
    tolerance_usd_per_hour : float, optional
        Binary-search tolerance; default ``theta_max / 1024``.
    threshold : float, optional
        With a threshold τ the feedback is noisy: :meth:`observe_rewards` takes each team's reward and each probe is
        decided by :class:`NoisyBinarySearchDemand`'s sequential test. Without, :meth:`observe` takes met / not met.
    noisy_search : {"hoeffding", "tree"}, default "hoeffding"
        With a threshold: :class:`NoisyBinarySearchDemand`, or :class:`NonparametricTreeDemand` (the paper's
        nonparametric model; read as Algorithm 2 in the strategy-proof mode, as Algorithm 3 in the efficient one).
    lipschitz : float, optional
        The tree's L (required with ``noisy_search="tree"``).
    noise_scale : float, default 0.5
        Sub-Gaussian constant of one reward, for either noisy search.
    brackets : {"doubling", "linear"}, default "doubling"
        Strategy-proof mode: bracket k holds ``2**k`` exploitation hours (about log2 T exploration hours per team in
        T hours: enough for a binary search on exact feedback), or ``k + 1`` (about sqrt(2 T): noisy feedback needs
        many more rewards) [I: the paper's phase lengths were not recovered].
    minimums_usd_per_hour, caps_usd_per_hour : mapping of str to float, optional
        Per team, a guaranteed minimum and a cap (USD/hour) that every MMF hour honours (``max_min_fair``'s
        ``minimums`` and ``caps``, decision SV14); an exploration hour gives at most the team's cap. Kept in the
        attributes ``minimums`` and ``caps``, which a caller may change between hours.

    Raises
    ------
    ConfigError
        On no team, a bad number or an unknown mode.
    """

    def __init__(self, entitlements: Mapping[str, float], *, capacity_usd_per_hour: float,
                 theta_max_usd_per_hour: float, mode: str = "efficient", tolerance_usd_per_hour: float | None = None,
                 threshold: float | None = None, minimums_usd_per_hour: Mapping[str, float] | None = None,
                 caps_usd_per_hour: Mapping[str, float] | None = None, noisy_search: str = "hoeffding",
                 lipschitz: float | None = None, noise_scale: float = 0.5, brackets: str = "doubling"):
        if not entitlements:
            raise ConfigError("entitlements is empty, but must name at least one team")
        if mode not in FAIR_SHARE_MODES:
            raise ConfigError(f"mode is {mode!r}, but must be one of {', '.join(FAIR_SHARE_MODES)}")
        self.entitlements = {t: _positive(f"entitlements[{t!r}]", e) for t, e in sorted(entitlements.items())}
        self.capacity = _positive("capacity_usd_per_hour", capacity_usd_per_hour)
        self.mode = mode
        if brackets not in ("doubling", "linear"):
            raise ConfigError(f"brackets is {brackets!r}, but must be doubling or linear")
        self.brackets = brackets
        if noisy_search not in NOISY_SEARCHES:
            raise ConfigError(f"noisy_search is {noisy_search!r}, but must be one of {', '.join(NOISY_SEARCHES)}")
        if noisy_search == "tree" and threshold is not None and lipschitz is None:
            raise ConfigError("noisy_search 'tree' needs lipschitz: the payoff's Lipschitz constant L")

        def search(_: str) -> BinarySearchDemand | NonparametricTreeDemand:
            if threshold is None:
                return BinarySearchDemand(theta_max_usd_per_hour, tolerance_usd_per_hour)
            if noisy_search == "tree":
                return NonparametricTreeDemand(theta_max_usd_per_hour, threshold, lipschitz=lipschitz,
                                               noise_scale=noise_scale, upper_bound=mode == "strategy-proof")
            return NoisyBinarySearchDemand(theta_max_usd_per_hour, threshold, tolerance_usd_per_hour,
                                           noise_scale=noise_scale)

        self.searches: dict[str, Any] = {t: search(t) for t in self.entitlements}
        self.minimums: dict[str, float] = dict(minimums_usd_per_hour or {})
        self.caps: dict[str, float] = dict(caps_usd_per_hour or {})
        self.hour = 0
        self._plan: list[str | None] = []  # strategy-proof: the coming hours, a team to explore or None
        self._bracket = 0

    def _loads(self, loads: Mapping[str, float]) -> dict[str, float]:
        unknown = sorted(set(loads) - set(self.entitlements))
        if unknown:
            raise ConfigError(f"loads names unknown team {unknown[0]!r}; teams are {', '.join(self.entitlements)}")
        out = {}
        for t in self.entitlements:
            n = loads.get(t, 0.0)
            if not (isinstance(n, (int, float)) and math.isfinite(n) and n >= 0):
                raise ConfigError(f"loads[{t!r}] is {n!r}, but must be a finite number >= 0")
            out[t] = float(n)
        return out

    def _mmf(self, demands: dict[str, float]) -> dict[str, float]:
        teams = list(self.entitlements)
        bounds: dict[str, list[float | None]] = {}
        if self.minimums or self.caps:
            bounds = {"minimums": [self.minimums.get(t) for t in teams], "caps": [self.caps.get(t) for t in teams]}
        alloc = max_min_fair([self.entitlements[t] for t in teams], [demands[t] for t in teams], self.capacity,
                             **bounds)
        return dict(zip(teams, map(float, alloc)))

    def allocate(self, loads: Mapping[str, float]) -> FairShareRound:
        """This hour's allocations for the teams' loads (active trials; a missing team has load 0).

        Parameters
        ----------
        loads : mapping of str to float
            Units of load per team, >= 0.

        Returns
        -------
        FairShareRound

        Raises
        ------
        ConfigError
            On an unknown team or a negative load.
        """
        n = self._loads(loads)
        hour, self.hour = self.hour, self.hour + 1
        if self.mode == "efficient":
            demands = {t: n[t] * self.searches[t].probe() for t in n}
            return FairShareRound(hour=hour, allocations=self._mmf(demands), demands=demands)
        if not self._plan:  # a new bracket: one exploration hour per team, then 2**bracket exploitation hours
            exploit = 2 ** self._bracket if self.brackets == "doubling" else self._bracket + 1
            self._plan = [*self.entitlements, *([None] * exploit)]
            self._bracket += 1
        team = self._plan.pop(0)
        if team is not None:  # report-independent: the probe alone, everyone else gets nothing
            alloc = {t: 0.0 for t in n}
            alloc[team] = min(n[team] * self.searches[team].probe(), self.capacity, self.caps.get(team, math.inf))
            return FairShareRound(hour=hour, allocations=alloc, exploring=team)
        demands = {t: n[t] * self.searches[t].high for t in n}
        return FairShareRound(hour=hour, allocations=self._mmf(demands), demands=demands)

    def observe(self, rnd: FairShareRound, loads: Mapping[str, float], met: Mapping[str, bool]) -> None:
        """Learn from the hour's rewards: ``met[team]`` says whether the team's reward reached its threshold.

        In ``strategy-proof`` mode only the explored team's feedback is used (exploitation hours teach nothing,
        so a misreport there cannot steer the estimate).

        Parameters
        ----------
        rnd : FairShareRound
            What :meth:`allocate` returned for the hour.
        loads : mapping of str to float
            The same loads as given to :meth:`allocate`.
        met : mapping of str to bool
            Teams without an entry teach nothing this hour.
        """
        n = self._loads(loads)
        teams = [rnd.exploring] if self.mode == "strategy-proof" else list(n)
        for t in teams:
            if t is None or t not in met or n[t] <= 0:
                continue
            self.searches[t].observe(rnd.allocations[t] / n[t], bool(met[t]))

    def observe_rewards(self, rnd: FairShareRound, loads: Mapping[str, float], rewards: Mapping[str, float]) -> None:
        """Noisy feedback (an ``OnlineFairShare`` built with a ``threshold``): each team's reward for the hour.

        Parameters
        ----------
        rnd : FairShareRound
        loads : mapping of str to float
        rewards : mapping of str to float
            E.g. the fraction of the team's trials on track; teams without an entry teach nothing.

        Raises
        ------
        ConfigError
            If this mechanism was built without a threshold.
        """
        n = self._loads(loads)
        if not all(hasattr(s, "observe_reward") for s in self.searches.values()):
            raise ConfigError("observe_rewards needs an OnlineFairShare built with a threshold (noisy feedback)")
        teams = [rnd.exploring] if self.mode == "strategy-proof" else list(n)  # exploitation hours teach nothing
        for t in teams:
            if t is not None and t in rewards and n[t] > 0:
                self.searches[t].observe_reward(rnd.allocations[t] / n[t], rewards[t])

    def interval(self, team: str) -> tuple[float, float]:
        """``(low, high)`` of the team's unit demand, USD/hour per unit of load."""
        s = self.searches[team]
        return s.low, s.high
