"""One volume larger than memory, read window by window from OME-Zarr, zarr or TIFF.

`open_volume` gives a `LazyVolume`: the volume's ``(Z, Y, X[, C])`` shape, its
dtype, the voxel spacing the file records, and any ``(z, y, x)`` window of it as
an ndarray, read from the store (the file's other slices are never read). How an
axis is meant is never guessed: the caller names every stored axis (``zyx``,
``czyx``, ...) as for `read_volume`; a time axis must have length 1 (one volume).

Stores: a zarr array, an OME-Zarr (NGFF 0.4/0.5) image group (its first
multiscale dataset; the spacing from its ``scale``, `ngff_spacing`), or a TIFF
read through tifffile's zarr view (a tiled or uncompressed TIFF reads only the
tiles or strips of a window; OME-TIFF or ImageJ spacing, as `read_volume`).
"""

import hashlib
from pathlib import Path

import numpy as np

from ..checks import file_problem
from ._errors import FrameReadError, _reason
from ._lazy import _ngff_version, _zarr_chunk_checker
from ._volume import check_axes, check_complete, ngff_spacing, tiff_spacing

__all__ = ["LazyVolume", "open_volume"]


class LazyVolume:
    """A volume read window by window (module docstring).

    Parameters
    ----------
    array : array_like
        The stored array (zarr or anything sliceable).
    axes : str
        One letter per stored axis, from ``tzcyx``, with z, y and x.
    description : str
        What it is, for messages and provenance.
    spacing : tuple of 3 float or None
        Voxel size ``(z, y, x)`` the file records.
    check_chunk : callable or None
        Called with the stored array's key before every read (a zarr store's check that
        the chunks it touches are there and whole).

    Attributes
    ----------
    shape : tuple of int
        ``(Z, Y, X)``, or ``(Z, Y, X, C)`` when the axes hold ``c``.
    dtype : numpy.dtype
    ndim : int

    Examples
    --------
    >>> stored = np.arange(2 * 4 * 5 * 6).reshape(2, 4, 5, 6)          # c, z, y, x
    >>> volume = LazyVolume(stored, "czyx", "example", (2.0, 1.0, 1.0))
    >>> volume.shape, volume[1:3, :2, 4:].shape
    ((4, 5, 6, 2), (2, 2, 2, 2))
    """

    def __init__(self, array, axes, description, spacing=None, check_chunk=None):
        self._array, self.description, self.spacing = array, description, spacing
        self._check_chunk = check_chunk
        self._axes = check_axes(axes)
        if len(self._axes) != len(array.shape):
            raise ValueError(f"{description} holds an array of shape {tuple(array.shape)} but "
                             f"axes {self._axes!r} name {len(self._axes)} axes; name each of its "
                             f"{len(array.shape)} axes")
        if "t" in self._axes and array.shape[self._axes.index("t")] != 1:
            raise ValueError(f"{description} holds {array.shape[self._axes.index('t')]} volumes "
                             "(axis t); a volume predicted chunk by chunk is one volume: "
                             "predict the series without --chunks, or store one volume per file")
        size = dict(zip(self._axes, array.shape))
        self.shape = tuple(int(size[a]) for a in "zyx") + (
            (int(size["c"]),) if "c" in self._axes else ())
        self.ndim = len(self.shape)
        self.dtype = np.dtype(array.dtype)

    def __getitem__(self, window):
        if not isinstance(window, tuple):
            window = (window,)
        window = tuple(window) + (slice(None),) * (3 - len(window))
        spatial = dict(zip("zyx", window[:3]))
        key = tuple(spatial[a] if a in spatial else slice(None) if a == "c" else 0
                    for a in self._axes)
        if self._check_chunk is not None:
            self._check_chunk(key)
        try:
            data = np.asarray(self._array[key])
        except Exception as exc:  # a decoder's error: zarr and tifffile raise many types
            where = ", ".join(f"{a} {w.start}..{w.stop}" for a, w in zip(
                "zyx", (slice(*w.indices(n)) for w, n in zip(window[:3], self.shape))))
            raise FrameReadError(f"{self.description}: cannot read voxels {where} "
                                 f"({_reason(exc)}); the file is damaged or truncated there: "
                                 "re-copy or re-export it") from None
        kept = [a for a in self._axes if a != "t"]
        order = [kept.index(a) for a in "zyx" if a in kept] + (
            [kept.index("c")] if "c" in kept else [])
        return np.ascontiguousarray(np.transpose(data, order))

    def identity(self):
        """Description, shape, dtype and a digest of the first and last few slices' corners:
        what a chunked output records of its input (cheap, and tells two volumes apart)."""
        digest = hashlib.sha256()
        depth, height, width = self.shape[:3]
        for z in (0, max(depth - 2, 0)):
            digest.update(self[z:z + 2, :min(height, 256), :min(width, 256)].tobytes())
            digest.update(self[z:z + 2, max(height - 256, 0):, max(width - 256, 0):].tobytes())
        return {"path": self.description, "shape": list(self.shape), "dtype": self.dtype.str,
                "spacing": None if self.spacing is None else list(self.spacing),
                "fingerprint": digest.hexdigest()}

    def __repr__(self):
        return f"<LazyVolume {self.description}: {self.shape} {self.dtype}>"


