"""Frame input/output for batch prediction: stream frames in, write label images out.

Readers stream: `open_frames` returns a `FrameSource` that decodes one frame at
a time from a video, a multi-page TIFF, a folder of images, a glob pattern or a
zarr label stack written by `open_writer`; the whole movie is never held in
memory. What a file says it holds (a video's frame count or duration, a TIFF's
chain of pages and its tifffile or ImageJ metadata) is checked against what is
there: a file that ends early gives the frames that are complete and a
`FrameReadWarning` naming them, and a layout that could be read two ways (a
(3, H, W) array saved with tifffile's defaults) is read one way with a warning
saying which. `read_training_frames` pairs frames with label images (by
position or by name, `match_frames`) for training.

Writers store one label image per frame, either as one TIFF per frame in a
folder or as one chunk per frame in a zarr array. Every frame is written
atomically (temporary file, then rename), so a killed or failed run never
leaves a half-written frame behind, and `FrameWriter.completed` lists the frames
that are already complete so a re-run resumes where the last one stopped. An
output records what it holds and, given a provenance, what made it (for
``msclassify predict``: the model file's digest, the input's identity, the
options that change pixels); a run that would mix in other frames is refused,
and ``overwrite=True`` deletes an output msclassify wrote to start over.

Bad input raises `FrameReadError` (a ValueError) and a failed write raises
`FrameWriteError` (an OSError); both carry a one-line message naming the file
and the fix. `write_atomically` is the atomic write itself, shared by the frame
writers, model files (`msclassify.modelfile`) and the command line's outputs.
"""

import contextlib
import errno
import glob
import hashlib
import json
import logging
import math
import os
import re
import shutil
import struct
import tempfile
import threading
import warnings
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import NamedTuple

import imageio.v3 as iio
import numpy as np
import tifffile

from .checks import check_int, file_problem, is_int

__all__ = ["FrameReadError", "FrameReadWarning", "FrameSource", "FrameWriteError", "FrameWriter",
           "VolumeData", "check_axes", "match_frames", "natural_sort_key", "ngff_spacing",
           "open_frames", "open_writer", "read_label_stack", "read_training_frames",
           "read_volume", "write_atomically", "write_volume"]

VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".m4v", ".webm")
TIFF_EXTENSIONS = (".tif", ".tiff")
IMAGE_EXTENSIONS = TIFF_EXTENSIONS + (".png", ".jpg", ".jpeg", ".bmp")
_SUPPORTED = "videos (" + ", ".join(VIDEO_EXTENSIONS) + "), images (" + ", ".join(
    IMAGE_EXTENSIONS) + "), folders of images, glob patterns and zarr label stacks"

# ITU-R BT.601 luma, the weights FFmpeg uses for video luma, so that an RGB
# image and a video of it give the same grey frames.
_LUMA_WEIGHTS = np.array([0.299, 0.587, 0.114])

_MANIFEST_NAME = "msclassify_frames.json"
# Bytes read from the start and the end of an input for its fingerprint (FrameSource.identity)
_FINGERPRINT_BYTES = 2**20
_MANIFEST_FORMAT = "msclassify-frames"
# 2: frame names and the provenance of the prediction (version 1 outputs have neither)
_MANIFEST_VERSION = 2


class FrameReadError(ValueError):
    """Frames cannot be read: missing, corrupt, truncated, empty or unsupported input."""


class FrameReadWarning(UserWarning):
    """Frames were read, but not all the file says it holds (it ends early), or an
    ambiguous layout was read one way; the message names the file and the frames read."""


class FrameWriteError(OSError):
    """An output cannot be written: a frame, an output folder, a model or another file
    (disk full, not writable, foreign files, a different prediction).

    ``errno`` and ``filename`` are set when an operating-system error caused it.
    """

    def __init__(self, message, errno=None, filename=None):
        super().__init__(message)
        self.errno, self.filename = errno, filename

    def __str__(self):
        return self.args[0]


def write_atomically(final_path, write):
    """Run ``write(file)`` on a temporary sibling, fsync it, then rename it to ``final_path``.

    A crash or an exception at any point leaves either the old file or the new
    one, never a half-written ``final_path``; the temporary file is removed on
    error (a hard kill can leave a hidden ``.NAME.*.tmp``, which readers ignore).

    Raises
    ------
    FrameWriteError
        When the operating system refuses the write (a full disk, a read-only or
        missing folder): one line naming ``final_path``, the cause and the fix.
    """
    final_path = Path(final_path)
    temporary = None
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{final_path.name}.", suffix=".tmp",
                                         dir=final_path.parent)
        os.close(fd)  # reopened by name: tifffile needs a file object with a real .name
        # mkstemp creates owner-only files; outputs get the permissions of an ordinary file.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        with open(temporary, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, final_path)
    except BaseException as exc:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, FrameWriteError):
            raise _write_error(final_path, exc, writing_frame=False) from None
        raise


def natural_sort_key(text):
    """Sort key that orders digit runs by value: ``frame2`` before ``frame10``.

    Examples
    --------
    >>> sorted(["frame10.png", "frame2.png", "Frame1.png"], key=natural_sort_key)
    ['Frame1.png', 'frame2.png', 'frame10.png']
    """
    # re.split with a capturing group alternates text/digits, so the tuple's
    # types line up position by position and tuples always compare.
    return tuple(int(part) if part.isdigit() else part.lower()
                 for part in re.split(r"(\d+)", str(text)))


def _default_names(n_frames):
    width = max(6, len(str(max(n_frames - 1, 0))))
    return [f"frame_{index:0{width}d}" for index in range(n_frames)]


def _rgb_to_gray(frame):
    """Luma of an (H, W, 3|4) frame, in the frame's own dtype (alpha is dropped)."""
    gray = np.tensordot(frame[..., :3], _LUMA_WEIGHTS, axes=([-1], [0]))
    if np.issubdtype(frame.dtype, np.integer):
        info = np.iinfo(frame.dtype)
        return np.clip(np.rint(gray), info.min, info.max).astype(frame.dtype)
    return gray.astype(frame.dtype)


