"""Images larger than memory, opened lazily: OME-Zarr, zarr, HDF5 and tiled TIFF.

`open_image` gives a `LazyImage`: the image's shape and dtype, and any window of
it read on demand (``image[y0:y1, x0:x1]`` is an ndarray, ``(h, w)`` or
``(h, w, C)`` with channels last, whatever the store's axis order). Nothing is
read until a window is asked for, so a 100k x 100k mosaic opens instantly and
prediction reads it chunk by chunk (`msclassify.pixel.predict_chunks`).

The formats are read by their own libraries: zarr (plain arrays, and OME-Zarr /
NGFF v0.4 and v0.5, whose ``multiscales`` metadata names level 0 and the axes),
h5py (``file.h5:/group/dataset``) and tifffile (tiled or pyramidal TIFF through
its zarr store, level 0). Damaged input is refused with one line naming the file
and the chunk: a chunk file that is missing (zarr would silently read the fill
value), of another size than its Blosc header records (Blosc would silently decode
a truncated one into garbage) or that cannot be decoded, a dataset path that does
not exist, an NGFF version or axes this reader does not know.
"""

import hashlib
import itertools
from pathlib import Path

import numpy as np

from ._errors import FrameReadError, _reason
from ._frames import _is_zarr
from ._zarr import _chunk_path, _import_zarr

__all__ = ["LazyImage", "is_large_image", "open_image"]

NGFF_VERSIONS = ("0.4", "0.5")
_H5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")
_TIFF_SUFFIXES = (".tif", ".tiff")
_SPATIAL = ("y", "x")


def _split_h5(spec):
    """``("file.h5", "/path")`` for ``file.h5:/path``, else None."""
    text = str(spec)
    for suffix in _H5_SUFFIXES:
        marker = suffix + ":"
        at = text.lower().find(marker)
        if at >= 0:
            return text[:at + len(suffix)], text[at + len(marker):] or "/"
    return None


def is_large_image(spec):
    """True if ``spec`` names something `open_image` reads lazily: a zarr store, an HDF5
    dataset (``file.h5:/path``) or a TIFF file."""
    if _split_h5(spec) is not None:
        return True
    path = Path(str(spec))
    return path.suffix.lower() == ".zarr" or _is_zarr(path)


class LazyImage:
    """One 2-D image (with optional channels) read window by window from a store.

    Attributes
    ----------
    shape : tuple of int
        ``(H, W)`` or ``(H, W, C)``.
    dtype : numpy.dtype
    ndim : int
    chunks : tuple of int
        The store's chunk (tile) size along y and x, a good multiple for windows.
    description : str
        What was opened, for messages (file, dataset, level).

    Examples
    --------
    >>> import numpy as np, zarr, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "image.zarr")
    >>> z = zarr.create_array(path, shape=(100, 80), chunks=(32, 32), dtype=np.uint8)
    >>> z[:] = np.arange(8000).reshape(100, 80) % 256
    >>> image = open_image(path)
    >>> image.shape, image.chunks, int(image[10:12, 5:7].sum())
    ((100, 80), (32, 32), 310)
    """

    def __init__(self, array, description, axes, chunks, check_chunk=None):
        self._array = array
        self.description = description
        self._axes = axes            # per stored axis: "y", "x", "c" or an index to fix
        self.dtype = np.dtype(array.dtype)
        spatial = [array.shape[axes.index(name)] for name in _SPATIAL]
        channels = [array.shape[i] for i, a in enumerate(axes) if a == "c"]
        self.shape = tuple(int(v) for v in spatial + channels)
        self.ndim = len(self.shape)
        self.chunks = tuple(int(c) for c in chunks)
        self._check_chunk = check_chunk

    def __len__(self):
        return self.shape[0]

    def _key(self, window):
        window = tuple(window) + (slice(None),) * (2 - len(tuple(window)))
        ys, xs = (slice(*w.indices(n)) for w, n in zip(window[:2], self.shape[:2]))
        key = []
        for axis in self._axes:
            key.append(ys if axis == "y" else xs if axis == "x" else
                       slice(None) if axis == "c" else axis)
        return ys, xs, tuple(key)

    def __getitem__(self, window):
        if not isinstance(window, tuple):
            window = (window,)
        ys, xs, key = self._key(window)
        if self._check_chunk is not None:
            self._check_chunk(key)
        try:
            data = np.asarray(self._array[key])
        except Exception as exc:
            raise _read_error(self, ys, xs, exc) from None
        kept = [a for a in self._axes if isinstance(a, str)]
        order = [kept.index(a) for a in _SPATIAL] + [i for i, a in enumerate(kept) if a == "c"]
        return np.ascontiguousarray(np.transpose(data, order))

    def __array__(self, dtype=None, copy=None):
        data = self[:, :]
        return data if dtype is None else data.astype(dtype)

    def identity(self):
        """What this image is, for an output's provenance: description, shape, dtype and a
        digest of its first and last chunk's pixels (cheap, and tells two images apart)."""
        digest = hashlib.sha256()
        cy, cx = self.chunks
        height, width = self.shape[:2]
        for y, x in ((0, 0), (max(height - cy, 0), max(width - cx, 0))):
            digest.update(np.ascontiguousarray(self[y:y + cy, x:x + cx]).tobytes())
        return {"path": self.description, "shape": list(self.shape), "dtype": self.dtype.str,
                "fingerprint": digest.hexdigest()}

    def __repr__(self):
        return f"<LazyImage {self.description}: {self.shape} {self.dtype}>"


