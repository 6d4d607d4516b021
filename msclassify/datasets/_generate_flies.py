"""Deterministic generator of the synthetic fly-arena sample video.

``python -m msclassify.datasets._generate_flies`` (re)writes the files that ship
in the package, ``msclassify/datasets/data/flies/`` (``--out DIR`` writes them
elsewhere); `msclassify.datasets.make_sample_flies` returns them as arrays:

``frames.tif``
    (T, 1024, 1024) uint8 greyscale frames: bright flies walking on a dark,
    textured arena floor with 3 x 3 blocks of wells (rounded square holes with
    bright rims), vignetting, dust specks, hairs and sensor noise. It imitates
    the real SLEAP courtship clip the benchmarks use: floor ~13,
    fly bodies ~200-240, semi-transparent wings ~90-130, flies 83-98 px from
    head to wing tip.
``masks.tif``
    (T, 1024, 1024) uint16 exact instance masks; fly ``k`` has id ``k`` in
    every frame (ids are stable identities). A pixel belongs to a fly when at
    least half of it is covered by the fly's head, thorax, abdomen, a leg **or
    a wing**: the semi-transparent wings count as fly, because they are part of
    the animal a user outlines and because the scribbles below label them as
    fly. Every fly is one 8-connected component (legs and wings attach to the
    thorax) and flies never touch, so labelling ``masks > 0`` recovers them.
``scribbles.tif``
    (T, 1024, 1024) uint8 user-style labels, 0 unlabelled, 1 background,
    2 fly, drawn on the first two frames only (zeros elsewhere): strokes along
    each fly's body and from the thorax towards the wing tips; background
    strokes over the floor, across well blocks, on dust specks and along
    hairs; and a loose, partly open outline a few pixels outside some flies.
    Fly strokes never leave the fly mask and background strokes stay at least
    3 px away from every fly, so the labels are correct.

Everything is computed with numpy/scipy/scikit-image from one fixed seed.
Each frame is rendered from its own seeded random streams (the static scene
and the fly tracks are shared), so ``generate(frame_indices=[0])`` reproduces
frame 0 of the full set bit for bit.
"""

import argparse
from pathlib import Path

import numpy as np
import tifffile
from scipy import ndimage as ndi
from skimage import draw, measure

SEED = 20171204
SIZE = 1024
N_FRAMES = 8
N_FLIES = 4
SCRIBBLE_FRAMES = (0, 1)
OUT_DIR = Path(__file__).resolve().parent / "data" / "flies"
FILES = {"frames": "frames.tif", "masks": "masks.tif", "scribbles": "scribbles.tif"}

UNLABELLED, BACKGROUND, FLY = 0, 1, 2

# Random streams, each seeded by (SEED, stream, ...) so frames are independent.
_SCENE, _NOISE, _TRACKS, _SCRIBBLES = range(4)

# Fly body plan in fly-local pixels at scale 1: u points from the abdomen to
# the head, v to the fly's right. Scales 1.1-1.3 give 83-98 px from head to
# wing tip, like the real flies.
_BODY = (  # (centre u, semi-axis along u, semi-axis along v, brightness)
    (-12.0, 21.0, 11.5, 205.0),  # abdomen
    (14.5, 13.0, 11.0, 226.0),  # thorax
    (29.0, 7.0, 10.5, 238.0),  # head
)
_WING_HINGE = (12.0, 3.0)  # (u, |v|)
_WING_LENGTH, _WING_WIDTH = 52.0, 17.0
_WING_BRIGHTNESS = 215.0
# (root u, root |v|, femur angle from +u, femur length, knee bend, tibia length)
_LEGS = (
    (19.0, 6.0, 45.0, 11.0, -35.0, 13.0),
    (14.0, 7.0, 95.0, 12.0, 10.0, 14.0),
    (9.0, 6.0, 115.0, 12.0, 30.0, 17.0),
)
_LEG_BRIGHTNESS = 125.0
_FLOOR_LEVEL = 13.0


