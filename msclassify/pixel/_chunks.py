"""Chunked prediction: an image predicted window by window, identical to predicting it whole.

An image too large for memory is cut into chunks (any size; the last ones along
an axis may be smaller). Each chunk is predicted from a *window* of the image
around it and cropped, and the result is the same as predicting the whole image
in memory: labels bit for bit, probabilities to the last float32 bit. Three
rules make it exact (docs/large_images.md, *The chunk plan*):

* **Aligned to the coarsest block grid.** A chunk's prediction region starts at
  the multiple of ``BLOCK`` (8, the coarsest pyramid block) at or before the
  chunk, and every window starts at a multiple of ``BLOCK`` and ends at one (or
  at the image's end). So the pyramid's block means and the predictor's blocks
  are those of the whole image, and at the image's last partial block the
  window is padded exactly as the whole image is (a window that ends there
  reaches back far enough to hold the pixels that padding reflects).
* **A halo from the features the model uses.** A feature on level L reads the
  level image within `msclassify.features.support_radius` level pixels, i.e.
  ``support_pixels`` full-resolution pixels; every kernel reflects at the border
  of what it is given, so values farther than that from a window's artificial
  border are exact. The features are grouped by that halo (rounded up to a
  multiple of ``BLOCK``) and each group is computed on its own window: the
  full-resolution features, which cost most per pixel, get the small halo, the
  8x8-block features the large one, which on their level costs 1/64.
* **Clipped at the image edges.** A window never reaches past the image: where
  the halo would, the window ends at the image's edge, and the filters' and the
  pyramid's reflection there is the whole image's.

`ChunkPlan` is the geometry alone, for any number of axes; `predict_chunks` runs a
`PixelClassifier` through it. A volume model's plan is 3-D: its block grid is the
coarsest pyramid block ``(bz, 8, 8)`` (`msclassify.features.VoxelGrid.pad_multiple`:
z is aligned to 1, 2, 4 or 8 slices as the block rule pools it) and its halo is
per axis (`msclassify.features.support_voxels`: a feature's sigma along z is its
own), so the same three rules hold along z (docs/volumes.md, *Chunked volumes*).
"""

import itertools
import math

import numpy as np

from ..features import N_LEVELS, PyramidImage, PyramidVolume, support_pixels, support_voxels
from ._multiscale import predict_multiscale

__all__ = ["BLOCK", "ChunkPlan", "feature_halos", "model_halo", "model_plan", "predict_chunk",
           "predict_chunks", "predict_region", "training_windows"]

# The coarsest pyramid block: windows and prediction regions start on its grid.
BLOCK = 2 ** (N_LEVELS - 1)
CHUNK_OUTPUTS = ("class", "proba")


def _round_up(value, multiple):
    return -(-int(value) // multiple) * multiple


def _as_tuple(value, ndim, name):
    if np.ndim(value) == 0:
        value = (value,) * ndim
    value = tuple(value)
    if len(value) != ndim or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                     for v in value):
        raise ValueError(f"{name} must be an int or {ndim} ints, got {value!r}")
    return tuple(int(v) for v in value)


def _per_axis(value, ndim):
    """An int (every axis) or a sequence of ``ndim`` ints as a tuple of ints."""
    return (int(value),) * ndim if np.ndim(value) == 0 else tuple(int(v) for v in value)


def _widen(region, shape, halo, block):
    """``region`` (slices starting on the block grid) widened by ``halo`` (rounded up to the
    block) on every side, its end on the grid, clipped to ``shape`` (see `ChunkPlan.window`);
    ``halo`` and ``block`` are ints or one int per axis."""
    window = []
    for s, size, h, b in zip(region, shape, _per_axis(halo, len(shape)),
                             _per_axis(block, len(shape))):
        h = _round_up(h, b)
        start, stop = max(s.start - h, 0), min(_round_up(s.stop, b) + h, size)
        if stop == size:
            # The image's last partial block is padded by reflecting the pixels before
            # its end: the window must hold them, as the whole image does.
            mirror = 2 * size - _round_up(size, b)
            start = min(start, max(mirror - mirror % b, 0))
        window.append(slice(start, stop))
    return tuple(window)