class FrameSource:
    """A sequence of equally shaped frames, read from disk one at a time.

    Create one with `open_frames`. Frames are decoded on demand: iterating a
    one-hour video uses the memory of one frame. Use it as a context manager
    (or call `close`) to release the file.

    Attributes
    ----------
    path : str
        What was opened (file, folder or glob pattern).
    shape : tuple of int
        Shape of every frame: ``(H, W)`` for grey, ``(H, W, C)`` for colour.
    dtype : numpy.dtype
        Data type of every frame (native byte order).

    Examples
    --------
    >>> import numpy as np, tifffile, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "stack.tif")
    >>> tifffile.imwrite(path, np.arange(24, dtype=np.uint8).reshape(3, 2, 4),
    ...                  photometric="minisblack")
    >>> with open_frames(path) as frames:
    ...     print(len(frames), frames.shape, frames.name(2), frames.read(1)[0].tolist())
    3 (2, 4) frame_000002 [8, 9, 10, 11]
    """

    def __init__(self, path, n_frames, shape, dtype, names=None):
        self.path = str(path)
        self.shape = tuple(int(size) for size in shape)
        self.dtype = np.dtype(dtype).newbyteorder("=")
        self._n_frames = int(n_frames)
        self._names = list(names) if names is not None else None
        self._source_files = None  # the files read, when not just ``path``

    def __len__(self):
        return self._n_frames

    def _check_index(self, index):
        if not is_int(index):
            raise TypeError(f"frame index must be an integer, got {type(index).__name__}")
        index = int(index)
        if index < 0:
            index += self._n_frames
        if not 0 <= index < self._n_frames:
            raise IndexError(f"frame {index} is out of range: {self.path} has "
                             f"{self._n_frames} frames (0..{self._n_frames - 1})")
        return index

    def read(self, index):
        """Frame ``index`` (negative counts from the end) as a new ndarray."""
        index = self._check_index(index)
        frame = self._read(index)
        if frame.shape != self.shape:
            raise FrameReadError(f"frame {index} of {self.path} is {frame.shape}, not {self.shape} "
                                 "like the others; split the input into parts of equal size")
        return frame

    def __getitem__(self, index):
        return self.read(index)

    def iter_frames(self, start=0, stop=None):
        """Yield frames ``start`` to ``stop - 1`` in order (``stop=None``: to the end).

        For videos this seeks once to ``start`` and then decodes sequentially,
        which is how a resumed run skips the frames already done.
        """
        start = 0 if start is None else start
        stop = self._n_frames if stop is None else min(int(stop), self._n_frames)
        if start < 0 or stop < 0:
            raise ValueError(f"start and stop must be >= 0, got start={start}, stop={stop}")
        for index in range(int(start), stop):
            yield self.read(index)

    def __iter__(self):
        return self.iter_frames()

    def name(self, index):
        """Stable name of frame ``index`` for output files, e.g. ``'frame_000123'``.

        Videos and multi-page TIFFs use ``frame_`` plus the zero-padded index;
        image files (a folder, a glob or a single image) use the file name
        without extension when those are unique, else the ``frame_`` form.
        """
        index = self._check_index(index)
        if self._names is None:
            self._names = _default_names(self._n_frames)
        return self._names[index]

    def names(self):
        """List of all frame names, in frame order (see `name`)."""
        return [self.name(index) for index in range(self._n_frames)]

    def identity(self):
        """What identifies these frames, for the record an output keeps of what made it.

        Returns
        -------
        dict
            ``path`` (absolute; for messages), ``n_frames``, ``frame_shape``,
            ``dtype``, ``size`` (bytes of the files read) and ``fingerprint``: the
            SHA-256 of every file's size (and name, for a folder of images) and of
            the first and last MiB of the first and last file, which is cheap for
            an hour of video and tells any two recordings apart.
        """
        files = self._source_files or [Path(self.path)]
        digest = hashlib.sha256()
        size = 0
        for file in files:
            file_size = os.path.getsize(file)
            size += file_size
            # the names of a folder's files are the frames' names; a single file's is not
            digest.update(f"{file.name if len(files) > 1 else ''}\0{file_size}\0".encode())
        for file in dict.fromkeys((files[0], files[-1])):
            with open(file, "rb") as fh:
                digest.update(fh.read(_FINGERPRINT_BYTES))
                fh.seek(max(0, os.path.getsize(file) - _FINGERPRINT_BYTES))
                digest.update(fh.read(_FINGERPRINT_BYTES))
        return {"path": str(Path(self.path).absolute()), "n_frames": self._n_frames,
                "frame_shape": list(self.shape), "dtype": self.dtype.str, "size": size,
                "fingerprint": digest.hexdigest()}

    def close(self):
        """Release open files (reading after closing is an error)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self):
        return (f"<{type(self).__name__} {self.path!r}: {self._n_frames} frames of "
                f"{self.shape} {self.dtype}>")

    def _read(self, index):
        raise NotImplementedError


class _VideoSource(FrameSource):
    """Video decoded with PyAV; random access by a packet index built at open.

    The index lists every packet's timestamp (demuxing without decoding takes
    ~30 ms for 3000 frames), which gives an exact frame count and, sorted, the
    timestamp of every frame in display order. ``read(i)`` seeks to the
    keyframe before frame i and decodes forward; reads in increasing order
    keep decoding without seeking.
    """

    def __init__(self, path, as_gray):
        try:
            import av
        except ImportError:
            raise FrameReadError(f"reading the video {path} needs PyAV: pip install av") from None
        self._av = av
        problem = file_problem(path)
        if problem:
            raise FrameReadError(f"video {path} {problem}")
        self._note, self._data_limit = None, None
        n_frames, self._pts, self._keyframes = self._index_packets(path)
        if self._note:
            warnings.warn(self._note, FrameReadWarning, stacklevel=3)
        container = self._open_container(path)
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        eight_bit = stream.format is None or stream.format.components[0].bits <= 8
        shape = (stream.height, stream.width) if as_gray else (stream.height, stream.width, 3)
        if as_gray:
            self._pixel_format = "gray" if eight_bit else "gray16le"
        else:
            self._pixel_format = "rgb24" if eight_bit else "rgb48le"
        super().__init__(path, n_frames, shape, np.uint8 if eight_bit else np.uint16)
        self._container, self._stream = container, stream
        self._index_of_pts = {pts: index for index, pts in enumerate(self._pts)}
        self._decoded = None      # generator of decoded frames after the last seek
        self._next_index = None   # display index the generator yields next

    def _open_container(self, path):
        try:
            container = self._av.open(str(path))
        except (self._av.error.FFmpegError, OSError) as exc:
            raise FrameReadError(f"cannot open video {path}: the file is corrupt, truncated or "
                                 f"not a video ({exc}); re-copy it or re-encode it with "
                                 "ffmpeg") from None
        if not container.streams.video:
            container.close()
            raise FrameReadError(f"{path} holds no video stream; pass a video file, a TIFF stack "
                                 "or a folder of images")
        return container

    def _index_packets(self, path):
        container = self._open_container(path)
        stream = container.streams.video[0]
        packets = []  # (timestamp, keyframe, end of its data in the file or None)
        try:
            for packet in container.demux(stream):
                # size 0: end-of-stream flush packet; discard: dropped by an edit list
                if packet.size == 0 or packet.is_discard:
                    continue
                timestamp = packet.pts if packet.pts is not None else packet.dts
                if timestamp is None:
                    raise FrameReadError(f"video {path} has no frame timestamps, so frames cannot "
                                         "be addressed; re-encode it: ffmpeg -i IN -c:v libx264 "
                                         "OUT.mp4")
                start = packet.pos if packet.pos is not None and packet.pos >= 0 else None
                packets.append((timestamp, packet.is_keyframe, start, packet.size))
        except self._av.error.FFmpegError as exc:
            raise FrameReadError(f"video {path} is corrupt or truncated ({exc}); re-copy or "
                                 "re-encode it") from None
        finally:
            declared, rate = stream.frames, stream.average_rate
            duration = container.duration  # microseconds, or None
            container.close()
        if not packets:
            raise FrameReadError(f"video {path} holds no frames; check the file")
        file_size = os.path.getsize(path)
        expected = declared or None
        if not expected and duration and rate:  # no frame count in the header: its duration
            estimate = int(round(duration / 1e6 * float(rate)))
            expected = estimate if estimate > len(packets) + 1 else None
        ends_early = bool(expected and expected > len(packets))
        # Packets are stored in decoding order: a packet whose data runs past the end of the
        # file (or up to it, in a file that ends early: the demuxer cuts it there), and every
        # packet after it (it may refer to that one), cannot be decoded.
        cut = next((i for i, (_, _, start, size) in enumerate(packets) if start is not None
                    and (start + size > file_size or (ends_early and start + size == file_size))),
                   len(packets))
        complete = sorted(timestamp for timestamp, _, _, _ in packets[:cut])
        n_frames = len(complete)
        if cut < len(packets) or ends_early:
            self._data_limit = packets[cut][2] if cut < len(packets) else file_size
            n_frames = self._leading_frames(complete)
            listed = f"{expected} frames" if expected else f"{len(packets)} frames"
            if n_frames == 0:
                raise FrameReadError(f"video {path} is truncated or corrupt: its header lists "
                                     f"{listed} but not even the first is complete; re-copy "
                                     "or re-encode it")
            self._note = (f"video {path} ends early or is damaged ({file_size} bytes): its "
                          f"header lists {listed} but only {_frames_text(n_frames)} "
                          f"{_are(n_frames)} complete; read those; re-copy or re-encode it for "
                          "the rest")
        elif declared and declared != n_frames:
            raise FrameReadError(f"video {path} is truncated or corrupt: its header lists "
                                 f"{declared} frames but {n_frames} are present; re-copy "
                                 "or re-encode it")
        pts = complete[:n_frames]
        keyframe_pts = {timestamp for timestamp, keyframe, _, _ in packets[:cut] if keyframe}
        # display index of each keyframe, ascending; frame 0 always starts decoding
        keyframe_indices = sorted({0} | {i for i, p in enumerate(pts) if p in keyframe_pts})
        return n_frames, pts, np.asarray(keyframe_indices)

    @staticmethod
    def _leading_frames(timestamps):
        """How many frames at the start of a cut-off video are all there (no gap).

        Frames after a missing one cannot be numbered, so only the run before the
        first gap counts: the timestamps must step by the video's frame duration.
        """
        if len(timestamps) < 2:
            return len(timestamps)
        steps = np.diff(np.asarray(timestamps, dtype=np.int64))
        step = int(np.min(steps[steps > 0])) if np.any(steps > 0) else 0
        if step <= 0:
            return 1
        gaps = np.flatnonzero(steps != step)
        return int(gaps[0]) + 1 if gaps.size else len(timestamps)

    def _restart_at(self, index):
        self._container.seek(self._pts[index], stream=self._stream, backward=True,
                             any_frame=False)
        self._decoded = (self._container.decode(self._stream) if self._data_limit is None
                         else self._decode_complete_packets())
        self._next_index = index

    def _decode_complete_packets(self):
        """Decode the packets before ``_data_limit`` only, then flush the decoder.

        FFmpeg hands a packet cut by the end of the file to the decoder, which then fails
        and takes the frames still buffered in it (B-frames) along.
        """
        for packet in self._container.demux(self._stream):
            if packet.size == 0:
                break
            if packet.pos is not None and packet.pos >= 0 and \
                    packet.pos + packet.size > self._data_limit:
                break
            yield from self._stream.codec_context.decode(packet)
        yield from self._stream.codec_context.decode(None)

    def _decode_to(self, index):
        """Decode forward until frame ``index``; None if it never appears."""
        try:
            for frame in self._decoded:
                found = self._index_of_pts.get(frame.pts)
                if found is None:
                    continue
                self._next_index = found + 1
                if found == index:
                    return frame
                if found > index:
                    return None
        except self._av.error.FFmpegError as exc:
            self._decoded = None
            raise FrameReadError(f"video {self.path} is corrupt near frame {index} ({exc}); "
                                 "re-copy or re-encode it") from None
        self._decoded = None
        return None

    def _read(self, index):
        if self._container is None:
            raise ValueError(f"{self.path} is closed; open it again with open_frames")
        keyframe = int(self._keyframes[np.searchsorted(self._keyframes, index, side="right") - 1])
        # Keep decoding when the target lies ahead and seeking would not skip anything;
        # otherwise seek to its keyframe; if that misses (imprecise seeking in some
        # containers), decode from the first frame.
        restarts = [keyframe] + ([0] if keyframe else [])
        if (self._decoded is not None and self._next_index is not None
                and keyframe <= self._next_index <= index):
            restarts.insert(0, None)
        for restart in restarts:
            if restart is not None:
                self._restart_at(restart)
            frame = self._decode_to(index)
            if frame is not None:
                return frame.to_ndarray(format=self._pixel_format)
        raise FrameReadError(f"frame {index} of video {self.path} cannot be decoded (damaged "
                             "stream or broken index); re-encode it: ffmpeg -i IN -c:v libx264 "
                             "OUT.mp4")

    def close(self):
        if self._container is not None:
            self._container.close()
            self._container = self._decoded = None


class _TiffLayout(NamedTuple):
    """Which frames a TIFF really holds and where (see `_open_tiff`)."""

    n_frames: int            # frames that can be read (a prefix of what the file says it holds)
    frame_shape: tuple       # (H, W) or (H, W, S)
    planar: bool             # samples stored as planes: frames are (S, H, W) on disk
    dtype: np.dtype          # as read (native byte order)
    stored_dtype: np.dtype   # as stored in the file (its byte order)
    dataoffset: int | None   # uncompressed frames lie contiguously from here: memory-map them
    pages: list | None       # else the page of every frame, decoded one by one
    planes: bool             # frames are the planes of one page (tifffile's (3, H, W) default)
    notes: list              # what was assumed or found, for a FrameReadWarning
    complete: bool           # all frames the file says it holds are there


# tifffile reports a broken chain of image file directories (IFDs) only in its log.
_CHAIN_PROBLEMS = ("invalid page offset", "corrupted tag list", "invalid offset to page",
                   "circular", "corrupted IFD", "failed to reshape", "series metadata invalid")
# A frame larger than this is refused before anything is allocated (a damaged header).
_MAX_FRAME_BYTES = 2**32
# Most a TIFF codec shrinks a frame by (deflate: about 1000x); a page whose frame would be
# larger than this times its compressed bytes has a damaged header.
_MAX_COMPRESSION_RATIO = 20000


class _TifffileLog(logging.Filter):
    """Takes tifffile's log records off the terminal while this module reads a TIFF in that
    thread and keeps their messages: tifffile logs, not raises, much of what it finds wrong."""

    def __init__(self):
        super().__init__()
        self.captured = {}  # thread id -> list of messages

    def filter(self, record):
        messages = self.captured.get(record.thread)
        if messages is None:
            return True
        messages.append(record.getMessage())
        return False


_TIFFFILE_LOG = _TifffileLog()
logging.getLogger("tifffile").addFilter(_TIFFFILE_LOG)


@contextlib.contextmanager
def _tifffile_log():
    """The list of tifffile's log messages in this thread while the block runs (not printed)."""
    thread = threading.get_ident()
    outer = _TIFFFILE_LOG.captured.get(thread)
    messages = _TIFFFILE_LOG.captured[thread] = []
    try:
        yield messages
    finally:
        if outer is None:
            _TIFFFILE_LOG.captured.pop(thread, None)
        else:
            _TIFFFILE_LOG.captured[thread] = outer


