"""The RevPred network and its scikit-learn-style estimator (the SpotTune paper's RevPred;
Tributary baseline: Harlap et al., USENIX ATC 2018).

Architectures (inputs are the standardised rows of :func:`revpred.features.make_inputs`):

- ``"revpred"`` [T; sizes I, D6]: a 3-layer LSTM (hidden 64) reads the 59 history records (6 features
  each) and gives its last hidden state; three fully connected layers 8 -> 64 -> 64 -> 32 (ReLU) read
  the present record (6 features, max price, delta); the two are concatenated (96) -> 32 -> 1 ->
  sigmoid.
- ``"tributary"`` [R]: the whole 60-record sequence goes through the 3-layer LSTM, each step carrying
  its 6 features plus the query's max price and delta (8 values; [I] the max price is repeated on every
  step); last hidden state -> 32 -> 1 -> sigmoid.

Training [I, D6]: Adam (lr 1e-3), batch 64, weighted binary cross-entropy with the paper's class weights
(``revpred.labels.class_weights``), a few epochs with the best epoch kept by weighted validation loss on
the validation rows (the last day of the training window when called from :mod:`revpred.predictor`).
Output: the raw o is mapped to p by the Eq 3 calibrator (:mod:`revpred.calibration`).

Determinism: weights are initialised under ``torch.random.fork_rng`` seeded from ``random_state`` and
batches are shuffled by a seeded ``torch.Generator``, so the global RNG is untouched and one seed gives
one model (on the same machine and thread count). ``torch.set_num_threads`` is respected: the estimator
changes the thread count only if ``n_threads`` is given, and restores it afterwards.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator

import numpy as np
import torch
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted
from torch import nn

from revpred.calibration import CALIBRATIONS, Calibrator, make_calibrator
from revpred.errors import RevPredError
from revpred.features import N_HISTORY, N_INPUTS, N_PRESENT, N_SEQ
from revpred.labels import class_weights

ARCHITECTURES = ("revpred", "tributary")


class RevPredNet(nn.Module):
    """LSTM over the history + FC over the present record, concatenated -> logit. Output shape (n,)."""

    def __init__(self, n_seq: int = N_SEQ, n_present: int = N_PRESENT, hidden_size: int = 64, num_layers: int = 3,
                 fc_sizes: tuple[int, ...] = (64, 64, 32), head_size: int = 32):
        super().__init__()
        self.lstm = nn.LSTM(n_seq, hidden_size, num_layers=num_layers, batch_first=True)
        layers: list[nn.Module] = []
        width = n_present
        for size in fc_sizes:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        self.fc = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(hidden_size + width, head_size), nn.ReLU(), nn.Linear(head_size, 1))

    def forward(self, hist: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(hist)
        return self.head(torch.cat([h[-1], self.fc(present)], dim=1)).squeeze(1)


class TributaryNet(nn.Module):
    """All 60 records (6 features + max price + delta per step) through the LSTM -> logit. Output shape (n,)."""

    def __init__(self, n_seq: int = N_SEQ, n_present: int = N_PRESENT, hidden_size: int = 64, num_layers: int = 3,
                 head_size: int = 32):
        super().__init__()
        self.n_seq = n_seq
        self.lstm = nn.LSTM(n_present, hidden_size, num_layers=num_layers, batch_first=True)
        self.head = nn.Sequential(nn.Linear(hidden_size, head_size), nn.ReLU(), nn.Linear(head_size, 1))

    def forward(self, hist: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        seq = torch.cat([hist, present[:, None, : self.n_seq]], dim=1)
        extra = present[:, None, self.n_seq :].expand(-1, seq.shape[1], -1)
        _, (h, _) = self.lstm(torch.cat([seq, extra], dim=2))
        return self.head(h[-1]).squeeze(1)


@contextlib.contextmanager
def _threads(n: int | None) -> Iterator[None]:
    old = torch.get_num_threads()
    if n is None or int(n) == old:
        yield
        return
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


class RevPredClassifier(ClassifierMixin, BaseEstimator):
    """RevPred (or Tributary-style) LSTM classifier: NumPy in, calibrated probabilities out.

    Parameters
    ----------
    architecture : {"revpred", "tributary"}, default="revpred"
    hidden_size : int, default=64
        LSTM hidden size [I, D6].
    num_layers : int, default=3
        LSTM layers [T].
    fc_sizes : tuple of int, default=(64, 64, 32)
        Present-record branch (revpred only) [I, D6].
    head_size : int, default=32
    lr : float, default=1e-3
        Adam learning rate.
    batch_size : int, default=64
        [I] D6 suggests 256; per-market training sets of ~1-2k rows need more Adam steps per epoch.
    epochs : int, default=8
        Passes over the training rows [I: few, to fit the CPU budget; see docs/design/revpred.md].
    class_weight : {"paper", None}, default="paper"
        ``"paper"``: ``w_pos = r_n``, ``w_neg = r_p`` (rescaled to mean 1); None: unweighted.
    calibration : {"prior_shift", "platt", "temperature", "none"}, default="prior_shift"
        Eq 3 (D5). Platt and temperature are fitted on ``eval_set`` (or the internal validation rows).
    validation_fraction : float, default=0.1
        Share of the last rows held out for epoch selection and calibration when ``fit`` gets no
        ``eval_set``. 0 disables (the last epoch is kept).
    random_state : int, RandomState or None, default=None
    n_threads : int or None, default=None
        torch threads while fitting/predicting; None leaves ``torch.get_num_threads()`` alone.
    device : str, default="cpu"

    Attributes
    ----------
    module_ : torch.nn.Module
        Trained network (float32, eval mode).
    calibrator_ : Calibrator
        Fitted Eq 3 calibrator.
    classes_ : ndarray of shape (2,)
        ``[0, 1]``; 1 = revoked within the hour.
    n_features_in_ : int
        362 (:data:`revpred.features.N_INPUTS`).
    r_p_ : float
        Positive share of the training labels.
    class_weight_ : dict
        ``{0: w_neg, 1: w_pos}`` used in the loss.
    loss_curve_ : list of float
        Weighted training loss per epoch.
    validation_scores_ : list of float
        Weighted validation loss per epoch (empty without validation rows).
    best_epoch_ : int
        1-based epoch whose weights were kept.
    n_iter_ : int
        Epochs run.
    seed_ : int
        Seed actually used.
    """

    def __init__(self, *, architecture: str = "revpred", hidden_size: int = 64, num_layers: int = 3,
                 fc_sizes: tuple[int, ...] = (64, 64, 32), head_size: int = 32, lr: float = 1e-3, batch_size: int = 64,
                 epochs: int = 8, class_weight: str | None = "paper", calibration: str = "prior_shift",
                 validation_fraction: float = 0.1, random_state: int | np.random.RandomState | None = None,
                 n_threads: int | None = None, device: str = "cpu"):
        self.architecture = architecture
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.fc_sizes = fc_sizes
        self.head_size = head_size
        self.lr = lr
        self.batch_size = batch_size
        self.epochs = epochs
        self.class_weight = class_weight
        self.calibration = calibration
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.n_threads = n_threads
        self.device = device

    # -- construction ---------------------------------------------------------------------------------
    def _check_params(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise RevPredError(f"architecture is {self.architecture!r}, but must be one of {ARCHITECTURES}")
        if self.calibration not in CALIBRATIONS:
            raise RevPredError(f"calibration is {self.calibration!r}, but must be one of {CALIBRATIONS}")
        if self.class_weight not in ("paper", None):
            raise RevPredError(f"class_weight is {self.class_weight!r}, but must be 'paper' or None")
        if int(self.epochs) < 1 or int(self.batch_size) < 1:
            raise RevPredError(f"epochs is {self.epochs} and batch_size {self.batch_size}; both must be >= 1")
        if not 0.0 <= float(self.validation_fraction) < 1.0:
            raise RevPredError(f"validation_fraction is {self.validation_fraction}, but must be in [0, 1)")

    def build_module(self) -> nn.Module:
        """Untrained network for this estimator's parameters (uses the current torch RNG).

        Returns
        -------
        torch.nn.Module
            ``RevPredNet`` or ``TributaryNet``.
        """
        if self.architecture == "tributary":
            return TributaryNet(hidden_size=self.hidden_size, num_layers=self.num_layers, head_size=self.head_size)
        return RevPredNet(hidden_size=self.hidden_size, num_layers=self.num_layers, fc_sizes=tuple(self.fc_sizes),
                          head_size=self.head_size)

    @staticmethod
    def _check_X(X: ArrayLike) -> np.ndarray:
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != N_INPUTS:
            raise RevPredError(f"RevPredClassifier expects X of shape (n, {N_INPUTS}), got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise RevPredError("RevPredClassifier input contains NaN or infinity")
        return X

    @staticmethod
    def _tensors(X: np.ndarray, device: str) -> tuple[torch.Tensor, torch.Tensor]:
        n = X.shape[0]
        hist = torch.from_numpy(np.ascontiguousarray(X[:, : N_HISTORY * N_SEQ].reshape(n, N_HISTORY, N_SEQ)))
        present = torch.from_numpy(np.ascontiguousarray(X[:, N_HISTORY * N_SEQ :]))
        return hist.to(device), present.to(device)

    # -- fit ------------------------------------------------------------------------------------------
    def fit(self, X: ArrayLike, y: ArrayLike, *, eval_set: tuple[ArrayLike, ArrayLike] | None = None,
            on_epoch: Callable[[int, float], None] | None = None) -> "RevPredClassifier":
        """Train on standardised rows (time-ordered), then fit the calibrator.

        Parameters
        ----------
        X : array-like of shape (n_samples, 362)
            Standardised inputs (:class:`revpred.features.FeatureScaler`).
        y : array-like of shape (n_samples,)
            1 = revoked within the hour.
        eval_set : (X_val, y_val), optional
            Validation rows for epoch selection and calibration; default: the last
            ``validation_fraction`` of the rows.
        on_epoch : callable(epoch, train_loss), optional
            Progress callback (the CLI's tqdm bar).

        Returns
        -------
        self

        Raises
        ------
        RevPredError
            If a parameter is invalid, ``X`` is not of shape (n, 362) or not finite, ``y`` is not 0/1 of shape (n,),
            or there are no rows.
        """
        self._check_params()
        X = self._check_X(X)
        y = np.asarray(y)
        if y.shape != (X.shape[0],) or not np.isin(y, (0, 1)).all():
            raise RevPredError(f"labels must be 0/1 of shape ({X.shape[0]},), got shape {y.shape}")
        if X.shape[0] == 0:
            raise RevPredError("no training rows")
        if eval_set is not None:
            X_val, y_val = self._check_X(eval_set[0]), np.asarray(eval_set[1])
        elif self.validation_fraction > 0 and X.shape[0] >= 20:
            cut = X.shape[0] - max(1, int(round(self.validation_fraction * X.shape[0])))
            X, X_val, y, y_val = X[:cut], X[cut:], y[:cut], y[cut:]
        else:
            X_val, y_val = X[:0], y[:0]

        seed = int(check_random_state(self.random_state).randint(0, 2**31 - 1))
        self.seed_ = seed
        self.r_p_ = float(np.mean(y == 1))
        w_neg, w_pos = class_weights(y) if self.class_weight == "paper" else (1.0, 1.0)
        self.class_weight_ = {0: w_neg, 1: w_pos}
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = N_INPUTS

        with _threads(self.n_threads):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                module = self.build_module().to(self.device)
            gen = torch.Generator().manual_seed(seed)
            hist, present = self._tensors(X, self.device)
            yt = torch.from_numpy(y.astype(np.float32)).to(self.device)
            wt = torch.where(yt > 0.5, torch.tensor(w_pos), torch.tensor(w_neg)).float()
            val = self._tensors(X_val, self.device) if X_val.shape[0] else None
            yv = torch.from_numpy(y_val.astype(np.float32)).to(self.device)
            wv = torch.where(yv > 0.5, torch.tensor(w_pos), torch.tensor(w_neg)).float()
            opt = torch.optim.Adam(module.parameters(), lr=self.lr)
            bce = nn.BCEWithLogitsLoss(reduction="none")
            self.loss_curve_, self.validation_scores_ = [], []
            best_state, best_loss, self.best_epoch_ = None, np.inf, int(self.epochs)
            n = X.shape[0]
            for epoch in range(1, int(self.epochs) + 1):
                module.train()
                order = torch.randperm(n, generator=gen)
                total = 0.0
                for start in range(0, n, int(self.batch_size)):
                    idx = order[start : start + int(self.batch_size)]
                    logits = module(hist[idx], present[idx])
                    loss = (bce(logits, yt[idx]) * wt[idx]).sum() / wt[idx].sum()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    total += float(loss.detach()) * idx.numel()
                self.loss_curve_.append(total / n)
                if val is not None:
                    module.eval()
                    with torch.inference_mode():
                        lv = bce(self._logits(module, *val), yv)
                        v = float((lv * wv).sum() / wv.sum())
                    self.validation_scores_.append(v)
                    if v < best_loss:
                        best_loss, self.best_epoch_ = v, epoch
                        best_state = copy.deepcopy(module.state_dict())
                if on_epoch is not None:
                    on_epoch(epoch, self.loss_curve_[-1])
            if best_state is not None:
                module.load_state_dict(best_state)
            module.eval()
            self.module_ = module
            self.n_iter_ = int(self.epochs)
            o_val = self._raw(X_val) if X_val.shape[0] else np.empty(0)
        self.calibrator_ = make_calibrator(self.calibration).fit(o_val, y_val, self.r_p_)
        return self

    # -- predict --------------------------------------------------------------------------------------
    @staticmethod
    def _logits(module: nn.Module, hist: torch.Tensor, present: torch.Tensor, chunk: int = 8192) -> torch.Tensor:
        if hist.shape[0] <= chunk:
            return module(hist, present)
        return torch.cat([module(hist[i : i + chunk], present[i : i + chunk]) for i in range(0, hist.shape[0], chunk)])

    def _raw(self, X: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            z = self._logits(self.module_, *self._tensors(X, self.device))
            return torch.sigmoid(z.double()).cpu().numpy()

    def predict_raw(self, X: ArrayLike) -> np.ndarray:
        """Raw network output o (class-weighted, before Eq 3).

        Parameters
        ----------
        X : array-like of shape (n_samples, 362)

        Returns
        -------
        o : ndarray of shape (n_samples,), in (0, 1)
        """
        if not hasattr(self, "module_"):  # cheaper than check_is_fitted on the inference hot path
            check_is_fitted(self, "module_")
        X = self._check_X(X)
        with _threads(self.n_threads):
            return self._raw(X)

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Calibrated probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, 362)
            Standardised inputs.

        Returns
        -------
        proba : ndarray of shape (n_samples, 2)
            Column 1 is P(price > b within (t, t + 3600 s]) after Eq 3.
        """
        o = self.predict_raw(X)  # raises NotFittedError first
        p = self.calibrator_.transform(o)
        return np.column_stack([1.0 - p, p])

    def predict(self, X: ArrayLike) -> np.ndarray:
        """1 where the calibrated probability is >= 0.5 [I: the paper's threshold 0.5]. Shape (n_samples,).

        Parameters
        ----------
        X : array of shape (n_samples, 362)
            Standardised rows of :func:`revpred.features.make_inputs`.

        Returns
        -------
        ndarray of int64, shape (n_samples,)
        """
        return (self.predict_proba(X)[:, 1] >= 0.5).astype(np.int64)

    # -- state for revpred.store ----------------------------------------------------------------------
    def export_state(self) -> tuple[dict, dict[str, torch.Tensor]]:
        """(JSON-able metadata, torch state_dict) of the fitted estimator.

        Returns
        -------
        meta : dict
            Parameters, calibration, class weights, loss curve and validation scores.
        state_dict : dict of str -> torch.Tensor
            The network's weights.
        """
        check_is_fitted(self, "module_")
        params = self.get_params()
        params["random_state"] = self.seed_
        params["fc_sizes"] = list(self.fc_sizes)
        meta = {
            "params": params,
            "calibration": self.calibrator_.to_dict(),
            "r_p": self.r_p_,
            "class_weight": [self.class_weight_[0], self.class_weight_[1]],
            "loss_curve": self.loss_curve_,
            "validation_scores": self.validation_scores_,
            "best_epoch": self.best_epoch_,
            "n_iter": self.n_iter_,
        }
        return meta, self.module_.state_dict()

    @classmethod
    def from_state(cls, meta: dict, state_dict: dict[str, torch.Tensor]) -> "RevPredClassifier":
        """Rebuild a fitted estimator from :meth:`export_state` output; refuses mismatched weights.

        Parameters
        ----------
        meta : dict
        state_dict : dict of str -> torch.Tensor
            As :meth:`export_state` returns them.

        Returns
        -------
        RevPredClassifier
            Fitted, in eval mode.

        Raises
        ------
        RevPredError
            If the parameters do not fit this version or the weights do not match the architecture.
        """
        from revpred.calibration import calibrator_from_dict

        params = dict(meta["params"])
        params["fc_sizes"] = tuple(params.get("fc_sizes", (64, 64, 32)))
        try:
            est = cls(**params)
        except TypeError as exc:
            raise RevPredError(f"stored model parameters do not fit this version: {exc}") from None
        est._check_params()
        module = est.build_module()
        try:
            module.load_state_dict(state_dict, strict=True)
        except RuntimeError as exc:
            raise RevPredError(f"stored weights do not match the {est.architecture} architecture: "
                               f"{str(exc).splitlines()[0]}") from None
        module.eval()
        est.module_ = module
        est.calibrator_: Calibrator = calibrator_from_dict(meta["calibration"])
        est.r_p_ = float(meta["r_p"])
        est.class_weight_ = {0: float(meta["class_weight"][0]), 1: float(meta["class_weight"][1])}
        est.classes_ = np.array([0, 1])
        est.n_features_in_ = N_INPUTS
        est.loss_curve_ = list(meta.get("loss_curve", []))
        est.validation_scores_ = list(meta.get("validation_scores", []))
        est.best_epoch_ = int(meta.get("best_epoch", est.epochs))
        est.n_iter_ = int(meta.get("n_iter", est.epochs))
        est.seed_ = int(params["random_state"])
        return est
