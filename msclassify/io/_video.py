"""Video frames decoded with PyAV, with an exact frame count and random access."""

import os
import warnings
from collections import OrderedDict

import numpy as np

from ..checks import file_problem
from ._errors import FrameReadError, FrameReadWarning
from ._frames import FrameSource, _are, _frames_text

# Decoded frames kept for steps back: at most this many, and at most this many bytes (a
# 1024² yuv420p frame is 1.5 MiB, so 16 of them; a 4K one 12 MiB, so 5)
_RECENT_FRAMES = 16
_RECENT_BYTES = 64 * 2**20


class _VideoSource(FrameSource):
    """Video decoded with PyAV; random access by a packet index built at open.

    The index lists every packet's timestamp (demuxing without decoding takes
    ~30 ms for 3000 frames), which gives an exact frame count and, sorted, the
    timestamp of every frame in display order. ``read(i)`` seeks to the
    keyframe before frame i and decodes forward; reads in increasing order
    keep decoding without seeking. On the way to frame i the decoder skips the
    frames shown before it that no other frame refers to (FFmpeg's
    ``skip_frame="NONREF"``: the B-frames of H.264), so a read far from its
    keyframe decodes about half as many frames, and frame i is the same.

    A read a little behind the previous one (a slider dragged backwards,
    playing in reverse) decodes the frames just before its target in full too and keeps
    them as decoded pictures (up to ``_RECENT_FRAMES``, ``_RECENT_BYTES``), so
    the next steps back read them instead of seeking to the keyframe and
    decoding up to ~half a GOP again each.
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
        self._skip_before = None  # timestamp before which non-reference frames are skipped
        self._last_index = None   # the frame read last
        # decoded frames (PyAV frames, converted on reading) by display index, oldest first;
        # 3 samples a pixel bounds every decoded layout (4:4:4 at most)
        frame_bytes = 3 * stream.width * stream.height * (1 if eight_bit else 2)
        self._recent = OrderedDict()
        self._keep = max(1, min(_RECENT_FRAMES, _RECENT_BYTES // max(frame_bytes, 1)))

    def _as_grey(self):
        """The same container and packet index, frames converted to grey: opening again would
        index the packets and decode frame 0 a second time."""
        self._pixel_format = "gray" if self._pixel_format == "rgb24" else "gray16le"
        self.shape = self.shape[:2]
        return self

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
        self._decoded = self._decode_packets()
        self._next_index = index

    def _decode_packets(self):
        """Decode from the last seek on: the packets before ``_data_limit`` (all of them in a
        whole file), then flush the decoder.

        A packet whose frame is shown before ``_skip_before`` (the frame being read, or the
        first of the frames kept before it) is decoded only if another frame refers to it
        (``skip_frame="NONREF"``); nothing but the frames before the target is skipped, and
        reads in increasing order only move the target forward. FFmpeg hands a packet cut by
        the end of the file to the decoder, which then fails and takes the frames still
        buffered in it (B-frames) along: such packets are not decoded.
        """
        codec = self._stream.codec_context
        for packet in self._container.demux(self._stream):
            if packet.size == 0:     # the demuxer's end-of-stream packet
                continue
            if self._data_limit is not None and packet.pos is not None and packet.pos >= 0 \
                    and packet.pos + packet.size > self._data_limit:
                break
            before = packet.pts is not None and packet.pts < self._skip_before
            codec.skip_frame = "NONREF" if before else "DEFAULT"
            yield from codec.decode(packet)
        codec.skip_frame = "DEFAULT"
        yield from codec.decode(None)

    def _decode_to(self, index, keep_from=None):
        """Decode forward until frame ``index``; None if it never appears. The frames from
        ``keep_from`` (None: none) to ``index`` are kept for the next reads."""
        try:
            for frame in self._decoded:
                found = self._index_of_pts.get(frame.pts)
                if found is None:
                    continue
                self._next_index = found + 1
                if keep_from is not None and found >= keep_from:
                    self._recent[found] = frame
                    self._recent.move_to_end(found)
                    while len(self._recent) > self._keep:
                        self._recent.popitem(last=False)
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
        recent = self._recent.get(index)
        # a step back: up to 4 x the frames kept behind the frame read last (a slider dragged
        # backwards); not a far jump back, which would decode them for nothing
        stepped_back = (self._last_index is not None
                        and 0 < self._last_index - index <= 4 * self._keep)
        self._last_index = index
        if recent is not None:
            self._recent.move_to_end(index)
            return recent.to_ndarray(format=self._pixel_format)
        keyframe = int(self._keyframes[np.searchsorted(self._keyframes, index, side="right") - 1])
        # stepping back, the frames just before the target are decoded in full and kept,
        # for the next steps back; otherwise only the target is needed, and nothing is kept
        # (holding decoded frames makes the decoder's next pictures new memory: sequential
        # reads took 2x longer keeping the last 16)
        keep_from = max(index - self._keep + 1, keyframe) if stepped_back else None
        self._skip_before = self._pts[index if keep_from is None else keep_from]
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
            frame = self._decode_to(index, keep_from)
            if frame is not None:
                return frame.to_ndarray(format=self._pixel_format)
        raise FrameReadError(f"frame {index} of video {self.path} cannot be decoded (damaged "
                             "stream or broken index); re-encode it: ffmpeg -i IN -c:v libx264 "
                             "OUT.mp4")

    def close(self):
        if self._container is not None:
            self._container.close()
            self._container = self._decoded = None
            self._recent.clear()
