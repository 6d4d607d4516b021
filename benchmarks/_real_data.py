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

fly_larvae_dev
    ``img_K.png`` (1380x925 RGB photos of soldier-fly larvae among feed) and
    ``img_K_mask.png`` (0 = not larva, one grey value per larva; instances are the
    connected components of each value). img_1 trains, img_2 tests. Classes: 1 =
    background (feed, tray), 2 = larva.

`em_scribbles` and `nuclei_scribbles` are the committed, deterministic rules that
turn labels into strokes a person would draw (see their docstrings).

Scribble styles (`STYLES`; `style_scribbles` draws them from a class map)
------------------------------------------------------------------------
Every set is benchmarked under several ways of scribbling, drawn by fixed rules
from the real masks (the same rules on every set, deterministic for a seed):

``user``
    fly_masks_dev only: the scribbles a person drew on its 10 train frames.
``balanced``
    isbi2012_em: `em_scribbles` (the benchmark's original generator). Other
    sets: `balanced_scribbles`, the same idea for any class map: every class
    gets the same number of 3-px strokes, along the centre line for a thin
    class (membranes), through deep points of its regions otherwise.
``thin``
    `thin_scribbles`: what a user with a 1-px brush does on thin or small
    structures: every class but the largest gets 1-px strokes along the centre
    line (skeleton) of its regions; the largest class gets broad 7-px strokes
    until it has `THIN_RATIO` (7) times as many labelled pixels as each other class.
``clicks``
    `click_scribbles`: a handful of clicks: per frame and class,
    `N_CLICKS` (3) short strokes (7 px long, 3 px wide) at deep points.

Draws: a generated style is drawn with seed ``frame id + DRAW_SEED_STEP x draw``
(``draw=0``, the default, is the original seed). One draw is one sample of how a
person might scribble: with a handful of strokes the scores of one draw swing
by ±0.05-0.1 (docs/scribbles.md, section 8), so the benchmark averages draws.

The generated styles need a class map, so on fly_masks_dev (whose train frames
carry scribbles but no masks) they are drawn on its first 5 test frames and
scored on the last 5 (`FLY_STYLE_TRAIN`, `FLY_STYLE_TEST`); ``user`` keeps the
original split (10 train frames, 10 test frames).
"""

import json

import numpy as np
from scipy import ndimage as ndi

from _common import SHARED_DATA

FLY_DIR = SHARED_DATA / "fly_masks_dev"
EM_DIR = SHARED_DATA / "isbi2012_em"
LARVAE_DIR = SHARED_DATA / "fly_larvae_dev"
LARVAE_TRAIN, LARVAE_TEST = (1,), (2,)
STYLES = ("user", "balanced", "thin", "clicks")
THIN_RATIO = 7
N_CLICKS = 3
DRAW_SEED_STEP = 1000
EM_TRAIN = (0, 1, 2, 3, 4)
EM_TEST = tuple(range(5, 15))
STARDIST_DIR = SHARED_DATA / "stardist_wheel"
NUCLEUS = 2
MEMBRANE, INTERIOR = 1, 2
BACKGROUND, FLY = 1, 2
LARVA = 2


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
        stroke = _line(labels.shape, cy, cx, _long_axis(ys, xs), cell_stroke)
        keep = ndi.binary_dilation(stroke, brush) & (distance >= margin) & (cells == index + 1)
        out[keep] = INTERIOR
    return out


def _line(shape, cy, cx, angle, length):
    """A 1-px straight line of ``length`` px centred on (cy, cx) at ``angle``, clipped to ``shape``."""
    t = np.linspace(-length / 2, length / 2, 4 * length)
    py = np.clip(np.round(cy + t * np.sin(angle)).astype(int), 0, shape[0] - 1)
    px = np.clip(np.round(cx + t * np.cos(angle)).astype(int), 0, shape[1] - 1)
    out = np.zeros(shape, bool)
    out[py, px] = True
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


def load_isbi2012_em(test_limit=None, draw=0):
    """EM slices: train = slices 0-4 with `em_scribbles` (seed = slice index + ``DRAW_SEED_STEP``
    x ``draw``), test = 5-14.

    Returns a dict like `load_fly_masks_dev`, with ``test_labels`` (1 membrane,
    2 interior) instead of instance masks.
    """
    test_ids = list(EM_TEST if test_limit is None else EM_TEST[:test_limit])
    train_labels = [em_classes(_read_png(EM_DIR / f"label_{k}.png")) for k in EM_TRAIN]
    return {
        "train_images": [_read_png(EM_DIR / f"image_{k}.png") for k in EM_TRAIN],
        "train_labels": [em_scribbles(labels, seed=k + DRAW_SEED_STEP * draw)
                         for k, labels in zip(EM_TRAIN, train_labels)],
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


# ------------------------------------------------------------------------- scribble styles

def _is_thin(mask, margin):
    """A class is thin when 90% of its pixels lie within ``2 * margin`` px of another class."""
    if not mask.any():
        return False
    depth = ndi.distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1]
    return float(np.percentile(depth[mask], 90)) < 2 * margin


def _centre_line_strokes(mask, rng, n, max_length, min_length=5):
    """``n`` runs (at most ``max_length`` px) of the skeleton branches of ``mask``, 1 px wide."""
    branches, count = _skeleton_branches(mask)
    if count == 0:
        return np.zeros(mask.shape, bool)
    sizes = ndi.sum_labels(np.ones_like(branches), branches, np.arange(1, count + 1))
    eligible = np.flatnonzero(sizes >= min_length) + 1
    if eligible.size == 0:
        eligible = np.arange(1, count + 1)
    out = np.zeros(mask.shape, bool)
    objects = ndi.find_objects(branches)
    for branch in rng.choice(eligible, min(n, eligible.size), replace=False):
        window = objects[branch - 1]
        ys, xs = np.nonzero(branches[window] == branch)
        ys, xs = ys + window[0].start, xs + window[1].start
        order = _path_order(ys, xs)
        ys, xs = ys[order], xs[order]
        length = min(max_length, ys.size)
        start = int(rng.integers(0, ys.size - length + 1))
        out[ys[start:start + length], xs[start:start + length]] = True
    return out


def _deep_strokes(mask, rng, n, length, width, margin):
    """``n`` straight strokes inside ``mask``: through the deepest point of random regions
    (one per region first), then through random points at least ``2 * margin`` px deep;
    along the region's long axis (a random angle for a region larger than a quarter of
    the frame), ``width`` px wide, clipped to pixels at least ``margin`` px from the
    region's outline and the image border. Yields the strokes one by one."""
    depth = ndi.distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1]
    regions, n_regions = ndi.label(mask)
    if n_regions == 0:
        return
    index = np.arange(1, n_regions + 1)
    deepest = ndi.maximum_position(depth, regions, index)
    region_depth = np.asarray(ndi.maximum(depth, regions, index))
    wanted = 2 * margin
    candidates = np.flatnonzero(region_depth >= wanted)
    if candidates.size == 0:                           # shallow class: its deepest regions
        wanted = float(region_depth.max())
        candidates = np.flatnonzero(region_depth >= wanted)
    centres = [(deepest[i], i + 1) for i in rng.permutation(candidates)[:n]]
    if len(centres) < n:
        ys, xs = np.nonzero(depth >= wanted)
        for k in rng.choice(ys.size, min(n - len(centres), ys.size), replace=False):
            centres.append(((ys[k], xs[k]), regions[ys[k], xs[k]]))
    objects = ndi.find_objects(regions)
    brush = np.ones((width, width), bool)
    clip = min(margin, wanted / 2)
    for (cy, cx), region in centres:
        window = objects[region - 1]
        if (window[0].stop - window[0].start) * (window[1].stop - window[1].start) \
                > mask.size / 4:
            angle = float(rng.uniform(0, np.pi))
        else:
            ys, xs = np.nonzero(regions[window] == region)
            angle = _long_axis(ys, xs)
        stroke = _line(mask.shape, cy, cx, angle, length)
        yield ndi.binary_dilation(stroke, brush) & (depth >= clip) & (regions == region)