def generate(frame_indices=None, n_frames=N_FRAMES, n_flies=N_FLIES,
             scribble_frames=SCRIBBLE_FRAMES, seed=SEED):
    """Render the synthetic fly video.

    Parameters
    ----------
    frame_indices : sequence of int, optional
        Frames to render (default: all ``n_frames``). Frame ``t`` is identical
        whichever other frames are rendered with it.
    n_frames, n_flies : int
        Length of the video and number of flies.
    scribble_frames : sequence of int
        Frames that get user-style scribbles; the others get zeros.
    seed : int
        Master seed.

    Returns
    -------
    dict
        ``frames`` (T, H, W) uint8, ``masks`` (T, H, W) uint16 and
        ``scribbles`` (T, H, W) uint8 for the requested frames.

    Examples
    --------
    >>> data = generate(frame_indices=[0])
    >>> data["frames"].shape, int(data["masks"].max())
    ((1, 1024, 1024), 4)
    """
    indices = list(range(n_frames)) if frame_indices is None else [int(t) for t in frame_indices]
    if not indices or min(indices) < 0:
        raise ValueError(f"frame_indices must be non-empty and >= 0, got {indices}")
    scene = _static_scene(seed)
    tracks = _fly_tracks(seed, max(indices) + 1, n_flies)
    out = {name: np.zeros((len(indices), SIZE, SIZE), dtype)
           for name, dtype in (("frames", np.uint8), ("masks", np.uint16),
                               ("scribbles", np.uint8))}
    for i, t in enumerate(indices):
        frame, mask = _render_frame(scene, tracks[t], seed, t)
        out["frames"][i] = frame
        out["masks"][i] = mask
        if t in scribble_frames:
            out["scribbles"][i] = _scribbles(scene, tracks[t], mask, seed, t)
    return out


