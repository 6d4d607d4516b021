"""The two real accuracy sets: fly_masks_dev (fly frames, real masks) and isbi2012_em (EM slices).

Both live read-only under ``$MSCLASSIFY_SHARED_DATA`` (see its PROVENANCE.md);
nothing here is copied into the repository.

fly_masks_dev
    ``split.json`` names the video, the channel and the frame ids. The frames are
    decoded from ``fly_sleap/20190128_113421.120s.mp4`` with `msclassify.io.open_frames`
    (as a user would) and channel 0 is kept. Train frames carry
    ``scribble_NNNN.tif`` (0 unlabelled, 1 background, 2 fly), test frames
    ``gt_NNNN.tif`` (one label per fly). 1024x1024 uint8.
isbi2012_em
    ``image_K.png`` / ``label_K.png``, K = 0..14, 512x512 uint8; label 255 = cell
    interior, 0 = membrane. Slices 0-4 train (through `em_scribbles`), 5-14 test.
    Classes here: 1 = membrane, 2 = cell interior.

stardist_wheel (3D)
    ``img3d.tif`` / ``mask3d.tif``: 31x61x57 uint16 nuclei and their instance
    mask (51 nuclei), voxel spacing not recorded (treated as isotropic). Scribbles
    on 3 slices by `nuclei_scribbles`; 2 = nucleus, 1 = background.

`em_scribbles` and `nuclei_scribbles` are the committed, deterministic rules that
turn labels into strokes a person would draw (see their docstrings).
"""

import json

import numpy as np
from scipy import ndimage as ndi

from _common import SHARED_DATA

FLY_DIR = SHARED_DATA / "fly_masks_dev"
EM_DIR = SHARED_DATA / "isbi2012_em"
EM_TRAIN = (0, 1, 2, 3, 4)
EM_TEST = tuple(range(5, 15))
STARDIST_DIR = SHARED_DATA / "stardist_wheel"
NUCLEUS = 2
MEMBRANE, INTERIOR = 1, 2
BACKGROUND, FLY = 1, 2


def _read_png(path):
    import imageio.v3 as iio
    return np.asarray(iio.imread(path))


def load_fly_masks_dev(test_limit=None):
    """Train frames + scribbles and test frames + instance masks of fly_masks_dev.

    Returns a dict with ``train_images`` (list of (H, W) uint8), ``train_labels``,
    ``test_images``, ``test_masks`` (uint16 instance labels), ``train_ids``,
    ``test_ids``; ``test_limit`` keeps the first few test frames (smoke runs).
    """
    import tifffile
    from msclassify.io import open_frames
    split = json.loads((FLY_DIR / "split.json").read_text())
    train_ids, test_ids = list(split["train"]), list(split["test"])
    if test_limit is not None:
        test_ids = test_ids[:test_limit]
    channel = int(split["channel"])
    wanted = sorted(set(train_ids) | set(test_ids))
    with open_frames(str(SHARED_DATA / split["video"])) as source:
        frames = {}
        for index in wanted:
            frame = np.asarray(source[index])
            frames[index] = np.ascontiguousarray(frame[..., channel] if frame.ndim == 3 else frame)
    return {
        "train_images": [frames[i] for i in train_ids],
        "train_labels": [tifffile.imread(FLY_DIR / f"scribble_{i:04d}.tif").astype(np.uint8)
                         for i in train_ids],
        "test_images": [frames[i] for i in test_ids],
        "test_masks": [tifffile.imread(FLY_DIR / f"gt_{i:04d}.tif") for i in test_ids],
        "train_ids": train_ids, "test_ids": test_ids,
    }


def em_classes(label_png):
    """Label PNG (255 interior, 0 membrane) -> 1 = membrane, 2 = interior (uint8)."""
    return np.where(label_png > 127, INTERIOR, MEMBRANE).astype(np.uint8)


def _skeleton_branches(membrane):
    """Membrane centre lines cut at junctions: a label image of branches (8-connected)."""
    from skimage.morphology import skeletonize
    skeleton = skeletonize(membrane)
    neighbours = ndi.convolve(skeleton.astype(np.uint8), np.ones((3, 3), np.uint8),
                              mode="constant") - 1
    junction_zone = ndi.binary_dilation(skeleton & (neighbours >= 3), np.ones((3, 3), bool))
    branches, n = ndi.label(skeleton & ~junction_zone, np.ones((3, 3), int))
    return branches, n


