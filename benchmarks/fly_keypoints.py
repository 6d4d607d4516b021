"""The SLEAP fly clip as a segmentation benchmark: keypoints -> scribbles and derived masks.

``shared/data/fly_sleap/clip.mp4`` (1024x1024, 1500 frames, 2 flies) comes with
SLEAP keypoints (``clip.slp``: 13 per fly, every frame) but **no segmentation**.
This module turns the keypoints into what the benchmark needs, documented so
that the numbers can be judged:

Scribbles (training labels, what a user would draw): 1 = background, 2 = fly.
    Fly strokes (3 px wide) along head - thorax - abdomen and from the thorax 80%
    of the way to each wing tip; background strokes on a loose outline 8 px
    outside the convex hull of each fly's 13 keypoints (leg and wing tips are
    hull corners, so the outline runs outside the legs and wings), and a few
    random straight strokes across the arena. Background pixels closer than
    4 px to any fly's keypoint hull are dropped, so an outline never crosses
    the other fly.

Derived masks (evaluation reference), **not manual ground truth**:
    the frame smoothed by a Gaussian (sigma 1) is thresholded at
    ``background + 0.15 (body - background)``, where background is the frame's
    median and body the median of the smoothed frame at the flies' head,
    thorax and abdomen keypoints (a cut that keeps the grey, semi-transparent
    wings); holes are filled, and only the connected components that hold a
    body keypoint are kept. Touching flies are separated by a watershed of
    the inverted smoothed image seeded with each fly's head - thorax - abdomen
    line. The threshold rule makes these masks favour methods that reproduce
    a brightness cut; legs thinner than the smoothing may be lost.

Keypoint order: the points of an instance follow ``metadata.skeletons[0].nodes``
(node ids into ``metadata.nodes``), see shared/data/PROVENANCE.md.
"""

import json
from pathlib import Path

import numpy as np
from scipy import ndimage as ndi
from scipy.spatial import ConvexHull
from skimage import draw, filters, measure, segmentation

BACKGROUND, FLY = 1, 2
BODY_NODES = ("head", "thorax", "abdomen")
WING_NODES = ("wingL", "wingR")
OUTLINE_MARGIN = 8
OTHER_FLY_CLEARANCE = 4
STROKE_RADIUS = 1
THRESHOLD_FRACTION = 0.15


def read_keypoints(slp_path):
    """Keypoints of every frame: ``(points, node_names)``.

    Returns
    -------
    points : ndarray of float64, shape (n_frames, n_instances, n_nodes, 2)
        ``(x, y)`` in pixels, NaN where a point is missing; instances are ordered
        by track (identity).
    node_names : list of str
        Names of the nodes in the order of axis 2.
    """
    import h5py
    with h5py.File(slp_path, "r") as f:
        meta = json.loads(f["metadata"].attrs["json"])
        node_names = [meta["nodes"][node["id"]]["name"] for node in meta["skeletons"][0]["nodes"]]
        frames = f["frames"][:]
        instances = f["instances"][:]
        raw = f["points"][:]
    n_nodes = len(node_names)
    n_instances = int((frames["instance_id_end"] - frames["instance_id_start"]).max())
    n_frames = int(frames["frame_idx"].max()) + 1
    points = np.full((n_frames, n_instances, n_nodes, 2), np.nan)
    for frame in frames:
        for instance in instances[frame["instance_id_start"]:frame["instance_id_end"]]:
            slot = int(instance["track"])
            p = raw[instance["point_id_start"]:instance["point_id_end"]]
            xy = np.column_stack([p["x"], p["y"]])
            xy[~p["visible"]] = np.nan
            points[frame["frame_idx"], slot] = xy
    return points, node_names


