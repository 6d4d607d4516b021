"""The labels of one large image as a tiled, pyramidal TIFF, predicted chunk by chunk, resumably.

A TIFF cannot be written chunk by chunk in place: its tiles are laid out in a
fixed order and indexed once the image is complete, so a half-written TIFF is no
TIFF. A `ChunkedTiffWriter` therefore keeps the chunks in a hidden OME-Zarr store
next to the file (``.OUT.tif.partial.zarr``, a `ChunkedLabelWriter`: every chunk
atomic, the store's record checked on resume), and once the last chunk is
written it writes the TIFF from the store in one pass, tile row by tile row, to a
temporary file that is renamed to ``OUT.tif``; then the store is deleted. So:

- a run stopped while predicting (Ctrl-C, kill -9, a full disk) resumes after the
  chunks already done, none predicted or written again;
- a run stopped while writing the TIFF leaves no ``OUT.tif`` (never a partial
  one) and the complete store: the re-run writes the TIFF again, predicting
  nothing;
- the disk holds the labels twice while the TIFF is written (compressed).

The TIFF: tiles of 256², zlib (deflate), the class map at full resolution and
every 2nd, 4th, ... pixel in SubIFDs (as the OME-Zarr pyramid), BigTIFF when it
could exceed 4 GB, and a JSON image description recording what made it.
Probabilities (on request) go to ``OUT_probabilities.tif``, ``(classes, H, W)``
float32, written and renamed before the labels (``OUT.tif`` existing means both
are complete). Fiji opens both with Bio-Formats (File > Import > Bio-Formats),
napari and tifffile read them, and so does msclassify (`open_image`).
"""

import json
import os
import shutil

import numpy as np
import tifffile

from ._atomic import write_atomically
from ._chunked import ChunkedWriter
from ._errors import FrameWriteError, _write_error
from ._manifest import _check_record
from ._ngff import ChunkedLabelWriter

__all__ = ["ChunkedTiffWriter"]

_FORMAT = "msclassify-chunks-tiff"
_VERSION = 1
_KEYS = ("shape", "chunks", "dtype", "classes", "n_classes")
_TILE = 256
_BIGTIFF = 2**32 - 2**25      # bytes: beyond this (uncompressed) a TIFF needs 64-bit offsets


def _tiff_record(path):
    """The record in the description of a TIFF msclassify wrote at ``path``; None if the file
    is not such a TIFF."""
    try:
        with tifffile.TiffFile(path) as tiff:
            found = json.loads(tiff.pages[0].description or "null")["msclassify"]
        return found if isinstance(found, dict) else {}
    except Exception:  # not a TIFF, no description, not ours: all mean "not ours"
        return None


def _tiles(array, plane=()):
    """The tiles of ``array[plane]`` (y, x) in TIFF order, reading one band of tiles at a time."""
    height, width = array.shape[len(plane):]
    for y in range(0, height, _TILE):
        band = np.asarray(array[plane + (slice(y, y + _TILE), slice(None))])
        for x in range(0, width, _TILE):
            yield band[:, x:x + _TILE]


