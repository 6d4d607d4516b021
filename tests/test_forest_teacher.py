"""The extra-trees distillation teacher (msclassify.pixel._forest_teacher, teacher="forest")."""

import numpy as np
import pytest

from msclassify.pixel import PixelClassifier, _classifier
from msclassify.pixel._distill import fit_teacher, teacher_classes
from msclassify.pixel._forest_teacher import PROBABILITY_FLOOR, ForestTeacher

# log-odds of a probability clipped to 1 - floor: log(0.999 / 0.001)
_TOP = np.log((1 - PROBABILITY_FLOOR) / PROBABILITY_FLOOR)


def test_forest_teacher_raw_scores_are_clipped_log_odds_of_its_vote():
    X = np.arange(10, dtype=np.float32)[:, None]
    y = (X[:, 0] >= 5).astype(float)                  # one threshold splits the classes
    teacher = ForestTeacher(n_estimators=5, random_state=0).fit(X, y, np.ones(10), 2)
    raw = teacher.predict_raw(np.array([[0.0], [9.0]], np.float32))
    # every tree puts 0 and 9 in pure leaves: probability 0 / 1, clipped to the floor
    assert raw.shape == (2,)
    assert raw == pytest.approx([-_TOP, _TOP])


def test_forest_teacher_with_a_class_no_row_has_gives_it_the_floor():
    X = np.arange(12, dtype=np.float32)[:, None]
    y = np.where(X[:, 0] < 6, 0.0, 2.0)               # class 1 of 3 is never seen
    teacher = ForestTeacher(n_estimators=5, random_state=0).fit(X, y, np.ones(12), 3)
    raw = teacher.predict_raw(np.array([[0.0], [11.0]], np.float32))
    assert raw.shape == (2, 3)
    assert raw[:, 1] == pytest.approx(np.log(PROBABILITY_FLOOR))
    assert raw.argmax(axis=1).tolist() == [0, 2]


def test_fit_teacher_forest_leaves_out_rows_of_weight_zero():
    X = np.stack([np.arange(20), np.zeros(20)], axis=1).astype(np.float32)
    y = (X[:, 0] >= 10).astype(float)
    y[19] = 0.0                                       # a cost sample (weight 0) says class 0
    weight = np.ones(20)
    weight[19] = 0.0
    teacher = fit_teacher(X, y, weight, {"random_state": 0}, np.array([0]), "binary", None,
                          forest=True)
    assert isinstance(teacher, ForestTeacher)
    assert teacher.forest_.n_features_in_ == 1        # column 0 only
    # trees that had seen row 19 would split at 18.5 and call x = 19 class 0
    assert teacher.predict_raw(np.array([[0.0], [19.0]], np.float32)) == \
        pytest.approx([-_TOP, _TOP])


def test_teacher_class_map_from_a_forest_equals_the_square():
    image = np.zeros((32, 32, 1), np.float32)
    image[8:21, 8:21] = 1.0
    X = image.reshape(-1, 1)
    teacher = ForestTeacher(n_estimators=3, random_state=0).fit(
        X, X[:, 0].astype(float), np.ones(X.shape[0]), 2)
    classes = teacher_classes(image, np.array([0]), teacher, (32, 32), stride=4)
    assert np.array_equal(classes, image[..., 0] > 0.5)


def _square():
    image = np.zeros((32, 32))
    image[8:21, 8:21] = 1.0
    labels = np.zeros(image.shape, np.uint8)
    labels[0:2, :] = 1
    labels[12:16, 12:16] = 2
    return image, labels                              # 64 + 16 = 80 scribbled pixels


@pytest.mark.parametrize("teacher, forest", [("boost", False), ("forest", True)])
def test_teacher_forest_fits_the_forest_and_the_default_boosts(monkeypatch, teacher, forest):
    image, labels = _square()
    seen = []

    def spy(*args, forest=False, **kwargs):
        seen.append(forest)
        return fit_teacher(*args, forest=forest, **kwargs)

    monkeypatch.setattr(_classifier, "fit_teacher", spy)
    clf = PixelClassifier(n_estimators=10, min_samples_leaf=5, teacher=teacher,
                          random_state=0).fit(image, labels)
    assert seen and set(seen) == {forest}
    assert clf.predict(image)[14, 14] == 2 and clf.predict(image)[0, 5] == 1
    assert PixelClassifier().teacher == "boost"


def test_teacher_must_be_boost_or_forest():
    image, labels = _square()
    with pytest.raises(ValueError, match="teacher must be 'boost' or 'forest'"):
        PixelClassifier(teacher="rf").fit(image, labels)
