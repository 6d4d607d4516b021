"""The distillation teacher's context: the bank's coarse filters read bilinearly at pixels."""

import numpy as np
import pytest

from msclassify import load_model
from msclassify.cegb import train
from msclassify.features import FeatureBank, FeatureSpec
from msclassify.pixel import PixelClassifier, training_set
from msclassify.pixel._distill import snap_outlines, teacher_classes
from msclassify.pixel._teacher_context import context_features, interpolated


def test_interpolated_reads_a_level_value_at_its_block_centre():
    # level 2: 4x4 blocks of 0 and 8; centres at pixels 1.5 and 5.5
    bank = FeatureBank(specs=[FeatureSpec.from_id("L2:intensity:c0")])
    image = np.zeros((8, 8))
    image[:, 4:] = 8.0
    levels = bank.compute_levels(image)
    values = interpolated(levels, np.array([0]), np.zeros(8, int), np.arange(8))[:, 0]
    # clamped up to the first centre, then linear: 1/8 of the step per pixel ... 7/8, clamped
    assert values.tolist() == [0.0, 0.0, 1.0, 3.0, 5.0, 7.0, 8.0, 8.0]


def test_interpolated_equals_the_banks_upsampled_features():
    bank = FeatureBank("default")
    image = np.random.default_rng(0).random((37, 53)).astype(np.float32)
    context = context_features(bank)
    assert [bank.ids[i] for i in context] == [
        f"L{level}:{f}:s3.5:c0" for level in (1, 2)
        for f in ("gauss", "gradmag", "hessian_max", "hessian_min")]
    ys, xs = np.indices(image.shape).reshape(2, -1)
    values = interpolated(bank.compute_levels(image), context, ys, xs)
    up = FeatureBank(specs=[FeatureSpec.make(bank.specs[i].level, bank.specs[i].filter,
                                             bank.specs[i].sigma, upsampled=True)
                            for i in context])
    assert np.array_equal(values, up.compute_full(image, n_threads=1).reshape(values.shape))
    assert context_features(FeatureBank("default", spacing=(4.0, 1.0, 1.0))).size == 0


def test_teacher_class_map_reads_the_context_at_its_pixels():
    # the level-0 column says nothing; the context (the row index) splits the frame at row 10
    level0 = np.zeros((16, 16, 1), np.float32)
    X = np.column_stack([np.zeros(64), np.arange(64) % 16]).astype(np.float32)
    teacher = train(X, (X[:, 1] >= 10).astype(float), "binary", {"n_estimators": 5})
    rows = lambda ys, xs: ys[:, None].astype(np.float32)          # noqa: E731
    for stride in (1, 4):
        classes = teacher_classes(level0, np.array([0]), teacher, (16, 16), stride=stride,
                                  context=rows)
        assert np.array_equal(classes, np.repeat((np.arange(16) >= 10)[:, None], 16, axis=1))


def test_training_set_returns_where_its_rows_are():
    labels = np.zeros((16, 16), np.uint8)
    labels[0, :3] = 1
    labels[9, 9] = 2
    image = np.arange(256.0).reshape(16, 16)
    bank = FeatureBank(specs=[FeatureSpec.from_id("L0:intensity:c0")])
    *found, pixels = training_set(bank.compute_levels, [(image, labels)], np.array([1, 2]), 10,
                                  np.random.default_rng(0), return_pixels=True)
    X = found[0]
    (ys, xs), = pixels
    assert ys.size == X.shape[0] == 14
    assert np.allclose(X[:, 0], bank.compute_levels(image).gather(ys, xs)[:, 0])
    assert (ys[:4].tolist(), xs[:4].tolist()) == ([0, 0, 0, 9], [0, 1, 2, 9])


def test_pixel_classifier_teacher_context(tmp_path):
    image = np.zeros((48, 48))
    image[12:36, 12:36] = 1
    image += 0.1 * np.random.default_rng(0).random(image.shape)
    labels = np.zeros(image.shape, np.uint8)
    labels[:3] = 1
    labels[20:28, 20:28] = 2
    clf = PixelClassifier(n_estimators=5, random_state=0, teacher_context=True).fit(image,
                                                                                   labels)
    level0 = [i for i in clf.bank_.ids if i.startswith("L0:")]
    assert clf.teacher_features_ == level0 + [clf.bank_.ids[i]
                                              for i in context_features(clf.bank_)]
    assert (clf.predict(image) == np.where(image > 0.5, 2, 1)).mean() > 0.9
    path = tmp_path / "m.msc"
    clf.save(path)
    loaded = load_model(path)
    assert loaded.get_params()["teacher_context"] is True
    assert loaded.teacher_features_ == clf.teacher_features_
    plain = PixelClassifier(n_estimators=5, random_state=0).fit(image, labels)
    assert plain.teacher_features_ == level0
    snapped = PixelClassifier(n_estimators=5, random_state=0, teacher_context="snap").fit(
        image, labels)
    assert snapped.teacher_features_ == clf.teacher_features_
    assert (snapped.predict(image) == np.where(image > 0.5, 2, 1)).mean() > 0.9
    snapped.save(path)
    assert load_model(path).get_params()["teacher_context"] == "snap"
    for wrong in ("yes", 1):
        with pytest.raises(ValueError, match="teacher_context must be True, False or 'snap'"):
            PixelClassifier(teacher_context=wrong, distill_weight=0).fit(image, labels)


def test_snap_outlines_moves_a_nearby_outline_and_keeps_what_one_map_alone_has():
    # the plain map: a square 10..19; the context map draws it 3 px larger on every side,
    # misses a blob the plain map has at (2..4, 30..32) and adds one at (30..33, 30..33)
    plain = np.zeros((40, 40), int)
    plain[10:20, 10:20] = 1
    plain[2:5, 30:33] = 1
    context = np.zeros((40, 40), int)
    context[7:23, 7:23] = 1
    context[30:34, 30:34] = 1
    snapped = snap_outlines(context, plain)
    expected = context.copy()
    expected[7:23, 7:23] = plain[7:23, 7:23]     # the square's outline where the plain map has it
    assert np.array_equal(snapped, expected)
    # a wide ring of disagreement (8 px) snaps too
    wide = np.zeros((40, 40), int)
    wide[2:28, 2:28] = 1
    assert np.array_equal(snap_outlines(wide, plain)[2:28, 2:28], plain[2:28, 2:28])
    # several classes: a disagreement bounded by both maps' changes of class 2 vs 3
    three = np.where(plain == 1, 2, 3)
    shifted = np.where(context == 1, 2, 3)
    assert np.array_equal(snap_outlines(shifted, three)[7:23, 7:23], three[7:23, 7:23])
