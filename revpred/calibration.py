"""Eq 3: turn the class-weighted network output o into a revocation probability p (the paper's Eq 3; decision D5).

The paper's Eq 3 is lost. With class weights ``w_pos = r_n`` and ``w_neg = r_p`` the minimiser of the
weighted cross-entropy is ``o = r_n p / (r_n p + r_p (1 - p))``; inverting it gives the default

    p = r_p o / (r_p o + r_n (1 - o))        i.e.   logit p = logit o + log(r_p / r_n)      [R, D5]

where r_p, r_n are the positive and negative shares of the training labels. Calibrators are pluggable
(``make_calibrator``): ``prior_shift`` (default), ``platt`` (logistic regression on logit o, fitted on the
validation day), ``temperature`` (``logit p = logit o / T + log(r_p / r_n)`` with T fitted on the
validation day; T = 1 is the prior shift) and ``none`` (p = o).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize_scalar

from revpred.errors import RevPredError

_EPS = 1e-7
CALIBRATIONS = ("prior_shift", "platt", "temperature", "none")


def _logit(o: np.ndarray) -> np.ndarray:
    o = np.clip(o, _EPS, 1.0 - _EPS)
    return np.log(o) - np.log1p(-o)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _prior_shift(r_p: float) -> float:
    """``log(r_p / r_n)``, the logit shift of Eq 3; 0 for one-class training (no weighting was applied)."""
    return 0.0 if r_p in (0.0, 1.0) else math.log(r_p / (1.0 - r_p))


def _log_loss(y: np.ndarray, z: np.ndarray) -> float:
    # mean binary cross-entropy from logits, numerically stable
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


class Calibrator:
    """Base: ``fit(o, y, r_p) -> self``, ``transform(o) -> p``; JSON round trip via ``to_dict``/``calibrator_from_dict``.

    ``o`` is the raw network output in (0, 1), shape (n,); ``y`` the validation labels (may be empty for
    calibrators that need none); ``r_p`` the positive share of the training labels.
    """

    kind = "none"

    def fit(self, o: ArrayLike, y: ArrayLike, r_p: float) -> "Calibrator":
        """Learn the mapping from raw outputs ``o`` (n,), labels ``y`` (n,) and the training share ``r_p``; returns self."""
        return self

    def transform(self, o: ArrayLike) -> np.ndarray:
        """Revocation probabilities p in [0, 1], shape (n,), from raw outputs ``o`` of shape (n,)."""
        return np.asarray(o, dtype=np.float64)

    def to_dict(self) -> dict:
        """JSON-able state; :func:`calibrator_from_dict` restores it."""
        return {"kind": self.kind}


class PriorShift(Calibrator):
    """Undo the class weighting (Eq 3 as reconstructed, D5). Attribute ``r_p_``."""

    kind = "prior_shift"

    def fit(self, o: ArrayLike, y: ArrayLike, r_p: float) -> "PriorShift":
        if not 0.0 <= r_p <= 1.0:
            raise RevPredError(f"positive share r_p is {r_p}, but must be in [0, 1]")
        self.r_p_ = float(r_p)
        return self

    def transform(self, o: ArrayLike) -> np.ndarray:
        o = np.asarray(o, dtype=np.float64)
        if self.r_p_ in (0.0, 1.0):  # one-class training: no weighting was applied
            return o
        return _sigmoid(_logit(o) + _prior_shift(self.r_p_))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "r_p": self.r_p_}


class Platt(Calibrator):
    """``p = sigmoid(a logit o + c)`` fitted by maximum likelihood on validation labels. Attributes ``a_``, ``c_``.

    Falls back to the prior shift (``a = 1``, ``c = log(r_p / r_n)``) when the validation labels hold one
    class only.
    """

    kind = "platt"

    def fit(self, o: ArrayLike, y: ArrayLike, r_p: float) -> "Platt":
        z = _logit(np.asarray(o, dtype=np.float64))
        y = np.asarray(y, dtype=np.float64)
        shift = math.log(max(r_p, _EPS) / max(1.0 - r_p, _EPS))
        self.a_, self.c_ = 1.0, shift
        if y.size and 0.0 < y.mean() < 1.0:
            from sklearn.linear_model import LogisticRegression

            lr = LogisticRegression(C=1e4, max_iter=1000).fit(z[:, None], y.astype(int))
            self.a_, self.c_ = float(lr.coef_[0, 0]), float(lr.intercept_[0])
        return self

    def transform(self, o: ArrayLike) -> np.ndarray:
        return _sigmoid(self.a_ * _logit(np.asarray(o, dtype=np.float64)) + self.c_)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "a": self.a_, "c": self.c_}


class Temperature(Calibrator):
    """``logit p = logit o / T + log(r_p / r_n)``; T in [0.05, 20] minimises validation log loss. Attributes ``T_``, ``r_p_``."""

    kind = "temperature"

    def fit(self, o: ArrayLike, y: ArrayLike, r_p: float) -> "Temperature":
        self.r_p_ = float(r_p)
        self.T_ = 1.0
        z = _logit(np.asarray(o, dtype=np.float64))
        y = np.asarray(y, dtype=np.float64)
        shift = _prior_shift(self.r_p_)
        if y.size and 0.0 < y.mean() < 1.0:
            res = minimize_scalar(lambda lt: _log_loss(y, z / math.exp(lt) + shift), bounds=(math.log(0.05), math.log(20.0)),
                                  method="bounded")
            self.T_ = float(math.exp(res.x))
        return self

    def transform(self, o: ArrayLike) -> np.ndarray:
        return _sigmoid(_logit(np.asarray(o, dtype=np.float64)) / self.T_ + _prior_shift(self.r_p_))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "T": self.T_, "r_p": self.r_p_}


def make_calibrator(kind: str) -> Calibrator:
    """New unfitted calibrator of ``kind`` (one of ``CALIBRATIONS``)."""
    table = {"prior_shift": PriorShift, "platt": Platt, "temperature": Temperature, "none": Calibrator}
    try:
        return table[kind]()
    except KeyError:
        raise RevPredError(f"calibration {kind!r} is unknown; use one of {CALIBRATIONS}") from None


def calibrator_from_dict(d: dict) -> Calibrator:
    """Fitted calibrator from :meth:`Calibrator.to_dict` output."""
    cal = make_calibrator(str(d.get("kind")))
    try:
        if isinstance(cal, PriorShift):
            cal.r_p_ = float(d["r_p"])
        elif isinstance(cal, Platt):
            cal.a_, cal.c_ = float(d["a"]), float(d["c"])
        elif isinstance(cal, Temperature):
            cal.T_, cal.r_p_ = float(d["T"]), float(d["r_p"])
    except KeyError as exc:
        raise RevPredError(f"stored calibration {d.get('kind')!r} lacks {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise RevPredError(f"stored calibration {d.get('kind')!r} has a non-numeric field ({exc})") from None
    return cal
