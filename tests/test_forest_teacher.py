"""The extra-trees distillation teacher and the mean and blend of teachers
(msclassify.pixel._forest_teacher, teacher="forest", "mean", "blend")."""

import numpy as np
import pytest

from msclassify.cegb import Booster, most_probable_class
from msclassify.pixel import PixelClassifier, _classifier
from msclassify.features import FeatureBank
from msclassify.pixel._distill import fit_teacher, teacher_classes, teacher_pixels
from msclassify.pixel._forest_teacher import (
    BLEND_FOREST_TREES,
    PROBABILITY_FLOOR,
    BlendTeacher,
    ForestTeacher,
    MeanTeacher,
)

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
                          kind="forest")
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


@pytest.mark.parametrize("teacher", ["boost", "forest", "mean"])
def test_teacher_parameter_picks_the_teachers_learner(monkeypatch, teacher):
    image, labels = _square()
    seen = []

    def spy(*args, kind="boost", **kwargs):
        seen.append(kind)
        return fit_teacher(*args, kind=kind, **kwargs)

    monkeypatch.setattr(_classifier, "fit_teacher", spy)
    clf = PixelClassifier(n_estimators=10, min_samples_leaf=5, teacher=teacher,
                          random_state=0).fit(image, labels)
    assert seen and set(seen) == {teacher}
    assert clf.predict(image)[14, 14] == 2 and clf.predict(image)[0, 5] == 1
    assert PixelClassifier().teacher == "blend"


def test_teacher_must_be_a_known_learner():
    image, labels = _square()
    known = "teacher must be one of 'boost', 'forest', 'mean', 'blend'"
    with pytest.raises(ValueError, match=known):
        PixelClassifier(teacher="rf").fit(image, labels)


class _Const:
    """A teacher of one raw score at every row."""

    def __init__(self, value):
        self.value = value

    def predict_raw(self, X):
        return np.full(X.shape[0], self.value)


class _Fixed:
    """A teacher whose raw scores are given; a row ``X[i]`` (if any) is the index of its score."""

    def __init__(self, raw):
        self.raw = np.asarray(raw, np.float64)

    def predict_raw(self, X):
        return self.raw if X is None else self.raw[np.asarray(X)[:, 0].astype(int)]


def test_mean_teacher_takes_the_class_of_the_mean_and_adds_the_margins():
    # boost sure of class 1 (log-odds 4), the forest mildly of class 0 (-1): mean 1.5, class 1;
    # boost mildly of class 1 (1), the forest of class 0 (-3): mean -1, class 0.
    # The raw score is the sum (3, -2): the mean's sign, and both teachers' sureness together
    boost, forest = _Fixed([4.0, 1.0]), _Fixed([-1.0, -3.0])
    raw = MeanTeacher([boost, forest]).predict_raw(None)
    assert raw == pytest.approx([3.0, -2.0])
    assert most_probable_class(raw).tolist() == [1, 0]
    # three classes: per-class scores add; the class is the mean's arg max
    a, b = np.log([[0.5, 0.3, 0.2]]), np.log([[0.1, 0.1, 0.8]])
    three = MeanTeacher([_Fixed(a), _Fixed(b)]).predict_raw(None)
    assert three == pytest.approx(a + b)
    assert most_probable_class(three).tolist() == [2]         # 0.05, 0.03, 0.16


def test_mean_teacher_class_map_keeps_sure_cells_of_two_agreeing_teachers():
    # two teachers each at margin 3 (< 4: unsure alone) agree: their sum, 6, is sure
    image = np.zeros((16, 16, 1), np.float32)
    image[:, 8:] = 1.0

    rows = []

    class Step:
        def predict_raw(self, X):
            rows.append(X.shape[0])
            return np.where(X[:, 0] > 0.5, 3.0, -3.0)

    assert np.array_equal(teacher_classes(image, np.array([0]), MeanTeacher([Step(), Step()]),
                                          (16, 16), stride=4), image[..., 0] > 0.5)
    # the 16 grid points, then only the cells across the edge (x 4..8): not all 256 pixels
    # (the mean, margin 3, would refine every cell)
    assert sum(rows) / 2 < 256 / 2


