"""The base of every frame reader (`FrameSource`), frame names and the grey rule."""

import hashlib
import os
import re
from pathlib import Path

import numpy as np

from ..checks import is_int
from ._errors import FrameReadError

__all__ = ["FrameSource", "IMAGE_EXTENSIONS", "TIFF_EXTENSIONS", "VIDEO_EXTENSIONS",
           "natural_sort_key"]


VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".m4v", ".webm")
TIFF_EXTENSIONS = (".tif", ".tiff")
IMAGE_EXTENSIONS = TIFF_EXTENSIONS + (".png", ".jpg", ".jpeg", ".bmp")

# ITU-R BT.601 luma, the weights FFmpeg uses for video luma, so that an RGB
# image and a video of it give the same grey frames.
_LUMA_WEIGHTS = np.array([0.299, 0.587, 0.114])
# Bytes read from the start and the end of an input for its fingerprint (FrameSource.identity)
_FINGERPRINT_BYTES = 2**20


def natural_sort_key(text):
    """Sort key that orders digit runs by value: ``frame2`` before ``frame10``.

    Examples
    --------
    >>> sorted(["frame10.png", "frame2.png", "Frame1.png"], key=natural_sort_key)
    ['Frame1.png', 'frame2.png', 'frame10.png']
    """
    # re.split with a capturing group alternates text/digits, so the tuple's
    # types line up position by position and tuples always compare.
    return tuple(int(part) if part.isdigit() else part.lower()
                 for part in re.split(r"(\d+)", str(text)))


def _default_names(n_frames):
    width = max(6, len(str(max(n_frames - 1, 0))))
    return [f"frame_{index:0{width}d}" for index in range(n_frames)]


def _rgb_to_gray(frame):
    """Luma of an (H, W, 3|4) frame, in the frame's own dtype (alpha is dropped)."""
    gray = np.tensordot(frame[..., :3], _LUMA_WEIGHTS, axes=([-1], [0]))
    if np.issubdtype(frame.dtype, np.integer):
        info = np.iinfo(frame.dtype)
        return np.clip(np.rint(gray), info.min, info.max).astype(frame.dtype)
    return gray.astype(frame.dtype)


def _are(n_frames):
    return "is" if n_frames == 1 else "are"


def _frames_text(n_frames):
    return "frame 0" if n_frames == 1 else f"frames 0-{n_frames - 1}"


def _is_zarr(path):
    return path.is_dir() and any((path / marker).is_file()
                                 for marker in ("zarr.json", ".zgroup", ".zarray"))


def _is_grey_stored_as_colour(frame):
    """True for an RGB(A) frame whose red, green and blue channels are equal."""
    return (frame.ndim == 3 and frame.shape[2] in (3, 4)
            and np.array_equal(frame[..., 0], frame[..., 1])
            and np.array_equal(frame[..., 0], frame[..., 2]))


