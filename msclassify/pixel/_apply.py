"""Applying a pixel classifier frame by frame: one frame's labels, probabilities and
uncertainty from one pass, and the dtype of its labels.

The batch engine (`msclassify.pixel.batch`) and the napari widget predict frames
with `predict_frame`; `PixelClassifier.uncertainty` uses `most_probable`.
"""

from typing import NamedTuple

import numpy as np
from numba import njit, prange

__all__ = ["FramePrediction", "label_dtype", "most_probable", "predict_frame"]


class FramePrediction(NamedTuple):
    """What `predict_frame` returns for one frame.

    Attributes
    ----------
    labels : ndarray, shape (H, W)
        The most probable class of every pixel (values of ``classes_``).
    probabilities : ndarray of float32, shape (H, W, n_classes), or None
        Class probabilities, when asked for.
    uncertainty : ndarray of float32, shape (H, W), or None
        ``1 - max`` of the probabilities, when they were asked for.
    """

    labels: np.ndarray
    probabilities: np.ndarray | None
    uncertainty: np.ndarray | None


def predict_frame(model, frame, probabilities=False, dtype=None):
    """Labels of one frame; with ``probabilities`` also its probabilities and uncertainty.

    With ``probabilities`` the features are computed and the trees walked once:
    labels and uncertainty come from the same probabilities (`most_probable`), so
    the outputs always agree.

    Parameters
    ----------
    model : PixelClassifier
        Anything with ``predict(frame)``; ``predict_proba`` and ``classes_`` too
        when ``probabilities`` is True.
    frame : ndarray
        One frame like the training frames.
    probabilities : bool, optional
    dtype : numpy dtype, optional
        Dtype of the returned labels (default: that of the model's classes).

    Returns
    -------
    FramePrediction

    Examples
    --------
    >>> class Threshold:                     # any object with predict_proba and classes_
    ...     classes_ = np.array([1, 2])
    ...     def predict_proba(self, frame):
    ...         p = np.where(frame > 1, 0.875, 0.25).astype(np.float32)
    ...         return np.stack([1 - p, p], axis=-1)
    >>> result = predict_frame(Threshold(), np.array([[0, 5]]), probabilities=True)
    >>> result.labels.tolist(), result.uncertainty.tolist()
    ([[1, 2]], [[0.25, 0.125]])
    """
    if not probabilities:
        labels = np.asarray(model.predict(frame))
        return FramePrediction(labels if dtype is None else labels.astype(dtype, copy=False),
                               None, None)
    proba = np.asarray(model.predict_proba(frame), dtype=np.float32)
    labels, uncertainty = _most_probable(proba, np.asarray(model.classes_))
    return FramePrediction(labels if dtype is None else labels.astype(dtype, copy=False), proba,
                           uncertainty)


def most_probable(probabilities):
    """Index of the most probable class and ``1 - max`` of ``(H, W, K)`` probabilities.

    Ties go to the first class, as with `numpy.argmax`; a NaN probability makes the
    uncertainty NaN, as `numpy.maximum` would. One pass over the pixels (a Numba kernel):
    numpy's reductions along a short last axis take several times longer on a 1024² frame.

    Returns
    -------
    best : ndarray of intp, shape (H, W)
    uncertainty : ndarray, shape (H, W), of the probabilities' dtype

    Examples
    --------
    >>> p = np.array([[[0.2, 0.8], [0.5, 0.5]]], dtype=np.float32)
    >>> best, uncertainty = most_probable(p)
    >>> best.tolist(), uncertainty.tolist()
    ([[1, 0]], [[0.19999998807907104, 0.5]])
    """
    return _most_probable(probabilities, np.arange(probabilities.shape[-1], dtype=np.intp))


def _most_probable(probabilities, classes):
    """``classes[index of the most probable class]`` and ``1 - max`` of ``(..., K)``
    probabilities (`most_probable`), from one pass."""
    probabilities = np.asarray(probabilities)
    if probabilities.dtype not in (np.float32, np.float64):
        probabilities = probabilities.astype(np.float64)
    flat = np.ascontiguousarray(probabilities).reshape(-1, probabilities.shape[-1])
    labels = np.empty(flat.shape[0], dtype=classes.dtype)
    uncertainty = np.empty(flat.shape[0], dtype=flat.dtype)
    _most_probable_pixels(flat, np.ascontiguousarray(classes), np.ones(1, flat.dtype), labels,
                          uncertainty)
    shape = probabilities.shape[:-1]
    return labels.reshape(shape), uncertainty.reshape(shape)


@njit(cache=True, parallel=True, nogil=True)
def _most_probable_pixels(probabilities, classes, one, labels, uncertainty):
    """Per pixel (row of ``probabilities``): the first class of the largest probability,
    and ``one - it`` in the probabilities' precision (NaN once a NaN is met)."""
    for i in prange(probabilities.shape[0]):
        top = probabilities[i, 0]
        best = 0
        for k in range(1, probabilities.shape[1]):
            value = probabilities[i, k]
            if value > top:
                best = k
                top = value
            elif np.isnan(value):
                top = value
        labels[i] = classes[best]
        uncertainty[i] = one[0] - top


def label_dtype(classes):
    """Smallest unsigned dtype (at least uint8) that holds every class value.

    Examples
    --------
    >>> label_dtype([1, 2]).name, label_dtype([1, 300]).name
    ('uint8', 'uint16')
    """
    classes = np.asarray(classes)
    return np.promote_types(np.uint8, np.min_scalar_type(int(classes.max(initial=0))))
