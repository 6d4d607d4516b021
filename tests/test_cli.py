"""The ``msclassify`` command: train / predict / evaluate / info / demo, resume, errors, signals.

Most commands run in-process through ``main(argv)``; what needs a real process
(exit status, SIGKILL, Ctrl-C, the Dask workers, the demo) runs as
``python -m msclassify.cli``.
"""

import errno
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import imageio.v3 as iio
import numpy as np
import pytest
import tifffile
from conftest import interruptible

import msclassify.io as msio
from msclassify import CEGBClassifier, load_model
from msclassify.cli import main
from msclassify.io import open_writer, read_label_stack, read_training_frames
from msclassify.objects import read_table
from msclassify.pixel import PixelClassifier, batch

REPO = Path(__file__).resolve().parents[1]
SIZE = 64
N_FRAMES = 6


def make_frames(n_frames=N_FRAMES, size=SIZE, seed=0):
    """Dark noisy frames with one bright square each, moving with t."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(10, 40, (n_frames, size, size)).astype(np.uint8)
    for t in range(n_frames):
        start = 4 + (5 * t) % (size // 2)
        frames[t, start:start + size // 4, start:start + size // 4] += 180
    return frames


def make_scribbles(frames):
    """Background strokes along the top rows and fly strokes inside the square of frame 0."""
    labels = np.zeros(frames.shape, np.uint8)
    labels[0, :3, :] = 1
    labels[0, -3:, :] = 1
    labels[0, 6:18, 6:18] = 2
    return labels


def run_cli(*args, timeout=300, **kwargs):
    """``python -m msclassify.cli ARGS`` with the repo importable; returns CompletedProcess."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "msclassify.cli", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def start_cli(*args):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "msclassify.cli", *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)