class ChunkedTiffWriter(ChunkedWriter):
    """Writes the labels (and probabilities) of one large image to a tiled, pyramidal TIFF.

    Parameters
    ----------
    path : str or Path
        ``OUT.tif``; written once every chunk is done. Until then the chunks are
        kept, resumably, in ``.OUT.tif.partial.zarr`` beside it.
    shape, chunks, classes, dtype, class_names, n_classes, provenance, overwrite
        As `ChunkedLabelWriter`.
    spacing : None
        Taken for a uniform signature: a volume (three axes) is refused, its labels go to
        OME-Zarr (`ChunkedLabelWriter`).

    Examples
    --------
    >>> import numpy as np, tempfile, os, tifffile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.tif")
    >>> writer = ChunkedTiffWriter(path, (40, 50), (32, 32), [1, 2])
    >>> for index in [(0, 0), (0, 1), (1, 0), (1, 1)]:
    ...     window = writer.chunk(index)
    ...     writer.write_chunk(index, np.full([s.stop - s.start for s in window], 2, np.uint8))
    >>> tifffile.imread(path).shape, sorted(os.listdir(os.path.dirname(path)))
    ((40, 50), ['out.tif'])
    """

    def __init__(self, path, shape, chunks, classes, *, dtype=np.uint8, class_names=None,
                 n_classes=None, provenance=None, overwrite=False, spacing=None):
        super().__init__(path, shape, chunks, classes, dtype, n_classes, provenance, spacing)
        self.class_names = class_names
        self.probabilities_path = self.path.with_name(
            f"{self.path.stem}_probabilities{self.path.suffix}")
        self._partial = self.path.with_name(f".{self.path.name}.partial.zarr")
        self._store = None
        if self.path.is_dir():
            raise FrameWriteError(f"output {self.path} is a folder; name a TIFF file (e.g. "
                                  "labels.tif)", filename=str(self.path))
        if overwrite:
            self._remove()
        self._finished = os.path.lexists(self.path)
        if self._finished:
            self._check_finished()
            self._discard_store()      # a run killed between renaming the TIFF and this
            return
        if (self.n_classes is not None and os.path.lexists(self.probabilities_path)
                and _tiff_record(self.probabilities_path) is None):
            raise FrameWriteError(f"{self.probabilities_path} exists and is not a TIFF msclassify "
                                  "wrote, so it is never replaced: move it away or choose "
                                  "another output", filename=str(self.probabilities_path))
        try:
            self._store = ChunkedLabelWriter(self._partial, self.shape, self.chunks,
                                             self.classes, dtype=self.dtype,
                                             class_names=class_names, n_classes=self.n_classes,
                                             provenance=self.provenance)
        except FrameWriteError as exc:  # named as the output the user gave
            raise FrameWriteError(str(exc).replace(
                str(self._partial), f"{self.path} (its unfinished chunks in {self._partial.name})"),
                exc.errno, exc.filename) from None
        self._pending = {(i, j) for i in range(self.grid[0])
                         for j in range(self.grid[1])} - self._store.completed()
        if not self._pending:
            self._write_tiff()

    def _manifest(self):
        return {"format": _FORMAT, "format_version": _VERSION, "shape": list(self.shape),
                "chunks": list(self.chunks), "dtype": self.dtype.str, "classes": self.classes,
                "n_classes": self.n_classes, "provenance": self.provenance}

    def _check_finished(self):
        found = _tiff_record(self.path)
        if found is None or self.path.is_symlink():
            raise FrameWriteError(f"output {self.path} exists and is not a TIFF msclassify "
                                  "wrote, so it is never replaced: choose another output",
                                  filename=str(self.path))
        _check_record(self.path, found, self._manifest(), _KEYS)

    def _remove(self):
        """Delete the TIFF(s) and the unfinished store msclassify wrote at ``path``."""
        if os.path.lexists(self.path):
            if self.path.is_symlink() or _tiff_record(self.path) is None:
                raise FrameWriteError(f"output {self.path} was not written by msclassify; "
                                      "overwrite only replaces outputs msclassify wrote: move it "
                                      "away or choose another output", filename=str(self.path))
            self.path.unlink()
        if _tiff_record(self.probabilities_path) is not None:
            self.probabilities_path.unlink()
        self._discard_store()

    def _discard_store(self):
        try:
            shutil.rmtree(self._partial)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _write_error(self._partial, exc, writing_frame=False) from None

    def write_chunk(self, index, labels, probabilities=None):
        if self._finished:
            raise ValueError(f"{self.path} is complete; open it with overwrite=True to rewrite it")
        self._store.write_chunk(index, labels, probabilities)
        self._pending.discard(tuple(int(i) for i in index))
        if not self._pending:
            self._write_tiff()

    def completed(self):
        """Chunks already predicted (all of them once the TIFF is written)."""
        if self._finished:
            return {(i, j) for i in range(self.grid[0]) for j in range(self.grid[1])}
        return self._store.completed()

    def _write_tiff(self):
        """Every chunk is in the store: write the TIFF(s) from it, then delete the store."""
        levels = self._store._levels
        record = {"msclassify": self._manifest()}
        bytes_ = sum(level.nbytes for level in levels)
        if self.n_classes is not None:
            proba = self._store._proba
            write_atomically(self.probabilities_path, lambda file: self._write(
                file, [(proba, [(c,) for c in range(self.n_classes)])], proba.nbytes,
                dict(record, axes="CYX")))
        write_atomically(self.path, lambda file: self._write(
            file, [(level, [()]) for level in levels], bytes_, record))
        self._finished = True
        self._discard_store()

    @staticmethod
    def _write(file, levels, bytes_, metadata):
        """``levels``: (array, planes) per pyramid level, the full resolution first."""
        with tifffile.TiffWriter(file, bigtiff=bytes_ >= _BIGTIFF) as tiff:
            for level, (array, planes) in enumerate(levels):
                shape = array.shape if planes[0] else array.shape[-2:]
                tiff.write((tile for plane in planes for tile in _tiles(array, plane)),
                           shape=shape, dtype=array.dtype, tile=(_TILE, _TILE),
                           compression="zlib", photometric="minisblack",
                           # the reduced levels keep tifffile's default metadata: with None
                           # tifffile reads the file back as a corrupted shaped series
                           **({"subifds": len(levels) - 1, "metadata": metadata} if level == 0
                              else {"subfiletype": 1}))

    @property
    def location(self):
        return str(self.path)

    def _contents(self):
        return f"{self.shape} in {self.chunks} chunks" + ("" if self._finished else
                                                          f", pending in {self._partial}")
