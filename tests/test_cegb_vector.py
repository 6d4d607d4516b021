"""Hand-checkable tests of vector-leaf multiclass trees (``multiclass_trees="vector"``)."""

import numpy as np
import pytest

from msclassify.cegb import Booster, CEGBClassifier, train

# Four rows, two outputs fitted by squared error (gradient raw - target, hessian 1):
# feature 0 separates output 0's targets, feature 1 separates output 1's.
X = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
TARGETS = np.array([[0.0, 0.0], [0.0, 2.0], [4.0, 0.0], [4.0, 2.0]])
# Gain of a split (l2 = 0, hessian 1): 0.5 * (GL^2 / nL + GR^2 / nR - G^2 / n) per output.
# On feature 0: output 0 has GL = 0, GR = -8, G = -8 -> 0.5 * (0 + 32 - 16) = 8; output 1
# has GL = GR = -2 -> 0.5 * (2 + 2 - 4) = 0. On feature 1: output 0 -> 0, output 1 -> 2.
GAIN_F0, GAIN_F1 = 8.0, 2.0


def _squares(raw, y):
    return raw - TARGETS[y.astype(int)], np.ones_like(raw)


def _fit(mode, **params):
    base = dict(n_estimators=1, learning_rate=1.0, max_leaves=2, min_samples_leaf=1,
                l2_regularization=0.0, multiclass_trees=mode)
    return train(X, np.arange(4.0), _squares, base | params, n_classes=2)


def test_one_split_for_all_outputs_by_the_summed_gain():
    vector = _fit("vector")
    assert vector.n_trees == 2                       # stored once per output
    for tree in vector.trees:
        assert tree["feature"].tolist() == [0, -1, -1]
        assert tree["gain"][0] == pytest.approx((GAIN_F0 + 0.0) / 2)
    # node values -G / H per output: root (all rows), left (rows 0, 1), right (rows 2, 3)
    assert vector.trees[0]["value"] == pytest.approx([2.0, 0.0, 4.0])
    assert vector.trees[1]["value"] == pytest.approx([1.0, 1.0, 1.0])
    assert vector.feature_importances().tolist() == [pytest.approx(GAIN_F0), 0.0]
    # per-class trees split each output on its own feature
    per_class = _fit("per_class")
    assert [t["feature"][0] for t in per_class.trees] == [0, 1]
    assert per_class.trees[1]["gain"][0] == pytest.approx(GAIN_F1)


@pytest.mark.parametrize("split_cost, splits", [(1.25, False), (0.9, True)])
def test_the_split_cost_is_charged_once_per_output(split_cost, splits):
    # leaf mode: penalty cost_tradeoff * split_cost * (cost weight 4) * (2 outputs)
    vector = _fit("vector", cost_tradeoff=1.0, split_cost=split_cost)
    assert (vector.trees[0]["feature"][0] == 0) == splits
    if splits:
        assert vector.trees[0]["gain"][0] == pytest.approx((GAIN_F0 - split_cost * 4 * 2) / 2)
    # a per-class tree of output 0 pays it once: 8 - 4 * 1.25 > 0
    assert _fit("per_class", cost_tradeoff=1.0, split_cost=1.25).trees[0]["feature"][0] == 0


def test_a_feature_cost_is_charged_once():
    # 8 - 7 > 0: charged once, the split pays; charged per output (14) it would not
    vector = _fit("vector", cost_tradeoff=1.0, feature_batch_costs=[7.0, 7.0])
    assert vector.trees[0]["feature"][0] == 0
    assert vector.trees[0]["gain"][0] == pytest.approx((GAIN_F0 - 7.0) / 2)