def balanced_scribbles(classes, seed, n_strokes=15, length=25, margin=3):
    """The same stroke budget for every class: ``n_strokes`` strokes, 3 px wide.

    A thin class (`_is_thin`: membranes) is stroked along its centre line (runs of
    at most 40 px of its skeleton branches, thickened to 3 px and kept inside the
    class); any other class gets straight ``length``-px strokes through deep points
    (`_deep_strokes`, ``margin`` px from its outline). Classes are values >= 1 of
    ``classes``; returns uint8 strokes (0 unlabelled).
    """
    return _strokes_per_class(classes, np.random.default_rng(seed), n_strokes, 40, length, margin)


def _strokes_per_class(classes, rng, n, thin_length, length, margin):
    """``n`` 3-px strokes per class: along the centre line of a thin class (runs of at most
    ``thin_length`` px), straight ``length``-px strokes through deep points otherwise."""
    out = np.zeros(classes.shape, np.uint8)
    brush = np.ones((3, 3), bool)
    for value in np.unique(classes[classes > 0]):
        mask = classes == value
        if _is_thin(mask, margin):
            stroke = ndi.binary_dilation(_centre_line_strokes(mask, rng, n, thin_length), brush)
            out[stroke & mask] = value
        else:
            for stroke in _deep_strokes(mask, rng, n, length, 3, margin):
                out[stroke] = value
    return out


