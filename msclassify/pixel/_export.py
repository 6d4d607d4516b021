"""Exporting predictions in the forms labs use, as a folder of TIFFs, a zarr store or one TIFF stack.

A prediction holds class values (1 = background, 2 = fly, ...), which look
black in Fiji. `FrameExport` turns one frame's prediction into what an
analysis needs:

``labels``
    the class values themselves (uint8 up to 255 classes);
``mask``
    one class as 0 / 255 (uint8), white where that class was predicted;
``instances``
    one class as objects numbered 1, 2, ... in every frame (connected
    components, 8-neighbourhood; objects smaller than ``min_size`` pixels are
    dropped), uint16;
``probability``
    the probability of one class, float32 in [0, 1].

`open_export` opens the output for a run of frames: a folder of TIFFs or a zarr
store (`msclassify.io.open_writer`, resumable) or one multi-page TIFF stack
(`TiffStackWriter`, written to a hidden temporary file and renamed when the
last frame is in). The napari widget's "Export" and ``msclassify predict
--export`` both go through it.
"""

import errno
import glob
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tifffile
from skimage.measure import label as connected_components

from ..checks import is_int
from ..io import FrameWriteError, check_not_an_input, open_writer
from ._apply import label_dtype

try:
    import fcntl
except ImportError:  # Windows: abandoned temporary files are left for the user to delete
    fcntl = None

__all__ = ["EXPORT_FORMATS", "EXPORT_KINDS", "FrameExport", "TiffStackWriter", "open_export"]

EXPORT_KINDS = {
    "labels": "class values (1, 2, ...) as predicted",
    "mask": "one class as 0 / 255 (white where predicted)",
    "instances": "objects of one class numbered 1, 2, ... per frame (uint16)",
    "probability": "probability of one class, float32 in [0, 1]",
}
EXPORT_FORMATS = {
    "tiff": "a folder with one TIFF per frame (resumable)",
    "zarr": "one zarr store, one chunk per frame (resumable)",
    "tiff-stack": "one multi-page TIFF file (Fiji: File > Open), written when complete",
}
_MAX_INSTANCES = np.iinfo(np.uint16).max
_STACK_FORMAT = "msclassify-stack"
_ABANDONED_AFTER = 10.0  # seconds: an unlocked temporary file older than this is abandoned


