"""Distillation: pixels labelled by an accurate full-resolution teacher, drawn near its outlines.

Scribbles sit away from object boundaries, so a loss on scribbles alone cannot
tell a coarse 8x8-block decision from a full-resolution one at an edge, and the
cost penalty then picks the coarse one: staircase outlines. `PixelClassifier`
with ``distill_weight > 0`` (the default) gives the loss that information. It first fits a
*teacher*, plain gradient boosting (cost_tradeoff 0) on the bank's level-0
(full-resolution) features and the scribbles, then adds to the scribbles pixels
of the labelled frames that carry the teacher's class:

* ``edge`` pixels, drawn uniformly from the band of ``band`` pixels on each
  side of the class changes of the teacher's class map (`teacher_band`), and
* ``flat`` pixels, drawn uniformly from the whole frame,

``n_pixels`` per frame (a quarter of them flat). The class changes can be found
on a grid of every ``stride``-th pixel in y and x (``stride=2``: the teacher
predicts a quarter of the pixels; the distillation stage took 0.3 s of CPU on a
1024x1024 fly frame, ``benchmarks/bench_training.py``); the band is then that of
the grid cells, ``ceil(band / stride)`` cells on each side, and every drawn pixel
still carries the teacher's class at that pixel. The default, `TEACHER_STRIDE`, is
1: with 2 the model's outlines followed the 8x8 block grid more on the real fly
crop of ``tests/test_real_fly_outlines.py`` (``benchmarks/study_outline_grid.py``). In
each frame the edge pixels
weigh half and the flat ones the other half of one frame (``EDGE_WEIGHT``):
the band, a few percent of a frame, counts far more than its area, and flat
regions stay represented. Over all frames the teacher-labelled pixels weigh
``distill_weight`` times as much as the scribbled ones (the caller scales
them). They carry loss, not cost: the cost samples stay what represents an
image.

Measured (fly_masks_dev and isbi2012_em, 10 test frames each, speed against
skimage+RF in the same run; README): weighting the edge pixels only by the
band's area (about 0.5% of a fly frame) gave fly SEG 0.943 at cost_tradeoff
2e-4 (10.6x faster than skimage+RF) but EM slices only 2.5x faster; half the
weight on the band gives fly SEG 0.946 at cost_tradeoff 1e-3 (10.6x) and EM
membrane F1 0.691 (7.9x). Without distillation the same bank at cost_tradeoff
2e-4 drew staircase outlines (fly SEG 0.866).
"""

import numpy as np
from scipy import ndimage as ndi

from ..cegb import most_probable_class, train
from ._multiscale import predict_multiscale

__all__ = ["DISTILL_BAND", "EDGE_SHARE", "EDGE_WEIGHT", "TEACHER_STRIDE", "fit_teacher",
           "teacher_band", "teacher_pixels"]

# Half-width of the band around the teacher's class changes, in pixels.
DISTILL_BAND = 3
# Share of a frame's teacher-labelled pixels drawn from the band, and their share of its weight.
EDGE_SHARE = 0.75
EDGE_WEIGHT = 0.5
# The teacher's outlines are found on every TEACHER_STRIDE-th pixel (PixelClassifier's
# teacher_stride; 2: 4x fewer predictions, but outlines that follow the 8x8 block grid more).
TEACHER_STRIDE = 1


def fit_teacher(X, y, sample_weight, params, feature_indices, objective, n_classes,
                callback=None):
    """Plain gradient boosting (cost_tradeoff 0) on columns ``feature_indices`` of the labelled rows.

    ``params`` are the core parameters of the student (the tree settings are
    shared); rows with zero ``sample_weight`` (cost samples) are left out.
    ``callback(iteration, n_iterations)`` follows the boosting (progress).
    Returns the teacher `msclassify.cegb.Booster` over those columns.
    """
    labelled = sample_weight > 0
    teacher_params = dict(params, cost_tradeoff=0.0, feature_costs=None,
                          feature_batch_costs=None,
                          feature_share=np.asarray(params["feature_share"])[feature_indices])
    return train(np.ascontiguousarray(X[labelled][:, feature_indices]), y[labelled], objective,
                 teacher_params, n_classes=n_classes, sample_weight=sample_weight[labelled],
                 callback=callback)