def _zarr_volume(path, allow_missing):
    import zarr

    try:
        node = zarr.open(str(path), mode="r")
    except Exception as exc:  # zarr raises many types for what is not a store
        raise ValueError(f"{path} is not a readable zarr store ({type(exc).__name__}: "
                         f"{exc})") from None
    if isinstance(node, zarr.Group):
        attrs = node.attrs.asdict()
        try:
            level0 = attrs.get("ome", attrs)["multiscales"][0]["datasets"][0]["path"]
            node = node[level0]
        except (KeyError, IndexError, TypeError):
            raise ValueError(f"{path} is a zarr group but not an OME-Zarr image with a level-0 "
                             "dataset; give the image group or one of its arrays") from None
        _ngff_version(attrs, path)        # refuses a version this reader does not know
        description = f"{path} (OME-Zarr)"
        return node, description, ngff_spacing(attrs), _zarr_chunk_checker(node, description,
                                                                           allow_missing)
    return node, str(path), None, _zarr_chunk_checker(node, str(path), allow_missing)


def _tiff_volume(path):
    import tifffile
    import zarr

    try:
        with tifffile.TiffFile(path) as tif:
            check_complete(tif, path)
            spacing = tiff_spacing(tif)
        store = tifffile.imread(path, aszarr=True)
        return zarr.open(store, mode="r"), str(path), spacing, None
    except (OSError, ValueError, tifffile.TiffFileError, IndexError) as exc:
        raise ValueError(f"cannot read {path} as a TIFF volume ({exc}); give a multi-page "
                         "TIFF, OME-TIFF or ImageJ hyperstack, or an OME-Zarr store") from None


def open_volume(path, axes, allow_missing=False):
    """Open a volume to read window by window: OME-Zarr, zarr or TIFF (module docstring).

    Parameters
    ----------
    path : str or Path
    axes : str
        One letter per stored axis, from ``tzcyx`` (`check_axes`).
    allow_missing : bool, optional
        Read a zarr chunk file that is missing as zeros (label volumes may be sparse); by
        default it is refused, naming the chunk (zarr would silently read its fill value).

    Returns
    -------
    LazyVolume

    Raises
    ------
    ValueError
        One line: what is wrong with the file or the axes.
    """
    axes = check_axes(axes)
    path = Path(path)
    if path.is_dir():
        array, description, spacing, check = _zarr_volume(path, allow_missing)
    else:
        problem = file_problem(path)  # before opening: a FIFO named .tif would block
        if problem:
            raise ValueError(f"volume {path} {problem}")
        array, description, spacing, check = _tiff_volume(path)
    if np.dtype(array.dtype).kind not in "uifb":
        raise ValueError(f"{description} holds {array.dtype} values; expected numbers")
    return LazyVolume(array, axes, description, spacing, check)