@dataclass(frozen=True)
class FrameExport:
    """What to write for each frame: its class values, a mask, objects or a probability.

    Parameters
    ----------
    kind : {"labels", "mask", "instances", "probability"}
        See the module docstring (`EXPORT_KINDS`).
    target : int, optional
        The class value exported by ``mask``, ``instances`` and ``probability``
        (e.g. 2 for the fly class); required for them, refused for ``labels``.
    min_size : int
        ``instances``: objects with fewer pixels are dropped (0 keeps all);
        refused (unless 0) for the other kinds, which have no objects.

    Examples
    --------
    >>> labels = np.array([[2, 2, 1, 1],
    ...                    [1, 1, 1, 2]], np.uint8)
    >>> classes = [1, 2]
    >>> FrameExport("mask", target=2).convert(labels, None, classes).tolist()
    [[255, 255, 0, 0], [0, 0, 0, 255]]
    >>> FrameExport("instances", target=2).convert(labels, None, classes).tolist()
    [[1, 1, 0, 0], [0, 0, 0, 2]]
    >>> FrameExport("instances", target=2, min_size=2).convert(labels, None, classes).tolist()
    [[1, 1, 0, 0], [0, 0, 0, 0]]
    >>> proba = np.stack([1 - labels / 2, labels / 2], axis=-1)
    >>> FrameExport("probability", target=2).convert(labels, proba, classes)[0].tolist()
    [1.0, 1.0, 0.5, 0.5]
    """

    kind: str = "labels"
    target: int | None = None
    min_size: int = 0

    def __post_init__(self):
        if self.kind not in EXPORT_KINDS:
            raise ValueError(f"export kind must be one of {', '.join(EXPORT_KINDS)}, got "
                             f"{self.kind!r}")
        if self.kind != "labels" and not is_int(self.target):
            raise ValueError(f"exporting {self.kind!r} needs the class to export (target), e.g. "
                             "2 for the objects of class 2")
        if not is_int(self.min_size, 0):
            raise ValueError(f"min_size must be an integer >= 0 (pixels), got {self.min_size!r}")
        if self.kind == "labels" and self.target is not None:
            raise ValueError("exporting 'labels' writes every class; a target class applies to "
                             "mask, instances and probability exports only")
        if self.kind != "instances" and self.min_size:
            raise ValueError(f"min_size applies to 'instances' exports only, not {self.kind!r} "
                             "(a minimum object size needs objects)")

    @property
    def needs_probabilities(self):
        """Whether `convert` needs the class probabilities."""
        return self.kind == "probability"

    def check_classes(self, classes):
        """Raise ValueError unless the model predicts ``target`` (the classes are ``classes``)."""
        classes = [int(value) for value in np.asarray(classes).ravel()]
        if self.kind != "labels" and int(self.target) not in classes:
            raise ValueError(f"class {self.target} is not one the model predicts "
                             f"({', '.join(map(str, classes))}); choose one of them")
        return self

    def dtype(self, classes):
        """Data type of the exported images for a model with ``classes``."""
        return {"labels": label_dtype(classes), "mask": np.dtype(np.uint8),
                "instances": np.dtype(np.uint16),
                "probability": np.dtype(np.float32)}[self.kind]

    def convert(self, labels, probabilities, classes):
        """The exported image of one frame.

        Parameters
        ----------
        labels : ndarray (H, W)
            Predicted class values.
        probabilities : ndarray (H, W, n_classes) or None
            Class probabilities, columns in the order of ``classes``; needed for
            ``probability`` only.
        classes : sequence of int
            The model's classes (``classes_``).
        """
        labels = np.asarray(labels)
        if self.kind == "labels":
            return labels.astype(self.dtype(classes), copy=False)
        if self.kind == "probability":
            if probabilities is None:
                raise ValueError("exporting a probability needs the class probabilities")
            column = [int(value) for value in np.asarray(classes).ravel()].index(int(self.target))
            return np.ascontiguousarray(probabilities[..., column], dtype=np.float32)
        selected = labels == self.target
        if self.kind == "mask":
            return selected.astype(np.uint8) * np.uint8(255)
        objects = connected_components(selected, connectivity=2)
        if self.min_size > 0 and objects.max() > 0:
            sizes = np.bincount(objects.ravel())
            keep = sizes >= self.min_size
            keep[0] = False
            renumber = np.zeros(sizes.size, dtype=np.int64)
            renumber[keep] = np.arange(1, int(keep.sum()) + 1)
            objects = renumber[objects]
        n_objects = int(objects.max(initial=0))
        if n_objects > _MAX_INSTANCES:
            raise ValueError(f"a frame holds {n_objects} objects of class {self.target}, more "
                             f"than the {_MAX_INSTANCES} an instance image holds; raise the "
                             "minimum object size")
        return objects.astype(np.uint16)


