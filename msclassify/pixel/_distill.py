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

``n_pixels`` per frame (a quarter of them flat). The teacher's class map is
predicted coarse to fine (`teacher_classes`): on every ``stride``-th pixel in y
and x, then, only in the grid cells whose corners differ or where the teacher
is unsure, on finer grids down to every pixel. With the default stride 4 that
is 6-14% of the predictions of a whole frame and the same class map but for a
few pixels (tiny structures between grid points); the distillation stage of
a 1024x1024 fly frame took 0.11 s of CPU instead of 1.4 s. An earlier
shortcut, the band of the grid cells of a stride-2 class map, made the
model's outlines follow the 8x8 block grid more on the real fly crop of
``tests/test_real_fly_outlines.py`` (``benchmarks/study_outline_grid.py``); the
band is now always that of the full-resolution class map. In each frame the
edge pixels weigh half and the flat ones the other half of one frame
(``EDGE_WEIGHT``): the band, a few percent of a frame, counts far more than its
area, and flat regions stay represented. That holds while the band is a small part of the
frame; around small or crowded objects, and in volumes (a 3-voxel shell around nuclei 10-15
voxels across is 86% of the stardist stack), the band is most of the frame and its rows are
as good as flat ones, so the thin background between touching objects weighs no more than its
area and a cheap student drops it (docs/volumes.md, "3D nuclei"). So a volume's band
narrows (`outline_band`: 3, 2, 1 voxels) to the widest that covers at most the share of the
weight it is given, ``EDGE_WEIGHT``, of the volume (unchanged when none does: the EM volume).
2D frames keep the 3-pixel band: a fly frame's covers 1-2%, and on EM slices (52-72%) the
narrower band moved membrane F1 by -0.004 to +0.001 (6 draws), no clear gain. Over all
frames the teacher-labelled pixels weigh ``distill_weight`` times as much as the scribbled
ones (the caller scales them). They carry loss, not cost: the cost samples stay what represents an
image.

