"""Class-balanced loss weights for scribbles: how much a user drew of a class is not how common it is.

A user with a thin brush on a thin structure (membranes, larvae, legs) labels
far fewer pixels of it than of the broad regions around it; about 7 interior
pixels for every membrane pixel in the strokes the issue measured. With every
labelled pixel weighing 1 the model learns that ratio as a prior and shrinks the
thin class. `class_balanced_weights` gives every class the same total weight
(and keeps the total), so the prior the model starts from says nothing about how
much of each class was drawn.

`PixelClassifier` with ``class_weight="sqrt"`` (a partial balance, ``power=0.5``)
or ``"balanced"`` (both opt-in) uses them for the distillation teacher and for
the scribbled rows of the model it trains;
``benchmarks/bench_accuracy.py`` measures the effect per scribble style
(docs/scribbles.md).
"""

import numpy as np

__all__ = ["class_balanced_weights"]


def class_balanced_weights(y, sample_weight, n_classes, power=1.0):
    """``sample_weight`` rescaled per class so that every class present weighs the same.

    Rows with zero weight (cost samples) stay zero; the sum of the weights is kept.
    With ``power`` p < 1 a class's rows are scaled by the balancing factor to the
    power p, a partial balance: p = 0.5 (``class_weight="sqrt"``) makes a class's
    total weight proportional to the square root of its labelled weight (7:1
    scribbles weigh 2.6:1), p = 0 leaves the weights as they are.

    Parameters
    ----------
    y : ndarray
        Class index of every row (0 .. n_classes - 1).
    sample_weight : ndarray of float
    n_classes : int
    power : float, optional
        1 (default): full balance; 0.5: square root.

    Returns
    -------
    ndarray of float64

    Examples
    --------
    >>> import numpy as np
    >>> w = class_balanced_weights(np.array([0, 0, 0, 1, 1]), np.array([1., 1, 1, 1, 0]), 2)
    >>> w.tolist()
    [0.6666666666666666, 0.6666666666666666, 0.6666666666666666, 2.0, 0.0]
    >>> w = class_balanced_weights(np.array([0, 0, 0, 0, 1]), np.ones(5), 2, power=0.5)
    >>> float(round(w[:4].sum() / w[4], 6))          # 4:1 drawn, 2:1 in weight
    2.0
    """
    y = np.asarray(y).astype(np.int64)
    sample_weight = np.asarray(sample_weight, dtype=np.float64)
    per_class = np.bincount(y, weights=sample_weight, minlength=n_classes)
    present = per_class > 0
    scale = np.zeros(n_classes)
    scale[present] = (sample_weight.sum() / (present.sum() * per_class[present])) ** power
    weights = sample_weight * scale[y]
    total = weights.sum()
    return weights * (sample_weight.sum() / total) if total > 0 else weights