class TiffStackWriter:
    """Frames ``0 .. n_frames - 1``, in order, into one multi-page TIFF.

    The pages go to a hidden temporary file next to ``path``, which is renamed
    to ``path`` once the last frame is written, so ``path`` is either absent or
    complete. Not resumable: an interrupted stack is deleted, and `completed`
    is always empty. Fiji opens the file as a stack of ``n_frames`` slices.

    The stack records that msclassify wrote it (and ``provenance``, what made
    it) in its image description. An existing file is never replaced unless it
    is such a stack and ``overwrite`` is true; a stack finished by another run
    while this one ran is not replaced either. Temporary files left by a killed
    run (``.NAME.*.tmp``, locked while in use) are removed by the next run.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "masks.tif")
    >>> with TiffStackWriter(path, 2, (2, 3), np.uint8) as writer:
    ...     writer.write(0, np.zeros((2, 3), np.uint8)); writer.write(1, np.ones((2, 3), np.uint8))
    >>> tifffile.imread(path).shape
    (2, 2, 3)
    >>> TiffStackWriter(path, 2, (2, 3), np.uint8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    msclassify.io.FrameWriteError: ...masks.tif already holds a TIFF stack msclassify wrote; ...
    """

    def __init__(self, path, n_frames, frame_shape, dtype, *, provenance=None, overwrite=False):
        self.path = Path(path)
        self.n_frames = int(n_frames)
        self.frame_shape = tuple(int(size) for size in frame_shape)
        self.dtype = np.dtype(dtype)
        self._record = {"format": _STACK_FORMAT, "n_frames": self.n_frames,
                        "frame_shape": list(self.frame_shape), "dtype": self.dtype.str,
                        "provenance": provenance}
        self._overwrite = bool(overwrite)
        self._next = 0
        self._file = self._tiff = None
        self._check_target()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _remove_abandoned(self.path)
            self._file, self._temporary = _locked_temporary(self.path)
        except OSError as exc:
            raise FrameWriteError(f"cannot write {self.path} ({exc.strerror or exc}): choose a "
                                  "writable folder", errno=exc.errno,
                                  filename=str(self.path)) from None
        self._tiff = tifffile.TiffWriter(self._file, bigtiff=self._bytes() >= 2**32 - 2**25)

    def _check_target(self):
        """FrameWriteError unless ``path`` is free, or a stack of msclassify's to overwrite."""
        if self.path.is_dir():
            raise FrameWriteError(f"{self.path} is a folder; -o names the TIFF stack file of "
                                  "--format tiff-stack (e.g. masks.tif)", filename=str(self.path))
        if not os.path.lexists(self.path):
            return
        if self.path.is_symlink() or _stack_record(self.path) is None:
            raise FrameWriteError(f"{self.path} already exists and is not a TIFF stack msclassify "
                                  "wrote, so it is never replaced: choose another file name",
                                  filename=str(self.path))
        if not self._overwrite:
            raise FrameWriteError(f"{self.path} already holds a TIFF stack msclassify wrote; "
                                  "replace it with overwrite=True or choose another file name "
                                  "(a TIFF stack is written in one go, not resumed)",
                                  filename=str(self.path))

    def _bytes(self):
        return self.n_frames * int(np.prod(self.frame_shape)) * self.dtype.itemsize

    def write(self, index, image, probabilities=None):
        """Append frame ``index``, which must be the next one (0, 1, 2, ...)."""
        if index != self._next:
            raise ValueError(f"a TIFF stack is written in frame order: expected frame "
                             f"{self._next}, got {index}")
        if probabilities is not None:
            raise ValueError("a TIFF stack holds one image per frame, not the probabilities too")
        image = np.asarray(image)
        if image.shape != self.frame_shape:
            raise ValueError(f"frame {index} has shape {image.shape}, expected {self.frame_shape}")
        try:
            self._tiff.write(image.astype(self.dtype, copy=False), contiguous=True,
                             photometric="minisblack",
                             metadata={"msclassify": self._record} if index == 0 else {})
        except OSError as exc:
            self._discard()
            raise FrameWriteError(f"cannot write {self.path} ({exc.strerror or exc})",
                                  errno=exc.errno, filename=str(self.path)) from None
        self._next += 1
        if self._next == self.n_frames:
            self._finish()

    def completed(self):
        """Always empty: a stack is written in one go (see the class docstring)."""
        return []

    def _finish(self):
        self._tiff.close()
        self._tiff = None
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            if self._overwrite:
                self._check_target()  # still a stack of msclassify's (or nothing)
                os.replace(self._temporary, self.path)
            else:
                try:  # a hard link never replaces a file that appeared meanwhile
                    os.link(self._temporary, self.path)
                except FileExistsError:
                    raise FrameWriteError(f"{self.path} was written by another run while this "
                                          "one ran; this run's stack is discarded: choose "
                                          "another file name", filename=str(self.path)) from None
                except OSError:  # no hard links on this file system
                    if os.path.lexists(self.path):
                        raise
                    os.replace(self._temporary, self.path)
        except BaseException:
            self._discard()
            raise
        self._discard()

    def _discard(self):
        if self._tiff is not None:
            self._tiff.close()
            self._tiff = None
        if self._file is not None:
            self._temporary.unlink(missing_ok=True)
            self._file.close()  # releases the lock
            self._file = None

    def close(self):
        """Finish; a stack that misses frames is deleted."""
        self._discard()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _stack_record(path):
    """The record of a TIFF stack msclassify wrote at ``path``, else None."""
    try:
        with tifffile.TiffFile(path) as tiff:
            record = json.loads(tiff.pages[0].description or "null")["msclassify"]
        return record if record.get("format") == _STACK_FORMAT else None
    except Exception:  # not a TIFF, no description, not ours: all mean "not ours"
        return None


