"""Frame readers and writers: streaming, random access, clear errors, atomic resumable output."""

import errno
import os
from pathlib import Path

import av
import imageio.v3 as iio
import numpy as np
import pytest
import tifffile

import msclassify.io as msio
from msclassify.io import (FrameReadError, FrameReadWarning, FrameWriteError, natural_sort_key,
                           open_frames, open_writer, read_label_stack)


N_FRAMES, HEIGHT, WIDTH = 40, 64, 96


def synthetic_frames():
    """Frames told apart by their background level, with a bright box moving right."""
    frames = np.empty((N_FRAMES, HEIGHT, WIDTH, 3), np.uint8)
    for t in range(N_FRAMES):
        frames[t] = 20 + 5 * t
        frames[t, 20:36, 2 * t:2 * t + 16] = 250
    return frames


def write_video(path, frames, codec="libx264", keyframe_interval=8, faststart=False):
    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(path), "w", options=options) as container:
        stream = container.add_stream(codec, rate=25)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.bit_rate = 4_000_000  # mpeg4's default rate blurs these tiny frames
        stream.options = {"g": str(keyframe_interval)}
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("videos")
    frames = synthetic_frames()
    write_video(folder / "movie.mp4", frames)
    write_video(folder / "movie.avi", frames, codec="mpeg4")
    write_video(folder / "faststart.mp4", frames, faststart=True)
    return folder, frames


def truncated_copy(source, target, fraction=0.6):
    data = Path(source).read_bytes()
    Path(target).write_bytes(data[:int(len(data) * fraction)])
    return target


# ---------------------------------------------------------------- videos

@pytest.mark.parametrize("name, tolerance", [("movie.mp4", 3.0), ("movie.avi", 3.0)])
def test_video_count_shape_and_content(videos, name, tolerance):
    folder, frames = videos
    with open_frames(folder / name) as source:
        assert len(source) == N_FRAMES
        assert source.shape == (HEIGHT, WIDTH, 3) and source.dtype == np.uint8
        decoded = np.stack(list(source))
        assert source.name(7) == "frame_000007"
    # lossy codecs: compare approximately, but tightly enough that a shifted or
    # swapped frame (backgrounds differ by 5 levels, the box moves 2 px) fails
    error = np.abs(decoded.astype(float) - frames).mean(axis=(1, 2, 3))
    assert error.max() < tolerance
    shifted = np.abs(decoded[1:].astype(float) - frames[:-1]).mean(axis=(1, 2, 3))
    assert shifted.min() > tolerance


def test_video_random_access_equals_sequential_decoding(videos):
    folder, _ = videos
    with open_frames(folder / "movie.mp4") as source:
        sequential = np.stack(list(source))
        # backwards, across keyframes (every 8 frames), repeated, forward skips, negative
        for index in [39, 0, 17, 16, 15, 8, 7, 7, 30, 33, 1, 25, -1]:
            np.testing.assert_array_equal(source.read(index), sequential[index])
        np.testing.assert_array_equal(np.stack(list(source.iter_frames(17, 23))),
                                      sequential[17:23])
        assert len(list(source.iter_frames(35))) == 5
        with pytest.raises(IndexError, match="out of range"):
            source.read(N_FRAMES)


def test_a_read_far_from_its_keyframe_gives_the_frame_of_decoding_every_frame(videos, tmp_path):
    """On the way to a frame, the reader skips the frames shown before it that no other frame
    refers to (the B-frames); each frame read after a seek, and the frames read on from
    there, are those of decoding the whole video."""
    _, frames = videos
    path = tmp_path / "one_keyframe.mp4"
    write_video(path, frames, keyframe_interval=N_FRAMES)
    with av.open(str(path)) as container:
        decoded = [(av.video.frame.PictureType(frame.pict_type).name,
                    frame.to_ndarray(format="rgb24")) for frame in container.decode(video=0)]
    kinds = [kind for kind, _ in decoded]
    assert kinds.count("I") == 1 and kinds.count("B") > N_FRAMES // 4   # something to skip
    with open_frames(path) as source:
        for index in [N_FRAMES - 1, 30, 29, 12, 13, 14, 20, 2]:   # seeks, then reads on
            np.testing.assert_array_equal(source.read(index), decoded[index][1])
        np.testing.assert_array_equal(np.stack(list(source.iter_frames(25))),
                                      np.stack([array for _, array in decoded[25:]]))

