"""The labels of one large image in an HDF5 file, written chunk by chunk, resumably.

The file a `ChunkedHDF5Writer` makes (``OUT.h5``, labels at ``/labels`` or the
dataset path given as ``OUT.h5:/group/name``)::

    /                               attribute "msclassify": what made it (JSON)
    /labels                         (H, W) chunked, gzip; class values
    /labels_probabilities           (n_classes, H, W) float32 (when asked for)
    /msclassify_done                one uint8 per chunk: 1 once all of the chunk is written

h5py opens it (``h5py.File("OUT.h5")["labels"]``), so do Fiji (File > Import > HDF5,
or BigDataViewer), napari (napari-h5) and msclassify itself (``OUT.h5:/labels``).

HDF5 cannot replace a chunk atomically, so the file is written under a hidden
name next to it (``.OUT.h5.partial``), flushed after every chunk, and renamed to
``OUT.h5`` once every chunk is done: ``OUT.h5`` is complete whenever it exists.
A chunk's done marker is set after its data, and a chunk counts as done only if
its data are stored, so a run stopped between two chunks (Ctrl-C, kill -9, a full
disk) resumes without rewriting a finished chunk. A kill in the middle of a flush
can leave the hidden file unreadable: the next run then says so, and
``overwrite=True`` starts over. A chunk is written only when the disk has room for
it uncompressed (and a margin for HDF5's own records) and the file may grow by as
much (``ulimit -f``): HDF5 that runs out of space in a write crashes the process
(h5py frees its objects into a segmentation fault), so a full disk is refused before
the chunk, like any other write error.
"""

import errno
import json
import os
import re
import shutil

import numpy as np

from ._atomic import publish
from ._chunked import ChunkedWriter
from ._errors import FrameWriteError, _reason, _write_error
from ._lazy import _split_h5
from ._manifest import CHUNKS_DONE, _check_record

__all__ = ["ChunkedHDF5Writer"]

_FORMAT = "msclassify-chunks-hdf5"
_VERSION = 1
_DEFAULT_DATASET = "/labels"
_KEYS = ("shape", "chunks", "dtype", "classes", "n_classes", "dataset")
# Room kept free beside a chunk's own bytes for HDF5's records (B-tree nodes, heaps).
_SPACE_MARGIN = 1 << 20


def _os_error(exc):
    """An OSError with the errno HDF5 names only in its message (``errno = 28``)."""
    if getattr(exc, "errno", None) is None:
        found = re.search(r"errno = (\d+)", str(exc))
        if found:
            code = int(found.group(1))
            return OSError(code, os.strerror(code))
    return exc


def _check_room(path, size):
    """OSError (ENOSPC, EFBIG) unless file ``path`` can grow by ``size`` bytes: room on its
    disk and under the process's file size limit."""
    if shutil.disk_usage(path.parent).free < size:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    try:
        import resource
    except ImportError:  # not on POSIX: no file size limit
        return
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and path.stat().st_size + size > limit:
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))


