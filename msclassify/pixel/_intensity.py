"""The intensity units a pixel model was trained in, and reading other frames in them.

A model trained on uint8 frames learned thresholds on intensities divided by
255. The same frames stored as float32 0-255 used to be taken as they were
(floats are not rescaled), 255 times brighter than anything the model had seen,
and every pixel came out one class. A `PixelClassifier` therefore records the
dtype and value range of its training frames (`IntensityRange`, saved in the
model file) and reads every frame in those units:

* a frame of the training dtype is normalised as the training frames were;
* for a model trained on integer frames, a frame of any other dtype is read as
  holding values in the training dtype's units: float32 0-255 frames give exactly
  the uint8 result (Fiji's 32-bit images and ``frame.astype(np.float32)`` keep
  those units);
* for a model trained on floats (or bools) within 0-1, integer frames are
  normalised by their dtype's maximum, the usual "fraction of full scale";
  for a model trained on floats beyond 1 (raw units), they are taken as they are.

A frame whose values cannot be in those units is refused with a ValueError
saying which conversion to use, rather than labelled wrongly, for every pair of
dtypes:

* values beyond the training dtype's range by more than 1/16 of it (a 16-bit
  frame, or negative int16 values, for a uint8 model);
* another bit depth: a largest value more than 4 times the training frames'
  (and above 8 bits: 16-bit frames for a model trained on 12-bit ones), below
  1/8 of it while above 8 bits (12-bit frames for a 16-bit model), or within
  8 bits while the training frames reached more than 4 times that (8-bit
  video, uint16 files holding 0-255 or float32 0-255 frames for a 16-bit
  model);
* floats or bools within 0-1 for a model trained on frames reaching well
  beyond 1, or the reverse.

A uniform frame (every pixel equal, such as a black frame) says nothing about
its units and is read as it is. Models saved before this was recorded keep the
old rule: every frame normalised by its own dtype.
"""

from numbers import Real
from typing import NamedTuple

import numpy as np

from ..features import intensity_scale

__all__ = ["IntensityRange"]

# A model trained on frames reaching at least this is in "raw" units, not 0-1.
_RAW = 2.0
# Frames whose largest value is more than this many times the training frames' largest (or the
# training frames' more than this many times the frames', 8-bit ones) are of another bit depth.
_DEPTH = 4
# Beyond 8 bits, frames whose largest value is below the training frames' largest by more than
# this factor are of a lower bit depth (16-bit vs 12-bit is 16x); within 8 bits they are dark.
_DARKER = 8
_EIGHT_BIT = 255.0


