"""The object stage on crops: components found block by block, objects measured on their
crops and split in place give the tables of the whole-frame computations, bit for bit."""

import numpy as np
import pandas as pd
import pytest
from scipy import ndimage as ndi
from skimage.measure import regionprops_table

from msclassify.objects import ObjectPipeline, ObjectSplitter, find_objects, measure_objects
from msclassify.objects._measure import orientation_body, orientation_weighted

EIGHT = np.ones((3, 3), dtype=bool)


def whole_frame_components(mask, min_size):
    """The reference: scipy's label of the whole frame, small components dropped, the rest
    renumbered in order."""
    labelled, n = ndi.label(mask, structure=EIGHT)
    sizes = np.bincount(labelled.ravel(), minlength=n + 1)
    kept = (sizes >= min_size) & (np.arange(n + 1) > 0)
    numbers = np.where(kept, np.cumsum(kept), 0)
    return numbers[labelled]


def blobs(shape, seed, density):
    """Random blobs covering about ``density`` of the frame."""
    smooth = ndi.gaussian_filter(np.random.default_rng(seed).random(shape), 1.5)
    return smooth > np.quantile(smooth, 1 - density)


# -- components, block by block -----------------------------------------------------------------


def test_pixels_joined_across_a_block_corner_are_one_object():
    # (15, 15) and (16, 16) lie in different 16-px blocks, joined only diagonally
    labels = np.zeros((40, 40), np.uint8)
    labels[15, 15] = labels[16, 16] = 1
    labels[30, 2] = 1
    assert find_objects(labels, 1)[[15, 16, 30], [15, 16, 2]].tolist() == [1, 1, 2]


def test_objects_are_numbered_by_their_first_pixel_not_by_their_block():
    # the object in the left block starts lower (row 10) than the one in a block further right
    # (row 2): scipy numbers in raster order of the first pixel, so the right one is 1
    labels = np.zeros((20, 64), np.uint8)
    labels[10:14, 20] = 1
    labels[2:5, 50] = 1
    objects = find_objects(labels, 1)
    assert objects[10, 20] == 2 and objects[2, 50] == 1


@pytest.mark.parametrize("shape", [(37, 53), (64, 64), (100, 33), (1, 70)])
@pytest.mark.parametrize("density", [0.02, 0.2, 0.45])
@pytest.mark.parametrize("min_size", [0, 1, 6])
def test_components_equal_scipys_label_of_the_whole_frame(shape, density, min_size):
    for seed in range(3):
        mask = blobs(shape, seed, density)
        assert ndi.label(mask, structure=EIGHT)[1] >= 1
        assert np.array_equal(find_objects(mask.astype(np.uint8), 1, min_size=min_size),
                              whole_frame_components(mask, min_size))


# -- measured on crops ---------------------------------------------------------------------------


def whole_frame_table(objects, image):
    """The reference: one regionprops_table of the whole frame (and the frame's channel)."""
    columns = regionprops_table(
        objects, image[..., None],
        properties=("label", "area", "centroid", "bbox", "orientation", "axis_major_length",
                    "axis_minor_length", "eccentricity", "solidity", "intensity_mean",
                    "intensity_max", "centroid_weighted"),
        extra_properties=(orientation_weighted, orientation_body))
    return {name: values for name, values in columns.items()}


@pytest.mark.parametrize("seed", range(4))
def test_crops_measure_as_the_whole_frame_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    objects = find_objects(blobs((90, 130), seed, 0.25).astype(np.uint8), 1)
    image = rng.integers(0, 256, objects.shape).astype(np.uint8)
    table = measure_objects(objects, image)
    reference = whole_frame_table(objects, image)
    assert len(table) == objects.max() > 3
    assert table["object"].tolist() == reference["label"].tolist()
    pairs = {"centroid_weighted-0": "centroid_weighted-0-0",
             "centroid_weighted-1": "centroid_weighted-1-0", "intensity_mean": "intensity_mean-0",
             "intensity_max": "intensity_max-0", "orientation_weighted": "orientation_weighted-0",
             "orientation_body": "orientation_body-0"}
    for column in table.columns[2:]:
        expected = np.asarray(reference[pairs.get(column, column)], dtype=table[column].dtype)
        assert np.array_equal(table[column].to_numpy(), expected, equal_nan=True), column


