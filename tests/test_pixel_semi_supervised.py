"""PixelClassifier(semi_supervised=True): GRBB on unlabelled pixels of the scribbled frames."""

import numpy as np
import pytest

from msclassify import load_model
from msclassify.pixel import UnlabelledPixels, jittered_grid
from msclassify.features import FeatureCache
from msclassify.pixel import PixelClassifier

FAST = dict(n_estimators=20, n_unlabelled=1000, random_state=0)


def _ramp_scene(seed=0, size=96):
    """Four bright disks under an illumination ramp, and two scribbled pixels per class.

    Objects are 0.3 brighter than the floor around them, but the ramp (0 -> 0.6 from
    left to right) makes the scribbled fly (left) darker than the scribbled floor
    (right): the scribbles alone say "dark = fly". The unlabelled pixels show two
    manifolds along the ramp, objects and floor, each holding one scribble.
    """
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    mask = np.zeros((size, size), bool)
    for cy, cx in [(24, 20), (70, 28), (30, 72), (72, 75)]:
        mask |= np.hypot(yy - cy, xx - cx) <= 11
    image = 0.6 * xx / (size - 1) + 0.3 * mask + rng.normal(0, 0.03, (size, size))
    labels = np.zeros((size, size), np.uint8)
    labels[24, 19:21] = 2
    labels[50, 92:94] = 1
    return image.astype(np.float32), mask, labels


def _accuracy(model, image, mask):
    return float(np.mean((model.predict(image) == 2) == mask))


@pytest.fixture(scope="module")
def scene():
    return _ramp_scene()


def test_two_scribbles_per_class_segment_with_unlabelled_pixels(scene):
    image, mask, labels = scene
    semi = PixelClassifier(semi_supervised=True, **FAST).fit(image, labels)
    assert _accuracy(semi, image, mask) > 0.95
    # Plain training cannot split 4 pixels with min_samples_leaf=20 (it predicts the prior) and,
    # allowed to, it learns "dark = fly", wrong on most of the image.
    plain = PixelClassifier(**{k: v for k, v in FAST.items() if k != "n_unlabelled"})
    assert _accuracy(plain.fit(image, labels), image, mask) < 0.9
    assert _accuracy(plain.set_params(min_samples_leaf=1).fit(image, labels), image, mask) < 0.5


def test_unlabelled_rows_get_the_harmonic_extension_and_no_cost():
    # One feature; rows as training_set gives them: labelled 0.0 (class 0), a cost sample,
    # labelled 3.3 (class 1); unlabelled pixels 1.0 and 2.1 form the 1-NN chain between them.
    frame, labels = np.zeros((4, 4)), np.zeros((4, 4), np.uint8)
    pixels = UnlabelledPixels([(frame, labels)], 2, np.random.default_rng(0))
    pixels._rows = [np.array([[1.0], [2.1]])]
    X = np.array([[0.0], [50.0], [3.3]])
    X_all, y, sample_weight, cost_weight, objective = pixels.training_set(
        X, np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 1.0]), np.array([0.0, 5.0, 0.0]),
        n_classes=2, n_neighbors=1, laplacian_regularization=0.0, exact_hessian=True,
        rng=np.random.default_rng(0))
    np.testing.assert_array_equal(X_all[:, 0], [0.0, 50.0, 3.3, 1.0, 2.1])
    np.testing.assert_array_equal(sample_weight, [1, 0, 1, 1, 1])
    np.testing.assert_array_equal(cost_weight, [0, 5, 0, 0, 0])
    grad, hess = objective(np.zeros(5), y)
    g0, g1 = 0.5, -0.5                                   # sigmoid(0) - label
    np.testing.assert_allclose(grad, [g0, 0.0, g1, (2 * g0 + g1) / 3, (g0 + 2 * g1) / 3])
    np.testing.assert_allclose(hess[[0, 2, 3, 4]], 0.25)  # p (1 - p), extended


