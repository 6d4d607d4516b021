"""Input frames: axis conventions, intensity normalisation, padding and the pyramid.

Conventions
-----------
* One frame is ``(H, W)`` (grayscale) or ``(H, W, C)``; ``channel_axis`` says
  where the channels are (default last; skimage's meaning).
* Stacks are split into frames by `as_frame_stack`, which detects the channel
  axis like this when ``channel_axis="auto"`` (the default): 2-D is one gray
  frame; 3-D is one colour frame ``(H, W, C)`` if the last axis has size 3 or 4,
  otherwise a gray time stack ``(T, H, W)``; 4-D is ``(T, H, W, C)``. Pass
  ``channel_axis=None`` for "no channel axis" or an int to say where it is.
* Intensities are normalised by dtype, so a model trained on uint8 frames works
  on the same frames in any later session: unsigned and signed integers are
  divided by their dtype's maximum (uint8 by 255, uint16 by 65535), bool maps to
  0/1, floats are used as they are (`intensity_scale`). ``PyramidImage`` takes
  another factor when asked (a pixel model reads frames of another dtype in the
  units of its training frames: `msclassify.pixel.IntensityRange`).
* The frame is padded at the bottom and right to a multiple of 8 by half-sample
  symmetric reflection (numpy ``mode="symmetric"``: ``... b a | a b ...``, the
  same rule as scipy.ndimage's ``mode="reflect"`` that every filter uses at its
  border), so the 2x2, 4x4 and 8x8 blocks tile it exactly.
"""

import threading

import numpy as np

from . import _kernels
from ._specs import DOG_RATIO, GAUSSIAN_TRUNCATE, N_LEVELS, STRUCTURE_OUTER_RATIO, FeatureSpec

BLOCK = 2 ** (N_LEVELS - 1)
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _check_array(data, name):
    try:
        data = np.asarray(data)
    except Exception as exc:  # ragged nested lists and the like
        raise ValueError(f"{name} could not be read as a numeric array: {exc}") from None
    if not (np.issubdtype(data.dtype, np.integer) or np.issubdtype(data.dtype, np.floating)
            or data.dtype == bool):
        raise TypeError(f"{name} must hold integers, floats or bools, got dtype {data.dtype}; "
                        "convert it to a real numeric dtype first")
    return data


def _channel_axis_index(channel_axis, ndim, name):
    try:
        axis = int(channel_axis)
    except (TypeError, ValueError):
        raise TypeError(f"channel_axis must be an int, None or 'auto', got "
                        f"{channel_axis!r}") from None
    if not -ndim <= axis < ndim:
        raise ValueError(f"channel_axis={channel_axis} is out of range for {name} with {ndim} dims")
    return axis % ndim


def as_frame_stack(data, channel_axis="auto"):
    """View an image or a time stack as ``(T, H, W, C)`` frames, dtype unchanged.

    Parameters
    ----------
    data : array_like
        ``(H, W)``, ``(H, W, C)``, ``(T, H, W)`` or ``(T, H, W, C)``.
    channel_axis : "auto", None or int
        ``"auto"``: 2-D is one gray frame; 3-D is ``(H, W, C)`` if the last axis has
        size 3 or 4, else ``(T, H, W)``; 4-D has channels last. None: no channel
        axis (2-D or 3-D ``(T, H, W)``). int: that axis holds channels; the first
        remaining axis of a 4-D stack is time.

    Returns
    -------
    frames : ndarray, shape (T, H, W, C)
        A view of ``data`` where possible.

    Examples
    --------
    >>> as_frame_stack(np.zeros((5, 32, 40), np.uint8)).shape
    (5, 32, 40, 1)
    >>> as_frame_stack(np.zeros((32, 40, 3), np.uint8)).shape
    (1, 32, 40, 3)
    """
    data = _check_array(data, "data")
    ndim = data.ndim
    if ndim not in (2, 3, 4):
        raise ValueError(f"expected (H, W), (H, W, C), (T, H, W) or (T, H, W, C) data, got shape "
                         f"{data.shape}")
    if isinstance(channel_axis, str):
        if channel_axis != "auto":
            raise ValueError(f"channel_axis must be an int, None or 'auto', got {channel_axis!r}")
        if ndim == 2:
            channel_axis = None
        elif ndim == 3:
            channel_axis = -1 if data.shape[-1] in (3, 4) else None
        else:
            channel_axis = -1
    if channel_axis is None:
        if ndim == 4:
            raise ValueError(f"4-D data {data.shape} must have a channel axis; pass channel_axis "
                             "(e.g. -1 for (T, H, W, C))")
        frames = data[..., np.newaxis]
    else:
        if ndim == 2:
            raise ValueError(f"2-D data {data.shape} has no channel axis; pass channel_axis=None")
        frames = np.moveaxis(data, _channel_axis_index(channel_axis, ndim, "data"), -1)
    if frames.ndim == 3:
        frames = frames[np.newaxis]
    if 0 in frames.shape:
        raise ValueError(f"data is empty (frames of shape {frames.shape[1:]} x {frames.shape[0]})")
    return frames


