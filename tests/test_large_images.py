"""Large images: lazy readers of every format on tiny stores, their errors, the OME-Zarr
label writer (layout, resume after an interrupted write, a full disk) and the chunked job."""

import json
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
from msclassify.io import (ChunkedLabelWriter, FrameReadError, FrameWriteError, open_chunk_writer,
                           open_image)
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
    with pytest.raises(FrameReadError, match=r"has 2 points along axis 't'; .* per image$"):
        open_image(stack)
    stack = _ome_zarr(tmp_path / "z.zarr", np.stack([IMAGE] * 2), "zyx", "0.4")
    with pytest.raises(FrameReadError, match=r"has 2 points along axis 'z'; .* read the z-stack "
                                             r"as a volume \(msclassify predict --axes zyx"):
        open_image(stack)


def _blosc_zarr(path, data, zarr_format, chunks):
    """A zarr array compressed with Blosc (zarr-python 2's default: most NGFF 0.4 stores)."""
    if zarr_format == 2:
        from numcodecs import Blosc
        compressor = Blosc(cname="lz4", clevel=5)
    else:
        compressor = zarr.codecs.BloscCodec(cname="lz4")
    z = zarr.create_array(str(path), shape=data.shape, chunks=chunks, dtype=data.dtype,
                          zarr_format=zarr_format, compressors=[compressor])
    z[:] = data
    return path


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_truncated_blosc_chunk_is_refused_not_read_as_garbage(tmp_path, zarr_format):
    # Blosc decodes a truncated chunk without an error (into garbage): found by copying half
    # of a real EM store's chunk; the size its header records tells it
    noise = np.random.default_rng(0).integers(0, 65535, (70, 90), dtype=np.uint16)
    path = _blosc_zarr(tmp_path / "b.zarr", noise, zarr_format, (32, 32))
    chunk = path / ("1.1" if zarr_format == 2 else "c/1/1")
    chunk.write_bytes(chunk.read_bytes()[:1000])
    for allow_missing in (False, True):                 # label images too
        image = open_image(path, allow_missing=allow_missing)
        assert np.array_equal(image[:32, :], noise[:32])
        with pytest.raises(FrameReadError, match=r"b.zarr: chunk \(1, 1\) .* holds 1000 bytes "
                                                 r"but its Blosc header records \d+: it is "
                                                 r"truncated"):
            image[40:50, 40:50]
    # a sparse Blosc label image (chunks never painted are not stored) still reads as zeros
    labels = np.zeros((70, 90), np.uint8)
    labels[5, 5] = 2
    sparse = _blosc_zarr(tmp_path / "l.zarr", labels, zarr_format, (32, 32))
    assert not (sparse / ("1.1" if zarr_format == 2 else "c/1/1")).exists()
    assert np.array_equal(open_image(sparse, allow_missing=True)[:, :], labels)


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
    with pytest.raises(FrameWriteError, match=r"chunk \(0, 1\).*disk is full.*; chunks already "
                                              r"written stay valid and a re-run resumes"):
        writer.write_chunk((0, 1), np.ones((32, 32), np.uint8))
    monkeypatch.setattr(type(writer._levels[0]), "__setitem__", real)
    assert ChunkedLabelWriter(tmp_path / "out.zarr", (64, 64), (32, 32), [1, 2]).completed() == \
        {(0, 0)}


_HDF5_UNDER_A_FILE_SIZE_LIMIT = """
import resource, sys
import numpy as np
from msclassify.io import ChunkedHDF5Writer, FrameWriteError
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
labels = np.random.default_rng(0).integers(1, 256, (2048, 2048)).astype(np.uint8)
writer = ChunkedHDF5Writer(sys.argv[1], labels.shape, (512, 512), list(range(1, 256)))
try:
    for index in sorted(set(range(16)) - {4 * i + j for i, j in writer.completed()}):
        window = writer.chunk(divmod(index, 4))
        writer.write_chunk(divmod(index, 4), labels[window])
except FrameWriteError as exc:
    print(exc)
    sys.exit(1)
finally:
    writer.close()
print(np.array_equal(np.asarray(__import__("h5py").File(sys.argv[1])["labels"]), labels))
"""