def test_fit_teacher_mean_fits_the_boosted_and_the_forest_teacher_on_the_same_rows():
    X = np.arange(20, dtype=np.float32)[:, None]
    y = (X[:, 0] >= 10).astype(float)
    weight = np.ones(20)
    params = {"random_state": 0, "n_estimators": 5, "min_samples_leaf": 2, "feature_share": [1.0]}
    teacher = fit_teacher(X, y, weight, params, np.array([0]), "binary", None, kind="mean")
    boost, forest = teacher.teachers
    assert isinstance(boost, Booster) and isinstance(forest, ForestTeacher)
    rows = np.array([[0.0], [19.0]], np.float32)
    assert teacher.predict_raw(rows) == pytest.approx(
        boost.predict_raw(rows) + forest.predict_raw(rows))
    assert teacher.predict_raw(rows)[0] < 0 < teacher.predict_raw(rows)[1]


def test_blend_teacher_is_the_boosted_one_on_scribbles_and_the_forest_far_from_them():
    near, far = _Fixed([4.0, 4.0, 4.0]), _Fixed([-2.0, -2.0, -2.0])
    teacher = BlendTeacher(near, far, distance=10.0)
    # d = 0: the boosted teacher; d = 10: weight e^-1 = 0.368 -> 0.368*4 - 0.632*2 = 0.207;
    # d = 20: 0.135*4 - 0.865*2 = -1.19 (the forest's class)
    rows = np.arange(3)[:, None]
    raw = teacher.predict_raw(rows, np.array([0.0, 10.0, 20.0]))
    w = np.exp(-np.array([0.0, 1.0, 2.0]))
    assert raw == pytest.approx(w * 4 - (1 - w) * 2)
    assert most_probable_class(raw).tolist() == [1, 1, 0]
    # without distances (the cost samples of class_weight="auto"): the boosted teacher
    assert teacher.predict_raw(rows) == pytest.approx([4.0, 4.0, 4.0])
    # per-class scores: the same weight on every class of a row
    a, b = np.log([[0.7, 0.2, 0.1]] * 2), np.log([[0.1, 0.1, 0.8]] * 2)
    three = BlendTeacher(_Fixed(a), _Fixed(b), distance=10.0).predict_raw(
        np.arange(2)[:, None], np.array([0, 50]))
    assert most_probable_class(three).tolist() == [0, 2]


class _Counting(_Fixed):
    """A `_Fixed` teacher that records the rows it is asked to predict."""

    def __init__(self, raw):
        super().__init__(raw)
        self.asked = []

    def predict_raw(self, X):
        self.asked.extend(np.asarray(X)[:, 0].astype(int).tolist())
        return super().predict_raw(X)


@pytest.mark.parametrize("shape", [(5,), (5, 3)])
def test_blend_teacher_skips_a_teacher_only_where_it_weighs_nothing_and_keeps_the_blend(shape):
    # rows on a scribble (d = 0), far (d = 250) and in a frame without scribbles (d = inf):
    # the previous blend's scores (both teachers at every row, w * near + (1 - w) * far), one or
    # three classes; a teacher is not asked when its weight is 0 at every row
    rng = np.random.default_rng(0)
    near, far = _Counting(rng.normal(0, 5, shape)), _Counting(rng.normal(0, 5, shape))
    rows = np.arange(5)[:, None]
    for d in ([0.0, 3.0, np.inf, 0.0, 250.0], np.zeros(5), np.full(5, np.inf)):
        d = np.asarray(d)
        near.asked.clear()
        far.asked.clear()
        raw = BlendTeacher(near, far).predict_raw(rows, d)
        w = np.exp(-d / 30.0)
        w = w if len(shape) == 1 else w[:, None]
        assert np.array_equal(raw, w * near.raw + (1 - w) * far.raw)
        assert near.asked == ([] if np.all(d == np.inf) else list(range(5)))
        assert far.asked == ([] if np.all(d == 0) else list(range(5)))


