"""Segmentation scores: the Cell Tracking Challenge SEG of instance label images."""

from typing import NamedTuple

import numpy as np
from scipy import sparse
from skimage.measure import label as _connected_components
from skimage.segmentation import relabel_sequential


class SegResult(NamedTuple):
    """Detail of a SEG evaluation (see `seg_score`).

    Attributes
    ----------
    score : float
        Mean Jaccard index over the reference objects of all frames; NaN when
        the reference holds no object at all.
    per_frame : ndarray of float, shape (T,)
        Mean Jaccard index of each frame's reference objects; NaN for frames
        without reference objects.
    n_objects : ndarray of int, shape (T,)
        Number of reference objects in each frame.
    jaccard : tuple of T ndarrays
        Jaccard index of every reference object of each frame, in increasing
        order of its label (0 for an unmatched object).
    """

    score: float
    per_frame: np.ndarray
    n_objects: np.ndarray
    jaccard: tuple


def seg_score(reference, segmentation, per_frame=False, *, volume=False):
    """Cell Tracking Challenge SEG score of an instance segmentation.

    Each reference object R (label > 0) is matched to the segmented object S
    (label > 0) that covers more than half of it, ``|R ∩ S| > 0.5 |R|`` (at
    most one S can); its score is the Jaccard index ``|R ∩ S| / |R ∪ S|``, or 0
    when no S qualifies (exactly half is not enough). SEG is the mean over the
    reference objects of all frames, so a frame with many objects weighs more;
    frames without reference objects add nothing to the mean and get NaN in
    ``per_frame``. Segmented objects that match nothing are not penalised
    (that is what the CTC's DET measure is for). Labels need not be
    consecutive and the two images' labels need not correspond.

    Parameters
    ----------
    reference, segmentation : array_like of int
        Instance label images, 0 = background: one 2-D frame, a (T, H, W)
        stack of frames (also a zarr or dask array, read one frame at a
        time), or a sequence of 2-D frames (shapes may differ between frames
        but must agree between `reference` and `segmentation`). A 3-D array
        is always read as frames of a video, never as a volume. Boolean
        (semantic) masks are refused: convert them with `label_instances`.
    per_frame : bool, optional
        If True, return a `SegResult` with per-frame and per-object values
        instead of the overall score alone.
    volume : bool, optional
        The label images are volumes: one ``(Z, Y, X)`` array, a ``(T, Z, Y, X)``
        series or a sequence of volumes; objects are 3-D (a "frame" is a volume).

    Returns
    -------
    float or SegResult
        SEG in [0, 1] (NaN if the reference has no objects), or the detail.

    Raises
    ------
    TypeError
        Non-integer or boolean label images.
    ValueError
        Negative labels, wrong dimensions, or frame counts or shapes that
        differ between `reference` and `segmentation`.

    Examples
    --------
    >>> import numpy as np
    >>> reference = np.array([[1, 1, 1, 1, 0, 2, 2]])
    >>> segmentation = np.array([[5, 5, 5, 0, 0, 7, 0]])
    >>> seg_score(reference, segmentation)  # (3/4 + 0) / 2: object 2 is only half covered
    0.375
    >>> seg_score(reference, segmentation, per_frame=True).jaccard
    (array([0.75, 0.  ]),)
    """
    ndim = 3 if volume else 2
    reference_frames = _frames(reference, "reference", ndim)
    segmentation_frames = _frames(segmentation, "segmentation", ndim)
    if len(reference_frames) != len(segmentation_frames):
        raise ValueError(f"reference has {len(reference_frames)} frames but segmentation has "
                         f"{len(segmentation_frames)}; pass one segmentation per reference frame")
    jaccard = []
    for t in range(len(reference_frames)):
        ref = _label_image(reference_frames[t], "reference", t, ndim)
        seg = _label_image(segmentation_frames[t], "segmentation", t, ndim)
        if ref.shape != seg.shape:
            raise ValueError(f"frame {t}: reference shape {ref.shape} differs from segmentation "
                             f"shape {seg.shape}")
        jaccard.append(_reference_jaccard(ref, seg))
    n_objects = np.array([len(j) for j in jaccard], dtype=np.int64)
    total = n_objects.sum()
    score = float(np.concatenate(jaccard).sum() / total) if total else float("nan")
    if not per_frame:
        return score
    frame_means = np.array([j.mean() if len(j) else np.nan for j in jaccard])
    return SegResult(score, frame_means, n_objects, tuple(jaccard))


def _reference_jaccard(ref, seg):
    """Jaccard index of each reference object (increasing label order) with its SEG match."""
    ref, _, _ = relabel_sequential(ref)
    seg, _, _ = relabel_sequential(seg)
    ref, seg = ref.ravel(), seg.ravel()
    n_ref, n_seg = int(ref.max(initial=0)), int(seg.max(initial=0))
    ref_area = np.bincount(ref, minlength=n_ref + 1)
    seg_area = np.bincount(seg, minlength=n_seg + 1)
    both = (ref > 0) & (seg > 0)
    # sparse contingency table: summing duplicate (ref, seg) pairs counts the overlaps
    overlap = sparse.coo_matrix((np.ones(np.count_nonzero(both), np.int64), (ref[both], seg[both])),
                                shape=(n_ref + 1, n_seg + 1))
    overlap.sum_duplicates()
    r, s, inter = overlap.row, overlap.col, overlap.data
    # integer test of |R ∩ S| > 0.5 |R|, so exactly half never matches
    matched = 2 * inter > ref_area[r]
    r, s, inter = r[matched], s[matched], inter[matched]
    jaccard = np.zeros(n_ref + 1)
    jaccard[r] = inter / (ref_area[r] + seg_area[s] - inter)
    return jaccard[1:]


