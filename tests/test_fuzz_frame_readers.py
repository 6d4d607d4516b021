"""Frame readers fuzzed (hypothesis): a damaged TIFF or video gives an error naming the file,
or the frames the file really holds, with a warning whenever that is not what it claims.

* **Truncated** anywhere: the frames read are exactly the original's first frames; fewer
  than the original come with a `FrameReadWarning` naming the file.
* **Wrong frame counts** in a TIFF's metadata (tifffile's ``shape``, ImageJ's
  ``images=``): the frames read are the pages that are there, and a count that differs
  from the claim is said in a warning.
* **Bit-flipped or deleted bytes**: `FrameReadError` naming the file (when opening or
  reading a frame), or frames of the shape and dtype the source reports; never another
  exception, never more frames than were written.

Examples are few and derandomized (deterministic in CI); each one reads a tiny file.
"""

import re
import warnings

import av
import numpy as np
import pytest
import tifffile
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from msclassify.io import FrameReadError, FrameReadWarning, open_frames

N_FRAMES = 6
FUZZ = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
VIDEO_FUZZ = settings(FUZZ, max_examples=12)


def stack():
    frames = np.zeros((N_FRAMES, 24, 32), np.uint8)
    for t in range(N_FRAMES):
        frames[t] = 10 + 30 * t
        frames[t, 4:12, 3 * t:3 * t + 8] = 250
    return frames


TIFF_OPTIONS = {"tifffile": {"photometric": "minisblack"},
                "zlib": {"photometric": "minisblack", "compression": "zlib"},
                "imagej": {"imagej": True},
                "no metadata": {"photometric": "minisblack", "metadata": None}}


@pytest.fixture(scope="module")
def tiffs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiffs")
    files = {}
    for name, options in TIFF_OPTIONS.items():
        path = folder / f"{name.replace(' ', '_')}.tif"
        tifffile.imwrite(path, stack(), **options)
        files[name] = path.read_bytes()
    return files


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    """A short H.264 mp4 with its index at the start (so a cut file still opens) and the
    frames msclassify reads from the whole file."""
    path = tmp_path_factory.mktemp("video") / "movie.mp4"
    with av.open(str(path), "w", options={"movflags": "faststart"}) as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 32, 24, "yuv420p"
        stream.options = {"g": "3"}
        for frame in stack():
            rgb = np.repeat(frame[:, :, None], 3, axis=2)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        container.mux(stream.encode())
    with open_frames(path, as_gray=True) as source:
        frames = [source.read(i) for i in range(len(source))]
    return path.read_bytes(), frames


def read_all(data, path):
    """Open ``data`` written to ``path`` and read every frame.

    Returns (frames or None, the FrameReadError or None, messages of FrameReadWarnings).
    A frame that fails to decode must raise FrameReadError; any other exception fails.
    """
    path.write_bytes(data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with open_frames(path, as_gray=True) as source:
                frames = []
                for index in range(len(source)):
                    frame = source.read(index)
                    assert frame.shape == source.shape and frame.dtype == source.dtype
                    frames.append(frame)
            error = None
        except FrameReadError as exc:
            frames, error = None, exc
    notes = [str(w.message) for w in caught if issubclass(w.category, FrameReadWarning)]
    for message in notes + ([str(error)] if error else []):
        assert str(path) in message and "\n" not in message, message
    return frames, error, notes


def cut(data, fraction):
    return data[:int(fraction * len(data))]


def flip(data, changes):
    data = bytearray(data)
    for position, mask in changes:
        data[min(int(position * len(data)), len(data) - 1)] ^= mask
    return bytes(data)


flips = st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), min_size=1, max_size=6)


# -- TIFF -------------------------------------------------------------------------------------

@FUZZ
@given(layout=st.sampled_from(sorted(TIFF_OPTIONS)), fraction=st.floats(0, 1))
def test_a_truncated_tiff_gives_its_first_frames_and_says_so(tiffs, tmp_path, layout,
                                                              fraction):
    frames, error, notes = read_all(cut(tiffs[layout], fraction), tmp_path / "cut.tif")
    event("refused" if error else f"{len(frames)} frames")
    if error is None:
        assert 1 <= len(frames) <= N_FRAMES
        for index, frame in enumerate(frames):
            np.testing.assert_array_equal(frame, stack()[index])
        if len(frames) < N_FRAMES:
            assert notes, f"{len(frames)} of {N_FRAMES} frames read without a warning"


@FUZZ
@given(layout=st.sampled_from(["tifffile", "zlib", "imagej"]), claimed=st.integers(1, 9))
def test_a_tiff_claiming_another_frame_count_gives_its_pages_and_says_so(tiffs, tmp_path,
                                                                          layout, claimed):
    # same-length edits of the description tifffile or ImageJ wrote
    pattern = rb'images=6\n' if layout == "imagej" else rb'"shape": \[6, '
    data, count = re.subn(pattern, lambda m: m.group(0).replace(b"6", str(claimed).encode()),
                          tiffs[layout], count=1)
    assert count == 1
    frames, error, notes = read_all(data, tmp_path / "claims.tif")
    event("refused" if error else f"{len(frames)} frames")
    if error is None:
        assert 1 <= len(frames) <= N_FRAMES
        for index, frame in enumerate(frames):
            np.testing.assert_array_equal(frame, stack()[index])
        if claimed != N_FRAMES or len(frames) != N_FRAMES:
            assert notes, f"metadata claims {claimed} frames, {len(frames)} read, no warning"


@FUZZ
@given(layout=st.sampled_from(sorted(TIFF_OPTIONS)), changes=flips,
       delete=st.one_of(st.none(), st.tuples(st.floats(0, 1), st.integers(1, 32))))
def test_a_damaged_tiff_is_refused_or_read_consistently(tiffs, tmp_path, layout, changes,
                                                         delete):
    data = flip(tiffs[layout], changes)
    if delete is not None:
        at = int(delete[0] * len(data))
        data = data[:at] + data[at + delete[1]:]
    frames, error, _ = read_all(data, tmp_path / "damaged.tif")
    event("refused" if error else f"{len(frames)} frames")
    if error is None:
        assert 1 <= len(frames) <= N_FRAMES


# -- video ------------------------------------------------------------------------------------

@VIDEO_FUZZ
@given(dropped=st.integers(1, 160))  # bytes cut off the end (the first, key frame is most
def test_a_truncated_video_gives_its_first_frames_and_says_so(video, tmp_path, dropped):
    data, whole = video                # of this tiny file: cutting into it leaves nothing)
    frames, error, notes = read_all(data[:-dropped], tmp_path / "cut.mp4")
    event("refused" if error else f"{len(frames)} frames")
    if error is None:
        assert 1 <= len(frames) <= len(whole)
        for index, frame in enumerate(frames):
            np.testing.assert_array_equal(frame, whole[index])
        if len(frames) < len(whole):
            assert notes, f"{len(frames)} of {len(whole)} frames read without a warning"


@VIDEO_FUZZ
@given(changes=flips)
def test_a_bit_flipped_video_is_refused_or_read_consistently(video, tmp_path, changes):
    data, whole = video
    frames, error, _ = read_all(flip(data, changes), tmp_path / "flipped.mp4")
    event("refused" if error else f"{len(frames)} frames")
    if error is None:
        assert 1 <= len(frames) <= len(whole)
