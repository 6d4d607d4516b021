"""Distillation (msclassify.pixel._distill): the teacher's band, its pixels and their weights."""

import numpy as np
import pytest

from msclassify.cegb import train
from msclassify.features import FeatureBank
from msclassify import load_model
from msclassify.pixel import PixelClassifier
from msclassify.pixel import _distill as distill
from msclassify.pixel._distill import (EDGE_WEIGHT, outline_band, teacher_band,
                                       teacher_classes, teacher_pixels)


def test_teacher_band_is_band_pixels_on_each_side_of_a_class_change():
    classes = np.zeros((9, 9), np.uint8)
    classes[3:6, 3:6] = 1                                   # a 3x3 square
    one = teacher_band(classes, 1)
    # band 1: the square's outer ring of 8-neighbours minus corners (4-neighbours of the
    # square) and every square pixel that touches the outside, i.e. all 9 but the centre
    assert one[4, 4] == False and one[3:6, 3:6].sum() == 8  # noqa: E712
    assert one[2, 4] and one[4, 2] and not one[2, 2] and one.sum() == 8 + 12
    two = teacher_band(classes, 2)                          # band 1 grown by one 8-neighbour
    assert two[4, 4] and two[1, 2] and not two[1, 1] and two.sum() == 7 * 7 - 4
    assert not teacher_band(np.zeros((4, 4), np.uint8), 3).any()


def test_outline_band_narrows_while_the_band_covers_more_than_edge_weight_of_the_frame():
    assert EDGE_WEIGHT == 0.5
    row = np.zeros((1, 8), np.uint8)
    row[0, 4:] = 1                          # one change between columns 3 and 4
    # width 3: columns 1-6, 6 of 8 > half; width 2: columns 2-5, exactly half
    assert teacher_band(row, 3).sum() == 6
    assert outline_band(row, 3).tolist() == [[False, False, True, True, True, True, False,
                                              False]]
    wide = np.zeros((1, 40), np.uint8)
    wide[0, 20:] = 1                        # 6 of 40: the band keeps its 3 pixels
    assert np.array_equal(outline_band(wide, 3), teacher_band(wide, 3))
    # a 4-slice volume split between slices 1 and 2: width 2 is every voxel, width 1 the
    # two slices at the change (half)
    volume = np.zeros((4, 3, 3), np.uint8)
    volume[2:] = 1
    band = outline_band(volume, 3)
    assert band[1:3].all() and not band[[0, 3]].any()
    # no width covers at most a tenth: narrowing cannot single out the outline, width 3 stays
    assert np.array_equal(outline_band(volume, 3, share=0.1), teacher_band(volume, 3))


def _square_case():
    image = np.zeros((32, 32))
    image[8:21, 8:21] = 1.0                                 # edges off the 8x8 grid at 20/21
    bank = FeatureBank(specs=["L0:intensity:c0", "L3:intensity:c0"])
    levels = bank.compute_levels(image)
    X = levels.gather(*np.nonzero(np.ones_like(image, bool)))
    y = (image.ravel() > 0.5).astype(float)
    teacher = train(X[:, :1], y, "binary", {"n_estimators": 3, "learning_rate": 1.0,
                                            "min_samples_leaf": 1})
    return image, bank, levels, teacher


def test_teacher_pixels_carry_the_teachers_class_and_weigh_one_frame_each():
    image, bank, levels, teacher = _square_case()
    labels = np.zeros(image.shape, np.uint8)
    pairs = [(image, labels), (image, labels)]
    X, y, weight = teacher_pixels(lambda frame: levels, pairs, teacher, np.array([0]), 200, 1,
                                  np.random.default_rng(0), stride=1)
    assert X.shape == (400, 2) and y.shape == weight.shape == (400,)
    # the teacher is exact here: its class is the square's, read at each row's pixel
    assert np.array_equal(y, (X[:, 0] > 0.5).astype(float))
    # per frame: 150 rows from the band (the square's 48 border pixels and the 52 outside
    # pixels next to them: 100 < 150, so all of them) weigh EDGE_WEIGHT, the other rows
    # (anywhere) the rest of one frame
    per_frame = np.split(weight, 2)
    for w in per_frame:
        assert w.sum() == pytest.approx(1.0)
        assert w[:100].sum() == pytest.approx(EDGE_WEIGHT)
        assert np.unique(w[100:]).size == 1
    edge_rows = X[:100]
    assert set(np.unique(edge_rows[:, 0])) == {0.0, 1.0}     # both sides of the outline


