"""Volumes in TIFF files: the axes as the user names them, the voxel spacing the file records.

`read_volume` reads a whole TIFF (a z-stack, a series of z-stacks, with or
without channels) into ``(T, Z, Y, X, C)`` order. How an axis is meant is never
guessed: the caller names every axis of the stored array (``axes="zyx"``,
``"tzcyx"``, ...) and a file whose array has another number of axes is refused,
naming the axes its metadata records. The voxel spacing is read where the file
records it: OME-TIFF (``PhysicalSizeZ/Y/X`` of the first image, in any of the
OME length units, converted to the x unit) or an ImageJ hyperstack (``spacing``
for z, the X/YResolution tags for x and y); None when it records none.
OME-Zarr (NGFF) spacing is the ``scale`` of the first multiscale dataset's
coordinate transformations: `ngff_spacing` reads it from the group's
attributes, for the NGFF reader of the io package.

`write_volume` writes one label volume as an ImageJ hyperstack TIFF (axes ZYX,
the spacing in its metadata), atomically.
"""

from pathlib import Path
from typing import NamedTuple
from xml.etree import ElementTree

import numpy as np
import tifffile

from ..checks import available_memory, file_problem
from ._atomic import write_atomically
from ._tiff import _declared_frames

__all__ = ["VolumeData", "check_axes", "ngff_spacing", "read_volume", "recorded_z_axis",
           "tiff_spacing", "write_volume"]

VOLUME_AXES = "tzyxc"
# OME length units, in metres
_OME_UNITS = {"m": 1.0, "cm": 1e-2, "mm": 1e-3, "µm": 1e-6, "um": 1e-6, "nm": 1e-9, "pm": 1e-12,
              "Å": 1e-10}


class VolumeData(NamedTuple):
    """What `read_volume` returns.

    Attributes
    ----------
    data : ndarray, shape (T, Z, Y, X, C)
    spacing : tuple of 3 float or None
        Voxel size ``(z, y, x)`` the file records, None if it records none.
    recorded_axes : str or None
        The axes the file's metadata names (tifffile's series axes, e.g. ``"ZYX"``).
    """

    data: np.ndarray
    spacing: tuple | None
    recorded_axes: str | None


def check_axes(axes, volume=True):
    """``axes`` in lower case: each of t, z, c, y, x at most once, y and x (and z for a
    volume) present; a one-line ValueError otherwise.

    Examples
    --------
    >>> check_axes("ZYX")
    'zyx'
    """
    text = str(axes).lower()
    needed = "zyx" if volume else "yx"
    if sorted(set(text)) != sorted(text) or not set(text) <= set(VOLUME_AXES) \
            or not set(needed) <= set(text):
        raise ValueError(f"axes {axes!r} must name every axis of the array once, from t (time), "
                         f"z, c (channel), y, x, and hold {', '.join(needed)}; e.g. 'zyx', "
                         "'zcyx' or 'tzyx'")
    return text


def _ome_spacing(ome_xml):
    try:
        root = ElementTree.fromstring(ome_xml)
    except ElementTree.ParseError:
        return None
    pixels = next((e for e in root.iter() if e.tag.rsplit("}", 1)[-1] == "Pixels"), None)
    if pixels is None:
        return None
    sizes = []
    for axis in "ZYX":
        value = pixels.get(f"PhysicalSize{axis}")
        unit = _OME_UNITS.get(pixels.get(f"PhysicalSize{axis}Unit", "µm"))
        if value is None or unit is None:
            return None
        sizes.append((float(value), unit))
    x_unit = sizes[2][1]      # in the unit of x
    return tuple(value if unit == x_unit else value * unit / x_unit for value, unit in sizes)


def _imagej_spacing(tif):
    meta = tif.imagej_metadata or {}
    if "spacing" not in meta:
        return None
    page = tif.pages[0]
    sizes = []
    for tag in ("YResolution", "XResolution"):
        value = page.tags.get(tag)
        if value is None:
            return None
        numerator, denominator = value.value
        if not numerator:
            return None
        sizes.append(denominator / numerator)           # pixels per unit -> unit per pixel
    return (float(meta["spacing"]), *sizes)


def _recorded(spacing):
    """The spacing as recorded, valid or not (a zero or negative size is the file's error, for
    the caller to tell, `msclassify.features.check_spacing`), or None."""
    return None if spacing is None else tuple(float(s) for s in spacing)


def tiff_spacing(tif):
    """The ``(z, y, x)`` voxel size an open `tifffile.TiffFile` records (OME or ImageJ), as
    recorded (a size of 0 too: the caller tells it), or None."""
    spacing = _ome_spacing(tif.ome_metadata) if tif.is_ome and tif.ome_metadata \
        else _imagej_spacing(tif) if tif.is_imagej else None
    return _recorded(spacing)