def test_hdf5_output_refuses_a_chunk_the_disk_has_no_room_for_instead_of_crashing(tmp_path):
    # HDF5 that runs out of space in a write (a full disk, ulimit -f) crashed the process in
    # a segmentation fault (h5py freeing its objects) after the message: exit status 139
    out = tmp_path / "out.h5"
    run = [sys.executable, "-c", _HDF5_UNDER_A_FILE_SIZE_LIMIT, str(out)]
    limited = subprocess.run(run + [str(2_500_000)], capture_output=True, text=True)
    assert limited.returncode == 1, limited.stderr[-2000:]
    assert "(File too large)" in limited.stdout and ".out.h5.partial (chunk (" in limited.stdout
    assert not out.exists() and (tmp_path / ".out.h5.partial").is_file()
    resumed = subprocess.run(run + [str(1 << 40)], capture_output=True, text=True)
    assert resumed.returncode == 0 and resumed.stdout.strip() == "True", resumed.stderr[-2000:]


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
from msclassify.io import open_chunk_writer, open_image
from msclassify.pixel import predict_to_store

model_path, image_path, out = sys.argv[1:4]
model, image = load_model(model_path), open_image(image_path)
writer = open_chunk_writer(out, image.shape, (40, 48), model.classes_, n_classes=2,
                           provenance={"model": model_path})

def on_chunk(index):
    print(*index, flush=True)
    time.sleep(0.3)

