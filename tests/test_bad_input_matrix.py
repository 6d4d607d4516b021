"""Issue 13, kept as tests: every cell of the bad-input and fault matrix, one row each.

Each row is named after its cell. Command-line rows run ``msclassify`` (in-process
through ``main``; in a real process where a signal, a pipe or a hang is the point)
and assert the exit status, what the one line says and that no traceback is
printed; API rows assert the exception type and message. Cells marked *silent*
used to give a wrong result with exit 0; now they give a clear error or the
correct result, and the row checks which.
"""

import errno
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import av
import numpy as np
import pytest
import tifffile
from conftest import interruptible

from msclassify import load_model
from msclassify.baselines import BudgetRFClassifier, CSTCClassifier
from msclassify.cli import main
from msclassify.io import FrameReadWarning, FrameWriteError, open_frames, open_writer
from msclassify.modelfile import ModelFileError, read_model
from msclassify.pixel import PixelClassifier

REPO = Path(__file__).resolve().parents[1]
SIZE, N_FRAMES = 64, 6


# -- data -----------------------------------------------------------------------------------

def make_frames(n_frames=N_FRAMES, seed=0):
    """Dark noisy uint8 frames with one bright square each, moving with t."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(10, 40, (n_frames, SIZE, SIZE)).astype(np.uint8)
    for t in range(n_frames):
        start = 4 + (5 * t + 7 * seed) % (SIZE // 2)
        frames[t, start:start + SIZE // 4, start:start + SIZE // 4] += 180
    return frames


def make_scribbles(frames):
    labels = np.zeros(frames.shape, np.uint8)
    labels[0, :3, :] = labels[0, -3:, :] = 1
    labels[0, 6:18, 6:18] = 2
    return labels


def write_video(path, frames):
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = SIZE, SIZE, "yuv420p"
        stream.options = {"crf": "0"}
        for frame in frames:
            rgb = np.repeat(frame[..., None], 3, axis=2)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        container.mux(stream.encode())


def svmlight(path, X, y):
    with open(path, "w") as fh:
        for row, label in zip(X, y):
            fh.write(f"{label} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(row)) + "\n")
    return path


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    """Inputs, two pixel models, tabular data and models shared by the rows."""
    folder = tmp_path_factory.mktemp("matrix")
    frames, other = make_frames(), make_frames(seed=1)
    scribbles = make_scribbles(frames)
    paths = {"folder": folder}
    for name, stack in (("frames", frames), ("other", other), ("scribbles", scribbles),
                        ("frames_f32", frames.astype(np.float32)),
                        ("frames_unit", frames.astype(np.float32) / 255)):
        paths[name] = folder / f"{name}.tif"
        tifffile.imwrite(paths[name], stack, photometric="minisblack")
    paths["video"], paths["video2"] = folder / "clip.mp4", folder / "clip2.mp4"
    write_video(paths["video"], frames)
    write_video(paths["video2"], other)
    masks = np.zeros(frames.shape, np.uint16)
    for t in range(N_FRAMES):
        start = 4 + (5 * t) % (SIZE // 2)
        masks[t, start:start + SIZE // 4, start:start + SIZE // 4] = 1
    paths["masks"] = folder / "masks.tif"
    tifffile.imwrite(paths["masks"], masks, photometric="minisblack")
    for name, seed in (("model_a", 0), ("model_b", 1)):
        paths[name] = folder / f"{name}.msc"
        PixelClassifier(features="fast", n_estimators=6, random_state=seed,
                        colsample=0.7).fit(frames[0], scribbles[0]).save(paths[name])
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 300))
    paths["wide"] = svmlight(folder / "wide.train", X, (X[:, 250] + X[:, 10] > 0).astype(int))
    X = rng.normal(size=(200, 50))
    paths["narrow"] = svmlight(folder / "narrow.train", X, (X[:, 10] > 0).astype(int))
    assert main(["tabular", "train", str(paths["wide"]), "-o", str(folder / "wide.msc"),
                 "--trees", "20", "--random-state", "0", "-q"]) == 0
    paths["wide_model"] = folder / "wide.msc"
    Xs, ys = X[:, :6], (X[:, 0] > 0).astype(int)
    paths["budgetrf"] = folder / "budgetrf.msc"
    BudgetRFClassifier(n_estimators=3, random_state=0).fit(Xs, ys).save(paths["budgetrf"])
    paths["cstc"] = folder / "cstc.msc"
    CSTCClassifier(max_depth=1, feature_map="identity").fit(Xs, ys).save(paths["cstc"])
    return paths, frames


# -- helpers --------------------------------------------------------------------------------

def cli(capsys, *args):
    """Run ``msclassify ARGS`` in-process: (status, stdout, stderr)."""
    status = main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


def one_error(err):
    """The single error line of a failed command (no other error lines, no traceback)."""
    lines = [line for line in err.replace("\r", "\n").splitlines() if " error: " in line]
    assert len(lines) == 1, err
    return lines[0]


def warnings_of(err):
    return [line for line in err.replace("\r", "\n").splitlines() if ": warning: " in line]


def run_cli(*args, timeout=120, **kwargs):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "msclassify.cli", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def rewrite_model(source, target, header=None, arrays=None, raw=None):
    """Copy a model file with its model.json (``header(dict)``), arrays (``arrays(dict)``)
    or raw entries (``raw(dict name -> bytes)``) changed; the zip stays valid."""
    with zipfile.ZipFile(source) as zf:
        entries = {name: zf.read(name) for name in zf.namelist()}
    if header is not None:
        document = json.loads(entries["model.json"])
        document = header(document)
        entries["model.json"] = json.dumps(document).encode()
    if arrays is not None:
        loaded = {name[:-4]: np.load(io.BytesIO(data)) for name, data in entries.items()
                  if name.endswith(".npy")}
        arrays(loaded)
        for name, array in loaded.items():
            buffer = io.BytesIO()
            np.save(buffer, array)
            entries[f"{name}.npy"] = buffer.getvalue()
    if raw is not None:
        raw(entries)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return target


def labels_in(folder):
    return sorted(path.name for path in Path(folder).glob("frame_*.tif"))


def read_labels(folder):
    return np.stack([tifffile.imread(Path(folder) / name) for name in labels_in(folder)])


# -- 1. silent wrong results ----------------------------------------------------------------

def test_resume_refuses_an_output_of_another_model(fx, tmp_path, capsys):
    paths, _ = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["video"], "-o", out, "-q")[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    status, _, err = cli(capsys, "predict", paths["model_b"], paths["video"], "-o", out)
    line = one_error(err)
    assert status == 1 and "was made by something else: model: model_a.msc" in line
    assert "model_b.msc" in line and "--overwrite" in line
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    # --overwrite starts over with the other model
    status, _, _ = cli(capsys, "predict", paths["model_b"], paths["video"], "-o", out, "-q",
                       "--overwrite")
    assert status == 0
    model_b = load_model(paths["model_b"])
    with open_frames(paths["video"], as_gray=True) as video:
        expected = np.stack([model_b.predict(frame) for frame in video])
    np.testing.assert_array_equal(read_labels(out), expected)


def test_resume_refuses_an_output_of_another_video(fx, tmp_path, capsys):
    paths, _ = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["video"], "-o", out, "-q")[0] == 0
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["video2"], "-o", out)
    assert status == 1 and "made by something else: input: clip.mp4" in one_error(err)


def test_resume_refuses_an_output_of_another_export(fx, tmp_path, capsys):
    paths, _ = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["video"], "-o", out, "-q",
               "--export", "mask", "--class", "2")[0] == 0
    for args in ((), ("--export", "mask", "--class", "1"),
                 ("--export", "instances", "--class", "2")):
        status, _, err = cli(capsys, "predict", paths["model_a"], paths["video"], "-o", out, *args)
        assert status == 1 and "made by something else: export:" in one_error(err)
    status, text, _ = cli(capsys, "predict", paths["model_a"], paths["video"], "-o", out,
                          "--export", "mask", "--class", "2")
    assert status == 0


def test_a_half_finished_output_is_not_finished_by_another_model(fx, tmp_path, capsys):
    paths, _ = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out, "-q")[0] == 0
    for name in labels_in(out)[3:]:
        (out / name).unlink()  # as if the run had been killed after 3 frames
    status, _, err = cli(capsys, "predict", paths["model_b"], paths["frames"], "-o", out)
    assert status == 1 and "resuming would mix the two" in one_error(err)
    assert len(labels_in(out)) == 3
    # the same command resumes
    status, out_text, _ = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out)
    assert status == 0 and "resuming: 3 of 6 frames" in out_text


@pytest.mark.parametrize("option, message", [
    (["--frames", "0:4"], "frames: [0, 6, 1] there, [0, 4, 1] now"),
    (["--frames", "0:6:2"], "frames: [0, 6, 1] there, [0, 6, 2] now"),
    (["--probabilities"], "probabilities: false there, true now")])
def test_resume_refuses_other_pixel_changing_options(fx, tmp_path, capsys, option, message):
    paths, _ = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out, "-q")[0] == 0
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out, *option)
    assert status == 1 and message in one_error(err)


def test_resume_refuses_a_same_size_selection_of_other_frames(fx, tmp_path, capsys):
    paths, _ = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out, "-q",
               "--frames", "0:3")[0] == 0
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out,
                         "--frames", "3:6")
    assert status == 1 and "frames: [0, 3, 1] there, [3, 6, 1] now" in one_error(err)


def test_a_moved_input_of_the_same_content_resumes(fx, tmp_path, capsys):
    paths, _ = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out, "-q")[0] == 0
    moved = tmp_path / "moved.tif"
    moved.write_bytes(paths["frames"].read_bytes())
    status, text, _ = cli(capsys, "predict", paths["model_a"], moved, "-o", out)
    assert status == 0 and "already in" in text


def test_overwrite_never_deletes_what_msclassify_did_not_write(fx, tmp_path, capsys):
    paths, _ = fx
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out,
                         "--overwrite")
    assert status == 1 and "files msclassify did not write" in one_error(err)
    assert (out / "notes.txt").read_text() == "keep me"


def test_float32_frames_of_0_to_255_give_the_uint8_result(fx, tmp_path, capsys):
    paths, frames = fx
    for name in ("frames", "frames_f32"):
        assert cli(capsys, "predict", paths["model_a"], paths[name], "-o", tmp_path / name,
                   "-q")[0] == 0
    np.testing.assert_array_equal(read_labels(tmp_path / "frames_f32"),
                                  read_labels(tmp_path / "frames"))
    model = load_model(paths["model_a"])
    for frame in frames:  # the API agrees exactly, also for other integer types
        expected = model.predict(frame)
        np.testing.assert_array_equal(model.predict(frame.astype(np.float32)), expected)
        np.testing.assert_array_equal(model.predict(frame.astype(np.int64)), expected)
        np.testing.assert_array_equal(model.predict_proba(frame.astype(np.float64)),
                                      model.predict_proba(frame))


def test_float_frames_within_0_1_are_refused_for_a_uint8_model(fx, tmp_path, capsys):
    paths, frames = fx
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames_unit"], "-o",
                         tmp_path / "out")
    line = one_error(err)
    assert status == 1 and "float32 values" in line and "within 0..1" in line
    assert "trained on uint8 frames" in line and "(frame * 255).astype(np.uint8)" in line
    with pytest.raises(ValueError, match="within 0..1.*trained on uint8"):
        load_model(paths["model_a"]).predict(frames[0] / 255.0)


def test_sixteen_bit_frames_are_refused_for_a_uint8_model(fx):
    paths, frames = fx
    with pytest.raises(ValueError, match="uint16 values .*far outside the 0..255 of the uint8"):
        load_model(paths["model_a"]).predict(frames[0].astype(np.uint16) * 257)


def test_a_model_saved_before_intensities_were_recorded_keeps_the_old_rule(fx, tmp_path):
    paths, frames = fx
    old = rewrite_model(paths["model_a"], tmp_path / "old.msc",
                        header=lambda d: d["meta"].pop("intensity") and d)
    model = load_model(old)
    assert model.intensity_ is None
    np.testing.assert_array_equal(model.predict(frames[2]),
                                  load_model(paths["model_a"]).predict(frames[2]))


def test_a_tiff_cut_at_a_page_boundary_warns_which_frames_were_read(fx, tmp_path, capsys):
    paths, frames = fx
    stack = tmp_path / "stack.tif"
    with tifffile.TiffWriter(stack) as tif:  # no metadata: only the page chain counts frames
        for frame in frames:
            tif.write(frame, contiguous=False, metadata=None)
    with tifffile.TiffFile(stack) as tiff:
        boundary = tiff.pages[3].offset
    cut = tmp_path / "cut.tif"
    cut.write_bytes(stack.read_bytes()[:boundary])
    status, text, err = cli(capsys, "predict", paths["model_a"], cut, "-o", tmp_path / "out")
    warning = warnings_of(err)
    assert status == 0 and len(warning) == 1
    assert str(cut) in warning[0] and "read frames 0-2" in warning[0]
    assert "wrote 3 frames" in text and len(labels_in(tmp_path / "out")) == 3


def test_three_frames_saved_with_tifffile_defaults_are_not_one_rgb_frame(fx, tmp_path, capsys):
    paths, frames = fx
    three = tmp_path / "three.tif"
    tifffile.imwrite(three, frames[:3])  # stored as one planar RGB image by default
    status, text, err = cli(capsys, "predict", paths["model_a"], three, "-o", tmp_path / "out")
    warning = warnings_of(err)
    assert status == 0 and len(warning) == 1 and "as 3 grey frames" in warning[0]
    model = load_model(paths["model_a"])
    np.testing.assert_array_equal(read_labels(tmp_path / "out"),
                                  np.stack([model.predict(frame) for frame in frames[:3]]))


@pytest.mark.parametrize("cell, change, message", [
    ("nan_leaf_values", lambda a: a["node_value"].__setitem__(slice(None), np.nan),
     "array 'node_value' holds NaN or infinite values"),
    ("inf_leaf_value", lambda a: a["node_value"].__setitem__(-1, np.inf),
     "array 'node_value' holds NaN or infinite values"),
    ("nan_threshold", lambda a: a["node_threshold"].__setitem__(0, np.nan),
     "a split threshold is NaN or infinite"),
    ("feature_id_out_of_range", lambda a: a["node_feature"].__setitem__(0, 10**6),
     "feature ids outside"),
    ("looping_node_links", lambda a: a["node_left"].__setitem__(0, 0), "invalid node links"),
])
def test_model_arrays_that_change_predictions_are_refused(fx, tmp_path, capsys, cell, change,
                                                          message):
    paths, _ = fx
    bad = rewrite_model(paths["model_a"], tmp_path / f"{cell}.msc", arrays=change)
    for command in (["info", bad], ["predict", bad, paths["frames"], "-o", tmp_path / "o"]):
        status, _, err = cli(capsys, *command)
        line = one_error(err)
        assert status == 1 and str(bad) in line and message in line
    assert not (tmp_path / "o").exists()


def set_meta(key, value, inner=None):
    def change(document):
        target = document["meta"] if inner is None else document["meta"][inner]
        target[key] = value
        return document
    return change


@pytest.mark.parametrize("cell, change, message", [
    ("n_channels_0", set_meta("n_channels", 0), "n_channels must be a whole number in [1"),
    ("n_channels_3", set_meta("n_channels", 3), "n_channels is 3 but the feature bank is for "
                                                "1-channel images"),
    ("bogus_objective", set_meta("objective", "bogus", "booster"), "objective 'bogus' is not"),
    ("regression_objective_in_a_classifier", set_meta("objective", "regression", "booster"),
     "objective 'regression' is not"),
    ("negative_split_cost", set_meta("split_cost", -1.0, "booster"), "split_cost must be"),
    ("classes_minus_1_and_300_as_uint8", set_meta("classes", [-1, 300]),
     "classes [-1, 300] do not fit classes_dtype uint8"),
    ("classes_dtype_object", set_meta("classes_dtype", "|O"), "classes_dtype '|O' is not"),
    ("classes_unsorted", set_meta("classes", [2, 1]), "must be distinct and sorted"),
    ("bank_garbage", set_meta("bank", "garbage"), "unusable feature bank"),
    ("intensity_garbage", set_meta("intensity", {"dtype": "|O", "low": 0, "high": 1}),
     "intensity dtype"),
])
def test_model_fields_that_change_predictions_are_refused_by_info(fx, tmp_path, capsys, cell,
                                                                  change, message):
    paths, _ = fx
    bad = rewrite_model(paths["model_a"], tmp_path / f"{cell}.msc", header=change)
    status, _, err = cli(capsys, "info", bad)
    line = one_error(err)
    assert status == 1 and str(bad) in line and message in line
    with pytest.raises(ModelFileError, match="is invalid"):
        load_model(bad)


def test_evaluate_with_a_foreground_class_no_frame_holds(fx, tmp_path, capsys):
    paths, _ = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out, "-q")[0] == 0
    status, text, err = cli(capsys, "evaluate", out, paths["masks"], "--foreground", "99")
    assert status == 1 and "SEG" not in text
    assert "--foreground 99: no pixel of" in one_error(err)
    assert "its frames hold 1, 2" in one_error(err)
    status, text, _ = cli(capsys, "evaluate", out, paths["masks"], "--foreground", "2")
    assert status == 0 and "SEG" in text


def test_evaluating_an_unfinished_prediction_warns(fx, tmp_path, capsys):
    paths, _ = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out, "-q")[0] == 0
    for name in labels_in(out)[2:]:
        (out / name).unlink()
    status, text, err = cli(capsys, "evaluate", out, paths["masks"], "--foreground", "2")
    warning = warnings_of(err)
    assert status == 0 and len(warning) == 1
    assert "holds 2 of the 6 frames msclassify was to write" in warning[0]
    assert "in 2 frames" in text


def test_a_wide_model_is_not_scored_on_zero_padded_narrow_data(fx, capsys):
    paths, _ = fx
    status, _, err = cli(capsys, "tabular", "evaluate", paths["wide_model"], paths["narrow"])
    line = one_error(err)
    assert status == 1 and "holds feature ids up to 50" in line
    assert "the model splits on feature" in line and "of its 300" in line


@pytest.mark.parametrize("command", [["train", "{frames}", "--labels", "{scribbles}"],
                                     ["tabular", "train", "{narrow}"]])
def test_train_does_not_overwrite_a_file_that_is_not_a_model(fx, tmp_path, capsys, command):
    paths, _ = fx
    notes = tmp_path / "some_file.txt"
    notes.write_text("my notes")
    argv = [part.format(**{k: str(v) for k, v in paths.items()}) for part in command]
    status, text, err = cli(capsys, *argv, "-o", notes)
    assert status == 1 and "exists and is not an msclassify model file" in one_error(err)
    assert notes.read_text() == "my notes"
    assert "training on" not in text  # refused before training
    # an existing model is replaced as before
    model = tmp_path / "model.msc"
    model.write_bytes(paths["model_a"].read_bytes() if command[0] == "train" else
                      paths["wide_model"].read_bytes())
    assert cli(capsys, *argv, "-o", model, "-q", "--trees" if command[0] == "tabular" else
               "--n-estimators", "2")[0] == 0


# -- 2. tracebacks and a hang ---------------------------------------------------------------

@pytest.mark.parametrize("cell, change, message", [
    ("model_json_is_a_list", lambda d: [d], "is not an msclassify model file"),
    ("model_json_is_null", lambda d: None, "is not an msclassify model file"),
    ("model_json_is_a_string", lambda d: "model", "is not an msclassify model file"),
    ("no_kind", lambda d: {k: v for k, v in d.items() if k != "kind"}, "has no valid kind"),
    ("no_meta", lambda d: {k: v for k, v in d.items() if k != "meta"}, "has no valid meta"),
    ("meta_is_a_list", lambda d: dict(d, meta=[]), "has no valid meta"),
    ("format_version_string", lambda d: dict(d, format_version="1"),
     "format_version '1' is not a whole number"),
    ("unknown_kind", lambda d: dict(d, kind="wizard"), "unknown kind 'wizard'"),
    ("no_params", lambda d: {**d, "meta": {k: v for k, v in d["meta"].items() if k != "params"}},
     "params must be a JSON object"),
])
def test_damaged_model_json_is_one_line(fx, tmp_path, capsys, cell, change, message):
    paths, _ = fx
    bad = rewrite_model(paths["model_a"], tmp_path / f"{cell}.msc", header=change)
    status, _, err = cli(capsys, "info", bad)
    line = one_error(err)
    assert status == 1 and str(bad) in line and message in line
    assert "newer" not in line or cell == "unknown_kind"


def npy_header_claiming(shape, dtype="<f8"):
    header = {"descr": dtype, "fortran_order": False, "shape": shape}
    text = repr(header).encode("latin1")
    text += b" " * (-(len(text) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text


@pytest.mark.parametrize("cell, entry, message", [
    ("npy_header_claiming_1e12_elements", npy_header_claiming((10**12,)) + b"\0" * 64,
     "claims shape (1000000000000,)"),
    ("npy_header_with_object_dtype", npy_header_claiming((2,), "|O") + b"\0" * 16,
     "not numbers"),
    ("npy_header_garbage", b"not an npy file at all", "corrupt or truncated"),
])
def test_array_headers_are_checked_before_allocating(fx, tmp_path, capsys, cell, entry,
                                                     message):
    paths, _ = fx
    bad = rewrite_model(paths["model_a"], tmp_path / f"{cell}.msc",
                        raw=lambda entries: entries.__setitem__("node_value.npy", entry))
    status, _, err = cli(capsys, "info", bad)
    line = one_error(err)
    assert status == 1 and str(bad) in line and message in line


def test_a_zip_entry_claiming_gigabytes_is_refused_before_inflating(fx, tmp_path):
    paths, _ = fx
    bomb = tmp_path / "bomb.msc"
    with zipfile.ZipFile(paths["model_a"]) as source, \
            zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as target:
        for name in source.namelist():
            target.writestr(name, source.read(name))
        target.writestr("padding.npy", b"\0" * 4096)
    data = bytearray(bomb.read_bytes())
    # the central directory record of padding.npy: claim 4 GiB uncompressed
    record = data.rindex(b"PK\x01\x02", 0, data.rindex(b"padding.npy"))
    data[record + 24:record + 28] = (2**32 - 16).to_bytes(4, "little")
    bomb.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="entry padding.npy claims 4294967280 bytes"):
        read_model(bomb)


def test_a_huge_svmlight_feature_id_is_one_line(fx, tmp_path, capsys):
    data = tmp_path / "huge_id.train"
    data.write_text("1 1:0.5\n0 1:0.1\n" * 10 + "1 1:0.5 2000000000:1\n")
    status, _, err = cli(capsys, "tabular", "train", data, "-o", tmp_path / "m.msc")
    line = one_error(err)
    assert status == 1 and f"{data}, line 21: feature id 2000000000" in line
    assert "more than this machine's memory" in line


def test_sweep_with_test_fraction_0_is_one_line(fx, tmp_path, capsys):
    paths, _ = fx
    status, _, err = cli(capsys, "tabular", "sweep", paths["narrow"], "--test-fraction", "0",
                         "-o", tmp_path / "sweep")
    assert status == 1 and "--test-fraction must be in (0, 1), got 0.0" in one_error(err)


CTRL_C_DURING_STARTUP = """
import builtins, os, signal, sys
real_import = builtins.__import__
def interrupting_import(name, *args, **kwargs):
    if name == "numpy" and not getattr(interrupting_import, "done", False):
        interrupting_import.done = True
        os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C while the library is imported
    return real_import(name, *args, **kwargs)
