"""Opening inputs and outputs by path: `open_frames`, `read_label_stack`, `open_writer`."""

import glob
import json
import os
from pathlib import Path

import numpy as np

from ..checks import file_problem
from ._errors import FrameReadError
from ._hdf5 import ChunkedHDF5Writer
from ._lazy import _H5_SUFFIXES, _TIFF_SUFFIXES, _split_h5
from ._ngff import ChunkedLabelWriter
from ._tiled_tiff import ChunkedTiffWriter
from ._frames import (IMAGE_EXTENSIONS, TIFF_EXTENSIONS, VIDEO_EXTENSIONS,
                      _is_grey_stored_as_colour, _is_zarr, natural_sort_key)
from ._images import _ImageFilesSource, _image_files_in
from ._manifest import _MANIFEST_NAME, _partial_output_note
from ._tiff import _TiffStackSource
from ._video import _VideoSource
from ._writers import TiffFolderWriter
from ._zarr import ZarrWriter, _ZarrLabelSource

__all__ = ["open_chunk_writer", "open_frames", "open_writer", "read_label_stack"]


_SUPPORTED = "videos (" + ", ".join(VIDEO_EXTENSIONS) + "), images (" + ", ".join(
    IMAGE_EXTENSIONS) + "), folders of images, glob patterns and zarr label stacks"


def open_frames(source, *, as_gray=False):
    """Open a video, TIFF stack, image folder, glob pattern or image list as a `FrameSource`.

    Parameters
    ----------
    source : str, Path or sequence of paths
        - a video (``.mp4``, ``.avi``, ``.mov``, ``.mkv``, ``.m4v``, ``.webm``), decoded with
          PyAV with exact frame count and random access by index;
        - a TIFF file: a multi-page stack (frames along the first axis, read page by page,
          memory-mapped when uncompressed) or a single image;
        - a single image (``.png``, ``.jpg``, ``.bmp``): one frame;
        - a folder: its image files in natural order (``frame2`` before ``frame10``;
          hidden files and other extensions are ignored);
        - a glob pattern such as ``"data/*.png"``: the matching files in natural order;
        - a list of image paths, in the given order;
        - a zarr label stack written by `open_writer`.
    as_gray : bool or "auto", default False
        False returns frames as stored: videos as ``(H, W, 3)`` RGB, images with their
        own channels. True returns ``(H, W)`` luma (BT.601 weights; for videos FFmpeg's
        luma conversion), a third of the memory per frame. Use True for
        greyscale footage stored as RGB, such as the fly videos (R = G = B; luma then
        equals the stored grey value, within 1 grey level for video). ``"auto"`` returns
        luma when the first frame's colour channels are all equal (grey footage stored
        as colour) and the frames as stored otherwise. The default keeps colour because
        turning a colour video grey silently would lose information.

    Returns
    -------
    FrameSource

    Raises
    ------
    FrameReadError
        Missing file, corrupt or truncated video/TIFF, empty folder, glob matching
        nothing, frames of different sizes, unsupported extension.

    Examples
    --------
    >>> import numpy as np, imageio.v3 as iio, tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> for i in (10, 2, 1):
    ...     iio.imwrite(os.path.join(folder, f"frame{i}.png"), np.full((4, 5, 3), i, np.uint8))
    >>> frames = open_frames(folder, as_gray=True)
    >>> [frames.name(i) for i in range(len(frames))], frames.shape, int(frames.read(2)[0, 0])
    (['frame1', 'frame2', 'frame10'], (4, 5), 10)
    >>> open_frames(folder, as_gray="auto").shape  # R = G = B in the first frame: grey
    (4, 5)
    """
    if isinstance(as_gray, str):
        if as_gray != "auto":
            raise ValueError(f"as_gray must be True, False or 'auto', got {as_gray!r}")
        frames = open_frames(source)
        if not _is_grey_stored_as_colour(frames.read(0)):
            return frames
        grey = frames._as_grey()   # a video switches its pixel format: no second open
        if grey is not None:
            return grey
        frames.close()
        return open_frames(source, as_gray=True)
    if isinstance(source, (list, tuple)):
        if not source:
            raise FrameReadError("the list of image files is empty; pass at least one image")
        paths = [Path(path) for path in source]
        for path in paths:
            _check_image_path(path)
        return _ImageFilesSource(f"{len(paths)} image files", paths, as_gray)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a path, glob pattern or list of paths, got "
                        f"{type(source).__name__}")
    path = Path(source)
    if not path.exists():
        if any(char in str(source) for char in "*?["):
            broken = [match for match in glob.glob(str(source)) if not os.path.exists(match)
                      and Path(match).suffix.lower() in IMAGE_EXTENSIONS]
            if broken:
                raise FrameReadError(f"{broken[0]} (matched by {source!r}) is a broken link (to "
                                     f"{os.readlink(broken[0])}, which does not exist); restore "
                                     "its target or remove the link")
            paths = sorted((Path(match) for match in glob.glob(str(source))
                            if Path(match).is_file()
                            and Path(match).suffix.lower() in IMAGE_EXTENSIONS),
                           key=lambda match: natural_sort_key(str(match)))
            if not paths:
                raise FrameReadError(f"glob pattern {source!r} matches no image files "
                                     f"({', '.join(IMAGE_EXTENSIONS)}); check the pattern and "
                                     "quote it so the shell does not expand it")
            return _ImageFilesSource(str(source), paths, as_gray)
        raise FrameReadError(f"{path} does not exist; check the path")
    if path.is_dir():
        if _is_zarr(path):
            return _ZarrLabelSource(path)
        paths = _image_files_in(path)
        if not paths:
            raise FrameReadError(f"folder {path} holds no image files "
                                 f"({', '.join(IMAGE_EXTENSIONS)}); point to a folder of frames, "
                                 "a video or a TIFF stack")
        source = _ImageFilesSource(str(path), paths, as_gray)
        if (path / _MANIFEST_NAME).is_file():
            try:
                manifest = json.loads((path / _MANIFEST_NAME).read_text())
            except (OSError, ValueError):
                manifest = None
            _partial_output_note(path, len(paths), manifest)
        return source
    suffix = path.suffix.lower()
    if suffix in VIDEO_EXTENSIONS:
        return _VideoSource(path, as_gray)
    if suffix in TIFF_EXTENSIONS:
        return _TiffStackSource(path, as_gray)
    _check_image_path(path)
    return _ImageFilesSource(str(path), [path], as_gray)


