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