def thin_scribbles(classes, seed, n_lines=12, max_length=40, ratio=THIN_RATIO, width=7,
                   length=40, margin=3):
    """Thin centre-line strokes on the smaller classes, broad strokes on the largest.

    Every class but the one with the most pixels gets ``n_lines`` runs of at most
    ``max_length`` px along the skeleton branches of its regions, 1 px wide (a thin
    brush drawn along membranes, larvae, flies). The largest class (cell interior,
    background) gets ``width``-px strokes of ``length`` px through deep points
    (`_deep_strokes`) until it holds ``ratio`` times as many labelled pixels as the
    other classes have on average: about 7:1, what the issue measured users draw.
    """
    rng = np.random.default_rng(seed)
    out = np.zeros(classes.shape, np.uint8)
    values, counts = np.unique(classes[classes > 0], return_counts=True)
    largest = values[np.argmax(counts)]
    thin_pixels = []
    for value in values:
        if value != largest:
            stroke = _centre_line_strokes(classes == value, rng, n_lines, max_length)
            out[stroke] = value
            thin_pixels.append(int(stroke.sum()))
    target = ratio * max(np.mean(thin_pixels), 1)
    drawn = 0
    for stroke in _deep_strokes(classes == largest, rng, 200, length, width, margin):
        stroke &= out == 0
        out[stroke] = largest
        drawn += int(stroke.sum())
        if drawn >= target:
            break
    return out


def click_scribbles(classes, seed, n_clicks=N_CLICKS, length=7, margin=3):
    """A handful of clicks: ``n_clicks`` strokes of ``length`` px, 3 px wide, per class.

    Thin classes are clicked on their centre line (kept inside the class), other
    classes at deep points (`_deep_strokes`).
    """
    return _strokes_per_class(classes, np.random.default_rng(seed), n_clicks, length, length,
                              margin)


def style_scribbles(classes, style, seed):
    """Scribbles of ``style`` ("balanced", "thin", "clicks") drawn from a class map."""
    rules = {"balanced": balanced_scribbles, "thin": thin_scribbles, "clicks": click_scribbles}
    return rules[style](classes, seed)