predict_to_store(model, image, writer, probabilities=True, on_chunk=on_chunk)
"""


def _saved_job(tmp_path):
    """``(model, image)``, saved as ``m.msc`` and the zarr array ``in.zarr`` in ``tmp_path``."""
    model, image = _model()
    model.save(tmp_path / "m.msc")
    store = zarr.create_array(str(tmp_path / "in.zarr"), shape=image.shape, chunks=(64, 64),
                              dtype=np.uint8)
    store[:] = image
    return model, image


def _kill_9_after_4_chunks(tmp_path, out):
    """(model, image, the job's command, the chunks it had finished when killed with -9)."""
    model, image = _saved_job(tmp_path)
    args = [sys.executable, "-c", _INTERRUPTED_JOB, str(tmp_path / "m.msc"),
            str(tmp_path / "in.zarr"), str(out)]
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finished = [tuple(map(int, child.stdout.readline().split())) for _ in range(4)]
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    return model, image, args, finished


def test_resume_after_kill_9_rewrites_no_finished_chunk(tmp_path):
    out = tmp_path / "out.zarr"
    model, image, args, finished = _kill_9_after_4_chunks(tmp_path, out)
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


def test_hdf5_output_resumes_after_kill_9_without_rewriting_a_finished_chunk(tmp_path):
    from msclassify.io import ChunkedHDF5Writer

    out = tmp_path / "out.h5"
    model, image, args, finished = _kill_9_after_4_chunks(tmp_path, out)
    assert not out.exists() and (tmp_path / ".out.h5.partial").is_file()
    writer = ChunkedHDF5Writer(out, image.shape, (40, 48), model.classes_, n_classes=2,
                               provenance={"model": str(tmp_path / "m.msc")})
    done = writer.completed()
    writer.close()
    assert set(finished) <= done and len(done) < 20
    rerun = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    redone = {tuple(map(int, line.split())) for line in rerun.stdout.split("\n") if line}
    assert redone.isdisjoint(done) and len(redone) + len(done) == 20
    assert not (tmp_path / ".out.h5.partial").exists()
    with h5py.File(out, "r") as f:
        assert np.array_equal(f["labels"][:], model.predict(image))
        np.testing.assert_allclose(np.moveaxis(f["labels_probabilities"][:], 0, -1),
                                   model.predict_proba(image), atol=1e-6, rtol=0)


def test_two_hdf5_runs_finished_at_once_keep_the_first(tmp_path):
    from msclassify.io import ChunkedHDF5Writer

    out = tmp_path / "out.h5"
    writer = ChunkedHDF5Writer(out, (4, 6), (4, 6), np.array([1, 2]))
    out.write_bytes(b"the first run's file")     # finished while this run wrote its chunk
    with pytest.raises(FrameWriteError, match="written by another run while this one ran"):
        writer.write_chunk((0, 0), np.ones((4, 6), np.uint8))
    writer.close()
    assert out.read_bytes() == b"the first run's file"
    assert (tmp_path / ".out.h5.partial").is_file()        # this run's labels are kept


def test_publish_without_hard_links_still_never_replaces_a_file(tmp_path, monkeypatch):
    from msclassify.io._atomic import publish

    def no_links(source, target):
        raise PermissionError(1, "hard links not supported")

    monkeypatch.setattr(os, "link", no_links)
    (tmp_path / "a.tmp").write_text("a")
    publish(tmp_path / "a.tmp", tmp_path / "a")
    assert (tmp_path / "a").read_text() == "a" and not (tmp_path / "a.tmp").exists()
    (tmp_path / "b.tmp").write_text("b")
    with pytest.raises(FileExistsError):
        publish(tmp_path / "b.tmp", tmp_path / "a")
    assert (tmp_path / "a").read_text() == "a" and (tmp_path / "b.tmp").read_text() == "b"


@pytest.mark.slow
def test_on_a_dask_cluster_the_store_is_identical(tmp_path):
    import dask.array

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
            with local_cluster(workers) as client:      # a dask array read window by window
                lazy = dask.array.from_array(image, chunks=64)
                assert predict_to_store(model, lazy, writer, probabilities=True, client=client,
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


# -- HDF5 and TIFF outputs -------------------------------------------------------------------

def _read_output(path, n_classes=None):
    """(labels, probabilities (H, W, K) or None) of a finished HDF5 or TIFF output."""
    if str(path).endswith(".tif"):
        labels = tifffile.imread(path)
        proba = None if n_classes is None else np.moveaxis(
            tifffile.imread(str(path).replace(".tif", "_probabilities.tif")), 0, -1)
        return labels, proba
    with h5py.File(path, "r") as f:
        return f["labels"][:], None if n_classes is None else np.moveaxis(
            f["labels_probabilities"][:], 0, -1)


class _Stop(Exception):
    pass


@pytest.mark.parametrize("name", ["out.h5", "out.tif"])
def test_hdf5_and_tiff_labels_equal_the_whole_image_prediction(tmp_path, name):
    from msclassify.io import open_chunk_writer

    model, image = _model()
    writer = open_chunk_writer(tmp_path / name, image.shape, (72, 64), model.classes_,
                               n_classes=2, provenance={"model": {"sha256": "a"}})
    assert predict_to_store(model, image, writer, probabilities=True) == 9
    writer.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [name] + (["out_probabilities.tif"] if name.endswith(".tif") else []))
    labels, proba = _read_output(tmp_path / name, 2)
    expected = model.predict(image)
    assert np.array_equal(labels, expected)
    np.testing.assert_allclose(proba, model.predict_proba(image), atol=1e-6, rtol=0)
    reread = open_image(f"{tmp_path / name}:/labels" if name.endswith(".h5") else tmp_path / name)
    assert np.array_equal(reread[10:150, 7:170], expected[10:150, 7:170])
    if name.endswith(".tif"):                                     # tiled, with a pyramid
        with tifffile.TiffFile(tmp_path / name) as tiff:
            assert tiff.pages[0].is_tiled
            levels = tiff.series[0].levels
            assert [level.shape for level in levels] == [(200, 180)]   # too small for more
    assert open_chunk_writer(tmp_path / name, image.shape, (72, 64), model.classes_, n_classes=2,
                             provenance={"model": {"sha256": "a"}}).completed() == \
        {(i, j) for i in range(3) for j in range(3)}             # finished: nothing to do


@pytest.mark.parametrize("name", ["labels.h5", "labels.h5:/seg", "labels.tif"])
def test_hdf5_and_tiff_outputs_refuse_a_volume_naming_ome_zarr(tmp_path, name):
    with pytest.raises(ValueError, match="writes one image .*OME-Zarr"):
        open_chunk_writer(str(tmp_path / name), (4, 40, 50), (2, 32, 32), [1, 2],
                          spacing=(50.0, 4.0, 4.0))
    assert list(tmp_path.iterdir()) == []


def test_tiff_pyramid_holds_every_2nd_pixel(tmp_path, caplog):
    from msclassify.io import ChunkedTiffWriter

    rng = np.random.default_rng(1)
    full = rng.integers(1, 4, (700, 520)).astype(np.uint8)
    writer = ChunkedTiffWriter(tmp_path / "p.tif", full.shape, (256, 256), [1, 2, 3])
    for index in [(i, j) for i in range(3) for j in range(3)]:
        writer.write_chunk(index, full[writer.chunk(index)])
    with tifffile.TiffFile(tmp_path / "p.tif") as tiff:
        levels = [level.asarray() for level in tiff.series[0].levels]
        assert json.loads(tiff.pages[0].description)["msclassify"]["classes"] == [1, 2, 3]
        # read as the shaped series it was written as, not as a corrupted one (tifffile logs
        # "invalid shaped series metadata or corrupted file" and falls back to a generic one)
        assert tiff.series[0].kind == "shaped"
    assert "corrupted" not in caplog.text
    assert len(levels) == 2
    assert np.array_equal(levels[0], full) and np.array_equal(levels[1], full[::2, ::2])


@pytest.mark.parametrize("name", ["out.h5:/seg/labels", "out.tif"])
def test_resume_after_an_interrupted_write_rewrites_no_finished_chunk(tmp_path, name):
    from msclassify.io import open_chunk_writer

    model, image = _model()
    path = f"{tmp_path}/{name}"
    final = tmp_path / name.split(":")[0]

    def writer(shape=image.shape):
        return open_chunk_writer(path, shape, (40, 48), model.classes_, n_classes=2,
                                 provenance={"model": {"sha256": "a"}})

    first = writer()
    finished = []

    def stop_after_7(index):
        finished.append(index)
        if len(finished) == 7:
            raise _Stop

    with pytest.raises(_Stop):
        predict_to_store(model, image, first, probabilities=True, on_chunk=stop_after_7)
    first.close()
    assert not final.exists()                     # written whole, or not at all
    hidden = [p.name for p in tmp_path.iterdir()]
    assert len(hidden) == 1 and hidden[0].startswith(".out.")
    with pytest.raises(FrameWriteError, match=r"holds a different job \(shape \[200, 180\] there"):
        writer((200, 200))
    again = writer()
    done = again.completed()
    assert set(finished) <= done and len(done) < 20
    rewritten = []
    real = again.write_chunk

    def recording(index, *data):
        rewritten.append(index)
        real(index, *data)

    again.write_chunk = recording
    assert predict_to_store(model, image, again, probabilities=True) == 20 - len(done)
    again.close()
    assert set(rewritten).isdisjoint(done) and len(set(rewritten)) == len(rewritten)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [final.name] + (["out_probabilities.tif"] if name.endswith(".tif") else []))
    if name.endswith(".tif"):
        labels, proba = _read_output(final, 2)
    else:
        with h5py.File(final, "r") as f:
            labels = f["seg/labels"][:]
            proba = np.moveaxis(f["seg/labels_probabilities"][:], 0, -1)
            assert list(f["seg/labels"].attrs["classes"]) == [1, 2]
    assert np.array_equal(labels, model.predict(image))
    np.testing.assert_allclose(proba, model.predict_proba(image), atol=1e-6, rtol=0)


