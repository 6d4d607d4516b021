"""Loss functions: initial score, gradients and hessians of the raw scores."""

import numpy as np
from scipy.special import expit, softmax

_EPS = 1e-16


class Objective:
    """A loss on raw scores of shape (N,) (``n_outputs == 1``) or (N, K)."""

    name = "custom"

    def __init__(self, n_outputs=1):
        self.n_outputs = n_outputs

    def init_score(self, y, sample_weight):
        return np.zeros(self.n_outputs)

    def transform(self, raw):
        return raw


class SquaredError(Objective):
    name = "regression"

    def init_score(self, y, sample_weight):
        return np.array([np.average(y, weights=sample_weight)])

    def gradients(self, raw, y):
        return raw - y, np.ones_like(raw)


class Logistic(Objective):
    name = "binary"

    def init_score(self, y, sample_weight):
        p = np.clip(np.average(y, weights=sample_weight), 1e-6, 1 - 1e-6)
        return np.array([np.log(p / (1 - p))])

    def gradients(self, raw, y):
        p = expit(raw)
        return p - y, np.maximum(p * (1 - p), _EPS)

    def transform(self, raw):
        return expit(raw)


class Softmax(Objective):
    name = "multiclass"

    def init_score(self, y, sample_weight):
        counts = np.bincount(y.astype(np.int64), weights=sample_weight, minlength=self.n_outputs)
        prior = np.clip(counts / counts.sum(), 1e-6, None)
        return np.log(prior) - np.log(prior).mean()

    def gradients(self, raw, y):
        p = softmax(raw, axis=1)
        onehot = np.zeros_like(p)
        onehot[np.arange(y.shape[0]), y.astype(np.int64)] = 1.0
        return p - onehot, np.maximum(p * (1 - p), _EPS)

    def transform(self, raw):
        return softmax(raw, axis=1)


class CallableObjective(Objective):
    """Wraps ``f(raw, y) -> (grad, hess)`` given by the user (e.g. GRBB's regularised gradient)."""

    def __init__(self, function, n_outputs=1):
        super().__init__(n_outputs)
        self.function = function

    def gradients(self, raw, y):
        grad, hess = self.function(raw, y)
        grad = np.asarray(grad, dtype=np.float64)
        hess = np.asarray(hess, dtype=np.float64)
        if grad.shape != raw.shape or hess.shape != raw.shape:
            raise ValueError(f"custom objective returned grad {grad.shape} and hess {hess.shape}; "
                             f"both must have the raw scores' shape {raw.shape}")
        return grad, hess


def make_objective(objective, n_classes=None):
    if callable(objective):
        return CallableObjective(objective, n_classes or 1)
    if objective == "regression":
        return SquaredError(1)
    if objective == "binary":
        return Logistic(1)
    if objective == "multiclass":
        if n_classes is None or n_classes < 2:
            raise ValueError("objective='multiclass' needs n_classes >= 2")
        return Softmax(int(n_classes))
    raise ValueError(f"objective must be 'regression', 'binary', 'multiclass' or a callable, "
                     f"got {objective!r}")