builtins.__import__ = interrupting_import
from msclassify.cli import main   # what the msclassify console script runs
sys.exit(main(["info", "model.msc"]))
"""


def test_ctrl_c_during_start_up_is_one_line_and_exit_130(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", CTRL_C_DURING_STARTUP], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120,
                            preexec_fn=interruptible)
    assert result.returncode == 130
    assert result.stderr.strip() == "msclassify: interrupted"


def test_a_fifo_named_tif_is_refused_without_hanging(fx, tmp_path):
    paths, _ = fx
    fifo = tmp_path / "stream.tif"
    os.mkfifo(fifo)
    result = run_cli("predict", paths["model_a"], fifo, "-o", tmp_path / "out", timeout=60)
    assert result.returncode == 1
    assert f"{fifo} is a named pipe (FIFO), not a regular file" in one_error(result.stderr)
    for reader in (lambda: open_frames(fifo), lambda: load_model(fifo)):
        with pytest.raises(ValueError, match="named pipe"):
            reader()


def test_info_on_a_budgetrf_model(fx, capsys):
    paths, _ = fx
    status, text, _ = cli(capsys, "info", paths["budgetrf"])
    assert status == 0 and "3 trees (BudgetRF forest)" in text and "features:" in text


def test_info_on_a_cstc_model_with_the_identity_feature_map(fx, capsys):
    paths, _ = fx
    status, text, _ = cli(capsys, "info", paths["cstc"])
    assert status == 0 and "(CSTC tree) on the raw features (identity map)" in text


def test_info_into_a_closed_pipe_exits_0_quietly(fx):
    paths, _ = fx
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written, like `| head -0`
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        result = subprocess.run([sys.executable, "-m", "msclassify.cli", "info",
                                 str(paths["model_a"])], stdout=write_end, stderr=subprocess.PIPE,
                                env=env, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert result.returncode == 0 and result.stderr == ""


def test_info_piped_to_head_prints_its_first_line(fx):
    paths, _ = fx
    command = f"{sys.executable} -m msclassify.cli info {paths['model_a']} | head -1"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith("model:")


# -- 3. vague messages ----------------------------------------------------------------------

def test_a_folder_given_as_a_model(fx, tmp_path, capsys):
    paths, _ = fx
    status, _, err = cli(capsys, "info", paths["folder"])
    line = one_error(err)
    assert status == 1 and "is a folder, not a model file (it holds" in line
    assert "does not exist" not in line


def test_predict_workers_without_dask_names_the_extra_to_install(fx, tmp_path, capsys,
                                                                 monkeypatch):
    paths, _ = fx
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o",
                         tmp_path / "out", "--workers", "2")
    line = one_error(err)
    assert status == 1 and "pip install 'msclassify[dask]'" in line


def test_train_into_a_folder_is_refused_before_training(fx, tmp_path, capsys):
    paths, _ = fx
    status, text, err = cli(capsys, "train", paths["frames"], "--labels", paths["scribbles"],
                            "-o", tmp_path)
    line = one_error(err)
    assert status == 1 and f"cannot save the model to {tmp_path}: it is a folder" in line
    assert "Errno" not in line and "training on" not in text


def fail_with(monkeypatch, number):
    """Make every atomic write fail like a full or read-only disk."""

    def refuse(*args, **kwargs):
        raise OSError(number, os.strerror(number))
    monkeypatch.setattr(tempfile, "mkstemp", refuse)


@pytest.mark.parametrize("number, message", [(errno.ENOSPC, "the disk is full"),
                                             (errno.EROFS, "the folder is not writable")])
def test_a_full_or_read_only_disk_names_the_file_and_the_fix(fx, tmp_path, capsys, monkeypatch,
                                                             number, message):
    paths, _ = fx
    fail_with(monkeypatch, number)
    model = tmp_path / "m.msc"
    status, _, err = cli(capsys, "train", paths["frames"], "--labels", paths["scribbles"], "-o",
                         model, "--n-estimators", "2", "-q")
    line = one_error(err)
    assert status == 1 and f"cannot write {model}" in line and message in line
    assert "Errno" not in line
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o",
                         tmp_path / "out")
    assert status == 1 and message in one_error(err)
    status, _, err = cli(capsys, "tabular", "sweep", paths["narrow"], "--trees", "2",
                         "--cost-tradeoffs", "0.1", "-o", tmp_path / "sweep", "-q")
    line = one_error(err)
    assert status == 1 and str(tmp_path / "sweep" / "sweep.json") in line and message in line


def test_a_corrupted_tiff_directory_names_the_file(fx, tmp_path, capsys):
    paths, frames = fx
    stack = tmp_path / "stack.tif"
    with tifffile.TiffWriter(stack) as tif:
        for frame in frames:
            tif.write(frame, contiguous=False, metadata=None)
    with tifffile.TiffFile(stack) as tiff:
        directory = tiff.pages[2].offset
    broken = tmp_path / "broken.tif"
    broken.write_bytes(stack.read_bytes()[:directory + 20])  # cut inside a page directory
    status, _, err = cli(capsys, "predict", paths["model_a"], broken, "-o", tmp_path / "out")
    line = one_error(err)
    assert status == 1 and f"cannot read TIFF {broken}" in line
    assert "corrupted IFD structure" in line and "re-copy or re-export it" in line


def test_format_version_1_as_text_is_not_called_newer(fx, tmp_path):
    paths, _ = fx
    bad = rewrite_model(paths["model_a"], tmp_path / "v.msc",
                        header=lambda d: dict(d, format_version="1"))
    with pytest.raises(ModelFileError) as error:
        load_model(bad)
    assert "damaged: its format_version '1' is not a whole number" in str(error.value)
    assert "newer" not in str(error.value)


def test_a_short_cost_file_is_blamed_on_the_cost_file(fx, tmp_path, capsys):
    paths, _ = fx
    costs = tmp_path / "costs.txt"
    costs.write_text("1\n" * 20)
    status, _, err = cli(capsys, "tabular", "train", paths["narrow"], "--costs", costs, "-o",
                         tmp_path / "m.msc")
    line = one_error(err)
    assert status == 1 and f"the cost file {costs} holds 20 costs but" in line
    assert "has 50 features" in line


# -- API rows -------------------------------------------------------------------------------

def test_api_open_writer_refuses_another_provenance_and_overwrite_starts_over(tmp_path):
    out = tmp_path / "out"
    writer = open_writer(out, 2, (4, 4), provenance={"model": {"sha256": "aa", "path": "a"}})
    writer.write(0, np.ones((4, 4), np.uint8))
    with pytest.raises(FrameWriteError, match="made by something else: model: a .content aa. "
                                              "there, b .content bb. now"):
        open_writer(out, 2, (4, 4), provenance={"model": {"sha256": "bb", "path": "b"}})
    with pytest.raises(FrameWriteError, match="made by a recorded prediction run"):
        open_writer(out, 2, (4, 4))  # e.g. a napari export into a prediction's folder
    unrecorded = tmp_path / "unrecorded"
    open_writer(unrecorded, 2, (4, 4)).write(1, np.ones((4, 4), np.uint8))
    with pytest.raises(FrameWriteError, match="holds no record of what made it"):
        open_writer(unrecorded, 2, (4, 4), provenance={"model": {"sha256": "aa"}})
    assert open_writer(out, 2, (4, 4), provenance={"model": {"sha256": "aa", "path": "moved"}}
                       ).completed() == [0]  # paths are not compared
    fresh = open_writer(out, 2, (4, 4), provenance={"model": {"sha256": "bb"}}, overwrite=True)
    assert fresh.completed() == []


def test_api_training_frames_of_mixed_dtypes_are_refused():
    frames = make_frames(2)
    labels = make_scribbles(frames)
    labels[1] = labels[0]
    with pytest.raises(ValueError, match="different dtypes \\(float32, uint8\\)"):
        PixelClassifier(features="fast", n_estimators=2).fit(
            [frames[0], frames[1].astype(np.float32)], list(labels))


def test_api_reading_a_truncated_stack_warns(tmp_path):
    frames = make_frames()
    path = tmp_path / "stack.tif"
    tifffile.imwrite(path, frames, photometric="minisblack")
    (tmp_path / "cut.tif").write_bytes(path.read_bytes()[:-SIZE * SIZE - 10])
    with pytest.warns(FrameReadWarning, match="declares 6 frames but only frames 0-4"):
        with open_frames(tmp_path / "cut.tif") as source:
            assert len(source) == 5


# -- 4. issue 22 (round 2): lost ------------------------------------------------------------

@pytest.mark.parametrize("target", ["frames", "model_a", "video", "symlink", "hardlink",
                                    "folder_holding_the_input"])
@pytest.mark.parametrize("output_format", ["tiff-stack", "tif", "zarr"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_predict_never_writes_over_its_input_or_model(fx, tmp_path, capsys, target,
                                                      output_format, overwrite):
    paths, _ = fx
    frames = tmp_path / "frames.tif"
    frames.write_bytes(paths["frames"].read_bytes())
    model = tmp_path / "model.msc"
    model.write_bytes(paths["model_a"].read_bytes())
    video = tmp_path / "clip.mp4"
    video.write_bytes(paths["video"].read_bytes())
    source = video if target == "video" else frames
    output = {"frames": frames, "model_a": model, "video": video, "symlink": tmp_path / "link.tif",
              "hardlink": tmp_path / "hard.tif", "folder_holding_the_input": tmp_path}[target]
    if target == "symlink":
        output.symlink_to(frames)
    elif target == "hardlink":
        os.link(frames, output)
    before = {path: path.read_bytes() for path in (frames, model, video)}
    status, _, err = cli(capsys, "predict", model, source, "-o", output, "--format", output_format,
                         "--export", "mask", "--class", "2", *(["--overwrite"] * overwrite))
    line = one_error(err)
    assert status == 1 and f"the output {output} " in line and "would destroy it" in line
    assert "--overwrite" not in line
    assert {path: path.read_bytes() for path in before} == before


def test_overwrite_keeps_a_users_tif_in_a_prediction_folder(fx, tmp_path, capsys):
    paths, frames = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out, "-q")[0] == 0
    tifffile.imwrite(out / "my_notes.tif", frames[0])
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out,
                         "--overwrite")
    assert status == 1 and "files msclassify did not write" in one_error(err)
    assert (out / "my_notes.tif").is_file() and len(labels_in(out)) == N_FRAMES


def test_overwrite_keeps_a_zarr_store_holding_a_users_array(fx, tmp_path, capsys):
    import zarr

    paths, _ = fx
    out = tmp_path / "out.zarr"
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out, "--format",
               "zarr", "-q")[0] == 0
    zarr.open_group(str(out), mode="a").create_array("my_tracks", shape=(3,), dtype="i4")
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out,
                         "--format", "zarr", "--overwrite")
    assert status == 1 and "files msclassify did not write" in one_error(err)
    assert (out / "my_tracks").is_dir()


@pytest.mark.parametrize("content", [b"my own notes", "tiff"])
def test_tiff_stack_overwrite_never_replaces_a_users_file(fx, tmp_path, capsys, content):
    paths, frames = fx
    mine = tmp_path / "mine.tif"
    if content == "tiff":
        tifffile.imwrite(mine, frames, photometric="minisblack")
    else:
        mine.write_bytes(content)
    before = mine.read_bytes()
    for overwrite in ([], ["--overwrite"]):
        status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", mine,
                             "--format", "tiff-stack", *overwrite)
        line = one_error(err)
        assert status == 1 and "is not a TIFF stack msclassify wrote" in line
        assert "--overwrite" not in line and "overwrite=True" not in line
    assert mine.read_bytes() == before


def test_a_second_tiff_stack_run_with_another_model_is_refused(fx, tmp_path, capsys):
    paths, _ = fx
    stack = tmp_path / "masks.tif"
    args = ("--format", "tiff-stack", "--export", "mask", "--class", "2", "-q")
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", stack, *args)[0] == 0
    first = stack.read_bytes()
    assert oct(stack.stat().st_mode & 0o777) == oct(0o666 & ~current_umask())
    status, _, err = cli(capsys, "predict", paths["model_b"], paths["frames"], "-o", stack, *args)
    line = one_error(err)
    assert status == 1 and "already holds a TIFF stack msclassify wrote" in line
    assert "--overwrite" in line and "overwrite=True" not in line
    assert stack.read_bytes() == first
    assert cli(capsys, "predict", paths["model_b"], paths["frames"], "-o", stack, *args,
               "--overwrite")[0] == 0
    model_b = load_model(paths["model_b"])
    np.testing.assert_array_equal(tifffile.imread(stack), np.stack(
        [(model_b.predict(frame) == 2) * 255 for frame in fx[1]]).astype(np.uint8))


def current_umask():
    umask = os.umask(0)
    os.umask(umask)
    return umask


def test_api_two_tiff_stacks_finished_at_once_keep_the_first(tmp_path):
    from msclassify.io import TiffStackWriter

    path = tmp_path / "stack.tif"
    first = TiffStackWriter(path, 1, (2, 2), np.uint8)
    second = TiffStackWriter(path, 1, (2, 2), np.uint8)
    first.write(0, np.ones((2, 2), np.uint8))
    with pytest.raises(FrameWriteError, match="written by another run while this one ran"):
        second.write(0, np.full((2, 2), 7, np.uint8))
    assert tifffile.imread(path).tolist() == [[1, 1], [1, 1]]
    assert [p.name for p in tmp_path.iterdir()] == ["stack.tif"]


def test_a_killed_tiff_stack_run_leaves_no_temporary_file_after_the_next_run(fx, tmp_path,
                                                                            capsys):
    paths, _ = fx
    stack = tmp_path / "masks.tif"
    abandoned = tmp_path / ".masks.tif.k2jd93_x.tmp"   # as a SIGKILLed run leaves it
    abandoned.write_bytes(b"\0" * 4096)
    os.utime(abandoned, (0, 0))
    unrelated = tmp_path / ".other.tif.1234.tmp"
    unrelated.write_bytes(b"")
    os.utime(unrelated, (0, 0))
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", stack, "--format",
               "tiff-stack", "-q")[0] == 0
    assert not abandoned.exists() and unrelated.exists()


def test_api_a_tiff_stack_being_written_keeps_its_temporary_file(tmp_path):
    from msclassify.io import TiffStackWriter

    path = tmp_path / "stack.tif"
    running = TiffStackWriter(path, 2, (2, 2), np.uint8)
    running.write(0, np.ones((2, 2), np.uint8))
    temporary = next(tmp_path.glob(".stack.tif.*.tmp"))
    os.utime(temporary, (0, 0))   # even a stalled run's file is kept: it is locked
    other = TiffStackWriter(tmp_path / "stack.tif", 1, (2, 2), np.uint8)
    assert temporary.exists()
    other.close()
    running.write(1, np.ones((2, 2), np.uint8))
    assert tifffile.imread(path).shape == (2, 2, 2)


def test_demo_never_replaces_a_users_files(tmp_path, capsys):
    out = tmp_path / "demo"
    out.mkdir()
    (out / "model.msc").write_bytes(b"my model")
    status, text, err = cli(capsys, "demo", "-o", out)
    line = one_error(err)
    assert status == 1 and f"{out / 'model.msc'} exists and was not written by msclassify demo" \
        in line
    assert (out / "model.msc").read_bytes() == b"my model" and "training" not in text


def test_demo_replaces_only_the_files_it_recorded(tmp_path):
    from msclassify.cli._demo import _check_demo_folder, _record_demo_file

    out = tmp_path / "demo"
    out.mkdir()
    (out / "model.msc").write_bytes(b"written by the demo")
    _record_demo_file(out, out / "model.msc")
    _check_demo_folder(out)  # recorded: may be replaced
    (out / "model.msc").write_bytes(b"changed by the user since")
    with pytest.raises(ValueError, match="or was changed since"):
        _check_demo_folder(out)


# -- 5. issue 22 (round 2): silent ----------------------------------------------------------

def units_model(frames, scale, dtype):
    """A model trained on ``frames * scale`` stored as ``dtype`` (e.g. 16-bit: x257)."""
    return PixelClassifier(features="fast", n_estimators=4, random_state=0).fit(
        (frames[0].astype(np.float64) * scale).astype(dtype), make_scribbles(frames)[0])


@pytest.mark.parametrize("cell, model_units, frame, message", [
    ("uint8_video_frame_for_a_16_bit_model", (257, np.uint16), lambda f: f,
     "uint8 values .* within 8 bits, but the model was trained on uint16"),
    ("uint16_holding_0_255_for_a_16_bit_model", (257, np.uint16), lambda f: f.astype(np.uint16),
     "uint16 values .* within 8 bits"),
    ("float32_0_255_for_a_16_bit_model", (257, np.uint16), lambda f: f.astype(np.float32),
     "float32 values .* within 8 bits"),
    ("16_bit_frame_for_a_12_bit_model", (16, np.uint16), lambda f: f.astype(np.uint16) * 257,
     "more than 4x the largest value .* frame / 16"),
    ("12_bit_frame_for_a_16_bit_model", (257, np.uint16), lambda f: f.astype(np.uint16) * 16,
     "less than 1/8 of the largest value .* frame \\* 16"),
    ("negative_int16_for_a_uint8_model", (1, np.uint8), lambda f: f.astype(np.int16) - 130,
     "int16 values -1.*far outside the 0..255 of the uint8"),
    ("bool_frame_for_a_uint8_model", (1, np.uint8), lambda f: f > 100,
     "bool values 0..1, within 0..1"),
    ("16_bit_frame_for_a_raw_float_model", (1, np.float32), lambda f: f.astype(np.uint16) * 257,
     "more than 4x the largest value"),
])
def test_frames_in_other_intensity_units_are_refused(fx, cell, model_units, frame, message):
    _, frames = fx
    model = units_model(frames, *model_units)
    with pytest.raises(ValueError, match=message):
        model.predict(frame(frames[1]))


@pytest.mark.parametrize("model_units, frame", [
    ((257, np.uint16), lambda f: f.astype(np.uint16) * 257),
    ((16, np.uint16), lambda f: f.astype(np.uint16) * 16),      # 12-bit on 12-bit
    ((1, np.uint16), lambda f: f),                               # 8-bit values in uint16
    ((1, np.float32), lambda f: f),
    ((257, np.uint16), lambda f: np.zeros_like(f)),              # a black frame: no units
])
def test_frames_in_the_models_units_are_predicted(fx, model_units, frame):
    _, frames = fx
    model = units_model(frames, *model_units)
    labels = model.predict(frame(frames[1]))
    assert labels.shape == frames[1].shape


def test_a_16_bit_model_on_an_8_bit_video_is_one_line(fx, tmp_path, capsys):
    paths, frames = fx
    model = tmp_path / "sixteen.msc"
    units_model(frames, 257, np.uint16).save(model)
    status, _, err = cli(capsys, "predict", model, paths["video"], "-o", tmp_path / "out")
    line = one_error(err)
    assert status == 1 and "within 8 bits, but the model was trained on uint16" in line
    assert not labels_in(tmp_path / "out")


def test_label_ids_above_255_keep_their_identity(fx, tmp_path, capsys):
    paths, frames = fx
    labels = np.zeros(frames.shape, np.int32)
    labels[0, :3, :] = 300
    labels[0, 6:18, 6:18] = 70000
    labels[0, -3:, :] = 256
    lab = tmp_path / "lab.tif"
    tifffile.imwrite(lab, labels, photometric="minisblack")
    model = tmp_path / "m.msc"
    assert cli(capsys, "train", paths["frames"], "--labels", lab, "--features", "fast",
               "--n-estimators", "3", "-o", model, "-q")[0] == 0
    status, text, _ = cli(capsys, "info", model)
    assert status == 0 and "classes:    256, 300, 70000" in text
    out = tmp_path / "out"
    assert cli(capsys, "predict", model, paths["frames"], "-o", out, "-q")[0] == 0
    predicted = read_labels(out)
    assert predicted.dtype == np.uint32 and set(np.unique(predicted)) <= {256, 300, 70000}
    assert 70000 in predicted[0]
    assert cli(capsys, "predict", model, paths["frames"], "-o", tmp_path / "mask", "-q",
               "--export", "mask", "--class", "70000")[0] == 0


@pytest.mark.parametrize("options, message", [
    (["--export", "mask", "--class", "2", "--min-size", "300"],
     "--min-size applies to --export instances and --table"),
    (["--export", "probability", "--class", "2", "--min-size", "5"],
     "--min-size applies to --export instances and --table"),
    (["--export", "labels", "--class", "2"], "drop --class"),
    (["--class", "2"], "drop --class"),
    (["--min-size", "0"], "--min-size applies to --export instances and --table"),
    (["--chunk-size", "3"], "give it with --workers or --scheduler"),
])
def test_options_that_do_not_apply_are_refused(fx, tmp_path, capsys, options, message):
    paths, _ = fx
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o",
                         tmp_path / "out", *options)
    assert status == 1 and message in one_error(err)
    assert not (tmp_path / "out").exists()


def test_api_frame_export_refuses_options_of_other_kinds():
    from msclassify.pixel import FrameExport

    with pytest.raises(ValueError, match="min_size applies to 'instances' exports only"):
        FrameExport("mask", 2, min_size=300)
    with pytest.raises(ValueError, match="exporting 'labels' writes every class"):
        FrameExport("labels", 2)


@pytest.mark.parametrize("tradeoff", ["auto", "0.001"])
def test_a_class_with_one_labelled_pixel_is_warned_about(fx, tmp_path, capsys, tradeoff):
    paths, frames = fx
    labels = np.zeros(frames.shape, np.uint8)
    labels[0, :3, :] = 1
    labels[0, 10, 10] = 2
    lab = tmp_path / "lab.tif"
    tifffile.imwrite(lab, labels, photometric="minisblack")
    status, _, err = cli(capsys, "train", paths["frames"], "--labels", lab, "--features", "fast",
                         "--cost-tradeoff", tradeoff, "-o", tmp_path / "m.msc", "-q")
    warning = warnings_of(err)
    assert status == 0 and len(warning) == 1
    assert "class 2: 1 pixel" in warning[0] and "scribble more pixels of every class" in warning[0]


def test_api_a_model_using_no_feature_is_warned_about(fx):
    _, frames = fx
    labels = make_scribbles(frames)[0]
    with pytest.warns(UserWarning, match="uses no feature, so it predicts the same class"):
        model = PixelClassifier(features="fast", n_estimators=2, cost_tradeoff=1e9).fit(
            frames[0], labels)
    assert model.features_used_ == [] and np.unique(model.predict(frames[1])).size == 1


@pytest.mark.parametrize("pattern", [False, True])
def test_a_broken_link_in_an_image_folder_is_refused(fx, tmp_path, capsys, pattern):
    paths, frames = fx
    folder = tmp_path / "images"
    folder.mkdir()
    for t in range(3):
        tifffile.imwrite(folder / f"img{t}.tif", frames[t])
    (folder / "img1.tif").unlink()
    (folder / "img1.tif").symlink_to(tmp_path / "moved_away.tif")
    source = f"{folder}/*.tif" if pattern else folder
    status, _, err = cli(capsys, "predict", paths["model_a"], source, "-o", tmp_path / "out")
    line = one_error(err)
    assert status == 1 and "img1.tif" in line and "is a broken link" in line


# -- 6. issue 22 (round 2): vague -----------------------------------------------------------

@pytest.mark.parametrize("compression", [None, "zlib"])
def test_a_1_bit_tiff_is_read(tmp_path, compression):
    masks = np.zeros((3, 16, 20), bool)
    masks[:, 4:8, 4:9] = True
    masks[2, 0, 0] = True
    path = tmp_path / "bits.tif"
    tifffile.imwrite(path, masks, photometric="minisblack", compression=compression)
    with tifffile.TiffFile(path) as tiff:
        assert tiff.pages[0].bitspersample == 1
    with open_frames(path) as source:
        assert source.dtype == bool and len(source) == 3
        np.testing.assert_array_equal(np.stack(list(source)), masks)


def test_a_zip_that_is_not_a_model(tmp_path, capsys):
    archive = tmp_path / "photos.msc"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("holiday.jpg", b"\xff\xd8 not really")
    status, _, err = cli(capsys, "info", archive)
    line = one_error(err)
    assert status == 1 and "is a zip file but not an msclassify model file" in line
    assert "KeyError" not in line and "corrupt" not in line


@pytest.mark.parametrize("name, text, where", [
    ("inf.train", "1 1:0.5 2:1\n0 1:inf 2:1\n" * 3, "line 2: feature f1 is inf"),
    ("inf.csv", "a,b,label\n1,2,0\n3,-inf,1\n" * 1, "line 3, column 'b': '-inf' is infinite"),
])
def test_inf_in_a_tabular_file_names_file_and_line(tmp_path, capsys, name, text, where):
    data = tmp_path / name
    data.write_text(text)
    status, _, err = cli(capsys, "tabular", "train", data, "-o", tmp_path / "m.msc")
    line = one_error(err)
    assert status == 1 and str(data) in line and where in line


def test_svmlight_feature_id_0_names_no_api_parameter(tmp_path, capsys):
    data = tmp_path / "zero.train"
    data.write_text("1 0:0.5 1:1\n0 0:0.1 1:2\n" * 5)
    status, _, err = cli(capsys, "tabular", "train", data, "-o", tmp_path / "m.msc")
    line = one_error(err)
    assert status == 1 and "line 1: feature id 0, but svmlight feature ids start at 1" in line
    assert "zero_based" not in line and "=True" not in line


def test_cli_messages_name_options_not_parameters(fx, tmp_path, capsys):
    paths, _ = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out, "-q")[0] == 0
    status, _, err = cli(capsys, "predict", paths["model_b"], paths["frames"], "-o", out)
    line = one_error(err)
    assert status == 1 and "--overwrite" in line and "overwrite=True" not in line


def test_training_onto_a_read_only_folder_fails_before_training(fx, tmp_path, capsys,
                                                                monkeypatch):
    paths, _ = fx
    fail_with(monkeypatch, errno.EROFS)
    model = tmp_path / "m.msc"
    status, text, err = cli(capsys, "train", paths["frames"], "--labels", paths["scribbles"],
                            "-o", model, "--n-estimators", "2")
    line = one_error(err)
    assert status == 1 and f"cannot write {model}" in line and "not writable" in line
    assert "training" not in text + err.replace(line, "")


# -- 7. issue 22 (round 2): hang and memory -------------------------------------------------

def test_all_dask_workers_gone_ends_the_run_with_a_message_and_a_resumable_output(
        fx, tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    import time

    from msclassify.pixel import batch

    paths, frames = fx
    monkeypatch.setattr(batch, "_LOST_SECONDS", 2.0)
    model = load_model(paths["model_a"])
    out = tmp_path / "out"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as client:
        with open_frames(paths["frames"]) as source:
            writer = open_writer(out, len(source), source.shape)

            def on_frame(position):
                if position == 0:
                    cluster.scale(0)  # the only worker goes away
                    while client.scheduler_info(n_workers=-1)["workers"]:
                        time.sleep(0.1)
            start = time.monotonic()
            with pytest.raises(batch.BatchError, match="every Dask worker has left the cluster"):
                batch.predict_to_writer(model, source, writer, list(range(len(source))),
                                        client=client, model_bytes=paths["model_a"].read_bytes(),
                                        chunk_size=1, on_frame=on_frame)
            assert time.monotonic() - start < 30
            done = writer.completed()
    assert 1 <= len(done) < N_FRAMES
    # the frames written are complete; a re-run (here in-process) resumes after them
    with open_frames(paths["frames"]) as source:
        writer = open_writer(out, len(source), source.shape)
        todo = [index for index in range(len(source)) if index not in writer.completed()]
        batch.predict_to_writer(model, source, writer, todo)
        assert writer.completed() == list(range(N_FRAMES))


def test_a_frame_too_large_for_memory_is_refused_with_the_size_it_needs(fx, monkeypatch,
                                                                       tmp_path, capsys):
    from msclassify.pixel import _memory

    paths, frames = fx
    monkeypatch.setattr(_memory, "available_memory", lambda: 100_000)
    model = load_model(paths["model_a"])
    with pytest.raises(MemoryError, match=r"a 64x64 frame needs about 0\.\d MiB to predict, but "
                                          r"only 0\.1 MiB .*: crop or downscale it"):
        model.predict(frames[0])
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o",
                         tmp_path / "out")
    line = one_error(err)
    assert status == 1 and "frame needs about" in line and "MemoryError" not in line


MEASURE_PREDICTION = """
import sys
import numpy as np
from msclassify import load_model
from msclassify.pixel import _memory
model = load_model(sys.argv[1])
frame = np.random.default_rng(0).integers(0, 255, (2048, 2048)).astype(np.uint8)
def peak():  # VmHWM, the peak resident size since the last reset
    status = open("/proc/self/status").read()
    return int(status.split("VmHWM:")[1].split()[0]) * 1024