def test_teacher_class_map_refined_from_a_coarse_grid_equals_the_full_one():
    image, _, levels, teacher = _square_case()
    slots = levels.slot[[0]]
    full = teacher_classes(levels.arrays[0], slots, teacher, image.shape, stride=1)
    assert np.array_equal(full, image > 0.5)          # the teacher is exact on the square
    calls = []
    counting = _CountingTeacher(teacher, calls)
    for stride in (2, 3, 4, 8):
        calls.clear()
        coarse = teacher_classes(levels.arrays[0], slots, counting, image.shape, stride=stride)
        assert np.array_equal(coarse, full), stride
        assert sum(calls) < image.size                # fewer predictions than every pixel
    X, y, _ = teacher_pixels(lambda frame: levels, [(image, np.zeros(image.shape, np.uint8))],
                             teacher, np.array([0]), 200, 1, np.random.default_rng(0), stride=4)
    X1, y1, _ = teacher_pixels(lambda frame: levels, [(image, np.zeros(image.shape, np.uint8))],
                               teacher, np.array([0]), 200, 1, np.random.default_rng(0), stride=1)
    assert np.array_equal(X, X1) and np.array_equal(y, y1)   # same map: same rows drawn


def test_teacher_class_map_cells_refined_where_corners_differ_or_the_teacher_is_unsure():
    # a 1-px line (row 6) between the rows of a stride-4 grid (0, 4, ..., 16): no grid point is
    # of its class, but the teacher is unsure at the grid rows 4 and 8 next to it (intensity
    # 0.3: raw score -0.8, margin 0.8 < 1), so their cells are refined and the line is found;
    # with margin 0 (sure everywhere) it is missed
    image = np.zeros((17, 17), np.float32)         # the grid reaches the last row and column
    image[4:9, :] = 0.3
    image[6, :] = 1.0
    level0 = image[..., None]
    ramp = _RampTeacher()
    classes = teacher_classes(level0, np.array([0]), ramp, image.shape, stride=4, margin=1.0)
    assert np.array_equal(classes, image > 0.5)
    missed = teacher_classes(level0, np.array([0]), ramp, image.shape, stride=4, margin=0.0)
    assert not missed.any()
    # a frame whose size is not a multiple of the stride: the last cells are refined too
    image = np.zeros((14, 15), np.float32)
    image[12:, 13:] = 1.0                             # beyond the last grid row and column
    classes = teacher_classes(image[..., None], np.array([0]), ramp, image.shape, stride=4)
    assert np.array_equal(classes, image > 0.5)


def test_teacher_class_map_coarse_to_fine_with_three_classes_and_a_volume():
    # classes 0 | 1 | 2 in vertical bands with borders at x = 5 and x = 10 (off the stride-4
    # grid), a 3-output teacher sure everywhere (margin 6 between its top two scores): the
    # cells whose corners differ are refined and the map is exact; a volume's sections each
    image = np.zeros((13, 13), np.float32)
    image[:, 5:10] = 1.0
    image[:, 10:] = 2.0
    three = _ThreeClassTeacher()
    classes = teacher_classes(image[..., None], np.array([0]), three, image.shape, stride=4)
    assert np.array_equal(classes, image.astype(int))
    volume = np.stack([image, image[::-1].T])[..., None]     # 2 sections
    classes = teacher_classes(volume, np.array([0]), three, volume.shape[:3], stride=4)
    assert np.array_equal(classes, volume[..., 0].astype(int))