def test_jittered_grid_covers_the_frame_and_skips_scribbles():
    labels = np.zeros((100, 100), np.uint8)
    labels[:, :5] = 1
    ys, xs = jittered_grid(labels, 100, np.random.default_rng(0))
    assert 80 <= ys.size <= 100 and not labels[ys, xs].any()
    cells = np.unique((ys // 10) * 10 + xs // 10)
    assert cells.size == ys.size and ys.size >= 90 - 1   # one pixel per 10x10 cell
    assert len(set(zip(ys.tolist(), xs.tolist()))) == ys.size


def test_multiclass_and_feature_cache(scene):
    image, mask, labels = scene
    labels = labels.copy()
    labels[72, 74:76] = 3                                # the bright right-bottom disk: class 3
    model = PixelClassifier(semi_supervised=True, **FAST).fit(image, labels)
    assert model.booster_.objective == "multiclass" and model.predict_proba(image).shape[2] == 3
    predicted = model.predict(image)
    assert predicted[72, 75] == 3 and predicted[24, 20] == 2 and predicted[50, 50] == 1
    cached = PixelClassifier(semi_supervised=True, **FAST).fit(image, labels,
                                                               feature_cache=FeatureCache())
    assert cached.booster_.dump() == model.booster_.dump()


def test_cost_terms_still_apply(scene):
    image, _, labels = scene
    free = PixelClassifier(semi_supervised=True, cost_tradeoff=0.0, **FAST).fit(image, labels)
    budgeted = PixelClassifier(semi_supervised=True, cost_tradeoff=1e-2, **FAST).fit(image, labels)
    assert len(budgeted.features_used_) < len(free.features_used_)
    assert budgeted.prediction_cost(image).total < free.prediction_cost(image).total


def test_off_gives_the_supervised_model(scene):
    image, _, labels = scene
    labels = labels.copy()
    labels[::7, 90:] = 1
    labels[22:27, 18:23] = 2
    default = PixelClassifier(random_state=0, n_estimators=5).fit(image, labels)
    off = PixelClassifier(random_state=0, n_estimators=5, semi_supervised=False, n_unlabelled=7,
                          n_neighbors=3, laplacian_regularization=2.0).fit(image, labels)
    assert off.booster_.dump() == default.booster_.dump()


def test_save_load_round_trip(tmp_path, scene):
    image, _, labels = scene
    model = PixelClassifier(semi_supervised=True, n_neighbors=7, laplacian_regularization=0.5,
                            **FAST).fit(image, labels)
    model.save(tmp_path / "semi.msc")
    loaded = load_model(tmp_path / "semi.msc")
    assert loaded.get_params() == model.get_params()
    assert (loaded.semi_supervised, loaded.n_unlabelled, loaded.n_neighbors) == (True, 1000, 7)
    np.testing.assert_array_equal(loaded.predict_proba(image), model.predict_proba(image))


@pytest.mark.parametrize("params, error, match", [
    ({"n_neighbors": 0}, ValueError, "n_neighbors must be an integer >= 1"),
    ({"n_neighbors": 2.5}, ValueError, "n_neighbors must be an integer >= 1"),
    ({"n_unlabelled": 0}, ValueError, "n_unlabelled must be an integer >= 1"),
    ({"n_unlabelled": True}, ValueError, "n_unlabelled must be an integer >= 1"),
    ({"laplacian_regularization": -1.0}, ValueError, "laplacian_regularization must be"),
    ({"laplacian_regularization": float("nan")}, ValueError, "laplacian_regularization must be"),
    ({"semi_supervised": "yes"}, TypeError, "semi_supervised must be True or False"),
    ({"n_unlabelled": 3, "n_neighbors": 9}, ValueError, "lower n_neighbors or raise n_unlabelled"),
])
def test_bad_params_are_explained(scene, params, error, match):
    image, _, labels = scene
    with pytest.raises(error, match=match):
        PixelClassifier(**{"semi_supervised": True, **params}).fit(image, labels)
