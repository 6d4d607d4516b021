"""The synthetic fly video shipped in the package (datasets/data/flies), its generator and loader."""

import shutil

import numpy as np
import pytest
from scipy import ndimage as ndi
from skimage.measure import regionprops

from msclassify.datasets import load_sample_flies, make_sample_flies, sample_data_path
from msclassify.metrics import label_instances, seg_score

SHIPPED = sample_data_path("flies")
BACKGROUND, FLY = 1, 2


@pytest.fixture(scope="module")
def flies():
    return load_sample_flies()


def test_shapes_dtypes_and_size_on_disk(flies):
    assert flies.frames.shape == flies.masks.shape == flies.scribbles.shape == (8, 1024, 1024)
    assert (flies.frames.dtype, flies.masks.dtype, flies.scribbles.dtype) == (
        np.uint8, np.uint16, np.uint8)
    total = sum((SHIPPED / name).stat().st_size
                for name in ("frames.tif", "masks.tif", "scribbles.tif"))
    assert total < 6e6


def test_frame_zero_regenerates_bit_identically(flies):
    again = make_sample_flies(frame_indices=[0])
    np.testing.assert_array_equal(again.frames[0], flies.frames[0])
    np.testing.assert_array_equal(again.masks[0], flies.masks[0])
    np.testing.assert_array_equal(again.scribbles[0], flies.scribbles[0])


def test_four_flies_with_stable_ids_each_one_connected_object(flies):
    for t, mask in enumerate(flies.masks):
        np.testing.assert_array_equal(np.unique(mask), [0, 1, 2, 3, 4])
        for fly in range(1, 5):
            _, n_parts = ndi.label(mask == fly, structure=np.ones((3, 3)))
            assert n_parts == 1, f"frame {t}: fly {fly} is in {n_parts} pieces"
    # flies never touch, so a perfect semantic prediction scores SEG = 1 after labelling
    assert seg_score(flies.masks, label_instances(flies.masks > 0)) == 1.0


def test_flies_are_the_size_of_the_real_ones_and_walk(flies):
    previous = None
    for mask in flies.masks:
        props = {p.label: p for p in regionprops(mask)}
        for p in props.values():
            assert 60 <= p.axis_major_length <= 110      # real flies: ~60-90 px body, legs add
            assert 1800 <= p.area <= 4500
        if previous is not None:
            for fly, p in props.items():
                moved = np.hypot(*np.subtract(p.centroid, previous[fly].centroid))
                turned = abs(np.angle(np.exp(2j * (p.orientation - previous[fly].orientation))))
                assert moved > 2 or turned > 0.05, f"fly {fly} did not move"
        previous = props


def test_bright_bodies_translucent_wings_dark_floor(flies):
    frames, masks = flies.frames.astype(float), flies.masks
    far_from_flies = ndi.distance_transform_edt(masks[0] == 0) > 10
    assert 8 <= np.median(frames[0][far_from_flies]) <= 20
    fly_pixels = frames[0][masks[0] > 0]
    assert np.percentile(fly_pixels, 90) > 190              # thorax and head
    # wings over the floor and legs: fly pixels that are much darker than the body
    assert 0.1 < np.mean((fly_pixels > 40) & (fly_pixels < 160)) < 0.6
    # dust and hairs: bright background pixels that are not fly
    assert np.sum(frames[0][far_from_flies] > 60) > 200


def test_contrast_resembles_the_real_video(flies, shared_data):
    clip = shared_data("fly_sleap/clip.mp4")
    import imageio.v3 as iio

    real = iio.imread(clip, index=0, plugin="pyav")[..., 0].astype(float)
    synthetic = flies.frames[0].astype(float)
    assert abs(np.median(real) - np.median(synthetic)) < 4
    assert abs(np.percentile(real, 95) - np.percentile(synthetic, 95)) < 8
    assert np.percentile(real, 99.9) > 150 and np.percentile(synthetic, 99.9) > 150


def test_scribbles_are_correct_user_like_and_only_on_two_frames(flies):
    scribbles, masks, frames = flies.scribbles, flies.masks, flies.frames
    assert set(np.unique(scribbles)) == {0, BACKGROUND, FLY}
    assert not scribbles[2:].any()
    for t in (0, 1):
        labels, mask = scribbles[t], masks[t]
        assert np.all(mask[labels == FLY] > 0)
        distance_to_fly = ndi.distance_transform_edt(mask == 0)
        assert distance_to_fly[labels == BACKGROUND].min() > 3
        # a loose outline: background strokes a few pixels outside some flies
        near = (labels == BACKGROUND) & (distance_to_fly < 15)
        assert len(np.unique(ndi.label(near, structure=np.ones((3, 3)))[0])) > 1
        background_values = frames[t][labels == BACKGROUND]
        assert np.sum(background_values > 60) > 20          # strokes on dust and hairs
        for fly in range(1, 5):
            strokes = (labels == FLY) & (mask == fly)
            assert strokes.sum() > 100
            # strokes run from the head to the wing tips: they span most of the fly
            body = regionprops((mask == fly).astype(np.uint8))[0]
            stroke = regionprops(strokes.astype(np.uint8))[0]
            assert stroke.axis_major_length > 0.6 * body.axis_major_length


def test_loader_regenerates_into_the_cache_when_files_are_missing(flies, tmp_path, monkeypatch):
    empty = tmp_path / "sample_data"
    empty.mkdir()
    monkeypatch.setenv("MSCLASSIFY_SAMPLE_DATA", str(empty))
    monkeypatch.setenv("MSCLASSIFY_CACHE", str(tmp_path / "cache"))
    regenerated = load_sample_flies()
    # the whole set, regenerated, equals the committed one
    for name in ("frames", "masks", "scribbles"):
        np.testing.assert_array_equal(getattr(regenerated, name), getattr(flies, name))
    cached = tmp_path / "cache" / "sample_data" / "flies"
    assert sorted(p.name for p in cached.iterdir()) == ["frames.tif", "masks.tif", "scribbles.tif"]
    assert not (empty / "flies").exists()
    # a second load reads the cached copy instead of rendering again
    written = {path: path.stat().st_mtime_ns for path in cached.iterdir()}
    np.testing.assert_array_equal(load_sample_flies().masks, flies.masks)
    assert {path: path.stat().st_mtime_ns for path in cached.iterdir()} == written


def test_a_wrong_sample_data_folder_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("MSCLASSIFY_SAMPLE_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setenv("MSCLASSIFY_CACHE", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match="MSCLASSIFY_SAMPLE_DATA=.*nowhere is not a folder"):
        load_sample_flies()
    assert not (tmp_path / "cache").exists()


def test_loader_reports_a_damaged_file(tmp_path, monkeypatch):
    folder = tmp_path / "sample_data" / "flies"
    shutil.copytree(SHIPPED, folder)
    (folder / "masks.tif").write_bytes(b"not a tiff")
    monkeypatch.setenv("MSCLASSIFY_SAMPLE_DATA", str(tmp_path / "sample_data"))
    with pytest.raises(ValueError, match="masks.tif"):
        load_sample_flies()
