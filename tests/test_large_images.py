"""Large images: lazy readers of every format on tiny stores, their errors, the OME-Zarr
label writer (layout, resume after an interrupted write, a full disk) and the chunked job."""

import os
import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest
import tifffile
import zarr

from msclassify import PixelClassifier
from msclassify.io import ChunkedLabelWriter, FrameReadError, FrameWriteError, open_image
from msclassify.pixel import predict_to_store

IMAGE = (np.arange(70 * 90) * 7 % 251).astype(np.uint8).reshape(70, 90)
RGB = np.stack([IMAGE, 255 - IMAGE, IMAGE // 2], axis=-1)


def _ome_zarr(path, data, axes, version):
    """A one-level OME-Zarr image as a writer following the spec would make it."""
    fmt = 3 if version == "0.5" else 2
    root = zarr.open_group(str(path), mode="w", zarr_format=fmt)
    multiscales = [{"axes": [{"name": a, "type": "channel" if a == "c" else "time" if a == "t"
                              else "space"} for a in axes],
                    "datasets": [{"path": "s0", "coordinateTransformations": [
                        {"type": "scale", "scale": [1.0] * len(axes)}]}]}]
    if version == "0.5":
        root.attrs["ome"] = {"version": "0.5", "multiscales": multiscales}
    else:
        multiscales[0]["version"] = version
        root.attrs["multiscales"] = multiscales
    array = root.create_array("s0", shape=data.shape, chunks=(1,) * (data.ndim - 2) + (32, 32),
                              dtype=data.dtype)
    array[:] = data
    return path


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_ome_zarr_level_0_with_channels_first(tmp_path, version):
    data = np.moveaxis(RGB, -1, 0)[np.newaxis, :, np.newaxis]          # t, c, z, y, x
    image = open_image(_ome_zarr(tmp_path / "image.zarr", data, "tczyx", version))
    assert image.shape == (70, 90, 3) and image.dtype == np.uint8
    assert np.array_equal(image[5:40, 33:90], RGB[5:40, 33:90])
    assert f"OME-Zarr {version}" in image.description


def test_plain_zarr_hdf5_and_tiled_tiff_read_windows(tmp_path):
    z = zarr.create_array(str(tmp_path / "plain.zarr"), shape=IMAGE.shape, chunks=(16, 16),
                          dtype=np.uint8)
    z[:] = IMAGE
    with h5py.File(tmp_path / "stack.h5", "w") as f:
        f.create_dataset("em/raw", data=RGB, chunks=(16, 16, 3))
    tifffile.imwrite(tmp_path / "tiled.tif", IMAGE, tile=(32, 32))
    for spec, expected in ((tmp_path / "plain.zarr", IMAGE),
                           (f"{tmp_path / 'stack.h5'}:/em/raw", RGB),
                           (tmp_path / "tiled.tif", IMAGE)):
        image = open_image(spec)
        assert image.shape == expected.shape, spec
        assert np.array_equal(image[3:61, 17:80], expected[3:61, 17:80]), spec
        assert image.identity() == open_image(spec).identity()


def test_bad_input_is_refused_naming_file_and_chunk(tmp_path):
    z = zarr.create_array(str(tmp_path / "holes.zarr"), shape=IMAGE.shape, chunks=(16, 16),
                          dtype=np.uint8)
    z[:] = IMAGE
    (tmp_path / "holes.zarr" / "c" / "1" / "2").unlink()                 # a lost chunk
    image = open_image(tmp_path / "holes.zarr")
    assert np.array_equal(image[:16, :], IMAGE[:16])                     # elsewhere it reads
    with pytest.raises(FrameReadError, match=r"holes.zarr: chunk \(1, 2\) .* is missing"):
        image[10:30, 20:40]
    truncated = tmp_path / "holes.zarr" / "c" / "2" / "2"
    truncated.write_bytes(truncated.read_bytes()[:5])
    with pytest.raises(FrameReadError, match=r"holes.zarr: cannot read pixels y 32..48, x 32..48"):
        image[32:48, 32:48]
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f.create_dataset("raw", data=IMAGE)
    with pytest.raises(FrameReadError, match=r"f.h5 has no dataset '/data'; its datasets: /raw"):
        open_image(f"{tmp_path / 'f.h5'}:/data")
    with pytest.raises(FrameReadError, match=r"missing.h5 does not exist"):
        open_image(f"{tmp_path / 'missing.h5'}:/raw")
    root = zarr.open_group(str(tmp_path / "v06.zarr"), mode="w")
    root.attrs["ome"] = {"version": "0.6", "multiscales": [{"axes": ["y", "x"],
                                                            "datasets": [{"path": "0"}]}]}
    with pytest.raises(FrameReadError, match=r"NGFF\) version 0.6; msclassify reads versions "
                                             r"0.4, 0.5"):
        open_image(tmp_path / "v06.zarr")
    stack = _ome_zarr(tmp_path / "t.zarr", np.stack([IMAGE] * 2)[:, np.newaxis], "tcyx", "0.5")
    with pytest.raises(FrameReadError, match=r"has 2 points along axis 't'"):
        open_image(stack)


def test_writer_layout_is_ngff_labels_with_a_pyramid(tmp_path):
    writer = ChunkedLabelWriter(tmp_path / "out.zarr", (700, 520), (256, 256), [1, 2, 3],
                                class_names=["background", "cell", "membrane"], n_classes=3)
    assert writer.n_levels == 2 and writer.grid == (3, 3)   # 700 >> 1 >= 256; 700 >> 2 is not
    rng = np.random.default_rng(0)
    full = rng.integers(1, 4, (700, 520)).astype(np.uint8)
    proba = rng.random((700, 520, 3)).astype(np.float32)
    for index in [(i, j) for i in range(3) for j in range(3)]:
        window = writer.chunk(index)
        writer.write_chunk(index, full[window], proba[window])
    root = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    assert root.attrs["ome"] == {"version": "0.5"}
    assert root["labels"].attrs["ome"]["labels"] == ["classes"]
    meta = root["labels/classes"].attrs["ome"]
    assert [d["path"] for d in meta["multiscales"][0]["datasets"]] == ["0", "1"]
    assert meta["multiscales"][0]["datasets"][1]["coordinateTransformations"][0]["scale"] == \
        [2.0, 2.0]
    assert [p["name"] for p in meta["image-label"]["properties"]] == ["background", "cell",
                                                                      "membrane"]
    assert [c["label-value"] for c in meta["image-label"]["colors"]] == [1, 2, 3]
    assert np.array_equal(root["labels/classes/0"][:], full)
    assert np.array_equal(root["labels/classes/1"][:], full[::2, ::2])
    assert np.array_equal(np.moveaxis(root["probabilities/0"][:], 0, -1), proba)
    assert [a["name"] for a in root["probabilities"].attrs["ome"]["multiscales"][0]["axes"]] == \
        ["c", "y", "x"]


def test_writer_refuses_another_job_and_foreign_stores(tmp_path):
    ChunkedLabelWriter(tmp_path / "out.zarr", (64, 64), (32, 32), [1, 2],
                       provenance={"model": {"sha256": "a"}})
    with pytest.raises(FrameWriteError, match="was made by something else"):
        ChunkedLabelWriter(tmp_path / "out.zarr", (64, 64), (32, 32), [1, 2],
                           provenance={"model": {"sha256": "b"}})
    with pytest.raises(FrameWriteError, match=r"holds a different job \(chunks \[32, 32\] there"):
        ChunkedLabelWriter(tmp_path / "out.zarr", (64, 64), (64, 64), [1, 2],
                           provenance={"model": {"sha256": "a"}})
    zarr.create_array(str(tmp_path / "foreign.zarr"), shape=(2,), dtype=np.uint8)
    with pytest.raises(FrameWriteError, match="not written by msclassify|not a zarr"):
        ChunkedLabelWriter(tmp_path / "foreign.zarr", (64, 64), (32, 32), [1, 2])


def test_overwrite_replaces_its_own_store_only(tmp_path):
    out = tmp_path / "out.zarr"
    writer = ChunkedLabelWriter(out, (64, 64), (32, 32), [1, 2],
                                provenance={"model": {"sha256": "a"}})
    writer.write_chunk((0, 0), np.ones((32, 32), np.uint8))
    again = ChunkedLabelWriter(out, (64, 64), (32, 32), [1, 2],
                               provenance={"model": {"sha256": "b"}}, overwrite=True)
    assert again.completed() == set()
    zarr.create_array(str(out / "mine"), shape=(2,), dtype=np.uint8)   # a user's own array
    with pytest.raises(FrameWriteError, match="did not write"):
        ChunkedLabelWriter(out, (64, 64), (32, 32), [1, 2], overwrite=True)
    assert (out / "mine").is_dir()


def test_full_disk_names_the_chunk_and_keeps_finished_ones(tmp_path, monkeypatch):
    import errno

    writer = ChunkedLabelWriter(tmp_path / "out.zarr", (64, 64), (32, 32), [1, 2])
    writer.write_chunk((0, 0), np.ones((32, 32), np.uint8))
    real = type(writer._levels[0]).__setitem__

    def full(self, key, value):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(type(writer._levels[0]), "__setitem__", full)
    with pytest.raises(FrameWriteError, match=r"chunk \(0, 1\).*disk is full.*resumes"):
        writer.write_chunk((0, 1), np.ones((32, 32), np.uint8))
    monkeypatch.setattr(type(writer._levels[0]), "__setitem__", real)
    assert ChunkedLabelWriter(tmp_path / "out.zarr", (64, 64), (32, 32), [1, 2]).completed() == \
        {(0, 0)}


def _model(shape=(200, 180)):
    rng = np.random.default_rng(0)
    image = rng.normal(70, 12, shape)
    image[40:150, 30:120] += 110
    image = np.clip(image, 0, 255).astype(np.uint8)
    labels = np.zeros(shape, np.uint8)
    labels[3:8, 3:170] = 1
    labels[80:100, 60:90] = 2
    return PixelClassifier("fast", n_estimators=8, random_state=0).fit(image, labels), image


def test_chunked_job_into_the_store_equals_whole_image(tmp_path):
    model, image = _model()
    store = zarr.create_array(str(tmp_path / "in.zarr"), shape=image.shape, chunks=(50, 50),
                              dtype=np.uint8)
    store[:] = image
    writer = ChunkedLabelWriter(tmp_path / "out.zarr", image.shape, (72, 64), model.classes_,
                                n_classes=2)
    assert predict_to_store(model, open_image(tmp_path / "in.zarr"), writer,
                            probabilities=True) == 9
    root = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    assert np.array_equal(root["labels/classes/0"][:], model.predict(image))
    np.testing.assert_allclose(np.moveaxis(root["probabilities/0"][:], 0, -1),
                               model.predict_proba(image), atol=1e-6, rtol=0)


_INTERRUPTED_JOB = r"""
import sys, time
from msclassify import load_model
from msclassify.io import ChunkedLabelWriter, open_image
from msclassify.pixel import predict_to_store

model_path, image_path, out = sys.argv[1:4]
model, image = load_model(model_path), open_image(image_path)
writer = ChunkedLabelWriter(out, image.shape, (40, 48), model.classes_, n_classes=2,
                            provenance={"model": model_path})

def on_chunk(index):
    print(*index, flush=True)
    time.sleep(0.3)

predict_to_store(model, image, writer, probabilities=True, on_chunk=on_chunk)
"""


def test_resume_after_kill_9_rewrites_no_finished_chunk(tmp_path):
    model, image = _model()
    model.save(tmp_path / "m.msc")
    store = zarr.create_array(str(tmp_path / "in.zarr"), shape=image.shape, chunks=(64, 64),
                              dtype=np.uint8)
    store[:] = image
    out = tmp_path / "out.zarr"
    args = [sys.executable, "-c", _INTERRUPTED_JOB, str(tmp_path / "m.msc"),
            str(tmp_path / "in.zarr"), str(out)]
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finished = [tuple(map(int, child.stdout.readline().split())) for _ in range(4)]
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    writer = ChunkedLabelWriter(out, image.shape, (40, 48), model.classes_, n_classes=2,
                                provenance={"model": str(tmp_path / "m.msc")})
    done = writer.completed()
    assert set(finished) <= done and len(done) < 20        # killed part-way (5 x 4 chunks)
    level0 = out / "labels" / "classes" / "0" / "c"
    stamps = {index: os.stat(level0 / str(index[0]) / str(index[1])).st_mtime_ns
              for index in done}
    rerun = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    redone = {tuple(map(int, line.split())) for line in rerun.stdout.split("\n") if line}
    assert redone.isdisjoint(done) and len(redone) + len(done) == 20
    assert stamps == {index: os.stat(level0 / str(index[0]) / str(index[1])).st_mtime_ns
                      for index in done}
    root = zarr.open_group(str(out), mode="r")
    assert np.array_equal(root["labels/classes/0"][:], model.predict(image))
    np.testing.assert_allclose(np.moveaxis(root["probabilities/0"][:], 0, -1),
                               model.predict_proba(image), atol=1e-6, rtol=0)


@pytest.mark.slow
def test_on_a_dask_cluster_the_store_is_identical(tmp_path):
    from msclassify.pixel.batch import local_cluster

    model, image = _model((300, 260))
    model.save(tmp_path / "m.msc")
    stores = []
    for name, workers in (("here", None), ("dask", 2)):
        writer = ChunkedLabelWriter(tmp_path / f"{name}.zarr", image.shape, (96, 80),
                                    model.classes_, n_classes=2)
        if workers is None:
            predict_to_store(model, image, writer, probabilities=True)
        else:
            with local_cluster(workers) as client:
                assert predict_to_store(model, image, writer, probabilities=True, client=client,
                                        model_bytes=(tmp_path / "m.msc").read_bytes()) == 16
        stores.append(zarr.open_group(str(tmp_path / f"{name}.zarr"), mode="r"))
    for key in ("labels/classes/0", "probabilities/0"):
        assert np.array_equal(stores[0][key][:], stores[1][key][:]), key


def test_command_line_trains_around_scribbles_and_predicts_chunk_by_chunk(tmp_path, capsys):
    from msclassify.cli import main

    model, image = _model((300, 260))
    scribbles = np.zeros(image.shape, np.uint8)
    scribbles[3:8, 3:250] = 1
    scribbles[120:135, 80:110] = 2
    store = zarr.create_array(str(tmp_path / "in.zarr"), shape=image.shape, chunks=(64, 64),
                              dtype=np.uint8)
    store[:] = image
    with h5py.File(tmp_path / "scribbles.h5", "w") as f:
        f.create_dataset("labels", data=scribbles)
    assert main(["train", str(tmp_path / "in.zarr"), "--labels",
                 f"{tmp_path / 'scribbles.h5'}:/labels", "-o", str(tmp_path / "m.msc"),
                 "--features", "L0:gauss:s3.5:c0", "--n-estimators", "5", "--chunks", "128",
                 "-q"]) == 0                                    # halo: radius 11 -> 16 px
    out = tmp_path / "out.zarr"
    args = ["predict", str(tmp_path / "m.msc"), str(tmp_path / "in.zarr"), "-o", str(out), "-q"]
    assert main(args + ["--chunks", "96"]) == 0
    from msclassify import load_model
    trained = load_model(tmp_path / "m.msc")
    labels = zarr.open_group(str(out), mode="r")["labels/classes/0"][:]
    assert np.array_equal(labels, trained.predict(image))
    assert main(args + ["--chunks", "96"]) == 0                    # resumed: nothing to do
    capsys.readouterr()
    assert main(args + ["--chunks", "8"]) == 1
    error = capsys.readouterr().err.strip()
    assert "--chunks 8" in error and "halo of 16 pixels" in error and len(error.splitlines()) == 1
    assert main(args + ["--chunks", "128"]) == 1                   # another job: refused
    assert "made by something else: chunks: [96, 96] there, [128, 128] now" in \
        capsys.readouterr().err