def _check_image_path(path):
    if path.suffix.lower() not in IMAGE_EXTENSIONS:
        raise FrameReadError(f"{path}: unsupported extension {path.suffix!r}; msclassify reads "
                             f"{_SUPPORTED} (convert the file to TIFF or PNG)")
    problem = file_problem(path)
    if problem:
        raise FrameReadError(f"image {path} {problem}" + ("; check the path" if problem ==
                                                          "does not exist" else ""))


def read_label_stack(path):
    """Open label images for evaluation: a TIFF stack, a folder of per-frame TIFFs or a zarr stack.

    Reads what `open_writer` wrote (either format) as well as ground-truth stacks.
    Frames stay on disk and are read one at a time; ``name(i)`` matches the names
    the writer used, so predictions and ground truth can be paired by name.

    Returns
    -------
    FrameSource
        Integer ``(H, W)`` frames.

    Raises
    ------
    FrameReadError
        As `open_frames`, and when the images are not 2-D integer label images or a
        zarr stack is incomplete.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "pred")
    >>> with open_writer(out, n_frames=2, frame_shape=(3, 4)) as writer:
    ...     writer.write(0, np.zeros((3, 4), np.uint8)); writer.write(1, np.ones((3, 4), np.uint8))
    >>> labels = read_label_stack(out)
    >>> len(labels), labels.name(1), int(labels.read(1).sum())
    (2, 'frame_000001', 12)
    """
    source = open_frames(path)
    if len(source.shape) != 2 or source.dtype.kind not in "biu":
        source.close()
        raise FrameReadError(f"{path} holds {source.shape} {source.dtype} frames, not label "
                             "images; labels must be 2-D integer images (one class or object id "
                             "per pixel)")
    return source