def test_steps_back_read_the_kept_frames_and_give_those_of_decoding_every_frame(videos,
                                                                               tmp_path,
                                                                               monkeypatch):
    """A read a few frames behind the last one (up to 4 x `_RECENT_FRAMES`) decodes the
    frames just before it in full and keeps them (at most `_RECENT_FRAMES`): the steps back
    from there (a slider dragged backwards) need no new seek; a far jump back keeps nothing;
    every frame read is that of decoding the whole video."""
    from msclassify.io import _video
    _, frames = videos
    path = tmp_path / "one_keyframe.mp4"
    write_video(path, frames, keyframe_interval=N_FRAMES)
    with av.open(str(path)) as container:
        decoded = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    seeks = []
    restart_at = _video._VideoSource._restart_at
    monkeypatch.setattr(_video, "_RECENT_FRAMES", 6)
    monkeypatch.setattr(_video._VideoSource, "_restart_at",
                        lambda self, index: (seeks.append(index), restart_at(self, index)))
    with open_frames(path) as source:
        np.testing.assert_array_equal(source.read(N_FRAMES - 1), decoded[N_FRAMES - 1])
        np.testing.assert_array_equal(source.read(8), decoded[8])   # far back: nothing kept
        assert len(source._recent) == 0
        np.testing.assert_array_equal(source.read(31), decoded[31])
        np.testing.assert_array_equal(source.read(30), decoded[30])  # a step back: 25-30 kept
        assert len(seeks) == 3                   # the far reads and the step back
        for index in range(29, 24, -1):          # the 5 kept before it
            np.testing.assert_array_equal(source.read(index), decoded[index])
        assert len(seeks) == 3
        np.testing.assert_array_equal(source.read(24), decoded[24])
        assert len(seeks) == 4                   # the kept frames are used up: seek again
        for index in [N_FRAMES - 1, 20, 21, 19, 3, 2, 1, 0, 11, 10]:
            np.testing.assert_array_equal(source.read(index), decoded[index])
        # reading on after a step back continues from the decoder's position
        np.testing.assert_array_equal(np.stack(list(source.iter_frames(12))),
                                      np.stack(decoded[12:]))
        assert len(source._recent) <= 6


@pytest.mark.slow
def test_real_fly_clip_random_frames_equal_the_sequential_decode(shared_data):
    """Far reads in both directions, steps back and forward, on the fly video (H.264 with
    B-frames referring to B-frames, key frames every 250th): exactly the frames of decoding
    it from the start, frame after frame."""
    import hashlib

    def digest(frame):
        return hashlib.sha1(frame.tobytes()).hexdigest()

    path = shared_data("fly_sleap/clip.mp4")
    with open_frames(path, as_gray=True) as source:
        sequential = [digest(frame) for frame in source]
    rng = np.random.default_rng(25)
    with open_frames(path, as_gray=True) as source:
        for target in rng.integers(0, len(sequential), 25):
            for index in (target, target - 1, target - 2, target - 9, target + 1, target - 20):
                index = int(index) % len(sequential)
                assert digest(source.read(index)) == sequential[index], index


def test_video_as_gray_is_the_luma_of_rgb_frames(videos):
    folder, _ = videos
    with open_frames(folder / "movie.mp4") as rgb, \
            open_frames(folder / "movie.mp4", as_gray=True) as gray:
        assert gray.shape == (HEIGHT, WIDTH) and len(gray) == N_FRAMES
        colour, grey = rgb.read(21), gray.read(21)
    # the synthetic video is grey in RGB, so luma equals any channel (FFmpeg rounding: 1 level)
    assert np.abs(colour[..., 1].astype(int) - grey).max() <= 1


