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

Balancing every class is wrong when the strokes *over*-represent a rare class
(a few strokes on small flies and a broad brush on the floor: flies are 6% of
the scribbles and 1% of the frame), and equal weights then grow the flies. The
scribbles alone cannot tell the two cases apart; the distillation teacher,
trained on them first, can: `predicted_shares` is the share of each class in
its class map of pixels drawn uniformly from the frames (the cost samples).
``class_weight="auto"`` (the default, `under_scribbled_weights`) raises to an
equal share only the classes scribbled less than they occur by that estimate;
a class scribbled more than it occurs keeps its weight. The teacher learnt the
scribbles' ratio as a prior, so its estimate leans towards the scribbled shares:
a class it still finds more often than it was scribbled occurs more often still.

In a volume the user scribbles a few slices, and how much of each class those
slices hold can differ from the whole volume (nuclei cut near their poles cover
less of a slice than through their middles). The scribbled share is a sample of
the slices drawn on, so `scribbled_plane_rows` compares it with the teacher's
share on those slices only (docs/volumes.md, "3D nuclei"); a 2D frame is
scribbled or skipped, so every 2D cost sample counts.
"""

import numpy as np

from ..cegb import most_probable_class

__all__ = ["class_balanced_weights", "predicted_shares", "scribbled_plane_rows",
           "under_scribbled_weights"]


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
    y, sample_weight, per_class = _class_totals(y, sample_weight, n_classes)
    present = per_class > 0
    scale = np.zeros(n_classes)
    scale[present] = (sample_weight.sum() / (present.sum() * per_class[present])) ** power
    weights = sample_weight * scale[y]
    total = weights.sum()
    return weights * (sample_weight.sum() / total) if total > 0 else weights



def predicted_shares(model, X, weight, n_classes):
    """Share of each class among ``model``'s most probable classes of the rows ``X``.

    Parameters
    ----------
    model : msclassify.cegb.Booster
    X : ndarray of float32, shape (n, k)
        Rows of pixels drawn uniformly from the frames, in the columns ``model`` uses.
    weight : ndarray of float
        Pixels each row stands for (frames of different sizes).
    n_classes : int

    Returns
    -------
    ndarray of float64, shape (n_classes,)
        Sums to 1 (zeros if ``weight`` sums to 0).

    Examples
    --------
    >>> from msclassify.cegb import train
    >>> X = np.linspace(0, 1, 100)[:, None]
    >>> step = train(X, (X[:, 0] > 0.7).astype(float), "binary", {"n_estimators": 5})
    >>> predicted_shares(step, X, np.ones(100), 2).round(2).tolist()
    [0.7, 0.3]
    """
    classes = most_probable_class(model.predict_raw(np.ascontiguousarray(X, dtype=np.float32)))
    totals = np.bincount(classes, weights=weight, minlength=n_classes)[:n_classes]
    return totals / totals.sum() if totals.sum() > 0 else totals


def scribbled_plane_rows(labels, pixels):
    """Which training rows lie on a plane with scribbles: a 2D frame, or a volume's z-slice.

    Parameters
    ----------
    labels : sequence of ndarray
        Per training frame, its ``(H, W)`` or ``(Z, Y, X)`` labels (0 = unlabelled).
    pixels : sequence of tuple of ndarray
        Per frame, the coordinates of its rows (``ys, xs`` or ``zs, ys, xs``), in the
        order of the rows (`msclassify.pixel.training_set` with ``return_pixels``).

    Returns
    -------
    ndarray of bool
        One value per row, frames in order: True for every row of a 2D frame, and for
        the rows of a volume whose slice holds a labelled voxel.

    Examples
    --------
    >>> labels = np.zeros((3, 2, 2), np.uint8); labels[1, 0, 0] = 1
    >>> rows = (np.array([1, 0, 1, 2]), np.array([0, 1, 1, 0]), np.array([0, 0, 1, 1]))
    >>> scribbled_plane_rows([labels, np.ones((2, 2))], [rows, (np.zeros(2), np.ones(2))])
    array([ True, False,  True, False,  True,  True])
    """
    keep = []
    for lab, where in zip(labels, pixels):
        if lab.ndim == 3:
            keep.append(np.isin(where[0], np.flatnonzero(lab.any(axis=(1, 2)))))
        else:
            keep.append(np.ones(where[0].size, bool))
    return np.concatenate(keep)


def under_scribbled_weights(y, sample_weight, n_classes, shares):
    """``sample_weight`` with the classes scribbled less than they occur raised to an equal share.

    A class whose share of the weight (the scribbled share) is below both
    ``shares`` (how often it occurs, e.g. `predicted_shares`) and ``1 / K`` (K:
    the classes with scribbles) gets ``1 / K`` of the total; the other classes
    share the rest in the ratio they were scribbled. Every other class keeps
    its scribbled share: a rare class drawn more than it occurs is not weighed
    up (equal weights would grow it), nor one drawn less than it occurs but
    more than its equal share. With two classes the result is
    `class_balanced_weights` when the minority class of the scribbles is
    under-scribbled, ``sample_weight`` otherwise. The total is kept; zero rows
    stay zero.

    Parameters
    ----------
    y, sample_weight, n_classes
        As in `class_balanced_weights`.
    shares : ndarray of float, shape (n_classes,)
        Estimated share of each class in the frames.

    Returns
    -------
    ndarray of float64

    Examples
    --------
    >>> y, w = np.array([0, 0, 0, 0, 1]), np.ones(5)           # scribbled 80% : 20%
    >>> under_scribbled_weights(y, w, 2, np.array([0.6, 0.4])).tolist()    # thin class 1
    [0.625, 0.625, 0.625, 0.625, 2.5]
    >>> under_scribbled_weights(y, w, 2, np.array([0.95, 0.05])).tolist()  # rare class 1
    [1.0, 1.0, 1.0, 1.0, 1.0]
    """
    y, sample_weight, per_class = _class_totals(y, sample_weight, n_classes)
    total = per_class.sum()
    present = per_class > 0
    if total <= 0 or present.sum() < 2:
        return sample_weight
    scribbled = per_class / total
    equal = 1.0 / present.sum()
    raised = present & (scribbled < np.asarray(shares)) & (scribbled < equal)
    if not raised.any():
        return sample_weight
    target = np.where(raised, equal, 0.0)
    rest = present & ~raised
    target[rest] = (1.0 - target.sum()) * per_class[rest] / per_class[rest].sum()
    scale = np.zeros(n_classes)
    scale[present] = target[present] * total / per_class[present]
    return sample_weight * scale[y]


def _class_totals(y, sample_weight, n_classes):
    """``y`` as int64, ``sample_weight`` as float64 and the weight of each class."""
    y = np.asarray(y).astype(np.int64)
    sample_weight = np.asarray(sample_weight, dtype=np.float64)
    return y, sample_weight, np.bincount(y, weights=sample_weight,
                                         minlength=n_classes)[:n_classes]