for probabilities in (False, True):
    predict = model.predict_proba if probabilities else model.predict
    predict(frame[:64, :64])
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")   # resets VmHWM to the current resident size
    before = peak()
    predict(frame)
    grown = peak() - before
    estimate = _memory.frame_bytes(2048 * 2048, model.bank_.shares()[model._used],
                                   model.booster_.n_outputs, model.classes_.size, probabilities)
    print(grown, estimate)
"""


@pytest.mark.parametrize("model", ["fast", "demo"])
def test_the_memory_estimate_bounds_what_prediction_allocates(fx, tmp_path, model):
    from msclassify.datasets import load_sample_flies

    _, frames = fx
    path = tmp_path / "m.msc"
    if model == "fast":
        PixelClassifier(features="fast", n_estimators=6, random_state=0).fit(
            frames[0], make_scribbles(frames)[0]).save(path)
    else:  # the demo's model: full-resolution and coarse features
        flies, _, scribbles = load_sample_flies()
        scribbled = [t for t in range(len(flies)) if scribbles[t].any()]
        PixelClassifier(random_state=0).fit([flies[t] for t in scribbled],
                                            [scribbles[t] for t in scribbled]).save(path)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", MEASURE_PREDICTION, str(path)], env=env,
                            capture_output=True, text=True, timeout=300)
    measured = [tuple(map(int, line.split())) for line in result.stdout.splitlines()]
    assert len(measured) == 2, result.stderr
    for grown, estimate in measured:   # labels, then probabilities
        assert 0 <= grown <= estimate
    assert measured[1][0] > 0


# -- 8. issue 22 (round 2): tabular ---------------------------------------------------------

def graded_files(folder):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    grade = np.clip((X[:, 0] * 1.5 + 1.5).round(), 0, 4).astype(int)
    for name, rows in (("rank.train", slice(0, 300)), ("rank.test", slice(300, 400))):
        svmlight(folder / name, X[rows], grade[rows])
    (folder / "rank.train.query").write_text("10\n" * 30)
    return folder / "rank.train", folder / "rank.test"


def test_graded_test_labels_without_their_query_file_are_refused(tmp_path, capsys):
    train, test = graded_files(tmp_path)
    assert cli(capsys, "tabular", "train", train, "-o", tmp_path / "rank.msc", "--trees", "5",
               "-q")[0] == 0
    status, text, err = cli(capsys, "tabular", "evaluate", tmp_path / "rank.msc", test)
    line = one_error(err)
    assert status == 1 and "accuracy" not in text
    assert "holds labels 2, 3, 4, which" in line and f"put {test}.query next to it" in line
    (tmp_path / "rank.test.query").write_text("10\n" * 10)
    status, text, _ = cli(capsys, "tabular", "evaluate", tmp_path / "rank.msc", test)
    assert status == 0 and "precision@5" in text


def test_training_graded_labels_without_queries_warns(tmp_path, capsys):
    train, _ = graded_files(tmp_path)
    (tmp_path / "rank.train.query").unlink()
    status, _, err = cli(capsys, "tabular", "train", train, "-o", tmp_path / "m.msc", "--trees",
                         "3", "-q")
    warning = warnings_of(err)
    assert status == 0 and len(warning) == 1
    assert "labels 0, 1, 2, 3, 4 are trained as 5 classes" in warning[0]


def write_csv(path, X, y, order):
    names = ["a", "b", "c", "d", "e", "label"]
    with open(path, "w") as fh:
        fh.write(",".join(names[i] for i in order) + "\n")
        for row, label in zip(X, y):
            cells = [*(f"{v:.5f}" for v in row), str(label)]
            fh.write(",".join(cells[i] for i in order) + "\n")
    return path


def test_a_csv_with_its_columns_reordered_is_matched_by_name(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 1] - X[:, 3] > 0).astype(int)
    train = write_csv(tmp_path / "train.csv", X, y, range(6))
    assert cli(capsys, "tabular", "train", train, "-o", tmp_path / "m.msc", "--trees", "20",
               "-q")[0] == 0
    _, same, _ = cli(capsys, "tabular", "evaluate", tmp_path / "m.msc", train)
    reordered = write_csv(tmp_path / "reordered.csv", X, y, [5, 4, 3, 2, 1, 0])
    status, text, _ = cli(capsys, "tabular", "evaluate", tmp_path / "m.msc", reordered)
    assert status == 0
    assert same.splitlines()[1] == text.splitlines()[1]   # the same scores
    model = load_model(tmp_path / "m.msc")
    assert model.column_names_ == ("a", "b", "c", "d", "e")
    renamed = tmp_path / "renamed.csv"
    renamed.write_text(reordered.read_text().replace("label,e,d,c,b,a", "label,e,d,c,b,z"))
    status, _, err = cli(capsys, "tabular", "evaluate", tmp_path / "m.msc", renamed)
    line = one_error(err)
    assert status == 1 and "has no column 'a', but the model was trained on the columns a, b" \
        in line


def test_a_lost_dask_scheduler_ends_the_run_with_a_message_and_a_resumable_output(
        fx, tmp_path):
    pytest.importorskip("distributed")
    import socket
    import time

    paths, frames = fx
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler",
                                  "--host", "127.0.0.1", "--port", str(port),
                                  "--dashboard-address", ":0"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                               "--nthreads", "1", "--no-nanny"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    many = tmp_path / "many.tif"
    tifffile.imwrite(many, np.concatenate([frames] * 8), photometric="minisblack")
    out = tmp_path / "out"
    code = f"""