def test_forest_teacher_on_two_threads_grows_and_predicts_what_one_thread_does():
    numba = pytest.importorskip("numba")
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one Numba thread")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(float) + (X[:, 2] > 1)
    rows = rng.normal(size=(3 * 8192, 3)).astype(np.float32)   # split among the threads
    before = numba.get_num_threads()
    raw = {}
    try:
        for threads in (1, 2):
            numba.set_num_threads(threads)
            teacher = ForestTeacher(n_estimators=6, random_state=0).fit(X, y, np.ones(400), 3)
            raw[threads] = teacher.predict_raw(rows)
    finally:
        numba.set_num_threads(before)
    assert raw[1].shape == (3 * 8192, 3)
    assert np.array_equal(raw[1], raw[2])


def test_blend_teacher_class_map_follows_the_distance_to_the_scribbles():
    # the boosted teacher says class 1 everywhere, the forest class 0; scribbled pixel at (0, 0):
    # class 1 near it, class 0 far from it, with the map's border where w * 3 = (1 - w) * 3
    # (d = 30 ln 2 = 20.8 px), and the teacher is given each pixel's own distance
    from scipy import ndimage as ndi
    image = np.zeros((40, 40, 1), np.float32)
    labels = np.zeros((40, 40), np.uint8)
    labels[0, 0] = 1
    distance = ndi.distance_transform_edt(labels == 0)
    teacher = BlendTeacher(_Const(3.0), _Const(-3.0))
    classes = teacher_classes(image, np.array([0]), teacher, (40, 40), stride=4, distance=distance)
    assert np.array_equal(classes, distance < 30 * np.log(2))


def test_fit_teacher_blend_and_its_model():
    X = np.arange(20, dtype=np.float32)[:, None]
    y = (X[:, 0] >= 10).astype(float)
    params = {"random_state": 0, "n_estimators": 5, "min_samples_leaf": 2, "feature_share": [1.0]}
    teacher = fit_teacher(X, y, np.ones(20), params, np.array([0]), "binary", None, kind="blend")
    rows = np.array([[0.0], [19.0]], np.float32)
    # the forest is fitted when a row first needs it, not before
    assert isinstance(teacher.near, Booster) and not isinstance(teacher.far, ForestTeacher)
    assert teacher.predict_raw(rows, np.array([0.0, 0.0])) == pytest.approx(
        teacher.near.predict_raw(rows))
    assert not isinstance(teacher.far, ForestTeacher)
    raw = teacher.predict_raw(rows, np.array([1e9, 1e9]))
    assert isinstance(teacher.far, ForestTeacher)
    assert len(teacher.far.forest_.estimators_) == BLEND_FOREST_TREES == 25
    assert raw == pytest.approx(teacher.far.predict_raw(rows))
    # a whole fit with the blended teacher: the model separates a bright square from the floor
    # (two 4 x 4 scribbles leave most of the 96 x 96 frame to the forest)
    rng = np.random.default_rng(0)
    image = rng.normal(0, 0.1, (96, 96)).astype(np.float32)
    image[24:72, 24:72] += 1.0
    labels = np.zeros((96, 96), np.uint8)
    labels[2:6, 2:6] = 1
    labels[46:50, 46:50] = 2
    clf = PixelClassifier(teacher="blend", random_state=0).fit([image], [labels])
    truth = np.where(image > 0.5, 2, 1)
    assert (clf.predict(image) == truth).mean() > 0.95


