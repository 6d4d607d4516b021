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
saying which conversion to use, rather than labelled wrongly: values far beyond
the training dtype's range (a 12- or 16-bit frame for a uint8 model), floats
within 0-1 for a model trained on frames reaching well beyond 1 (or the
reverse). Models saved before this was recorded keep the old rule: every frame
normalised by its own dtype.
"""

from numbers import Real
from typing import NamedTuple

import numpy as np

from ..features import intensity_scale

__all__ = ["IntensityRange"]

# A model trained on frames reaching at least this is in "raw" units, not 0-1.
_RAW = 2.0


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
    ValueError: the frame holds float64 values 0.1..0.8, within 0..1, but the model was trained on uint8 frames with values 10..200, which it divides by 255: give frames in those units (e.g. (frame * 255).astype(np.uint8))
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
        float_frame = dtype.kind == "f"
        if dtype == self.dtype and not float_frame:
            return intensity_scale(dtype)
        trained_integers = self.dtype.kind in "iu"
        low, high = (float(image.min()), float(image.max())) if image.size else (0.0, 0.0)
        values = f"the frame holds {dtype.name} values {low:.6g}..{high:.6g}"
        trained = (f"the model was trained on {self.dtype.name} frames with values "
                   f"{self.low:.6g}..{self.high:.6g}")
        if trained_integers:
            info = np.iinfo(self.dtype)
            span = float(info.max) - float(info.min)
            if high > info.max + span or low < info.min - span:
                raise ValueError(f"{values}, far outside the {info.min}..{info.max} of the "
                                 f"{self.dtype.name} frames the model was trained on (values "
                                 f"{self.low:.6g}..{self.high:.6g}): convert them to "
                                 f"that range (e.g. frame / {max(high, 1) / info.max:.3g}) or "
                                 "train a model on frames like these")
            if float_frame and 0 < high <= 1 and self.high >= _RAW:
                raise ValueError(f"{values}, within 0..1, but {trained}, which it divides by "
                                 f"{info.max}: give frames in those units (e.g. (frame * "
                                 f"{info.max}).astype(np.{self.dtype.name}))")
            return intensity_scale(self.dtype)
        normalised = self.high < _RAW  # trained on 0-1 floats (or bools): fractions of full scale
        if not float_frame:
            return intensity_scale(dtype) if normalised else 1.0
        if normalised and high >= _RAW:
            raise ValueError(f"{values}, but {trained}: divide them by their full scale (e.g. "
                             "frame / 255 for 8-bit values) or train a model on frames like these")
        if not normalised and 0 < high <= 1:
            raise ValueError(f"{values}, within 0..1, but {trained}: give frames in those units "
                             "or train a model on frames like these")
        return 1.0
