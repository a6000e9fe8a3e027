"""The final loss from a trial's hyperparameters and its curve so far, learned from previous runs of the same search space.

Decision ES21 (docs/design/earlycurve.md §8.19). On the recorded ConvNeXt study a curve seen at 2-5 % of its run says
little about where it ends: the learning rate is still warming up, and how long it warms up and how many epochs the run
has are hyperparameters of the trial. The trial's own configuration says much of the rest. Learning-curve models that
read the hyperparameters next to the partial curve are the literature's answer (Klein et al. 2017, "Learning curve
prediction with Bayesian neural networks", ICLR: LCNet; Swersky et al. 2014, "Freeze-thaw Bayesian optimization";
Wistuba et al. 2022, "Supervising the multi-fidelity race of hyperparameter configurations", NeurIPS: DyHPO).

Model ([I] the exact form is ours). A trial cut at step ``s`` (``θ = s / S_max``) with ``z = log(loss)`` has the
features ``[z(s), z(s) − z(s/2), h_1 … h_m]``: its level, how much it fell over the second half of what was seen
(``z`` linearly interpolated, the first value before the first step), and its hyperparameters, encoded by
:class:`ConfigEncoder`. The residual ``z(S_max) − z(s)`` is learned by gradient-boosted trees (scikit-learn
``HistGradientBoostingRegressor``, which takes a missing hyperparameter as NaN), one model per θ of ``thetas``; a
curve is answered by the model of the nearest θ, and the prediction is ``exp(z(s) + r̂)``.

The guard is :class:`earlycurve.ResidualCurvePredictor`'s: per θ, out-of-fold predictions over ``n_folds`` seeded
folds are scored by the top-k recall of ``n_studies`` pseudo-studies of ``study_size`` previous runs, and the trees
are used only if their recall beats the last value's by more than ``n_se`` standard errors of the gain, and only with
at least two studies' worth of runs (``2·study_size``: with fewer, every pseudo-study holds the same runs and the
standard error says nothing); otherwise that θ ranks by the last value (``method="last_value"``). The folds and
pseudo-studies are drawn over the runs in a canonical order (by their values and configurations), so the model does
not depend on the order the runs are given in. So the model is never trusted where the previous runs do
not show it ranks better.

It needs previous runs of **the same search space** (the same model, data and hyperparameters), finished, with their
configurations: the same premise as choosing any early-stopping setting on tuning studies, made explicit.

Every random draw comes from ``numpy.random.default_rng([random_state, θ·10⁶, ...])`` or a seeded scikit-learn
estimator: same data and seed, same model, and a θ's guard decides the same whichever other θ are fitted with it (a
first version keyed the draws by the θ's index, and on ConvNeXt's borderline θ the guard's choice then changed with
the list). No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from earlycurve._protocol import FinalMetricPredictor, Prediction, check_curve
from earlycurve._residual import _gain_se, _hits, _nearest_cut, _pseudo_studies
from earlycurve.errors import InvalidCurveError, NotFittedError

__all__ = ["ConfigEncoder", "HyperparameterCurvePredictor", "HYPER_THETAS"]

#: θ of the per-θ models (fractions of ``S_max``): dense early, where the rungs that save most sit.
HYPER_THETAS = (0.02, 0.04, 0.06, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 0.9)


class ConfigEncoder:
    """Hyperparameter dicts as numeric rows for the trees.

    A key whose values are all numbers (bools count as 0/1) is a numeric column, on a log scale when every value
    is positive and they span more than a factor of 10 (log-uniform learning rates, weight decays, batch sizes);
    any other key is categorical (codes of its sorted distinct values as strings). Keys constant over the training
    configurations and the ``ignore`` keys are left out; a missing key, None, a non-finite number, an unseen category
    or a non-number in a numeric column is NaN (None and non-finite values are also left out when a column's kind is
    inferred).

    Parameters
    ----------
    ignore : sequence of str, default=()
        Keys that are not hyperparameters (e.g. a run's index).

    Attributes (after :meth:`fit`)
    ------------------------------
    columns_ : list of (str, str)
        ``(key, kind)`` per column, kind ``"log"``, ``"linear"`` or ``"category"``.

    Examples
    --------
    >>> enc = ConfigEncoder().fit([{"lr": 0.001, "opt": "adam"}, {"lr": 0.1, "opt": "sgd"}])
    >>> enc.columns_
    [('lr', 'log'), ('opt', 'category')]
    >>> enc.transform([{"lr": 0.01, "opt": "sgd"}, {"opt": "rmsprop"}]).tolist()
    [[-2.0, 1.0], [nan, nan]]
    """

    def __init__(self, ignore: Sequence[str] = ()) -> None:
        self.ignore = frozenset(ignore)

    def fit(self, configs: Sequence[Mapping[str, Any]]) -> ConfigEncoder:
        """Learn the columns from training configurations (a list of dicts; may be empty).

        Parameters
        ----------
        configs : sequence of mapping of str to value
            One per previous run; keys with fewer than two distinct values are left out.

        Returns
        -------
        ConfigEncoder
            ``self``, fitted.
        """
        keys = sorted({k for c in configs for k in c} - self.ignore)
        self.columns_, self._codes = [], {}
        for key in keys:
            vals = [c[key] for c in configs if not _missing(c.get(key))]
            if len({repr(v) for v in vals}) < 2:
                continue
            if all(isinstance(v, (int, float)) for v in vals):
                x = np.asarray(vals, dtype=float)
                self.columns_.append((key, "log" if x.min() > 0 and x.max() > 10 * x.min() else "linear"))
            else:
                self._codes[key] = {s: float(i) for i, s in enumerate(sorted({str(v) for v in vals}))}
                self.columns_.append((key, "category"))
        return self

    def transform(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Rows of shape (len(configs), len(columns_)); NaN where a value is missing or unusable.

        Parameters
        ----------
        configs : sequence of mapping of str to value

        Returns
        -------
        ndarray of shape (len(configs), len(columns_))
            Numbers (log10 for wide positive ranges), category codes, NaN.

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        """
        if not hasattr(self, "columns_"):
            raise NotFittedError("ConfigEncoder is not fitted; call fit(configs) first")
        out = np.full((len(configs), len(self.columns_)), np.nan)
        for i, c in enumerate(configs):
            for j, (key, kind) in enumerate(self.columns_):
                v = c.get(key)
                if _missing(v):
                    continue
                if kind == "category":
                    out[i, j] = self._codes[key].get(str(v), np.nan)
                elif isinstance(v, (int, float)) and (kind == "linear" or v > 0):
                    out[i, j] = math.log10(v) if kind == "log" else float(v)
        return out


def _missing(value: Any) -> bool:
    """None or a non-finite number: a hyperparameter without a usable value."""
    return value is None or (isinstance(value, float) and not math.isfinite(value))


class HyperparameterCurvePredictor(FinalMetricPredictor):
    """Final loss from the hyperparameters and the partial curve, learned from previous runs (module docstring).

    Parameters
    ----------
    thetas : sequence of float, default=HYPER_THETAS
        θ of the per-θ models, in (0, 1), strictly increasing.
    ignore : sequence of str, default=()
        Configuration keys that are not hyperparameters (:class:`ConfigEncoder`).
    max_iter, learning_rate, max_depth, min_samples_leaf :
        The trees' settings (``HistGradientBoostingRegressor``); defaults 200, 0.05, 3, 10, fixed before any
        measurement on the recorded sets and not tuned.
    n_folds : int, default=5
    n_studies : int, default=200
        Pseudo-studies for the cross-validated top-k recall of the guard.
    study_size : int, default=16
    top_k : int, default=3
    n_se : float, default=1.0
        The trees are used at a θ only if their recall gain over the last value exceeds ``n_se`` standard errors
        (:class:`earlycurve.ResidualCurvePredictor`'s rule; 1 is the one-standard-error rule of Hastie et al.,
        *Elements of Statistical Learning* §7.10), ≥ 0. ResidualCurvePredictor's 1.5 would reject every θ on the 144
        ConvNeXt tuning curves of split 0, where the trees' gain is 0.22-0.29 at θ 0.04-0.16 (1.3-1.75 SE: few
        disjoint studies make the SE large); chosen there, on tuning curves only (docs/design/earlycurve.md §8.19,
        ``benchmarks/results/early_stopping_hparams.json`` ``guard``).
    random_state : int, default=0

    Attributes (after :meth:`fit`)
    ------------------------------
    use_model_ : dict of float -> bool
        Whether each θ ranks by the trees (else by the last value).
    cv_recall_ : dict of float -> (float, float)
        Cross-validated top-k recall per θ: ``(last value, trees)``.
    cv_gain_se_ : dict of float -> float
        Standard error of the trees' recall gain per θ.

    Raises
    ------
    InvalidCurveError
        Bad parameters (at construction); at fit, curves and configurations of different counts, a curve that does
        not end at its ``max_steps``, or fewer than ``n_folds`` usable curves at a θ.

    Examples
    --------
    Curves ``exp(b − a·t/20)`` whose final level is set by a hyperparameter ``a`` that their first points hide:

    >>> import numpy as np
    >>> steps = np.arange(1, 21)
    >>> ab = np.random.default_rng(0).uniform([0.5, 0.0], [3.0, 0.1], (128, 2))
    >>> pool = [(steps, np.exp(b - a * steps / 20), 20) for a, b in ab]
    >>> model = HyperparameterCurvePredictor(thetas=(0.1,), n_studies=50).fit(pool, [{"a": a} for a, _ in ab])
    >>> model.use_model_
    {0.1: True}
    >>> s, v, _ = pool[0]
    >>> bool(abs(model.predict_final(s[:2], v[:2], 20, config={"a": ab[0, 0]}).value - v[-1]) < 0.05)
    True
    """

    uses_config = True  #: the orchestrator passes each trial's configuration to predict_final

    def __init__(self, *, thetas: Sequence[float] = HYPER_THETAS, ignore: Sequence[str] = (), max_iter: int = 200,
                 learning_rate: float = 0.05, max_depth: int = 3, min_samples_leaf: int = 10, n_folds: int = 5,
                 n_studies: int = 200, study_size: int = 16, top_k: int = 3, n_se: float = 1.0,
                 random_state: int = 0) -> None:
        self.thetas = tuple(float(t) for t in thetas)
        self.ignore = tuple(ignore)
        self.max_iter, self.learning_rate = int(max_iter), float(learning_rate)
        self.max_depth, self.min_samples_leaf = int(max_depth), int(min_samples_leaf)
        self.n_folds, self.n_studies, self.study_size, self.top_k = int(n_folds), int(n_studies), int(study_size), int(top_k)
        self.n_se = float(n_se)
        self.random_state = int(random_state)
        if not self.thetas or any(not 0 < t < 1 for t in self.thetas) or any(b <= a for a, b in zip(self.thetas, self.thetas[1:])):
            raise InvalidCurveError(f"thetas {self.thetas!r} must be non-empty, in (0, 1) and strictly increasing")
        if min(self.max_iter, self.max_depth, self.min_samples_leaf) < 1 or not self.learning_rate > 0:
            raise InvalidCurveError(f"max_iter ({max_iter!r}), max_depth ({max_depth!r}) and min_samples_leaf "
                                    f"({min_samples_leaf!r}) must be >= 1 and learning_rate ({learning_rate!r}) > 0")
        if self.n_folds < 2 or self.n_studies < 1 or self.study_size < 2 or self.top_k < 1 or not self.n_se >= 0:
            raise InvalidCurveError(f"n_folds ({n_folds!r}) must be >= 2, n_studies ({n_studies!r}) >= 1, study_size "
                                    f"({study_size!r}) >= 2, top_k ({top_k!r}) >= 1, n_se ({n_se!r}) >= 0")

    @staticmethod
    def _curve_features(steps: np.ndarray, values: np.ndarray) -> list[float]:
        z = np.log(values)
        return [float(z[-1]), float(z[-1] - np.interp(0.5 * steps[-1], steps, z))]

    @staticmethod
    def _one_thread() -> Any:
        """The trees' OpenMP pool limited to one thread: the fits are small, and beside other busy processes (a test
        worker, a simulate job) OpenMP's spinning threads slowed them badly (seen in the test suite's durations; not
        a benchmarked figure). The answers do not change."""
        from threadpoolctl import threadpool_limits

        return threadpool_limits(limits=1, user_api="openmp")

    def _trees(self) -> Any:
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(max_iter=self.max_iter, learning_rate=self.learning_rate,
                                             max_depth=self.max_depth, min_samples_leaf=self.min_samples_leaf,
                                             early_stopping=False, random_state=self.random_state)

    def fit(self, curves: Sequence[tuple[np.ndarray, np.ndarray, int]], configs: Sequence[Mapping[str, Any]],
            groups: Sequence[object] | None = None) -> HyperparameterCurvePredictor:
        """Learn the residual per θ from finished curves and their configurations; decide per θ whether to use it.

        Parameters
        ----------
        curves : sequence of (steps, values, max_steps)
            Finished previous runs (loss, > 0; a curve with a loss ≤ 0 is skipped), ``steps[-1] == max_steps``.
        configs : sequence of mapping
            Each run's hyperparameters, in the order of ``curves``.
        groups : sequence of hashable, optional
            Pseudo-studies are drawn within a group (e.g. a search space). Default: one group.

        Returns
        -------
        self

        Raises
        ------
        InvalidCurveError
            See the class docstring.
        """
        with self._one_thread():
            return self._fit(curves, configs, groups)

    def _fit(self, curves: Sequence[tuple[np.ndarray, np.ndarray, int]], configs: Sequence[Mapping[str, Any]],
             groups: Sequence[object] | None) -> HyperparameterCurvePredictor:
        if len(configs) != len(curves) or (groups is not None and len(groups) != len(curves)):
            raise InvalidCurveError(f"{len(curves)} curves, {len(configs)} configurations and "
                                    f"{'no' if groups is None else len(groups)} groups: the counts must match")
        groups = [0] * len(curves) if groups is None else list(groups)
        prepared = []
        for (steps, values, max_steps), cfg, g in zip(curves, configs, groups):
            steps, values = check_curve(steps, values, max_steps)
            if steps[-1] != max_steps:
                raise InvalidCurveError(f"a training curve ends at step {steps[-1]:g}, before its max_steps {max_steps:g}")
            if np.all(values > 0):
                prepared.append((steps, values, float(max_steps), cfg, g))
        # the folds and pseudo-studies are drawn over the runs in a canonical order, so the model does not depend on
        # the order the previous runs are given in
        prepared.sort(key=lambda p: (p[1].tobytes(), p[0].tobytes(), repr(sorted(p[3].items(), key=lambda kv: str(kv[0])))))
        self.encoder_ = ConfigEncoder(self.ignore).fit([p[3] for p in prepared])
        H = self.encoder_.transform([p[3] for p in prepared])
        self.use_model_, self.cv_recall_, self.cv_gain_se_, self._models = {}, {}, {}, {}
        for theta in self.thetas:
            key = round(theta * 1_000_000)  # the draws of a θ do not depend on which other θ are fitted
            rows, level, final, gid = [], [], [], []
            for i, (steps, values, max_steps, _, g) in enumerate(prepared):
                cut = _nearest_cut(steps, theta * max_steps)
                if cut is None:
                    continue
                rows.append(self._curve_features(steps[: cut + 1], values[: cut + 1]) + H[i].tolist())
                level.append(math.log(values[cut]))
                final.append(math.log(values[-1]))
                gid.append(g)
            n = len(rows)
            if n < self.n_folds:
                raise InvalidCurveError(f"θ {theta}: {n} usable training curves, fewer than n_folds = {self.n_folds}")
            X, z_s, z_end = np.array(rows), np.array(level), np.array(final)
            y = z_end - z_s
            folds = np.random.default_rng([self.random_state, key, 0]).permutation(n) % self.n_folds
            oof = np.zeros(n)
            for k in range(self.n_folds):
                oof[folds == k] = self._trees().fit(X[folds != k], y[folds != k]).predict(X[folds == k])
            studies = _pseudo_studies(np.array(gid, dtype=object), self.study_size, self.n_studies,
                                      np.random.default_rng([self.random_state, key, 1]))
            best = [s[np.argmin(z_end[s])] for _, s in studies]
            hit_last, hit_model = _hits(z_s, studies, best, self.top_k), _hits(z_s + oof, studies, best, self.top_k)
            gain = hit_model - hit_last
            se = _gain_se(gain, gid, self.study_size)
            gs = np.array([g for g, _ in studies], dtype=object)
            no_group_loses = all(gain[gs == g].mean() >= -1e-12 for g in dict.fromkeys(gs.tolist()))
            self.cv_recall_[theta] = (float(hit_last.mean()), float(hit_model.mean()))
            self.cv_gain_se_[theta] = se
            enough = n >= 2 * self.study_size  # fewer runs than two studies: the pseudo-studies all overlap, SE says nothing
            self.use_model_[theta] = bool(enough and gain.size and gain.mean() > self.n_se * se and no_group_loses)
            if self.use_model_[theta]:
                self._models[theta] = self._trees().fit(X, y)
        return self

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

    def predict_final(self, steps: np.ndarray, values: np.ndarray, max_steps: int,
                      config: Mapping[str, Any] | None = None) -> Prediction:
        """The predicted final loss of one trial (see :class:`FinalMetricPredictor`); no interval (low = high).

        Parameters
        ----------
        steps, values, max_steps :
            The curve so far, as for every predictor.
        config : mapping, optional
            The trial's hyperparameters. Without it (or where the guard kept the last value, or the curve has a
            loss ≤ 0 or has reached ``max_steps``) the answer is the last value, ``method="last_value"``.

        Returns
        -------
        prediction : Prediction

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        """
        steps, values = check_curve(steps, values, max_steps)
        if not hasattr(self, "use_model_"):
            raise NotFittedError("HyperparameterCurvePredictor is not fitted; call fit(curves, configs) first")
        y = float(values[-1])
        t = self.theta_model(steps[-1] / max_steps)
        if config is None or not self.use_model_[t] or steps[-1] >= max_steps or not np.all(values > 0):
            return Prediction(value=y, low=y, high=y, n_stages=0, method="last_value")
        x = np.array([self._curve_features(steps, values) + self.encoder_.transform([config])[0].tolist()])
        with self._one_thread():
            residual = float(self._models[t].predict(x)[0])
        value = math.exp(min(math.log(y) + residual, 700.0))
        return Prediction(value=value, low=value, high=value, n_stages=0, method="hyperparameters")
