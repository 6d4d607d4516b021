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
(`msclassify.io.TiffStackWriter`, written to a hidden temporary file and renamed when the
last frame is in). The napari widget's "Export" and ``msclassify predict
--export`` both go through it.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from skimage.measure import label as connected_components

from ..checks import is_int
from ..io import BaseWriter, TiffStackWriter, open_writer
from ._apply import label_dtype

__all__ = ["EXPORT_FORMATS", "EXPORT_KINDS", "FrameExport", "open_export"]

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


@dataclass(frozen=True)
class FrameExport:
    """What to write for each frame: its class values, a mask, objects or a probability.

    Parameters
    ----------
    kind : {"labels", "mask", "instances", "probability"}
        See the module docstring (`EXPORT_KINDS`).
    target : int, optional
        The class value exported by ``mask``, ``instances`` and ``probability``
        (e.g. 2 for the fly class); required for them, unused by ``labels``.
    min_size : int
        ``instances``: objects with fewer pixels are dropped (0 keeps all).

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


class _ExportWriter(BaseWriter):
    """Converts each predicted frame with a `FrameExport` and writes it (see `open_export`)."""

    def __init__(self, writer, export, classes, keep_probabilities):
        self._writer = writer
        self.n_frames, self.frame_shape = writer.n_frames, writer.frame_shape
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


def open_export(path, n_frames, frame_shape, export, classes, *, names=None, format="tiff",
                n_classes=None, provenance=None, overwrite=False):
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
        Replace an existing output msclassify wrote at ``path``.

    Returns
    -------
    writer
        With ``write(position, labels, probabilities=None)`` taking the
        *predicted* labels (dtype ``writer.dtype``) and probabilities,
        ``needs_probabilities``, ``completed()`` and ``close()``; a context manager.

    Examples
    --------
    >>> import tempfile, os, tifffile
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
    dtype = export.dtype(classes)
    if format == "tiff-stack":
        writer = TiffStackWriter(path, n_frames, frame_shape, dtype, overwrite=overwrite)
    else:
        writer = open_writer(path, n_frames, frame_shape, dtype=dtype, names=names,
                             n_classes=n_classes, format=format, provenance=provenance,
                             overwrite=overwrite)
    return _ExportWriter(writer, export, classes, keep_probabilities=n_classes is not None)
