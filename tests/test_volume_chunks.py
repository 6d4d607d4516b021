"""Chunked prediction of volumes is exact: per-axis halos of every 3D filter on every level,
the (bz, 8, 8) block grid, whole volume models on tiny volumes with chunks that divide neither
the volume nor the blocks, and labels + probabilities from one walk of the trees."""

import numpy as np
import pytest

from msclassify import PixelClassifier
from msclassify.cegb import Booster
from msclassify.features import (FILTERS, FeatureSpec, PyramidVolume, VoxelGrid, support_voxels)
from msclassify.pixel import (ChunkPlan, model_halo, model_plan, predict_chunk, predict_chunks,
                              predict_multiscale, predict_region)


def test_support_voxels_by_hand():
    em = VoxelGrid((50, 4, 4))                  # blocks 1x1x1, 1x2x2, 1x4x4, 1x8x8
    # sigma 2 x pixels = 8 nm: 0.16 of a section along z, radius int(0.48 + 0.5) = 0
    assert support_voxels("L0:gauss:s2.0:c0", em) == (0, 6, 6)
    # a finite difference reads one voxel along every axis, z too
    assert support_voxels("L0:gradmag:s2.0:c0", em) == (1, 7, 7)
    # level 3: sigma 1 of 32 nm pixels = 0.64 section, radius 2; y/x radius 3, times 8
    assert support_voxels("L3:gauss:s1.0:c0", em) == (2, 24, 24)
    iso = VoxelGrid((1, 1, 1))                  # blocks 2x2x2 ... 8x8x8
    assert support_voxels("L2:structure_max:s1.6:c0", iso) == ((5 + 1 + 2) * 4,) * 3
    assert support_voxels("L1:dog:s1.0:c0", iso) == (3 * 2,) * 3


def test_volume_plan_geometry_by_hand():
    plan = ChunkPlan((9, 40, 40), (5, 32, 32), halo=(1, 12, 12), block=(2, 8, 8))
    assert plan.halos == (2, 16, 16) and plan.grid == (2, 2, 2)
    assert plan.region((1, 0, 0)) == (slice(4, 9), slice(0, 32), slice(0, 32))
    # 9 slices pad to 10 by mirroring slice 8: the window ending at 9 starts by 8 at the latest
    assert plan.window((1, 1, 1), halo=0)[0] == slice(4, 9)
    with pytest.raises(ValueError, match="chunk size 1 along axis 0 is smaller than the model's "
                                         "halo of 2 pixels"):
        ChunkPlan((9, 40, 40), (1, 32, 32), halo=(1, 12, 12), block=(2, 8, 8)).check_chunks()


SPECS = [FeatureSpec.make(level, f, None if f == "intensity" else sigma)
         for level in range(4) for f in FILTERS for sigma in (0.7, 2.5)
         if not (f == "intensity" and sigma == 2.5)] + [
    FeatureSpec.make(level, f, sigma, upsampled=True)           # trilinear to full resolution
    for level in (1, 2, 3) for f, sigma in (("gauss", 0.7), ("hessian_max", 2.5))]


@pytest.mark.parametrize("spacing, shape, chunks", [((1, 1, 1), (19, 27, 22), (9, 13, 11)),
                                                    ((3, 1, 1), (11, 30, 21), (4, 17, 9)),
                                                    ((50, 4, 4), (5, 29, 26), (2, 11, 14))])