def test_a_colour_frame_and_the_probability_measure_as_before_on_crops():
    # several channels: stacked as float32, each measured; the boxes handed in or found
    rng = np.random.default_rng(5)
    objects = find_objects(blobs((60, 70), 5, 0.3).astype(np.uint8), 1)
    image = rng.random((60, 70, 3))
    probability = rng.random((60, 70))
    table = measure_objects(objects, image, probability, boxes=ndi.find_objects(objects))
    assert table.equals(measure_objects(objects, image, probability))
    stack = np.stack([image[..., 0], image[..., 1], image[..., 2], probability], -1)
    reference = regionprops_table(objects, stack.astype(np.float32),
                                  properties=("label", "intensity_mean", "centroid_weighted"))
    assert np.array_equal(table["intensity_mean-2"], reference["intensity_mean-2"])
    assert np.array_equal(table["probability_mean"], reference["intensity_mean-3"])
    assert np.array_equal(table["centroid_weighted-1-1"], reference["centroid_weighted-1-1"])


def test_objects_far_apart_and_one_as_wide_as_the_frame_pack_into_rows():
    objects = np.zeros((30, 40), np.int32)
    objects[0, :] = 1                              # as wide as the frame: a row of its own
    objects[5:9, 30:34] = 2
    objects[20:29, 1:3] = 3
    objects[25, 39] = 4
    image = np.arange(30 * 40, dtype=np.float64).reshape(30, 40)
    table = measure_objects(objects, image)
    assert table["area"].tolist() == [40, 16, 18, 1]
    assert table["centroid-0"].tolist() == [0, 6.5, 24, 25]
    assert table["centroid-1"].tolist() == [19.5, 31.5, 1.5, 39]
    assert table[["bbox-0", "bbox-1", "bbox-2", "bbox-3"]].values.tolist() == [
        [0, 0, 1, 40], [5, 30, 9, 34], [20, 1, 29, 3], [25, 39, 26, 40]]
    assert table["intensity_max"].tolist() == [39, 8 * 40 + 33, 28 * 40 + 2, 25 * 40 + 39]


def test_gaps_in_the_numbers_are_skipped_and_no_objects_give_the_same_columns():
    objects = np.zeros((10, 10), np.int32)
    objects[1:3, 1:3] = 2
    objects[6:9, 6:8] = 5
    table = measure_objects(objects, objects * 1.0)
    assert table["object"].tolist() == [2, 5] and table["area"].tolist() == [4, 6]
    empty = measure_objects(np.zeros((10, 10), np.int32), np.zeros((10, 10)))
    assert list(empty.columns) == list(table.columns) and len(empty) == 0
    assert (empty.dtypes == table.dtypes).all()


# -- split in place ------------------------------------------------------------------------------


def touching_discs_with_a_diagonal_tail():
    """Two overlapping discs of radius 6 and two pixels joined to the first only diagonally
    (the watershed floods across edges, so it does not reach them)."""
    yy, xx = np.mgrid[:20, :34]
    both = ((yy - 10) ** 2 + (xx - 10) ** 2 < 36) | ((yy - 10) ** 2 + (xx - 21) ** 2 < 36)
    assert both[6, 6] and not both[5, 5] and not both[5, 6] and not both[6, 5]
    both[5, 5] = both[4, 4] = True
    return both


def test_a_split_objects_box_keeps_the_pixels_the_flood_did_not_reach():
    labels = touching_discs_with_a_diagonal_tail().astype(np.uint8) + 1
    pipeline = ObjectPipeline(target=2, classes=(1, 2), splitter=ObjectSplitter())
    table = pipeline.frame_table(labels, None, None, frame=0)
    objects = find_objects(labels, 2, split=ObjectSplitter())
    assert table["object"].tolist() == [1, 2]
    # the tail stays with the first piece: its box starts at row 4, column 4
    assert objects[4, 4] == objects[5, 5] == objects[10, 10] == 1
    assert table[["bbox-0", "bbox-1"]].values.tolist()[0] == [4, 4]
    assert table["area"].sum() == np.count_nonzero(labels == 2)
    assert table.equals(measure_objects(objects, frame=0))


def test_split_in_place_with_boxes_equals_split_of_a_copy():
    both = touching_discs_with_a_diagonal_tail()
    objects = np.zeros((30, 80), np.int32)
    objects[:20, :34] = both
    objects[5:25, 40:74][both] = 2
    splitter = ObjectSplitter()
    split = splitter.split(objects)
    assert split.max() == 4 and objects.max() == 2          # the input is left as it was
    assert np.array_equal(split, splitter.split(objects, boxes=ndi.find_objects(objects)))
    labels = (objects > 0).astype(np.uint8) + 1
    table = ObjectPipeline(2, (1, 2), splitter=splitter).frame_table(labels, None, None, 0)
    assert table.equals(measure_objects(split, frame=0))
    assert pd.Series(table["area"]).sum() == np.count_nonzero(objects)