def _read_error(image, ys, xs, exc):
    return FrameReadError(f"{image.description}: cannot read pixels y {ys.start}..{ys.stop}, "
                          f"x {xs.start}..{xs.stop} ({_reason(exc)}); the file is "
                          "damaged or truncated there: re-copy or re-export it")


def _axes_for(shape, description, names=None):
    """Per stored axis "y"/"x"/"c" or 0 (a length-1 axis to drop), from NGFF names or shape."""
    if names is not None:
        axes = []
        for name, size in zip(names, shape):
            if name in _SPATIAL or name == "c":
                axes.append(name)
            elif size == 1:
                axes.append(0)
            else:
                raise FrameReadError(
                    f"{description} has {size} points along axis {name!r}; msclassify predicts "
                    "one 2-D image: store one time point / plane per image" + (
                        ", or read the z-stack as a volume (msclassify predict --axes zyx, "
                        "msclassify.io.open_volume)" if name == "z" else ""))
        if not set(_SPATIAL) <= set(axes):
            raise FrameReadError(f"{description} has axes {list(names)}, without both y and x")
        return axes
    if len(shape) == 2:
        return ["y", "x"]
    if len(shape) == 3 and shape[-1] <= 4:
        return ["y", "x", "c"]
    if len(shape) == 3 and shape[0] <= 4:
        return ["c", "y", "x"]
    raise FrameReadError(f"{description} has shape {tuple(shape)}; expected one 2-D image "
                         "(H, W), (H, W, C) or (C, H, W) with at most 4 channels")


def _check_dtype(array, description):
    dtype = np.dtype(array.dtype)
    if dtype.kind not in "biuf":
        raise FrameReadError(f"{description} holds {dtype} values; msclassify reads integer, "
                             "float or bool images")


def _blosc_framed(array):
    """Whether every chunk file of zarr ``array`` is one Blosc frame (its only compressor)."""
    compressors = getattr(array, "compressors", ())
    return len(compressors) == 1 and type(compressors[0]).__name__ in ("Blosc", "BloscCodec")


def _blosc_size_problem(file):
    """How a Blosc-framed chunk ``file``'s size differs from the one its header records, or
    None: Blosc decodes a truncated frame without an error, into garbage."""
    with open(file, "rb") as handle:
        header = handle.read(16)
    size = file.stat().st_size
    recorded = int.from_bytes(header[12:16], "little") if len(header) == 16 else None
    if recorded == size:
        return None
    return (f"holds {size} bytes but its Blosc header records "
            + (f"{recorded}" if recorded is not None else "a 16-byte header"))