def test_every_3d_filter_on_every_level_is_exact_in_its_window(spacing, shape, chunks):
    """The per-axis halo rule: each feature computed on its chunk's window equals, on the
    chunk's region, the feature of the whole volume (bit for bit)."""
    grid = VoxelGrid(spacing)
    volume = np.random.default_rng(1).integers(0, 256, shape).astype(np.uint8)
    whole = PyramidVolume(volume, grid)
    for spec in SPECS:
        plan = ChunkPlan(shape, chunks, halo=support_voxels(spec, grid), block=grid.pad_multiple)
        reference = whole.feature(spec)
        block = grid.blocks[spec.level]
        for index in plan:
            window, region = plan.window(index), plan.region(index)
            local = PyramidVolume(volume[window], grid).feature(spec)
            inside = tuple(slice(r.start // b, -(-r.stop // b)) for r, b in zip(region, block))
            moved = tuple(slice(s.start - w.start // b, s.stop - w.start // b)
                          for s, w, b in zip(inside, window, block))
            assert np.array_equal(local[moved], reference[inside]), (spec.id, index)


def test_a_smaller_z_halo_would_not_be_exact():
    """The z support is tight: one coarse block less halo along z changes a level-3 Gaussian."""
    grid = VoxelGrid((1, 1, 1))
    volume = np.random.default_rng(2).integers(0, 256, (96, 16, 16)).astype(np.uint8)
    spec = FeatureSpec.from_id("L3:gauss:s1.0:c0")          # 3 level voxels = 24 along z
    halo = support_voxels(spec, grid)
    reference = PyramidVolume(volume, grid).feature(spec)
    plan = ChunkPlan(volume.shape, (16, 16, 16), halo=(halo[0] - 8,) + halo[1:], block=8)
    window = plan.window((2, 0, 0))
    local = PyramidVolume(volume[window], grid).feature(spec)
    assert window[0] == slice(16, 64)           # region 32..48, 16 of the 24 needed
    assert not np.array_equal(local[2:4], reference[4:6])


def _blob_volume(shape, seed=0, n_classes=2):
    rng = np.random.default_rng(seed)
    volume = rng.normal(0.3, 0.06, shape).astype(np.float32)
    zz, yy, xx = np.indices(shape)
    centre = [s // 2 for s in shape]
    blob = (zz - centre[0]) ** 2 * 4 + (yy - centre[1]) ** 2 + (xx - centre[2]) ** 2 < 100
    volume[blob] += 0.5
    labels = np.zeros(shape, np.uint8)
    labels[1, :3] = 1
    labels[centre[0], centre[1] - 2:centre[1] + 2, centre[2] - 2:centre[2] + 2] = 2
    if n_classes == 3:
        volume[:, :, :4] -= 0.2
        labels[-2, 5:-5, :2] = 3
    return volume, labels


@pytest.mark.parametrize("spacing, n_classes", [((1, 1, 1), 2), ((2, 1, 1), 3), ((6, 1, 1), 2)])
def test_volume_model_chunked_equals_whole(spacing, n_classes):
    """Models of many features on several levels (cost_tradeoff=0): labels bit for bit and
    probabilities equal, for chunks that divide neither the volume nor the blocks."""
    volume, labels = _blob_volume((13, 43, 38), n_classes=n_classes)
    model = PixelClassifier("default", n_estimators=12, cost_tradeoff=0, random_state=0,
                            spacing=spacing, distill_weight=0).fit(volume, labels)
    levels = {FeatureSpec.from_id(i).source_level for i in model.features_used_}
    assert len(levels) >= 2, model.features_used_
    whole, proba = model.predict(volume), model.predict_proba(volume)
    halo = model_halo(model)
    assert len(halo) == 3
    for chunks in ((3, 11, 13), (5, 17, 9), (7, 43, 20)):
        chunks = tuple(max(c, min(h, s)) for c, h, s in zip(chunks, halo, volume.shape))
        got, got_proba = predict_chunks(model, volume, chunks, ("class", "proba"))
        assert np.array_equal(got, whole), chunks
        np.testing.assert_array_equal(got_proba, proba)
        (alone,) = predict_chunks(model, volume, chunks)
        assert np.array_equal(alone, whole), chunks
    for region in ((slice(2, 5), slice(10, 30), slice(0, 7)), (slice(12, 13), slice(None),
                                                               slice(30, 38))):
        assert np.array_equal(predict_region(model, volume, region), whole[region]), region


@pytest.mark.parametrize("spacing", [(1, 1, 1), (6, 1, 1)])
def test_volume_model_of_upsampled_features_is_exact_chunked_and_multiscale(spacing, tmp_path):
    """Upsampled (L<n>up) features in 3D: multi-scale == per-voxel, chunked == whole, and the
    model file round-trips."""
    volume, labels = _blob_volume((13, 43, 38))
    ids = ["L0:intensity:c0", "L1up:gauss:s0.7:c0", "L2up:hessian_max:s0.7:c0",
           "L3up:log:s0.7:c0", "L2:gauss:s0.7:c0"]
    model = PixelClassifier(ids, n_estimators=12, cost_tradeoff=0, random_state=0,
                            spacing=spacing, distill_weight=0).fit(volume, labels)
    assert any("up:" in i for i in model.features_used_), model.features_used_
    whole, proba = model.predict(volume), model.predict_proba(volume)
    np.testing.assert_allclose(proba, model.predict_proba(volume, strategy="per_pixel"),
                               atol=1e-6)
    halo = model_halo(model)
    for chunks in ((3, 11, 13), (7, 43, 20)):
        chunks = tuple(max(c, min(h, s)) for c, h, s in zip(chunks, halo, volume.shape))
        got, got_proba = predict_chunks(model, volume, chunks, ("class", "proba"))
        assert np.array_equal(got, whole), chunks
        np.testing.assert_array_equal(got_proba, proba)
    from msclassify import load_model
    model.save(tmp_path / "up.msc")
    loaded = load_model(tmp_path / "up.msc")
    assert loaded.bank_ == model.bank_
    assert np.array_equal(loaded.predict(volume), whole)


def test_a_plan_of_another_geometry_is_refused():
    volume, labels = _blob_volume((8, 24, 24))
    model = PixelClassifier("fast", n_estimators=3, spacing=(4, 1, 1)).fit(volume, labels)
    plan = model_plan(model, volume.shape, (8, 24, 24))
    assert plan.blocks == (2, 8, 8)                 # z pooled once, at level 3
    with pytest.raises(ValueError, match="is not this model's"):
        predict_chunk(model, volume, ChunkPlan(volume.shape, (8, 24, 24), 16), (0, 0, 0))


def test_a_volume_is_not_sent_to_a_dask_cluster(tmp_path):
    from msclassify.io import ChunkedLabelWriter
    from msclassify.pixel import predict_to_store
    volume, labels = _blob_volume((8, 24, 24))
    model = PixelClassifier("fast", n_estimators=3, spacing=(4, 1, 1)).fit(volume, labels)
    writer = ChunkedLabelWriter(tmp_path / "out.zarr", volume.shape, (8, 24, 24),
                                model.classes_, spacing=(4, 1, 1))
    with pytest.raises(ValueError, match="a volume is predicted chunk by chunk in this process"):
        predict_to_store(model, volume, writer, client=object(), model_bytes=b"")
    assert predict_to_store(model, volume, writer) == 1


def _constant_booster(init_score):
    """A model whose every tree is one leaf of value 0: its raw scores are ``init_score``."""
    tree = {"feature": np.array([-1], np.int32), "threshold": np.zeros(1),
            "default_left": np.zeros(1, bool), "left": np.array([-1], np.int32),
            "right": np.array([-1], np.int32), "value": np.zeros(1), "share": np.ones(1)}
    return Booster([dict(tree) for _ in init_score], init_score, 1,
                   "binary" if len(init_score) == 1 else "multiclass", feature_share=[1.0])


@pytest.mark.parametrize("init_score, expected", [
    ([0.0, 0.0, 0.0], 10),     # an exact tie: the first class, as the class walk
    ([0.0, 1e-12, 0.0], 20),   # scores a float32 probability cannot tell apart: the raw decides
    ([1e-12], 20),             # binary: raw > 0 is class 1 though both probabilities are 0.5
    ([0.0], 10)])
def test_labels_and_probabilities_from_one_walk_resolve_ties_as_the_class_walk(init_score,
                                                                               expected):
    booster = _constant_booster(init_score)
    classes = np.array([10, 20, 30][:max(len(init_score), 2)], np.uint16)
    blocks = VoxelGrid((4, 1, 1)).blocks         # z pooled at level 3: padded to 4 slices
    arrays = [np.zeros(tuple(n // b for n, b in zip((4, 8, 8), block)) + (int(L == 0),),
                       np.float32) for L, block in enumerate(blocks)]
    args = (booster, arrays, [0], [0], (3, 8, 8))
    labels = predict_multiscale(*args, output="class", classes=classes, blocks=blocks).values
    proba = predict_multiscale(*args, output="proba", classes=classes, blocks=blocks).values
    both, both_proba = predict_multiscale(*args, output="class+proba", classes=classes,
                                          blocks=blocks).values
    assert (labels == expected).all() and np.array_equal(both, labels)
    np.testing.assert_array_equal(both_proba, proba)


# -- the command line: one volume chunk by chunk into OME-Zarr --------------------------------
def _write_ome_zarr(path, volume, scale, chunks):
    """``volume`` as an NGFF 0.5 image (one z, y, x dataset of voxel size ``scale``)."""
    import zarr
    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    root.attrs["ome"] = {"version": "0.5", "multiscales": [{
        "axes": [{"name": n, "type": "space"} for n in "zyx"],
        "datasets": [{"path": "0", "coordinateTransformations": [
            {"type": "scale", "scale": scale}]}]}]}
    root.create_array("0", data=volume, chunks=chunks)


@pytest.fixture(scope="module")
def chunk_files(tmp_path_factory):
    import tifffile
    import zarr
    folder = tmp_path_factory.mktemp("volume_chunks")
    volume, labels = _blob_volume((13, 43, 38), n_classes=3)
    volume = (volume * 255).clip(0, 255).astype(np.uint8)
    tifffile.imwrite(folder / "vol.tif", volume, imagej=True, resolution=(1, 1),
                     metadata={"axes": "ZYX", "spacing": 2.0})
    tifffile.imwrite(folder / "lab.tif", labels)
    _write_ome_zarr(folder / "vol.zarr", volume, [2.0, 1.0, 1.0], (4, 16, 16))
    plain = zarr.create_array(str(folder / "cyx_plain.zarr"), shape=(2,) + volume.shape,
                              chunks=(1, 5, 20, 20), dtype=np.uint8)
    plain[0], plain[1] = volume, 255 - volume
    return folder, volume


def _cli(capsys, *args):
    from msclassify.cli import main
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _stored_labels(path):
    import zarr
    return zarr.open_group(str(path), mode="r")["labels"]["classes"]["0"][:]


def test_cli_predicts_a_volume_chunk_by_chunk_as_a_whole(chunk_files, tmp_path, capsys):
    from msclassify import load_model
    folder, volume = chunk_files
    code, _, err = _cli(capsys, "train", folder / "vol.tif", "--labels", folder / "lab.tif",
                        "--axes", "zyx", "-o", tmp_path / "m.msc", "--n-estimators", "8",
                        "--random-state", "0")
    assert code == 0, err
    model = load_model(tmp_path / "m.msc")
    whole = model.predict(volume)
    # which features 8 trees pick (hence the halo) depends on the seed; chunks of 24
    # (dividing neither the volume nor the block grid) need a halo of at most 24 pixels
    size = 24 if max(model_halo(model)[1:]) <= 24 else 48
    shown = "x".join(str(min(size, n)) for n in volume.shape)
    for source in ("vol.zarr", "vol.tif"):
        out = tmp_path / f"{source}.out.zarr"
        code, text, err = _cli(capsys, "predict", tmp_path / "m.msc", folder / source, "--axes",
                               "zyx", "--chunks", str(size), "-o", out, "--probabilities")
        assert code == 0, err
        assert f"chunks of {shown}" in text and "Mvoxel/s" in text
        assert np.array_equal(_stored_labels(out), whole), source
        import zarr
        root = zarr.open_group(str(out), mode="r")
        scale = root["labels"]["classes"].attrs["ome"]["multiscales"][0]["datasets"][0]
        assert scale["coordinateTransformations"][0]["scale"] == [2.0, 1.0, 1.0]
        assert root["probabilities"]["0"].shape == (3,) + volume.shape
    code, text, _ = _cli(capsys, "predict", tmp_path / "m.msc", folder / "vol.zarr", "--axes",
                         "zyx", "--chunks", str(size), "-o", tmp_path / "vol.zarr.out.zarr",
                         "--probabilities")
    assert code == 0 and "nothing to do" in text
    # a zarr input takes the chunked path without --chunks too (chunks of 128, clipped)
    code, text, err = _cli(capsys, "predict", tmp_path / "m.msc", folder / "vol.zarr", "--axes",
                           "zyx", "-o", tmp_path / "default.zarr")
    assert code == 0 and "chunks of 13x43x38" in text, err
    assert np.array_equal(_stored_labels(tmp_path / "default.zarr"), whole)


def test_cli_chunked_volume_bad_input_writes_nothing(chunk_files, tmp_path, capsys):
    folder, _ = chunk_files
    assert _cli(capsys, "train", folder / "vol.tif", "--labels", folder / "lab.tif", "--axes",
                "zyx", "-o", tmp_path / "m.msc", "--n-estimators", "3")[0] == 0
    assert _cli(capsys, "train", folder / "vol.tif", "--labels", folder / "lab.tif", "--axes",
                "zyx", "--per-slice", "-o", tmp_path / "flat.msc", "--n-estimators", "3")[0] == 0
    out = tmp_path / "out.zarr"
    for model, source, extra, message in (
            ("flat.msc", "vol.zarr", ["--axes", "zyx"], "is a 2D model; chunked prediction"),
            ("m.msc", "vol.zarr", [], "is a volume model"),
            ("m.msc", "vol.zarr", ["--axes", "zyx", "--spacing", "1", "1", "1"],
             "was trained on (2.0, 1.0, 1.0)"),
            ("m.msc", "vol.zarr", ["--axes", "zyx", "--chunks", "3"],
             "is smaller than the model's halo"),
            ("m.msc", "vol.zarr", ["--axes", "czyx"], "name each of its 3 axes"),
            ("m.msc", "cyx_plain.zarr", ["--axes", "czyx"], "has 2-channel frames"),
            ("m.msc", "vol.zarr", ["--axes", "zyx", "--per-slice"], "--per-slice"),
            ("m.msc", "nothing.zarr", ["--axes", "zyx", "--chunks", "32"], "nothing.zarr")):
        code, _, err = _cli(capsys, "predict", tmp_path / model, folder / source, "-o", out,
                            *extra)
        assert code != 0 and message in err and err.count("\n") == 1, (message, err)
        assert not out.exists()


def test_read_volume_refuses_a_volume_larger_than_memory(chunk_files, monkeypatch):
    from msclassify.io import _volume, read_volume
    folder, volume = chunk_files
    monkeypatch.setattr(_volume, "available_memory", lambda: volume.nbytes + 1000)
    assert read_volume(folder / "vol.tif", "zyx").data.shape[1:4] == volume.shape
    with pytest.raises(MemoryError, match="predict it chunk by chunk with --chunks"):
        read_volume(folder / "vol.tif", "zyx", reserve=2000)


def test_auto_cost_tradeoff_on_a_volume_holds_out_labelled_slices():
    volume, labels = _blob_volume((13, 43, 38))
    labels[9, :3] = 1                                   # scribbles on 3 slices: 1, 6 and 9
    labels[9, 20:23, 17:21] = 2
    labels[1, 20:23, 17:21] = 0
    labels[1, 30:33, 17:21] = 1
    model = PixelClassifier("fast", n_estimators=8, cost_tradeoff="auto", random_state=0,
                            spacing=(2, 1, 1)).fit(volume, labels)
    assert model.tradeoff_reason_ and len(model.tradeoff_path_) > 1
    assert model.cost_tradeoff_ in [p["cost_tradeoff"] for p in model.tradeoff_path_]
    assert model.predict(volume).shape == volume.shape
    with pytest.raises(ValueError, match="semi_supervised=True is for 2D frames"):
        PixelClassifier(semi_supervised=True, spacing=(2, 1, 1)).fit(volume, labels)


def test_training_windows_of_a_volume_give_the_scribbles_their_whole_volume_features():
    from msclassify.features import FeatureBank
    from msclassify.pixel import training_windows

    rng = np.random.default_rng(4)
    volume = rng.integers(0, 256, (121, 50, 44)).astype(np.uint8)
    labels = np.zeros(volume.shape, np.uint8)
    labels[2, 5, 3:40] = 1                   # near the first slice
    labels[59:61, 20:23, 10:30] = 2          # across a label-chunk border in z
    labels[120, 48:50, 40:44] = 1            # in the last partial block
    spacing = (3, 1, 1)
    frames, label_frames = training_windows(volume, labels, "default", chunks=(60, 50, 44),
                                            spacing=spacing)
    assert sum(int((lab > 0).sum()) for lab in label_frames) == int((labels > 0).sum())
    # the widest candidate (L3 structure tensor, sigma 3.5, z blocks of 2) reaches
    # support_voxels (44, 136, 136): the windows of the three scribbled chunks overlap and the
    # box around them holds fewer voxels than they do apart, so they are read once, as one crop
    assert len(frames) == 1 and frames[0].shape == volume.shape
    bank = FeatureBank("default", spacing=spacing)
    zs, ys, xs = np.nonzero(labels)
    whole = bank.gather(volume, ys, xs, zs=zs)
    got = np.concatenate([bank.gather(f, *np.nonzero(lab)[1:], zs=np.nonzero(lab)[0])
                          for f, lab in zip(frames, label_frames)])
    assert np.array_equal(got[np.lexsort(got.T[::-1])], whole[np.lexsort(whole.T[::-1])])


def test_cli_trains_a_volume_from_windows_around_its_scribbles(tmp_path, capsys):
    """``train --axes zyx --chunks``: only the slices around the scribbled ones are read, and
    the model is the one the API fits on those windows (`training_windows`)."""
    import tifffile
    from msclassify import load_model
    from msclassify.pixel import training_windows
    volume, labels = _blob_volume((64, 40, 40))
    volume = (volume * 255).clip(0, 255).astype(np.uint8)
    scribbles = np.zeros_like(labels)
    scribbles[32] = labels[32]                      # one scribbled slice of 64
    scribbles[32, 35:, :] = 1
    tifffile.imwrite(tmp_path / "vol.tif", volume)
    tifffile.imwrite(tmp_path / "lab.tif", scribbles)
    _write_ome_zarr(tmp_path / "vol.zarr", volume, [4.0, 1.0, 1.0], (8, 40, 40))
    options = ["--features", "fast", "--n-estimators", "5", "--random-state", "0"]
    code, text, err = _cli(capsys, "train", tmp_path / "vol.tif", "--labels",
                           tmp_path / "lab.tif", "--axes", "zyx", "--spacing", "4", "1", "1",
                           "--chunks", "64", "-o", tmp_path / "m.msc", *options)
    assert code == 0, err
    frames, label_frames = training_windows(volume, scribbles, "fast", 64, spacing=(4, 1, 1))
    assert len(frames) == 1 and frames[0].shape[0] < volume.shape[0] // 2
    assert f"read 1 crop(s) around the scribbles: {frames[0].size / 1e6:.2f} of 0.10 Mvoxel" \
        in text
    api = PixelClassifier("fast", n_estimators=5, random_state=0,
                          spacing=(4, 1, 1)).fit(frames, label_frames)
    model = load_model(tmp_path / "m.msc")
    assert model.bank_.grid.spacing == (4.0, 1.0, 1.0)
    assert np.array_equal(model.predict(volume), api.predict(volume))
    # an OME-Zarr volume takes this path without --chunks (chunks of 128: the same crop), its
    # spacing from the NGFF scale
    code, text, err = _cli(capsys, "train", tmp_path / "vol.zarr", "--labels",
                           tmp_path / "lab.tif", "--axes", "zyx", "-o", tmp_path / "z.msc",
                           *options)
    assert code == 0 and "recorded in" in text and "read 1 crop(s)" in text, err
    assert np.array_equal(load_model(tmp_path / "z.msc").predict(volume), api.predict(volume))
    tifffile.imwrite(tmp_path / "short.tif", scribbles[:60])
    tifffile.imwrite(tmp_path / "none.tif", np.zeros_like(scribbles))
    for extra, message in ((["--per-slice"], "--per-slice trains a 2D model"),
                           (["--labels", tmp_path / "short.tif"], "give labels of the volume's"),
                           (["--labels", tmp_path / "none.tif"], "hold no scribbles"),
                           ([], "records no voxel spacing")):
        labels_option = [] if "--labels" in extra else ["--labels", tmp_path / "lab.tif"]
        code, _, err = _cli(capsys, "train", tmp_path / "vol.tif", *labels_option, "--axes",
                            "zyx", "--chunks", "16", "-o", tmp_path / "bad.msc", *options,
                            *(extra if extra else []),
                            *([] if extra == [] or "--per-slice" in extra
                              else ["--spacing", "4", "1", "1"]))
        assert code != 0 and message in err and err.count("\n") == 1, (message, err)
        assert not (tmp_path / "bad.msc").exists()


def test_open_volume_refuses_a_missing_or_truncated_chunk_and_an_unknown_ngff_version(tmp_path):
    import zarr
    from numcodecs import Blosc

    from msclassify.io import FrameReadError, open_volume

    noise = np.random.default_rng(0).integers(0, 65535, (6, 40, 40), dtype=np.uint16)
    root = zarr.open_group(str(tmp_path / "v.zarr"), mode="w", zarr_format=2)
    root.create_array("0", shape=noise.shape, chunks=(2, 16, 16), dtype=noise.dtype,
                      compressors=[Blosc(cname="lz4")])[:] = noise
    root.attrs["multiscales"] = [{"version": "0.4", "axes": list("zyx"), "datasets": [
        {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [3, 1, 1]}]}]}]
    (tmp_path / "v.zarr" / "0" / "1.0.0").unlink()                        # a lost chunk
    chunk = tmp_path / "v.zarr" / "0" / "2.1.1"                           # half copied
    chunk.write_bytes(chunk.read_bytes()[:500])
    volume = open_volume(tmp_path / "v.zarr", "zyx")
    assert volume.spacing == (3.0, 1.0, 1.0)
    assert np.array_equal(volume[:2, :16, :16], noise[:2, :16, :16])        # elsewhere it reads
    with pytest.raises(FrameReadError, match=r"v.zarr \(OME-Zarr\): chunk \(1, 0, 0\) .* is "
                                             r"missing"):
        volume[1:3, :8, :8]
    with pytest.raises(FrameReadError, match=r"chunk \(2, 1, 1\) .* holds 500 bytes but its "
                                             r"Blosc header records"):
        volume[4:, 20:30, 20:30]
    # labels may be sparse: a missing chunk reads as zeros, a truncated one is still refused
    labels = open_volume(tmp_path / "v.zarr", "zyx", allow_missing=True)
    assert not labels[2:4, :16, :16].any()
    with pytest.raises(FrameReadError, match=r"holds 500 bytes"):
        labels[4:, 20:30, 20:30]
    # a chunk its codec cannot decode: one line naming the voxels
    zstd = zarr.create_array(str(tmp_path / "z.zarr"), shape=noise.shape, chunks=(2, 16, 16),
                             dtype=noise.dtype)
    zstd[:] = noise
    chunk = tmp_path / "z.zarr" / "c" / "0" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:100])
    with pytest.raises(FrameReadError, match=r"z.zarr: cannot read voxels z 0..2, y 0..8, "
                                             r"x 0..8 .*damaged or truncated"):
        open_volume(tmp_path / "z.zarr", "zyx")[:2, :8, :8]
    root.attrs["multiscales"] = [dict(root.attrs["multiscales"][0], version="0.3")]
    with pytest.raises(FrameReadError, match=r"NGFF\) version 0.3; msclassify reads versions"):
        open_volume(tmp_path / "v.zarr", "zyx")


def test_a_truncated_imagej_volume_is_refused_not_read_as_its_first_slice(tmp_path):
    # tifffile reads a cut-off ImageJ hyperstack as its first page (a 2-D array), so the user
    # was told the axes were wrong ("name each of its 2 axes") instead of the file being cut
    import tifffile

    from msclassify.io import open_volume, read_volume

    volume = (np.arange(6 * 20 * 30) % 251).astype(np.uint8).reshape(6, 20, 30)
    whole = tmp_path / "whole.tif"
    tifffile.imwrite(whole, volume, imagej=True, metadata={"spacing": 3, "axes": "ZYX"})
    cut = tmp_path / "cut.tif"
    cut.write_bytes(whole.read_bytes()[:whole.stat().st_size // 2])
    for read in (lambda path: read_volume(path, "zyx"), lambda path: open_volume(path, "zyx")):
        with pytest.raises(ValueError, match=r"cut.tif is truncated or damaged: its ImageJ header "
                                             r"\('images='\) records 6 images but 1 can be read"):
            read(cut)
        assert read(whole).spacing == (3.0, 1.0, 1.0)
    two_channels = tmp_path / "zcyx.tif"                  # planes of every channel are counted
    tifffile.imwrite(two_channels, np.stack([volume, volume], 1), imagej=True,
                     metadata={"axes": "ZCYX"})
    assert read_volume(two_channels, "zcyx").data.shape[-1] == 2
