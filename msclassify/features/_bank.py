"""FeatureBank: an ordered list of feature specs for images with a fixed channel count."""

import itertools
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from numba import get_num_threads
from numba.typed import List

from ..checks import check_int
from . import _kernels
from ._grid import VoxelGrid
from ._pyramid import PyramidImage
from ._specs import N_LEVELS, PRESETS, FeatureSpec, parse_id
from ._volume import PyramidVolume

FORMAT = "msclassify.features.FeatureBank"
# Bump when the meaning of an id or of the normalisation/padding changes; files
# with another version are refused rather than silently computed differently.
PIPELINE_VERSION = 1
# Banks of volumes (with a voxel grid) are version 2: a release that only knows
# images refuses them instead of computing 2D features.
VOLUME_PIPELINE_VERSION = 2
# Below this many modelled operations (sum of batch_cost x pixels) a thread pool
# costs more than it saves: handing the features to the pool and back costs about
# 0.5-1 ms of wall time per frame, while 1e7 operations take about 1.5 ms on one
# thread (a 512x512 EM slice's 6 features, 5.6-6.7e6, take 0.8-1.0 ms alone against
# 1.2-1.7 ms on 2 threads; docs/design.md, branch walk8).
MIN_OPS_FOR_THREADS = 1e7


@dataclass(frozen=True)
class FeatureLevels:
    """Selected features of one frame, stored per pyramid level.

    ``arrays[L]`` is a C-contiguous float32 ``(h_L, w_L, k_L)`` array over the
    *padded* frame (``h_L = padded_height >> L``); a level-L value is constant on
    the ``2**L x 2**L`` block it covers. Column ``j`` of the selection lives in
    ``arrays[level[j]][:, :, slot[j]]``; ``columns[L]`` lists the selection
    columns stored in ``arrays[L]``, in slot order. For a volume the arrays are
    ``(d_L, h_L, w_L, k_L)`` and ``blocks[L]`` is the level's block ``(bz, by, bx)``.
    `FeatureBank.compute_levels` lays the arrays back to back, level 0 first, in one
    buffer, so that a predictor can read all levels without copying them into one.

    Attributes
    ----------
    arrays : tuple of 4 ndarray
    columns : tuple of 4 ndarray of int64
    level, slot : ndarray of int64, shape (M_sel,)
    feature_indices : ndarray of int64, shape (M_sel,)
        Bank index of every selected feature, in selection order.
    shape, padded_shape : tuple of int
        ``(H, W)`` of the frame and of the padded frame (``(Z, H, W)`` for a volume).
    blocks : tuple of 4 tuples of int, or None
        A volume's block per level and axis (`VoxelGrid.blocks`); None for a frame.
    """

    arrays: tuple
    columns: tuple
    level: np.ndarray
    slot: np.ndarray
    feature_indices: np.ndarray
    shape: tuple
    padded_shape: tuple
    blocks: tuple | None = None

    @property
    def n_features(self):
        """Number of selected features (M_sel)."""
        return self.feature_indices.shape[0]

    def gather(self, *coords):
        """Feature values at pixels ``(ys, xs)`` of the frame: float32 ``(n, M_sel)``.

        A level-L value is read at ``(ys >> L, xs >> L)``. For a volume pass
        ``(zs, ys, xs)``; a value is read at each voxel's block of its level.
        """
        if self.blocks is not None:
            return _gather_volume(self, coords)
        ys, xs = _check_pixels(*coords, self.shape)
        out = np.empty((ys.shape[0], self.n_features), dtype=np.float32)
        for level, (array, columns) in enumerate(zip(self.arrays, self.columns)):
            if columns.shape[0]:
                _kernels.gather_level(array, ys, xs, level, columns, out)
        return out

    def full(self):
        """Every selected feature at full resolution, cropped: float32 ``(H, W, M_sel)``
        (``(Z, H, W, M_sel)`` for a volume).

        Coarse levels are upsampled by repetition (nearest neighbour).
        """
        out = np.empty(tuple(self.shape) + (self.n_features,), dtype=np.float32)
        blocks = self.blocks or [(2 ** L, 2 ** L) for L in range(N_LEVELS)]
        for array, columns, block in zip(self.arrays, self.columns, blocks):
            if columns.shape[0]:
                index = np.ix_(*(np.arange(n) // b for n, b in zip(self.shape, block)))
                out[..., columns] = array[index]
        return out


def _gather_volume(levels, coords):
    """`FeatureLevels.gather` of a volume: ``coords`` = (zs, ys, xs)."""
    if len(coords) != 3:
        raise ValueError(f"a volume's features are gathered at (zs, ys, xs), got {len(coords)} "
                         "coordinate arrays")
    zs, ys, xs = _check_pixels(*coords, levels.shape)
    out = np.empty((ys.shape[0], levels.n_features), dtype=np.float32)
    for array, columns, block in zip(levels.arrays, levels.columns, levels.blocks):
        if columns.shape[0]:
            out[:, columns] = array[zs // block[0], ys // block[1], xs // block[2]]
    return out


@contextmanager
def _task_runner(n_threads):
    """Yield ``run(function, items) -> list of results``, on a pool if n_threads > 1."""
    if n_threads == 1:
        yield lambda function, items: [function(item) for item in items]
        return
    pool = _shared_pool(n_threads)
    yield lambda function, items: list(pool.map(function, items))


_POOLS = {}
_POOLS_LOCK = threading.Lock()


def _shared_pool(n_threads):
    """A pool of ``n_threads`` worker threads kept for later calls: starting threads for
    every frame cost more wall time than a small frame's features. One pool per CPU
    priority of the calling thread (Linux keeps a nice value per thread, and a worker
    inherits its starter's): a caller lowered by `msclassify.pixel.run_at_lower_priority`
    gets workers as low as itself."""
    nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) \
        if sys.platform.startswith("linux") else 0
    with _POOLS_LOCK:
        pool = _POOLS.get((n_threads, nice))
        if pool is None:
            pool = _POOLS[n_threads, nice] = ThreadPoolExecutor(
                max_workers=n_threads, thread_name_prefix="msclassify-features")
        return pool


def _forget_pools():
    """In a forked child the pools' threads do not exist: start new ones when asked."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools)


def _resolve_threads(n_threads, specs, shape):
    if n_threads is None:
        modelled_ops = sum(s.batch_cost for s in specs) * float(np.prod(shape))
        return get_num_threads() if modelled_ops >= MIN_OPS_FOR_THREADS else 1
    return check_int(n_threads, "n_threads")


def _plane_batches(pyramid, specs, run, release):
    """Yield ``(indices, planes)``: the level-grid planes of ``specs``, the finest levels first.

    Without ``release``, one batch of every feature, computed side by side on ``run``
    (fastest: the level arrays are filled in one pass each). With ``release`` (a
    volume), a group of features sharing their intermediates (level, channel, sigma)
    at a time, in three batches: the filters of the smoothed images, then the Hessian's
    eigenvalues, then the structure tensor's; the pyramid drops after each batch the
    intermediates that no later batch needs (`PyramidImage.release`): a volume's
    smoothed images and eigenvalue pairs are not all held at once, nor all its feature
    planes, and a Hessian's pair is gone before the structure tensor's is computed.
    """
    def group(j):
        spec = specs[j]
        pair = spec.filter.split("_")[0] if spec.filter.startswith(("hessian", "structure")) \
            else ""
        return (spec.level, spec.source_level, spec.channel,
                -1.0 if spec.sigma is None else spec.sigma, pair) if release else spec.level
    order = sorted(range(len(specs)), key=group)
    batches = [list(batch) for _, batch in itertools.groupby(order, key=group)] \
        if release else [order]
    for number, batch in enumerate(batches):
        planes = run(lambda j: pyramid.feature(specs[j]), batch)
        if release:
            pyramid.release([specs[j] for later in batches[number + 1:] for j in later])
        yield batch, planes


def _check_pixels(*coords_and_shape):
    """``ys, xs`` (``zs, ys, xs`` for a volume) as intp arrays inside ``shape``, the last
    argument."""
    *arrays, shape = coords_and_shape
    names = ("ys", "xs") if len(arrays) == 2 else ("zs", "ys", "xs")
    arrays = [np.asarray(a) for a in arrays]
    for name, coords in zip(names, arrays):
        if coords.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array of pixel coordinates, got shape "
                             f"{coords.shape}")
        if coords.size and not np.issubdtype(coords.dtype, np.integer):
            raise TypeError(f"{name} must hold integer pixel coordinates, got dtype {coords.dtype}")
    if len({a.shape for a in arrays}) > 1:
        raise ValueError(f"{' and '.join(names)} must have the same length, got "
                         f"{' and '.join(str(a.shape[0]) for a in arrays)}")
    arrays = [a.astype(np.intp, copy=False) for a in arrays]
    for name, coords, size in zip(names, arrays, shape):
        if coords.size and (coords.min() < 0 or coords.max() >= size):
            raise ValueError(f"{name} must lie in [0, {size}) for an image of shape {shape}, got "
                             f"values in [{coords.min()}, {coords.max()}]")
    return arrays


def _spec_from_item(item):
    if isinstance(item, FeatureSpec):
        return item
    if isinstance(item, str):
        return FeatureSpec.from_id(item)
    raise TypeError(f"specs must be FeatureSpec objects or feature id strings, got {item!r}")


class FeatureBank:
    """An ordered list of image features (pyramid level x filter x sigma x channel).

    Parameters
    ----------
    preset : {"fast", "default", "fine", "pyramid", "rich"}, optional
        Named bank, repeated for every channel (channel-major order). Used when
        ``specs`` is not given; default ``"default"``.
    n_channels : int, optional
        Channels of the images the bank is for. Default 1 for presets; for
        ``specs`` it defaults to one more than the largest channel used.
    specs : sequence of FeatureSpec or str, optional
        Custom list of features (specs or stable ids such as ``"L2:gauss:s1.6:c0"``).
    spacing : tuple of 3 float, optional
        A bank for volumes ``(Z, Y, X[, C])`` with this voxel size ``(z, y, x)``:
        3D filters with sigma per axis in physical units and a 3D pyramid of
        1x2x2 or 2x2x2 blocks (`msclassify.features.VoxelGrid`). Default None:
        a bank for 2D frames.

    Notes
    -----
    Presets (sigmas in pixels of each level; see `msclassify.features` for the
    filters and the cost model):

    * ``fast`` (21 per channel): intensity, Gaussian and gradient magnitude at
      sigma 1 on every level, plus LoG and Hessian eigenvalues on levels 1-3.
    * ``default`` (100 per channel): intensity, and every filter at sigmas 0.7,
      1.6, 3.5 on every level (full resolution, 2x2, 4x4 and 8x8 block means).
      With `msclassify.pixel.PixelClassifier`'s distillation the coarse levels
      decide flat regions and full resolution the outlines (README, accuracy).
    * ``fine`` (50 per channel): the same on levels 0 and 1 only. Chosen on the
      real sets with fixed learners (``benchmarks/study_features.py``): without
      distillation it beats ``pyramid`` and scikit-image's multiscale features.
    * ``pyramid`` (92 per channel; the default before): intensity, and every
      filter at sigmas 0.7, 1.6 on level 0 and 0.7, 1.6, 3.5 on levels 1-3. Its
      4x4 and 8x8 block features allow the cheapest models but make outlines
      blocky.
    * ``rich`` (160 per channel): ilastik's sigmas 0.3 (smoothing only), 0.7, 1, 1.6,
      3.5, 5, 10 on level 0, up to 5 on level 1 and up to 3.5 on levels 2-3.

    Examples
    --------
    >>> bank = FeatureBank("fast", n_channels=3)
    >>> len(bank), bank.ids[0]
    (63, 'L0:intensity:c0')
    >>> image = np.random.default_rng(0).random((37, 53, 3))
    >>> bank.gather(image, [0, 36], [0, 52]).shape
    (2, 63)
    >>> volume_bank = FeatureBank("fast", spacing=(50, 4, 4))
    >>> volume_bank.specs[3].block, volume_bank.specs[3].share
    ((1, 2, 2), 4)
    """

    def __init__(self, preset=None, n_channels=None, *, specs=None, spacing=None):
        self.grid = None if spacing is None else VoxelGrid(spacing)
        if specs is not None:
            if preset is not None:
                raise ValueError("pass either a preset name or specs, not both")
            if isinstance(specs, (str, FeatureSpec)):
                raise TypeError("specs must be a list of FeatureSpec objects or ids, not a "
                                "single one")
            specs = [_spec_from_item(item) for item in specs]
            needed = 1 + max((s.channel for s in specs), default=0)
            n_channels = needed if n_channels is None else n_channels
            self.preset = None
        else:
            preset = "default" if preset is None else preset
            if preset not in PRESETS:
                raise ValueError(f"unknown preset {preset!r}; choose one of "
                                 f"{', '.join(map(repr, PRESETS))} or pass specs=[...]")
            n_channels = 1 if n_channels is None else n_channels
            self.preset = preset
        self.n_channels = check_int(n_channels, "n_channels")
        if specs is None:
            specs = [FeatureSpec.make(level, filter, sigma, channel)
                     for channel in range(self.n_channels)
                     for level, filter, sigma in PRESETS[preset]]
        if self.grid is not None:
            specs = [_volume_spec(spec, self.grid) for spec in specs]
        too_high = [s.id for s in specs if s.channel >= self.n_channels]
        if too_high:
            raise ValueError(f"features {too_high[:3]} use channels beyond n_channels="
                             f"{self.n_channels}; raise n_channels or drop them")
        ids = [s.id for s in specs]
        if len(set(ids)) != len(ids):
            duplicates = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"feature ids must be unique, repeated: {duplicates[:5]}")
        self.specs = list(specs)
        self._index = {feature_id: i for i, feature_id in enumerate(ids)}

    @classmethod
    def from_ids(cls, ids, n_channels=None):
        """Bank of the features with these stable ids, in this order."""
        return cls(specs=list(ids), n_channels=n_channels)

    @property
    def ids(self):
        """Stable ids of the features, in bank order."""
        return [s.id for s in self.specs]

    def __len__(self):
        return len(self.specs)

    def __repr__(self):
        origin = f"preset={self.preset!r}" if self.preset else "custom"
        spacing = "" if self.grid is None else f", spacing={self.grid.spacing}"
        return (f"FeatureBank({origin}, n_channels={self.n_channels}{spacing}, "
                f"n_features={len(self)})")

    def __eq__(self, other):
        return (isinstance(other, FeatureBank) and self.n_channels == other.n_channels
                and self.specs == other.specs and self.grid == other.grid)

    def shares(self):
        """(M,) float64: original pixels sharing each feature's value (s_m = 4**level)."""
        return np.array([s.share for s in self.specs], dtype=np.float64)

    def batch_costs(self):
        """(M,) float64: modelled whole-image cost gamma_m per original pixel."""
        return np.array([s.batch_cost for s in self.specs], dtype=np.float64)

    def sample_costs(self):
        """(M,) float64: per-pixel cost beta_m (0 for image features)."""
        return np.array([s.sample_cost for s in self.specs], dtype=np.float64)

    def index(self, feature_id):
        """Bank index of a feature id."""
        try:
            return self._index[feature_id]
        except KeyError:
            raise ValueError(f"feature {feature_id!r} is not in this bank") from None

    def _selection(self, feature_indices):
        """Validated int64 bank indices; ids are translated."""
        if feature_indices is None:
            return np.arange(len(self.specs), dtype=np.int64)
        if isinstance(feature_indices, str):
            raise TypeError("feature_indices must be a list of indices or ids, not a single id")
        items = list(feature_indices)
        if items and all(isinstance(i, str) for i in items):
            selection = np.array([self.index(i) for i in items], dtype=np.int64)
        else:
            selection = np.asarray(items)
            if selection.size == 0:
                selection = selection.astype(np.int64)
            if not np.issubdtype(selection.dtype, np.integer):
                raise TypeError("feature_indices must be integer indices or feature id strings, "
                                f"got {items[:3]}")
            selection = selection.astype(np.int64)
            if selection.size and (selection.min() < -len(self) or selection.max() >= len(self)):
                raise ValueError(f"feature_indices must lie in [0, {len(self)}) for this bank, got "
                                 f"values in [{selection.min()}, {selection.max()}]")
            selection %= max(len(self), 1)
        if np.unique(selection).size != selection.size:
            raise ValueError("feature_indices contains duplicates; select each feature once")
        return selection

    def subset(self, feature_indices):
        """A bank of the selected features (indices or ids), in the given order.

        Examples
        --------
        >>> FeatureBank("fast").subset(["L3:gauss:s1.0:c0"]).ids
        ['L3:gauss:s1.0:c0']
        """
        selection = self._selection(feature_indices)
        return FeatureBank(specs=[self.specs[i] for i in selection], n_channels=self.n_channels,
                           spacing=None if self.grid is None else self.grid.spacing)

    def pyramid(self, image, channel_axis=-1):
        """A `PyramidImage` (`PyramidVolume` for a bank of volumes) of ``image``, checked
        against this bank's channel count and grid."""
        if isinstance(image, PyramidImage):
            pyramid = image
        elif self.grid is None:
            pyramid = PyramidImage(image, channel_axis)
        else:
            pyramid = PyramidVolume(image, self.grid, channel_axis)
        if getattr(pyramid, "grid", None) != self.grid:
            raise ValueError(f"the feature bank is for {_kind(self.grid)} but got a pyramid of "
                             f"{_kind(getattr(pyramid, 'grid', None))}")
        if pyramid.n_channels != self.n_channels:
            raise ValueError(f"image has {pyramid.n_channels} channel(s) but the feature bank was "
                             f"built for {self.n_channels}; pass images like the training images "
                             f"or build the bank with n_channels={pyramid.n_channels}")
        return pyramid

    def _may_release(self, pyramid, image):
        """Whether a computation may drop ``pyramid``'s intermediates between feature groups:
        only a volume's (whose intermediates are large), and only of a pyramid this bank made
        from ``image`` (a caller's `PyramidImage` may be read again)."""
        return pyramid is not image and self.grid is not None

    def compute_levels(self, image, feature_indices=None, *, channel_axis=-1, n_threads=None):
        """Compute the selected features of one frame on their pyramid levels.

        Only what the selection needs is computed: the channels it uses, the
        levels up to its coarsest, the smoothed images of its sigmas (each once).

        Parameters
        ----------
        image : array_like or PyramidImage
            One frame, ``(H, W)`` or ``(H, W, C)``; pass a `PyramidImage` to reuse
            intermediates across calls.
        feature_indices : sequence of int or str, optional
            Bank indices or ids of the features wanted (default all), no repeats.
        channel_axis : int, optional
            Channel axis of a 3-D image (default last).
        n_threads : int, optional
            Threads computing features side by side. Default
            ``numba.get_num_threads()`` (set it with ``NUMBA_NUM_THREADS``), or one
            thread when the modelled work is too small to pay for a pool.
            Results do not depend on it.

        Returns
        -------
        FeatureLevels

        Examples
        --------
        >>> bank = FeatureBank("fast")
        >>> levels = bank.compute_levels(np.zeros((37, 53)), ["L3:gauss:s1.0:c0"])
        >>> [a.shape for a in levels.arrays]
        [(40, 56, 0), (20, 28, 0), (10, 14, 0), (5, 7, 1)]
        """
        pyramid = self.pyramid(image, channel_axis)
        selection = self._selection(feature_indices)
        specs = [self.specs[i] for i in selection]
        levels = np.array([s.level for s in specs], dtype=np.int64)
        n_threads = _resolve_threads(n_threads, specs, pyramid.shape)
        arrays, columns, slots = [], [], np.empty_like(levels)
        shapes = []
        for level in range(N_LEVELS):
            on_level = np.flatnonzero(levels == level)
            slots[on_level] = np.arange(on_level.size)
            shapes.append(pyramid.level_shape(level) + (on_level.size,))
            columns.append(on_level)
        buffer = np.empty(sum(int(np.prod(shape)) for shape in shapes), dtype=np.float32)
        at = 0
        for shape in shapes:
            size = int(np.prod(shape))
            arrays.append(buffer[at:at + size].reshape(shape))
            at += size
        with _task_runner(n_threads) as run:
            for batch, planes in _plane_batches(pyramid, specs, run,
                                                self._may_release(pyramid, image)):
                tasks = []
                for level in np.unique(levels[batch]):
                    on_level = [k for k, j in enumerate(batch) if levels[j] == level]
                    array = arrays[level]
                    # a volume's planes interleave as (d * h, w) planes: C-order views
                    level_planes = List([planes[k].reshape(-1, array.shape[-2])
                                         for k in on_level])
                    targets = slots[[batch[k] for k in on_level]]
                    rows = array.reshape(-1, *array.shape[-2:])
                    bounds = np.linspace(0, rows.shape[0],
                                         min(rows.shape[0], 2 * n_threads) + 1)
                    tasks += [(level_planes, targets, rows, int(start), int(stop))
                              for start, stop in zip(bounds[:-1], bounds[1:])]
                run(lambda task: _kernels.interleave(*task), tasks)
                del planes, tasks
        return FeatureLevels(arrays=tuple(arrays), columns=tuple(columns), level=levels,
                             slot=slots, feature_indices=selection, shape=pyramid.shape,
                             padded_shape=pyramid.padded_shape,
                             blocks=None if self.grid is None else self.grid.blocks)

    def gather(self, image, ys, xs, feature_indices=None, *, channel_axis=-1, n_threads=None,
               zs=None):
        """Feature values at labelled pixels: float32 ``(n, M_sel)``.

        Coarse features are computed on their level and read at ``(y >> L, x >> L)``;
        nothing is replicated to full resolution, nor stacked into level arrays.
        For a volume pass the voxels' planes as ``zs``.

        Parameters
        ----------
        image : array_like or PyramidImage
            One frame (see `compute_levels`).
        ys, xs : array_like of int, shape (n,)
            Row and column of each pixel.
        feature_indices : sequence of int or str, optional
        channel_axis : int, optional
        n_threads : int, optional
            As in `compute_levels`.
        """
        pyramid = self.pyramid(image, channel_axis)
        if (zs is None) != (self.grid is None):
            raise ValueError("pass zs (the voxels' planes) for a bank of volumes, and only then")
        coords = _check_pixels(*([] if zs is None else [zs]), ys, xs, pyramid.shape)
        ys = coords[-2]
        specs = [self.specs[i] for i in self._selection(feature_indices)]
        out = np.empty((ys.shape[0], len(specs)), dtype=np.float32)
        with _task_runner(_resolve_threads(n_threads, specs, pyramid.shape)) as run:
            for batch, planes in _plane_batches(pyramid, specs, run,
                                                self._may_release(pyramid, image)):
                for j, plane in zip(batch, planes):
                    out[:, j] = plane[tuple(c // b for c, b in zip(coords, specs[j].block))]
        return out

    def compute_full(self, image, feature_indices=None, *, channel_axis=-1, n_threads=None):
        """Every selected feature at every pixel: float32 ``(H, W, M_sel)``.

        The reference path: the level arrays of `compute_levels` upsampled by
        repetition and cropped to the frame. Parameters as in `compute_levels`.
        """
        return self.compute_levels(image, feature_indices, channel_axis=channel_axis,
                                   n_threads=n_threads).full()

    def to_dict(self):
        """JSON-able description that `from_dict` restores exactly (costs included)."""
        data = {
            "format": FORMAT,
            "pipeline_version": PIPELINE_VERSION,
            "n_channels": self.n_channels,
            "preset": self.preset,
            "features": [{"id": s.id, "batch_cost": s.batch_cost, "sample_cost": s.sample_cost}
                         for s in self.specs],
        }
        if self.grid is not None:
            data["pipeline_version"] = VOLUME_PIPELINE_VERSION
            data["grid"] = self.grid.to_dict()
        return data

    @classmethod
    def from_dict(cls, data):
        """Restore a bank from `to_dict` output.

        Costs are taken from the dict, so a saved model keeps the costs it was
        trained with even if the cost model changes later.
        """
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a feature bank description (expected format {FORMAT!r})")
        version = data.get("pipeline_version")
        if version == VOLUME_PIPELINE_VERSION:
            grid = VoxelGrid.from_dict(data.get("grid"))
        elif "grid" in data:
            raise ValueError(f"a feature bank with a voxel grid must be pipeline version "
                             f"{VOLUME_PIPELINE_VERSION}, this one says {version!r}")
        else:
            grid = None
        if version not in (PIPELINE_VERSION, VOLUME_PIPELINE_VERSION):
            raise ValueError(f"feature bank was saved by pipeline version {version!r}; this "
                             f"msclassify computes version {PIPELINE_VERSION}; retrain the model "
                             "or use the msclassify release that saved it")
        try:
            specs = [FeatureSpec.from_id(
                f["id"], batch_cost=f["batch_cost"], sample_cost=f["sample_cost"],
                block=None if grid is None else grid.blocks[_stored_level(f["id"])])
                for f in data["features"]]
            n_channels = data["n_channels"]
            preset = data.get("preset")
        except (KeyError, TypeError) as exc:
            raise ValueError(f"feature bank description is incomplete: {exc!r}") from None
        bank = cls(specs=specs, n_channels=n_channels,
                   spacing=None if grid is None else grid.spacing)
        bank.preset = preset
        return bank


def _stored_level(feature_id):
    """The level a feature's values are stored on: 0 for an upsampled one, else its own."""
    parsed = parse_id(feature_id)
    return 0 if parsed.upsampled else parsed.level


def _kind(grid):
    return "2D frames" if grid is None else f"volumes of voxel spacing {grid.spacing}"


def _volume_spec(spec, grid):
    """``spec`` on the 3D pyramid of ``grid``: its level's block, its cost in 3D (an upsampled
    feature: its source level's filter and the trilinear interpolation,
    `VoxelGrid.upsample_cost`)."""
    block = grid.blocks[spec.level]
    if spec.block == block:
        return spec
    cost = grid.batch_cost(spec.source_level, spec.filter, spec.sigma)
    if spec.upsampled:
        cost += grid.upsample_cost(spec.source_level)
    return FeatureSpec.from_id(spec.id, block=block, sample_cost=spec.sample_cost,
                               batch_cost=cost)