class ChunkedHDF5Writer(ChunkedWriter):
    """Writes the labels (and probabilities) of one large image to HDF5, chunk by chunk.

    Parameters
    ----------
    path : str or Path
        ``OUT.h5`` (labels at ``/labels``) or ``OUT.h5:/group/name``; created, or resumed
        if its hidden partial file holds this very job.
    shape, chunks, classes, dtype, class_names, n_classes, provenance, overwrite
        As `ChunkedLabelWriter`: the image's ``(H, W)``, the chunk, the class values,
        the label dtype, the class names (attributes ``classes`` and ``class_names`` of
        the labels), the probability channels (or None), what made the labels (a file
        is resumed only if it records the same) and whether to delete a file msclassify
        wrote at ``path`` first.
    spacing : None
        Taken for a uniform signature: a volume (three axes) is refused, its labels go to
        OME-Zarr (`ChunkedLabelWriter`).

    Examples
    --------
    >>> import numpy as np, tempfile, os, h5py
    >>> path = os.path.join(tempfile.mkdtemp(), "out.h5")
    >>> writer = ChunkedHDF5Writer(path + ":/seg/labels", (40, 50), (32, 32), [1, 2])
    >>> writer.grid, writer.completed()
    ((2, 2), set())
    >>> writer.write_chunk((1, 0), np.full((8, 32), 2, np.uint8))
    >>> writer.close()
    >>> ChunkedHDF5Writer(path + ":/seg/labels", (40, 50), (32, 32), [1, 2]).completed()
    {(1, 0)}
    """

    def __init__(self, path, shape, chunks, classes, *, dtype=np.uint8, class_names=None,
                 n_classes=None, provenance=None, overwrite=False, spacing=None):
        import h5py

        split = _split_h5(path)
        file, dataset = split if split is not None else (str(path), _DEFAULT_DATASET)
        dataset = "/" + dataset.strip("/")
        if dataset == "/":
            raise ValueError(f"{path}: name the labels' dataset (e.g. {file}:/labels)")
        super().__init__(file, shape, chunks, classes, dtype, n_classes, provenance, spacing)
        self.dataset = dataset
        self.class_names = ([f"class {v}" for v in self.classes] if class_names is None
                            else [str(n) for n in class_names])
        self._partial = self.path.with_name(f".{self.path.name}.partial")
        self._file = None
        self._finished = False
        try:
            if overwrite:
                self._remove()
            if os.path.lexists(self.path):
                self._check_finished()
                self._finished = True
                return
            try:
                self._file = h5py.File(self._partial, "a")
            except OSError as exc:
                if os.path.exists(self._partial):
                    raise FrameWriteError(
                        f"the unfinished output {self._partial} of an earlier run cannot be "
                        f"opened ({_reason(exc)}): another run is writing it, or it was killed "
                        "while saving; start over with overwrite=True (msclassify predict "
                        "--overwrite)", filename=str(self._partial)) from None
                raise
            self._layout()
        except FrameWriteError:
            self.close()
            raise
        except OSError as exc:
            self.close()
            raise _write_error(self.path, _os_error(exc), writing_frame=False) from None

    # -- the file's record ------------------------------------------------------------------
    def _manifest(self):
        return {"format": _FORMAT, "format_version": _VERSION, "shape": list(self.shape),
                "chunks": list(self.chunks), "dtype": self.dtype.str, "classes": self.classes,
                "n_classes": self.n_classes, "dataset": self.dataset,
                "provenance": self.provenance}

    @staticmethod
    def _record(file):
        """The record a file holds, or None (not msclassify's); {} if it is unreadable."""
        text = file.attrs.get("msclassify")
        if text is None:
            return None
        try:
            return json.loads(text)
        except (TypeError, ValueError):
            return {}

    def _check_finished(self):
        """FrameWriteError unless ``path`` is a finished file of this very job."""
        import h5py

        try:
            with h5py.File(self.path, "r") as file:
                found = self._record(file)
        except OSError as exc:
            raise FrameWriteError(f"output {self.path} exists and is not an HDF5 file "
                                  f"({_reason(exc)}); choose another output",
                                  filename=str(self.path)) from None
        if found is None:
            raise FrameWriteError(f"output {self.path} exists and was not written by "
                                  "msclassify; choose another output (labels are written to a "
                                  "file of their own)", filename=str(self.path))
        _check_record(self.path, found, self._manifest(), _KEYS)

    def _remove(self):
        """Delete the file (and the unfinished file) msclassify wrote at ``path``."""
        import h5py

        if os.path.lexists(self.path):
            try:
                with h5py.File(self.path, "r") as file:
                    ours = self._record(file) is not None
            except OSError:
                ours = False
            if not ours or self.path.is_symlink():
                raise FrameWriteError(f"output {self.path} was not written by msclassify; "
                                      "overwrite only replaces outputs msclassify wrote: move it "
                                      "away or choose another output", filename=str(self.path))
            self.path.unlink()
        self._partial.unlink(missing_ok=True)

    def _layout(self):
        """The record first, then every dataset this job lacks (all when new)."""
        found = self._record(self._file)
        if found is None:
            if len(self._file):
                raise FrameWriteError(f"{self._partial} holds data not written by msclassify; "
                                      "move it away")
            self._file.attrs["msclassify"] = json.dumps(self._manifest())
        else:
            _check_record(self._partial, found, self._manifest(), _KEYS)
        chunks = tuple(min(c, s) for c, s in zip(self.chunks, self.shape))
        self._labels = self._require(self.dataset, self.shape, chunks, self.dtype)
        if "classes" not in self._labels.attrs:
            self._labels.attrs["classes"] = self.classes
            self._labels.attrs["class_names"] = self.class_names
        self._proba = None if self.n_classes is None else self._require(
            self.dataset + "_probabilities", (self.n_classes,) + self.shape,
            (self.n_classes,) + chunks, np.float32)
        self._done = self._require(CHUNKS_DONE, self.grid, None, np.uint8)
        self._file.flush()
        self._pending = {(i, j) for i in range(self.grid[0])
                         for j in range(self.grid[1])} - self.completed()
        if not self._pending:
            self._finish()

    def _require(self, name, shape, chunks, dtype):
        if name in self._file:
            return self._file[name]
        return self._file.create_dataset(name, shape=shape, dtype=dtype, chunks=chunks,
                                         fillvalue=0,
                                         **({"compression": "gzip", "compression_opts": 1,
                                             "shuffle": dtype == np.float32} if chunks else {}))

    # -- writing ----------------------------------------------------------------------------
    def write_chunk(self, index, labels, probabilities=None):
        index, window, labels, probabilities = self._chunk_data(index, labels, probabilities)
        if self._finished:
            raise ValueError(f"{self.path} is complete; open it with overwrite=True to rewrite it")
        try:
            _check_room(self._partial, labels.nbytes + _SPACE_MARGIN + (
                0 if probabilities is None else probabilities.nbytes))
            if probabilities is not None:
                self._proba[(slice(None),) + window] = probabilities
            self._labels[window] = labels
            self._done[index] = 1
            self._file.flush()
            self._pending.discard(index)
            if not self._pending:
                self._finish()
        except (OSError, RuntimeError) as exc:  # h5py raises RuntimeError for a failed flush
            raise _write_error(f"{self._partial} (chunk {index})", _os_error(exc),
                               unit="chunk") from None

    def _stored(self, dataset, offset):
        return dataset.id.get_chunk_info_by_coord(offset).byte_offset is not None

    def completed(self):
        """Chunks already written in full (their marker is set and their data are stored)."""
        if self._finished:
            return {(i, j) for i in range(self.grid[0]) for j in range(self.grid[1])}
        done = set()
        for index in zip(*np.nonzero(self._done[:])):
            index = tuple(int(i) for i in index)
            offset = tuple(i * c for i, c in zip(index, self.chunks))
            if self._stored(self._labels, offset) and (
                    self._proba is None or self._stored(self._proba, (0,) + offset)):
                done.add(index)
        return done

    def _finish(self):
        """Every chunk is done: close the file, make it durable and give it its name."""
        self._file.close()
        self._file = None
        with open(self._partial, "rb") as file:
            os.fsync(file.fileno())
        try:
            publish(self._partial, self.path)
        except FileExistsError:
            raise FrameWriteError(f"{self.path} was written by another run while this one ran; "
                                  f"this run's labels stay in {self._partial}: choose another "
                                  "output", errno=errno.EEXIST, filename=str(self.path)) from None
        self._finished = True

    def close(self):
        """Close the file; an unfinished one stays (hidden) for a re-run to resume."""
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except (OSError, RuntimeError):
                # it cannot be flushed (a full disk): the chunks flushed before stay done, and
                # the write's own error, already raised, says what happened
                pass

    @property
    def location(self):
        return f"{self.path}:{self.dataset}"
