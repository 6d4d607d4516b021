"""napari reader for videos and TIFF stacks: a lazy array that decodes one frame per access.

Opening a one-hour video reads nothing but its packet index; napari asks for the
frame under the time slider and only that frame is decoded (by
`msclassify.io.open_frames`). The last frames read are kept, so napari's
repeated slicing of the current frame, its thumbnail and the pixel-classifier
widget reading the frame it segments decode it once.

The layer gets its contrast limits from the dtype (8 bits) or the first frame,
so napari does not decode frames across the movie to guess them (a second of
seeking in a long video). napari's own reader also claims videos and would ask
the user to choose; `activate` makes this reader the one napari uses for videos
unless the user chose another.

Only `msclassify.io` is imported: opening a file never waits for the
classifier's libraries (Numba, scikit-learn) to load; `activate` starts loading them in a
background thread (`_preload`), ready for the docks. Importing this module (napari does, to
activate the plugin, whichever of its readers opens a file: an OME-Zarr too) imports only
the extensions' lists; the readers themselves (`open_frames`: tifffile, imageio, PyAV) are
imported by `read_frames`.
"""

import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from msclassify.io import TIFF_EXTENSIONS, VIDEO_EXTENSIONS

from ._frame_array import FrameArray

__all__ = ["LazyFrames", "activate", "get_reader", "read_frames"]

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


class LazyFrames(FrameArray):
    """A read-only array ``(T, H, W[, C])`` over a `msclassify.io.FrameSource`.

    Indexing decodes only the frames the index selects; the ``cache_frames``
    most recently read frames are kept. Reads go through a lock because a video
    decoder keeps its position between reads and napari may slice from several
    threads.

    Examples
    --------
    >>> import numpy as np, tifffile, tempfile, os
    >>> from msclassify.io import open_frames
    >>> path = os.path.join(tempfile.mkdtemp(), "stack.tif")
    >>> tifffile.imwrite(path, np.arange(30, dtype=np.uint8).reshape(3, 2, 5),
    ...                  photometric="minisblack")
    >>> frames = LazyFrames(open_frames(path))
    >>> frames.shape, int(frames[2, 1, 4]), frames[1:, 0, :2].tolist()
    ((3, 2, 5), 29, [[10, 11], [20, 21]])
    """

    def __init__(self, source, cache_frames=4):
        super().__init__((len(source),) + tuple(source.shape), source.dtype)
        self.source = source
        self._cache = OrderedDict()
        self._cache_frames = int(cache_frames)
        self._lock = threading.Lock()

    def frame(self, index):
        """Frame ``index`` (read-only: it may be shared with later reads)."""
        with self._lock:
            if index in self._cache:
                self._cache.move_to_end(index)
                return self._cache[index]
            frame = self.source.read(index)
            frame.flags.writeable = False
            self._cache[index] = frame
            while len(self._cache) > self._cache_frames:
                self._cache.popitem(last=False)
            return frame

    def __repr__(self):
        return f"<LazyFrames {self.source.path!r}: shape {self.shape}, {self.dtype}>"


def activate(context=None, settings=None):
    """Make this plugin napari's reader for videos, for the extensions without a reader chosen.

    Called by napari when the plugin is first used (``on_activate`` in napari.yaml). napari's
    built-in reader claims videos too, so opening one asked the user to choose between the
    two (and the built-in one decodes every frame into memory). A choice the user made
    (Preferences > Plugins > File extension readers) is kept.
    """
    if settings is None:
        from napari.settings import get_settings
        settings = get_settings()
    preferences = dict(settings.plugins.extension2reader)
    missing = {f"*{extension}": "msclassify" for extension in VIDEO_EXTENSIONS
               if f"*{extension}" not in preferences}
    if missing:
        settings.plugins.extension2reader = {**preferences, **missing}
    # the docks' libraries load in a background thread from the plugin's first use (e.g.
    # opening a video), so docking a widget later does not import them on the GUI thread;
    # 1 s after napari's turn that opens the file (it reads and adds the layer in one turn),
    # so that napari first adds and draws what is being opened (started at once, the load
    # shared the GIL with it: opening the video stalled 1.9 s instead of 1.4 s; 2 s after
    # activation, it began inside the open's turn whenever that took over 2 s; 2 s after the
    # turn, docking 5 s after the open waited 8-22 s for it at load 17 instead of 3-14 s)
    from ._preload import PRELOAD_DELAY_S, preload_in_background
    preload_in_background(delay=PRELOAD_DELAY_S, after_this_turn=True)


def _contrast_limits(data):
    """8 bits: 0-255; else the first frame's range (napari would read frames across the
    movie)."""
    dtype = np.dtype(data.dtype)
    if dtype == np.uint8:
        return (0, 255)
    first = np.asarray(data[0] if isinstance(data, LazyFrames) else data)
    low, high = float(np.nanmin(first)), float(np.nanmax(first))
    return (low, high if high > low else low + 1)


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
    from msclassify.io import open_frames

    source = open_frames(path, as_gray="auto")  # grey footage stored as RGB: grey
    data = source.read(0) if len(source) == 1 else LazyFrames(source)
    kwargs = {"name": Path(path).stem, "rgb": len(source.shape) == 3,
              "contrast_limits": _contrast_limits(data),
              "metadata": {"msclassify_source": str(path), "n_frames": len(source)}}
    return [(data, kwargs, "image")]