def test_existing_hdf5_and_tiff_outputs_are_refused_or_replaced_only_if_ours(tmp_path):
    from msclassify.io import ChunkedHDF5Writer, ChunkedTiffWriter

    with h5py.File(tmp_path / "theirs.h5", "w") as f:
        f.create_dataset("labels", data=np.zeros((64, 64), np.uint16))
    tifffile.imwrite(tmp_path / "theirs.tif", np.zeros((64, 64), np.uint8))
    for cls, name in ((ChunkedHDF5Writer, "theirs.h5"), (ChunkedTiffWriter, "theirs.tif")):
        for overwrite in (False, True):
            with pytest.raises(FrameWriteError, match="not written by msclassify|is not a TIFF "
                                                      "msclassify wrote"):
                cls(tmp_path / name, (64, 64), (32, 32), [1, 2], overwrite=overwrite)
    for cls, name in ((ChunkedHDF5Writer, "ours.h5"), (ChunkedTiffWriter, "ours.tif")):
        writer = cls(tmp_path / name, (64, 64), (32, 32), [1, 2])
        for index in [(0, 0), (0, 1), (1, 0), (1, 1)]:
            writer.write_chunk(index, np.ones((32, 32), np.uint8))
        writer.close()
        with pytest.raises(FrameWriteError, match=r"different job \(.*dtype \|u1 there, <u2 now"):
            cls(tmp_path / name, (64, 64), (32, 32), [1, 2], dtype=np.uint16)
        replaced = cls(tmp_path / name, (64, 64), (32, 32), [1, 2], dtype=np.uint16,
                       overwrite=True)
        assert replaced.completed() == set() and not (tmp_path / name).exists()
        replaced.close()