FLY_STYLE_TRAIN, FLY_STYLE_TEST = slice(0, 5), slice(5, 10)


def load_fly_style(style, test_limit=None, draw=0):
    """fly_masks_dev under a scribble ``style``: ``"user"`` = `load_fly_masks_dev` (one
    draw only); a generated style trains on strokes drawn from the masks of its first 5
    test frames (seed = frame id + ``DRAW_SEED_STEP`` x ``draw``) and tests on the last 5."""
    if style == "user":
        if draw:
            raise ValueError("fly_masks_dev's user scribbles are one draw; draw must be 0")
        return load_fly_masks_dev(test_limit)
    data = load_fly_masks_dev()
    train_ids = data["test_ids"][FLY_STYLE_TRAIN]
    train_masks = data["test_masks"][FLY_STYLE_TRAIN]
    test = slice(FLY_STYLE_TEST.start, FLY_STYLE_TEST.stop if test_limit is None
                 else FLY_STYLE_TEST.start + test_limit)
    return {
        "train_images": data["test_images"][FLY_STYLE_TRAIN],
        "train_labels": [style_scribbles(np.where(m > 0, FLY, BACKGROUND).astype(np.uint8),
                                         style, seed=i + DRAW_SEED_STEP * draw)
                        for i, m in zip(train_ids, train_masks)],
        "test_images": data["test_images"][test], "test_masks": data["test_masks"][test],
        "train_ids": train_ids, "test_ids": data["test_ids"][test],
    }


def load_em_style(style, test_limit=None, draw=0):
    """isbi2012_em under a scribble ``style`` ("balanced" = `em_scribbles`, as in
    `load_isbi2012_em`); seed = slice index + ``DRAW_SEED_STEP`` x ``draw``."""
    data = load_isbi2012_em(test_limit, draw)
    if style != "balanced":
        data["train_labels"] = [style_scribbles(em_classes(_read_png(EM_DIR / f"label_{k}.png")),
                                                style, seed=k + DRAW_SEED_STEP * draw)
                                for k in EM_TRAIN]
    return data


def larvae_instances(mask_png):
    """Instance labels of a fly_larvae_dev mask: connected components of each grey value."""
    grey = mask_png[..., 0] if mask_png.ndim == 3 else mask_png
    out = np.zeros(grey.shape, np.int32)
    for value in np.unique(grey[grey > 0]):
        regions, n = ndi.label(grey == value)
        out[regions > 0] = regions[regions > 0] + out.max()
    return out


def load_fly_larvae_dev(style="balanced", test_limit=None, draw=0):
    """fly_larvae_dev: img_1 trains (strokes of ``style`` from its mask, seed 1 +
    ``DRAW_SEED_STEP`` x ``draw``), img_2 tests.

    Returns a dict like `load_fly_masks_dev` (``test_masks``: larva instances);
    images are (925, 1380, 3) uint8 RGB. ``test_limit`` is accepted for symmetry.
    """
    def classes(k):
        return np.where(larvae_instances(_read_png(LARVAE_DIR / f"img_{k}_mask.png")) > 0,
                        LARVA, BACKGROUND).astype(np.uint8)
    return {
        "train_images": [_read_png(LARVAE_DIR / f"img_{k}.png")[..., :3] for k in LARVAE_TRAIN],
        "train_labels": [style_scribbles(classes(k), style, seed=k + DRAW_SEED_STEP * draw)
                         for k in LARVAE_TRAIN],
        "test_images": [_read_png(LARVAE_DIR / f"img_{k}.png")[..., :3] for k in LARVAE_TEST],
        "test_masks": [larvae_instances(_read_png(LARVAE_DIR / f"img_{k}_mask.png"))
                       for k in LARVAE_TEST],
        "train_ids": list(LARVAE_TRAIN), "test_ids": list(LARVAE_TEST),
    }