def ngff_spacing(attributes):
    """``(z, y, x)`` scale of an OME-Zarr image group's first dataset, or None.

    ``attributes`` is the group's ``.zattrs`` (NGFF 0.4: ``multiscales[0].axes`` and
    ``datasets[0].coordinateTransformations``; 0.5 nests them under ``"ome"``).

    Examples
    --------
    >>> ngff_spacing({"multiscales": [{"axes": [{"name": n} for n in "zyx"],
    ...     "datasets": [{"coordinateTransformations": [{"type": "scale",
    ...                                                  "scale": [50, 4, 4]}]}]}]})
    (50.0, 4.0, 4.0)
    """
    try:
        multiscale = attributes.get("ome", attributes)["multiscales"][0]
        names = [axis["name"] if isinstance(axis, dict) else axis for axis in multiscale["axes"]]
        transforms = multiscale["datasets"][0]["coordinateTransformations"]
        scale = next(t["scale"] for t in transforms if t.get("type") == "scale")
        return _recorded([float(scale[names.index(axis)]) for axis in "zyx"])
    except (KeyError, IndexError, TypeError, ValueError, StopIteration, AttributeError):
        return None


def check_complete(tif, path):
    """ValueError if the metadata of open `tifffile.TiffFile` ``tif`` records more planes than
    its first series holds: a truncated file, which tifffile reads as its first page."""
    series, page = tif.series[0], tif.pages.first
    planes = int(np.prod(series.shape, dtype=np.int64)) // max(int(page.size), 1)
    declared, which = _declared_frames(tif, max(int(page.size), 1))
    if declared is not None and declared > planes:
        raise ValueError(f"{path} is truncated or damaged: {which} records {declared} images "
                         f"but {planes} can be read; re-copy or re-export it")


def read_volume(path, axes, reserve=0):
    """A TIFF's array in ``(T, Z, Y, X, C)`` order, with the spacing and axes it records.

    Parameters
    ----------
    path : str or Path
    axes : str
        One letter per axis of the stored array, from ``tzcyx`` (`check_axes`).
    reserve : int, optional
        Bytes needed besides the array (e.g. to predict one of its volumes): the file
        is refused before it is read when the array and these do not fit in memory.

    Returns
    -------
    VolumeData

    Raises
    ------
    ValueError
        When the file cannot be read or its array has another number of axes.
    MemoryError
        When it does not fit in memory (one line suggesting chunked prediction).
    """
    axes = check_axes(axes)
    problem = file_problem(path)  # before opening: a FIFO named .tif would block
    if problem:
        raise ValueError(f"TIFF volume {path} {problem}")
    try:
        with tifffile.TiffFile(path) as tif:
            check_complete(tif, path)
            series = tif.series[0]
            _check_fits(path, series.shape, series.dtype, reserve)
            data = series.asarray()
            recorded = series.axes
            spacing = tiff_spacing(tif)
    except (OSError, ValueError, tifffile.TiffFileError, IndexError) as exc:
        raise ValueError(f"cannot read {path} as a TIFF volume ({exc}); give a multi-page "
                         "TIFF, OME-TIFF or ImageJ hyperstack") from None
    if data.ndim != len(axes):
        raise ValueError(f"{path} holds an array of shape {data.shape} but axes {axes!r} name "
                         f"{len(axes)} axes; name each of its {data.ndim} axes (its metadata "
                         f"says {recorded})")
    for letter in VOLUME_AXES:
        if letter not in axes:
            data = data[..., np.newaxis]
            axes += letter
    data = np.transpose(data, [axes.index(letter) for letter in VOLUME_AXES])
    return VolumeData(data, spacing, recorded)


def _check_fits(path, shape, dtype, reserve):
    needed = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize + int(reserve)
    available = available_memory()
    if needed > available:
        raise MemoryError(f"{path} ({'x'.join(map(str, shape))} {np.dtype(dtype).name}) needs "
                          f"about {needed / 2**30:.1f} GiB to read and predict, but only "
                          f"{available / 2**30:.1f} GiB of memory is available: predict it "
                          "chunk by chunk with --chunks (e.g. --chunks 64), which reads one "
                          "window at a time")


def recorded_z_axis(path):
    """The axes a TIFF's metadata records (e.g. ``"ZYX"``) if they hold a z axis, else None.

    For a note when such a file is read as frames; never raises, and opens only regular
    TIFF files (a FIFO named ``.tif`` would block).
    """
    path = Path(path)
    if path.suffix.lower() not in (".tif", ".tiff") or not path.is_file():
        return None
    try:
        with tifffile.TiffFile(path) as tif:
            axes = tif.series[0].axes
    except Exception:  # not a TIFF, unreadable: the frame readers say what is wrong
        return None
    return axes if "Z" in axes else None


def write_volume(path, labels, spacing):
    """Write a ``(Z, Y, X)`` label volume as an ImageJ hyperstack TIFF with its spacing, atomically."""
    z, y, x = spacing
    write_atomically(path, lambda file: tifffile.imwrite(
        file, labels, imagej=True, resolution=(1 / x, 1 / y),
        metadata={"axes": "ZYX", "spacing": z}))