def _locked_temporary(path):
    """A new hidden ``.NAME.*.tmp`` file next to ``path``, open and locked: (file, Path)."""
    for _ in range(100):
        temporary = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:  # permissions of an ordinary file (the umask applies), as every other output
            fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        file = open(temporary, "r+b")  # by name: tifffile needs a file object with a real .name
        if fcntl is not None:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX)
        return file, temporary
    raise FileExistsError(errno.EEXIST, "no free temporary file name", str(path))


def _remove_abandoned(path):
    """Delete the temporary files of runs killed while writing ``path`` (unlocked, not new)."""
    if fcntl is None:
        return
    for temporary in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        try:
            with open(temporary, "rb") as file:
                if time.time() - os.fstat(file.fileno()).st_mtime < _ABANDONED_AFTER:
                    continue  # another run may have just created it, not yet locked it
                fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                temporary.unlink()
        except OSError:  # locked by a live run, or already gone
            continue


class _ExportWriter:
    """Converts each predicted frame with a `FrameExport` and writes it (see `open_export`)."""

    def __init__(self, writer, export, classes, keep_probabilities):
        self._writer = writer
        self.export = export
        self.classes = np.asarray(classes)
        self.dtype = label_dtype(self.classes)       # what predictions come as
        self.path = Path(writer.path)
        self._keep_probabilities = keep_probabilities
        self.needs_probabilities = export.needs_probabilities or keep_probabilities

    def write(self, position, labels, probabilities=None):
        image = self.export.convert(labels, probabilities, self.classes)
        self._writer.write(position, image,
                           probabilities if self._keep_probabilities else None)

    def completed(self):
        return self._writer.completed()

    def close(self):
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def open_export(path, n_frames, frame_shape, export, classes, *, names=None, format="tiff",
                n_classes=None, provenance=None, overwrite=False, inputs=()):
    """Open an output that writes `FrameExport` ``export`` of each predicted frame.

    Parameters
    ----------
    path : str or Path
        Output folder (``"tiff"``), zarr store (``"zarr"``) or file (``"tiff-stack"``).
    n_frames : int
        Frames to write; they are positions ``0 .. n_frames - 1``.
    frame_shape : (int, int)
    export : FrameExport
    classes : sequence of int
        The model's classes.
    names : sequence of str, optional
        File name of every position (folders; e.g. the source's frame names).
    format : {"tiff", "zarr", "tiff-stack"}
        See `EXPORT_FORMATS`.
    n_classes : int, optional
        Also store all class probabilities per frame (``labels`` export to a
        folder or zarr store only).
    provenance : dict, optional
        What makes the frames, recorded by a folder or zarr store so that only
        the same prediction resumes (see `msclassify.io.open_writer`).
    overwrite : bool, default False
        Replace an existing output msclassify wrote at ``path`` (never anything else).
    inputs : sequence of paths, optional
        Files the output must not be, hold or link to, such as the input frames
        (`msclassify.io.FrameSource.files`) and the model file: refused with a
        FrameWriteError (`msclassify.io.check_not_an_input`).

    Returns
    -------
    writer
        With ``write(position, labels, probabilities=None)`` taking the
        *predicted* labels (dtype ``writer.dtype``) and probabilities,
        ``needs_probabilities``, ``completed()`` and ``close()``; a context manager.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "masks")
    >>> with open_export(out, 1, (1, 3), FrameExport("mask", target=2), [1, 2]) as writer:
    ...     writer.write(0, np.array([[1, 2, 2]], np.uint8))
    >>> tifffile.imread(os.path.join(out, "frame_000000.tif")).tolist()
    [[0, 255, 255]]
    """
    if not isinstance(export, FrameExport):
        raise TypeError(f"export must be a FrameExport, got {type(export).__name__}")
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}, got {format!r}")
    export.check_classes(classes)
    if n_classes is not None and (export.kind != "labels" or format == "tiff-stack"):
        raise ValueError("all class probabilities are stored only next to class labels in a "
                         "folder or zarr store; export one class's probability instead")
    check_not_an_input(path, inputs)
    dtype = export.dtype(classes)
    if format == "tiff-stack":
        writer = TiffStackWriter(path, n_frames, frame_shape, dtype, provenance=provenance,
                                 overwrite=overwrite)
    else:
        writer = open_writer(path, n_frames, frame_shape, dtype=dtype, names=names,
                             n_classes=n_classes, format=format, provenance=provenance,
                             overwrite=overwrite)
    return _ExportWriter(writer, export, classes, keep_probabilities=n_classes is not None)
