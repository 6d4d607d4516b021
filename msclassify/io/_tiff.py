"""TIFF stacks: which frames a file really holds, read page by page or memory-mapped.

tifffile parses the file; this module checks what the file says it holds (its chain of
pages, its tifffile or ImageJ metadata) against what is there.
"""

import contextlib
import logging
import os
import re
import struct
import threading
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tifffile

from ..checks import file_problem
from ._errors import FrameReadError, FrameReadWarning, _reason
from ._frames import FrameSource, _are, _frames_text, _rgb_to_gray


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
