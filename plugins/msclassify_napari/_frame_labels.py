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

__all__ = ["FrameLabels"]


class FrameLabels:
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
        self.dtype = np.dtype(dtype)
        if self.dtype.kind not in "iu":
            raise TypeError(f"labels need an integer dtype, got {self.dtype}")
        self.shape = (int(n_frames), *(int(size) for size in frame_shape))
        if len(self.shape) != 3:
            raise ValueError(f"frame_shape must be (H, W), got {tuple(frame_shape)}")
        self.ndim = 3
        self.size = int(np.prod(self.shape))
        self._frames = {}
        self._zeros = np.zeros(self.shape[1:], self.dtype)
        self._zeros.flags.writeable = False
        self._lock = threading.Lock()

    def __len__(self):
        return self.shape[0]

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
        index = range(self.shape[0])[index]
        return self._frames.get(index, self._zeros)

    def _writable(self, index):
        with self._lock:
            frame = self._frames.get(index)
            if frame is None:
                frame = self._frames[index] = np.zeros(self.shape[1:], self.dtype)
            return frame

    def _split(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if any(item is Ellipsis or item is None for item in key):
            raise IndexError("FrameLabels takes integers, slices and arrays, not ... or None")
        return (key[0], key[1:]) if key else (slice(None), ())

    @staticmethod
    def _is_fancy(first, rest):
        """napari's stroke indices: one integer array per axis."""
        return isinstance(first, np.ndarray) and first.ndim >= 1 and len(rest) == 2 \
            and all(isinstance(item, np.ndarray) for item in rest)

    def __getitem__(self, key):
        first, rest = self._split(key)
        if isinstance(first, (int, np.integer)):
            index = range(self.shape[0])[int(first)]
            # a fresh writable frame for one never written: napari writes into the slice it got
            return self._frames.get(index, np.zeros(self.shape[1:], self.dtype))[rest]
        if self._is_fancy(first, rest):
            first, *rest = np.broadcast_arrays(first, *rest)
            out = np.zeros(first.shape, self.dtype)
            for index in np.unique(first):
                where = first == index
                out[where] = self.frame(int(index))[tuple(axis[where] for axis in rest)]
            return out
        selected = np.arange(self.shape[0])[first]
        if selected.ndim == 0:
            return self.frame(int(selected))[rest]
        stacked = np.stack([self.frame(int(index)) for index in selected]) if selected.size \
            else np.zeros((0, *self.shape[1:]), self.dtype)
        return stacked[(slice(None), *rest)]

    def __setitem__(self, key, value):
        first, rest = self._split(key)
        if isinstance(first, (int, np.integer)):
            self._writable(range(self.shape[0])[int(first)])[rest] = value
            return
        if self._is_fancy(first, rest):
            first, *rest = np.broadcast_arrays(first, *rest)
            value = np.broadcast_to(np.asarray(value, self.dtype), first.shape)
            for index in np.unique(first):
                where = first == index
                self._writable(range(self.shape[0])[int(index)])[
                    tuple(axis[where] for axis in rest)] = value[where]
            return
        selected = np.atleast_1d(np.arange(self.shape[0])[first])
        value = np.broadcast_to(np.asarray(value, self.dtype),
                                (selected.size, *self._zeros[rest].shape))
        for position, index in enumerate(selected):
            self._writable(int(index))[rest] = value[position]

    def __array__(self, dtype=None, copy=None):
        stacked = self[:]
        return stacked if dtype is None else stacked.astype(dtype)

    def __repr__(self):
        return (f"<FrameLabels {self.shape}, {self.dtype}: {len(self._frames)} frame(s) "
                "stored>")