def _tifffile_message(message):
    """A tifffile log message without the object it came from (``<tifffile.TiffPages @8>``)."""
    return re.sub(r"<tifffile[^>]*>\s*", "", message)


def _are(n_frames):
    return "is" if n_frames == 1 else "are"


def _frames_text(n_frames):
    return "frame 0" if n_frames == 1 else f"frames 0-{n_frames - 1}"


def _page_extent(page):
    """(end of the page's data in the file, its stored bytes)."""
    pairs = [(offset, count) for offset, count in zip(page.dataoffsets, page.databytecounts)
             if count]
    if not pairs:
        return 0, 0
    return max(offset + count for offset, count in pairs), sum(count for _, count in pairs)


def _declared_frames(tiff, frame_size):
    """Frames the file's own metadata says it holds: (count or None, which metadata)."""
    try:
        if tiff.is_shaped and tiff.shaped_metadata and "shape" in tiff.shaped_metadata[0]:
            total = int(np.prod(tiff.shaped_metadata[0]["shape"], dtype=np.int64))
            return total // frame_size, "its tifffile metadata"
        if tiff.is_imagej and tiff.imagej_metadata and "images" in tiff.imagej_metadata:
            return int(tiff.imagej_metadata["images"]), "its ImageJ header ('images=')"
    except (TypeError, ValueError, OverflowError):
        return -1, "its metadata"
    return None, None