def test_as_gray_auto_reads_grey_footage_stored_as_colour_as_grey(videos, tmp_path):
    folder, _ = videos  # grey boxes in an RGB video
    with open_frames(folder / "movie.mp4", as_gray="auto") as auto, \
            open_frames(folder / "movie.mp4", as_gray=True) as gray:
        assert auto.shape == (HEIGHT, WIDTH)
        np.testing.assert_array_equal(auto.read(21), gray.read(21))
    colour = np.zeros((2, 4, 6, 3), np.uint8)
    colour[..., 0] = 100  # red: one channel differs, so the frames stay colour
    tifffile.imwrite(tmp_path / "red.tif", colour, photometric="rgb")
    with open_frames(tmp_path / "red.tif", as_gray="auto") as auto:
        assert auto.shape == (4, 6, 3)
    with pytest.raises(ValueError, match="True, False or 'auto'"):
        open_frames(tmp_path / "red.tif", as_gray="yes")


def test_as_gray_auto_opens_a_grey_video_once_and_reads_what_as_gray_reads(videos,
                                                                           monkeypatch):
    """Issue 25: the probe of frame 0 no longer closes the video to open it again as grey (a
    second packet index and a second decode of frame 0 in napari's open)."""
    from msclassify.io._video import _VideoSource
    folder, _ = videos
    indexed = []
    index_packets = _VideoSource._index_packets
    monkeypatch.setattr(_VideoSource, "_index_packets",
                        lambda self, path: indexed.append(path) or index_packets(self, path))
    with open_frames(folder / "movie.mp4", as_gray="auto") as auto:
        assert len(indexed) == 1 and auto.shape == (HEIGHT, WIDTH)
        with open_frames(folder / "movie.mp4", as_gray=True) as gray:
            for index in [0, 1, 2, N_FRAMES - 1, 5, 21]:      # on from the probe, then seeks
                np.testing.assert_array_equal(auto.read(index), gray.read(index))


def test_training_frames_auto_grey_only_when_no_input_has_colour(videos, tmp_path):
    folder, frames = videos
    labels = np.zeros((1, HEIGHT, WIDTH), np.uint8)
    labels[0, :2], labels[0, 24, 2:10] = 1, 2
    (tmp_path / "video_labels").mkdir()
    tifffile.imwrite(tmp_path / "video_labels" / "frame_000003.tif", labels[0])
    tifffile.imwrite(tmp_path / "labels.tif", labels)
    grey, _ = msio.read_training_frames([str(folder / "movie.mp4")],
                                       [str(tmp_path / "video_labels")], as_gray="auto")
    assert grey[0].shape == (HEIGHT, WIDTH)
    red = frames[:1].copy()
    red[..., 0] = 0  # a colour input next to the grey one: every input keeps its channels
    tifffile.imwrite(tmp_path / "red.tif", red, photometric="rgb")
    mixed, _ = msio.read_training_frames(
        [str(folder / "movie.mp4"), str(tmp_path / "red.tif")],
        [str(tmp_path / "video_labels"), str(tmp_path / "labels.tif")], as_gray="auto")
    assert [frame.shape for frame in mixed] == [(HEIGHT, WIDTH, 3)] * 2


def test_truncated_videos_give_their_complete_frames_and_say_so(videos, tmp_path):
    folder, _ = videos
    # the index (moov) at the end: nothing says where the frames are
    moov_at_end = truncated_copy(folder / "movie.mp4", tmp_path / "cut.mp4")
    with pytest.raises(FrameReadError, match="cut.mp4.*(corrupt|truncated)"):
        open_frames(moov_at_end)
    # with the index at the start, the header still lists all frames: count them against it;
    # the frames before the cut are read (exactly as from the whole file), with a warning
    faststart = truncated_copy(folder / "faststart.mp4", tmp_path / "cut_fast.mp4")
    with pytest.warns(FrameReadWarning, match=f"cut_fast.mp4 ends early.*lists {N_FRAMES} "
                                              r"frames but only frames 0-(\d+) are complete"):
        cut = open_frames(faststart)
    with cut, open_frames(folder / "faststart.mp4") as whole:
        assert 0 < len(cut) < N_FRAMES
        for index in range(len(cut)):
            np.testing.assert_array_equal(cut.read(index), whole.read(index))
    garbage = tmp_path / "noise.avi"
    garbage.write_bytes(os.urandom(5000))
    with pytest.raises(FrameReadError, match="noise.avi"):
        open_frames(garbage)


