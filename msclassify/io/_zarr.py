"""zarr label stacks: the per-frame writer and its reader."""

from pathlib import Path

import numpy as np

from ._errors import FrameReadError, FrameWriteError, _reason, _write_error
from ._frames import FrameSource, _default_names, _is_zarr
from ._manifest import _partial_output_note
from ._writers import FrameWriter

__all__ = ["ZarrWriter"]


def _import_zarr():
    try:
        import zarr
    except ImportError:
        raise FrameReadError("zarr stacks need the zarr package: pip install 'zarr>=3'") from None
    return zarr


def _chunk_path(array, coords):
    """The file of chunk ``coords`` of a zarr ``array`` (it exists once the chunk is written),
    or None where a chunk is not one file (a remote or sharded store)."""
    root = getattr(array.store, "root", None)
    encode = getattr(array.metadata, "encode_chunk_key", None)
    if root is None or encode is None or getattr(array, "shards", None) is not None:
        return None
    return Path(root) / array.path / encode(tuple(coords))


def _open_recorded_group(path, record, check, zarr_format=None):
    """``(group, new)``: the zarr group at ``path`` for the job ``record`` describes (its
    manifest), created with ``record`` as its ``msclassify`` attribute, or resumed if
    ``check(found)`` accepts the record found there (it raises FrameWriteError otherwise, as
    `_check_record` does); FrameWriteError for anything else at ``path``. The record is written before
    any array, so a crash in between leaves a store the writer recognises and completes."""
    try:
        zarr = _import_zarr()
    except FrameReadError as exc:
        raise FrameWriteError(str(exc)) from None
    path = Path(path)
    if path.exists() and not _is_zarr(path) and (not path.is_dir() or any(path.iterdir())):
        raise FrameWriteError(f"output {path} exists and is not a zarr store; choose a new "
                              "path (e.g. ending in .zarr)")
    try:
        root = zarr.open_group(str(path), mode="a", zarr_format=zarr_format)
    except zarr.errors.ContainsArrayError:
        raise FrameWriteError(f"zarr store {path} is an array not written by msclassify; "
                              "choose a new path") from None
    found = root.attrs.get("msclassify")
    if found is None:
        if list(root.keys()):
            raise FrameWriteError(f"zarr store {path} already holds arrays not written by "
                                  "msclassify; choose a new path")
        root.attrs["msclassify"] = record
        return root, True
    check(found)
    return root, False


class _ZarrLabelSource(FrameSource):
    """Label frames from a zarr stack written by `open_writer(..., format="zarr")`.

    Only the frames marked done are read; a stack with fewer warns (`FrameReadWarning`).
    """

    def __init__(self, path):
        zarr = _import_zarr()
        try:
            root = zarr.open_group(str(path), mode="r")
            labels, done = root["labels"], np.asarray(root["done"][:])
            manifest = dict(root.attrs.get("msclassify", {}))
        except Exception as exc:  # zarr raises many types for damaged stores
            raise FrameReadError(f"{path} is not a zarr label stack written by msclassify "
                                 f"({_reason(exc)})") from None
        self._indices = np.flatnonzero(done != 0)
        if self._indices.size == 0:
            raise FrameReadError(f"label stack {path} holds no finished frame; re-run the "
                                 "prediction to finish it")
        names = manifest.get("names")
        if not isinstance(names, list) or len(names) != done.size:
            names = _default_names(done.size)
        _partial_output_note(path, self._indices.size, {"n_frames": int(done.size)})
        super().__init__(path, self._indices.size, labels.shape[1:], labels.dtype,
                         [str(names[index]) for index in self._indices])
        self._labels = labels
        self._source_files = sorted(file for file in Path(path).rglob("*") if file.is_file())

    def _read(self, index):
        try:
            return np.asarray(self._labels[int(self._indices[index])], dtype=self.dtype)
        except Exception as exc:  # codec errors for damaged chunks
            raise FrameReadError(f"frame {index} of {self.path} cannot be decoded "
                                 f"({_reason(exc)}); re-run the prediction") from None


class ZarrWriter(FrameWriter):
    """A zarr (v3) group with ``labels`` (T, H, W), optional ``probabilities``
    (T, H, W, K) float32, and ``done`` (T,) markers, one chunk per frame.

    zarr writes each chunk to a temporary file and renames it; the frame's
    ``done`` marker is written after its data chunks, so a frame is complete
    exactly when its marker is set and its chunks decode. Chunks are written
    even when all zeros so that a missing chunk always means "not written".
    Create the writer once before starting parallel workers: each frame lives in
    its own chunks, so workers writing different frames never conflict.
    """

    def __init__(self, path, n_frames, frame_shape, dtype=np.uint8, names=None, n_classes=None,
                 provenance=None, overwrite=False):
        super().__init__(path, n_frames, frame_shape, dtype, names, n_classes, provenance,
                         overwrite)
        try:
            self._root, _ = _open_recorded_group(self.path, self._manifest(),
                                                 self._check_manifest)
            self._labels = self._array("labels", (n_frames,) + self.frame_shape, self.dtype)
            self._done = self._array("done", (n_frames,), np.uint8)
            self._probabilities = None if self.n_classes is None else self._array(
                "probabilities", (n_frames,) + self.frame_shape + (self.n_classes,), np.float32)
        except FrameWriteError:
            raise
        except OSError as exc:
            raise _write_error(self.path, exc, writing_frame=False) from None

    def _array(self, name, shape, dtype):
        if name in self._root:
            return self._root[name]
        return self._root.create_array(name, shape=shape, chunks=(1,) + shape[1:], dtype=dtype,
                                       fill_value=0, config={"write_empty_chunks": True})

    def write(self, index, labels, probabilities=None):
        index, labels, probabilities = self._check_frame(index, labels, probabilities)
        try:
            if probabilities is not None:
                self._probabilities[index] = probabilities
            self._labels[index] = labels
            self._done[index] = 1
        except OSError as exc:
            raise _write_error(self.path / f"labels (frame {index})", exc) from None

    def completed(self):
        done = []
        for index in np.flatnonzero(self._done[:]):
            index = int(index)
            if not all(_chunk_path(array, (index,) + (0,) * (array.ndim - 1)).is_file()
                       for array in (self._labels, self._probabilities) if array is not None):
                continue
            try:
                self._labels[index]
            except Exception:  # codec errors for damaged chunks: redo the frame
                continue
            done.append(index)
        return done
