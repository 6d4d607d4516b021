"""Frames from single-image files: a folder, a glob pattern or a list of images."""

import imageio.v3 as iio
import numpy as np
import tifffile

from ..checks import file_problem
from ._errors import FrameReadError, _reason
from ._frames import (IMAGE_EXTENSIONS, TIFF_EXTENSIONS, FrameSource, _rgb_to_gray,
                      natural_sort_key)
from ._tiff import _open_tiff, _tifffile_log


def _image_header(path):
    """(shape, dtype, planar) of one image file without decoding its pixels."""
    if path.suffix.lower() in TIFF_EXTENSIONS:
        tiff, layout = _open_tiff(path)
        with tiff:
            if layout.n_frames != 1 or not layout.complete or layout.planes:
                raise FrameReadError(f"{path} holds {'at least ' if not layout.complete else ''}"
                                     f"{layout.n_frames} frames; a folder or glob must hold one "
                                     "image per file (open a multi-page TIFF by itself)")
            return layout.frame_shape, layout.dtype, layout.planar
    problem = file_problem(path)
    if problem:
        raise FrameReadError(f"image {path} {problem}")
    try:
        properties = iio.improps(path)
    except Exception as exc:  # imageio plugins raise many types for damaged files
        raise FrameReadError(f"cannot read image {path}: it is corrupt or truncated "
                             f"({_reason(exc)}); re-copy or re-export it") from None
    return tuple(properties.shape), np.dtype(properties.dtype), False


class _ImageFilesSource(FrameSource):
    """A list of single-image files, one frame each (headers checked at open)."""

    def __init__(self, description, paths, as_gray):
        headers = [_image_header(path) for path in paths]
        shape, dtype, _ = headers[0]
        for path, (other_shape, other_dtype, _) in zip(paths, headers):
            if other_shape != shape or other_dtype != dtype:
                raise FrameReadError(
                    f"frames differ in size or type: {paths[0].name} is {shape} {dtype} but "
                    f"{path} is {other_shape} {other_dtype}; give every frame the same size "
                    "(resize or split them into separate folders)")
        stems = [path.stem for path in paths]
        names = stems if len(set(stems)) == len(stems) else None
        self._as_gray = as_gray and len(shape) == 3
        super().__init__(description, len(paths), shape[:2] if self._as_gray else shape, dtype,
                         names)
        self._paths = self._source_files = paths
        self._planar = [planar for _, _, planar in headers]

    def _read(self, index):
        path = self._paths[index]
        try:
            if path.suffix.lower() in TIFF_EXTENSIONS:
                with _tifffile_log():
                    frame = tifffile.imread(path)
                if self._planar[index]:
                    frame = np.moveaxis(frame, 0, -1)
            else:
                frame = iio.imread(path)
        except Exception as exc:  # decoders raise many types for damaged data
            raise FrameReadError(f"cannot read image {path} ({_reason(exc)}); it is corrupt or "
                                 "truncated: re-copy or re-export it") from None
        frame = np.asarray(frame, dtype=self.dtype)
        return _rgb_to_gray(frame) if self._as_gray and frame.ndim == 3 else frame


def _image_files_in(folder):
    files = [entry for entry in folder.iterdir()
             if entry.is_file() and not entry.name.startswith(".")
             and entry.suffix.lower() in IMAGE_EXTENSIONS]
    return sorted(files, key=lambda path: natural_sort_key(path.name))
