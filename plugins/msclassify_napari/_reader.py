"""napari reader for videos and TIFF stacks: a lazy array that decodes one frame per access.

Opening a one-hour video reads nothing but its packet index; napari asks for the
frame under the time slider and only that frame is decoded (by
`msclassify.io.open_frames`). Frames are chunks of a dask array, so napari's
own dask cache and async slicing work unchanged.
"""

import threading
from pathlib import Path

import dask.array as da
import numpy as np

from msclassify.io import TIFF_EXTENSIONS, VIDEO_EXTENSIONS, open_frames

__all__ = ["get_reader", "lazy_frames", "read_frames"]

_EXTENSIONS = VIDEO_EXTENSIONS + TIFF_EXTENSIONS


def get_reader(path):
    """Return `read_frames` for one video or TIFF path, None for anything else."""
    if isinstance(path, (list, tuple)):
        # napari passes a list when several files are dropped at once; each file is
        # its own movie, so a list is left to other readers
        return None
    if Path(path).suffix.lower() not in _EXTENSIONS or not Path(path).is_file():
        return None
    return read_frames


def lazy_frames(source):
    """A dask array ``(T, H, W[, C])`` over a `msclassify.io.FrameSource`, one chunk per frame.

    Reads go through a lock because a video decoder keeps its position between
    reads and napari may slice from several threads.

    Examples
    --------
    >>> import numpy as np, tifffile, tempfile, os
    >>> from msclassify.io import open_frames
    >>> path = os.path.join(tempfile.mkdtemp(), "stack.tif")
    >>> tifffile.imwrite(path, np.arange(30, dtype=np.uint8).reshape(3, 2, 5),
    ...                  photometric="minisblack")
    >>> frames = lazy_frames(open_frames(path))
    >>> frames.shape, frames.chunksize, int(frames[2, 1, 4].compute())
    ((3, 2, 5), (1, 2, 5), 29)
    """
    lock = threading.Lock()

    def read_block(block_id=None):
        with lock:
            return source.read(block_id[0])[np.newaxis]

    chunks = ((1,) * len(source),) + tuple((size,) for size in source.shape)
    empty = np.empty((0,) * (1 + len(source.shape)), dtype=source.dtype)
    return da.map_blocks(read_block, chunks=chunks, dtype=source.dtype, meta=empty)


def _open(path):
    """Open ``path``; colour footage whose first frame is grey (R = G = B) is opened as grey."""
    source = open_frames(path)
    if len(source.shape) == 3 and source.shape[2] in (3, 4):
        first = source.read(0)
        if np.array_equal(first[..., 0], first[..., 1]) and np.array_equal(first[..., 0],
                                                                           first[..., 2]):
            source.close()
            source = open_frames(path, as_gray=True)
    return source


def read_frames(path):
    """Read a video or TIFF stack as napari layer data (lazy when it has several frames).

    Returns
    -------
    list of (data, kwargs, "image")
        One image layer named after the file; ``rgb`` is set for colour frames.

    Raises
    ------
    FrameReadError
        For a corrupt, truncated or unsupported file (napari shows the message).
    """
    source = _open(path)
    data = source.read(0) if len(source) == 1 else lazy_frames(source)
    kwargs = {"name": Path(path).stem, "rgb": len(source.shape) == 3,
              "metadata": {"msclassify_source": str(path), "n_frames": len(source)}}
    return [(data, kwargs, "image")]