def write(data, out_dir=OUT_DIR):
    """Write ``generate()``'s arrays as zlib-compressed TIFF stacks into `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, filename in FILES.items():
        # horizontal differencing shrinks the smooth masks and scribbles, and the frames a bit
        tifffile.imwrite(out_dir / filename, data[name], compression="zlib",
                         compressionargs={"level": 9}, predictor=True)


# --------------------------------------------------------------------------- static scene

class _Scene:
    """The parts of the arena that do not move: floor image, hairs, dust, wells."""

    def __init__(self, image, hairs, specks, well_blocks):
        self.image = image  # float64 (H, W), before vignetting
        self.hairs = hairs  # list of (N, 2) float arrays of (row, col) points
        self.specks = specks  # (K, 3) row, col, amplitude
        self.well_blocks = well_blocks  # list of (row0, col0, row1, col1)


def _static_scene(seed):
    rng = np.random.default_rng([seed, _SCENE])
    image = _floor(rng)
    well_blocks = _add_wells(image, rng)
    hairs = _add_hairs(image, rng)
    specks = _add_specks(image, rng)
    return _Scene(image, hairs, specks, well_blocks)


def _smooth_noise(rng, sigma):
    field = ndi.gaussian_filter(rng.standard_normal((SIZE, SIZE)), sigma, mode="wrap")
    return field / field.std()


def _floor(rng):
    image = (_FLOOR_LEVEL + 2.5 * _smooth_noise(rng, 48) + 1.6 * _smooth_noise(rng, 9)
             + 0.8 * _smooth_noise(rng, 1.5))
    # faint straight scratches in the plastic
    scratches = np.zeros((SIZE, SIZE))
    for _ in range(14):
        r0, c0 = rng.uniform(0, SIZE, 2)
        angle = rng.uniform(0, np.pi)
        length = rng.uniform(80, 400)
        rr, cc = draw.line(*_clip_point(r0, c0), *_clip_point(r0 + length * np.sin(angle),
                                                              c0 + length * np.cos(angle)))
        scratches[rr, cc] = rng.uniform(4.0, 8.0)
    image += ndi.gaussian_filter(scratches, 0.8)
    # the arena wall: the floor fades outside a large circle
    rows, cols = np.mgrid[:SIZE, :SIZE]
    radius = np.hypot(rows - SIZE / 2 + 10, cols - SIZE / 2 - 6)
    image *= 1.0 - 0.3 / (1.0 + np.exp(-(radius - 545.0) / 6.0))
    return image


def _clip_point(r, c):
    return int(np.clip(round(r), 0, SIZE - 1)), int(np.clip(round(c), 0, SIZE - 1))


def _rounded_box_distance(dr, dc, half_r, half_c, corner):
    """Signed distance to a rounded rectangle of half sides `half_r`, `half_c` (negative inside)."""
    qr, qc = np.abs(dr) - (half_r - corner), np.abs(dc) - (half_c - corner)
    outside = np.hypot(np.maximum(qr, 0), np.maximum(qc, 0))
    return outside + np.minimum(np.maximum(qr, qc), 0) - corner


def _add_wells(image, rng):
    """3 x 3 blocks of 6 x 10 wells: dark rounded square holes in a brighter plate."""
    pitch, n_cols, n_rows = 23.0, 6, 10
    blocks = []
    for block_row in range(3):
        for block_col in range(3):
            r0 = 140.0 + 340.0 * block_row - n_rows * pitch / 2 + rng.uniform(-6, 6)
            c0 = 180.0 + 292.0 * block_col - n_cols * pitch / 2 + rng.uniform(-6, 6)
            r1, c1 = r0 + n_rows * pitch, c0 + n_cols * pitch
            blocks.append((r0, c0, r1, c1))
            rs = slice(int(r0) - 8, int(r1) + 9)
            cs = slice(int(c0) - 8, int(c1) + 9)
            rows, cols = np.mgrid[rs, cs].astype(float)
            plate = _rounded_box_distance(rows - (r0 + r1) / 2, cols - (c0 + c1) / 2,
                                          (r1 - r0) / 2 + 3, (c1 - c0) / 2 + 3, 6.0)
            inside_plate = 1.0 / (1.0 + np.exp(plate / 1.5))
            i = np.clip(((rows - r0) // pitch).astype(int), 0, n_rows - 1)
            j = np.clip(((cols - c0) // pitch).astype(int), 0, n_cols - 1)
            dr = rows - (r0 + (i + 0.5) * pitch)
            dc = cols - (c0 + (j + 0.5) * pitch)
            half = (6.5 + rng.uniform(-0.6, 0.6, (n_rows, n_cols)))[i, j]
            hole = _rounded_box_distance(dr, dc, half, half, 3.5)
            depth = rng.uniform(6.0, 12.0, (n_rows, n_cols))[i, j]
            # some wells hold something bright (food, eggs) as in the real arena
            content = np.where(rng.random((n_rows, n_cols)) < 0.05,
                               rng.uniform(15, 50, (n_rows, n_cols)), 0.0)[i, j]
            in_hole = 1.0 / (1.0 + np.exp(hole / 0.7))
            # the lit far wall of each hole shows as a bright rim, brighter at the top
            rim = np.exp(-((hole - 1.2) / 1.4) ** 2) * (9.0 + 6.0 * np.clip(-dr / half, -1, 1))
            wells = 7.0 + rim * inside_plate - in_hole * (depth - content * np.exp(
                -(dr ** 2 + dc ** 2) / (2 * (0.5 * half) ** 2)))
            image[rs, cs] += inside_plate * wells
    return blocks


def _random_curve(rng, start, heading, length, wiggle, step=0.5, wave=0.0):
    """Smooth random path of `length` px: heading does a random walk of sd `wiggle` per px."""
    n = max(int(length / step), 2)
    turns = np.cumsum(rng.normal(0.0, wiggle * np.sqrt(step), n))
    if wave:
        turns += wave * np.sin(np.arange(n) * step * 2 * np.pi / rng.uniform(25, 40))
    angles = heading + turns
    steps = step * np.stack([np.sin(angles), np.cos(angles)], axis=1)
    return np.asarray(start, float) + np.cumsum(steps, axis=0)


def _add_hairs(image, rng):
    """Thin bright (and a few dark) curved hairs, anti-aliased from their exact paths."""
    hairs, amplitudes, widths = [], [], []
    for k in range(50):
        long_wavy = k < 2
        length = (rng.uniform(180, 320) if long_wavy
                  else float(np.clip(rng.lognormal(3.5, 0.5), 12, 140)))
        start = rng.uniform(20, SIZE - 20, 2)
        hairs.append(_random_curve(rng, start, rng.uniform(0, 2 * np.pi), length,
                                   wiggle=0.03 if long_wavy else 0.06,
                                   wave=0.9 if long_wavy else 0.0))
        amplitudes.append(rng.uniform(-7, -4) if k % 9 == 8 else rng.uniform(40, 150))
        widths.append(rng.uniform(0.6, 0.9))
    # nearest centre-line pixel via one distance transform, then the exact
    # sub-pixel distance to the path point stored at that pixel
    centre = np.zeros((SIZE, SIZE), bool)
    point = np.zeros((SIZE, SIZE, 2))
    amp = np.zeros((SIZE, SIZE))
    width = np.ones((SIZE, SIZE))
    for path, a, w in zip(hairs, amplitudes, widths):
        pix = np.rint(path).astype(int)
        ok = np.all((pix >= 0) & (pix < SIZE), axis=1)
        pr, pc = pix[ok].T
        centre[pr, pc] = True
        point[pr, pc] = path[ok]
        amp[pr, pc] = a
        width[pr, pc] = w
    dist, (ir, ic) = ndi.distance_transform_edt(~centre, return_indices=True)
    near = dist < 4
    rows, cols = np.nonzero(near)
    nr, nc = ir[near], ic[near]
    exact = np.hypot(rows - point[nr, nc, 0], cols - point[nr, nc, 1])
    image[rows, cols] += amp[nr, nc] * np.exp(-(exact / width[nr, nc]) ** 2)
    return hairs


def _add_specks(image, rng):
    """Dust: small Gaussian specks, mostly faint, some very bright, some in clumps."""
    centres = list(rng.uniform(5, SIZE - 5, (230, 2)))
    for clump in rng.uniform(30, SIZE - 30, (8, 2)):
        centres += list(clump + rng.normal(0, 6, (int(rng.integers(3, 8)), 2)))
    centres = np.clip(centres, 5, SIZE - 6)  # keep each 11 x 11 speck patch inside the frame
    amplitudes = np.clip(rng.lognormal(3.6, 0.9, len(centres)), 10, 255)
    sigmas = rng.uniform(0.6, 1.8, len(centres))
    for (r, c), a, s in zip(centres, amplitudes, sigmas):
        r0, c0 = int(r) - 5, int(c) - 5
        rows, cols = np.mgrid[r0:r0 + 11, c0:c0 + 11]
        distance2 = (rows - r) ** 2 + (cols - c) ** 2
        image[r0:r0 + 11, c0:c0 + 11] += a * np.exp(-distance2 / (2 * s * s))
    return np.column_stack([centres, amplitudes])


# --------------------------------------------------------------------------- flies

# columns of a fly state
_ROW, _COL, _HEADING, _SCALE, _GAIT, _WINGS = range(6)


def _fly_tracks(seed, n_frames, n_flies):
    """(T, n_flies, 6) states: position, heading, scale, gait phase, wing spread.

    Flies walk (translate 4-22 px and turn up to ~40 degrees between frames),
    stay inside the arena and keep apart so that their masks never touch.
    """
    rng = np.random.default_rng([seed, _TRACKS])
    margin, min_gap = 110.0, 150.0
    states = np.zeros((n_frames, n_flies, 6))
    for k in range(n_flies):
        for _ in range(1000):
            pos = rng.uniform(margin, SIZE - margin, 2)
            if all(np.hypot(*(pos - states[0, j, :2])) > min_gap for j in range(k)):
                break
        else:
            raise RuntimeError("could not place the flies apart; use fewer flies")
        states[0, k] = (*pos, rng.uniform(-np.pi, np.pi), rng.uniform(1.1, 1.3),
                        rng.uniform(0, 2 * np.pi), rng.uniform(0.05, 0.2))
    for t in range(1, n_frames):
        states[t] = states[t - 1]
        for k in range(n_flies):
            for _ in range(100):
                heading = states[t - 1, k, _HEADING] + rng.normal(0.0, 0.35)
                step = rng.uniform(4.0, 22.0)
                pos = states[t - 1, k, :2] + step * np.array([np.sin(heading), np.cos(heading)])
                inside = np.all((pos > margin) & (pos < SIZE - margin))
                apart = all(np.hypot(*(pos - states[t, j, :2])) > min_gap
                            for j in range(n_flies) if j != k)
                if inside and apart:
                    break
            else:  # boxed in: turn on the spot
                pos = states[t - 1, k, :2]
            states[t, k, :3] = (*pos, heading)
            states[t, k, _GAIT] += step * 0.25
            states[t, k, _WINGS] = np.clip(states[t - 1, k, _WINGS] + rng.normal(0, 0.04),
                                           0.03, 0.25)
    return states


class _FlyGeometry:
    """Coverage (0..1 per pixel) of one fly's parts inside a square window."""

    def __init__(self, state, window):
        rows, cols = np.mgrid[window].astype(float)
        heading, scale = state[_HEADING], state[_SCALE]
        dr, dc = rows - state[_ROW], cols - state[_COL]
        # fly-local coordinates in unscaled body units
        self.u = (dr * np.sin(heading) + dc * np.cos(heading)) / scale
        self.v = (dr * np.cos(heading) - dc * np.sin(heading)) / scale
        self.scale = scale
        self.state = state

    def _ellipse(self, du, dv, axis_u, axis_v):
        """Coverage and normalised radius of an ellipse; du, dv are relative to its centre."""
        f = (du / axis_u) ** 2 + (dv / axis_v) ** 2 - 1.0
        grad = 2.0 * np.hypot(du / axis_u ** 2, dv / axis_v ** 2) + 1e-9
        distance = f / grad * self.scale  # first-order signed distance in pixels
        return np.clip(0.5 - distance, 0.0, 1.0), np.sqrt(np.maximum(f + 1.0, 0.0))

    def body(self):
        """[(coverage, brightness image)] for abdomen, thorax, head, drawn in that order."""
        parts = []
        for centre, axis_u, axis_v, level in _BODY:
            du = self.u - centre
            cover, radius = self._ellipse(du, self.v, axis_u, axis_v)
            shade = 0.78 + 0.22 * np.sqrt(np.clip(1.0 - radius ** 2, 0.0, 1.0))
            if centre < 0:  # abdomen: darker tergite bands
                shade *= 1.0 - 0.06 * (0.5 + 0.5 * np.cos(2 * np.pi * du / 6.5))
            parts.append((cover, level * shade))
        return parts

    def wings(self):
        """[(coverage, opacity)] for the two wings lying over the abdomen."""
        spread = self.state[_WINGS]
        out = []
        for side in (-1.0, 1.0):
            direction = np.array([-np.cos(spread), side * np.sin(spread)])
            hinge = np.array([_WING_HINGE[0], side * _WING_HINGE[1]])
            centre = hinge + _WING_LENGTH / 2 * direction
            du, dv = self.u - centre[0], self.v - centre[1]
            along = du * direction[0] + dv * direction[1]
            across = -du * direction[1] + dv * direction[0]
            cover, radius = self._ellipse(along, across, _WING_LENGTH / 2, _WING_WIDTH / 2)
            veins = sum(np.exp(-((across - side * offset * (1 + along / _WING_LENGTH)) / 0.6) ** 2)
                        for offset in (-3.5, 0.5, 4.0))
            opacity = cover * (0.40 + 0.15 * radius ** 4 + 0.08 * veins)
            out.append((cover, np.clip(opacity, 0, 0.75)))
        return out

    def legs(self):
        """Coverage of the six legs (two segments each), swinging in a tripod gait."""
        cover = np.zeros_like(self.u)
        gait = self.state[_GAIT]
        for pair, (root_u, root_v, angle, femur, bend, tibia) in enumerate(_LEGS):
            for side in (-1.0, 1.0):
                # tripod: front and hind legs of one side swing with the middle leg of the other
                swing = 14.0 * np.sin(gait + np.pi * ((pair + (side > 0)) % 2))
                a1 = np.deg2rad(angle + swing)
                a2 = a1 + np.deg2rad(bend)
                root = np.array([root_u, side * root_v])
                knee = root + femur * np.array([np.cos(a1), side * np.sin(a1)])
                foot = knee + tibia * np.array([np.cos(a2), side * np.sin(a2)])
                for a, b, half_width in ((root, knee, 0.75), (knee, foot, 0.6)):
                    distance = self._segment_distance(a, b) * self.scale
                    cover = np.maximum(cover, np.clip(half_width + 0.5 - distance, 0.0, 1.0))
        return cover

    def _segment_distance(self, a, b):
        ab = b - a
        t = np.clip(((self.u - a[0]) * ab[0] + (self.v - a[1]) * ab[1]) / (ab @ ab), 0.0, 1.0)
        return np.hypot(self.u - a[0] - t * ab[0], self.v - a[1] - t * ab[1])