def test_vector_trees_predict_save_and_load_like_per_class_trees():
    rng = np.random.default_rng(0)
    Xr = rng.normal(size=(300, 4))
    y = np.digitize(Xr[:, 0] + 0.5 * Xr[:, 1], [-0.5, 0.5]).astype(float)
    params = {"n_estimators": 8, "max_leaves": 4, "learning_rate": 0.5,
              "multiclass_trees": "vector"}
    model = train(Xr, y, "multiclass", params, n_classes=3)
    assert model.n_trees == 24 and model.n_iterations == 8
    assert np.mean(model.predict_raw(Xr).argmax(axis=1) == y) > 0.9
    back = Booster.from_model_file(*model.to_model_file())
    assert np.array_equal(back.predict_raw(Xr), model.predict_raw(Xr))
    # the trees of one round share their splits
    first = model.trees[:3]
    assert all(np.array_equal(t["threshold"], first[0]["threshold"], equal_nan=True)
               for t in first)


def test_one_output_ignores_the_setting():
    rng = np.random.default_rng(1)
    Xr = rng.normal(size=(200, 3))
    y = (Xr[:, 0] > 0).astype(float)
    a, b = (train(Xr, y, "binary", {"n_estimators": 5, "multiclass_trees": mode})
            for mode in ("per_class", "vector"))
    assert np.array_equal(a.predict_raw(Xr), b.predict_raw(Xr))


def test_estimator_parameter_and_bad_value():
    rng = np.random.default_rng(2)
    Xr = rng.normal(size=(150, 2))
    y = np.digitize(Xr[:, 0], [-0.5, 0.5])
    clf = CEGBClassifier(n_estimators=5, multiclass_trees="vector").fit(Xr, y)
    assert clf.get_params()["multiclass_trees"] == "vector"
    assert np.mean(clf.predict(Xr) == y) > 0.9
    with pytest.raises(ValueError, match="multiclass_trees must be one of"):
        train(Xr, y.astype(float), "multiclass", {"multiclass_trees": "shared"}, n_classes=3)


def test_split_search_shares_the_mean_hessian_and_leaves_take_their_own():
    def hessians_1_and_3(raw, y):
        return raw - TARGETS[y.astype(int)], np.ones_like(raw) * [1.0, 3.0]
    tree = train(X, np.arange(4.0), hessians_1_and_3,
                 dict(n_estimators=1, learning_rate=1.0, max_leaves=2, min_samples_leaf=1,
                      l2_regularization=0.0, multiclass_trees="vector"), n_classes=2).trees
    # split search: each row's hessian is the mean 2. On feature 0: sum of squared gradient
    # sums left 0 + 2^2 = 4, right 8^2 + 2^2 = 68, parent 8^2 + 4^2 = 80:
    # 0.5 * (4 / 4 + 68 / 4 - 80 / 8) = 4 (feature 1: 0.5 * (16 / 4 + 32 / 4 - 80 / 8) = 1)
    assert tree[0]["feature"][0] == 0 and tree[0]["gain"][0] * 2 == pytest.approx(4.0)
    # leaves: -G_k / H_k with each output's own hessians (1 and 3 per row)
    assert tree[0]["value"][1:] == pytest.approx([0.0, 8.0 / 2])
    assert tree[1]["value"][1:] == pytest.approx([2.0 / 6, 2.0 / 6])


def test_pixel_classifier_with_vector_leaf_trees_saves_and_loads(tmp_path):
    from msclassify import PixelClassifier, load_model
    rng = np.random.default_rng(3)
    image = np.repeat([0.0, 1.0, 2.0], 16)[None, :].repeat(24, axis=0)
    image = image + rng.normal(scale=0.1, size=image.shape)
    labels = np.zeros(image.shape, np.uint8)
    labels[4:20, 2:12], labels[4:20, 19:29], labels[4:20, 36:46] = 1, 2, 3
    clf = PixelClassifier(features="fast", n_estimators=5, random_state=0,
                          multiclass_trees="vector").fit(image, labels)
    assert clf.booster_.n_trees == 15                # 5 rounds x 3 classes, stored per class
    assert np.array_equal(clf.predict(image)[labels > 0], labels[labels > 0])
    clf.save(tmp_path / "m.msc")
    back = load_model(tmp_path / "m.msc")
    assert back.get_params()["multiclass_trees"] == "vector"
    assert np.array_equal(back.predict_proba(image), clf.predict_proba(image))