def test_teacher_predicts_refined_points_in_blocks_with_the_same_map(monkeypatch):
    # the refinement's points are predicted a block at a time (their rows are copies): the
    # map is the same and no call but the first grid's gets more rows than a block
    image, _, levels, teacher = _square_case()
    slots = levels.slot[[0]]
    whole = teacher_classes(levels.arrays[0], slots, teacher, image.shape, stride=4)
    monkeypatch.setattr(distill, "_POINT_BLOCK", 3)
    calls = []
    blocked = teacher_classes(levels.arrays[0], slots, _CountingTeacher(teacher, calls),
                              image.shape, stride=4)
    assert np.array_equal(blocked, whole)
    assert len(calls) > 2 and max(calls[1:]) <= 3
    bands = np.zeros((13, 13), np.float32)            # 3 classes in a volume of 2 sections
    bands[:, 5:10], bands[:, 10:] = 1.0, 2.0
    volume = np.stack([bands, bands[::-1].T])[..., None]
    classes = teacher_classes(volume, np.array([0]), _ThreeClassTeacher(), volume.shape[:3],
                              stride=4)
    assert np.array_equal(classes, volume[..., 0].astype(int))


def test_teacher_predicts_a_volumes_grid_and_cells_in_blocks_in_one_byte_a_voxel(monkeypatch):
    # a volume's first grid is predicted a few sections at a time and its mixed cells a block
    # at a time (their rows are copies, and a volume's refinement may be most voxels): the
    # map is the same, held in one byte a voxel, and no call predicts more rows than a block
    # or one section's grid. A teacher unsure everywhere refines every voxel: the map is
    # the per-voxel one.
    volume = np.random.default_rng(0).random((6, 21, 19)).astype(np.float32)[..., None]
    whole = teacher_classes(volume, np.array([0]), _RampTeacher(), volume.shape[:3], stride=4)
    assert whole.dtype == np.uint8
    assert np.array_equal(whole, volume[..., 0] > 0.5)
    monkeypatch.setattr(distill, "_POINT_BLOCK", 5)
    calls = []
    blocked = teacher_classes(volume, np.array([0]), _CountingTeacher(_RampTeacher(), calls),
                              volume.shape[:3], stride=4)
    assert np.array_equal(blocked, whole)
    section_grid = 6 * 5                                  # ceil(21 / 4) x ceil(19 / 4)
    assert calls[:6] == [section_grid] * 6 and max(calls[6:]) <= 5


class _ThreeClassTeacher:
    """Raw score 6 for class round(x) (0, 1 or 2), 0 for the others."""

    def predict_raw(self, X):
        return 6.0 * (np.rint(X[:, :1]) == np.arange(3)[None, :])


class _RampTeacher:
    """A teacher whose raw score is 4 * (intensity - 0.5): sure at 0 and 1, unsure near 0.5."""

    def predict_raw(self, X):
        return 4.0 * (X[:, 0] - 0.5)


class _CountingTeacher:
    """A teacher that records how many rows it predicts."""

    def __init__(self, booster, calls):
        self.booster, self.calls = booster, calls

    def predict_raw(self, X):
        self.calls.append(X.shape[0])
        return self.booster.predict_raw(X)


def test_pixel_classifier_distils_only_with_full_resolution_and_coarse_features(tmp_path):
    image, _, _, _ = _square_case()
    labels = np.zeros(image.shape, np.uint8)
    labels[0:2, :] = 1
    labels[12:16, 12:16] = 2
    clf = PixelClassifier(n_estimators=3, random_state=0).fit(image, labels)
    assert clf.teacher_features_ == [i for i in clf.bank_.ids if i.startswith("L0:")]
    path = tmp_path / "m.msc"
    clf.save(path)
    assert load_model(path).teacher_features_ == clf.teacher_features_
    off = PixelClassifier(n_estimators=3, distill_weight=0, random_state=0).fit(image, labels)
    assert off.teacher_features_ is None
    fine_only = PixelClassifier(["L0:intensity:c0", "L0:gauss:s1.0:c0"], n_estimators=3,
                                random_state=0).fit(image, labels)
    assert fine_only.teacher_features_ is None
    with pytest.raises(ValueError, match="distill_weight"):
        PixelClassifier(distill_weight=-1).fit(image, labels)
    with pytest.raises(ValueError, match="n_distill_pixels"):
        PixelClassifier(n_distill_pixels=0).fit(image, labels)