Measured (fly_masks_dev and isbi2012_em, 10 test frames each, speed against
skimage+RF in the same run; README): weighting the edge pixels only by the
band's area (about 0.5% of a fly frame) gave fly SEG 0.943 at cost_tradeoff
2e-4 (10.6x faster than skimage+RF) but EM slices only 2.5x faster; half the
weight on the band gives fly SEG 0.946 at cost_tradeoff 1e-3 (10.6x) and EM
membrane F1 0.691 (7.9x). Without distillation the same bank at cost_tradeoff
2e-4 drew staircase outlines (fly SEG 0.866).
"""

import functools

import numpy as np
from scipy import ndimage as ndi

from ..cegb import most_probable_class, train
from ._forest_teacher import (BLEND_FOREST_TREES, FOREST_TREES, BlendTeacher, ForestTeacher,
                              MeanTeacher)
from ._teacher_context import interpolated

__all__ = ["DISTILL_BAND", "EDGE_SHARE", "EDGE_WEIGHT", "SNAP_SHARE", "TEACHERS",
           "TEACHER_MARGIN", "TEACHER_STRIDE", "fit_teacher", "outline_band", "snap_outlines",
           "teacher_band", "teacher_classes", "teacher_pixels", "teacher_rounds"]

# Half-width of the band around the teacher's class changes, in pixels.
DISTILL_BAND = 3
# Share of a frame's teacher-labelled pixels drawn from the band, and their share of its weight.
EDGE_SHARE = 0.75
EDGE_WEIGHT = 0.5
# The teacher's class map is predicted on every TEACHER_STRIDE-th pixel first (PixelClassifier's
# teacher_stride), then refined where a cell's corners differ or the teacher is less sure than
# TEACHER_MARGIN (raw score; 4.0: a binary probability between 0.018 and 0.982).
TEACHER_STRIDE = 4
TEACHER_MARGIN = 4.0
# The distillation teacher's learners (fit_teacher's kind, PixelClassifier's teacher).
TEACHERS = ("boost", "forest", "mean", "blend")
# snap_outlines: a stretch where two class maps differ is one outline drawn at two places when
# both maps' class changes bound it, each at least SNAP_SHARE of its border.
SNAP_SHARE = 0.25
# Points the teacher predicts at a time while refining (their feature rows are copies).
_POINT_BLOCK = 1 << 16


def teacher_rounds(n_estimators, n_classes, teacher_estimators=None, volume=False):
    """Boosting rounds of the distillation teacher.

    ``teacher_estimators`` when given; else ``n_estimators`` with two classes and
    ``round(2 * n_estimators / n_classes)`` (at least 1) with more. A round grows
    one tree per class: with many classes the teacher, fitted on the scribbles
    alone, stops earlier (on 4-class scribbles of real frames half the rounds
    scored as well within the draws' noise; docs/scribbles.md, section 18).
    A ``volume``'s teacher grows half of that (at least 1): fitted on the
    scribbled slices, it labels the volume's other slices too, where its class
    map extrapolates across z, and a teacher of fewer rounds draws fewer
    contacts between objects there (docs/volumes.md, *A volume's teacher of
    half the rounds*).

    >>> [teacher_rounds(50, 2), teacher_rounds(50, 4), teacher_rounds(50, 3)]
    [50, 25, 33]
    >>> [teacher_rounds(50, 2, volume=True), teacher_rounds(50, 4, volume=True)]
    [25, 12]
    >>> teacher_rounds(50, 4, teacher_estimators=50, volume=True)
    50
    """
    if teacher_estimators is not None:
        return int(teacher_estimators)
    n_estimators = int(n_estimators)
    rounds = n_estimators if n_classes <= 2 else max(1, round(2 * n_estimators / n_classes))
    return max(1, round(rounds / 2)) if volume else rounds


def fit_teacher(X, y, sample_weight, params, feature_indices, objective, n_classes,
                callback=None, kind="boost"):
    """The distillation teacher, fitted on columns ``feature_indices`` of the labelled rows.

    ``kind="boost"``: plain gradient boosting (cost_tradeoff 0); ``params`` are
    the core parameters of the student (the tree settings are shared). Returns
    a `msclassify.cegb.Booster` over those columns. ``kind="forest"``: a
    `ForestTeacher` (extremely randomised trees, seeded by
    ``params["random_state"]``) on the same rows. ``kind="mean"``: a
    `MeanTeacher` of both (the class of their mean raw score). ``kind="blend"``:
    a `BlendTeacher` of both (the boosted one near the scribbles, a forest of
    ``BLEND_FOREST_TREES`` trees far from them, fitted when a sparsely scribbled
    frame first needs it). Rows with zero
    ``sample_weight`` (cost samples) are left out. ``callback(iteration,
    n_iterations)`` follows the boosting (progress; the forest reports once,
    when it is fitted).
    """
    labelled = sample_weight > 0
    rows = np.ascontiguousarray(X[labelled][:, feature_indices])
    y, weight = y[labelled], sample_weight[labelled]
    if kind == "mean":          # both teachers fit the same copied rows
        return MeanTeacher([_boosted_teacher(rows, y, weight, params, feature_indices,
                                             objective, n_classes, callback),
                            _forest_teacher(rows, y, weight, params, n_classes, None)])
    if kind == "blend":         # the forest is fitted when a sparsely scribbled frame needs it
        return BlendTeacher(_boosted_teacher(rows, y, weight, params, feature_indices, objective,
                                             n_classes, callback),
                            functools.partial(_forest_teacher, rows, y, weight, params,
                                              n_classes, None, n_estimators=BLEND_FOREST_TREES))
    if kind == "forest":
        return _forest_teacher(rows, y, weight, params, n_classes, callback)
    return _boosted_teacher(rows, y, weight, params, feature_indices, objective, n_classes,
                            callback)


def _boosted_teacher(rows, y, weight, params, feature_indices, objective, n_classes, callback):
    teacher_params = dict(params, cost_tradeoff=0.0, feature_costs=None,
                          feature_batch_costs=None,
                          feature_share=np.asarray(params["feature_share"])[feature_indices])
    return train(rows, y, objective, teacher_params, n_classes=n_classes, sample_weight=weight,
                 callback=callback)


def _forest_teacher(rows, y, weight, params, n_classes, callback, n_estimators=FOREST_TREES):
    teacher = ForestTeacher(n_estimators, random_state=params["random_state"]).fit(
        rows, y, weight, 2 if n_classes is None else n_classes)
    if callback is not None:
        callback(teacher.n_estimators, teacher.n_estimators)
    return teacher


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


def outline_band(classes, band, share=EDGE_WEIGHT):
    """`teacher_band` of the widest width up to ``band`` that covers at most ``share`` of
    ``classes`` (``band`` itself if none does): a volume's edge pixels in `teacher_pixels`.

    The edge pixels get ``EDGE_WEIGHT`` of a frame's weight so that the pixels near
    outlines weigh more than the rest; a band that is most of the frame (small or
    crowded objects, a volume's shells) is hardly different from the flat pixels,
    and the thin background between touching objects is a small part of it. Where even
    a 1-pixel band is most of the frame (dense membranes: 54% of the EM volume) no width
    singles out the outlines, and the band stays as it was.

    Examples
    --------
    >>> c = np.zeros((1, 8), np.uint8); c[0, 4:] = 1
    >>> int(outline_band(c, 3).sum()), int(teacher_band(c, 3).sum())   # 6 of 8 > half
    (4, 6)
    """
    wide = edge = teacher_band(classes, band)
    while band > 1 and edge.mean() > share:
        band -= 1
        edge = teacher_band(classes, band)
    return edge if edge.mean() <= share else wide


def snap_outlines(classes, outlined, share=SNAP_SHARE):
    """``classes`` with its outlines moved onto the nearby outlines of ``outlined``.

    Where two class maps differ, each connected stretch of differing pixels
    (4-neighbours; 6 in a volume) is bounded by class changes of one map or the
    other. A stretch bounded by both (each map's class changes at least
    ``share`` of its border) is the same outline drawn at two places: it takes
    ``outlined``'s classes. Every other stretch (a structure only one map has)
    keeps ``classes``. So ``classes`` decides which regions there are, and
    ``outlined`` where their outlines run, however far apart they are drawn (a
    6 px limit let a fly drawn 13 px wider through: docs/scribbles.md, section 22).

    Parameters
    ----------
    classes, outlined : ndarray of int, same shape
    share : float, optional

    Returns
    -------
    ndarray of int
        A new array.

    Examples
    --------
    ``classes`` draws the object 2 px wider on the left and has a spot that
    ``outlined`` lacks; ``outlined`` has a spot that ``classes`` lacks:

    >>> outlined = np.zeros((1, 14), int); outlined[0, 4:9] = 1; outlined[0, 12] = 1
    >>> classes = np.zeros((1, 14), int); classes[0, 2:9] = 1; classes[0, 0] = 1
    >>> snap_outlines(classes, outlined).tolist()
    [[1, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0]]
    """
    classes, outlined = np.asarray(classes), np.asarray(outlined)
    differ = classes != outlined
    parts, n = ndi.label(differ)
    if n == 0:
        return classes.copy()
    own = np.zeros(n + 1)                  # border pairs of each stretch where a map changes class
    other = np.zeros(n + 1)
    for axis in range(classes.ndim):
        later = (slice(None),) * axis + (slice(1, None),)
        earlier = (slice(None),) * axis + (slice(None, -1),)
        for inside, outside in ((later, earlier), (earlier, later)):
            edge = differ[inside] & ~differ[outside]
            part = parts[inside][edge]
            own += np.bincount(part, classes[inside][edge] != classes[outside][edge], n + 1)
            other += np.bincount(part, outlined[inside][edge] != outlined[outside][edge], n + 1)
    border = np.maximum(own + other, 1)[1:]
    snap = (own[1:] >= share * border) & (other[1:] >= share * border)
    out = classes.copy()
    take = np.concatenate([[False], snap])[parts]
    out[take] = outlined[take]
    return out


def _margin(raw):
    """How sure a model is of its most probable class: |raw| (one output) or the gap between the
    two largest raw scores."""
    if raw.ndim == 1 or raw.shape[-1] == 1:
        return np.abs(raw.reshape(raw.shape[0]))
    top = np.partition(raw, raw.shape[-1] - 2, axis=-1)
    return top[:, -1] - top[:, -2]


def _mixed_cells(classes, unsure, covered):
    """Grid cells (the last two axes) whose 4 corners differ in class or one of them is unsure.

    A cell's corners are its own grid point and the next ones in y, x and both; on the
    last row/column of cells the missing corners repeat the last ones, and the cells
    count as unsure where the grid does not reach the frame's edge (``covered`` False).
    """
    pad = [(0, 0)] * (classes.ndim - 2) + [(0, 1), (0, 1)]
    c = np.pad(classes, pad, mode="edge")
    u = np.pad(unsure, pad, mode="edge")
    for axis, reaches in zip((-2, -1), covered):
        if not reaches:
            index = [slice(None)] * u.ndim
            index[axis] = -1
            u[tuple(index)] = True
    corner = c[..., :-1, :-1]
    return (unsure | u[..., 1:, :-1] | u[..., :-1, 1:] | u[..., 1:, 1:]
            | (c[..., 1:, :-1] != corner) | (c[..., :-1, 1:] != corner)
            | (c[..., 1:, 1:] != corner))


def teacher_classes(level0, slots, teacher, shape, stride=TEACHER_STRIDE, margin=TEACHER_MARGIN,
                    context=None, distance=None):
    """The teacher's class at every pixel of a frame, predicted coarse to fine.

    The teacher predicts every ``stride``-th pixel in y and x; a grid cell
    whose 4 corner pixels share a class and where the teacher is sure of each
    (raw score margin ≥ ``margin``: `_margin`) takes that class for all its
    pixels; the other cells (near an outline, or unsure) are predicted on the
    grid of half the stride, and so on down to every pixel. The class map is
    the full-resolution one except for structures narrower than the stride
    that no grid point touches, and no unsure teacher at a grid point near
    them (1024x1024 fly frame, stride 4: 29 of 1M pixels differ, 3% of the
    teacher's predictions).

    Parameters
    ----------
    level0 : ndarray of float32, shape (..., H', W', k)
        The bank's full-resolution feature array (`FeatureLevels.arrays[0]`; a
        volume's is ``(Z', H', W', k)``: the grid is in y and x only).
    slots : ndarray of int
        Columns of ``level0`` that are the teacher's features, in its order.
    teacher : msclassify.cegb.Booster
    shape : tuple of int
        ``(H, W)`` (or ``(Z, H, W)``) of the frame (``level0`` may be padded).
    stride : int, optional
        Spacing of the first grid (1: predict every pixel).
    margin : float, optional
    context : callable, optional
        ``context(ys, xs)``: more teacher columns at pixels of a frame (float32
        ``(n, k)``, after the ``slots`` columns; `msclassify.pixel._teacher_context`).
        Frames only.
    distance : ndarray of float, shape ``shape``, optional
        Pixels to the nearest scribble: the teacher is called as
        ``teacher.predict_raw(rows, distance[pixels])`` (`BlendTeacher`).

    Returns
    -------
    ndarray of int, shape ``shape``

    Examples
    --------
    >>> from msclassify.cegb import train
    >>> X = np.linspace(0, 1, 200)[:, None]
    >>> step = train(X, (X[:, 0] > 0.5).astype(float), "binary", {"n_estimators": 5})
    >>> image = np.zeros((16, 16, 1), np.float32); image[5:11, 3:9] = 1
    >>> classes = teacher_classes(image, np.array([0]), step, (16, 16), stride=4)
    >>> np.array_equal(classes, image[..., 0] > 0.5)
    True
    """
    lead = tuple(slice(0, n) for n in shape[:-2])

    def predict_rows(features, pixels, near):
        rows = np.ascontiguousarray(features[..., slots]).reshape(-1, slots.size)
        if context is not None:
            rows = np.ascontiguousarray(np.hstack([rows, context(*pixels)]))
        raw = teacher.predict_raw(rows) if near is None else \
            teacher.predict_raw(rows, near.reshape(-1))
        n_classes = 2 if raw.ndim == 1 or raw.shape[-1] == 1 else raw.shape[-1]
        # the class map in the smallest integer type (a byte a pixel, not eight)
        return most_probable_class(raw).astype(np.min_scalar_type(n_classes - 1)), \
            _margin(raw) < margin

    def predict(index):
        if not isinstance(index[0], np.ndarray):          # a grid of slices: a view
            if lead:          # a volume's grid, a few slices at a time (their rows are copies)
                view = level0[index]
                step = max(1, _POINT_BLOCK // max(1, view.shape[1] * view.shape[2]))
                near = None if distance is None else distance[index]
                parts = [predict_rows(view[z:z + step], None,
                                      None if near is None else near[z:z + step])
                         for z in range(0, view.shape[0], step)]
                return tuple(np.concatenate(p) for p in zip(*parts))
            pixels = None if context is None else \
                [p.ravel() for p in np.meshgrid(*(np.arange(n)[i] for n, i in
                                                  zip(shape, index)), indexing="ij")]
            return predict_rows(level0[index], pixels,
                                None if distance is None else distance[index])
        # points, in blocks: their rows are copied (a volume's refinement may be most voxels)
        parts = [predict_rows(level0[block], block,
                              None if distance is None else distance[block])
                 for block in (tuple(i[start:start + _POINT_BLOCK] for i in index)
                               for start in range(0, index[0].size, _POINT_BLOCK))]
        return tuple(np.concatenate(p) for p in zip(*parts))

    grid = lead + tuple(slice(0, n, stride) for n in shape[-2:])
    grid_shape = shape[:-2] + tuple(-(-n // stride) for n in shape[-2:])
    classes, unsure = (a.reshape(grid_shape) for a in predict(grid))
    while stride > 1:
        finer = stride // 2 if stride % 2 == 0 else 1
        f = stride // finer
        covered = [(n - 1) % stride == 0 for n in shape[-2:]]
        mixed = _mixed_cells(classes, unsure, covered)
        fine_shape = grid_shape[:-2] + tuple(-(-n // finer) for n in shape[-2:])
        crop = (Ellipsis,) + tuple(slice(0, n) for n in fine_shape[-2:])
        classes = np.repeat(np.repeat(classes, f, axis=-2), f, axis=-1)[crop]
        grid_unsure = unsure
        unsure = np.zeros(fine_shape, dtype=bool)
        unsure[..., ::f, ::f] = grid_unsure
        # the finer grid's points in every mixed cell (its corner is known already), a block
        # of cells at a time: a volume's mixed cells may be most of its cells
        mixed_cells = np.flatnonzero(mixed)
        offsets = np.indices((f, f)).reshape(2, -1)[:, 1:]
        block = max(1, _POINT_BLOCK // offsets.shape[1])
        for start in range(0, mixed_cells.size, block):
            cells = np.unravel_index(mixed_cells[start:start + block], mixed.shape)
            points = [np.repeat(c, offsets.shape[1]) for c in cells[:-2]]
            points += [(c[:, None] * f + o[None, :]).ravel()
                       for c, o in zip(cells[-2:], offsets)]
            inside = (points[-2] < fine_shape[-2]) & (points[-1] < fine_shape[-1])
            points = tuple(p[inside] for p in points)
            if points[0].size:
                pixels = points[:-2] + tuple(p * finer for p in points[-2:])
                classes[points], unsure[points] = predict(pixels)
        stride, grid_shape = finer, fine_shape
    return classes


def teacher_pixels(compute_levels, pairs, teacher, feature_indices, n_pixels, band, rng,
                   stride=TEACHER_STRIDE, context_indices=None, outline_teacher=None):
    """Rows labelled by ``teacher``: ``n_pixels`` per frame, near its outlines and anywhere.

    The teacher's class map of each frame comes from `teacher_classes` (coarse
    to fine from a grid of every ``stride``-th pixel); the edge pixels are
    drawn from the ``band`` pixels on each side of its class changes
    (`teacher_band`).

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
        Half-width in pixels of the band around the teacher's class changes; a volume's
        is narrowed while it covers more than ``EDGE_WEIGHT`` of it (`outline_band`).
    rng : numpy.random.Generator
    stride : int, optional
        Spacing of the first grid of `teacher_classes` (1: every pixel).
    context_indices : ndarray of int, optional
        Coarse bank features the teacher reads bilinearly after ``feature_indices``
        (`msclassify.pixel._teacher_context.interpolated`).
    outline_teacher : optional
        A teacher on ``feature_indices`` alone: ``teacher``'s class map is moved
        onto its outlines where both draw one nearby (`snap_outlines`).

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
    for frame, labels in pairs:
        levels = compute_levels(frame)
        shape = levels.shape
        context = None if context_indices is None else \
            functools.partial(interpolated, levels, context_indices)
        # pixels to the frame's nearest scribble (None: densely scribbled, the boosted teacher)
        distance = teacher.frame_distance(labels) if isinstance(teacher, BlendTeacher) else None
        classes = teacher_classes(levels.arrays[0], levels.slot[feature_indices], teacher,
                                  shape, stride, context=context, distance=distance)
        if outline_teacher is not None:
            classes = snap_outlines(classes, teacher_classes(
                levels.arrays[0], levels.slot[feature_indices], outline_teacher, shape, stride))
        # 8 bytes a band pixel; a volume's band narrows while it is most of the volume
        edge = np.flatnonzero(outline_band(classes, band) if classes.ndim == 3 else
                              teacher_band(classes, band))
        size = int(np.prod(shape))
        n_total = min(int(n_pixels), size)
        n_edge = min(int(round(EDGE_SHARE * n_total)), edge.size)
        n_flat = n_total - n_edge
        pick = np.unravel_index(edge[rng.choice(edge.size, n_edge, replace=False)], shape)
        del edge
        flat = np.unravel_index(rng.choice(size, n_flat, replace=False), shape)
        pixels = tuple(np.concatenate([e, f]) for e, f in zip(pick, flat))
        rows.append(levels.gather(*pixels))
        targets.append(classes[pixels].astype(np.float64))
        edge_weight = EDGE_WEIGHT if n_edge else 0.0
        weights.append(np.concatenate([np.full(n_edge, edge_weight / max(n_edge, 1)),
                                       np.full(n_flat, (1 - edge_weight) / max(n_flat, 1))]))
    return np.concatenate(rows), np.concatenate(targets), np.concatenate(weights)
