"""OME-Zarr (NGFF 0.5) labels of a large image, written chunk by chunk, resumably.

The store a `ChunkedLabelWriter` makes is what a lab opens in napari (with
napari-ome-zarr), QuPath, Fiji's MoBIE or any NGFF viewer::

    OUT.zarr/                       {"ome": {"version": "0.5"}, "msclassify": manifest}
      labels/                       {"ome": {"labels": ["classes"]}}
        classes/                    multiscales (y, x) + image-label (colours, class names)
          0, 1, 2, ...              the class map, then every 2nd pixel of it, ...
      probabilities/                multiscales (c, y, x), float32 (when asked for)
        0
      msclassify_done               one uint8 per chunk: 1 once all of the chunk is written

Every chunk of every array is written by zarr to a temporary file and renamed,
and a chunk's ``msclassify_done`` marker is set after all its data, so whatever
stops a run (Ctrl-C, kill -9, a full disk) leaves complete chunks only; a re-run
with the same manifest skips them (they are never rewritten) and does the rest.
The pyramid levels are written with the chunk they come from (level k keeps
every 2**k-th pixel, as label pyramids must: no mixed classes), so a level-k
chunk is ``chunks >> k`` and the chunk size must be divisible by ``2**k``.
"""


import numpy as np

from ._errors import FrameWriteError, _write_error
from ._chunked import ChunkedWriter
from ._manifest import CHUNKS_DONE, _check_record, _remove_output
from ._zarr import _chunk_path, _open_recorded_group

__all__ = ["ChunkedLabelWriter", "label_colours"]

_FORMAT = "msclassify-chunks"
_VERSION = 1
NGFF_VERSION = "0.5"
# Coarser levels are added while the level is at least this large along its longer side.
_MIN_LEVEL_SIDE = 256
# ... and its chunks at least this large.
_MIN_LEVEL_CHUNK = 32
# Tableau 10: distinct on a dark or a light image.
_PALETTE = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
            (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207))


def label_colours(classes):
    """``{class value: [r, g, b, a]}``: Tableau 10 colours, the first class transparent.

    Examples
    --------
    >>> label_colours([1, 2])
    {1: [31, 119, 180, 0], 2: [255, 127, 14, 255]}
    """
    return {int(value): list(_PALETTE[i % len(_PALETTE)]) + [0 if i == 0 else 255]
            for i, value in enumerate(classes)}


def _n_levels(shape, chunks):
    levels = 1
    while (max(shape) >> levels >= _MIN_LEVEL_SIDE
           and all(c % (1 << levels) == 0 and c >> levels >= _MIN_LEVEL_CHUNK for c in chunks)):
        levels += 1
    return levels


def _multiscales(name, axes, n_levels, channel=False, spacing=None):
    datasets = []
    for level in range(n_levels):
        scale = [float(1 << level)] * 2
        if spacing is not None:    # a volume: z kept, y and x halved per level, in its units
            scale = [float(spacing[0])] + [float(s) * (1 << level) for s in spacing[1:]]
        datasets.append({"path": str(level), "coordinateTransformations": [
            {"type": "scale", "scale": ([1.0] if channel else []) + scale}]})
    return [{"name": name, "axes": axes, "datasets": datasets}]


_YX = [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}]
_Z = [{"name": "z", "type": "space"}]


def _require_array(group, name, shape, chunks, dtype, dimension_names):
    """``group[name]``, created (chunks written even when empty) if absent."""
    if name in group:
        return group[name]
    return group.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=0,
                              dimension_names=dimension_names,
                              config={"write_empty_chunks": True})


