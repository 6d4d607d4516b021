"""A label stack ``(T, H, W)`` that stores only the frames written to: scribbles and
segmentations of long movies.

A 1500-frame 1024² movie needs 1.5 GB per label stack; napari's Labels layer needs
only the frame on screen, and a user scribbles on a few frames. `FrameLabels`
keeps a dict of the frames that were written to and answers reads of the others
with one shared read-only frame of zeros, so a new scribble or segmentation layer
costs nothing however long the movie, and the scribbled frames are known without
scanning.
"""

import threading

import numpy as np

from ._frame_array import FrameArray

__all__ = ["FrameLabels"]


class FrameLabels(FrameArray):
    """A writable ``(T, H, W)`` integer array that allocates a frame when it is first written.

    Indexing follows NumPy for what napari and the widget use: an integer frame
    (``labels[t]``, ``labels[t, y0:y1, x]``), slices and lists of frames (a copy),
    and napari's brush strokes, a tuple of index arrays (``labels[(ts, ys, xs)]``),
    for reading and writing.

    Parameters
    ----------
    n_frames : int
    frame_shape : tuple of int
        ``(H, W)``.
    dtype : dtype, optional

    Examples
    --------
    >>> labels = FrameLabels(1500, (1024, 1024))
    >>> labels.shape, labels.stored_frames()
    ((1500, 1024, 1024), [])
    >>> labels[(np.array([7, 7]), np.array([0, 5]), np.array([1, 2]))] = 2   # a brush stroke
    >>> labels.stored_frames(), int(labels[7].sum()), int(labels[8].sum()), labels.nbytes_stored
    ([7], 4, 0, 1048576)
    """

    def __init__(self, n_frames, frame_shape, dtype=np.uint8):
        if np.dtype(dtype).kind not in "iu":
            raise TypeError(f"labels need an integer dtype, got {np.dtype(dtype)}")
        shape = (int(n_frames), *(int(size) for size in frame_shape))
        if len(shape) != 3:
            raise ValueError(f"frame_shape must be (H, W), got {tuple(frame_shape)}")
        super().__init__(shape, dtype)
        self._frames = {}
        self._zeros = np.zeros(self.shape[1:], self.dtype)
        self._zeros.flags.writeable = False
        self._lock = threading.Lock()

    @property
    def nbytes_stored(self):
        """Bytes of the frames held (the rest reads as zeros)."""
        return len(self._frames) * self._zeros.nbytes

    def stored_frames(self):
        """Frames written to so far (they may have been erased back to zeros)."""
        with self._lock:
            return sorted(self._frames)

    def frame(self, index):
        """Frame ``index`` (read-only zeros if it was never written)."""
        return self._frames.get(self._index(index), self._zeros)

    def _writable(self, index):
        with self._lock:
            frame = self._frames.get(index)
            if frame is None:
                frame = self._frames[index] = np.zeros(self.shape[1:], self.dtype)
            return frame

    @staticmethod
    def _is_fancy(first, rest):
        """napari's stroke indices: one integer array per axis."""
        return isinstance(first, np.ndarray) and first.ndim >= 1 and len(rest) == 2 \
            and all(isinstance(item, np.ndarray) for item in rest)

    def _strokes(self, first, rest):
        """Per frame of a stroke ``(ts, ys, xs)``: (frame, where in the stroke, pixel keys)."""
        first, *rest = np.broadcast_arrays(first, *rest)
        for index in np.unique(first):
            where = first == index
            yield self._index(index), where, tuple(axis[where] for axis in rest)

    def __getitem__(self, key):
        first, rest = self._split(key)
        if isinstance(first, (int, np.integer)):
            # a fresh writable frame for one never written: napari writes into the slice it got
            return self._frames.get(self._index(first),
                                    np.zeros(self.shape[1:], self.dtype))[rest]
        if self._is_fancy(first, rest):
            out = np.zeros(np.broadcast_shapes(first.shape, *(a.shape for a in rest)),
                           self.dtype)
            for index, where, pixels in self._strokes(first, rest):
                out[where] = self.frame(index)[pixels]
            return out
        return self._read(first, rest)

    def __setitem__(self, key, value):
        first, rest = self._split(key)
        if isinstance(first, (int, np.integer)):
            self._writable(self._index(first))[rest] = value
            return
        if self._is_fancy(first, rest):
            shape = np.broadcast_shapes(first.shape, *(a.shape for a in rest))
            value = np.broadcast_to(np.asarray(value, self.dtype), shape)
            for index, where, pixels in self._strokes(first, rest):
                self._writable(index)[pixels] = value[where]
            return
        selected = np.atleast_1d(self._selected(first))
        value = np.broadcast_to(np.asarray(value, self.dtype),
                                (selected.size, *self._zeros[rest].shape))
        for position, index in enumerate(selected):
            self._writable(int(index))[rest] = value[position]

    def __repr__(self):
        return (f"<FrameLabels {self.shape}, {self.dtype}: {len(self._frames)} frame(s) "
                "stored>")