def label_instances(mask, foreground=None, connectivity=None, *, volume=False):
    """Split a semantic mask into instances: one label per connected component.

    Use it to score a fly / background prediction with `seg_score`. A 3-D
    array is a stack of frames: each frame is labelled on its own (labels
    restart at 1 in every frame), so objects never connect across time.

    Parameters
    ----------
    mask : array_like
        One 2-D frame, a (T, H, W) stack or a sequence of 2-D frames. Without
        `foreground` it must be boolean or hold only 0 and 1.
    foreground : int or sequence of int, optional
        The class value(s) that form objects, e.g. ``2`` for the fly class of
        a predicted label image with 1 = background and 2 = fly.
    connectivity : int, optional
        1 joins pixels along edges only (4-neighbourhood in 2-D), 2 also
        along diagonals (8-neighbourhood, the default in 2-D), as in
        `skimage.measure.label`; in volumes 1 (the default), 2 or 3.
    volume : bool, optional
        ``mask`` holds volumes (one ``(Z, Y, X)``, a ``(T, Z, Y, X)`` series or a
        sequence): objects connect in 3-D, by default through their faces only
        (6 neighbours; connectivity 1, the default of `scipy.ndimage.label` and
        of vigra, ilastik's library); 2: 18 neighbours, 3: 26 (the default of
        `skimage.measure.label`). Why faces: the background a classifier
        predicts between two touching objects is often one voxel thick, and a
        one-voxel-thick digital surface at an oblique angle (a naive digital
        plane) keeps only the 6-connected sides apart; paths through voxel
        edges or corners (18- or 26-connected) cross it. One such crossing
        anywhere on the contact merges two nuclei,
        and a contact surface in 3-D has many voxels where a contact line in
        2-D has few.

    Returns
    -------
    ndarray of int32 or list of them
        Instance labels shaped like `mask` (a list for a list input).

    Examples
    --------
    >>> import numpy as np
    >>> prediction = np.array([[2, 2, 1, 2],
    ...                        [1, 1, 1, 2]])
    >>> label_instances(prediction, foreground=2)
    array([[1, 1, 0, 2],
           [0, 0, 0, 2]], dtype=int32)

    Two cubes of a volume that touch along one edge only are two objects,
    one with ``connectivity=3``:

    >>> cubes = np.zeros((4, 4, 4), int)
    >>> cubes[:2, :2, :2] = cubes[2:, 2:, :2] = 1
    >>> [int(label_instances(cubes, volume=True, connectivity=c).max()) for c in (None, 2, 3)]
    [2, 1, 1]
    """
    ndim = 3 if volume else 2
    if connectivity not in (None, *range(1, ndim + 1)):
        raise ValueError(f"connectivity must be None or 1..{ndim}, got {connectivity!r}")
    if volume and connectivity is None:
        connectivity = 1
    frames = _frames(mask, "mask", ndim)
    labelled = [_connected_components(_objects(frames[t], foreground, t, ndim),
                                      connectivity=connectivity).astype(np.int32)
                for t in range(len(frames))]
    if isinstance(mask, (list, tuple)):
        return labelled
    return labelled[0] if np.ndim(mask) == ndim else np.stack(labelled)


def _objects(frame, foreground, t, ndim=2):
    frame = np.asarray(frame)
    if frame.ndim != ndim:
        raise ValueError(f"mask frame {t} must be {ndim}-D, got shape {frame.shape}")
    if foreground is not None:
        return np.isin(frame, foreground)
    if frame.dtype == bool:
        return frame
    values = np.unique(frame)
    if not np.isin(values, (0, 1)).all():
        shown = ", ".join(str(v) for v in values[:6]) + (", ..." if len(values) > 6 else "")
        raise ValueError(f"mask frame {t} holds the values {shown}, not just 0/1; pass "
                         "foreground=<class value> (e.g. foreground=2 for the fly class)")
    return frame == 1


def _frames(images, name, ndim=2):
    """Index-able sequence of 2-D frames (volumes, ``ndim=3``) from one frame, a (T, H, W)
    stack or a sequence."""
    if isinstance(images, (list, tuple)):
        if not images:
            raise ValueError(f"{name} is an empty sequence; pass at least one frame")
        return images
    if not hasattr(images, "ndim"):
        images = np.asarray(images)
    if images.ndim == ndim:
        return [images]
    if images.ndim == ndim + 1:
        if images.shape[0] == 0:
            raise ValueError(f"{name} has no frames (shape {images.shape})")
        return images
    if ndim == 3:
        raise ValueError(f"{name} must be a (Z, Y, X) label volume, a (T, Z, Y, X) series or a "
                         f"sequence of volumes, got shape {images.shape}")
    raise ValueError(f"{name} must be a 2-D label image, a (T, H, W) stack or a sequence of "
                     f"2-D frames, got shape {images.shape}")


def _label_image(frame, name, t, ndim=2):
    frame = np.asarray(frame)
    if frame.ndim != ndim:
        raise ValueError(f"{name} frame {t} must be {ndim}-D, got shape {frame.shape}")
    if frame.dtype == bool:
        raise TypeError(f"{name} frame {t} is a boolean (semantic) mask; SEG needs one label per "
                        "object: convert it with msclassify.metrics.label_instances(mask)")
    if not np.issubdtype(frame.dtype, np.integer):
        raise TypeError(f"{name} frame {t} has dtype {frame.dtype}; label images must be integer "
                        "(cast with .astype(np.int64) if the values are whole numbers)")
    if frame.size and frame.min() < 0:
        raise ValueError(f"{name} frame {t} has negative labels (min {frame.min()}); use 0 for "
                         "background and positive labels for objects")
    return frame