def teacher_band(classes, band):
    """The ``band`` pixels on each side of every change of class in ``classes`` (boolean).

    A pixel next to a pixel of another class (4-neighbours) is in the band for
    ``band=1``; each further unit adds one pixel (8-neighbours) on both sides.
    A volume's band is the same in 3D (6-neighbours, then 26-neighbours).

    Examples
    --------
    >>> c = np.zeros((1, 8), np.uint8); c[0, 4:] = 1
    >>> teacher_band(c, 1).astype(int)
    array([[0, 0, 0, 1, 1, 0, 0, 0]])
    >>> teacher_band(c, 2).astype(int)
    array([[0, 0, 1, 1, 1, 1, 0, 0]])
    """
    change = np.zeros(classes.shape, dtype=bool)
    for axis in reversed(range(classes.ndim)):
        later = (slice(None),) * axis + (slice(1, None),)
        earlier = (slice(None),) * axis + (slice(None, -1),)
        differs = classes[later] != classes[earlier]
        change[later] |= differs
        change[earlier] |= differs
    if band > 1 and change.any():
        change = ndi.binary_dilation(change, np.ones((3,) * classes.ndim, bool),
                                     iterations=band - 1)
    return change


def teacher_pixels(compute_levels, pairs, teacher, feature_indices, n_pixels, band, rng,
                   stride=TEACHER_STRIDE):
    """Rows labelled by ``teacher``: ``n_pixels`` per frame, near its outlines and anywhere.

    The teacher's outlines are found on a grid of every ``stride``-th pixel (its
    class map at ``1/stride`` resolution: ``stride**2`` times fewer predictions
    than the whole frame); the edge pixels are drawn from the full-resolution
    pixels of the grid cells within ``ceil(band / stride)`` cells of a class
    change, and every drawn pixel gets the teacher's class at that pixel.

    Parameters
    ----------
    compute_levels : callable
        ``compute_levels(frame)``: every bank feature of a frame
        (`msclassify.features.FeatureLevels`, all features in bank order).
    pairs : list of (frame, labels)
    teacher : msclassify.cegb.Booster
        Trained on bank columns ``feature_indices`` (all full-resolution features).
    feature_indices : ndarray of int
    n_pixels : int
        Teacher-labelled pixels per frame (fewer if the frame is smaller).
    band : int
        Half-width in pixels of the band around the teacher's class changes.
    rng : numpy.random.Generator
    stride : int, optional
        Spacing of the grid the outlines are found on (1: every pixel).

    Returns
    -------
    X : ndarray of float32, shape (n, n_bank_features)
    y : ndarray of float64
        Teacher class index of every row.
    weight : ndarray of float64
        Loss weights: per frame, ``EDGE_WEIGHT`` for the edge rows together and
        the rest of 1 for the flat rows (all of 1 when the teacher sees no
        class change); the caller scales them.
    """
    rows, targets, weights = [], [], []
    for frame, _ in pairs:
        levels = compute_levels(frame)
        shape = levels.shape
        if stride == 1:   # the teacher's class at every pixel, from the levels directly
            classes = predict_multiscale(teacher, levels.arrays, levels.level[feature_indices],
                                         levels.slot[feature_indices], shape, output="class",
                                         blocks=levels.blocks).values
            edge = np.nonzero(teacher_band(classes, band))
        else:             # on every stride-th pixel in y and x (every section of a volume)
            strides = (1,) * (len(shape) - 2) + (stride, stride)
            slots = levels.slot[feature_indices]
            grid = levels.arrays[0][tuple(slice(0, n, k) for n, k in zip(shape, strides))]
            grid = np.ascontiguousarray(grid[..., slots])
            coarse = most_probable_class(teacher.predict_raw(
                grid.reshape(-1, slots.size))).reshape(grid.shape[:-1])
            cells = np.nonzero(teacher_band(coarse, -(-int(band) // stride)))
            # every full-resolution pixel of those cells (cells on the last row/column may be cut)
            offsets = np.indices(strides).reshape(len(shape), -1)
            edge = [(cell[:, None] * k + offset[None, :]).ravel()
                    for cell, k, offset in zip(cells, strides, offsets)]
            inside = np.logical_and.reduce([e < n for e, n in zip(edge, shape)])
            edge = [e[inside] for e in edge]
        size = int(np.prod(shape))
        n_total = min(int(n_pixels), size)
        n_edge = min(int(round(EDGE_SHARE * n_total)), edge[0].size)
        n_flat = n_total - n_edge
        pick = rng.choice(edge[0].size, n_edge, replace=False)
        flat = np.unravel_index(rng.choice(size, n_flat, replace=False), shape)
        pixels = tuple(np.concatenate([e[pick], f]) for e, f in zip(edge, flat))
        gathered = levels.gather(*pixels)
        rows.append(gathered)
        if stride == 1:
            targets.append(classes[pixels].astype(np.float64))
        else:
            targets.append(most_probable_class(teacher.predict_raw(
                np.ascontiguousarray(gathered[:, feature_indices]))).astype(np.float64))
        edge_weight = EDGE_WEIGHT if n_edge else 0.0
        weights.append(np.concatenate([np.full(n_edge, edge_weight / max(n_edge, 1)),
                                       np.full(n_flat, (1 - edge_weight) / max(n_flat, 1))]))
    return np.concatenate(rows), np.concatenate(targets), np.concatenate(weights)