def test_a_cut_matroska_video_says_it_ends_early(videos, tmp_path):
    """Matroska lists no frame count, only a duration: frames stopping short of it were
    read as a shorter video without a word."""
    folder, frames = videos
    write_video(tmp_path / "movie.mkv", frames)
    cut = truncated_copy(tmp_path / "movie.mkv", tmp_path / "cut.mkv", fraction=0.5)
    with pytest.warns(FrameReadWarning, match=f"cut.mkv ends early.*{N_FRAMES} frames but only "
                                              "frames 0-"):
        source = open_frames(cut)
    with source, open_frames(tmp_path / "movie.mkv") as whole:
        assert len(whole) == N_FRAMES and 0 < len(source) < N_FRAMES
        np.testing.assert_array_equal(source.read(len(source) - 1), whole.read(len(source) - 1))


@pytest.mark.slow
def test_real_fly_clip_random_access(shared_data):
    with open_frames(shared_data("fly_sleap/clip.mp4"), as_gray=True) as source:
        assert len(source) == 1500
        assert source.shape == (1024, 1024)
        for index, frame in enumerate(source.iter_frames(stop=1001)):
            if index == 999:
                frame_999 = frame
        frame_1000 = frame
        np.testing.assert_array_equal(source.read(1000), frame_1000)
        np.testing.assert_array_equal(source.read(999), frame_999)
        assert not np.array_equal(frame_999, frame_1000)  # the flies move
        assert source.name(1000) == "frame_001000"


# ---------------------------------------------------------------- TIFF stacks

def label_stack(n=5, shape=(8, 10)):
    return np.arange(n * shape[0] * shape[1], dtype=np.uint16).reshape((n,) + shape)


@pytest.mark.parametrize("options", [{}, {"compression": "zlib"}, {"imagej": True},
                                     {"byteorder": ">"}])
def test_tiff_stack_reads_every_frame(tmp_path, options):
    stack = label_stack()
    path = tmp_path / "stack.tif"
    tifffile.imwrite(path, stack, **options)
    with open_frames(path) as source:
        assert len(source) == 5 and source.shape == (8, 10)
        assert source.dtype == np.dtype(np.uint16)  # native byte order, even from big-endian
        np.testing.assert_array_equal(np.stack(list(source)), stack)
        np.testing.assert_array_equal(source.read(3), stack[3])
        assert source.name(4) == "frame_000004"
        # uncompressed stacks are memory-mapped, compressed ones decoded page by page
        assert (source._memmap is None) == ("compression" in options)