def test_teacher_rounds_fall_with_the_classes_unless_given():
    # 2 classes: the model's rounds; K > 2: round(2 n / K), at least 1; given: as given
    assert distill.teacher_rounds(50, 2) == 50
    assert [distill.teacher_rounds(50, k) for k in (3, 4, 5, 8)] == [33, 25, 20, 12]
    assert distill.teacher_rounds(1, 8) == 1
    assert distill.teacher_rounds(50, 4, 50) == 50 and distill.teacher_rounds(50, 2, 7) == 7
    # a volume: half of that, at least 1; given rounds stay as given
    assert [distill.teacher_rounds(50, k, volume=True) for k in (2, 3, 4)] == [25, 16, 12]
    assert distill.teacher_rounds(1, 2, volume=True) == 1
    assert distill.teacher_rounds(50, 2, 7, volume=True) == 7


def _teacher_steps(clf, image, labels):
    """The boosting rounds the fit's "teacher" stage counted (its last step)."""
    steps = []
    clf.fit(image, labels, progress=lambda report: steps.append((report.stage, report.step,
                                                                 report.n_steps)))
    teacher = [(step, n) for stage, step, n in steps if stage == "teacher"]
    assert teacher and teacher[-1][0] == teacher[-1][1]
    return teacher[-1][1]


def test_many_classes_fit_a_teacher_of_fewer_rounds_and_two_classes_the_same_model():
    rng = np.random.default_rng(0)
    image = np.zeros((48, 48))
    for k in range(4):                                      # four vertical bands, 4 classes
        image[:, 12 * k:12 * k + 12] = k
    image += rng.normal(0, 0.2, image.shape)
    labels = np.zeros((48, 48), np.uint8)
    for k in range(4):
        labels[4:44:3, 12 * k + 4:12 * k + 8] = k + 1
    common = dict(n_estimators=8, class_weight=None, random_state=0)
    assert _teacher_steps(PixelClassifier(**common), image, labels) == 4      # round(2 * 8 / 4)
    assert _teacher_steps(PixelClassifier(teacher_estimators=8, **common), image, labels) == 8
    assert _teacher_steps(PixelClassifier(teacher_estimators=3, **common), image, labels) == 3
    # two classes: the teacher keeps the model's rounds, so the model is the one of 8 given
    two = np.where(labels > 2, 2, np.where(labels > 0, 1, 0)).astype(np.uint8)
    assert _teacher_steps(PixelClassifier(**common), image, two) == 8
    same = [PixelClassifier(teacher_estimators=t, **common).fit(image, two).predict_proba(image)
            for t in (None, 8)]
    np.testing.assert_array_equal(same[0], same[1])
    with pytest.raises(ValueError, match="teacher_estimators"):
        PixelClassifier(teacher_estimators=0).fit(image, labels)


def test_a_volume_fits_a_teacher_of_half_the_rounds_and_given_rounds_are_the_old_model():
    rng = np.random.default_rng(0)
    volume = np.zeros((6, 24, 24))
    volume[:, :, 12:] = 1                                    # two halves, 2 classes
    volume += rng.normal(0, 0.2, volume.shape)
    labels = np.zeros(volume.shape, np.uint8)
    labels[[1, 4], 4:20:3, 2:8] = 1
    labels[[1, 4], 4:20:3, 16:22] = 2
    common = dict(n_estimators=8, class_weight=None, random_state=0, spacing=(1, 1, 1))
    assert _teacher_steps(PixelClassifier(**common), volume, labels) == 4
    assert _teacher_steps(PixelClassifier(teacher_estimators=8, **common), volume, labels) == 8
    # the same scribbles as 2D frames (no spacing): the model's rounds
    flat = dict(common, spacing=None)
    assert _teacher_steps(PixelClassifier(**flat), list(volume[[1, 4]]),
                          list(labels[[1, 4]])) == 8