def error_line(capsys_or_text):
    """The single stderr line of a failed command, checked to be one line without traceback."""
    text = capsys_or_text if isinstance(capsys_or_text, str) else capsys_or_text.readouterr().err
    errors = [line for line in text.replace("\r", "\n").splitlines() if " error: " in line]
    assert "Traceback" not in text
    assert len(errors) == 1, text
    return errors[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli_data")
    frames = make_frames()
    tifffile.imwrite(folder / "frames.tif", frames)
    tifffile.imwrite(folder / "scribbles.tif", make_scribbles(frames))
    return folder, frames


@pytest.fixture(scope="module")
def model(data):
    """A small model trained by `msclassify train` (in-process)."""
    folder, _ = data
    path = folder / "squares.msc"
    status = main(["train", str(folder / "frames.tif"), "--labels", str(folder / "scribbles.tif"),
                   "-o", str(path), "--features", "fast", "--n-estimators", "8",
                   "--random-state", "0", "--quiet"])
    assert status == 0
    return path


def label_files(folder):
    return sorted(path.name for path in Path(folder).glob("frame_*.tif"))


# -- train / info ------------------------------------------------------------------------------

def test_train_shows_the_stages_in_order_an_eta_and_ends_at_100_percent(data, tmp_path, capsys):
    """Issue 24 item 4 on the command line: "training: features", "teacher", "model" in that
    order on the progress bar, an ETA, and the bar at 100 % at the end. Each stage is drawn
    when it starts, however quick (tqdm alone redraws at most every 0.1 s: in the full suite
    this fit showed only "model")."""
    folder, _ = data
    assert main(["train", str(folder / "frames.tif"), "--labels", str(folder / "scribbles.tif"),
                 "-o", str(tmp_path / "m.msc"), "--features", "fast", "--n-estimators", "8",
                 "--random-state", "0"]) == 0
    shown = capsys.readouterr().err.replace("\r", "\n").splitlines()
    stages = [re.match(r"training: (\w+)", line).group(1) for line in shown
              if re.match(r"training: \w+", line)]
    firsts = [stage for k, stage in enumerate(stages) if stage not in stages[:k]]
    assert firsts[0] == "features" and firsts[-1] == "model", firsts
    assert any("ETA" in line for line in shown)
    assert re.search(r"100%.*100/100", shown[-1] if shown[-1].strip() else shown[-2])


def test_train_passes_the_options_to_pixel_classifier_and_trains_every_tree(data, model):
    clf = load_model(model)
    assert isinstance(clf, PixelClassifier)
    params = clf.get_params()
    assert params["n_estimators"] == 8 and params["features"] == "fast"
    assert params["random_state"] == 0
    given = {"n_estimators", "features", "random_state"}
    library = {k: v for k, v in PixelClassifier().get_params().items() if k not in given}
    assert {k: params[k] for k in library} == library     # the rest: the library's defaults
    assert clf.booster_.n_iterations == 8  # the progress bar must not stop training early
    assert clf.classes_.tolist() == [1, 2]
    folder, frames = data
    reference = PixelClassifier(features="fast", n_estimators=8, random_state=0).fit(
        frames[0], make_scribbles(frames)[0])
    np.testing.assert_array_equal(clf.predict(frames[3]), reference.predict(frames[3]))


def test_train_semi_supervised_flag_and_its_options(data, tmp_path):
    folder, frames = data
    path = tmp_path / "semi.msc"
    assert main(["train", str(folder / "frames.tif"), "--labels", str(folder / "scribbles.tif"),
                 "-o", str(path), "--features", "fast", "--n-estimators", "4",
                 "--random-state", "0", "--semi-supervised", "--n-unlabelled", "500",
                 "--n-neighbors", "5", "--quiet"]) == 0
    params = load_model(path).get_params()
    assert params["semi_supervised"] is True
    assert (params["n_unlabelled"], params["n_neighbors"]) == (500, 5)
    reference = PixelClassifier(features="fast", n_estimators=4, random_state=0,
                                semi_supervised=True, n_unlabelled=500, n_neighbors=5).fit(
        frames[0], make_scribbles(frames)[0])
    np.testing.assert_array_equal(load_model(path).predict(frames[3]),
                                  reference.predict(frames[3]))


def test_train_pairs_label_files_with_video_frames_by_name(tmp_path, capsys):
    frames = make_frames(12)
    video = tmp_path / "movie.mp4"
    with av.open(str(video), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width = stream.height = SIZE
        stream.pix_fmt = "yuv420p"
        stream.options = {"qp": "0"}
        for frame in frames:
            rgb = np.repeat(frame[:, :, None], 3, axis=2)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        container.mux(stream.encode())
    labels = tmp_path / "labels"
    labels.mkdir()
    start = 4 + (5 * 8) % (SIZE // 2)  # the square of frame 8 (see make_frames)
    scribble = np.zeros((SIZE, SIZE), np.uint8)
    scribble[:3, :] = scribble[-3:, :] = 1
    scribble[start + 2:start + 14, start + 2:start + 14] = 2
    tifffile.imwrite(labels / "frame_000008.tif", scribble)
    paired, _ = read_training_frames([str(video)], [str(labels)], as_gray=True)
    assert len(paired) == 1
    difference = np.abs(paired[0].astype(int) - frames[8])
    assert difference.max() <= 2  # frame 8, up to the video's luma rounding
    out = tmp_path / "m.msc"
    # grey footage stored as RGB trains on one channel without being told
    assert main(["train", str(video), "--labels", str(labels), "-o", str(out),
                 "--features", "fast", "--n-estimators", "5"]) == 0
    assert "labelled frame(s) (grey)" in capsys.readouterr().out
    clf = load_model(out)
    assert clf.n_channels_ == 1
    prediction = clf.predict(frames[8])
    assert prediction[start + 8, start + 8] == 2 and prediction[1, 1] == 1
    assert main(["train", str(video), "--labels", str(labels), "-o", str(out), "--color",
                 "--features", "fast", "--n-estimators", "5", "--quiet"]) == 0
    assert load_model(out).n_channels_ == 3


def test_train_refuses_labels_that_name_no_frame(tmp_path, data, capsys):
    folder, _ = data
    labels = tmp_path / "labels"
    labels.mkdir()
    tifffile.imwrite(labels / "frame_000099.tif", make_scribbles(make_frames())[0])
    assert main(["train", str(folder / "frames.tif"), "--labels", str(labels),
                 "-o", str(tmp_path / "m.msc")]) == 1
    message = error_line(capsys)
    assert "frame_000099" in message and str(labels) in message


def test_train_with_one_class_only_is_a_one_line_error(tmp_path, data, capsys):
    folder, frames = data
    one_class = make_scribbles(frames)
    one_class[one_class == 2] = 1
    tifffile.imwrite(tmp_path / "one.tif", one_class)
    assert main(["train", str(folder / "frames.tif"), "--labels", str(tmp_path / "one.tif"),
                 "-o", str(tmp_path / "m.msc"), "--quiet"]) == 1
    assert "two classes" in error_line(capsys)


def test_info_reports_classes_features_costs_and_trees(model, data, capsys):
    folder, _ = data
    assert main(["info", str(model), "--image", str(folder / "frames.tif")]) == 0
    out = capsys.readouterr().out
    clf = load_model(model)
    assert "classes:    1, 2" in out
    assert f"trees:      {clf.booster_.n_trees} " in out
    leaves = sum(int(np.count_nonzero(tree["feature"] < 0)) for tree in clf.booster_.trees)
    assert f"{leaves} leaves" in out
    for feature_id in clf.features_used_:
        assert feature_id in out
    assert f"{len(clf.features_used_)} of {len(clf.bank_)} candidates used" in out
    frame = tifffile.imread(folder / "frames.tif")[0]
    cost = clf.prediction_cost(frame)
    assert f"{cost.total / frame.size:.3f} operations per pixel" in out


def test_info_on_a_tabular_model(tmp_path, capsys):
    X = np.arange(80.0).reshape(40, 2)
    path = tmp_path / "tabular.msc"
    CEGBClassifier(n_estimators=3, min_samples_leaf=2).fit(X, X[:, 0] > 30).save(path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "CEGBClassifier" in out and "trees:      3 " in out


# -- predict -----------------------------------------------------------------------------------

def test_predict_writes_one_tiff_per_frame_equal_to_predict(tmp_path, data, model):
    folder, frames = data
    out = tmp_path / "labels"
    assert main(["predict", str(model), str(folder / "frames.tif"), "-o", str(out), "-q"]) == 0
    clf = load_model(model)
    assert label_files(out) == [f"frame_{t:06d}.tif" for t in range(N_FRAMES)]
    for t in range(N_FRAMES):
        stored = tifffile.imread(out / f"frame_{t:06d}.tif")
        assert stored.dtype == np.uint8
        np.testing.assert_array_equal(stored, clf.predict(frames[t]))


def test_predict_resumes_and_redoes_only_missing_or_damaged_frames(tmp_path, data, model, capsys):
    folder, _ = data
    out = tmp_path / "labels"
    argv = ["predict", str(model), str(folder / "frames.tif"), "-o", str(out)]
    assert main(argv + ["-q"]) == 0
    good = out / "frame_000001.tif"
    before = good.stat().st_mtime_ns
    (out / "frame_000002.tif").unlink()
    damaged = out / "frame_000004.tif"
    damaged.write_bytes(damaged.read_bytes()[:40])
    capsys.readouterr()
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert f"resuming: {N_FRAMES - 2} of {N_FRAMES} frames" in captured.out
    assert "wrote 2 frames" in captured.out
    assert good.stat().st_mtime_ns == before
    clf = load_model(model)
    frames = tifffile.imread(folder / "frames.tif")
    for t in (2, 4):
        np.testing.assert_array_equal(tifffile.imread(out / f"frame_{t:06d}.tif"),
                                      clf.predict(frames[t]))
    assert main(argv) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_predict_zarr_with_probabilities_and_a_frame_selection(tmp_path, data, model):
    folder, frames = data
    out = tmp_path / "labels.zarr"
    assert main(["predict", str(model), str(folder / "frames.tif"), "-o", str(out),
                 "--format", "zarr", "--probabilities", "--frames", "1:6:2", "-q"]) == 0
    import zarr
    root = zarr.open_group(str(out), mode="r")
    assert root["labels"].shape == (3, SIZE, SIZE)
    assert root["probabilities"].shape == (3, SIZE, SIZE, 2)
    clf = load_model(model)
    for position, t in enumerate((1, 3, 5)):
        probabilities = root["probabilities"][position]
        np.testing.assert_allclose(probabilities, clf.predict_proba(frames[t]), rtol=1e-6)
        np.testing.assert_array_equal(root["labels"][position],
                                      clf.classes_[np.argmax(probabilities, axis=2)])
    assert read_label_stack(out).names() == ["frame_000001", "frame_000003", "frame_000005"]


def test_predict_exports_masks_objects_and_probabilities(tmp_path, data, model, capsys):
    """--export: what labs need instead of class values 1 and 2 (black in Fiji)."""
    folder, frames = data
    clf = load_model(model)
    source = str(folder / "frames.tif")
    assert main(["predict", str(model), source, "-o", str(tmp_path / "mask"),
                 "--export", "mask"]) == 0
    assert "exporting class 2 (the model's second class" in capsys.readouterr().out
    mask = tifffile.imread(tmp_path / "mask" / "frame_000003.tif")
    assert mask.dtype == np.uint8
    np.testing.assert_array_equal(mask, np.where(clf.predict(frames[3]) == 2, 255, 0))

    assert main(["predict", str(model), source, "-o", str(tmp_path / "objects"),
                 "--export", "instances", "--class", "2", "--min-size", "10", "-q"]) == 0
    objects = tifffile.imread(tmp_path / "objects" / "frame_000001.tif")
    expected, n_objects = ndimage_label_8(clf.predict(frames[1]) == 2, min_size=10)
    assert objects.dtype == np.uint16 and n_objects >= 1
    np.testing.assert_array_equal(objects, expected)

    stack = tmp_path / "fly_probability.tif"
    assert main(["predict", str(model), source, "-o", str(stack), "--export", "probability",
                 "--format", "tiff-stack", "--frames", "2:5", "-q"]) == 0
    probability = tifffile.imread(stack)
    assert probability.shape == (3, SIZE, SIZE) and probability.dtype == np.float32
    for position, t in enumerate(range(2, 5)):
        np.testing.assert_allclose(probability[position], clf.predict_proba(frames[t])[..., 1],
                                   rtol=1e-6)
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []


def ndimage_label_8(mask, min_size):
    """Reference: 8-connected objects with at least ``min_size`` pixels, numbered in scan order."""
    from scipy import ndimage
    objects, n = ndimage.label(mask, structure=np.ones((3, 3)))
    sizes = np.bincount(objects.ravel())
    keep = np.flatnonzero(sizes >= min_size)
    keep = keep[keep > 0]
    renumbered = np.zeros_like(objects)
    for new, old in enumerate(keep, start=1):
        renumbered[objects == old] = new
    return renumbered, keep.size


@pytest.mark.parametrize("extra, message", [
    (["--export", "instances", "--class", "5"], "class 5 is not one the model predicts (1, 2)"),
    (["--export", "mask", "--probabilities"], "all class probabilities are stored only next to"),
    (["--export", "instances", "--min-size", "-1"], "min_size must be an integer >= 0"),
])
def test_predict_export_errors_are_one_line(tmp_path, data, model, capsys, extra, message):
    folder, _ = data
    assert main(["predict", str(model), str(folder / "frames.tif"), "-o", str(tmp_path / "o"),
                 "-q", *extra]) != 0
    assert message in error_line(capsys)
    assert not (tmp_path / "o").exists()


def test_an_existing_tiff_stack_is_not_overwritten(tmp_path, data, model, capsys):
    folder, _ = data
    stack = tmp_path / "masks.tif"
    stack.write_bytes(b"keep me")
    assert main(["predict", str(model), str(folder / "frames.tif"), "-o", str(stack),
                 "--export", "mask", "--format", "tiff-stack", "-q"]) != 0
    assert "already exists" in error_line(capsys)
    assert stack.read_bytes() == b"keep me"


@pytest.mark.parametrize("output, message", [
    ("labels.tif", "names one TIFF file, but per-frame output is a folder"),
    ("labels.h5", "an HDF5 file holds one large image predicted chunk by chunk"),
    ("labels.h5:/seg", "an HDF5 file holds one large image predicted chunk by chunk"),
])
def test_per_frame_output_named_as_one_file_is_refused(tmp_path, data, model, capsys, output,
                                                       message):
    """-o labels.tif / labels.h5 without --chunks made a folder of that name full of TIFFs."""
    folder, _ = data
    target = tmp_path / output
    assert main(["predict", str(model), str(folder / "frames.tif"), "-o", str(target),
                 "-q"]) != 0
    assert message in error_line(capsys)
    assert not (tmp_path / output.split(":")[0]).exists()


def test_predict_reads_folders_and_globs_of_images(tmp_path, data, model):
    _, frames = data
    images = tmp_path / "images"
    images.mkdir()
    for t in range(3):
        iio.imwrite(images / f"img{t + 8}.png", frames[t])  # img8, img9, img10: natural order
    clf = load_model(model)
    for source, out in ((images, tmp_path / "a"), (str(images / "img*.png"), tmp_path / "b")):
        assert main(["predict", str(model), str(source), "-o", str(out), "-q"]) == 0
        assert label_files(out) == []  # frames keep their file names
        for t in range(3):
            np.testing.assert_array_equal(tifffile.imread(out / f"img{t + 8}.tif"),
                                          clf.predict(frames[t]))


@pytest.mark.parametrize("text, expected", [("2:4", [2, 3]), ("::2", [0, 2, 4]), ("-1", [5]),
                                            ("3", [3]), ("4:", [4, 5])])
def test_frames_option_follows_python_slices(tmp_path, data, model, text, expected):
    folder, _ = data
    out = tmp_path / "out"
    assert main(["predict", str(model), str(folder / "frames.tif"), "-o", str(out), "-q",
                 "--frames", text]) == 0
    assert label_files(out) == [f"frame_{t:06d}.tif" for t in expected]


# -- evaluate ----------------------------------------------------------------------------------

def test_evaluate_prints_per_frame_and_total_seg(tmp_path, capsys):
    reference = np.zeros((2, 8, 8), np.uint16)
    reference[0, 0:2, 0:2] = 1          # 4 px
    reference[0, 5:7, 5:7] = 2          # 4 px
    reference[1, 3:5, 3:5] = 7          # 4 px
    prediction = np.ones((2, 8, 8), np.uint8)   # class 1 = background, 2 = object
    prediction[0, 0:2, 0:2] = 2
    prediction[0, 1, 1] = 1             # 3 of object 1's pixels ...
    prediction[0, 2, 0] = 2             # ... plus one outside: J = 3 / (4 + 4 - 3) = 0.6
    prediction[0, 5, 5:7] = 2           # half of object 2: not a match, J = 0
    prediction[1, 3:5, 3:5] = 2         # exact: J = 1
    tifffile.imwrite(tmp_path / "gt.tif", reference)
    tifffile.imwrite(tmp_path / "pred.tif", prediction)
    assert main(["evaluate", str(tmp_path / "pred.tif"), str(tmp_path / "gt.tif")]) == 0
    out = capsys.readouterr().out
    assert "classes [2]" in out and "class 1, the most frequent, is background" in out
    assert re.search(r"frame_000000\s+2\s+0\.3000", out)
    assert re.search(r"frame_000001\s+1\s+1\.0000", out)
    assert f"SEG {1.6 / 3:.4f} over 3 objects in 2 frames" in out
    # as instance labels, value 2 of frame 0 is one object of 6 px, covering 3 of object 1's
    # 4 px (J = 3 / 7) and 2 of object 2's (no match); frame 1 is exact
    assert main(["evaluate", str(tmp_path / "pred.tif"), str(tmp_path / "gt.tif"),
                 "--instances", "-q"]) == 0
    assert f"SEG {(3 / 7 + 0 + 1) / 3:.4f} over 3 objects" in capsys.readouterr().out


def test_evaluate_pairs_a_predicted_selection_with_the_reference_by_name(tmp_path, data, model,
                                                                         capsys):
    folder, frames = data
    masks = (frames > 100).astype(np.uint16)
    tifffile.imwrite(tmp_path / "masks.tif", masks)
    out = tmp_path / "pred"
    assert main(["predict", str(model), str(folder / "frames.tif"), "-o", str(out), "-q",
                 "--frames", "3:5"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(out), str(tmp_path / "masks.tif"), "--foreground", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["frame_000003", "frame_000004"]
    assert lines[-1].startswith("SEG ") and "in 2 frames" in lines[-1]
    assert float(lines[-1].split()[1]) > 0.8  # the squares are easy


def test_evaluate_refuses_frames_that_do_not_correspond(tmp_path, capsys):
    tifffile.imwrite(tmp_path / "a.tif", np.zeros((5, 8, 8), np.uint8))
    tifffile.imwrite(tmp_path / "b.tif", np.zeros((2, 8, 8), np.uint8))
    tifffile.imwrite(tmp_path / "c.tif", np.zeros((5, 8, 9), np.uint8))
    assert main(["evaluate", str(tmp_path / "a.tif"), str(tmp_path / "b.tif")]) == 1
    assert "names no reference frame" in error_line(capsys)
    assert main(["evaluate", str(tmp_path / "a.tif"), str(tmp_path / "c.tif")]) == 1
    assert "must match" in error_line(capsys)


# -- bad input: one line naming the file and the fix, exit status 1 ----------------------------

def test_missing_and_corrupt_inputs(tmp_path, data, model, capsys):
    folder, _ = data
    garbage = tmp_path / "broken.mp4"
    garbage.write_bytes(os.urandom(5000))
    truncated = tmp_path / "truncated.tif"
    truncated.write_bytes((folder / "frames.tif").read_bytes()[:9000])
    cases = [(tmp_path / "missing.mp4", "does not exist"),
             (garbage, "corrupt")]
    for source, reason in cases:
        assert main(["predict", str(model), str(source), "-o", str(tmp_path / "out")]) == 1
        message = error_line(capsys)
        assert str(source) in message and reason in message
    assert not (tmp_path / "out").exists()
    # a stack that ends early: its complete frames, and a warning naming them
    assert main(["predict", str(model), str(truncated), "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    warning = [line for line in err.splitlines() if "warning:" in line]
    assert len(warning) == 1 and str(truncated) in warning[0]
    assert "declares 6 frames but only frames 0-1 are complete" in warning[0]
    assert label_files(tmp_path / "out") == ["frame_000000.tif", "frame_000001.tif"]


def test_a_model_for_other_channels_is_refused_before_anything_is_written(tmp_path, data, capsys):
    _, frames = data
    colour = np.stack([frames[0], frames[0] // 2, frames[0]], axis=2)
    rgb_model = tmp_path / "rgb.msc"
    PixelClassifier(features="fast", n_estimators=2).fit(colour, make_scribbles(frames)[0]).save(
        rgb_model)
    tifffile.imwrite(tmp_path / "grey.tif", frames)
    assert main(["predict", str(rgb_model), str(tmp_path / "grey.tif"), "-o",
                 str(tmp_path / "out")]) == 1
    message = error_line(capsys)
    assert "3-channel" in message and "1-channel" in message and str(rgb_model) in message
    assert not (tmp_path / "out").exists()


def test_frames_of_varying_size_are_refused(tmp_path, model, capsys):
    images = tmp_path / "images"
    images.mkdir()
    iio.imwrite(images / "a.png", np.zeros((SIZE, SIZE), np.uint8))
    iio.imwrite(images / "b.png", np.zeros((SIZE, SIZE + 8), np.uint8))
    assert main(["predict", str(model), str(images), "-o", str(tmp_path / "out")]) == 1
    message = error_line(capsys)
    assert "b.png" in message and "same size" in message


def test_missing_corrupt_and_tabular_models(tmp_path, data, capsys):
    folder, _ = data
    corrupt = tmp_path / "corrupt.msc"
    corrupt.write_bytes(b"PK\x03\x04 not really a zip")
    tabular = tmp_path / "tabular.msc"
    CEGBClassifier(n_estimators=2, min_samples_leaf=2).fit(
        np.arange(40.0)[:, None], np.arange(40) > 20).save(tabular)
    for model_path, reason in ((tmp_path / "none.msc", "does not exist"),
                               (corrupt, "corrupt"), (tabular, "not a pixel classifier")):
        assert main(["predict", str(model_path), str(folder / "frames.tif"), "-o",
                     str(tmp_path / "out")]) == 1
        message = error_line(capsys)
        assert str(model_path) in message and reason in message


def test_an_unwritable_output_folder(tmp_path, data, model, capsys):
    folder, _ = data
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    assert main(["predict", str(model), str(folder / "frames.tif"), "-o",
                 str(blocker / "labels")]) == 1
    message = error_line(capsys)
    assert str(blocker) in message and "not a folder" in message
    if os.geteuid() == 0:
        return  # root writes into read-only folders; the permission case needs a normal user
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["predict", str(model), str(folder / "frames.tif"), "-o",
                 str(locked / "labels")]) == 1
    assert "not writable" in error_line(capsys)


def test_a_full_disk_stops_with_one_line_and_keeps_the_frames_written(tmp_path, data, model,
                                                                      capsys, monkeypatch):
    folder, _ = data
    out = tmp_path / "labels"
    real_imwrite = tifffile.imwrite
    calls = []

    def imwrite(file, data, **kwargs):
        calls.append(1)
        if len(calls) > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_imwrite(file, data, **kwargs)

    monkeypatch.setattr(tifffile, "imwrite", imwrite)
    argv = ["predict", str(model), str(folder / "frames.tif"), "-o", str(out), "-q"]
    assert main(argv) == 1
    message = error_line(capsys)
    assert "frame_000002.tif" in message and "disk is full" in message and "re-run" in message
    assert label_files(out) == ["frame_000000.tif", "frame_000001.tif"]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary left over
    monkeypatch.setattr(tifffile, "imwrite", real_imwrite)
    assert main(argv) == 0
    assert len(label_files(out)) == N_FRAMES


def test_an_unreadable_frame_midway_stops_with_one_line_and_keeps_earlier_frames(
        tmp_path, data, model, capsys, monkeypatch):
    folder, _ = data
    with msio.open_frames(folder / "frames.tif") as frames:
        tiff_source = type(frames)  # the TIFF reader
    real_read = tiff_source._read

    def read(self, index):
        if index == 3:
            raise msio.FrameReadError(f"frame 3 of TIFF {self.path} cannot be decoded")
        return real_read(self, index)

    monkeypatch.setattr(tiff_source, "_read", read)
    out = tmp_path / "labels"
    assert main(["predict", str(model), str(folder / "frames.tif"), "-o", str(out), "-q"]) == 1
    message = error_line(capsys)
    assert "frame 3 of TIFF" in message and "the 3 frames written" in message
    assert "re-run resumes" in message
    assert label_files(out) == [f"frame_{t:06d}.tif" for t in range(3)]


def test_usage_errors_exit_with_status_2(capsys):
    assert main([]) == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "model.msc"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "m.msc", "in.tif", "-o", "out", "--workers", "2",
              "--scheduler", "tcp://127.0.0.1:8786"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_bad_frame_selection(tmp_path, data, model, capsys):
    folder, _ = data
    for text, reason in (("10:20", "selects no frame"), ("a:b", "START:STOP"),
                         ("0:4:0", "STEP")):
        assert main(["predict", str(model), str(folder / "frames.tif"), "-o",
                     str(tmp_path / "out"), "--frames", text]) == 1
        assert reason in error_line(capsys)


# -- real processes: exit status, SIGKILL, Ctrl-C, Dask workers, demo ---------------------------

@pytest.fixture(scope="module")
def long_input(tmp_path_factory):
    """Enough frames that a run is still going when the test interrupts it."""
    folder = tmp_path_factory.mktemp("long")
    frames = make_frames(100, size=256, seed=1)
    tifffile.imwrite(folder / "long.tif", frames)
    return folder / "long.tif", frames


def wait_for_frames(process, out, count, pattern="frame_*.tif", timeout=120):
    deadline = time.monotonic() + timeout
    while len(list(Path(out).glob(pattern))) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no frames written in time"
        time.sleep(0.01)


def check_complete(out, frames, clf, expected_count):
    assert label_files(out) == [f"frame_{t:06d}.tif" for t in range(expected_count)]
    for t in range(expected_count):
        np.testing.assert_array_equal(tifffile.imread(out / f"frame_{t:06d}.tif"),
                                      clf.predict(frames[t]))


def test_error_exit_status_and_message_of_the_real_command(tmp_path, model):
    result = run_cli("predict", model, tmp_path / "missing.tif", "-o", tmp_path / "out")
    assert result.returncode == 1
    assert error_line(result.stderr).startswith("msclassify predict: error: ")


@pytest.mark.parametrize("output_format", ["tif", "zarr"])
def test_a_run_killed_with_sigkill_resumes_to_a_complete_output(tmp_path, model, long_input,
                                                                capsys, output_format):
    source, frames = long_input
    out = tmp_path / ("labels.zarr" if output_format == "zarr" else "labels")
    command = ["predict", str(model), str(source), "-o", str(out), "--format", output_format]
    process = start_cli(*command)
    # a frame's label chunk (zarr) or file (tif) appears once it is written
    wait_for_frames(process, out, 3, "labels/c/*" if output_format == "zarr" else "frame_*.tif")
    process.kill()
    process.communicate()
    assert process.returncode == -signal.SIGKILL
    writer = prediction_writer(out, model, source, frames, msio_format(output_format))
    done = writer.completed()
    assert 2 <= len(done) < len(frames), "the run finished before it was killed"
    if output_format == "tif":  # every file there is complete: none is half-written
        assert label_files(out) == [f"frame_{t:06d}.tif" for t in done]
    clf = load_model(model)
    for t in done:
        np.testing.assert_array_equal(read_label_stack_frame(out, output_format, t),
                                      clf.predict(frames[t]))
    assert main(command) == 0  # the same command again
    assert f"resuming: {len(done)} of {len(frames)}" in capsys.readouterr().out
    labels = read_label_stack(out)
    assert len(labels) == len(frames)
    for t in range(len(frames)):
        np.testing.assert_array_equal(labels.read(t), clf.predict(frames[t]))


def prediction_writer(out, model, source, frames, format="tiff"):
    """The writer `msclassify predict MODEL SOURCE -o OUT` opens: the output's record of
    what made it is the one the library computes."""
    with msio.open_frames(source, as_gray=True) as input_frames:
        provenance = batch.prediction_provenance(model, input_frames, range(len(frames)), False)
    return open_writer(out, len(frames), frames.shape[1:], format=format, provenance=provenance)


def msio_format(output_format):
    return "zarr" if output_format == "zarr" else "tiff"


def read_label_stack_frame(out, output_format, t):
    if output_format == "zarr":
        import zarr
        return zarr.open_group(str(out), mode="r")["labels"][t]
    return tifffile.imread(out / f"frame_{t:06d}.tif")


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path, model, long_input):
    source, frames = long_input
    out = tmp_path / "labels"
    process = start_cli("predict", model, source, "-o", out)
    wait_for_frames(process, out, 2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130
    assert "Traceback" not in stderr
    last = stderr.replace("\r", "\n").strip().splitlines()[-1]
    n_done = int(re.search(r"interrupted; (\d+) of 100 frames are complete", last).group(1))
    assert "Run the same command again to resume" in last
    assert n_done == len(label_files(out)) < len(frames)
    assert prediction_writer(out, model, source, frames).completed() == list(range(n_done))


def test_predict_on_a_local_dask_cluster_equals_the_local_run(tmp_path, data, model):
    folder, frames = data
    out = tmp_path / "labels.zarr"
    result = run_cli("predict", model, folder / "frames.tif", "-o", out, "--format", "zarr",
                     "--workers", "2", "--chunk-size", "2")
    assert result.returncode == 0, result.stderr
    assert f"wrote {N_FRAMES} frames" in result.stdout
    clf = load_model(model)
    labels = read_label_stack(out)
    for t in range(N_FRAMES):
        np.testing.assert_array_equal(labels.read(t), clf.predict(frames[t]))


def test_predict_on_an_existing_cluster_given_by_its_scheduler_address(tmp_path, data, model):
    distributed = pytest.importorskip("distributed")
    folder, frames = data
    out = tmp_path / "labels"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster:
        assert main(["predict", str(model), str(folder / "frames.tif"), "-o", str(out), "-q",
                     "--scheduler", cluster.scheduler_address]) == 0
        with distributed.Client(cluster) as client:  # the cluster lives on, without the model
            plugins = client.run(lambda dask_worker: list(dask_worker.plugins))
            assert not [name for names in plugins.values() for name in names
                        if name.startswith("msclassify")]
    check_complete(out, frames, load_model(model), N_FRAMES)


@pytest.mark.slow
def test_demo_trains_predicts_and_reports(tmp_path):
    out = tmp_path / "demo"
    result = run_cli("demo", "-o", out, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    # its training bar shows the stage and the ETA, as `msclassify train`'s (it counted trees)
    assert "training: features" in result.stderr and "training: model" in result.stderr
    assert "ETA" in result.stderr and "tree/s" not in result.stderr
    seg = float(re.search(r"SEG vs the exact masks: ([0-9.]+) over 24 flies", result.stdout)
                .group(1))
    assert seg > 0.75  # measured 0.847 with the defaults
    assert float(re.search(r"([0-9.]+) frames/s", result.stdout).group(1)) > 0
    assert re.search(r"evaluation cost: [0-9.]+ operations per pixel", result.stdout)
    overlay = iio.imread(out / "overlay.png")
    assert overlay.shape == (1024, 1024, 3)
    green = (overlay[..., 1] > 150) & (overlay[..., 0] < 120)
    assert 0.002 < green.mean() < 0.05  # flies cover a few percent of the arena
    assert iio.imread(out / "cost_map.png").ndim == 3
    assert isinstance(load_model(out / "model.msc"), PixelClassifier)
    # the four sample flies, measured and tracked through the 8 frames
    assert re.search(r"objects\.csv \(32 objects of at least 500 px in 8 frames, 4 tracks\)",
                     result.stdout), result.stdout
    table = read_table(out / "objects.csv")
    assert table.groupby("track")["frame"].apply(list).tolist() == [list(range(8))] * 4
    assert iio.imread(out / "tracks.png").ndim == 3