def open_writer(path, n_frames, frame_shape, *, dtype=np.uint8, names=None, n_classes=None,
                format="tiff", provenance=None, overwrite=False):
    """Open (or resume) an output for per-frame label images.

    Parameters
    ----------
    path : str or Path
        Output folder (``format="tiff"``) or zarr store, conventionally ``*.zarr``
        (``format="zarr"``). Created if missing; an existing output of the same
        prediction is resumed; anything else is refused so nothing is overwritten.
    n_frames : int
    frame_shape : (int, int)
        Height and width of every label image.
    dtype : integer dtype or float32, default uint8
    names : sequence of str, optional
        File name (without extension) of every frame, e.g. ``source.names()`` of the
        `FrameSource` being predicted; default ``frame_000000``, ``frame_000001``, ...
    n_classes : int, optional
        Also store float32 class probabilities of shape ``(H, W, n_classes)`` per frame.
    format : {"tiff", "zarr"}
        ``"tiff"``: ``path/NAME.tif`` per frame (and ``path/probabilities/NAME.tif``), readable
        by any TIFF reader. ``"zarr"``: one zarr group, one chunk per frame, compressed.
    provenance : dict, optional
        What makes the frames (JSON values), recorded in the output's manifest: an
        existing output is resumed only if it records the same (entries named
        ``path`` are kept for messages but not compared, so a moved input still
        resumes). `msclassify.pixel.batch.prediction_provenance` makes one.
    overwrite : bool, default False
        Delete an existing output msclassify wrote at ``path`` first (an empty
        folder too); anything else at ``path`` is still refused.

    Returns
    -------
    FrameWriter
        With ``write(index, labels, probabilities=None)`` and ``completed()``.

    Raises
    ------
    FrameWriteError
        The output cannot be created or written, holds foreign files, or holds a
        different prediction (other frames, or another provenance).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "labels")
    >>> writer = open_writer(out, n_frames=3, frame_shape=(2, 2), provenance={"model": "a"})
    >>> writer.write(1, np.ones((2, 2), np.uint8))
    >>> writer.completed(), sorted(os.listdir(out))
    ([1], ['frame_000001.tif', 'msclassify_frames.json'])
    >>> open_writer(out, 3, (2, 2), provenance={"model": "a"}).completed()  # a re-run resumes
    [1]
    >>> open_writer(out, 3, (2, 2), provenance={"model": "b"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    msclassify.io.FrameWriteError: output ... was made by something else: model: "a" there, ...
    >>> open_writer(out, 3, (2, 2), provenance={"model": "b"}, overwrite=True).completed()
    []
    """
    writers = {"tiff": TiffFolderWriter, "zarr": ZarrWriter}
    if format not in writers:
        raise ValueError(f"format must be 'tiff' or 'zarr', got {format!r}")
    return writers[format](path, n_frames, frame_shape, dtype=dtype, names=names,
                           n_classes=n_classes, provenance=provenance, overwrite=overwrite)


def open_chunk_writer(path, shape, chunks, classes, **options):
    """The writer of one large image's labels, chunk by chunk, that ``path`` names.

    Parameters
    ----------
    path : str or Path
        ``OUT.zarr`` (or any other name): OME-Zarr labels with a pyramid
        (`ChunkedLabelWriter`); ``OUT.h5`` or ``OUT.h5:/group/name``: an HDF5 dataset
        (`ChunkedHDF5Writer`); ``OUT.tif``: a tiled, pyramidal TIFF (`ChunkedTiffWriter`).
    shape, chunks, classes, **options
        As `ChunkedLabelWriter` (``dtype``, ``class_names``, ``n_classes``,
        ``provenance``, ``overwrite``; ``spacing`` for a volume, which only OME-Zarr takes).

    Returns
    -------
    ChunkedWriter

    Examples
    --------
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> [type(open_chunk_writer(os.path.join(folder, name), (40, 50), (32, 32), [1, 2])).__name__
    ...  for name in ("a.zarr", "b.h5:/seg", "c.tif")]
    ['ChunkedLabelWriter', 'ChunkedHDF5Writer', 'ChunkedTiffWriter']
    """
    suffix = Path(str(path)).suffix.lower()
    kind = ChunkedHDF5Writer if _split_h5(path) is not None or suffix in _H5_SUFFIXES else \
        ChunkedTiffWriter if suffix in _TIFF_SUFFIXES else ChunkedLabelWriter
    return kind(path, shape, chunks, classes, **options)
