"""What every writer of one large image's labels, chunk by chunk, has in common."""

from pathlib import Path

import numpy as np

from ._frames import _Opened
from ._manifest import _as_recorded

__all__ = ["ChunkedWriter"]


class ChunkedWriter(_Opened):
    """The labels (and probabilities) of one large image, written chunk by chunk, resumably.

    Chunks are ``(i, j)`` of the grid that ``chunks`` cuts ``shape`` into (the last ones
    along an axis may be smaller); `write_chunk` stores one and marks it done after
    all its data, `completed` says which are done, so a re-run writes only the others.
    `msclassify.pixel.predict_to_store` takes any of them: `ChunkedLabelWriter`
    (OME-Zarr), `ChunkedHDF5Writer`, `ChunkedTiffWriter`; `open_chunk_writer` picks one
    by the output's name.

    Attributes
    ----------
    path : Path
    shape : (int, int) or (int, int, int)
        ``(H, W)`` of an image or ``(Z, Y, X)`` of a volume (`ChunkedLabelWriter` only).
    chunks : tuple of int
    grid : tuple of int
        Chunks along each axis.
    classes : list of int
    dtype : numpy.dtype
        Of the stored labels.
    n_classes : int or None
        Probability channels stored, or None.
    provenance : dict or None
        What made the labels, as recorded.
    spacing : list of float or None
        A volume's voxel size ``(z, y, x)``; None for an image.
    """

    _takes_volumes = False      # only OME-Zarr stores a volume (its spacing as the NGFF scale)

    def __init__(self, path, shape, chunks, classes, dtype, n_classes, provenance, spacing=None):
        self.path = Path(path)
        self.shape = tuple(int(v) for v in shape)
        self.chunks = tuple(int(v) for v in chunks)
        if len(self.shape) not in (2, 3) or len(self.chunks) != len(self.shape) \
                or min(self.shape + self.chunks) < 1:
            raise ValueError(f"shape {self.shape} and chunks {self.chunks} must be two (an "
                             "image) or three (a volume) positive ints each")
        if len(self.shape) == 3 and not self._takes_volumes:
            raise ValueError(f"{path}: {type(self).__name__} writes one image (two axes); write a "
                             "volume's labels to OME-Zarr (e.g. -o labels.zarr)")
        self.spacing = None if spacing is None else [float(v) for v in spacing]
        if (self.spacing is None) != (len(self.shape) == 2):
            raise ValueError("a volume (three axes) is written with its spacing, an image "
                             "without")
        self.grid = tuple(-(-s // c) for s, c in zip(self.shape, self.chunks))
        self.classes = [int(v) for v in classes]
        self.dtype = np.dtype(dtype)
        if self.dtype.kind != "u" or max(self.classes) > np.iinfo(self.dtype).max \
                or min(self.classes) < 0:
            raise ValueError(f"classes {min(self.classes)}..{max(self.classes)} do not fit labels "
                             f"of dtype {self.dtype}; choose a wider unsigned integer dtype")
        self.n_classes = None if n_classes is None else int(n_classes)
        self.provenance = _as_recorded(provenance)

    def chunk(self, index):
        """The image pixels of chunk ``index``: one slice per axis."""
        return tuple(slice(i * c, min((i + 1) * c, s))
                     for i, c, s in zip(index, self.chunks, self.shape))

    def _chunk_data(self, index, labels, probabilities):
        """``(index, window, labels, probabilities)`` checked and cast: labels ``(h, w)`` of the
        writer's dtype, probabilities ``(n_classes, h, w)`` float32 or None."""
        index = tuple(int(i) for i in index)
        window = self.chunk(index)
        expected = tuple(s.stop - s.start for s in window)
        labels = np.asarray(labels)
        if labels.shape != expected:
            raise ValueError(f"labels of chunk {index} have shape {labels.shape}, expected "
                             f"{expected}")
        if (probabilities is None) != (self.n_classes is None):
            raise ValueError("pass probabilities to write_chunk() if and only if the writer has "
                             f"n_classes (it has n_classes={self.n_classes})")
        if probabilities is not None:
            probabilities = np.moveaxis(np.asarray(probabilities, dtype=np.float32), -1, 0)
        return index, window, labels.astype(self.dtype, copy=False), probabilities

    def write_chunk(self, index, labels, probabilities=None):
        """Write chunk ``index``: its labels ``(h, w)`` and, exactly when the writer has
        ``n_classes``, its ``(h, w, n_classes)`` probabilities; then mark it done.

        Raises
        ------
        FrameWriteError
            Naming the chunk, when the disk refuses (full, not writable); the chunks
            written before stay, and a re-run resumes after them.
        """
        raise NotImplementedError

    def completed(self):
        """The set of chunks ``(i, j)`` already written in full."""
        raise NotImplementedError

    @property
    def location(self):
        """Where a viewer finds the labels (a path, or ``file:/dataset``), for messages."""
        return str(self.path)

    def _contents(self):
        return f"{self.shape} in {self.chunks} chunks"