def _next_directory(tiff):
    """Offset of the page directory the last page that could be read points to (0: none)."""
    fh = tiff.filehandle
    try:
        fh.seek(tiff.pages.next_page_offset)
        data = fh.read(tiff.tiff.offsetsize)
        return int(struct.unpack(tiff.tiff.offsetformat, data)[0])
    except (struct.error, OSError, TypeError, ValueError):
        return 0


def _directory_after(tiff, offset):
    """Offset of the first page directory after ``offset`` (None if none can be read)."""
    for index in range(len(tiff.pages)):
        try:
            page = tiff.pages[index]
        except Exception:  # a damaged directory: the ones before it still count
            return None
        if page is not None and page.offset > offset:
            return page.offset
    return None


def _tiff_layout(tiff, path, log):
    """Work out which frames ``tiff`` holds; FrameReadError if none can be read."""
    n_pages = len(tiff.pages)  # reads the whole chain of image file directories
    if not tiff.series:
        raise FrameReadError(f"TIFF {path} holds no images; re-export it")
    series = tiff.series[0]
    shape, axes, dtype = tuple(series.shape), series.axes, np.dtype(series.dtype)
    notes = []
    planar = axes.endswith("SYX") and len(shape) >= 3 and shape[-3] in (3, 4)
    samples = (axes.endswith("YXS") and shape[-1] in (3, 4)) or planar
    planes = False
    if (planar and len(shape) == 3 and tiff.is_shaped and tiff.shaped_metadata
            and list(tiff.shaped_metadata[0].get("shape", ())) == list(shape)):
        # tifffile stores a (3, H, W) or (4, H, W) array as one planar RGB image unless told
        # otherwise; as a numpy array it is a stack of grey frames (msclassify's convention).
        planar, samples, planes = False, False, True
        notes.append(f"read its {shape[0]} planes of {shape[2]}x{shape[1]} as {shape[0]} grey "
                     "frames (tifffile's default stores a (3|4, H, W) array as one planar RGB "
                     "image); if it is one colour image, save it as (H, W, 3)")
    frame_ndim = 3 if samples else 2
    if len(shape) < frame_ndim or min(shape, default=0) < 1:
        raise FrameReadError(f"TIFF {path} holds data of shape {shape}, not images")
    leading = shape[:-frame_ndim]
    if sum(size > 1 for size in leading) > 1:
        raise FrameReadError(f"TIFF {path} is a hyperstack ({axes} {shape}); msclassify reads "
                             "(frames, height, width[, RGB]) stacks: save one 2-D stack per "
                             "channel/z-plane")
    frame_shape = (shape[-2], shape[-1], shape[-3]) if planar else shape[-frame_ndim:]
    frame_bytes = int(np.prod(frame_shape, dtype=np.int64)) * dtype.itemsize
    if frame_bytes > _MAX_FRAME_BYTES:
        raise FrameReadError(f"TIFF {path} says its frames are {frame_shape} {dtype} "
                             f"({frame_bytes / 2**30:.0f} GiB each); its header is damaged: "
                             "re-copy or re-export it")
    n_series = int(np.prod(leading, dtype=np.int64))
    file_size = os.path.getsize(path)
    broken = [message for message in log if any(problem in message
                                                 for problem in _CHAIN_PROBLEMS)]
    if any("invalid shaped series metadata" in message for message in log) and not broken:
        raise FrameReadError(f"TIFF {path} is inconsistent: its tifffile metadata does not "
                             f"describe its {n_pages} pages; re-export it")
    declared, declared_by = _declared_frames(tiff, frame_bytes // dtype.itemsize)
    if declared is not None and (declared < 1 or declared < n_series or (
            n_pages > declared and not broken and len(series.pages) == n_series)):
        # (one page per frame: more pages than declared frames means lost frames)
        raise FrameReadError(f"TIFF {path} is inconsistent: {declared_by} declares "
                             f"{declared} frame(s) but it holds {max(n_series, n_pages)}; "
                             "re-export it")
    dataoffset, pages = series.dataoffset, None
    if dataoffset is not None:
        data_end = file_size
        if declared is not None and n_series < declared and broken and tiff.is_imagej:
            # ImageJ stores all frames contiguously, then the directories of pages 2, 3, ...:
            # a cut file holds the frames up to the cut or up to those directories
            n_series = declared
            data_end = min(file_size, _next_directory(tiff) or file_size)
        # pixel data end where the next page directory starts (metadata may claim more)
        data_end = min(data_end, _directory_after(tiff, dataoffset) or data_end)
        available = max(0, (data_end - int(dataoffset)) // frame_bytes)
    else:
        pages = list(series.pages)
        if declared is not None and len(pages) < declared and not planes:
            # tifffile fell back to fewer frames than declared (a damaged chain): take the
            # leading pages shaped like the first
            first = pages[0] if pages else None
            pages = []
            for page in tiff.pages:
                if (first is None or page is None or page.shape != first.shape
                        or page.dtype != first.dtype):
                    break
                pages.append(page)
            n_series = len(pages)
        available = 0
        for page in pages[:1] if planes else pages:
            end, stored = _page_extent(page) if page is not None else (file_size + 1, 0)
            page_frame_bytes = frame_bytes * (shape[0] if planes else 1)
            compressed = getattr(page, "compression", 1) not in (1, None)
            if end > file_size or not stored or (
                    not compressed and stored < page_frame_bytes) or (
                    compressed and page_frame_bytes > _MAX_COMPRESSION_RATIO * stored):
                break
            available += shape[0] if planes else 1
    expected = declared if declared is not None else n_series
    n_frames = int(min(available, n_series))
    if n_frames == 0:
        raise FrameReadError(f"TIFF {path} is truncated or corrupt: not even its first frame "
                             f"is complete ({file_size} bytes); re-copy or re-export it")
    complete = n_frames >= expected and not (broken and declared is None)
    if n_frames < expected:
        said = (f"{declared_by} declares {declared} frames" if declared is not None
                else f"its pages list {expected} frames")
        notes.append(f"the file ends early or is damaged ({file_size} bytes): {said} but only "
                     f"{_frames_text(n_frames)} {_are(n_frames)} complete; read those; re-copy "
                     "or re-export it for the rest")
    elif broken and declared is None:
        notes.append(f"its list of pages breaks off after page {n_pages - 1} "
                     f"(tifffile: {_tifffile_message(broken[0])}): the file ends early or is "
                     f"damaged; read {_frames_text(n_frames)}; re-copy or re-export it for the "
                     "rest")
    return _TiffLayout(n_frames, tuple(int(size) for size in frame_shape), planar,
                       dtype.newbyteorder("="), dtype.newbyteorder(tiff.byteorder),
                       None if dataoffset is None else int(dataoffset), pages, planes, notes,
                       complete)


def _open_tiff(path):
    """Open a TIFF and work out which frames it holds: ``(TiffFile, _TiffLayout)``.

    Every problem, also those tifffile only logs, becomes a FrameReadError naming ``path``.
    """
    problem = file_problem(path)
    if problem:
        raise FrameReadError(f"TIFF {path} {problem}")
    with _tifffile_log() as log:
        try:
            tiff = tifffile.TiffFile(path)
        except Exception as exc:  # tifffile raises many types for damaged files
            raise FrameReadError(f"cannot read TIFF {path}: it is corrupt, truncated or not a "
                                 f"TIFF ({_reason(exc)}); re-copy or re-export it") from None
        try:
            layout = _tiff_layout(tiff, path, log)
        except FrameReadError:
            tiff.close()
            raise
        except Exception as exc:
            tiff.close()
            raise FrameReadError(f"cannot read TIFF {path}: it is corrupt or truncated "
                                 f"({_reason(exc)}); re-copy or re-export it") from None
    return tiff, layout


def _reason(exc):
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


class _TiffStackSource(FrameSource):
    """Multi-page TIFF read page by page, memory-mapped when uncompressed.

    What the file says it holds (its pages, its tifffile or ImageJ metadata) is
    checked against what is there; a file that ends early gives the frames that
    are complete and a `FrameReadWarning` naming them.
    """

    def __init__(self, path, as_gray):
        self._tiff, layout = _open_tiff(path)
        self._layout = layout
        self._planar = layout.planar
        self._as_gray = as_gray and len(layout.frame_shape) == 3
        shape = layout.frame_shape[:2] if self._as_gray else layout.frame_shape
        names = [Path(path).stem] if layout.n_frames == 1 and layout.complete else None
        super().__init__(path, layout.n_frames, shape, layout.dtype, names)
        for note in layout.notes:
            warnings.warn(f"TIFF {path}: {note}", FrameReadWarning, stacklevel=3)
        self._memmap = None
        if layout.dataoffset is not None:
            frame_shape = layout.frame_shape
            stored_shape = (frame_shape[2],) + frame_shape[:2] if self._planar else frame_shape
            try:
                self._memmap = np.memmap(path, dtype=layout.stored_dtype, mode="r",
                                         offset=layout.dataoffset,
                                         shape=(layout.n_frames,) + tuple(stored_shape))
            except (ValueError, OSError) as exc:
                self.close()
                raise FrameReadError(f"cannot read TIFF {path} ({_reason(exc)}); re-copy or "
                                     "re-export it") from None

    def _read(self, index):
        if self._tiff is None:
            raise ValueError(f"{self.path} is closed; open it again with open_frames")
        try:
            with _tifffile_log():
                if self._memmap is not None:
                    frame = np.array(self._memmap[index], dtype=self.dtype)
                elif self._layout.planes:
                    frame = np.asarray(self._layout.pages[0].asarray()[index], dtype=self.dtype)
                else:
                    frame = np.asarray(self._layout.pages[index].asarray(), dtype=self.dtype)
            if self._planar:
                frame = np.moveaxis(frame, 0, -1)
        except Exception as exc:  # decoders raise many types for damaged data
            raise FrameReadError(f"frame {index} of TIFF {self.path} cannot be decoded "
                                 f"({_reason(exc)}); re-copy or re-export it") from None
        return _rgb_to_gray(frame) if self._as_gray else frame

    def close(self):
        if self._tiff is not None:
            self._tiff.close()
        self._tiff = self._memmap = None


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


def _is_zarr(path):
    return path.is_dir() and any((path / marker).is_file()
                                 for marker in ("zarr.json", ".zgroup", ".zarray"))


def _import_zarr():
    try:
        import zarr
    except ImportError:
        raise FrameReadError("zarr stacks need the zarr package: pip install 'zarr>=3'") from None
    return zarr


def _partial_output_note(path, n_found, manifest):
    """A warning for an output folder holding fewer frames than its run was to write."""
    expected = manifest.get("n_frames") if isinstance(manifest, dict) else None
    if not is_int(expected) or n_found >= expected:
        return
    warnings.warn(f"{path} holds {n_found} of the {expected} frames msclassify was to write "
                  "there (an unfinished run or a partial export): reading those only; re-run "
                  "the same prediction to finish it", FrameReadWarning, stacklevel=4)


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


def _image_files_in(folder):
    files = [entry for entry in folder.iterdir()
             if entry.is_file() and not entry.name.startswith(".")
             and entry.suffix.lower() in IMAGE_EXTENSIONS]
    return sorted(files, key=lambda path: natural_sort_key(path.name))


def _is_grey_stored_as_colour(frame):
    """True for an RGB(A) frame whose red, green and blue channels are equal."""
    return (frame.ndim == 3 and frame.shape[2] in (3, 4)
            and np.array_equal(frame[..., 0], frame[..., 1])
            and np.array_equal(frame[..., 0], frame[..., 2]))


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


def match_frames(frames, others):
    """Index into ``frames`` of each frame of ``others``: by position, or else by frame name.

    By position when both hold as many frames; otherwise a frame of ``others``
    pairs with the frame of ``frames`` of the same `FrameSource.name` (label file
    ``frame_000123.tif`` with frame 123 of a video).

    Returns
    -------
    indices : list of int or None
        ``indices[i]`` is the frame of ``frames`` that frame ``i`` of ``others`` pairs with.
    missing : str or None
        The name of the first frame of ``others`` that pairs with none (``indices`` is
        None then).
    """
    if len(others) == len(frames):
        return list(range(len(frames))), None
    by_name = {frames.name(i): i for i in range(len(frames))}
    for name in others.names():
        if name not in by_name:
            return None, name
    return [by_name[name] for name in others.names()], None


def _first_frame_is_grey(source):
    """Whether the first frame of ``source`` is grey: one channel, or R = G = B."""
    with open_frames(source) as frames:
        first = frames.read(0)
    return first.ndim == 2 or _is_grey_stored_as_colour(first)


def read_training_frames(image_paths, label_paths, *, as_gray=False):
    """The labelled frames of some inputs and their label images, for training.

    Each of ``image_paths`` (anything `open_frames` reads) pairs with the label
    input at the same position (anything `read_label_stack` reads); frames pair
    with label images as `match_frames` says. Label images without a labelled
    pixel (all 0) are skipped. ``as_gray`` is as in `open_frames`; with ``"auto"``
    every input is read as grey when none has colour in its first frame (grey
    footage stored as RGB is read as grey), else every input is read as stored.

    Returns
    -------
    frames, labels : list of ndarray
        The labelled frames and their ``(H, W)`` label images.

    Raises
    ------
    FrameReadError
        As `open_frames`; when the inputs do not pair up, a label image does not
        match its frame's size, or no label image holds a labelled pixel.
    """
    if len(image_paths) != len(label_paths):
        raise FrameReadError(f"got {len(image_paths)} image input(s) but {len(label_paths)} label "
                             "input(s); give one label input per image input, in the same order")
    if as_gray == "auto":  # other values: as open_frames takes them
        as_gray = all(_first_frame_is_grey(path) for path in image_paths)
    frames, labels = [], []
    for image_path, label_path in zip(image_paths, label_paths):
        with open_frames(image_path, as_gray=as_gray) as images, \
                read_label_stack(label_path) as label_source:
            position, missing = match_frames(images, label_source)
            if missing is not None:
                raise FrameReadError(
                    f"{label_path} has {len(label_source)} label frame(s) but {image_path} "
                    f"has {len(images)} frame(s), and label frame {missing!r} names no "
                    f"frame of it; give one label image per frame, or name the label files "
                    f"after the frames (e.g. {images.name(0)}.tif)")
            for index in range(len(label_source)):
                label_image = label_source.read(index)
                if not label_image.any():
                    continue
                frame = images.read(position[index])
                if frame.shape[:2] != label_image.shape:
                    raise FrameReadError(
                        f"label frame {label_source.name(index)} of {label_path} is "
                        f"{label_image.shape[1]}x{label_image.shape[0]} but frame "
                        f"{images.name(position[index])} of {image_path} is "
                        f"{frame.shape[1]}x{frame.shape[0]}; labels must match their frames")
                frames.append(frame)
                labels.append(label_image)
    if not frames:
        raise FrameReadError(f"the label images {', '.join(map(str, label_paths))} hold no "
                             "labelled pixel; label at least two classes (0 = unlabelled, 1, 2, "
                             "... = classes)")
    return frames, labels


def _write_error(path, exc, writing_frame=True):
    """A FrameWriteError naming ``path``, the cause and the fix."""
    resume = "; frames already written stay valid and a re-run resumes after them"
    if isinstance(exc, FrameWriteError):  # from write_atomically: already says what and why
        return FrameWriteError(f"{exc}{resume if writing_frame else ''}", errno=exc.errno,
                               filename=exc.filename)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "the disk is full: free space or write to another disk"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "the folder is not writable: choose a writable output folder"
    elif exc.errno == errno.ENOTDIR:
        fix = "part of the output path is not a folder: choose another output path"
    elif exc.errno == errno.ENOENT:
        fix = "the output folder no longer exists: re-create it or choose another"
    elif exc.errno == errno.EISDIR:
        fix = "a folder of that name is in the way: choose another output path"
    else:
        fix = "check the output folder"
    return FrameWriteError(f"cannot write {path} ({exc.strerror or exc}): {fix}"
                           f"{resume if writing_frame else ''}", errno=exc.errno,
                           filename=str(path))


class FrameWriter:
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
        if provenance is not None:
            if not isinstance(provenance, dict):
                raise TypeError(f"provenance must be a dict or None, got "
                                f"{type(provenance).__name__}")
            try:  # as it reads back from the manifest (tuples become lists)
                provenance = json.loads(json.dumps(provenance, allow_nan=False))
            except (TypeError, ValueError) as exc:
                raise TypeError(f"provenance must hold JSON values only ({exc})") from None
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
        start_over = (f"to start over, delete it with overwrite=True (msclassify predict "
                      f"--overwrite), or write to another output")
        if not isinstance(found, dict) or found.get("format") != _MANIFEST_FORMAT:
            raise FrameWriteError(f"output {self.path} has an unreadable record of what it "
                                  f"holds; {start_over}")
        version = found.get("format_version", 0)
        if not is_int(version):
            raise FrameWriteError(f"output {self.path} has a damaged record of what it holds "
                                  f"(format_version {version!r}); {start_over}")
        if version > _MANIFEST_VERSION:
            raise FrameWriteError(f"output {self.path} was written by a newer msclassify; upgrade "
                                  "or choose another output")
        expected = self._manifest()
        difference = _provenance_difference(found.get("provenance"), self.provenance)
        if difference:
            raise FrameWriteError(f"output {self.path} was made by something else: "
                                  f"{difference}; resuming would mix the two; {start_over}")
        keys = ("n_frames", "frame_shape", "dtype", "n_classes")
        if any(found.get(key) != expected[key] for key in keys):
            raise FrameWriteError(f"output {self.path} holds a different prediction "
                                  f"({_describe(found)}; this run writes {_describe(expected)}); "
                                  f"{start_over}")
        if "names" in found and found["names"] != expected["names"]:
            names = found["names"] if isinstance(found["names"], list) else []
            raise FrameWriteError(f"output {self.path} holds other frames ({_first(names)} ... "
                                  f"there, {_first(expected['names'])} ... now); {start_over}")

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

    def close(self):
        """Release the output (all written frames are already durable)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self):
        return (f"<{type(self).__name__} {str(self.path)!r}: {self.n_frames} frames of "
                f"{self.frame_shape} {self.dtype}>")


def _describe(manifest):
    try:
        dtype = np.dtype(manifest["dtype"]).name
    except (KeyError, TypeError):
        dtype = "unknown type"
    shape = "x".join(str(size) for size in manifest.get("frame_shape") or [])
    classes = manifest.get("n_classes")
    return (f"{manifest.get('n_frames')} frames of {shape} {dtype}"
            + (f" with {classes} class probabilities" if classes else ""))


def _first(names):
    return repr(str(names[0])) if names else "none"


def _without_paths(value):
    """``value`` without its ``path`` entries: where a file lies is not what it holds."""
    if isinstance(value, dict):
        return {key: _without_paths(item) for key, item in value.items() if key != "path"}
    return value


def _summary(value):
    if isinstance(value, dict):
        digest = value.get("sha256") or value.get("fingerprint")
        if digest:
            name = Path(str(value.get("path", ""))).name
            return f"{name + ' ' if name else ''}(content {str(digest)[:12]})".strip()
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _provenance_difference(found, expected):
    """What differs between two provenance records (paths ignored), or None."""
    if _without_paths(found) == _without_paths(expected):
        return None
    if found is None:
        return "it holds no record of what made it (an earlier msclassify or a napari export)"
    if expected is None or not isinstance(found, dict):
        return "it was made by a recorded prediction run"
    differences = [f"{key}: {_summary(found.get(key))} there, {_summary(expected.get(key))} now"
                   for key in sorted(set(found) | set(expected), key=str)
                   if _without_paths(found.get(key)) != _without_paths(expected.get(key))]
    return "; ".join(differences)


def _output_kind(path):
    """"tiff" or "zarr" for an output msclassify wrote, "empty" for an empty folder, else None."""
    path = Path(path)
    if not path.is_dir() or path.is_symlink():
        return None
    if _is_zarr(path):
        try:
            metadata = json.loads((path / "zarr.json").read_text())
            return "zarr" if "msclassify" in metadata.get("attributes", {}) else None
        except (OSError, ValueError, AttributeError):
            return None
    entries = list(path.iterdir())
    if not entries:
        return "empty"
    if not (path / _MANIFEST_NAME).is_file():
        return None

    def ours(entry, inside_probabilities=False):
        if entry.name.startswith("."):
            return entry.name.endswith(".tmp") and entry.is_file()
        if entry.is_file():
            return entry.suffix == ".tif" or (entry.name == _MANIFEST_NAME
                                              and not inside_probabilities)
        return (entry.is_dir() and entry.name == "probabilities" and not inside_probabilities
                and all(ours(child, True) for child in entry.iterdir()))

    return "tiff" if all(ours(entry) for entry in entries) else None


def _remove_output(path):
    """Delete an output msclassify wrote at ``path`` (for ``overwrite=True``); refuse anything else.

    The output is first renamed to a hidden sibling, so a crash while deleting leaves
    either the whole old output, or none at ``path`` and a hidden ``.NAME.overwritten-*``.
    """
    path = Path(path)
    if not os.path.lexists(path):
        return
    kind = _output_kind(path)
    if kind is None:
        what = "a file" if not path.is_dir() else "files msclassify did not write"
        raise FrameWriteError(f"output {path} holds {what}; overwrite only replaces outputs "
                              "msclassify wrote: move them away or choose another output")
    if kind == "empty":
        return
    try:
        trash = Path(tempfile.mkdtemp(prefix=f".{path.name}.overwritten-", dir=path.parent))
        os.replace(path, trash / path.name)
        shutil.rmtree(trash)
    except OSError as exc:
        raise _write_error(path, exc, writing_frame=False) from None


def _tiff_is_complete(path, shape, dtype, decode):
    """Whether ``path`` is a readable TIFF of ``shape``/``dtype`` with all its data present."""
    try:
        tiff, layout = _open_tiff(path)
        with tiff:
            if (not layout.complete or tuple(tiff.series[0].shape) != shape
                    or layout.dtype != dtype):
                return False
            if decode:
                with _tifffile_log():
                    tiff.series[0].asarray()
        return True
    except Exception:  # any parse or codec failure means "redo this frame"
        return False


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
            zarr = _import_zarr()
        except FrameReadError as exc:
            raise FrameWriteError(str(exc)) from None
        try:
            if self.path.exists() and not _is_zarr(self.path) and (
                    not self.path.is_dir() or any(self.path.iterdir())):
                raise FrameWriteError(f"output {self.path} exists and is not a zarr store; "
                                      "choose a new path (e.g. ending in .zarr)")
            self._root = zarr.open_group(str(self.path), mode="a")
            found = self._root.attrs.get("msclassify")
            if found is None:
                if list(self._root.keys()):
                    raise FrameWriteError(f"zarr store {self.path} already holds arrays not "
                                          "written by msclassify; choose a new path")
                # Manifest first, arrays after: a crash in between leaves a store this
                # writer recognises and completes.
                self._root.attrs["msclassify"] = self._manifest()
            else:
                self._check_manifest(found)
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

    def _chunk_written(self, array, index):
        key = array.metadata.encode_chunk_key((index,) + (0,) * (array.ndim - 1))
        return (self.path / array.path / key).is_file()

    def completed(self):
        done = []
        for index in np.flatnonzero(self._done[:]):
            index = int(index)
            if not self._chunk_written(self._labels, index):
                continue
            if self._probabilities is not None and not self._chunk_written(self._probabilities,
                                                                           index):
                continue
            try:
                self._labels[index]
            except Exception:  # codec errors for damaged chunks: redo the frame
                continue
            done.append(index)
        return done


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


# ---- volumes --------------------------------------------------------------------------------
# Volumes in TIFF files: the axes as the user names them, the voxel spacing the file records.
#
# `read_volume` reads a whole TIFF (a z-stack, a series of z-stacks, with or
# without channels) into ``(T, Z, Y, X, C)`` order. How an axis is meant is never
# guessed: the caller names every axis of the stored array (``axes="zyx"``,
# ``"tzcyx"``, ...) and a file whose array has another number of axes is refused,
# naming the axes its metadata records. The voxel spacing is read where the file
# records it: OME-TIFF (``PhysicalSizeZ/Y/X`` of the first image, in any of the
# OME length units, converted to the x unit) or an ImageJ hyperstack (``spacing``
# for z, the X/YResolution tags for x and y); None when it records none.
# OME-Zarr (NGFF) spacing is the ``scale`` of the first multiscale dataset's
# coordinate transformations: `ngff_spacing` reads it from the group's
# attributes, for the NGFF reader of the io package.
#
# `write_volume` writes one label volume as an ImageJ hyperstack TIFF (axes ZYX,
# the spacing in its metadata), atomically.



VOLUME_AXES = "tzyxc"
# OME length units, in metres
_OME_UNITS = {"m": 1.0, "cm": 1e-2, "mm": 1e-3, "µm": 1e-6, "um": 1e-6, "nm": 1e-9, "pm": 1e-12,
              "Å": 1e-10}


class VolumeData(NamedTuple):
    """What `read_volume` returns.

    Attributes
    ----------
    data : ndarray, shape (T, Z, Y, X, C)
    spacing : tuple of 3 float or None
        Voxel size ``(z, y, x)`` the file records, None if it records none.
    recorded_axes : str or None
        The axes the file's metadata names (tifffile's series axes, e.g. ``"ZYX"``).
    """

    data: np.ndarray
    spacing: tuple | None
    recorded_axes: str | None


def check_axes(axes, volume=True):
    """``axes`` in lower case: each of t, z, c, y, x at most once, y and x (and z for a
    volume) present; a one-line ValueError otherwise.

    Examples
    --------
    >>> check_axes("ZYX")
    'zyx'
    """
    text = str(axes).lower()
    needed = "zyx" if volume else "yx"
    if sorted(set(text)) != sorted(text) or not set(text) <= set(VOLUME_AXES) \
            or not set(needed) <= set(text):
        raise ValueError(f"axes {axes!r} must name every axis of the array once, from t (time), "
                         f"z, c (channel), y, x, and hold {', '.join(needed)}; e.g. 'zyx', "
                         "'zcyx' or 'tzyx'")
    return text


def _ome_spacing(ome_xml):
    try:
        root = ElementTree.fromstring(ome_xml)
    except ElementTree.ParseError:
        return None
    pixels = next((e for e in root.iter() if e.tag.rsplit("}", 1)[-1] == "Pixels"), None)
    if pixels is None:
        return None
    sizes = []
    for axis in "ZYX":
        value = pixels.get(f"PhysicalSize{axis}")
        unit = _OME_UNITS.get(pixels.get(f"PhysicalSize{axis}Unit", "µm"))
        if value is None or unit is None:
            return None
        sizes.append((float(value), unit))
    x_unit = sizes[2][1]      # in the unit of x
    return tuple(value if unit == x_unit else value * unit / x_unit for value, unit in sizes)


def _imagej_spacing(tif):
    meta = tif.imagej_metadata or {}
    if "spacing" not in meta:
        return None
    page = tif.pages[0]
    sizes = []
    for tag in ("YResolution", "XResolution"):
        value = page.tags.get(tag)
        if value is None:
            return None
        numerator, denominator = value.value
        if not numerator:
            return None
        sizes.append(denominator / numerator)           # pixels per unit -> unit per pixel
    return (float(meta["spacing"]), *sizes)


def _spacing_or_none(spacing):
    if spacing is None or not all(math.isfinite(s) and s > 0 for s in spacing):
        return None
    return tuple(float(s) for s in spacing)


def ngff_spacing(attributes):
    """``(z, y, x)`` scale of an OME-Zarr image group's first dataset, or None.

    ``attributes`` is the group's ``.zattrs`` (NGFF 0.4: ``multiscales[0].axes`` and
    ``datasets[0].coordinateTransformations``; 0.5 nests them under ``"ome"``).

    Examples
    --------
    >>> ngff_spacing({"multiscales": [{"axes": [{"name": n} for n in "zyx"],
    ...     "datasets": [{"coordinateTransformations": [{"type": "scale",
    ...                                                  "scale": [50, 4, 4]}]}]}]})
    (50.0, 4.0, 4.0)
    """
    try:
        multiscale = attributes.get("ome", attributes)["multiscales"][0]
        names = [axis["name"] if isinstance(axis, dict) else axis for axis in multiscale["axes"]]
        transforms = multiscale["datasets"][0]["coordinateTransformations"]
        scale = next(t["scale"] for t in transforms if t.get("type") == "scale")
        return _spacing_or_none([float(scale[names.index(axis)]) for axis in "zyx"])
    except (KeyError, IndexError, TypeError, ValueError, StopIteration, AttributeError):
        return None


def read_volume(path, axes):
    """A TIFF's array in ``(T, Z, Y, X, C)`` order, with the spacing and axes it records.

    Parameters
    ----------
    path : str or Path
    axes : str
        One letter per axis of the stored array, from ``tzcyx`` (`check_axes`).

    Returns
    -------
    VolumeData

    Raises
    ------
    ValueError
        When the file cannot be read or its array has another number of axes.
    """
    axes = check_axes(axes)
    try:
        with tifffile.TiffFile(path) as tif:
            series = tif.series[0]
            data = series.asarray()
            recorded = series.axes
            spacing = _ome_spacing(tif.ome_metadata) if tif.is_ome and tif.ome_metadata \
                else _imagej_spacing(tif) if tif.is_imagej else None
    except (OSError, ValueError, tifffile.TiffFileError, IndexError) as exc:
        raise ValueError(f"cannot read {path} as a TIFF volume ({exc}); give a multi-page "
                         "TIFF, OME-TIFF or ImageJ hyperstack") from None
    if data.ndim != len(axes):
        raise ValueError(f"{path} holds an array of shape {data.shape} but axes {axes!r} name "
                         f"{len(axes)} axes; name each of its {data.ndim} axes (its metadata "
                         f"says {recorded})")
    for letter in VOLUME_AXES:
        if letter not in axes:
            data = data[..., np.newaxis]
            axes += letter
    data = np.transpose(data, [axes.index(letter) for letter in VOLUME_AXES])
    return VolumeData(data, _spacing_or_none(spacing), recorded)


def write_volume(path, labels, spacing):
    """Write a ``(Z, Y, X)`` label volume as an ImageJ hyperstack TIFF with its spacing, atomically."""
    z, y, x = spacing
    write_atomically(path, lambda file: tifffile.imwrite(
        file, labels, imagej=True, resolution=(1 / x, 1 / y),
        metadata={"axes": "ZYX", "spacing": z}))