def _fly_window(state):
    half = int(np.ceil(60 * state[_SCALE]))
    r, c = int(round(state[_ROW])), int(round(state[_COL]))
    return np.s_[r - half:r + half + 1, c - half:c + half + 1]


def _render_frame(scene, states, seed, t):
    """Composite the flies over the static scene, then optics, vignetting and noise."""
    image = scene.image.copy()
    mask = np.zeros((SIZE, SIZE), np.uint16)
    for k, state in enumerate(states):
        window = _fly_window(state)
        fly = _FlyGeometry(state, window)
        patch = image[window]
        legs = fly.legs()
        patch += legs * (_LEG_BRIGHTNESS - patch)
        covered = legs >= 0.5
        for cover, brightness in fly.body():
            patch += cover * (brightness - patch)
            covered |= cover >= 0.5
        for cover, opacity in fly.wings():
            patch += opacity * (_WING_BRIGHTNESS - patch)
            covered |= cover >= 0.5
        mask[window][covered] = k + 1
    rows, cols = np.mgrid[:SIZE, :SIZE]
    radius2 = ((rows - SIZE * 0.47) ** 2 + (cols - SIZE * 0.52) ** 2) / (SIZE * 0.5) ** 2
    image = ndi.gaussian_filter(image, 0.9) * (1.0 - 0.28 * radius2)
    rng = np.random.default_rng([seed, _NOISE, t])
    image += rng.standard_normal(image.shape) * np.sqrt(0.9 + 0.04 * np.maximum(image, 0.0))
    return np.clip(np.rint(image), 0, 255).astype(np.uint8), mask