def test_blend_teacher_frame_distance_only_where_the_forest_would_decide_most_pixels():
    # a 1 x 100 frame: the forest outweighs the boosted teacher where d > 30 ln 2 = 20.8 px
    teacher = BlendTeacher(_Const(3.0), _Const(-3.0))
    labels = np.zeros((1, 100), np.uint8)
    labels[0, 0] = 1                        # d = x: 79 of 100 pixels (x >= 21) far -> sparse
    assert np.array_equal(teacher.frame_distance(labels), np.arange(100.0)[None])
    labels[0, 50] = 2                       # far: x = 21..29 and 71..99, 38 of 100 -> dense
    assert teacher.frame_distance(labels) is None
    labels[0, 50] = 0
    labels[0, 71] = 2                       # far: x = 21..50 and 92..99, 38 of 100 -> dense
    assert teacher.frame_distance(labels) is None
    labels[0, 71] = 0
    labels[0, 29] = 2                       # far: x = 50..99, exactly half -> sparse
    assert teacher.frame_distance(labels) is not None
    # no scribbles: the forest everywhere
    assert np.all(teacher.frame_distance(np.zeros((3, 4))) == np.inf)


def test_blend_on_dense_scribbles_is_the_boosted_teachers_model_and_fits_no_forest():
    rng = np.random.default_rng(0)
    image = rng.normal(0, 0.1, (96, 96)).astype(np.float32)
    image[24:72, 24:72] += 1.0
    dense = np.zeros((96, 96), np.uint8)    # every pixel within 20.8 px of a scribble
    dense[2::12, 2::12] = np.where(image[2::12, 2::12] > 0.5, 2, 1)
    sparse = np.zeros((96, 96), np.uint8)   # most pixels farther
    sparse[2:6, 2:6], sparse[46:50, 46:50] = 1, 2
    proba = {}
    for name, labels in (("dense", dense), ("sparse", sparse)):
        for teacher in ("boost", "blend"):
            clf = PixelClassifier("fast", n_estimators=5, teacher=teacher, random_state=0)
            proba[name, teacher] = clf.fit([image], [labels]).predict_proba(image)
    assert np.array_equal(proba["dense", "blend"], proba["dense", "boost"])
    assert not np.array_equal(proba["sparse", "blend"], proba["sparse", "boost"])
    # the distillation of the dense frame never asks for the forest, so it is never fitted
    X = np.arange(20, dtype=np.float32)[:, None]
    params = {"random_state": 0, "n_estimators": 5, "min_samples_leaf": 2, "feature_share": [1.0]}
    teacher = fit_teacher(X, (X[:, 0] >= 10).astype(float), np.ones(20), params, np.array([0]),
                          "binary", None, kind="blend")
    levels = FeatureBank(specs=["L0:intensity:c0"]).compute_levels(image)
    teacher_pixels(lambda frame: levels, [(image, dense)], teacher, np.array([0]), 100, 3,
                   np.random.default_rng(0))
    assert not isinstance(teacher.far, ForestTeacher)
    teacher_pixels(lambda frame: levels, [(image, sparse)], teacher, np.array([0]), 100, 3,
                   np.random.default_rng(0))
    assert isinstance(teacher.far, ForestTeacher)


def test_blend_teacher_fits_a_volume():
    # the distances are 3-D (voxels) and reach the volume's grid and refined points alike
    rng = np.random.default_rng(1)
    volume = rng.normal(0, 0.1, (8, 32, 32)).astype(np.float32)
    volume[:, 8:24, 8:24] += 1.0
    labels = np.zeros(volume.shape, np.uint8)
    labels[3:5, 1:5, 1:5] = 1
    labels[3:5, 14:18, 14:18] = 2
    clf = PixelClassifier("fast", n_estimators=5, teacher="blend", spacing=(1, 1, 1),
                          random_state=0).fit(volume, labels)
    truth = np.where(volume > 0.5, 2, 1)
    assert (clf.predict(volume) == truth).mean() > 0.95