class ChunkedLabelWriter(ChunkedWriter):
    """Writes the labels (and probabilities) of one large image to OME-Zarr, chunk by chunk.

    Parameters
    ----------
    path : str or Path
        The store (``*.zarr``); created, or resumed if it holds this very job.
    shape : (int, int) or (int, int, int)
        ``(H, W)`` of the image, or ``(Z, Y, X)`` of a volume (its pyramid levels
        halve y and x only).
    chunks : (int, int) or (int, int, int)
        The chunk each `write_chunk` call writes (the last ones may be smaller).
    classes : sequence of int
        Class values (the labels' values).
    dtype : numpy dtype, optional
        Of the stored labels (an unsigned integer type holding every class).
    class_names : sequence of str, optional
        Shown by viewers (``image-label`` properties); default ``"class V"``.
    n_classes : int, optional
        Also store float32 class probabilities ``(n_classes, H, W)``.
    provenance : dict, optional
        What makes the labels (JSON values), kept in the manifest: a store is
        resumed only if it records the same (entries named ``path`` ignored).
    overwrite : bool, optional
        Delete a store msclassify wrote at ``path`` first.
    name : str, optional
        Name of the label image inside ``labels/``.
    spacing : tuple of 3 float, optional
        A volume's voxel size ``(z, y, x)``, recorded as its NGFF scale.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "out.zarr")
    >>> writer = ChunkedLabelWriter(path, (40, 50), (32, 32), [1, 2])
    >>> writer.grid, writer.completed()
    ((2, 2), set())
    >>> writer.write_chunk((1, 0), np.full((8, 32), 2, np.uint8))
    >>> writer.completed()
    {(1, 0)}
    >>> ChunkedLabelWriter(path, (40, 50), (32, 32), [1, 2]).completed()   # resumed
    {(1, 0)}
    """

    _takes_volumes = True

    def __init__(self, path, shape, chunks, classes, *, dtype=np.uint8, class_names=None,
                 n_classes=None, provenance=None, overwrite=False, name="classes",
                 spacing=None):
        super().__init__(path, shape, chunks, classes, dtype, n_classes, provenance,
                         spacing=spacing)
        self.class_names = ([f"class {v}" for v in self.classes] if class_names is None
                            else [str(n) for n in class_names])
        if len(self.class_names) != len(self.classes):
            raise ValueError(f"{len(self.class_names)} class names for {len(self.classes)} "
                             "classes")
        self.n_levels = _n_levels(self.shape[-2:], self.chunks[-2:])
        self.name = name
        if overwrite:
            _remove_output(self.path)
        try:
            self._root, _ = _open_recorded_group(self.path, self._manifest(), self._check_manifest,
                                                 zarr_format=3)
            self._layout()
        except FrameWriteError:
            raise
        except OSError as exc:
            raise _write_error(self.path, exc, writing_frame=False) from None

    # -- layout ----------------------------------------------------------------------------
    def _manifest(self):
        return {"format": _FORMAT, "format_version": _VERSION, "shape": list(self.shape),
                "chunks": list(self.chunks), "dtype": self.dtype.str, "classes": self.classes,
                "n_classes": self.n_classes, "levels": self.n_levels, "name": self.name,
                "provenance": self.provenance, "spacing": self.spacing}

    def _check_manifest(self, found):
        _check_record(self.path, found, self._manifest(),
                      ("shape", "chunks", "dtype", "classes", "n_classes", "levels", "name",
                       "spacing"))

    def _layout(self):
        """Create what a store of this job lacks (all of it when new; what a crash while
        creating it left out), then open its arrays."""
        if "ome" not in self._root.attrs:
            self._root.attrs["ome"] = {"version": NGFF_VERSION}
        labels = self._root.require_group("labels")
        if "ome" not in labels.attrs:
            labels.attrs["ome"] = {"version": NGFF_VERSION, "labels": [self.name]}
        image = labels.require_group(self.name)
        if "ome" not in image.attrs:
            colours = label_colours(self.classes)
            image.attrs["ome"] = {
                "version": NGFF_VERSION,
                "multiscales": _multiscales(self.name, self._spatial_axes(), self.n_levels,
                                            spacing=self.spacing),
                "image-label": {
                    "colors": [{"label-value": v, "rgba": colours[v]} for v in self.classes],
                    "properties": [{"label-value": v, "name": n}
                                   for v, n in zip(self.classes, self.class_names)],
                    "source": {"image": "../../"}}}
        self._levels = [_require_array(image, str(level), self._level_shape(level),
                                       self._level_chunks(level), self.dtype, self._names())
                        for level in range(self.n_levels)]
        self._proba = None
        if self.n_classes is not None:
            proba = self._root.require_group("probabilities")
            if "ome" not in proba.attrs:
                proba.attrs["ome"] = {"version": NGFF_VERSION, "multiscales": _multiscales(
                    "probabilities", [{"name": "c", "type": "channel"}] + self._spatial_axes(), 1,
                    channel=True, spacing=self.spacing)}
            self._proba = _require_array(proba, "0", (self.n_classes,) + self.shape,
                                         (self.n_classes,) + self.chunks, np.float32,
                                         ("c",) + self._names())
        self._done = _require_array(self._root, CHUNKS_DONE, self.grid, (1,) * len(self.grid),
                                    np.uint8, None)

    def _spatial_axes(self):
        return (_Z if len(self.shape) == 3 else []) + _YX

    def _names(self):
        return tuple(axis["name"] for axis in self._spatial_axes())

    def _steps(self, level):
        """Per axis, the pixels a level-``level`` label keeps one of (z is never subsampled)."""
        return (1,) * (len(self.shape) - 2) + (1 << level,) * 2

    def _level_shape(self, level):
        return tuple(-(-s // step) for s, step in zip(self.shape, self._steps(level)))

    def _level_chunks(self, level):
        return tuple(c // step for c, step in zip(self.chunks, self._steps(level)))

    # -- writing ---------------------------------------------------------------------------
    def write_chunk(self, index, labels, probabilities=None):
        index, window, labels, probabilities = self._chunk_data(index, labels, probabilities)
        try:
            if probabilities is not None:
                self._proba[(slice(None),) + window] = probabilities
            for level, array in enumerate(self._levels):
                steps = self._steps(level)
                array[tuple(slice(s.start // step, -(-s.stop // step))
                            for s, step in zip(window, steps))] = \
                    labels[tuple(slice(None, None, step) for step in steps)]
            self._done[index] = 1
        except OSError as exc:
            raise _write_error(self.path / f"chunk {index}", exc, unit="chunk") from None

    def completed(self):
        """Chunks already written in full (their marker is set and their files exist)."""
        return {index for index in (tuple(int(i) for i in index)
                                    for index in zip(*np.nonzero(self._done[:])))
                if _chunk_path(self._levels[0], index).is_file()}

    @property
    def location(self):
        return f"{self.path}/labels/{self.name}"

    def _contents(self):
        return f"{self.shape} in {self.chunks} chunks, {self.n_levels} levels"
