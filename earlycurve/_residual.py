"""Learning-curve extrapolation from previous runs: the final loss as the last value plus a learned residual.

Target: "top-3 recall of the curve predictor ≥ last value's at every θ" (decision ES14). Idea from the literature
on predicting a curve from a pool of previously recorded curves (Klein et al. 2017, "Learning curve
prediction with Bayesian neural networks", ICLR; Domhan et al. 2015, IJCAI; Chandrashekaran & Lane 2017,
"Speeding up hyper-parameter optimization by extrapolation of learning curves using previous builds"):
a curve cut at a fraction θ of its run is described by its own shape, and a regression learned on
finished curves maps that shape to what is still to come.

Model ([I] the exact form is ours). With ``z = log(loss)`` (``transform="log"``) or ``z = loss``, a curve
observed up to step ``s`` (``θ = s / S_max``) has the features

    x_f = z(f·s) − z(s)   for f in ``fractions``   (how much it fell over the last (1 − f)·s steps)
    [z(s)]                                           (its level, with ``level=True``)

(``z(t)`` linearly interpolated between observed steps, the first value before the first step), and the
prediction is ``ẑ(S_max) = z(s) + r̂(x)``: the residual ``r = z(S_max) − z(s)`` is what is learned, so a
model with no coefficient ranks trials exactly as the last value does (and with ``fit_intercept=False``
*is* the last value). One ridge regression (scikit-learn ``Ridge`` on standardised features) per θ of
``thetas``; a curve is answered by the model of the nearest θ.

Shrinkage, chosen by cross-validation on the training pool only. For every θ, the curves are split in
``n_folds`` seeded folds; every ``alpha`` of ``alphas`` (``inf`` = no coefficient, the last value's ranking)
gives out-of-fold predictions, scored by the quantity the orchestrator needs: the **top-k recall** over
``n_studies`` pseudo-studies of ``study_size`` curves drawn (seeded) within each group of the pool (a study
never mixes workloads), i.e. the share of studies whose truly best final is among the ``k`` lowest
predictions. A finite alpha is eligible only if (1) its mean recall beats ``inf``'s by more than
``margin + n_se · SE`` (SE: the standard error of that gain; ``n_se = 1`` is the one-standard-error rule, the
default is 1.5) and
(2) it loses recall on no group; the eligible alpha with the highest recall is chosen (ties: more shrinkage),
else ``inf``. The model therefore falls back to the last value at every θ where the pool does not show it
can do better. The intercept is the median training residual left by the coefficients (it moves every
prediction alike and does not change a ranking).

Ranking curves cut at different fractions (e.g. raw curves recorded at uneven steps, cut "at or before θ"): each
is answered by its own θ model, and the models' different intercepts (the median drop still to come) can reorder
them even where no coefficient is used. The orchestrator ranks its trials at one θ step, and
:func:`earlycurve.evaluation.evaluate_learned` puts curves on a common grid first, for that reason.

Every random draw comes from ``numpy.random.default_rng([random_state, ...])``: same data and seed, same model.
No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from earlycurve._protocol import FinalMetricPredictor, Prediction, check_curve
from earlycurve.errors import InvalidCurveError, NotFittedError

__all__ = ["ResidualCurvePredictor", "RESIDUAL_THETAS"]

#: θ of the per-θ models (fractions of ``S_max``).
RESIDUAL_THETAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
_ALPHAS = (0.1, 1.0, 10.0, 100.0, 1000.0, math.inf)


class ResidualCurvePredictor(FinalMetricPredictor):
    """Final loss = last value + a residual learned from previously recorded curves (module docstring).

    Parameters
    ----------
    fractions : sequence of float, default=(0.125, 0.25, 0.5, 0.75)
        Points of the observed prefix, as fractions of its last step ``s``, in (0, 1); may be empty.
    thetas : sequence of float, default=RESIDUAL_THETAS
        θ of the per-θ models, in (0, 1), strictly increasing.
    alphas : sequence of float, default=(0.1, 1, 10, 100, 1000, inf)
        Ridge penalties tried by cross-validation, > 0; ``inf`` (no coefficient) is always added.
    level : bool, default=False
        Add ``z(s)`` (the current level) to the features.
    transform : {"log", "none"}, default="log"
        ``"log"``: work on ``log(loss)`` (scale-free; a curve with a loss ≤ 0 is then answered by its last
        value, ``method="last_value"``, and skipped in training); ``"none"``: on the loss itself.
    fit_intercept : bool, default=True
        Learn a constant residual (the median improvement still to come; does not change the ranking).
    clip : float, default=0.01
        Training residuals are clipped to their [clip, 1 − clip] quantiles (a diverging run must not
        dominate the fit), in [0, 0.5).
    n_folds : int, default=5
    n_studies : int, default=200
        Pseudo-studies per group for the cross-validated recall.
    study_size : int, default=16
    top_k : int, default=3
    margin : float, default=0.0
        A finite alpha is chosen only if its recall beats ``inf``'s by more than ``margin + n_se · SE``, ≥ 0.
    n_se : float, default=1.5
        The same in standard errors of the gain (1: the one-standard-error rule of Hastie et al., *Elements of
        Statistical Learning* §7.10, applied to the gain over the last value), ≥ 0. The default 1.5 is the
        smallest of {1, 1.5, 2, 3} under which the in-set model kept the last value's recall at every θ on every
        recorded set in all five pool splits 0–4 of ``benchmarks/bench_curve_recall.py``; it then did so in 20 of 20
        further splits (5–24) not used for the choice (docs/design/earlycurve.md §8.7). SE is the sd of the
        paired per-study differences over ``sqrt(n_eff)``, ``n_eff`` = the number of disjoint studies the
        pool holds (Σ over groups of curves ÷ ``study_size``), as pseudo-studies overlap.
    level_interval : float, default=0.9
        Nominal coverage of the interval (quantiles of the out-of-fold errors), in (0, 1).
    random_state : int, default=0

    Attributes (after :meth:`fit`)
    ------------------------------
    alpha_ : dict of float -> float
        Chosen alpha per θ (``inf``: the last value's ranking).
    cv_recall_ : dict of float -> dict of float -> float
        Cross-validated top-k recall per θ and alpha (mean over groups).
    cv_gain_se_ : dict of float -> dict of float -> float
        Standard error of each alpha's recall gain over ``inf`` (``n_se``).
    coef_ : dict of float -> ndarray of shape (n_features,)
        Coefficients per θ in the transformed, un-standardised units (zero for ``inf``).
    intercept_ : dict of float -> float

    Raises
    ------
    InvalidCurveError
        Bad parameters (at construction), or training curves that do not reach ``max_steps`` (at fit).

    Examples
    --------
    Curves ``exp(b − a·t/20)`` cross, and their log-residual is linear in the features, so it is learned exactly:

    >>> import numpy as np
    >>> steps = np.arange(1, 21)
    >>> ab = np.random.default_rng(0).uniform([0.5, 0.0], [3.0, 1.5], (64, 2))
    >>> pool = [(steps, np.exp(b - a * steps / 20), 20) for a, b in ab]
    >>> model = ResidualCurvePredictor(alphas=(1e-8,), clip=0.0, top_k=1, n_se=0.0, n_studies=50).fit(pool)
    >>> s, v, _ = pool[0]
    >>> bool(np.isclose(model.predict_final(s[:6], v[:6], 20).value, v[-1], rtol=1e-6))
    True
    """

    def __init__(self, *, fractions: Sequence[float] = (0.125, 0.25, 0.5, 0.75), thetas: Sequence[float] = RESIDUAL_THETAS,
                 alphas: Sequence[float] = _ALPHAS, level: bool = False, transform: str = "log", fit_intercept: bool = True,
                 clip: float = 0.01, n_folds: int = 5, n_studies: int = 200, study_size: int = 16, top_k: int = 3,
                 margin: float = 0.0, n_se: float = 1.5, level_interval: float = 0.9, random_state: int = 0) -> None:
        self.fractions = tuple(float(f) for f in fractions)
        self.thetas = tuple(float(t) for t in thetas)
        self.alphas = tuple(sorted({float(a) for a in alphas} | {math.inf}))
        self.level = bool(level)
        self.transform = transform
        self.fit_intercept = bool(fit_intercept)
        self.clip = float(clip)
        self.n_folds, self.n_studies, self.study_size, self.top_k = int(n_folds), int(n_studies), int(study_size), int(top_k)
        self.margin = float(margin)
        self.n_se = float(n_se)
        self.level_interval = float(level_interval)
        self.random_state = int(random_state)
        if any(not 0 < f < 1 for f in self.fractions):
            raise InvalidCurveError(f"fractions {self.fractions!r} must lie in (0, 1)")
        if not self.thetas or any(not 0 < t < 1 for t in self.thetas) or any(b <= a for a, b in zip(self.thetas, self.thetas[1:])):
            raise InvalidCurveError(f"thetas {self.thetas!r} must be non-empty, in (0, 1) and strictly increasing")
        if any(not a > 0 for a in self.alphas):
            raise InvalidCurveError(f"alphas {alphas!r} must be > 0")
        if transform not in ("log", "none"):
            raise InvalidCurveError(f"transform is {transform!r}, but must be 'log' or 'none'")
        if not 0 <= self.clip < 0.5 or self.margin < 0 or self.n_se < 0 or not 0 < self.level_interval < 1:
            raise InvalidCurveError(f"clip ({clip!r}) must be in [0, 0.5), margin ({margin!r}) >= 0, "
                                    f"level_interval ({level_interval!r}) in (0, 1)")
        if self.n_folds < 2 or self.n_studies < 1 or self.study_size < 2 or self.top_k < 1:
            raise InvalidCurveError(f"n_folds ({n_folds!r}) must be >= 2, n_studies ({n_studies!r}) >= 1, "
                                    f"study_size ({study_size!r}) >= 2, top_k ({top_k!r}) >= 1")

    # -- features -----------------------------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        """Number of features: ``len(fractions)`` (+1 with ``level``)."""
        return len(self.fractions) + int(self.level)

    def _z(self, values: np.ndarray) -> np.ndarray:
        return np.log(values) if self.transform == "log" else values

    def _usable(self, values: np.ndarray) -> bool:
        return self.transform != "log" or bool(np.all(values > 0))

    def features(self, steps: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Features of one curve observed up to ``steps[-1]`` (module docstring).

        Parameters
        ----------
        steps, values : array-like of shape (n_points,)
            The observed prefix (loss, lower is better; > 0 with ``transform="log"``).

        Returns
        -------
        x : ndarray of shape (n_features,)
        """
        steps, values = check_curve(steps, values)
        z = self._z(values)
        x = [float(np.interp(f * steps[-1], steps, z)) - z[-1] for f in self.fractions]
        if self.level:
            x.append(float(z[-1]))
        return np.array(x, dtype=float)

    # -- fit ----------------------------------------------------------------------------------------------
    def fit(self, curves: Sequence[tuple[np.ndarray, np.ndarray, int]], groups: Sequence[object] | None = None) -> ResidualCurvePredictor:
        """Learn the residual per θ from finished curves; choose each θ's alpha by cross-validated top-k recall.

        Parameters
        ----------
        curves : sequence of (steps, values, max_steps)
            Finished curves: ``steps`` (n_points_i,) increasing with ``steps[-1] == max_steps`` (steps),
            ``values`` the loss there. Each is cut at the recorded step nearest ``θ · max_steps``
            (below ``max_steps``) for every θ.
        groups : sequence of hashable, optional
            The workload / data set of each curve: pseudo-studies are drawn within a group. Default: one group.

        Returns
        -------
        self

        Raises
        ------
        InvalidCurveError
            A curve does not end at its ``max_steps``, ``groups`` does not match, or a θ has fewer than
            ``n_folds`` usable curves.
        """
        groups = [0] * len(curves) if groups is None else list(groups)
        if len(groups) != len(curves):
            raise InvalidCurveError(f"{len(groups)} groups for {len(curves)} curves")
        prepared = []
        for (steps, values, max_steps), g in zip(curves, groups):
            steps, values = check_curve(steps, values, max_steps)
            if steps[-1] != max_steps:
                raise InvalidCurveError(f"a training curve ends at step {steps[-1]:g}, before its max_steps {max_steps:g}")
            if self._usable(values):
                prepared.append((steps, values, float(max_steps), g))
        self.alpha_, self.cv_recall_, self.cv_gain_se_, self.coef_, self.intercept_, self._errors = {}, {}, {}, {}, {}, {}
        for ti, theta in enumerate(self.thetas):
            rows, target, final, gid = [], [], [], []
            for steps, values, max_steps, g in prepared:
                cut = _nearest_cut(steps, theta * max_steps)
                if cut is None:
                    continue
                x = self.features(steps[: cut + 1], values[: cut + 1])
                z = self._z(values)
                rows.append(x)
                target.append(z[-1] - z[cut])
                final.append(z[-1])
                gid.append(g)
            n = len(rows)
            if n < self.n_folds:
                raise InvalidCurveError(f"θ {theta}: {n} usable training curves, fewer than n_folds = {self.n_folds}")
            X = np.array(rows).reshape(n, self.n_features)
            y = np.array(target)
            lo, hi = np.quantile(y, [self.clip, 1 - self.clip]) if self.clip else (-np.inf, np.inf)
            yc = np.clip(y, lo, hi)
            folds = np.random.default_rng([self.random_state, ti, 0]).permutation(n) % self.n_folds
            studies = _pseudo_studies(np.array(gid, dtype=object), self.study_size, self.n_studies,
                                      np.random.default_rng([self.random_state, ti, 1]))
            gs = np.array([g for g, _ in studies], dtype=object)
            best_final = [s[np.argmin(np.array(final)[s])] for _, s in studies]
            last = np.array(final) - y  # z(s)
            oof = {}
            for alpha in self.alphas:
                pred = np.zeros(n)
                for k in range(self.n_folds):
                    tr, te = folds != k, folds == k
                    pred[te] = self._fit_one(X[tr], yc[tr], alpha).predict(X[te])
                oof[alpha] = pred
            hit = {a: _hits(last + oof[a], studies, best_final, self.top_k) for a in self.alphas}
            per_group = {a: {g: float(np.mean(h[gs == g])) for g in dict.fromkeys(gs.tolist())} for a, h in hit.items()}
            score = {a: float(np.mean(list(v.values()))) if v else float("nan") for a, v in per_group.items()}
            self.cv_recall_[theta] = score
            se = {a: _gain_se(hit[a] - hit[math.inf], gid, self.study_size) for a in self.alphas}
            self.cv_gain_se_[theta] = se
            ok = [a for a in self.alphas if math.isfinite(a) and self.n_features
                  and score[a] > score[math.inf] + self.margin + self.n_se * se[a]
                  and all(per_group[a][g] >= per_group[math.inf][g] - 1e-12 for g in per_group[a])]
            chosen = max(ok, key=lambda a: (score[a], a)) if ok else math.inf
            self.alpha_[theta] = chosen
            model = self._fit_one(X, yc, chosen)
            self.coef_[theta], self.intercept_[theta] = model.coef_, model.intercept_
            self._errors[theta] = y - oof[chosen]
        return self

    def _fit_one(self, X: np.ndarray, y: np.ndarray, alpha: float) -> _Linear:
        """Ridge on standardised ``X`` (n, n_features) -> ``y`` (n,), as a linear map in the original units."""
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        if not math.isfinite(alpha) or X.shape[1] == 0:
            return _Linear(np.zeros(X.shape[1]), float(np.median(y)) if self.fit_intercept else 0.0)
        pipe = make_pipeline(StandardScaler(), Ridge(alpha=alpha)).fit(X, y)
        sc, rg = pipe[0], pipe[1]
        coef = rg.coef_ / np.where(sc.scale_ > 0, sc.scale_, 1.0)
        return _Linear(coef, float(np.median(y - X @ coef)) if self.fit_intercept else 0.0)

    # -- predict ------------------------------------------------------------------------------------------
    def theta_model(self, theta: float) -> float:
        """The θ of ``thetas`` whose model answers a curve at progress ``theta`` (the nearest; ties: the lower).

        Parameters
        ----------
        theta : float
            The curve's progress, last step / ``max_steps``.

        Returns
        -------
        float
            One of :attr:`thetas`.
        """
        return min(self.thetas, key=lambda t: (abs(t - theta), t))

    def predict_residual(self, steps: np.ndarray, values: np.ndarray, max_steps: int) -> float:
        """Predicted ``z(S_max) − z(s)`` (transformed units) of one curve; 0 when it has reached ``max_steps``.

        Parameters
        ----------
        steps : array-like of shape (n_points,)
            Training steps of the observations, strictly increasing, ``≤ max_steps``.
        values : array-like of shape (n_points,)
            Loss at those steps (lower is better), finite.
        max_steps : int
            ``S_max`` of the trial, in training steps.

        Returns
        -------
        float

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        """
        if not hasattr(self, "alpha_"):
            raise NotFittedError("ResidualCurvePredictor is not fitted; call fit(curves) first")
        steps, values = check_curve(steps, values, max_steps)
        if steps[-1] >= max_steps:
            return 0.0
        t = self.theta_model(steps[-1] / max_steps)
        return float(np.dot(self.coef_[t], self.features(steps, values)) + self.intercept_[t])

    def predict_final(self, steps: np.ndarray, values: np.ndarray, max_steps: int) -> Prediction:
        """Last value plus the learned residual (see :class:`FinalMetricPredictor`).

        The interval is the ``level_interval`` central range of the out-of-fold errors at that θ.
        A curve with a loss ≤ 0 under ``transform="log"`` gets its last value (``method="last_value"``).

        Parameters
        ----------
        steps : array-like of shape (n_points,)
            Training steps of the observations, strictly increasing, ``≤ max_steps``.
        values : array-like of shape (n_points,)
            Loss at those steps (lower is better), finite.
        max_steps : int
            ``S_max`` of the trial, in training steps.

        Returns
        -------
        prediction : Prediction

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        """
        steps, values = check_curve(steps, values, max_steps)
        if not hasattr(self, "alpha_"):
            raise NotFittedError("ResidualCurvePredictor is not fitted; call fit(curves) first")
        y = float(values[-1])
        if not self._usable(values) or steps[-1] >= max_steps:
            return Prediction(value=y, low=y, high=y, n_stages=0, method="last_value")
        t = self.theta_model(steps[-1] / max_steps)
        z = self._z(values)[-1] + self.predict_residual(steps, values, max_steps)
        q = (1 - self.level_interval) / 2
        lo, hi = np.quantile(self._errors[t], [q, 1 - q])
        back = (lambda v: math.exp(min(v, 700.0))) if self.transform == "log" else (lambda v: v)
        value = back(z)
        return Prediction(value=value, low=min(back(z + lo), value), high=max(back(z + hi), value), n_stages=0,
                          method="last_value" if self.alpha_[t] == math.inf and not self.fit_intercept else "residual")


class _Linear:
    """``x ↦ x·coef + intercept``, shapes (n, n_features) -> (n,)."""

    def __init__(self, coef: np.ndarray, intercept: float) -> None:
        self.coef_, self.intercept_ = np.asarray(coef, dtype=float), float(intercept)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return X @ self.coef_ + self.intercept_


def _nearest_cut(steps: np.ndarray, at: float) -> int | None:
    """Index of the recorded step nearest ``at`` (ties: the lower) among those before the last; None if none."""
    if steps.size < 2:
        return None
    d = np.abs(steps[:-1] - at)
    return int(np.flatnonzero(d == d.min())[0])


def _pseudo_studies(gid: np.ndarray, size: int, n: int, rng: np.random.Generator) -> list[tuple[object, np.ndarray]]:
    """``n`` studies ``(group, rows)`` of ``size`` (or the whole group if smaller) rows drawn without replacement per group."""
    out = []
    for g in dict.fromkeys(gid.tolist()):
        rows = np.flatnonzero(gid == g)
        if rows.size < 2:
            continue
        out += [(g, rng.choice(rows, size=min(size, rows.size), replace=False)) for _ in range(n)]
    return out


def _hits(score: np.ndarray, studies: list[tuple[object, np.ndarray]], best: list[int], k: int) -> np.ndarray:
    """Per study, 1.0 when its best row is among the ``k`` lowest scores (stable order); shape (n_studies,)."""
    return np.array([float(b in s[np.argsort(score[s], kind="stable")[:k]]) for (_, s), b in zip(studies, best)])


def _gain_se(gain: np.ndarray, gid: list, study_size: int) -> float:
    """Standard error of a mean recall gain over the last value from paired per-study differences ``gain``, with as
    many independent studies as the pool holds disjoint ones (pseudo-studies overlap); 0 for a single study."""
    n_eff = max(1.0, sum(c / min(study_size, c) for c in _group_sizes(gid).values() if c >= 2))
    return float(np.std(gain, ddof=1) / math.sqrt(n_eff)) if gain.size > 1 else 0.0


def _group_sizes(gid: list) -> dict:
    out: dict = {}
    for g in gid:
        out[g] = out.get(g, 0) + 1
    return out