def intensity_scale(dtype):
    """The factor that normalises intensities of ``dtype`` (module docstring): 1/max for
    integers (uint8: 1/255), 1 for bool and floats.

    Examples
    --------
    >>> intensity_scale(np.uint8) == 1 / 255, intensity_scale(np.float32)
    (True, 1.0)
    """
    if np.issubdtype(dtype, np.integer):
        return 1.0 / np.iinfo(dtype).max
    return 1.0


def _as_frame(image, channel_axis, scale=None):
    """Validated ``(H, W, C)`` array numba can read, and its intensity scale (given, or
    by its dtype)."""
    if isinstance(image, PyramidImage):
        raise TypeError("image is already a PyramidImage; pass it where a pyramid is accepted")
    image = _check_array(image, "image")
    if image.ndim == 2:
        image = image[:, :, np.newaxis]
    elif image.ndim == 3:
        if channel_axis is None:
            raise ValueError(f"a 3-D image {image.shape} needs channel_axis (e.g. -1 for "
                             "(H, W, C)); split a time stack (T, H, W) into frames with "
                             "as_frame_stack")
        image = np.moveaxis(image, _channel_axis_index(channel_axis, 3, "image"), -1)
    else:
        raise ValueError(f"a frame must be (H, W) or (H, W, C), got shape {image.shape}; split "
                         "time stacks into frames with as_frame_stack")
    if 0 in image.shape:
        raise ValueError(f"image is empty (shape {image.shape[:2]} with {image.shape[2]} channels)")
    return readable(image, scale)


def readable(image, scale=None):
    """``image`` in a dtype numba reads (native order, no bool or float16), checked to be
    finite, and its intensity scale (given, or by its dtype)."""
    scale = intensity_scale(image.dtype) if scale is None else float(scale)
    if image.dtype == bool:
        image = image.view(np.uint8)
    elif image.dtype == np.float16:
        image = image.astype(np.float32)
    elif not image.dtype.isnative:
        image = image.astype(image.dtype.newbyteorder("="))
    if np.issubdtype(image.dtype, np.floating):
        if not np.isfinite(image).all():
            raise ValueError("image contains NaN or infinite values; fill them first "
                             "(e.g. np.nan_to_num(image))")
        if image.dtype == np.float64 and np.abs(image).max() > _FLOAT32_MAX:
            raise ValueError("image values exceed the float32 range; rescale the image")
    return image, scale


def _intermediates(spec):
    """Cache keys of `PyramidImage` (besides the levels) that feature ``spec`` reads."""
    level, channel, sigma, name = spec.source_level, spec.channel, spec.sigma, spec.filter
    if name == "intensity":
        return []
    keys = [("gauss", level, channel, float(sigma))]
    if name == "dog":
        keys.append(("gauss", level, channel, float(DOG_RATIO * sigma)))
    elif name.startswith(("hessian", "structure")):
        keys.append((name.split("_")[0], level, channel, sigma))
    return keys


class _Slot:
    """A cache entry that may still be being computed by another thread."""

    __slots__ = ("done", "value", "error")

    def __init__(self):
        self.done = threading.Event()
        self.value = None
        self.error = None