def _zarr_chunk_checker(array, description, allow_missing=False):
    """A check of the chunk files a read of zarr ``array`` touches: ``check(key)``, ``key``
    one slice or index per stored axis; None where a chunk is not one file (a remote or
    sharded store). A missing chunk is refused unless ``allow_missing`` (zarr reads it as its
    fill value, silently: label images may be sparse), a Blosc chunk whose size differs from
    its header's always (Blosc would decode a truncated one into garbage, silently)."""
    if _chunk_path(array, (0,) * array.ndim) is None:
        return None
    blosc = _blosc_framed(array)
    if allow_missing and not blosc:
        return None

    def check(key):
        ranges = []
        for index, size, chunk in zip(key, array.shape, array.chunks):
            if isinstance(index, slice):
                start, stop, _ = index.indices(size)
                ranges.append(range(start // chunk, -(-stop // chunk)))
            else:
                ranges.append([index // chunk])
        for coords in itertools.product(*ranges):
            file = _chunk_path(array, coords)
            if not file.is_file():
                if allow_missing:
                    continue
                raise FrameReadError(
                    f"{description}: chunk {coords} ({file}) is missing, so "
                    "its pixels are unknown; the copy is incomplete: re-copy the store")
            problem = blosc and _blosc_size_problem(file)
            if problem:
                raise FrameReadError(
                    f"{description}: chunk {coords} ({file}) {problem}: it is truncated or "
                    "damaged, so its pixels are unknown; re-copy the store")
    return check


def _ngff_version(attrs, path):
    """The NGFF version of OME-Zarr image group ``path`` with attributes ``attrs`` (0.4: in
    its first multiscale, 0.5: under ``"ome"``); FrameReadError for one this reader does
    not know."""
    ome = attrs.get("ome", attrs)
    version = str(ome.get("version", "")) or None
    version = str(ome["multiscales"][0].get("version", version))
    if version not in NGFF_VERSIONS:
        raise FrameReadError(f"{path} is OME-Zarr (NGFF) version {version}; msclassify "
                             f"reads versions {', '.join(NGFF_VERSIONS)}")
    return version


def _open_zarr(path, allow_missing):
    zarr = _import_zarr()
    try:
        node = zarr.open(str(path), mode="r")
    except Exception as exc:
        raise FrameReadError(f"{path} is not a readable zarr store ({_reason(exc)})") from None
    names = None
    description = str(path)
    if isinstance(node, zarr.Group):
        attrs = node.attrs.asdict()
        ome = attrs.get("ome", attrs)           # 0.5 nests the metadata under "ome"
        version = str(ome.get("version", "")) or None
        multiscales = ome.get("multiscales")
        if not multiscales:
            arrays = list(node.array_keys())
            raise FrameReadError(
                f"{path} is a zarr group but not an OME-Zarr image (no 'multiscales' metadata); "
                + (f"open one of its arrays: {path}/{arrays[0]}" if arrays else
                   "it holds no arrays"))
        first = multiscales[0]
        version = _ngff_version(attrs, path)
        try:
            level0 = first["datasets"][0]["path"]
            names = [a["name"] if isinstance(a, dict) else a for a in first["axes"]]
        except (KeyError, IndexError, TypeError):
            raise FrameReadError(f"{path}: its NGFF multiscales metadata lacks datasets or "
                                 "axes") from None
        try:
            node = node[level0]
        except KeyError:
            raise FrameReadError(f"{path}: level 0 ({level0!r}) named by its multiscales "
                                 "metadata is missing") from None
        description = f"{path} (OME-Zarr {version}, level {level0})"
        if len(names) != node.ndim:
            raise FrameReadError(f"{description} has {node.ndim} dimensions but its metadata "
                                 f"names {len(names)} axes {names}")
    _check_dtype(node, description)
    axes = _axes_for(node.shape, description, names)
    chunks = [node.chunks[axes.index(a)] for a in _SPATIAL]
    return LazyImage(node, description, axes, chunks,
                     _zarr_chunk_checker(node, description, allow_missing))


def _open_h5(path, dataset):
    import h5py

    if not Path(path).is_file():
        raise FrameReadError(f"{path} does not exist")
    try:
        file = h5py.File(path, "r")
    except OSError as exc:
        raise FrameReadError(f"{path} is not a readable HDF5 file ({exc})") from None
    if dataset not in file or not isinstance(file[dataset], h5py.Dataset):
        found = []
        file.visititems(lambda name, item: found.append("/" + name)
                        if isinstance(item, h5py.Dataset) else None)
        file.close()
        raise FrameReadError(f"{path} has no dataset {dataset!r}; its datasets: "
                             f"{', '.join(found[:8]) or 'none'} (name one as {path}:/PATH)")
    data = file[dataset]
    description = f"{path}:{data.name}"
    _check_dtype(data, description)
    axes = _axes_for(data.shape, description)
    chunks = data.chunks or data.shape
    return LazyImage(data, description, axes, [chunks[axes.index(a)] for a in _SPATIAL])


def _open_tiff(path):
    import tifffile

    zarr = _import_zarr()
    try:
        store = tifffile.imread(str(path), aszarr=True, level=0)
        array = zarr.open(store, mode="r")
    except Exception as exc:
        raise FrameReadError(f"{path} is not a readable TIFF ({_reason(exc)})") from None
    description = f"{path} (TIFF, level 0)"
    _check_dtype(array, description)
    axes = _axes_for(array.shape, description)
    return LazyImage(array, description, axes, [array.chunks[axes.index(a)] for a in _SPATIAL])


def open_image(spec, allow_missing=False):
    """Open one large 2-D image lazily.

    Parameters
    ----------
    spec : str or Path
        An OME-Zarr image (NGFF v0.4 / v0.5; level 0 of its multiscales), a zarr
        array, ``file.h5:/group/dataset`` (HDF5), or a TIFF file (tiled or
        pyramidal: read tile by tile, level 0).
    allow_missing : bool, optional
        Read a zarr chunk that was never written as the array's fill value (right
        for sparse scribbles) instead of refusing it (right for an image).

    Returns
    -------
    LazyImage

    Raises
    ------
    FrameReadError
        Missing file or dataset, a group that is no image, an unknown NGFF
        version, more than one time point or plane, a non-numeric dtype.
    """
    h5 = _split_h5(spec)
    if h5 is not None:
        return _open_h5(*h5)
    path = Path(str(spec))
    if not path.exists():
        raise FrameReadError(f"{path} does not exist")
    if path.suffix.lower() in _TIFF_SUFFIXES:
        return _open_tiff(path)
    if path.is_dir():
        return _open_zarr(path, allow_missing)
    raise FrameReadError(f"{path} is not a zarr store, an HDF5 dataset (file.h5:/path) or a "
                         "TIFF file")