# -- the splitter's test for one deep maximum, before h_maxima -----------------------------------


def hill(shape, centre, height, width):
    rows, cols = np.mgrid[:shape[0], :shape[1]]
    return height * np.exp(-((rows - centre[0]) ** 2 + (cols - centre[1]) ** 2) / width ** 2)


def h_maxima_regions(height, h):
    from skimage.morphology import h_maxima
    return ndi.label(h_maxima(height, h), structure=EIGHT)[1]


@pytest.mark.parametrize("second, saddle_gap, expected", [
    (10.0, 5.0, True),     # a bump on the side of the hill (h = 20): one deep maximum
    (10.0, 50.0, True),    # a hill of 10 on its own: less deep than h
    (30.0, 50.0, False),   # a hill of 30 on its own: two deep maxima
    (100.0, 20.0, False),  # two equal hills (a tie h_maxima keeps both): not proven
])
def test_one_deep_maximum_is_proven_only_where_h_maxima_finds_one(second, saddle_gap, expected):
    from msclassify.objects._split import _at_most_one_deep_maximum
    shape = (30, 90)
    height = (hill(shape, (15, 20), 100.0, 8.0)
              + hill(shape, (15, 20 + saddle_gap), second, 4.0)).astype(np.float32)
    h = 0.2 * float(height.max())
    assert _at_most_one_deep_maximum(height, h) == expected
    if expected:
        assert h_maxima_regions(height, h) == 1


@pytest.mark.parametrize("levels", [None, 12])
def test_one_deep_maximum_is_never_claimed_where_h_maxima_finds_two(levels):
    """Random smoothed landscapes (also quantised to a few levels, so plateaus and exact ties
    occur) inside random components, as the splitter makes them: wherever the test says one
    deep maximum, h_maxima finds one region; and it does say so for most single peaks."""
    from msclassify.objects._split import _at_most_one_deep_maximum
    claimed = single = 0
    for seed in range(120):
        rng = np.random.default_rng(seed)
        shape = tuple(rng.integers(12, 60, 2))
        surface = ndi.gaussian_filter(rng.random(shape), rng.uniform(1.5, 5))
        if levels is not None:
            surface = np.round(surface / surface.max() * levels)
        inside = blobs(shape, seed, 0.7)
        height = np.where(inside, surface - min(float(surface[inside].min()), 0.0),
                          0).astype(np.float32)
        top = float(height.max())
        if top <= 0:
            continue
        for depth in (0.05, 0.2, 0.5):
            regions = h_maxima_regions(height, depth * top)
            proven = _at_most_one_deep_maximum(height, depth * top)
            assert not (proven and regions >= 2), (seed, depth)
            single += regions <= 1
            claimed += proven
    assert claimed >= 0.5 * single


# -- the object classifier's features on crops ----------------------------------------------------


@pytest.mark.parametrize("colour", [False, True])
def test_shape_and_intensity_features_on_crops_equal_regionprops_of_the_frame(colour):
    from msclassify.objects import object_features
    rng = np.random.default_rng(3)
    objects = find_objects(blobs((90, 120), 3, 0.3).astype(np.uint8), 1).astype(np.int32)
    objects[objects == 2] = 0                           # a gap in the numbers
    frame = rng.integers(0, 255, (90, 120) + ((3,) if colour else ()), dtype=np.uint8)
    grey = frame.astype(np.float32)
    grey = grey.mean(axis=-1) if colour else grey
    expected = {
        **{f"shape:{k}": v for k, v in regionprops_table(objects, properties=(
            "area", "axis_major_length", "axis_minor_length", "eccentricity",
            "extent")).items()},
        **{f"intensity:{k}": v for k, v in regionprops_table(
            objects, intensity_image=grey, properties=(
                "intensity_mean", "intensity_std", "intensity_min",
                "intensity_max")).items()}}
    table = object_features(objects, frame, ["shape", "intensity"])
    assert list(table.columns) == list(expected) and len(table) == objects.max() - 1
    for name, values in expected.items():
        np.testing.assert_array_equal(table[name].to_numpy(), np.asarray(values, np.float64),
                                      err_msg=name)
