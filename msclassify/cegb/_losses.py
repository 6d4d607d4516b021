"""Loss functions: initial score, gradients and hessians of the raw scores; their link functions."""

import numpy as np
from numba import njit, prange
from scipy.special import expit, softmax

MIN_HESSIAN = 1e-16  # floor of the built-in losses' hessians


def output_probabilities(raw):
    """Probability of each output of a classification model from its raw scores.

    The logistic sigmoid for a one-output (binary) model, whose raw scores have
    shape ``(N,)`` (or a last axis of length 1); the softmax over the last axis
    for a K-output (multiclass) model, shape ``(..., K)``.

    Examples
    --------
    >>> output_probabilities(np.array([0.0, np.log(3)])).tolist()
    [0.5, 0.75]
    >>> output_probabilities(np.zeros((1, 4))).tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """
    raw = np.asarray(raw)
    if raw.ndim == 1 or raw.shape[-1] == 1:
        return expit(raw)
    return softmax(raw, axis=-1)


def class_probabilities(raw, dtype=None):
    """Class probabilities, classes on the last axis, from raw scores (see `output_probabilities`).

    A binary model's probability ``p`` of its second class becomes ``[1 - p, p]``.
    With ``dtype`` the probabilities are computed in that dtype from there on.

    Examples
    --------
    >>> class_probabilities(np.array([0.0, np.log(3)])).tolist()
    [[0.5, 0.5], [0.25, 0.75]]
    >>> class_probabilities(np.zeros((2, 2, 1)), dtype=np.float32).shape
    (2, 2, 2)
    """
    p = output_probabilities(raw)
    if p.ndim > 1 and p.shape[-1] > 1:
        return p if dtype is None else p.astype(dtype)
    p = p if p.ndim == 1 else p[..., 0]
    if dtype is not None:
        p = p.astype(dtype)
    return np.stack([1 - p, p], axis=-1)


def most_probable_class(raw):
    """Index of the most probable class of each row from raw scores (first on ties).

    A one-output (binary) model's raw scores, shape ``(N,)`` or a last axis of
    length 1, give class 1 where the score is positive; a K-output model's give
    the argmax over the last axis.

    Examples
    --------
    >>> most_probable_class(np.array([-1.0, 0.0, 2.0])).tolist()
    [0, 0, 1]
    >>> most_probable_class(np.array([[0.0, 3.0, 3.0]])).tolist()
    [1]
    """
    raw = np.asarray(raw)
    if raw.ndim == 1 or raw.shape[-1] == 1:
        return ((raw if raw.ndim == 1 else raw[..., 0]) > 0).astype(np.intp)
    return np.argmax(raw, axis=-1)


class Objective:
    """A loss on raw scores of shape (N,) (``n_outputs == 1``) or (N, K).

    ``gradients(raw, y, weight)`` gives the gradient and hessian of every row's
    loss times its weight, in arrays of the raw scores' shape.
    """

    name = "custom"

    def __init__(self, n_outputs=1):
        self.n_outputs = n_outputs

    def init_score(self, y, sample_weight):
        return np.zeros(self.n_outputs)

    def gradients(self, raw, y, weight):
        grad, hess = self.unweighted_gradients(raw, y)
        w = weight if raw.ndim == 1 else weight[:, None]
        return grad * w, hess * w


class SquaredError(Objective):
    name = "regression"

    def init_score(self, y, sample_weight):
        return np.array([np.average(y, weights=sample_weight)])

    def gradients(self, raw, y, weight):
        grad, hess = np.empty_like(raw), np.empty_like(raw)
        _squared_error_gradients(raw, y, weight, grad, hess)
        return grad, hess


class Logistic(Objective):
    name = "binary"

    def init_score(self, y, sample_weight):
        p = np.clip(np.average(y, weights=sample_weight), 1e-6, 1 - 1e-6)
        return np.array([np.log(p / (1 - p))])

    def gradients(self, raw, y, weight):
        grad, hess = np.empty_like(raw), np.empty_like(raw)
        _logistic_gradients(raw, y, weight, grad, hess)
        return grad, hess