class ChunkPlan:
    """Chunks of an image and the block-aligned windows that predict them exactly.

    Parameters
    ----------
    shape : tuple of int
        Spatial shape of the image (any number of axes).
    chunks : int or tuple of int
        Chunk size per axis (one int for all); chunks tile the image from its
        origin, the last one along an axis may be smaller.
    halo : int or tuple of int, optional
        The largest halo any window needs, in full-resolution pixels (rounded up
        to a multiple of ``block``), for all axes or per axis; see `model_halo`.
    block : int or tuple of int, optional
        The grid windows are aligned to (``BLOCK`` = 8 for the image pyramid; a
        volume's coarsest block, e.g. ``(1, 8, 8)``, per axis).

    Examples
    --------
    >>> plan = ChunkPlan((100, 70), 48, halo=10)
    >>> plan.grid, plan.halo, len(plan)
    ((3, 2), 16, 6)
    >>> plan.chunk((1, 1)), plan.region((1, 1))
    ((slice(48, 96, None), slice(48, 70, None)), (slice(48, 96, None), slice(48, 70, None)))
    >>> plan.window((1, 1))            # 16 px around the region, clipped at the image's end
    (slice(32, 100, None), slice(32, 70, None))
    >>> ChunkPlan((100, 70), 37).region((1, 0))   # starts on the 8-pixel grid
    (slice(32, 74, None), slice(0, 37, None))
    >>> vol = ChunkPlan((9, 40, 40), (5, 32, 32), halo=(1, 12, 12), block=(2, 8, 8))
    >>> vol.halo, vol.region((1, 0, 0))[0], vol.window((1, 0, 0))[0]
    ((2, 16, 16), slice(4, 9, None), slice(2, 9, None))
    """

    def __init__(self, shape, chunks, halo=0, block=BLOCK):
        self.shape = _as_tuple(shape, len(tuple(shape)), "shape")
        ndim = len(self.shape)
        self.chunks = _as_tuple(chunks, ndim, "chunks")
        if min(self.shape) < 1 or min(self.chunks) < 1:
            raise ValueError(f"shape {self.shape} and chunks {self.chunks} must be positive")
        self.blocks = _as_tuple(block, ndim, "block")
        self.halos = tuple(_round_up(max(h, 0), b)
                           for h, b in zip(_as_tuple(halo, ndim, "halo"), self.blocks))
        # One int where all axes agree (images), else per axis (volumes).
        self.block = self.blocks[0] if len(set(self.blocks)) == 1 else self.blocks
        self.halo = self.halos[0] if len(set(self.halos)) == 1 else self.halos
        self.grid = tuple(-(-size // chunk) for size, chunk in zip(self.shape, self.chunks))

    def check_chunks(self):
        """ValueError if a chunk is smaller than the halo (unless it spans its axis): each
        window would then compute several times its chunk's pixels."""
        for axis, (size, chunk, halo) in enumerate(zip(self.shape, self.chunks, self.halos)):
            if chunk < min(halo, size):
                raise ValueError(
                    f"chunk size {chunk} along axis {axis} is smaller than the model's halo of "
                    f"{halo} pixels, so each window would compute several times its chunk; "
                    f"use chunks of at least {halo} pixels along it "
                    f"(e.g. {max(4 * halo, 256) if len(self.shape) == 2 else max(2 * halo, 32)})")
        return self

    def __len__(self):
        return math.prod(self.grid)

    def __iter__(self):
        """Chunk indices in C order (row by row)."""
        return itertools.product(*(range(n) for n in self.grid))

    def _check_index(self, index):
        index = tuple(int(i) for i in index)
        if len(index) != len(self.grid) or any(not 0 <= i < n for i, n in zip(index, self.grid)):
            raise IndexError(f"chunk index {index} is outside the chunk grid {self.grid}")
        return index

    def chunk(self, index):
        """The chunk's own pixels: one slice per axis."""
        index = self._check_index(index)
        return tuple(slice(i * c, min((i + 1) * c, size))
                     for i, c, size in zip(index, self.chunks, self.shape))

    def region(self, index):
        """What is predicted for the chunk: the chunk, its start moved back to the block grid."""
        return tuple(slice(s.start - s.start % b, s.stop) for s, b in zip(self.chunk(index),
                                                                            self.blocks))

    def window(self, index, halo=None):
        """The input a chunk's features need: its region widened by ``halo`` on every side.

        The window starts on the block grid and ends on it beyond the region's
        last block (or at the image's end). ``halo`` defaults to the plan's;
        it is rounded up to a multiple of the block.
        """
        halo = self.halos if halo is None else halo
        return _widen(self.region(index), self.shape, halo, self.blocks)


def _geometry(model):
    """``(n_axes, per-level blocks)`` of a fitted model: an image's ``(2**L, 2**L)``, a
    volume's ``(bz, 2**L, 2**L)`` (`msclassify.features.VoxelGrid.blocks`)."""
    grid = model.bank_.grid
    if grid is None:
        return 2, [(2 ** L, 2 ** L) for L in range(N_LEVELS)]
    return 3, [tuple(b) for b in grid.blocks]


def feature_halos(model):
    """The used features of a fitted `PixelClassifier`, grouped by the halo they need.

    Returns
    -------
    list of (int or tuple of int, ndarray of int64)
        ``(halo, bank indices)`` per group, smallest halo first; a halo is the
        largest `msclassify.features.support_pixels` of the group's features,
        rounded up to a multiple of ``BLOCK``. A volume model's halos are
        ``(z, y, x)`` (`msclassify.features.support_voxels`, rounded up to the
        coarsest block per axis), ordered by the window volume they make.
    """
    used = np.asarray(model.booster_.features_used(), dtype=np.int64)
    grid = model.bank_.grid
    if grid is None:
        halos = np.array([_round_up(support_pixels(model.bank_.specs[i]), BLOCK) for i in used],
                         dtype=np.int64)
        return [(int(h), used[halos == h]) for h in np.unique(halos)]
    coarse = grid.pad_multiple
    halos = [tuple(_round_up(r, b) for r, b in zip(support_voxels(model.bank_.specs[i], grid),
                                                     coarse)) for i in used]
    keys = sorted(set(halos), key=lambda h: (math.prod(2 * v + 1 for v in h), h))
    return [(h, used[[halo == h for halo in halos]]) for h in keys]


# Features of a smaller halo are computed on the window of a larger one when that window
# has at most this many times the pixels: a pyramid built once costs less than the margin.
_MERGE_RATIO = 1.1


def _merge_groups(groups, chunks):
    """``groups`` with each merged into the next larger halo's while, for chunks of ``chunks``
    pixels per axis, that window holds at most ``_MERGE_RATIO`` times its pixels (results
    unchanged: a larger halo is exact too; per-axis halos merge only into one as large on
    every axis)."""
    merged = []
    for halo, indices in reversed(groups):
        if merged:
            larger, smaller = (_per_axis(h, len(chunks)) for h in (merged[-1][0], halo))
            ratio = math.prod((c + 2 * a) / (c + 2 * b)
                              for c, a, b in zip(chunks, larger, smaller))
            if all(a >= b for a, b in zip(larger, smaller)) and ratio <= _MERGE_RATIO:
                merged[-1] = (merged[-1][0], np.concatenate([merged[-1][1], indices]))
                continue
        merged.append((halo, indices))
    return merged[::-1]


def _widest(groups, ndim):
    """The per-axis maximum of the groups' halos (one int for an image)."""
    if not groups:
        return 0 if ndim == 2 else (0,) * ndim
    halos = np.array([_per_axis(h, ndim) for h, _ in groups]).max(axis=0)
    return int(halos[0]) if ndim == 2 else tuple(int(h) for h in halos)


def model_halo(model):
    """The largest halo, in full-resolution pixels, any window of ``model`` needs.

    An int for an image model, ``(z, y, x)`` voxels for a volume model.

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify import PixelClassifier
    >>> image = np.zeros((32, 32)); image[8:24, 8:24] = 1
    >>> labels = np.zeros((32, 32), np.uint8); labels[:2] = 1; labels[14:18, 14:18] = 2
    >>> clf = PixelClassifier(["L0:intensity:c0", "L3:gauss:s1.0:c0"], n_estimators=3,
    ...                       distill_weight=0).fit(image, labels)
    >>> model_halo(clf) in (0, 24)
    True
    """
    return _widest(feature_halos(model), _geometry(model)[0])


def model_plan(model, shape, chunks, groups=None):
    """The checked `ChunkPlan` of ``model`` over an image (or volume) of spatial ``shape``.

    Its block grid is the model's coarsest pyramid block and its halo the widest of
    ``groups`` (`feature_halos`, computed if not given); ValueError if a chunk is
    smaller than the halo (`ChunkPlan.check_chunks`).

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify import PixelClassifier
    >>> volume = np.zeros((6, 24, 24)); volume[:, 8:16, 8:16] = 1
    >>> labels = np.zeros(volume.shape, np.uint8); labels[2, :2] = 1; labels[2, 10:14, 10:14] = 2
    >>> clf = PixelClassifier("fast", n_estimators=3, spacing=(16, 1, 1)).fit(volume, labels)
    >>> model_plan(clf, volume.shape, (4, 24, 24)).blocks      # z is never pooled here
    (1, 8, 8)
    """
    ndim, blocks = _geometry(model)
    groups = feature_halos(model) if groups is None else groups
    shape = tuple(int(v) for v in shape)[:ndim]
    return ChunkPlan(shape, chunks, _widest(groups, ndim), blocks[-1]).check_chunks()


def _read(image, window):
    """The window of ``image`` (anything sliceable: ndarray, zarr, h5py, dask) as an ndarray."""
    data = image[window]
    compute = getattr(data, "compute", None)     # a dask array reads lazily
    return np.asarray(compute() if callable(compute) else data)


def predict_chunk(model, image, plan, index, outputs=("class",), groups=None):
    """Predict one chunk of ``image`` exactly as predicting the whole image would.

    Parameters
    ----------
    model : PixelClassifier
        Fitted.
    image : array_like
        ``(H, W)`` or ``(H, W, C)`` (a volume model's ``(Z, Y, X[, C])``): an
        ndarray or anything sliceable that returns one (a zarr array, an h5py
        dataset, a dask array). Only the chunk's window is read.
    plan : ChunkPlan
        Over ``image``'s spatial shape, with at least `model_halo` halo (`model_plan`).
    index : tuple of int
        The chunk.
    outputs : sequence of {"class", "proba"}
        What to return, in this order (computed from one set of features and, for
        both, one walk of the trees).
    groups : list, optional
        `feature_halos` of the model (computed if not given).

    Returns
    -------
    list of ndarray
        Per output: the chunk's labels ``(h, w)`` or probabilities ``(h, w, n_classes)``
        (``(d, h, w)`` and ``(d, h, w, n_classes)`` for a volume).
    """
    ndim, blocks = _geometry(model)
    groups = feature_halos(model) if groups is None else groups
    groups = _merge_groups(groups, plan.chunks)
    for name in outputs:
        if name not in CHUNK_OUTPUTS:
            raise ValueError(f"outputs must be among {CHUNK_OUTPUTS}, got {name!r}")
    widest = _widest(groups, ndim)
    if len(plan.shape) != ndim or plan.blocks != blocks[-1]:
        raise ValueError(f"the chunk plan ({len(plan.shape)} axes, block {plan.blocks}) is not "
                         f"this model's ({ndim} axes, block {blocks[-1]}); build it with "
                         "model_plan(model, shape, chunks)")
    if any(w > h for w, h in zip(_per_axis(widest, ndim), plan.halos)):
        raise ValueError(f"the chunk plan's halo ({plan.halo} px) is smaller than the model "
                         f"needs ({widest} px); build it with halo=model_halo(model)")
    region = plan.region(index)
    outer = plan.window(index, widest)
    data = _read(image, outer)
    scale = model._intensity_scale(data)
    n_features = model.booster_.n_features
    feature_level = np.full(n_features, -1, dtype=np.int64)
    feature_slot = np.zeros(n_features, dtype=np.int64)
    per_level = [[] for _ in range(N_LEVELS)]
    padded = tuple(_round_up(s.stop - s.start, b) for s, b in zip(region, blocks[-1]))
    for halo, indices in groups:
        window = plan.window(index, halo)
        inner = tuple(slice(w.start - o.start, w.stop - o.start) for w, o in zip(window, outer))
        pyramid = (PyramidImage(data[inner], intensity_scale=scale) if ndim == 2 else
                   PyramidVolume(data[inner], model.bank_.grid, intensity_scale=scale))
        levels = model.bank_.compute_levels(pyramid, indices)
        del pyramid
        for level, array in enumerate(levels.arrays):
            if array.shape[-1] == 0:
                continue
            crop = tuple(slice((r.start - w.start) // b, (r.start - w.start + p) // b)
                         for r, w, p, b in zip(region, window, padded, blocks[level]))
            columns = levels.feature_indices[levels.columns[level]]
            feature_level[columns] = level
            feature_slot[columns] = sum(a.shape[-1] for a in per_level[level]) + \
                np.arange(columns.size)
            per_level[level].append(array[crop])
    arrays = [np.concatenate(parts, axis=-1) if parts else
              np.zeros(tuple(p // b for p, b in zip(padded, blocks[level])) + (0,), np.float32)
              for level, parts in enumerate(per_level)]
    shape = tuple(s.stop - s.start for s in region)
    crop = tuple(slice(c.start - r.start, c.stop - r.start)
                 for c, r in zip(plan.chunk(index), region))
    walk = "class+proba" if set(outputs) == set(CHUNK_OUTPUTS) else outputs[0] if outputs else None
    if walk is None:
        return []
    values = predict_multiscale(model.booster_, arrays, feature_level, feature_slot, shape,
                                output=walk, classes=model.classes_,
                                blocks=None if ndim == 2 else blocks).values
    found = dict(zip(CHUNK_OUTPUTS, values)) if walk == "class+proba" else {walk: values}
    return [np.ascontiguousarray(found[name][crop]) for name in outputs]


def predict_chunks(model, image, chunks=1024, outputs=("class",), out=None, on_chunk=None):
    """Predict a large image chunk by chunk, identical to predicting it whole.

    Memory holds one chunk's window and its features at a time, whatever the
    image's size (docs/large_images.md, *Memory*).

    Parameters
    ----------
    model : PixelClassifier
        Fitted.
    image : array_like
        ``(H, W)`` or ``(H, W, C)`` like the training frames (a volume model's
        ``(Z, Y, X[, C])``): an ndarray or a lazy array (zarr, h5py, dask,
        `msclassify.io` readers); read window by window.
    chunks : int or tuple of int, optional
        Chunk size, for all axes or per axis; at least the model's halo
        (`model_halo`), else ValueError.
    outputs : sequence of {"class", "proba"}, optional
    out : sequence of array_like, optional
        One writable array per output (numpy, zarr, ...) of the image's shape
        (``(H, W, n_classes)`` for probabilities); default new ndarrays.
    on_chunk : callable, optional
        ``on_chunk(index, plan)`` after each chunk is written.

    Returns
    -------
    list
        ``out``.

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify import PixelClassifier
    >>> rng = np.random.default_rng(0)
    >>> image = rng.normal(0.2, 0.05, (100, 90)); image[30:70, 20:60] += 0.6
    >>> labels = np.zeros((100, 90), np.uint8); labels[2:8, 2:80] = 1; labels[45:55, 35:45] = 2
    >>> clf = PixelClassifier(n_estimators=10, random_state=0).fit(image, labels)
    >>> (labels_out,) = predict_chunks(clf, image, chunks=max(model_halo(clf), 40))
    >>> bool((labels_out == clf.predict(image)).all())
    True
    """
    outputs = tuple(outputs)
    groups = feature_halos(model)
    plan = model_plan(model, image.shape, chunks, groups)
    shape = plan.shape
    if out is None:
        n_classes = len(model.classes_)
        out = [np.empty(shape, dtype=model.classes_.dtype) if name == "class" else
               np.empty(shape + (n_classes,), dtype=np.float32) for name in outputs]
    for index in plan:
        chunk = plan.chunk(index)
        for target, values in zip(out, predict_chunk(model, image, plan, index, outputs, groups)):
            target[chunk] = values
        if on_chunk is not None:
            on_chunk(index, plan)
    return out


def training_windows(image, labels, features="default", chunks=1024, spacing=None):
    """Crops of a large image around its scribbles, to train on without reading it whole.

    The label image is read chunk by chunk; for each chunk holding scribbles, the
    box around them is widened by the halo of the *candidate* features (the
    largest `msclassify.features.support_pixels` of the bank) on the block grid,
    so every scribbled pixel's features in its crop equal those of the whole
    image (the halo rule of `ChunkPlan`). Two such windows are merged into the box
    around them while that box holds no more pixels than the two apart, so the halos
    of neighbouring scribbled chunks are read (and trained on) once: the crops never
    hold more pixels than the windows of the scribbled chunks, nor than the image.
    Pass the crops to `PixelClassifier.fit`. What differs from training on the
    whole image: the pixels that stand for the
    image in the cost terms, and the distillation teacher's pixels, are drawn
    from the crops (docs/large_images.md, *Training on part of a big image*).

    Parameters
    ----------
    image, labels : array_like
        ``(H, W[, C])`` and ``(H, W)`` (0 = unlabelled), ndarrays or lazy arrays; with
        ``spacing`` a volume ``(Z, Y, X[, C])`` and ``(Z, Y, X)`` labels.
    features : str, FeatureBank or sequence of str
        The candidate features, as `PixelClassifier`'s ``features``.
    chunks : int, optional
        Size of the label chunks scanned (the labels are read one chunk at a time).
    spacing : tuple of 3 float, optional
        A volume's voxel size: the crops follow its 3D pyramid (per-axis halos of
        `msclassify.features.support_voxels`, the coarsest block's grid), e.g. the
        slices around the scribbled ones.

    Returns
    -------
    frames, label_frames : list of ndarray
        One crop of the image and of the labels per group of merged windows; each
        label crop holds only its chunks' scribbles (none is counted twice).

    Examples
    --------
    >>> import numpy as np
    >>> image = np.zeros((2000, 1500), np.uint8)
    >>> labels = np.zeros((2000, 1500), np.uint8); labels[100, 90:120] = 1; labels[1900, 7] = 2
    >>> frames, label_frames = training_windows(image, labels, "fine", chunks=512)
    >>> [f.shape for f in frames], sum(int((lab > 0).sum()) for lab in label_frames)
    ([(88, 112), (88, 48)], 31)
    """
    from ._classifier import _make_bank

    n_axes = 2 if spacing is None else 3
    shape = tuple(labels.shape[:n_axes])
    if tuple(image.shape[:n_axes]) != shape or len(labels.shape) != n_axes:
        raise ValueError(f"the image is {tuple(image.shape[:n_axes])} but the labels are "
                         f"{tuple(labels.shape)}; scribble on the image itself")
    bank = _make_bank(features, 1 if len(image.shape) == n_axes else int(image.shape[n_axes]),
                      spacing)
    if bank.grid is None:
        halo = max((support_pixels(spec) for spec in bank.specs), default=0)
        block = BLOCK
    else:
        halo = tuple(np.max([support_voxels(spec, bank.grid) for spec in bank.specs], axis=0))
        block = bank.grid.pad_multiple
    plan = ChunkPlan(shape, chunks, block=block)
    crops = []                                   # [window, [(where, values), ...]]
    for index in plan:
        chunk = plan.chunk(index)
        scribbles = np.asarray(_read(labels, chunk))
        where = np.nonzero(scribbles)
        if where[0].size == 0:
            continue
        box = tuple(slice(c.start + lo - (c.start + lo) % b, c.start + hi + 1)
                    for c, lo, hi, b in zip(chunk, (w.min() for w in where),
                                            (w.max() for w in where), plan.blocks))
        crops.append([_widen(box, shape, halo, block),
                      [(tuple(w + c.start for w, c in zip(where, chunk)), scribbles[where])]])
    if not crops:
        raise ValueError("the labels hold no scribbles (0 is unlabelled, 1, 2, ... are classes)")
    frames, label_frames = [], []
    for window, parts in _merge_windows(crops):
        crop = np.zeros(tuple(w.stop - w.start for w in window), dtype=parts[0][1].dtype)
        for where, values in parts:
            crop[tuple(w - win.start for w, win in zip(where, window))] = values
        frames.append(_read(image, window))
        label_frames.append(crop)
    return frames, label_frames


def _merge_windows(crops):
    """Merge ``[window, parts]`` crops while the box around two windows holds no more voxels
    than the two apart: neighbouring scribbled chunks, whose halos overlap, are read once.
    A merged box starts and ends where its windows do, so it keeps their block grid and their
    halos (and the image's edge rule). Each window in turn absorbs the first later window it
    may, compared with all of them at once, until none is left to absorb; passes repeat until
    one merges nothing."""
    starts = np.array([[w.start for w in window] for window, _ in crops], dtype=np.int64)
    stops = np.array([[w.stop for w in window] for window, _ in crops], dtype=np.int64)
    parts = [list(crop_parts) for _, crop_parts in crops]
    alive = np.ones(len(crops), dtype=bool)
    merged = True
    while merged:
        merged = False
        for i in np.flatnonzero(alive):
            while alive[i]:
                later = np.flatnonzero(alive[i + 1:]) + i + 1
                union = (np.maximum(stops[i], stops[later])
                         - np.minimum(starts[i], starts[later])).prod(axis=1)
                fits = union <= (stops[i] - starts[i]).prod() + (stops[later]
                                                                 - starts[later]).prod(axis=1)
                if not fits.any():
                    break
                j = later[np.argmax(fits)]
                starts[i] = np.minimum(starts[i], starts[j])
                stops[i] = np.maximum(stops[i], stops[j])
                parts[i] += parts[j]
                alive[j] = False
                merged = True
    return [[tuple(slice(int(a), int(b)) for a, b in zip(starts[i], stops[i])), parts[i]]
            for i in np.flatnonzero(alive)]


def predict_region(model, image, region, output="class"):
    """Predict one region of a large image exactly as predicting the whole image would.

    The region's window (`ChunkPlan`'s rules: block grid, the model's halo, clipped at
    the image's edges) is read and predicted, and the region cropped from it: for
    the part of an image on screen (napari's "Segment visible region").

    Parameters
    ----------
    model : PixelClassifier
    image : array_like
        ``(H, W)`` or ``(H, W, C)``, an ndarray or a lazy image (a volume model's
        ``(Z, Y, X[, C])``).
    region : tuple of slice
        Rows and columns (slices, rows and columns of a volume), within the image.
    output : {"class", "proba"}, optional

    Returns
    -------
    ndarray
        The region's labels ``(h, w)`` or probabilities ``(h, w, n_classes)``.

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify import PixelClassifier
    >>> image = np.zeros((120, 100)); image[30:90, 20:70] = 1
    >>> labels = np.zeros((120, 100), np.uint8); labels[:3] = 1; labels[50:60, 40:50] = 2
    >>> clf = PixelClassifier("fast", n_estimators=5, random_state=0).fit(image, labels)
    >>> region = (slice(25, 61), slice(13, 90))
    >>> bool((predict_region(clf, image, region) == clf.predict(image)[region]).all())
    True
    """
    ndim, blocks = _geometry(model)
    shape = tuple(image.shape[:ndim])
    region = tuple(slice(*r.indices(n)) for r, n in zip(region, shape))
    if len(region) != ndim or any(r.stop <= r.start for r in region):
        raise ValueError(f"region {region} holds no pixel of an image of shape {shape}")
    aligned = tuple(slice(r.start - r.start % b, r.stop) for r, b in zip(region, blocks[-1]))
    window = _widen(aligned, shape, model_halo(model), blocks[-1])
    data = _read(image, window)
    values = model.predict(data) if output == "class" else model.predict_proba(data)
    return values[tuple(slice(r.start - w.start, r.stop - w.start)
                        for r, w in zip(region, window))]