# --------------------------------------------------------------------------- scribbles

def _draw_path(canvas, points):
    """Mark the 1-px polyline through `points` (row, col) on `canvas`, up to where it leaves."""
    pix = np.rint(points).astype(int)
    outside = np.flatnonzero(np.any((pix < 0) | (pix >= SIZE), axis=1))
    if outside.size:
        pix = pix[:outside[0]]
    for (r0, c0), (r1, c1) in zip(pix[:-1], pix[1:]):
        rr, cc = draw.line(r0, c0, r1, c1)
        canvas[rr, cc] = True


def _hand_stroke(rng, a, b, n=12, tremor=0.8):
    """A slightly shaky straight-ish stroke from a to b, as drawn with a mouse."""
    s = np.linspace(0.0, 1.0, n)[:, None]
    jitter = ndi.gaussian_filter1d(rng.normal(0.0, tremor, (n, 2)), 1.5, axis=0)
    jitter[[0, -1]] = 0.0
    return a + s * (b - a) + jitter


def _to_image(state, u, v):
    """Fly-local (u, v) body units -> image (row, col)."""
    heading, scale = state[_HEADING], state[_SCALE]
    return np.array([state[_ROW] + scale * (u * np.sin(heading) + v * np.cos(heading)),
                     state[_COL] + scale * (u * np.cos(heading) - v * np.sin(heading))])