class Softmax(Objective):
    name = "multiclass"

    def init_score(self, y, sample_weight):
        counts = np.bincount(y.astype(np.int64), weights=sample_weight, minlength=self.n_outputs)
        prior = np.clip(counts / counts.sum(), 1e-6, None)
        return np.log(prior) - np.log(prior).mean()

    def gradients(self, raw, y, weight):
        """Weighted gradients and hessians, shape (N, K), each class's column contiguous
        (transposed views of (K, N) arrays: a per-class tree reads its column in place).

        The exponentials and their row sums come from NumPy (as in SciPy's ``softmax``);
        the rows' maxima (`_row_max`: NumPy's ``max(axis=1)`` over 4 classes took 3.9 ms
        for 48,440 rows, the kernel 0.45 ms) and the rest, row by row in parallel, are the
        same arithmetic, so the values are bit
        for bit those of ``softmax`` and NumPy's operations (on the 4-class photo of
        `bench_training.py` the NumPy version's passes and per-class copies took 7 % of a
        fit, on one thread).
        """
        largest = np.empty((raw.shape[0], 1))
        _row_max(raw, largest)
        shifted = np.exp(raw - largest)
        grad = np.empty((raw.shape[1], raw.shape[0]))
        hess = np.empty_like(grad)
        _softmax_gradients(shifted, shifted.sum(axis=1), y, weight, grad, hess)
        return grad.T, hess.T


class CallableObjective(Objective):
    """Wraps ``f(raw, y) -> (grad, hess)`` given by the user (e.g. GRBB's regularised gradient)."""

    def __init__(self, function, n_outputs=1):
        super().__init__(n_outputs)
        self.function = function

    def unweighted_gradients(self, raw, y):
        grad, hess = self.function(raw, y)
        grad = np.asarray(grad, dtype=np.float64)
        hess = np.asarray(hess, dtype=np.float64)
        if grad.shape != raw.shape or hess.shape != raw.shape:
            raise ValueError(f"custom objective returned grad {grad.shape} and hess {hess.shape}; "
                             f"both must have the raw scores' shape {raw.shape}")
        return grad, hess


# The one-output losses' gradients, row by row in parallel, weights applied: computed with
# NumPy they took 5 ms per tree on 200k rows, an eighth of the time to grow the tree.
@njit(parallel=True, cache=True, nogil=True)
def _squared_error_gradients(raw, y, weight, grad, hess):
    for i in prange(raw.shape[0]):
        grad[i] = (raw[i] - y[i]) * weight[i]
        hess[i] = weight[i]


@njit(parallel=True, cache=True, nogil=True)
def _logistic_gradients(raw, y, weight, grad, hess):
    """The logistic sigmoid is ``1 / (1 + exp(-x))``, bit for bit SciPy's ``expit``."""
    for i in prange(raw.shape[0]):
        p = 1.0 / (1.0 + np.exp(-raw[i]))
        grad[i] = (p - y[i]) * weight[i]
        hess[i] = max(p * (1.0 - p), MIN_HESSIAN) * weight[i]


@njit(parallel=True, cache=True, nogil=True)
def _row_max(raw, out):
    """``out[i, 0] = raw[i].max()`` (scores are never NaN)."""
    for i in prange(raw.shape[0]):
        best = raw[i, 0]
        for k in range(1, raw.shape[1]):
            best = max(best, raw[i, k])
        out[i, 0] = best


@njit(parallel=True, cache=True, nogil=True)
def _softmax_gradients(shifted, total, y, weight, grad, hess):
    """Softmax gradients from ``shifted = exp(raw - row max)`` and its row sums ``total``:
    ``grad[k, i] = (p - onehot) * w`` and ``hess[k, i] = max(p * (1 - p), MIN_HESSIAN) * w``
    with ``p = shifted[i, k] / total[i]``."""
    n_rows, n_classes = shifted.shape
    for i in prange(n_rows):
        label = int(y[i])
        w = weight[i]
        for k in range(n_classes):
            p = shifted[i, k] / total[i]
            grad[k, i] = (p - (1.0 if k == label else 0.0)) * w
            hess[k, i] = max(p * (1.0 - p), MIN_HESSIAN) * w


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