def test_tiff_rgb_stack_and_as_gray(tmp_path):
    rgb = np.zeros((3, 4, 6, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 100, 200, 50
    rgb[1] = 77  # a grey frame: luma equals its value exactly
    tifffile.imwrite(tmp_path / "rgb.tif", rgb, photometric="rgb")
    with open_frames(tmp_path / "rgb.tif") as colour:
        assert colour.shape == (4, 6, 3)
        np.testing.assert_array_equal(colour.read(2), rgb[2])
    with open_frames(tmp_path / "rgb.tif", as_gray=True) as gray:
        assert gray.shape == (4, 6)
        assert np.all(gray.read(1) == 77)
        assert np.all(gray.read(0) == round(0.299 * 100 + 0.587 * 200 + 0.114 * 50))


def test_single_image_tiff_is_one_frame_named_after_the_file(tmp_path):
    tifffile.imwrite(tmp_path / "cells.tif", label_stack()[0])
    with open_frames(tmp_path / "cells.tif") as source:
        assert len(source) == 1 and source.name(0) == "cells"


@pytest.mark.parametrize("options", [{}, {"compression": "zlib"}, {"imagej": True},
                                     {"metadata": None}, {"metadata": None, "compression": "zlib"}])
@pytest.mark.parametrize("fraction", [0.6, 0.1])
def test_truncated_tiff_gives_its_complete_frames_and_says_so(tmp_path, options, fraction):
    stack = label_stack(n=6, shape=(32, 32))
    path = tmp_path / "stack.tif"
    tifffile.imwrite(path, stack, **options)
    truncated_copy(path, tmp_path / "cut.tif", fraction)
    if fraction == 0.1:  # not even the first frame
        with pytest.raises(FrameReadError, match="cut.tif is truncated"):
            open_frames(tmp_path / "cut.tif")
        return
    with pytest.warns(FrameReadWarning, match=r"cut.tif: .*(ends early|breaks off).*read "
                                              r"(those|frames? 0)"):
        source = open_frames(tmp_path / "cut.tif")
    with source:
        assert 1 <= len(source) < 6
        for index in range(len(source)):
            np.testing.assert_array_equal(source.read(index), stack[index])


@pytest.mark.parametrize("options", [{"metadata": None}, {"metadata": None,
                                                          "compression": "zlib"}])
def test_a_tiff_cut_at_a_page_boundary_is_not_a_shorter_stack(tmp_path, options):
    """Without metadata only the chain of pages says how many frames there are: a cut
    after a whole page was read as a shorter stack without a word."""
    stack = label_stack(n=5, shape=(32, 32))
    path = tmp_path / "stack.tif"
    with tifffile.TiffWriter(path) as tif:
        for frame in stack:
            tif.write(frame, contiguous=False, **options)
    with tifffile.TiffFile(path) as tiff:
        boundary = tiff.pages[3].offset  # the directory of page 3 starts here
    Path(tmp_path / "cut.tif").write_bytes(path.read_bytes()[:boundary])
    with pytest.warns(FrameReadWarning, match="cut.tif: .*frames 0-2"):
        source = open_frames(tmp_path / "cut.tif")
    with source:
        assert len(source) == 3
        np.testing.assert_array_equal(source.read(2), stack[2])


def test_a_stack_of_three_frames_saved_with_tifffile_defaults_is_three_frames(tmp_path):
    """tifffile stores a (3, H, W) array as one planar RGB image unless told otherwise."""
    stack = label_stack(n=3, shape=(16, 24)).astype(np.uint8)
    tifffile.imwrite(tmp_path / "three.tif", stack)
    with pytest.warns(FrameReadWarning, match="three.tif: read its 3 planes .* as 3 grey frames"):
        source = open_frames(tmp_path / "three.tif")
    with source:
        assert len(source) == 3 and source.shape == (16, 24)
        np.testing.assert_array_equal(np.stack(list(source)), stack)
    # an explicit RGB image stays one colour frame, without a warning
    tifffile.imwrite(tmp_path / "rgb.tif", np.moveaxis(stack, 0, -1), photometric="rgb")
    with open_frames(tmp_path / "rgb.tif") as colour:
        assert len(colour) == 1 and colour.shape == (16, 24, 3)


def test_hyperstack_tiff_raises(tmp_path):
    tifffile.imwrite(tmp_path / "tzyx.tif", np.zeros((2, 3, 4, 5), np.uint8), imagej=True,
                     metadata={"axes": "TZYX"})
    with pytest.raises(FrameReadError, match="hyperstack"):
        open_frames(tmp_path / "tzyx.tif")


# ---------------------------------------------------------------- folders and globs

def write_pngs(folder, indices, shape=(6, 7)):
    folder.mkdir(exist_ok=True)
    for index in indices:
        iio.imwrite(folder / f"frame{index}.png", np.full(shape, index, np.uint8))


def test_natural_sort_key():
    names = ["img10.png", "img2.png", "IMG1.png", "img2b.png", "img02a.png"]
    assert sorted(names, key=natural_sort_key) == ["IMG1.png", "img2.png", "img02a.png",
                                                   "img2b.png", "img10.png"]


def test_folder_is_read_in_natural_order_ignoring_other_files(tmp_path):
    write_pngs(tmp_path / "frames", [10, 2, 1, 100])
    (tmp_path / "frames" / "notes.txt").write_text("not a frame")
    (tmp_path / "frames" / ".hidden.png").write_bytes(b"")
    (tmp_path / "frames" / "sub").mkdir()
    with open_frames(tmp_path / "frames") as source:
        assert len(source) == 4 and source.shape == (6, 7)
        assert source.names() == ["frame1", "frame2", "frame10", "frame100"]
        assert [int(frame[0, 0]) for frame in source] == [1, 2, 10, 100]
        assert int(source.read(-1)[0, 0]) == 100


def test_glob_and_path_list(tmp_path):
    write_pngs(tmp_path, [3, 20, 100])
    iio.imwrite(tmp_path / "other1.png", np.zeros((6, 7), np.uint8))
    with open_frames(str(tmp_path / "frame*.png")) as source:
        assert [int(frame[0, 0]) for frame in source] == [3, 20, 100]
    paths = [tmp_path / "frame100.png", tmp_path / "frame3.png"]
    with open_frames(paths) as source:
        assert source.names() == ["frame100", "frame3"]


def test_colour_pngs_as_gray(tmp_path):
    iio.imwrite(tmp_path / "a.png", np.full((5, 5, 3), 90, np.uint8))
    with open_frames(tmp_path / "a.png", as_gray=True) as source:
        assert source.shape == (5, 5) and np.all(source.read(0) == 90)


def test_bad_inputs_raise_clear_errors(tmp_path):
    with pytest.raises(FrameReadError, match="missing.mp4 does not exist"):
        open_frames(tmp_path / "missing.mp4")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FrameReadError, match="empty holds no image files"):
        open_frames(tmp_path / "empty")
    with pytest.raises(FrameReadError, match="matches no image files"):
        open_frames(str(tmp_path / "*.png"))
    (tmp_path / "table.csv").write_text("1,2\n")
    with pytest.raises(FrameReadError, match="table.csv: unsupported extension '.csv'"):
        open_frames(tmp_path / "table.csv")
    write_pngs(tmp_path / "mixed", [1, 2])
    iio.imwrite(tmp_path / "mixed" / "frame3.png", np.zeros((8, 7), np.uint8))
    with pytest.raises(FrameReadError, match="frames differ in size.*frame3.png"):
        open_frames(tmp_path / "mixed")
    (tmp_path / "stacks").mkdir()
    tifffile.imwrite(tmp_path / "stacks" / "a.tif", label_stack())
    with pytest.raises(FrameReadError, match="a.tif holds 5 frames"):
        open_frames(tmp_path / "stacks")
    with pytest.raises(TypeError, match="source must be a path"):
        open_frames(42)


def test_corrupt_png_raises_on_read(tmp_path):
    write_pngs(tmp_path / "frames", [1])
    iio.imwrite(tmp_path / "frames" / "frame2.png",
                np.random.default_rng(0).integers(0, 255, (6, 7), dtype=np.uint8))
    png = tmp_path / "frames" / "frame2.png"
    png.write_bytes(png.read_bytes()[:60])  # header intact, pixel data cut
    with pytest.raises(FrameReadError, match="frame2.png"):
        with open_frames(tmp_path / "frames") as source:
            source.read(1)


# ---------------------------------------------------------------- writers

FRAME_SHAPE = (12, 16)


def predictions(n, n_classes=None, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, (n,) + FRAME_SHAPE).astype(np.int64)
    probabilities = None if n_classes is None else rng.random((n,) + FRAME_SHAPE + (n_classes,))
    return labels, probabilities


def output_path(tmp_path, format):
    return tmp_path / ("labels.zarr" if format == "zarr" else "labels")


@pytest.mark.parametrize("format", ["tiff", "zarr"])
def test_writer_round_trip_and_resume(tmp_path, format):
    labels, probabilities = predictions(4, n_classes=3)
    names = ["a1", "a2", "a10", "b"]
    out = output_path(tmp_path, format)
    with open_writer(out, 4, FRAME_SHAPE, names=names, n_classes=3, format=format) as writer:
        assert writer.completed() == []
        for index in (0, 2):
            writer.write(index, labels[index], probabilities[index])
        assert writer.completed() == [0, 2]
    # a re-run sees the same frames and finishes the rest
    with open_writer(out, 4, FRAME_SHAPE, names=names, n_classes=3, format=format) as writer:
        assert writer.completed() == [0, 2]
        for index in (1, 3):
            writer.write(index, labels[index], probabilities[index])
        assert writer.completed() == [0, 1, 2, 3]
    with read_label_stack(out) as stack:
        assert stack.names() == names
        assert stack.dtype == np.uint8
        np.testing.assert_array_equal(np.stack(list(stack)), labels)
    if format == "tiff":
        stored = tifffile.imread(out / "probabilities" / "a10.tif")
    else:
        import zarr
        stored = zarr.open_group(str(out), mode="r")["probabilities"][2]
    assert stored.dtype == np.float32
    np.testing.assert_allclose(stored, probabilities[2], rtol=1e-6)


@pytest.mark.parametrize("format", ["tiff", "zarr"])
def test_all_zero_frame_counts_as_written(tmp_path, format):
    with open_writer(output_path(tmp_path, format), 2, FRAME_SHAPE, format=format) as writer:
        writer.write(1, np.zeros(FRAME_SHAPE, np.uint8))
        assert writer.completed() == [1]


def test_truncated_or_wrong_tiff_output_is_redone(tmp_path):
    labels, probabilities = predictions(3, n_classes=2)
    out = tmp_path / "labels"
    with open_writer(out, 3, FRAME_SHAPE, n_classes=2) as writer:
        for index in range(3):
            writer.write(index, labels[index], probabilities[index])
    label_file = out / "frame_000000.tif"
    label_file.write_bytes(label_file.read_bytes()[:-20])
    probability_file = out / "probabilities" / "frame_000001.tif"
    probability_file.write_bytes(probability_file.read_bytes()[:1000])
    writer = open_writer(out, 3, FRAME_SHAPE, n_classes=2)
    assert writer.completed() == [2]
    tifffile.imwrite(out / "frame_000002.tif", np.zeros((5, 5), np.uint8))  # wrong shape
    assert writer.completed() == []
    writer.write(0, labels[0], probabilities[0])
    assert writer.completed() == [0]


def test_damaged_zarr_output_is_redone(tmp_path):
    labels, _ = predictions(3)
    out = tmp_path / "labels.zarr"
    with open_writer(out, 3, FRAME_SHAPE, format="zarr") as writer:
        for index in range(3):
            writer.write(index, labels[index])
    chunk = out / "labels" / "c" / "1" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:len(chunk.read_bytes()) // 2])
    (out / "labels" / "c" / "2" / "0" / "0").unlink()
    assert open_writer(out, 3, FRAME_SHAPE, format="zarr").completed() == [0]
    with pytest.raises(FrameReadError, match="cannot be decoded"):
        read_label_stack(out).read(1)


def crash_after_partial_write(error):
    def imwrite(file, data, **options):
        file.write(b"II*\x00partial tiff")
        raise error
    return imwrite


@pytest.mark.parametrize("error", [RuntimeError("simulated crash"), KeyboardInterrupt()])
def test_crash_mid_write_leaves_no_file(tmp_path, monkeypatch, error):
    labels, _ = predictions(2)
    out = tmp_path / "labels"
    writer = open_writer(out, 2, FRAME_SHAPE)
    writer.write(0, labels[0])
    monkeypatch.setattr(tifffile, "imwrite", crash_after_partial_write(error))
    with pytest.raises(type(error)):
        writer.write(1, labels[1])
    assert sorted(os.listdir(out)) == ["frame_000000.tif", "msclassify_frames.json"]
    assert writer.completed() == [0]


@pytest.mark.parametrize("code, fix", [(errno.ENOSPC, "disk is full"),
                                       (errno.EACCES, "not writable")])
def test_disk_full_or_unwritable_gives_clear_error_and_keeps_written_frames(
        tmp_path, monkeypatch, code, fix):
    labels, _ = predictions(2)
    out = tmp_path / "labels"
    writer = open_writer(out, 2, FRAME_SHAPE)
    writer.write(0, labels[0])
    monkeypatch.setattr(tifffile, "imwrite", crash_after_partial_write(
        OSError(code, os.strerror(code))))
    with pytest.raises(FrameWriteError, match=f"frame_000001.tif.*{fix}.*re-run resumes") as info:
        writer.write(1, labels[1])
    assert info.value.errno == code and "\n" not in str(info.value)
    monkeypatch.undo()
    assert sorted(os.listdir(out)) == ["frame_000000.tif", "msclassify_frames.json"]
    assert open_writer(out, 2, FRAME_SHAPE).completed() == [0]


@pytest.mark.parametrize("crashing_array", ["_labels", "_done"])
def test_zarr_crash_mid_frame_is_not_completed(tmp_path, crashing_array):
    labels, _ = predictions(2)
    writer = open_writer(tmp_path / "labels.zarr", 2, FRAME_SHAPE, format="zarr")
    writer.write(0, labels[0])

    class Crashing:
        def __setitem__(self, key, value):
            raise RuntimeError(f"simulated crash writing {crashing_array}")

    real = getattr(writer, crashing_array)
    setattr(writer, crashing_array, Crashing())
    with pytest.raises(RuntimeError, match="simulated crash"):
        writer.write(1, labels[1])
    setattr(writer, crashing_array, real)
    assert writer.completed() == [0]
    assert open_writer(tmp_path / "labels.zarr", 2, FRAME_SHAPE, format="zarr").completed() == [0]


@pytest.mark.parametrize("format", ["tiff", "zarr"])
def test_unwritable_output_path(tmp_path, format):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(FrameWriteError, match="a_file.*(not a folder|not a zarr)"):
        open_writer(blocker / "out", 2, FRAME_SHAPE, format=format)


@pytest.mark.parametrize("format", ["tiff", "zarr"])
def test_output_holding_other_data_is_refused(tmp_path, format):
    out = output_path(tmp_path, format)
    open_writer(out, 3, FRAME_SHAPE, format=format)
    with pytest.raises(FrameWriteError, match="holds a different prediction"):
        open_writer(out, 3, (12, 17), format=format)
    with pytest.raises(FrameWriteError, match="different prediction"):
        open_writer(out, 3, FRAME_SHAPE, n_classes=2, format=format)
    foreign = tmp_path / "my_images"
    write_pngs(foreign, [1])
    with pytest.raises(FrameWriteError, match="my_images"):
        open_writer(foreign, 1, FRAME_SHAPE, format=format)


def test_write_validates_frames(tmp_path):
    writer = open_writer(tmp_path / "out", 2, FRAME_SHAPE, n_classes=2)
    labels, probabilities = predictions(1, n_classes=2)
    with pytest.raises(ValueError, match=r"shape \(12, 15\), expected \(12, 16\)"):
        writer.write(0, labels[0][:, :15], probabilities[0])
    with pytest.raises(TypeError, match="labels must be integers"):
        writer.write(0, labels[0].astype(float), probabilities[0])
    with pytest.raises(ValueError, match="0..300 .* do not fit uint8"):
        writer.write(0, np.full(FRAME_SHAPE, 300) * (np.arange(16) > 0), probabilities[0])
    with pytest.raises(ValueError, match="n_classes"):
        writer.write(0, labels[0])
    with pytest.raises(IndexError):
        writer.write(2, labels[0], probabilities[0])
    with pytest.raises(ValueError, match="format must be"):
        open_writer(tmp_path / "x", 1, FRAME_SHAPE, format="hdf5")
    with pytest.raises(ValueError, match="distinct names"):
        open_writer(tmp_path / "y", 2, FRAME_SHAPE, names=["a", "a"])
    assert writer.completed() == []


# ---------------------------------------------------------------- label stacks

def test_read_label_stack_from_tiff_stack_and_rejects_non_labels(tmp_path):
    stack = label_stack()
    tifffile.imwrite(tmp_path / "gt.tif", stack)
    with read_label_stack(tmp_path / "gt.tif") as labels:
        np.testing.assert_array_equal(labels.read(2), stack[2])
    tifffile.imwrite(tmp_path / "float.tif", stack.astype(np.float32))
    with pytest.raises(FrameReadError, match="not label images"):
        read_label_stack(tmp_path / "float.tif")


@pytest.mark.parametrize("format", ["tiff", "zarr"])
def test_an_unfinished_output_reads_its_finished_frames_and_says_so(tmp_path, format):
    """An output holding 100 of 300 frames was evaluated without a word (TIFF folders) or
    refused (zarr); both now read the finished frames and warn."""
    out = tmp_path / ("p.zarr" if format == "zarr" else "p")
    writer = open_writer(out, 3, FRAME_SHAPE, format=format)
    writer.write(1, np.ones(FRAME_SHAPE, np.uint8))
    with pytest.warns(FrameReadWarning, match="holds 1 of the 3 frames msclassify was to write"):
        source = read_label_stack(out)
    with source:
        assert len(source) == 1 and source.name(0) == "frame_000001"
        assert source.read(0).sum() == FRAME_SHAPE[0] * FRAME_SHAPE[1]