class _Opened:
    """Something opened on a path: released by `close` or at the end of a ``with`` block."""

    def close(self):
        """Release open files (using it after closing is an error)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self):
        return f"<{type(self).__name__} {str(self.path)!r}: {self._contents()}>"

    def _contents(self):
        raise NotImplementedError


class FrameSource(_Opened):
    """A sequence of equally shaped frames, read from disk one at a time.

    Create one with `open_frames`. Frames are decoded on demand: iterating a
    one-hour video uses the memory of one frame. Use it as a context manager
    (or call `close`) to release the file.

    Attributes
    ----------
    path : str
        What was opened (file, folder or glob pattern).
    shape : tuple of int
        Shape of every frame: ``(H, W)`` for grey, ``(H, W, C)`` for colour.
    dtype : numpy.dtype
        Data type of every frame (native byte order).

    Examples
    --------
    >>> import numpy as np, tifffile, tempfile, os
    >>> from msclassify.io import open_frames
    >>> path = os.path.join(tempfile.mkdtemp(), "stack.tif")
    >>> tifffile.imwrite(path, np.arange(24, dtype=np.uint8).reshape(3, 2, 4),
    ...                  photometric="minisblack")
    >>> with open_frames(path) as frames:
    ...     print(len(frames), frames.shape, frames.name(2), frames.read(1)[0].tolist())
    3 (2, 4) frame_000002 [8, 9, 10, 11]
    """

    def __init__(self, path, n_frames, shape, dtype, names=None):
        self.path = str(path)
        self.shape = tuple(int(size) for size in shape)
        self.dtype = np.dtype(dtype).newbyteorder("=")
        self._n_frames = int(n_frames)
        self._names = list(names) if names is not None else None
        self._source_files = None  # the files read, when not just ``path``

    def __len__(self):
        return self._n_frames

    def _check_index(self, index):
        if not is_int(index):
            raise TypeError(f"frame index must be an integer, got {type(index).__name__}")
        index = int(index)
        if index < 0:
            index += self._n_frames
        if not 0 <= index < self._n_frames:
            raise IndexError(f"frame {index} is out of range: {self.path} has "
                             f"{self._n_frames} frames (0..{self._n_frames - 1})")
        return index

    def read(self, index):
        """Frame ``index`` (negative counts from the end) as a new ndarray."""
        index = self._check_index(index)
        frame = self._read(index)
        if frame.shape != self.shape:
            raise FrameReadError(f"frame {index} of {self.path} is {frame.shape}, not {self.shape} "
                                 "like the others; split the input into parts of equal size")
        return frame

    def __getitem__(self, index):
        return self.read(index)

    def _as_grey(self):
        """This source reading grey frames from now on (`open_frames`' ``as_gray="auto"``
        for colour frames whose channels are equal), or None: open it again with
        ``as_gray=True``."""
        return None

    def iter_frames(self, start=0, stop=None):
        """Yield frames ``start`` to ``stop - 1`` in order (``stop=None``: to the end).

        For videos this seeks once to ``start`` and then decodes sequentially,
        which is how a resumed run skips the frames already done.
        """
        start = 0 if start is None else start
        stop = self._n_frames if stop is None else min(int(stop), self._n_frames)
        if start < 0 or stop < 0:
            raise ValueError(f"start and stop must be >= 0, got start={start}, stop={stop}")
        for index in range(int(start), stop):
            yield self.read(index)

    def __iter__(self):
        return self.iter_frames()

    def name(self, index):
        """Stable name of frame ``index`` for output files, e.g. ``'frame_000123'``.

        Videos and multi-page TIFFs use ``frame_`` plus the zero-padded index;
        image files (a folder, a glob or a single image) use the file name
        without extension when those are unique, else the ``frame_`` form.
        """
        index = self._check_index(index)
        if self._names is None:
            self._names = _default_names(self._n_frames)
        return self._names[index]

    def names(self):
        """List of all frame names, in frame order (see `name`)."""
        return [self.name(index) for index in range(self._n_frames)]

    def files(self):
        """The files (or the folder) the frames are read from, as Paths."""
        return list(self._source_files or [Path(self.path)])

    def identity(self):
        """What identifies these frames, for the record an output keeps of what made it.

        Returns
        -------
        dict
            ``path`` (absolute; for messages), ``n_frames``, ``frame_shape``,
            ``dtype``, ``size`` (bytes of the files read) and ``fingerprint``: the
            SHA-256 of every file's size (and name, for a folder of images) and of
            the first and last MiB of the first and last file, which is cheap for
            an hour of video and tells any two recordings apart.
        """
        files = self.files()
        digest = hashlib.sha256()
        size = 0
        for file in files:
            file_size = os.path.getsize(file)
            size += file_size
            # the names of a folder's files are the frames' names; a single file's is not
            digest.update(f"{file.name if len(files) > 1 else ''}\0{file_size}\0".encode())
        for file in dict.fromkeys((files[0], files[-1])):
            with open(file, "rb") as fh:
                digest.update(fh.read(_FINGERPRINT_BYTES))
                fh.seek(max(0, os.path.getsize(file) - _FINGERPRINT_BYTES))
                digest.update(fh.read(_FINGERPRINT_BYTES))
        return {"path": str(Path(self.path).absolute()), "n_frames": self._n_frames,
                "frame_shape": list(self.shape), "dtype": self.dtype.str, "size": size,
                "fingerprint": digest.hexdigest()}

    def _contents(self):
        return f"{self._n_frames} frames of {self.shape} {self.dtype}"

    def _read(self, index):
        raise NotImplementedError