class PyramidImage:
    """One frame, normalised, padded to a multiple of 8, with lazily built levels.

    Level ``L`` is the mean over non-overlapping ``2**L x 2**L`` blocks of the
    padded frame, built by repeated 2x2 means. Nothing is computed until asked
    for, and every intermediate it computes (a level, a Gaussian-smoothed level,
    a Hessian or structure-tensor eigenvalue pair) is kept, so features that
    share them compute them once, also when computed from several threads.
    Drop the object to free them.

    Parameters
    ----------
    image : array_like
        ``(H, W)`` or ``(H, W, C)``; uint8, uint16, any integer, bool or float.
        Normalisation and padding are described in the module docstring.
    channel_axis : int, optional
        Axis of a 3-D image that holds channels (default last).
    intensity_scale : float, optional
        Multiply intensities by this instead of normalising them by dtype, e.g.
        to read float frames in the units of a model's uint8 training frames.

    Attributes
    ----------
    shape : tuple of int
        ``(H, W)`` of the frame.
    padded_shape : tuple of int
        ``(ceil(H/8)*8, ceil(W/8)*8)``.
    n_channels : int

    Examples
    --------
    >>> pyramid = PyramidImage(np.arange(16, dtype=np.float32).reshape(4, 4))
    >>> pyramid.padded_shape
    (8, 8)
    >>> float(pyramid.level(1)[0, 0])    # mean of 0, 1, 4, 5
    2.5
    """

    def __init__(self, image, channel_axis=-1, intensity_scale=None):
        self._image, self._scale = _as_frame(image, channel_axis, intensity_scale)
        height, width, self.n_channels = self._image.shape
        self.shape = (height, width)
        self.padded_shape = (-(-height // BLOCK) * BLOCK, -(-width // BLOCK) * BLOCK)
        self._cache = {}
        self._lock = threading.Lock()

    def level_shape(self, level):
        """``(h, w)`` of level ``level``: the padded shape divided by ``2**level``."""
        return (self.padded_shape[0] >> level, self.padded_shape[1] >> level)

    def _check_channel(self, channel):
        if not 0 <= channel < self.n_channels:
            raise ValueError(f"channel {channel} does not exist: the image has {self.n_channels} "
                             "channel(s)")

    def _cached(self, key, compute):
        # Thread-safe memo: the first caller computes, concurrent callers of the
        # same key wait for it instead of computing it again.
        with self._lock:
            slot = self._cache.get(key)
            owner = slot is None
            if owner:
                slot = self._cache[key] = _Slot()
        if owner:
            try:
                slot.value = compute()
            except BaseException as exc:
                slot.error = exc
                with self._lock:
                    del self._cache[key]
                raise
            finally:
                slot.done.set()
        slot.done.wait()
        if slot.error is not None:
            raise slot.error
        return slot.value

    def release(self, keep=()):
        """Drop the kept intermediates (smoothed levels, eigenvalue pairs) that none of
        the features ``keep`` (FeatureSpecs) needs; the levels themselves stay.

        `FeatureBank.compute_levels` calls it between groups of features, so a
        frame's intermediates are not all held at once.

        Examples
        --------
        >>> pyramid = PyramidImage(np.ones((8, 8), np.float32))
        >>> _ = pyramid.feature("L0:hessian_max:s1.0:c0")
        >>> pyramid.release([FeatureSpec.from_id("L0:gauss:s1.0:c0")])
        >>> sorted(key[0] for key in pyramid._cache)
        ['gauss', 'level']
        """
        needed = {key for spec in keep for key in _intermediates(spec)}
        with self._lock:
            for key in [key for key, slot in self._cache.items()
                        if key[0] != "level" and key not in needed and slot.done.is_set()]:
                del self._cache[key]

    def level(self, level, channel=0):
        """Level ``level`` of one channel: float32 ``(h, w)`` block means (normalised)."""
        if not 0 <= level < N_LEVELS:
            raise ValueError(f"level must be in 0..{N_LEVELS - 1}, got {level}")
        self._check_channel(channel)
        if level == 0:
            return self._cached(("level", 0, channel), lambda: _kernels.normalize_pad(
                self._image, channel, self._scale, *self.padded_shape))
        return self._cached(("level", level, channel), lambda: _kernels.block_mean_2x2(
            self.level(level - 1, channel)))

    def smoothed(self, level, channel, sigma):
        """The level image smoothed by a Gaussian of ``sigma`` level pixels."""
        sigma = float(sigma)
        return self._cached(("gauss", level, channel, sigma), lambda: _kernels.gaussian_smooth(
            self.level(level, channel), sigma, GAUSSIAN_TRUNCATE))

    def _hessian(self, level, channel, sigma):
        return self._cached(("hessian", level, channel, sigma),
                            lambda: _kernels.hessian_eigenvalues(self.smoothed(level, channel,
                                                                               sigma)))

    def _structure(self, level, channel, sigma):
        def compute():
            outer = STRUCTURE_OUTER_RATIO * sigma
            products = _kernels.gradient_products(self.smoothed(level, channel, sigma))
            xx, xy, yy = (_kernels.gaussian_smooth(p, outer, GAUSSIAN_TRUNCATE) for p in products)
            return _kernels.symmetric_eigenvalues(xx, xy, yy)
        return self._cached(("structure", level, channel, sigma), compute)

    def feature(self, spec):
        """One feature on its level's grid: float32 ``(h_L, w_L)``.

        An upsampled feature (``L<n>up``) is returned at full (padded)
        resolution. The array may be the pyramid's cached intermediate (e.g. for
        ``intensity`` and ``gauss``): read it, do not modify it in place.

        Parameters
        ----------
        spec : FeatureSpec or str
            The feature (or its id).
        """
        if isinstance(spec, str):
            spec = FeatureSpec.from_id(spec)
        self._check_channel(spec.channel)
        plane = self._filtered(spec.source_level, spec.channel, spec.filter, spec.sigma)
        if spec.upsampled:
            return _kernels.upsample_linear(plane, spec.source_level)
        return plane

    def _filtered(self, level, channel, filter, sigma):
        """One filter on one level's grid (what `feature` returns before any upsampling)."""
        if filter == "intensity":
            return self.level(level, channel)
        if filter == "gauss":
            return self.smoothed(level, channel, sigma)
        if filter == "gradmag":
            return self._gradient_magnitude(self.smoothed(level, channel, sigma), level)
        if filter == "log":
            return self._laplacian(self.smoothed(level, channel, sigma), level)
        if filter == "dog":
            return self.smoothed(level, channel, sigma) - self.smoothed(level, channel,
                                                                        DOG_RATIO * sigma)
        if filter.startswith("hessian"):
            larger, smaller = self._hessian(level, channel, sigma)
        else:
            larger, smaller = self._structure(level, channel, sigma)
        return larger if filter.endswith("_max") else smaller

    def _gradient_magnitude(self, smoothed, level):
        return _kernels.gradient_magnitude(smoothed)

    def _laplacian(self, smoothed, level):
        return _kernels.laplacian(smoothed)
