"""Writers of one image per frame: the shared base, a folder of TIFFs and one TIFF stack."""

import errno
import glob
import json
import os
import secrets
import time
from pathlib import Path

import numpy as np
import tifffile

from ..checks import check_int, is_int
from ._atomic import publish, write_atomically
from ._errors import FrameWriteError, _write_error
from ._frames import _Opened, _default_names
from ._manifest import (_MANIFEST_FORMAT, _MANIFEST_NAME, _MANIFEST_VERSION, _START_OVER,
                        _as_recorded, _check_record, _describe, _first, _remove_output)
from ._tiff import _tiff_is_complete

try:
    import fcntl
except ImportError:  # Windows: abandoned temporary files are left for the user to delete
    fcntl = None

__all__ = ["BaseWriter", "FrameWriter", "TiffFolderWriter", "TiffStackWriter"]

_STACK_FORMAT = "msclassify-stack"
_ABANDONED_AFTER = 10.0  # seconds: an unlocked temporary file older than this is abandoned


class BaseWriter(_Opened):
    """An output that takes one image per frame: what every writer has in common.

    Frames are positions ``0 .. n_frames - 1`` of ``frame_shape`` and ``dtype``;
    `write` stores one, `completed` says which are done (so a re-run can skip
    them), `close` releases the output. Use it as a context manager.

    Attributes
    ----------
    path : Path
    n_frames : int
    frame_shape : tuple of int
        ``(H, W)`` of every image.
    dtype : numpy.dtype
    """

    path: Path
    n_frames: int
    frame_shape: tuple
    dtype: np.dtype

    def write(self, index, labels, probabilities=None):
        """Write frame ``index`` atomically.

        Parameters
        ----------
        index : int
        labels : (H, W) integer ndarray
            Cast to the writer's dtype; values that do not fit raise ValueError.
        probabilities : (H, W, n_classes) ndarray, optional
            Stored as float32; required exactly when the writer has ``n_classes``.

        Raises
        ------
        FrameWriteError
            When the disk is full or the output is not writable. The frame is then
            absent (never half-written) and all frames written before stay valid.
        """
        raise NotImplementedError

    def completed(self):
        """Sorted list of frame indices already written and verified.

        Missing, truncated or corrupt frames, and frames whose shape or dtype is
        wrong, are not listed, so a re-run writes them again.
        """
        raise NotImplementedError

    def _contents(self):
        return f"{self.n_frames} frames of {self.frame_shape} {self.dtype}"


class FrameWriter(BaseWriter):
    """Writes one label image (and optionally class probabilities) per frame, resumably.

    Create one with `open_writer`. Each `write` is atomic; `completed` lists the
    frames already written and verified, so a re-run skips them. Outputs record
    what they hold (frame count, shape, dtype, classes, frame names) and, given
    ``provenance``, what made them; reopening one for a different prediction is
    refused rather than mixing results.

    Attributes
    ----------
    path : Path
    n_frames : int
    frame_shape : tuple of int
        ``(H, W)`` of every label image.
    dtype : numpy.dtype
        Label dtype.
    n_classes : int or None
        Number of probability channels stored per frame, None when only labels
        are stored.
    provenance : dict or None
        What made the frames (see `open_writer`), as recorded in the output.
    """

    def __init__(self, path, n_frames, frame_shape, dtype, names, n_classes, provenance=None,
                 overwrite=False):
        check_int(n_frames, "n_frames")
        frame_shape = tuple(int(size) for size in frame_shape)
        if len(frame_shape) != 2 or min(frame_shape) < 1:
            raise ValueError(f"frame_shape must be (height, width), got {frame_shape}")
        dtype = np.dtype(dtype)
        if dtype.kind not in "biu" and dtype != np.float32:
            raise TypeError(f"label dtype must be an integer type such as uint8 (or float32 for "
                            f"a probability image), got {dtype}")
        if n_classes is not None:
            check_int(n_classes, "n_classes")
        names = _default_names(n_frames) if names is None else [str(name) for name in names]
        if len(names) != n_frames or len(set(names)) != n_frames:
            raise ValueError(f"names must hold {n_frames} distinct names, got {len(names)} "
                             f"({len(set(names))} distinct)")
        bad = [name for name in names if not name or name.startswith(".") or "/" in name
               or os.sep in name]
        if bad:
            raise ValueError(f"frame names must be plain file names, got {bad[0]!r}")
        provenance = _as_recorded(provenance)
        self.path = Path(path)
        self.n_frames = int(n_frames)
        self.frame_shape = frame_shape
        self.dtype = dtype
        self.n_classes = None if n_classes is None else int(n_classes)
        self.provenance = provenance
        self._names = names
        if overwrite:
            _remove_output(self.path)

    def _manifest(self):
        return {"format": _MANIFEST_FORMAT, "format_version": _MANIFEST_VERSION,
                "n_frames": self.n_frames, "frame_shape": list(self.frame_shape),
                "dtype": self.dtype.str, "n_classes": self.n_classes, "names": self._names,
                "provenance": self.provenance}

    def _check_manifest(self, found):
        """FrameWriteError unless the output at ``path`` holds this very prediction."""
        expected = self._manifest()
        _check_record(self.path, found, expected, ("n_frames", "frame_shape", "dtype", "n_classes"),
                      lambda found, expected, _: f"holds a different prediction "
                      f"({_describe(found)}; this run writes {_describe(expected)})")
        if "names" in found and found["names"] != expected["names"]:
            names = found["names"] if isinstance(found["names"], list) else []
            raise FrameWriteError(f"output {self.path} holds other frames ({_first(names)} ... "
                                  f"there, {_first(expected['names'])} ... now); {_START_OVER}")

    def name(self, index):
        """Name of frame ``index`` in the output."""
        return self._names[self._check_index(index)]

    def _check_index(self, index):
        if not is_int(index) or not 0 <= index < self.n_frames:
            raise IndexError(f"frame index must be an integer in 0..{self.n_frames - 1}, "
                             f"got {index!r}")
        return int(index)

    def _check_frame(self, index, labels, probabilities):
        index = self._check_index(index)
        labels = np.asarray(labels)
        if labels.shape != self.frame_shape:
            raise ValueError(f"labels of frame {index} have shape {labels.shape}, expected "
                             f"{self.frame_shape}")
        if labels.dtype.kind not in ("biuf" if self.dtype.kind == "f" else "biu"):
            raise TypeError(f"labels must be integers, got {labels.dtype}")
        if self.dtype.kind in "biu" and not np.can_cast(labels.dtype, self.dtype) and labels.size:
            low, high = int(labels.min()), int(labels.max())
            info = np.iinfo(self.dtype)
            if low < info.min or high > info.max:
                raise ValueError(f"label values {low}..{high} of frame {index} do not fit "
                                 f"{self.dtype}; open the writer with a wider dtype")
        labels = np.ascontiguousarray(labels, dtype=self.dtype)
        if (probabilities is None) != (self.n_classes is None):
            raise ValueError("pass probabilities to write() if and only if the writer was opened "
                             f"with n_classes (it was opened with n_classes={self.n_classes})")
        if probabilities is not None:
            probabilities = np.ascontiguousarray(probabilities, dtype=np.float32)
            expected = self.frame_shape + (self.n_classes,)
            if probabilities.shape != expected:
                raise ValueError(f"probabilities of frame {index} have shape "
                                 f"{probabilities.shape}, expected {expected}")
        return index, labels, probabilities


