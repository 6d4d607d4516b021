"""What `LazyFrames` (the reader's frames) and `FrameLabels` (the widget's label stacks) share:
a ``(T, ...)`` array-like read frame by frame through its ``frame(index)``.

napari (and the widget) index these with an integer frame, slices, lists of frames and
trailing pixel indices; this is NumPy's answer for those, built from whole frames, so a
read never touches more frames than it selects.
"""

import numpy as np

__all__ = ["FrameArray"]


class FrameArray:
    """Base of a read-by-frame array ``(T, *frame_shape)``: subclasses define ``frame(index)``.

    Parameters
    ----------
    shape : tuple of int
        ``(T, *frame_shape)``.
    dtype : dtype

    Examples
    --------
    >>> class Ramp(FrameArray):
    ...     def frame(self, index):
    ...         return np.full(self.shape[1:], index, self.dtype)
    >>> ramp = Ramp((4, 2, 3), np.uint8)
    >>> int(ramp[2, 1, 1]), ramp[1:3, 0, :2].tolist(), np.asarray(ramp).shape
    (2, [[1, 1], [2, 2]], (4, 2, 3))
    """

    def __init__(self, shape, dtype):
        self.shape = tuple(int(size) for size in shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape))

    def __len__(self):
        return self.shape[0]

    def frame(self, index):
        """Frame ``index`` (0 <= index < T) as an ndarray."""
        raise NotImplementedError

    def _index(self, index):
        """``index`` as a frame number in range (negative counts from the end)."""
        return range(self.shape[0])[int(index)]

    def _split(self, key):
        """``(frame key, pixel keys)``; ``...`` and ``None`` are refused."""
        key = key if isinstance(key, tuple) else (key,)
        if any(item is Ellipsis or item is None for item in key):
            raise IndexError(f"{type(self).__name__} takes integers, slices and arrays, "
                             "not ... or None")
        return (key[0], key[1:]) if key else (slice(None), ())

    def _selected(self, first):
        """Frame numbers that the frame key ``first`` (a slice, list or array) selects."""
        return np.arange(self.shape[0])[first]

    def _read(self, first, rest):
        """NumPy's ``self[(first, *rest)]``, reading only the selected frames."""
        if isinstance(first, (int, np.integer)):
            return self.frame(self._index(first))[rest]
        selected = self._selected(first)
        if selected.ndim == 0:
            return self.frame(int(selected))[rest]
        if isinstance(first, slice):
            frames, first = selected, slice(None)
        else:  # an advanced index: it broadcasts with array pixel keys, as in NumPy
            frames, where = np.unique(selected, return_inverse=True)   # each frame read once
            first = where.reshape(selected.shape)
        stacked = np.stack([self.frame(int(index)) for index in frames]) if frames.size \
            else np.zeros((0, *self.shape[1:]), self.dtype)
        return stacked[(first, *rest)]

    def __getitem__(self, key):
        return self._read(*self._split(key))

    def __array__(self, dtype=None, copy=None):
        stacked = self[:]
        return stacked if dtype is None else stacked.astype(dtype)