def _scribbles(scene, states, mask, seed, t):
    rng = np.random.default_rng([seed, _SCRIBBLES, t])
    fly_lines = np.zeros((SIZE, SIZE), bool)
    thin_bg = np.zeros((SIZE, SIZE), bool)   # outlines and hair tracing: 3 px brush
    wide_bg = np.zeros((SIZE, SIZE), bool)   # floor, wells and dust: 5 px brush
    for k, state in enumerate(states):
        head, tail = _to_image(state, 29.0, 0.0), _to_image(state, -27.0, 0.0)
        _draw_path(fly_lines, _hand_stroke(rng, head, tail))
        for side in (-1.0, 1.0):
            spread = state[_WINGS]
            reach = rng.uniform(0.8, 0.9) * _WING_LENGTH
            hinge = np.array([_WING_HINGE[0] - 3.0, side * _WING_HINGE[1]])
            tip = hinge + reach * np.array([-np.cos(spread), side * np.sin(spread)])
            _draw_path(fly_lines,
                       _hand_stroke(rng, _to_image(state, *hinge), _to_image(state, *tip)))
        if k % 2 == 0:
            _draw_path(thin_bg, _loose_outline(rng, mask == k + 1))

    flies = mask > 0
    free_floor = ~_within(flies, 40)
    free_floor[:100] = free_floor[-100:] = free_floor[:, :100] = free_floor[:, -100:] = False
    candidates = np.argwhere(free_floor[::8, ::8]) * 8
    for start in candidates[rng.choice(len(candidates), 6, replace=False)]:
        _draw_path(wide_bg, _random_curve(rng, start, rng.uniform(0, 2 * np.pi),
                                          rng.uniform(80, 220), wiggle=0.04, step=2.0))
    for block in rng.choice(len(scene.well_blocks), 3, replace=False):
        r0, c0, r1, c1 = scene.well_blocks[block]
        a = np.array([r0 + 10, rng.uniform(c0, c1)])
        b = np.array([r1 - 10, rng.uniform(c0, c1)])
        _draw_path(wide_bg, _hand_stroke(rng, a, b, n=20, tremor=2.0))
    bright = np.flatnonzero(scene.specks[:, 2] > 60)
    for i in rng.choice(bright, min(12, len(bright)), replace=False):
        centre = scene.specks[i, :2]
        offset = rng.normal(0, 3, 2)
        _draw_path(wide_bg, _hand_stroke(rng, centre - offset, centre + offset, n=4, tremor=0.3))
    for i in rng.choice(len(scene.hairs), 6, replace=False):
        hair = scene.hairs[i]
        _draw_path(thin_bg, hair[len(hair) // 10: -(len(hair) // 10) or None: 4])

    labels = np.zeros((SIZE, SIZE), np.uint8)
    background = _within(wide_bg, 2) | _within(thin_bg, 1)
    labels[background & ~_within(flies, 3)] = BACKGROUND
    labels[_within(fly_lines, 1) & ~_within(~flies, 1)] = FLY
    return labels


def _within(pixels, radius):
    """Pixels within `radius` of a True pixel: dilation by ``skimage.morphology.disk(radius)``."""
    return ndi.distance_transform_edt(~pixels) <= radius


def _loose_outline(rng, fly_mask):
    """An open, wobbly loop a few px (~4-10) outside the fly, like a quick brush outline."""
    rows, cols = np.nonzero(fly_mask)
    r0, c0 = rows.min() - 20, cols.min() - 20
    window = fly_mask[r0:rows.max() + 21, c0:cols.max() + 21]
    # distance-smoothed band around the fly, rounded so legs do not make spikes
    blob = ndi.gaussian_filter(ndi.distance_transform_edt(~window), 6.0)
    contour = max(measure.find_contours(blob, rng.uniform(8.0, 12.0)), key=len)
    start = int(rng.integers(len(contour)))
    keep = int(len(contour) * rng.uniform(0.6, 0.9))
    arc = np.roll(contour, -start, axis=0)[:keep]
    return arc + (r0, c0) + ndi.gaussian_filter1d(rng.normal(0, 1.0, arc.shape), 4, axis=0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR,
                        help=f"output folder (default {OUT_DIR})")
    args = parser.parse_args(argv)
    write(generate(), args.out)
    for filename in FILES.values():
        print(f"{args.out / filename}: {(args.out / filename).stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