class TiffFolderWriter(FrameWriter):
    """One TIFF per frame: ``PATH/NAME.tif`` (zlib-compressed labels) and, with
    ``n_classes``, ``PATH/probabilities/NAME.tif`` (uncompressed float32 ``(H, W, K)``).

    Each file is written to a hidden temporary sibling, fsynced and renamed. A run
    killed outright (SIGKILL, power loss) may leave hidden ``.NAME.tif.*.tmp``
    files; readers and `completed` ignore them and they are safe to delete.
    """

    def __init__(self, path, n_frames, frame_shape, dtype=np.uint8, names=None, n_classes=None,
                 provenance=None, overwrite=False):
        super().__init__(path, n_frames, frame_shape, dtype, names, n_classes, provenance,
                         overwrite)
        self._probability_dir = self.path / "probabilities"
        manifest_path = self.path / _MANIFEST_NAME
        try:
            if self.path.exists() and not self.path.is_dir():
                raise FrameWriteError(f"output {self.path} is a file, not a folder; choose a "
                                      "folder path for the per-frame TIFFs")
            self.path.mkdir(parents=True, exist_ok=True)
            if manifest_path.is_file():
                try:
                    found = json.loads(manifest_path.read_text())
                except (json.JSONDecodeError, UnicodeDecodeError):
                    found = {}
                self._check_manifest(found)
            else:
                foreign = [entry.name for entry in self.path.iterdir()
                           if not entry.name.startswith(".")]
                if foreign:
                    raise FrameWriteError(
                        f"output folder {self.path} already holds files not written by "
                        f"msclassify (e.g. {sorted(foreign)[0]!r}); choose an empty or new folder "
                        "so nothing is overwritten")
                manifest = json.dumps(self._manifest(), indent=1).encode()
                write_atomically(manifest_path, lambda file: file.write(manifest))
            if self.n_classes is not None:
                self._probability_dir.mkdir(exist_ok=True)
        except FrameWriteError:
            raise
        except OSError as exc:
            raise _write_error(self.path, exc, writing_frame=False) from None

    def _label_path(self, index):
        return self.path / f"{self._names[index]}.tif"

    def _probability_path(self, index):
        return self._probability_dir / f"{self._names[index]}.tif"

    def write(self, index, labels, probabilities=None):
        index, labels, probabilities = self._check_frame(index, labels, probabilities)
        # Probabilities first: a frame counts as done only once its label file exists.
        target = None
        try:
            if probabilities is not None:
                target = self._probability_path(index)
                write_atomically(target, lambda file: tifffile.imwrite(
                    file, probabilities, photometric="minisblack", planarconfig="contig"))
            target = self._label_path(index)
            write_atomically(target, lambda file: tifffile.imwrite(file, labels,
                                                                    compression="zlib"))
        except OSError as exc:
            raise _write_error(target, exc) from None

    def completed(self):
        try:
            present = {entry.name for entry in os.scandir(self.path) if entry.is_file()}
        except OSError as exc:
            raise _write_error(self.path, exc) from None
        done = []
        for index in range(self.n_frames):
            label_path = self._label_path(index)
            if label_path.name not in present:
                continue
            # Labels compress to a few kB, so decoding them (zlib checksums) is cheap;
            # probabilities are large, so only their structure and byte extent are checked.
            if not _tiff_is_complete(label_path, self.frame_shape, self.dtype, decode=True):
                continue
            if self.n_classes is not None and not _tiff_is_complete(
                    self._probability_path(index), self.frame_shape + (self.n_classes,),
                    np.dtype(np.float32), decode=False):
                continue
            done.append(index)
        return done


class TiffStackWriter(BaseWriter):
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
                try:
                    publish(self._temporary, self.path)
                except FileExistsError:
                    raise FrameWriteError(f"{self.path} was written by another run while this "
                                          "one ran; this run's stack is discarded: choose "
                                          "another file name", filename=str(self.path)) from None
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