def test_hdf5_full_disk_names_the_chunk_and_keeps_finished_ones(tmp_path, monkeypatch):
    import errno

    from msclassify.io import ChunkedHDF5Writer

    writer = ChunkedHDF5Writer(tmp_path / "out.h5", (64, 64), (32, 32), [1, 2])
    writer.write_chunk((0, 0), np.ones((32, 32), np.uint8))

    def full(self, key, value):
        raise OSError("Can't write data (file write failed: errno = 28, error message = 'No "
                      "space left on device')")

    monkeypatch.setattr(h5py.Dataset, "__setitem__", full)
    with pytest.raises(FrameWriteError, match=r"chunk \(0, 1\).*disk is full.*resumes") as caught:
        writer.write_chunk((0, 1), np.ones((32, 32), np.uint8))
    assert caught.value.errno == errno.ENOSPC
    monkeypatch.undo()
    writer.close()
    assert ChunkedHDF5Writer(tmp_path / "out.h5", (64, 64), (32, 32), [1, 2]).completed() == \
        {(0, 0)}


def test_command_line_predicts_into_hdf5_and_tiff(tmp_path, capsys):
    from msclassify.cli import main

    model, image = _saved_job(tmp_path)
    expected = model.predict(image)
    for output in (f"{tmp_path / 'out.h5'}:/seg/labels", str(tmp_path / "out.tif")):
        args = ["predict", str(tmp_path / "m.msc"), str(tmp_path / "in.zarr"), "-o", output,
                "--chunks", "96"]
        assert main(args) == 0
        assert f"labels: {output}" in capsys.readouterr().out
        assert main(args) == 0
        assert "already in" in capsys.readouterr().out
        assert main(args[:-1] + ["128"]) == 1                    # another job: refused
        error = capsys.readouterr().err.strip()
        assert "made by something else: chunks: [96, 96] there, [128, 128] now" in error
        assert len(error.splitlines()) == 1
        assert main(args[:-1] + ["128", "--overwrite", "-q"]) == 0
    with h5py.File(tmp_path / "out.h5", "r") as f:
        assert np.array_equal(f["seg/labels"][:], expected)
    assert np.array_equal(tifffile.imread(tmp_path / "out.tif"), expected)
    tifffile.imwrite(tmp_path / "theirs.tif", expected)
    assert main(["predict", str(tmp_path / "m.msc"), str(tmp_path / "in.zarr"), "-o",
                 str(tmp_path / "theirs.tif"), "--overwrite"]) == 1
    error = capsys.readouterr().err.strip()
    assert "theirs.tif was not written by msclassify" in error and len(error.splitlines()) == 1