def em_scribbles(labels, seed, n_membrane=12, membrane_length=(15, 40), n_cells=25,
                 cell_stroke=15, margin=3):
    """User-like strokes on one EM slice, from its labels; deterministic for a seed.

    The rule (what a person drawing in napari with a thin brush would do):

    * **membrane (class 1)**: ``n_membrane`` strokes along membranes. The membrane
      mask is skeletonised and the skeleton cut at its junctions into branches;
      ``n_membrane`` branches at least ``membrane_length[0]`` px long are drawn at
      random, each stroke is a run of at most ``membrane_length[1]`` px of its
      branch (starting at a random point along it), thickened to 3 px and kept
      inside the membrane mask.
    * **interior (class 2)**: ``n_cells`` cells (connected components of the
      interior, 4-connected) are drawn at random from those with a point at least
      ``2 * margin`` px from any membrane and from the image border; each gets one straight stroke of
      ``cell_stroke`` px through that deepest point along the cell's long axis,
      3 px wide, clipped to pixels at least ``margin`` px from a membrane or the border.

    Nothing near a cell outline is labelled interior and most membrane pixels
    are unlabelled, as with a real user.

    Parameters
    ----------
    labels : ndarray of uint8, (H, W)
        1 = membrane, 2 = interior (`em_classes`).
    seed : int
        Seeds the choice of branches, cells and stroke positions.

    Returns
    -------
    ndarray of uint8, (H, W): 0 unlabelled, 1 membrane, 2 interior.
    """
    rng = np.random.default_rng(seed)
    membrane = labels == MEMBRANE
    out = np.zeros(labels.shape, np.uint8)
    brush = ndi.generate_binary_structure(2, 2)

    branches, n = _skeleton_branches(membrane)
    sizes = ndi.sum_labels(np.ones_like(branches), branches, np.arange(1, n + 1))
    long_enough = np.flatnonzero(sizes >= membrane_length[0]) + 1
    chosen = rng.choice(long_enough, min(n_membrane, long_enough.size), replace=False)
    for branch in chosen:
        ys, xs = np.nonzero(branches == branch)
        order = _path_order(ys, xs)
        ys, xs = ys[order], xs[order]
        length = min(membrane_length[1], ys.size)
        start = int(rng.integers(0, ys.size - length + 1))
        stroke = np.zeros(labels.shape, bool)
        stroke[ys[start:start + length], xs[start:start + length]] = True
        out[ndi.binary_dilation(stroke, brush) & membrane] = MEMBRANE

    interior = labels == INTERIOR
    # the image border counts as an outline: nobody strokes along the edge of the image
    distance = ndi.distance_transform_edt(np.pad(interior, 1))[1:-1, 1:-1]
    cells, n_cells_total = ndi.label(interior)
    deepest = ndi.maximum_position(distance, cells, np.arange(1, n_cells_total + 1))
    depth = ndi.maximum(distance, cells, np.arange(1, n_cells_total + 1))
    candidates = np.flatnonzero(np.asarray(depth) >= 2 * margin)
    for index in rng.choice(candidates, min(n_cells, candidates.size), replace=False):
        cy, cx = deepest[index]
        ys, xs = np.nonzero(cells == index + 1)
        angle = _long_axis(ys, xs)
        t = np.linspace(-cell_stroke / 2, cell_stroke / 2, 4 * cell_stroke)
        py = np.clip(np.round(cy + t * np.sin(angle)).astype(int), 0, labels.shape[0] - 1)
        px = np.clip(np.round(cx + t * np.cos(angle)).astype(int), 0, labels.shape[1] - 1)
        stroke = np.zeros(labels.shape, bool)
        stroke[py, px] = True
        keep = ndi.binary_dilation(stroke, brush) & (distance >= margin) & (cells == index + 1)
        out[keep] = INTERIOR
    return out