import os, signal, sys
from msclassify.pixel import batch
real = batch._predict_chunk
def kill_the_scheduler_after_a_frame(position, _calls=[]):
    _calls.append(position)
    if len(_calls) == 1:
        os.kill({scheduler.pid}, signal.SIGKILL)
from msclassify.cli import _predict
original = _predict._run_prediction
def run(args, *rest):
    import msclassify.pixel.batch as b
    inner = b.predict_to_writer
    def wrapped(*a, on_frame=None, **k):
        def both(position):
            on_frame(position)
            kill_the_scheduler_after_a_frame(position)
        return inner(*a, on_frame=both, **k)
    b.predict_to_writer = wrapped
    return original(args, *rest)
_predict._run_prediction = run
from msclassify.cli import main
sys.exit(main(sys.argv[1:]))
"""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        time.sleep(3)
        start = time.monotonic()
        result = subprocess.run([sys.executable, "-c", code, "predict", paths["model_a"], many,
                                 "-o", out, "-q", "--scheduler", address, "--chunk-size", "1"],
                                env=env, capture_output=True, text=True, timeout=120)
        elapsed = time.monotonic() - start
    finally:
        for process in (worker, scheduler):
            process.kill()
            process.wait()
    assert result.returncode == 1 and elapsed < 60, result.stderr
    line = one_error(result.stderr)
    assert "the connection to the Dask scheduler was lost" in line
    assert "a re-run resumes after them" in line and "Traceback" not in result.stderr
    status = main(["predict", str(paths["model_a"]), str(many), "-o", str(out), "-q"])
    assert status == 0 and len(labels_in(out)) == 8 * N_FRAMES


def test_overwrite_still_replaces_an_output_recorded_before_frame_names(tmp_path):
    out = tmp_path / "old"
    writer = open_writer(out, 2, (4, 4))
    writer.write(0, np.ones((4, 4), np.uint8))
    manifest = json.loads((out / "msclassify_frames.json").read_text())
    manifest.pop("names")
    manifest["format_version"] = 1
    (out / "msclassify_frames.json").write_text(json.dumps(manifest))
    assert open_writer(out, 2, (4, 4), overwrite=True).completed() == []
    (out / "notes.tif").write_bytes(b"mine")
    with pytest.raises(FrameWriteError, match="files msclassify did not write"):
        open_writer(out, 2, (4, 4), overwrite=True)


def test_a_damaged_record_does_not_suggest_overwrite(tmp_path, capsys, fx):
    paths, _ = fx
    out = tmp_path / "out"
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out, "-q")[0] == 0
    (out / "msclassify_frames.json").write_text("{damaged")
    status, _, err = cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", out)
    line = one_error(err)
    assert status == 1 and "unreadable record" in line and "--overwrite" not in line


def test_the_temporary_file_of_a_sigkilled_stack_run_is_removed_by_the_next_run(fx, tmp_path,
                                                                                capsys):
    paths, _ = fx
    stack = tmp_path / "masks.tif"
    killed = subprocess.run([sys.executable, "-c", f"""
import os, signal
import numpy as np
from msclassify.io import TiffStackWriter
writer = TiffStackWriter({str(stack)!r}, 3, (8, 8), np.uint8)
writer.write(0, np.ones((8, 8), np.uint8))
os.kill(os.getpid(), signal.SIGKILL)
"""], env=dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")),
        timeout=120)
    assert killed.returncode == -signal.SIGKILL
    (leftover,) = tmp_path.glob(".masks.tif.*.tmp")
    os.utime(leftover, (0, 0))   # as if the kill was a while ago
    assert cli(capsys, "predict", paths["model_a"], paths["frames"], "-o", stack, "--format",
               "tiff-stack", "-q")[0] == 0
    assert not leftover.exists() and tifffile.imread(stack).shape == (N_FRAMES, SIZE, SIZE)