def read_frames(video_path, indices):
    """Gray uint8 frames of the video at ``indices`` (decoded in order), as a (T, H, W) stack."""
    import av
    wanted = sorted(set(int(i) for i in indices))
    found = {}
    with av.open(str(video_path)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i in wanted:
                found[i] = frame.to_ndarray(format="gray")
            if i >= wanted[-1]:
                break
    missing = [i for i in wanted if i not in found]
    if missing:
        raise ValueError(f"{video_path} has no frames {missing[:5]}")
    return np.stack([found[int(i)] for i in indices])


def _node(names, name):
    return names.index(name)


def _stroke(mask, start, end):
    """Set the 1-px line from ``start`` to ``end`` (x, y) in ``mask``; skip missing points."""
    if np.any(np.isnan(start)) or np.any(np.isnan(end)):
        return
    rr, cc = draw.line(int(round(start[1])), int(round(start[0])),
                       int(round(end[1])), int(round(end[0])))
    inside = (rr >= 0) & (rr < mask.shape[0]) & (cc >= 0) & (cc < mask.shape[1])
    mask[rr[inside], cc[inside]] = True


def _hull_mask(points, shape):
    """Filled convex hull of one fly's valid keypoints."""
    valid = points[~np.isnan(points).any(axis=1)]
    mask = np.zeros(shape, dtype=bool)
    if len(valid) < 3:
        return mask
    hull = valid[ConvexHull(valid).vertices]
    rr, cc = draw.polygon(hull[:, 1], hull[:, 0], shape)
    mask[rr, cc] = True
    return mask


def scribbles(shape, keypoints, node_names, rng, n_random_strokes=6):
    """User-style labels for one frame from its keypoints (see the module docstring).

    Parameters
    ----------
    shape : (int, int)
    keypoints : ndarray, shape (n_instances, n_nodes, 2)
    node_names : list of str
    rng : numpy Generator
        For the random background strokes.

    Returns
    -------
    ndarray of uint8, shape ``shape``: 0 unlabelled, 1 background, 2 fly.
    """
    fly_lines = np.zeros(shape, dtype=bool)
    head, thorax, abdomen = (_node(node_names, n) for n in BODY_NODES)
    for fly in keypoints:
        _stroke(fly_lines, fly[head], fly[thorax])
        _stroke(fly_lines, fly[thorax], fly[abdomen])
        for wing in WING_NODES:
            tip = fly[_node(node_names, wing)]
            _stroke(fly_lines, fly[thorax], fly[thorax] + 0.8 * (tip - fly[thorax]))
    hulls = np.zeros(shape, dtype=bool)
    for fly in keypoints:
        hulls |= _hull_mask(fly, shape)
    distance_to_flies = ndi.distance_transform_edt(~hulls)
    background = (distance_to_flies >= OUTLINE_MARGIN) & (distance_to_flies < OUTLINE_MARGIN + 1.5)
    random_lines = np.zeros(shape, dtype=bool)
    for _ in range(n_random_strokes):
        start = rng.uniform(0, 1, 2) * np.array([shape[1], shape[0]])
        angle = rng.uniform(0, np.pi)
        length = rng.uniform(100, 300)
        end = start + length * np.array([np.cos(angle), np.sin(angle)])
        _stroke(random_lines, start, end)
    background |= random_lines
    labels = np.zeros(shape, dtype=np.uint8)
    thick = ndi.generate_binary_structure(2, 1)
    labels[ndi.binary_dilation(background, thick, STROKE_RADIUS)] = BACKGROUND
    labels[distance_to_flies < OTHER_FLY_CLEARANCE] = 0
    labels[ndi.binary_dilation(fly_lines, thick, STROKE_RADIUS)] = FLY
    return labels


def derived_instances(frame, keypoints, node_names):
    """Instance mask derived from the frame and its keypoints (see the module docstring).

    Returns
    -------
    ndarray of uint16: 0 background, fly ``k + 1`` for instance ``k``.
    """
    smooth = filters.gaussian(frame.astype(np.float64), sigma=1, preserve_range=True)
    body = [_node(node_names, n) for n in BODY_NODES]
    body_points = keypoints[:, body].reshape(-1, 2)
    body_points = body_points[~np.isnan(body_points).any(axis=1)]
    rows = np.clip(np.round(body_points[:, 1]).astype(int), 0, frame.shape[0] - 1)
    cols = np.clip(np.round(body_points[:, 0]).astype(int), 0, frame.shape[1] - 1)
    background_level = np.median(smooth)
    body_level = np.median(smooth[rows, cols])
    foreground = smooth > background_level + THRESHOLD_FRACTION * (body_level - background_level)
    foreground = ndi.binary_fill_holes(foreground)
    components = measure.label(foreground)
    keep = np.unique(components[rows, cols])
    foreground = np.isin(components, keep[keep > 0])
    markers = np.zeros(frame.shape, dtype=np.int32)
    head, thorax, abdomen = body
    for k, fly in enumerate(keypoints):
        line = np.zeros(frame.shape, dtype=bool)
        _stroke(line, fly[head], fly[thorax])
        _stroke(line, fly[thorax], fly[abdomen])
        markers[line & foreground] = k + 1
    return segmentation.watershed(-smooth, markers, mask=foreground).astype(np.uint16)


def load_clip_benchmark(data_dir, train_frames, test_frames, seed=0):
    """Frames, scribbles (train) and derived instance masks (test) of the SLEAP clip.

    Returns
    -------
    dict with ``train_images``, ``train_scribbles``, ``test_images``, ``test_masks``
    (stacks) and ``label_noise``: the fraction of background scribble pixels that
    the derived masks call fly and of fly scribble pixels they call background.
    """
    data_dir = Path(data_dir)
    points, names = read_keypoints(data_dir / "clip.slp")
    frames = read_frames(data_dir / "clip.mp4", list(train_frames) + list(test_frames))
    n_train = len(train_frames)
    rng = np.random.default_rng(seed)
    train_scribbles = np.stack([scribbles(frames[i].shape, points[t], names, rng)
                                for i, t in enumerate(train_frames)])
    test_masks = np.stack([derived_instances(frames[n_train + i], points[t], names)
                           for i, t in enumerate(test_frames)])
    train_masks = np.stack([derived_instances(frames[i], points[t], names)
                            for i, t in enumerate(train_frames)])
    bg_on_fly = np.mean(train_masks[train_scribbles == BACKGROUND] > 0)
    fly_on_bg = np.mean(train_masks[train_scribbles == FLY] == 0)
    return {"train_images": frames[:n_train], "train_scribbles": train_scribbles,
            "test_images": frames[n_train:], "test_masks": test_masks,
            "label_noise": {"background_scribbles_on_derived_fly": float(bg_on_fly),
                            "fly_scribbles_on_derived_background": float(fly_on_bg)}}