def _long_axis(ys, xs):
    """Angle (radians, x towards y) of the principal axis of a pixel set."""
    if ys.size < 3:
        return 0.0
    cov = np.cov(np.stack([xs, ys]).astype(float))
    values, vectors = np.linalg.eigh(cov)
    vx, vy = vectors[:, np.argmax(values)]
    return float(np.arctan2(vy, vx))


def _path_order(ys, xs):
    """Order the pixels of a thin 8-connected branch from one end to the other (greedy walk)."""
    points = {(int(y), int(x)): i for i, (y, x) in enumerate(zip(ys, xs))}

    def neighbours(p):
        y, x = p
        return [q for q in ((y + dy, x + dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
                            if dy or dx) if q in points]
    ends = [p for p in points if len(neighbours(p)) <= 1]
    current = min(ends) if ends else min(points)
    order, seen = [], set()
    while current is not None:
        order.append(points[current])
        seen.add(current)
        following = [q for q in neighbours(current) if q not in seen]
        current = min(following) if following else None
    if len(order) < len(points):                    # loops or spurs: append the rest
        order += [i for p, i in sorted(points.items()) if p not in seen]
    return np.asarray(order)


def load_isbi2012_em(test_limit=None):
    """EM slices: train = slices 0-4 with `em_scribbles` (seed = slice index), test = 5-14.

    Returns a dict like `load_fly_masks_dev`, with ``test_labels`` (1 membrane,
    2 interior) instead of instance masks.
    """
    test_ids = list(EM_TEST if test_limit is None else EM_TEST[:test_limit])
    train_labels = [em_classes(_read_png(EM_DIR / f"label_{k}.png")) for k in EM_TRAIN]
    return {
        "train_images": [_read_png(EM_DIR / f"image_{k}.png") for k in EM_TRAIN],
        "train_labels": [em_scribbles(labels, seed=k) for k, labels in zip(EM_TRAIN, train_labels)],
        "test_images": [_read_png(EM_DIR / f"image_{k}.png") for k in test_ids],
        "test_labels": [em_classes(_read_png(EM_DIR / f"label_{k}.png")) for k in test_ids],
        "train_ids": list(EM_TRAIN), "test_ids": test_ids,
    }


def nuclei_scribbles(mask, slices, min_area=20, row_step=10, margin=3):
    """User-like strokes on a few slices of a 3D instance mask; deterministic.

    On every slice of ``slices``: one horizontal stroke through every nucleus
    section of at least ``min_area`` px, along the row of its centroid, kept 1 px
    inside the section (class 2); background strokes along every ``row_step``-th
    row (rows 4, 14, ...), on pixels at least ``margin`` px from any nucleus of
    the slice (class 1). Other slices stay unlabelled.

    Parameters
    ----------
    mask : ndarray of int, (Z, Y, X)
        Instance labels, 0 = background.
    slices : sequence of int
        The slices scribbled on.

    Returns
    -------
    ndarray of uint8, (Z, Y, X): 0 unlabelled, 1 background, 2 nucleus.
    """
    out = np.zeros(mask.shape, np.uint8)
    for z in slices:
        section = mask[z]
        background = ndi.distance_transform_edt(section == 0) >= margin
        rows = np.zeros(section.shape, bool)
        rows[4::row_step] = True
        out[z][background & rows] = BACKGROUND
        for label in np.unique(section[section > 0]):
            nucleus = section == label
            if nucleus.sum() < min_area:
                continue
            inside = ndi.binary_erosion(nucleus)
            row = int(round(np.nonzero(nucleus)[0].mean()))
            out[z, row][inside[row]] = NUCLEUS
    return out


def load_stardist_3d():
    """The 3D nuclei stack, its instance mask and `nuclei_scribbles` on slices Z/4, Z/2, 3Z/4."""
    import tifffile
    image = tifffile.imread(STARDIST_DIR / "img3d.tif")
    mask = tifffile.imread(STARDIST_DIR / "mask3d.tif").astype(np.int64)
    depth = image.shape[0]
    slices = (depth // 4, depth // 2, 3 * depth // 4)
    return {"image": image, "mask": mask, "scribbles": nuclei_scribbles(mask, slices),
            "slices": slices, "spacing": (1.0, 1.0, 1.0)}