class IntensityRange(NamedTuple):
    """The dtype and observed value range of a model's training frames.

    Attributes
    ----------
    dtype : numpy.dtype
        Of the training frames (all of them share it).
    low, high : float
        Smallest and largest value over the training frames, as stored.

    Examples
    --------
    >>> frames = [np.array([[10, 200]], np.uint8)]
    >>> units = IntensityRange.of_frames(frames)
    >>> units.scale_for(frames[0]) == units.scale_for(frames[0].astype(np.float32)) == 1 / 255
    True
    >>> units.scale_for(np.array([[0.1, 0.8]]))
    Traceback (most recent call last):
        ...
    ValueError: the frame holds float64 values 0.1..0.8, within 0..1, but the model was trained on uint8 frames with values 10..200, which it divides by 255: give frames in those units (e.g. (frame * 255).astype(np.uint8)) or train a model on frames like these
    """

    dtype: np.dtype
    low: float
    high: float

    @classmethod
    def of_frames(cls, frames):
        """The range of ``frames`` (arrays of one dtype); ValueError if their dtypes differ."""
        frames = [np.asarray(frame) for frame in frames]
        dtypes = sorted({frame.dtype.name for frame in frames})
        if len(dtypes) > 1:
            raise ValueError(f"the training frames have different dtypes ({', '.join(dtypes)}); "
                             "convert them to one, so the model knows the units of its "
                             "intensities")
        dtype = frames[0].dtype.newbyteorder("=")
        low = min(float(frame.min()) for frame in frames)
        high = max(float(frame.max()) for frame in frames)
        return cls(dtype, low, high)

    def to_dict(self):
        """JSON for a model file."""
        return {"dtype": self.dtype.name, "low": self.low, "high": self.high}

    @classmethod
    def from_dict(cls, data):
        """Inverse of `to_dict`; ValueError naming what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("intensity must be a JSON object")
        try:
            dtype = np.dtype(data.get("dtype"))
        except TypeError:
            dtype = None
        if dtype is None or dtype.kind not in "biuf" or dtype.itemsize > 8:
            raise ValueError(f"intensity dtype {data.get('dtype')!r} is not a numeric dtype")
        low, high = data.get("low"), data.get("high")
        if not all(isinstance(v, Real) and not isinstance(v, bool) and np.isfinite(v)
                   for v in (low, high)) or low > high:
            raise ValueError(f"intensity range {low!r}..{high!r} is not two finite numbers, "
                             "low <= high")
        return cls(dtype, float(low), float(high))

    def scale_for(self, image):
        """The factor that brings ``image`` into the training frames' units.

        Raises
        ------
        ValueError
            When the frame's values cannot be in those units (see the module docstring).
        """
        image = np.asarray(image)
        dtype = image.dtype
        unit_frame = dtype.kind in "fb"     # floats and bools are not normalised by dtype
        if dtype == self.dtype and dtype.itemsize == 1:
            return intensity_scale(dtype)   # uint8 on a uint8 model: nothing to check
        low, high = (float(image.min()), float(image.max())) if image.size else (0.0, 0.0)
        uniform = low == high   # no information about its units: read as it is
        values = f"the frame holds {dtype.name} values {low:.6g}..{high:.6g}"
        trained = (f"the model was trained on {self.dtype.name} frames with values "
                   f"{self.low:.6g}..{self.high:.6g}")
        retrain = "or train a model on frames like these"
        normalised = self.dtype.kind not in "iu" and self.high < _RAW
        if normalised:  # trained on 0-1 floats (or bools): fractions of full scale
            if not unit_frame:
                return intensity_scale(dtype)
            if high >= _RAW and not uniform:
                raise ValueError(f"{values}, but {trained}: divide them by their full scale "
                                 f"(e.g. frame / 255 for 8-bit values) {retrain}")
            return 1.0
        if self.dtype.kind in "iu":
            info = np.iinfo(self.dtype)
            span = float(info.max) - float(info.min)
            if high > info.max + span / 16 or low < info.min - span / 16:
                fix = (f"e.g. frame / {max(high, 1) / info.max:.3g}" if high > info.max
                       else f"e.g. frame - frame.min() for values from {info.min} up")
                raise ValueError(f"{values}, far outside the {info.min}..{info.max} of the "
                                 f"{self.dtype.name} frames the model was trained on (values "
                                 f"{self.low:.6g}..{self.high:.6g}): convert them to that range "
                                 f"({fix}) {retrain}")
            scale = intensity_scale(self.dtype)
        else:
            scale = 1.0  # trained on floats in raw units: every frame is taken as it is
        if uniform:
            return scale
        if unit_frame and high <= 1 and self.high >= _RAW:
            full = (f"{info.max}).astype(np.{self.dtype.name})" if self.dtype.kind in "iu"
                    else f"{self.high:.6g})")
            raise ValueError(f"{values}, within 0..1, but {trained}"
                             + (f", which it divides by {info.max}" if self.dtype.kind in "iu"
                                else "") + f": give frames in those units (e.g. (frame * {full}) "
                             f"{retrain}")
        if high > _DEPTH * max(self.high, _EIGHT_BIT):
            raise ValueError(f"{values}, more than {_DEPTH}x the largest value the model was "
                             f"trained on ({trained}): frames of a higher bit depth (e.g. 16-bit "
                             "frames for a model trained on 12-bit ones)? Convert them to the "
                             f"training units (e.g. frame / {_power_of_two(high / self.high)}) "
                             f"{retrain}")
        if _EIGHT_BIT < high < self.high / _DARKER:
            raise ValueError(f"{values}, less than 1/{_DARKER} of the largest value the model "
                             f"was trained on ({trained}): frames of a lower bit depth (e.g. "
                             "12-bit frames for a model trained on 16-bit ones)? Convert them "
                             f"to the training units (e.g. frame * "
                             f"{_power_of_two(self.high / high)}) {retrain}")
        if high <= _EIGHT_BIT < self.high / _DEPTH:
            raise ValueError(f"{values}, within 8 bits, but {trained}: 8-bit frames for a model "
                             "of a higher bit depth? Convert them to the training units (e.g. "
                             f"frame * {_power_of_two(self.high / max(high, 1))}; 8-bit to "
                             f"16-bit is frame * 257) {retrain}")
        return scale


def _power_of_two(ratio):
    """The power of two nearest ``ratio`` (bit-depth factors are powers of two)."""
    return 2 ** int(np.round(np.log2(max(ratio, 1.0))))
