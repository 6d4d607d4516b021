"""Multi-scale prediction: per-pixel outputs, with work equal to the reported cost."""

import numpy as np
import pytest

from msclassify.features import VoxelGrid
from msclassify.pixel import predict_multiscale
from msclassify.cegb import Booster, train


def _random_levels(rng, shape, n_per_level, nan_fraction=0.0):
    """Random level arrays over the padded image, and the per-pixel matrix they define."""
    height, width = shape
    padded = (-(-height // 8) * 8, -(-width // 8) * 8)
    arrays = [rng.normal(size=(padded[0] >> L, padded[1] >> L, n)).astype(np.float32)
              for L, n in enumerate(n_per_level)]
    if nan_fraction:
        for array in arrays:
            array[rng.random(array.shape) < nan_fraction] = np.nan
    levels = np.repeat(np.arange(4), n_per_level)
    slots = np.concatenate([np.arange(n) for n in n_per_level]).astype(np.int64)
    ys, xs = (a.ravel() for a in np.mgrid[:height, :width])
    X = np.stack([arrays[L][ys >> L, xs >> L, s] for L, s in zip(levels, slots)], axis=1)
    return arrays, levels, slots, X


def _target(X, objective, rng):
    signal = np.nan_to_num(X[:, 0] + X[:, -1] + 0.5 * X[:, len(X[0]) // 2])
    if objective == "regression":
        return signal + 0.1 * rng.normal(size=len(signal))
    if objective == "binary":
        return (signal > 0).astype(float)
    return np.digitize(signal, [-0.7, 0.7]).astype(float)


CASES = [  # shape, features per level 0..3, objective, share mode, mu
    ((37, 53), (2, 2, 2, 2), "binary", "path", 0.01),
    ((40, 48), (1, 2, 2, 3), "binary", "path", 0.003),
    ((17, 9), (2, 1, 1, 2), "multiclass", "path", 0.005),
    ((64, 24), (3, 0, 2, 2), "regression", "path", 0.0),
    ((29, 31), (2, 2, 0, 0), "binary", "path", 0.01),      # coarsest feature on level 1
    ((33, 35), (2, 2, 2, 2), "binary", "feature", 0.01),
]


@pytest.mark.parametrize("shape, n_per_level, objective, share_mode, mu", CASES)
def test_random_models_match_per_pixel_prediction_and_cost(shape, n_per_level, objective,
                                                           share_mode, mu):
    rng = np.random.default_rng(shape[0] * 1000 + shape[1] + len(objective + share_mode))
    arrays, levels, slots, X = _random_levels(rng, shape, n_per_level)
    y = _target(X, objective, rng)
    params = dict(n_estimators=12, max_leaves=8, min_samples_leaf=3, split_cost=1.5,
                  cost_tradeoff=mu, feature_share=4.0 ** levels, share_mode=share_mode,
                  random_state=0)
    booster = train(X, y, objective, params, n_classes=3 if objective == "multiclass" else None)
    assert set(levels[booster.features_used()]) != {0}   # the trees do use coarse features

    result = predict_multiscale(booster, arrays, levels, slots, shape, cost_map=True)
    expected = booster.predict_raw(X).reshape(shape[0], shape[1], -1)
    np.testing.assert_allclose(result.values, expected, rtol=0, atol=1e-12)

    if share_mode == "path":
        reported = booster.prediction_cost(X).evaluation
        np.testing.assert_allclose(result.cost_map.ravel(), reported, rtol=1e-12, atol=1e-12)
        # One evaluation of a block of share s stands for its s pixels at cost 1/s each.
        assert result.pixel_evaluations * booster.split_cost == pytest.approx(reported.sum(),
                                                                             rel=1e-12)
    if shape[0] % 8 == 0 and shape[1] % 8 == 0:
        assert result.n_evaluations == result.pixel_evaluations
    else:
        assert result.n_evaluations >= result.pixel_evaluations


def test_nan_features_follow_the_learned_default_direction():
    rng = np.random.default_rng(3)
    arrays, levels, slots, X = _random_levels(rng, (27, 45), (2, 2, 2, 2), nan_fraction=0.2)
    y = _target(X, "binary", rng)
    booster = train(X, y, "binary", dict(n_estimators=10, max_leaves=6, min_samples_leaf=3,
                                         feature_share=4.0 ** levels, random_state=1))
    assert any(t["default_left"][t["feature"] >= 0].any() for t in booster.trees)
    result = predict_multiscale(booster, arrays, levels, slots, (27, 45))
    np.testing.assert_allclose(result.values[:, :, 0].ravel(), booster.predict_raw(X), atol=1e-12)


def _hand_tree(nodes):
    """A tree dict from rows (feature, threshold, left, right, value, share)."""
    columns = list(zip(*nodes))
    return {"feature": np.array(columns[0], dtype=np.int32),
            "threshold": np.array(columns[1], dtype=np.float64),
            "default_left": np.zeros(len(nodes), dtype=np.bool_),
            "left": np.array(columns[2], dtype=np.int32),
            "right": np.array(columns[3], dtype=np.int32),
            "value": np.array(columns[4], dtype=np.float64),
            "count": np.ones(len(nodes)), "share": np.array(columns[5], dtype=np.float64),
            "gain": np.zeros(len(nodes))}


def test_hand_checked_block_split():
    # Features: 0 on level 3 (8x8 blocks), 1 on level 0. Image 8 x 16: two 8x8 blocks.
    # Root splits on the coarse feature: the left block stops in a leaf, the right block
    # needs the pixel feature, so it splits into its 64 pixels.
    tree = _hand_tree([
        (0, 0.5, 1, 2, 0.0, 64.0),      # root: x0 <= 0.5 ?
        (-1, np.nan, -1, -1, 1.0, 64.0),
        (1, 0.5, 3, 4, 0.0, 1.0),       # x1 <= 0.5 ? evaluated per pixel
        (-1, np.nan, -1, -1, 2.0, 1.0),
        (-1, np.nan, -1, -1, 3.0, 1.0),
    ])
    booster = Booster([tree], [0.5], 2, "regression", split_cost=2.0,
                      feature_share=[64.0, 1.0])
    coarse = np.array([[[0.0], [1.0]]], dtype=np.float32)          # (1, 2, 1)
    fine = np.zeros((8, 16, 1), dtype=np.float32)
    fine[:, 8:, 0] = np.tile([0.0, 1.0], 32).reshape(8, 8)          # stripes in the right block
    arrays = [fine, np.zeros((4, 8, 0), np.float32), np.zeros((2, 4, 0), np.float32), coarse]
    result = predict_multiscale(booster, arrays, [3, 0], [0, 0], (8, 16), cost_map=True)

    assert result.n_evaluations == 2 + 64
    assert result.pixel_evaluations == 66.0
    expected = np.full((8, 16), 1.5)
    expected[:, 8:] = 0.5 + np.where(fine[:, 8:, 0] <= 0.5, 2.0, 3.0)
    np.testing.assert_array_equal(result.values[:, :, 0], expected)
    expected_cost = np.full((8, 16), 2.0 / 64)
    expected_cost[:, 8:] += 2.0
    np.testing.assert_allclose(result.cost_map, expected_cost)
    assert result.cost_map.sum() == pytest.approx(2.0 * result.pixel_evaluations)


def test_tree_rooted_on_a_finer_level_starts_on_its_blocks():
    # Features: 0 on level 3, 1 on level 1 (2x2 blocks). Image 5 x 6 (padded to 8 x 8): tree 0
    # splits on the level-3 feature (the start level), tree 1's root on the level-1 feature,
    # so tree 1 is walked on the 3 x 3 level-1 blocks holding image pixels: 9 evaluations,
    # without ever splitting the level-3 block (which would evaluate nothing).
    coarse_tree = _hand_tree([(0, 0.5, 1, 2, 0.0, 64.0), (-1, np.nan, -1, -1, 1.0, 64.0),
                              (-1, np.nan, -1, -1, 2.0, 64.0)])
    fine_tree = _hand_tree([(1, 0.5, 1, 2, 0.0, 4.0), (-1, np.nan, -1, -1, 10.0, 4.0),
                            (-1, np.nan, -1, -1, 20.0, 4.0)])
    booster = Booster([coarse_tree, fine_tree], [0.0], 2, "regression", split_cost=4.0,
                      feature_share=[64.0, 4.0])
    level1 = np.arange(16, dtype=np.float32).reshape(4, 4, 1) % 2     # columns 0, 1, 0, 1
    arrays = [np.zeros((8, 8, 0), np.float32), level1, np.zeros((2, 2, 0), np.float32),
              np.ones((1, 1, 1), np.float32)]
    result = predict_multiscale(booster, arrays, [3, 1], [0, 0], (5, 6), cost_map=True)

    assert result.n_evaluations == 1 + 9
    # image pixels / block pixels: the level-3 block holds 30 of 64; of the level-1 blocks,
    # rows 0-1 are whole (6 blocks), row 2 holds 1 row of pixels (3 blocks of 2/4)
    assert result.pixel_evaluations == 30 / 64 + 6 + 3 * 2 / 4
    expected = 2.0 + np.where(level1[np.arange(5)[:, None] // 2, np.arange(6) // 2, 0] <= 0.5,
                              10.0, 20.0)
    np.testing.assert_array_equal(result.values[:, :, 0], expected)
    np.testing.assert_allclose(result.cost_map, 4.0 / 64 + 4.0 / 4)
    assert result.cost_map.sum() == pytest.approx(4.0 * result.pixel_evaluations)


def test_inside_block_walk_hand_checked_with_nan():
    # Features: 0 on level 3, 1 on level 1. Image 8 x 8 (wholly inside: the walk by lists).
    # Tree rooted on the level-1 feature, NaN goes left (default_left): each of the 16 level-1
    # blocks takes one evaluation; a right block then tests the level-3 feature (1.0 > 0.5: right).
    tree = _hand_tree([(1, 0.5, 1, 2, 0.0, 4.0), (-1, np.nan, -1, -1, 10.0, 4.0),
                       (0, 0.5, 3, 4, 0.0, 4.0), (-1, np.nan, -1, -1, 20.0, 4.0),
                       (-1, np.nan, -1, -1, 30.0, 4.0)])
    tree["default_left"][0] = True
    booster = Booster([tree], [0.0], 2, "regression", split_cost=4.0, feature_share=[64.0, 4.0])
    level1 = np.array([[0, 1, np.nan, 1]] * 4, np.float32)[:, :, None]
    arrays = [np.zeros((8, 8, 0), np.float32), level1, np.zeros((2, 2, 0), np.float32),
              np.ones((1, 1, 1), np.float32)]
    fast = predict_multiscale(booster, arrays, [3, 1], [0, 0], (8, 8))
    general = predict_multiscale(booster, arrays, [3, 1], [0, 0], (8, 8), cost_map=True)
    expected = np.repeat(np.array([10.0, 30.0, 10.0, 30.0]), 2)[None, :].repeat(8, axis=0)
    for result in (fast, general):
        np.testing.assert_array_equal(result.values[:, :, 0], expected)
        assert result.n_evaluations == 16 + 8     # 8 right blocks test the level-3 feature too
        assert result.pixel_evaluations == 24
    np.testing.assert_array_equal(general.cost_map, np.where(expected == 10.0, 1.0, 2.0))


def test_pixel_rooted_walk_hand_checked_with_nan():
    # Features: 0 on level 1 (2x2 blocks), 1 on level 0. Image 8 x 8 (the walk by lists).
    # The root tests the pixel feature (NaN goes left), so the pixels of one 2x2 block may go
    # both ways; the left ones then test the level-1 feature, once per block in the walk by
    # lists but charged and counted per pixel (share min(1, 4) = 1), as the general walk
    # evaluates it.
    tree = _hand_tree([(1, 0.5, 1, 2, 0.0, 1.0), (0, 0.5, 3, 4, 0.0, 1.0),
                       (-1, np.nan, -1, -1, 30.0, 1.0), (-1, np.nan, -1, -1, 10.0, 1.0),
                       (-1, np.nan, -1, -1, 20.0, 1.0)])
    tree["default_left"][0] = True
    booster = Booster([tree], [0.0], 2, "regression", split_cost=1.0, feature_share=[4.0, 1.0])
    pixel = np.tile([[0.0, 1.0, np.nan, 1.0], [1.0, 1.0, 0.0, 0.0]], (4, 2)).astype(np.float32)
    level1 = np.array([[0.0, 1.0, 1.0, 0.0]] * 4, np.float32)[:, :, None]
    arrays = [pixel[:, :, None], level1, np.zeros((2, 2, 0), np.float32),
              np.zeros((1, 1, 0), np.float32)]
    fast = predict_multiscale(booster, arrays, [1, 0], [0, 0], (8, 8))
    general = predict_multiscale(booster, arrays, [1, 0], [0, 0], (8, 8), cost_map=True)
    goes_left = ~(pixel > 0.5)                      # NaN goes left
    block_value = level1[np.arange(8)[:, None] // 2, np.arange(8) // 2, 0]
    expected = np.where(goes_left, np.where(block_value <= 0.5, 10.0, 20.0), 30.0)
    n_left = int(goes_left.sum())
    assert 0 < n_left < 64
    for result in (fast, general):
        np.testing.assert_array_equal(result.values[:, :, 0], expected)
        assert result.n_evaluations == 64 + n_left
        assert result.pixel_evaluations == 64 + n_left
    np.testing.assert_array_equal(general.cost_map, np.where(goes_left, 2.0, 1.0))


@pytest.mark.parametrize("shape, n_per_level, objective", [
    ((37, 53), (2, 2, 2, 2), "binary"),
    ((40, 48), (1, 2, 0, 3), "binary"),
    ((29, 31), (2, 2, 0, 0), "binary"),
    ((50, 67), (2, 1, 2, 2), "multiclass"),
    ((24, 40), (3, 0, 0, 0), "regression"),     # pixel features only: the general walk
    ((24, 40), (3, 1, 0, 0), "regression"),     # most roots read pixels
])
def test_inside_block_walk_equals_the_general_walk(shape, n_per_level, objective):
    # Without a cost map, rows of blocks wholly inside an image are walked tree by tree
    # with lists of blocks; with one, every block takes the general walk. Same sums in the
    # same order: bit for bit, with NaN, border blocks and several outputs; a binary
    # model's classes are the signs of those scores.
    rng = np.random.default_rng(shape[0] + shape[1])
    arrays, levels, slots, X = _random_levels(rng, shape, n_per_level, nan_fraction=0.05)
    y = _target(X, objective, rng)
    booster = train(X, y, objective, dict(n_estimators=12, max_leaves=8, min_samples_leaf=3,
                                          cost_tradeoff=0.003, feature_share=4.0 ** levels,
                                          random_state=0),
                    n_classes=3 if objective == "multiclass" else None)
    fast = predict_multiscale(booster, arrays, levels, slots, shape)
    general = predict_multiscale(booster, arrays, levels, slots, shape, cost_map=True)
    np.testing.assert_array_equal(fast.values, general.values)
    assert (fast.n_evaluations, fast.pixel_evaluations) == \
        (general.n_evaluations, general.pixel_evaluations)
    expected = booster.predict_raw(X).reshape(fast.values.shape)
    np.testing.assert_allclose(fast.values, expected, atol=1e-12)
    if objective == "binary":
        labels = predict_multiscale(booster, arrays, levels, slots, shape, output="class").values
        np.testing.assert_array_equal(labels, fast.values[:, :, 0] > 0)


@pytest.mark.parametrize("n_per_level, root_level", [((0, 2, 1, 2), 1), ((2, 1, 0, 0), 0)])
def test_trees_repeating_a_root_split_match_the_general_walk(n_per_level, root_level):
    # Consecutive trees whose roots split alike reuse the first one's lists of blocks (the
    # root is evaluated once per row for all, and counted for all); each tree's subtrees
    # then differ. The first two trees of each triple below are the third with other leaf
    # values. A leaf child takes its value in its parent's pass, except below a root whose
    # lists the next tree reuses; roots on coarse blocks and on pixels (level 0) alike.
    rng = np.random.default_rng(5)
    shape = (40, 56)
    arrays, levels, slots, X = _random_levels(rng, shape, n_per_level, nan_fraction=0.05)
    # Led by a feature of the roots' level: X[:, 0] is on level 0, X[:, -1] on level 3 or 1.
    signal = np.nan_to_num(X[:, 0] + 0.3 * X[:, -1] if root_level == 0 else X[:, -1] + X[:, 0])
    booster = train(X, (signal > 0).astype(float), "binary",
                    dict(n_estimators=6, max_leaves=8, min_samples_leaf=3,
                         feature_share=4.0 ** levels, random_state=0))
    trees = []
    for tree in booster.trees:
        twins = [dict(tree, value=tree["value"] * scale) for scale in (-0.5, 0.25)]
        trees += twins + [tree]
    triples = Booster(trees, booster.init_score, booster.n_features, "binary",
                      split_cost=booster.split_cost, feature_share=booster.feature_share)
    assert any(t["feature"][0] >= 0 and levels[t["feature"][0]] == root_level for t in trees)
    fast = predict_multiscale(triples, arrays, levels, slots, shape)
    general = predict_multiscale(triples, arrays, levels, slots, shape, cost_map=True)
    np.testing.assert_array_equal(fast.values, general.values)
    assert (fast.n_evaluations, fast.pixel_evaluations) == \
        (general.n_evaluations, general.pixel_evaluations)
    np.testing.assert_allclose(fast.values[:, :, 0].ravel(), triples.predict_raw(X),
                               atol=1e-12)
    single = predict_multiscale(booster, arrays, levels, slots, shape)
    assert fast.n_evaluations == 3 * single.n_evaluations   # every copy is counted in full


def test_blocks_in_the_padding_are_not_evaluated():
    # A 9 x 9 image is padded to 16 x 16; a pixel-level root must evaluate exactly its 81
    # pixels, none of the 175 padding pixels.
    tree = _hand_tree([(0, 0.0, 1, 2, 0.0, 1.0), (-1, np.nan, -1, -1, -1.0, 1.0),
                       (-1, np.nan, -1, -1, 1.0, 1.0)])
    booster = Booster([tree], [0.0], 2, "regression", split_cost=1.0, feature_share=[1.0, 64.0])
    rng = np.random.default_rng(0)
    fine = rng.normal(size=(16, 16, 1)).astype(np.float32)
    arrays = [fine, np.zeros((8, 8, 0), np.float32), np.zeros((4, 4, 0), np.float32),
              np.zeros((2, 2, 1), np.float32)]
    result = predict_multiscale(booster, arrays, [0, 3], [0, 0], (9, 9))
    assert result.n_evaluations == 81
    np.testing.assert_array_equal(result.values[:, :, 0], np.where(fine[:9, :9, 0] <= 0, -1, 1))


def test_leaf_only_tree_costs_nothing():
    booster = Booster([_hand_tree([(-1, np.nan, -1, -1, 0.25, 64.0)])], [1.0], 1, "regression",
                      split_cost=1.0, feature_share=[64.0])
    arrays = [np.zeros((8 >> L, 16 >> L, 0 if L < 3 else 1), np.float32) for L in range(4)]
    result = predict_multiscale(booster, arrays, [3], [0], (5, 11), cost_map=True)
    assert result.n_evaluations == 0
    np.testing.assert_array_equal(result.values, np.full((5, 11, 1), 1.25))
    np.testing.assert_array_equal(result.cost_map, 0)


def test_probability_and_class_outputs():
    rng = np.random.default_rng(5)
    shape = (23, 30)
    arrays, levels, slots, X = _random_levels(rng, shape, (1, 1, 1, 1))
    for objective, n_classes in (("binary", None), ("multiclass", 3)):
        y = _target(X, objective, rng)
        booster = train(X, y, objective, dict(n_estimators=8, min_samples_leaf=3,
                                              feature_share=4.0 ** levels, random_state=0),
                        n_classes=n_classes)
        raw = booster.predict_raw(X).reshape(shape[0], shape[1], -1)
        proba = predict_multiscale(booster, arrays, levels, slots, shape, output="proba").values
        index = predict_multiscale(booster, arrays, levels, slots, shape, output="class").values
        named = predict_multiscale(booster, arrays, levels, slots, shape, output="class",
                                   classes=np.array([10, 20, 30][:max(2, n_classes or 2)],
                                                    dtype=np.int16)).values
        assert index.dtype == np.uint8 and named.dtype == np.int16
        np.testing.assert_array_equal(named, (index.astype(np.int16) + 1) * 10)
        assert proba.dtype == np.float32
        np.testing.assert_allclose(proba.sum(axis=2), 1.0, atol=1e-6)
        if n_classes is None:
            np.testing.assert_allclose(proba[:, :, 1], 1 / (1 + np.exp(-raw[:, :, 0])), atol=1e-6)
            np.testing.assert_array_equal(index, raw[:, :, 0] > 0)
        else:
            softmax = np.exp(raw - raw.max(axis=2, keepdims=True))
            softmax /= softmax.sum(axis=2, keepdims=True)
            np.testing.assert_allclose(proba, softmax, atol=1e-6)
            np.testing.assert_array_equal(index, np.argmax(raw, axis=2))


def test_classes_written_by_the_walk_hand_checked():
    # Binary model, image 8 x 16 (two 8x8 blocks): init -0.25; tree 0 on the level-3 feature
    # adds -1 to the left block and +1 to the right one; tree 1 on the pixel feature adds
    # 1.5 where it is > 0.5 (the even rows). Left block: 0.25 on even rows (class 9), -1.25
    # on odd ones (class 7); right block: 2.25 or 0.75 (class 9).
    tree0 = _hand_tree([(0, 0.5, 1, 2, 0.0, 64.0), (-1, np.nan, -1, -1, -1.0, 64.0),
                        (-1, np.nan, -1, -1, 1.0, 64.0)])
    tree1 = _hand_tree([(1, 0.5, 1, 2, 0.0, 1.0), (-1, np.nan, -1, -1, 0.0, 1.0),
                        (-1, np.nan, -1, -1, 1.5, 1.0)])
    booster = Booster([tree0, tree1], [-0.25], 2, "binary", split_cost=1.0,
                      feature_share=[64.0, 1.0])
    coarse = np.array([[[0.0], [1.0]]], dtype=np.float32)
    fine = np.zeros((8, 16, 1), dtype=np.float32)
    fine[::2, :, 0] = 1.0                                   # even rows take +0.5
    arrays = [fine, np.zeros((4, 8, 0), np.float32), np.zeros((2, 4, 0), np.float32), coarse]
    labels = predict_multiscale(booster, arrays, [3, 0], [0, 0], (8, 16), output="class",
                                classes=np.array([7, 9], dtype=np.int32)).values
    expected = np.full((8, 16), 9, dtype=np.int32)
    expected[1::2, :8] = 7
    np.testing.assert_array_equal(labels, expected)
    # a tie at 0.0 is class 0, as from the raw scores
    tie = Booster([tree0], [1.0], 2, "binary", split_cost=1.0, feature_share=[64.0, 1.0])
    labels = predict_multiscale(tie, arrays, [3, 0], [0, 0], (8, 16), output="class").values
    assert labels.dtype == np.uint8
    np.testing.assert_array_equal(labels[:, :8], 0)
    np.testing.assert_array_equal(labels[:, 8:], 1)


CLASS_CASES = [  # shape, features per level 0..3, objective
    ((37, 53), (2, 2, 2, 2), "binary"),      # border blocks on both sides
    ((48, 64), (3, 1, 1, 1), "binary"),      # rows wholly inside: the walk by lists
    ((29, 31), (2, 2, 0, 0), "binary"),      # coarsest feature on level 1
    ((17, 27), (2, 1, 1, 2), "multiclass"),
    ((40, 40), (1, 0, 0, 0), "multiclass"),  # only a pixel feature: start level 0
]


@pytest.mark.parametrize("shape, n_per_level, objective", CLASS_CASES)
def test_classes_written_by_the_walk_equal_the_scores_and_per_pixel(shape, n_per_level,
                                                                     objective):
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    arrays, levels, slots, X = _random_levels(rng, shape, n_per_level, nan_fraction=0.05)
    y = _target(X, objective, rng)
    booster = train(X, y, objective, dict(n_estimators=10, max_leaves=8, min_samples_leaf=3,
                                          feature_share=4.0 ** levels, random_state=0),
                    n_classes=3 if objective == "multiclass" else None)
    raw = predict_multiscale(booster, arrays, levels, slots, shape).values
    classes = np.array([3, 5, 11][:raw.shape[2] + (raw.shape[2] == 1)], dtype=np.int64)
    labels = predict_multiscale(booster, arrays, levels, slots, shape, output="class",
                                classes=classes).values
    # bit for bit the class of the walk's raw scores (the same sums in the same order)
    best = (raw[:, :, 0] > 0).astype(int) if raw.shape[2] == 1 else np.argmax(raw, axis=2)
    np.testing.assert_array_equal(labels, classes[best])
    both, _ = predict_multiscale(booster, arrays, levels, slots, shape,
                                 output="class+proba", classes=classes).values
    np.testing.assert_array_equal(both, labels)
    # and per-pixel prediction's class wherever rounding cannot decide it
    per_pixel = booster.predict_raw(X).reshape(raw.shape)
    top = np.sort(per_pixel, axis=2)
    clear = (np.abs(per_pixel[:, :, 0]) > 1e-9 if raw.shape[2] == 1
             else top[:, :, -1] - top[:, :, -2] > 1e-9)
    expected = (per_pixel[:, :, 0] > 0).astype(int) if raw.shape[2] == 1 \
        else np.argmax(per_pixel, axis=2)
    assert clear.mean() > 0.99
    np.testing.assert_array_equal(labels[clear], classes[expected][clear])


def test_bad_inputs_raise_clear_errors():
    rng = np.random.default_rng(0)
    arrays, levels, slots, X = _random_levels(rng, (16, 16), (1, 1, 1, 1))
    booster = train(X, _target(X, "binary", rng), "binary",
                    dict(n_estimators=3, min_samples_leaf=3, feature_share=4.0 ** levels))
    with pytest.raises(ValueError, match="level 1 array has shape"):
        predict_multiscale(booster, [arrays[0], arrays[0], arrays[2], arrays[3]], levels, slots,
                           (16, 16))
    with pytest.raises(ValueError, match="one entry per model feature"):
        predict_multiscale(booster, arrays, levels[:2], slots[:2], (16, 16))
    with pytest.raises(ValueError, match="shares disagree"):
        predict_multiscale(booster, arrays, levels[::-1], slots, (16, 16))
    with pytest.raises(ValueError, match="no level array"):
        predict_multiscale(booster, arrays, np.full(4, -1), slots, (16, 16))
    with pytest.raises(ValueError, match="output must be one of"):
        predict_multiscale(booster, arrays, levels, slots, (16, 16), output="labels")


def test_level_arrays_in_one_buffer_or_apart_predict_alike():
    # `FeatureBank.compute_levels` lays the levels back to back in one buffer, which the
    # walk then reads in place; arrays apart, or in one buffer out of order, are copied.
    from msclassify.features import FeatureBank
    rng = np.random.default_rng(3)
    image = rng.random((21, 30)).astype(np.float32)
    bank = FeatureBank("fast")
    levels = bank.compute_levels(image)
    owners = {id(a.base) for a in levels.arrays if a.size}
    assert len(owners) == 1
    X = bank.compute_full(image).reshape(-1, len(bank.specs))
    y = (X[:, 0] + X[:, -1] > np.median(X[:, 0] + X[:, -1])).astype(float)
    booster = train(X, y, "binary", dict(n_estimators=4, max_leaves=6,
                                         feature_share=bank.shares(), random_state=0))
    level, slot = np.asarray(levels.level), np.asarray(levels.slot)
    in_place = predict_multiscale(booster, levels.arrays, level, slot, levels.shape)
    apart = predict_multiscale(booster, [a.copy() for a in levels.arrays], level, slot,
                               levels.shape)
    buffer = np.concatenate([a.ravel() for a in levels.arrays[::-1]])
    sizes = np.cumsum([0] + [a.size for a in levels.arrays[::-1]])
    reversed_views = [buffer[sizes[i]:sizes[i + 1]].reshape(a.shape)
                      for i, a in enumerate(levels.arrays[::-1])][::-1]
    shuffled = predict_multiscale(booster, reversed_views, level, slot, levels.shape)
    np.testing.assert_array_equal(in_place.values, apart.values)
    np.testing.assert_array_equal(in_place.values, shuffled.values)
    np.testing.assert_allclose(in_place.values[:, :, 0].ravel(), booster.predict_raw(X),
                               atol=1e-12)


@pytest.mark.parametrize("nan_left", [False, True])
def test_nan_either_way_in_every_split_loop_hand_checked(nan_left):
    # Features: 0 on level 1 (2x2 blocks), 1 on level 0. Image 8 x 8 (the walk by lists),
    # every split sending NaN the same way. Tree 0's root has two split children (a block
    # list split in two), its left child two leaves, its right child a pixel split with a
    # leaf child whose other child tests the level-1 feature on masked blocks; tree 1's root
    # has one leaf child. Each loop compiles NaN's way as a constant: all must agree with
    # the rule "v <= threshold, or NaN and default_left", and with the general walk.
    tree0 = _hand_tree([(0, 0.5, 1, 2, 0.0, 4.0),
                        (0, 0.25, 3, 4, 0.0, 4.0),
                        (1, 0.5, 5, 6, 0.0, 1.0),
                        (-1, np.nan, -1, -1, 1.0, 4.0), (-1, np.nan, -1, -1, 2.0, 4.0),
                        (-1, np.nan, -1, -1, 3.0, 1.0),
                        (0, 0.75, 7, 8, 0.0, 1.0),
                        (-1, np.nan, -1, -1, 4.0, 1.0), (-1, np.nan, -1, -1, 5.0, 1.0)])
    tree1 = _hand_tree([(0, 0.6, 1, 2, 0.0, 4.0), (-1, np.nan, -1, -1, 10.0, 4.0),
                        (0, 0.8, 3, 4, 0.0, 4.0), (-1, np.nan, -1, -1, 20.0, 4.0),
                        (-1, np.nan, -1, -1, 30.0, 4.0)])
    for tree in (tree0, tree1):
        tree["default_left"][tree["feature"] >= 0] = nan_left
    booster = Booster([tree0, tree1], [0.0], 2, "regression", split_cost=1.0,
                      feature_share=[4.0, 1.0])
    level1 = np.array([[0.1, 0.4, np.nan, 0.55], [0.7, 0.9, 0.1, np.nan],
                       [np.nan, 0.7, 0.55, 0.4], [0.9, np.nan, 0.7, 0.1]], np.float32)
    pixel = np.tile([[0.2, 0.8, np.nan, 0.8], [np.nan, 0.2, 0.8, 0.2]], (4, 2)).astype(
        np.float32)
    arrays = [pixel[:, :, None], level1[:, :, None], np.zeros((2, 2, 0), np.float32),
              np.zeros((1, 1, 0), np.float32)]
    fast = predict_multiscale(booster, arrays, [1, 0], [0, 0], (8, 8))
    general = predict_multiscale(booster, arrays, [1, 0], [0, 0], (8, 8), cost_map=True)

    def left(v, threshold):
        return v <= threshold or (np.isnan(v) and nan_left)

    expected = np.zeros((8, 8))
    for y in range(8):
        for x in range(8):
            b, p = float(level1[y // 2, x // 2]), float(pixel[y, x])
            if left(b, 0.5):
                expected[y, x] = 1.0 if left(b, 0.25) else 2.0
            elif left(p, 0.5):
                expected[y, x] = 3.0
            else:
                expected[y, x] = 4.0 if left(b, 0.75) else 5.0
            expected[y, x] += 10.0 if left(b, 0.6) else (20.0 if left(b, 0.8) else 30.0)
    assert len(np.unique(expected)) >= 6
    np.testing.assert_array_equal(fast.values[:, :, 0], expected)
    np.testing.assert_array_equal(general.values[:, :, 0], expected)
    assert fast.n_evaluations == general.n_evaluations


def test_float32_threshold_rounds_down():
    from msclassify.pixel._multiscale import float32_threshold
    half = np.float32(0.5)
    below = np.nextafter(half, np.float32(0))
    t = float32_threshold(np.array([0.5 - 1e-12, 0.5, 0.5 + 1e-12, np.inf, -np.inf, 1e300]))
    assert t.dtype == np.float32
    np.testing.assert_array_equal(t, [below, half, half, np.inf, -np.inf,
                                      np.finfo(np.float32).max])


@pytest.mark.parametrize("threshold", [0.5 - 1e-12, 0.5, 0.5 + 1e-12])
def test_thresholds_between_float32_values_split_as_in_float64(threshold):
    # A float64 threshold just below 0.5 must send a feature of exactly 0.5 right (rounded to
    # the nearest float32 it would be 0.5 and send it left); the walk by lists and the
    # general walk compare float32 features with the threshold rounded down.
    half = np.float32(0.5)
    values = np.array([np.nextafter(half, np.float32(0)), half,
                       np.nextafter(half, np.float32(1)), half], np.float32)
    block_tree = _hand_tree([(0, threshold, 1, 2, 0.0, 4.0), (-1, np.nan, -1, -1, 1.0, 4.0),
                             (-1, np.nan, -1, -1, 2.0, 4.0)])
    pixel_tree = _hand_tree([(1, threshold, 1, 2, 0.0, 1.0), (-1, np.nan, -1, -1, 10.0, 1.0),
                             (-1, np.nan, -1, -1, 20.0, 1.0)])
    booster = Booster([block_tree, pixel_tree], [0.0], 2, "regression", split_cost=1.0,
                      feature_share=[4.0, 1.0])
    level1 = np.tile(values, (4, 1))
    pixel = np.tile(values, (8, 2))
    arrays = [pixel[:, :, None], level1[:, :, None], np.zeros((2, 2, 0), np.float32),
              np.zeros((1, 1, 0), np.float32)]
    expected = (np.where(np.repeat(np.repeat(level1, 2, 0), 2, 1).astype(np.float64)
                         <= threshold, 1.0, 2.0)
                + np.where(pixel.astype(np.float64) <= threshold, 10.0, 20.0))
    for cost_map in (False, True):              # the walk by lists, the general walk
        result = predict_multiscale(booster, arrays, [1, 0], [0, 0], (8, 8), cost_map=cost_map)
        np.testing.assert_array_equal(result.values[:, :, 0], expected)


@pytest.mark.parametrize("nan_left", [False, True])
def test_volume_walk_hand_checked_with_nan(nan_left):
    # A volume (2x2x2 blocks on level 1) whose sides divide no block size, walked by the
    # general walk (the walk by lists is for images): tree 0 splits level-1 blocks, then
    # their voxels (the per-voxel walk below a block); tree 1 is rooted on the voxel feature
    # and tests the level-1 feature per voxel (its plane term). Every split sends NaN the
    # same way; the values and the cost map must follow "v <= threshold, or NaN and
    # default_left".
    tree0 = _hand_tree([(0, 0.5, 1, 2, 0.0, 8.0), (-1, np.nan, -1, -1, 1.0, 8.0),
                        (1, 0.5, 3, 4, 0.0, 1.0), (-1, np.nan, -1, -1, 2.0, 1.0),
                        (-1, np.nan, -1, -1, 3.0, 1.0)])
    tree1 = _hand_tree([(1, 0.3, 1, 2, 0.0, 1.0), (0, 0.2, 3, 4, 0.0, 1.0),
                        (-1, np.nan, -1, -1, 30.0, 1.0), (-1, np.nan, -1, -1, 10.0, 1.0),
                        (-1, np.nan, -1, -1, 20.0, 1.0)])
    for tree in (tree0, tree1):
        tree["default_left"][tree["feature"] >= 0] = nan_left
    booster = Booster([tree0, tree1], [0.0], 2, "regression", split_cost=1.0,
                      feature_share=[8.0, 1.0])
    rng = np.random.default_rng(5)
    shape = (3, 5, 6)
    voxel = rng.random((8, 8, 8)).astype(np.float32)
    block = rng.random((4, 4, 4)).astype(np.float32)
    voxel[rng.random(voxel.shape) < 0.2] = np.nan
    block[rng.random(block.shape) < 0.2] = np.nan
    arrays = [voxel[..., None], block[..., None], np.zeros((2, 2, 2, 0), np.float32),
              np.zeros((1, 1, 1, 0), np.float32)]

    def left(v, threshold):
        return v <= threshold or (np.isnan(v) and nan_left)

    expected = np.zeros(shape)
    cost = np.zeros(shape)
    for z, y, x in np.ndindex(shape):
        b, v = float(block[z // 2, y // 2, x // 2]), float(voxel[z, y, x])
        expected[z, y, x] = 1.0 if left(b, 0.5) else (2.0 if left(v, 0.5) else 3.0)
        cost[z, y, x] = 1 / 8 + (0.0 if left(b, 0.5) else 1.0)
        expected[z, y, x] += (10.0 if left(b, 0.2) else 20.0) if left(v, 0.3) else 30.0
        cost[z, y, x] += 1.0 + (1.0 if left(v, 0.3) else 0.0)
    assert np.isnan(voxel[:3, :5, :6]).any() and np.isnan(block[:2, :3, :3]).any()
    assert len(np.unique(expected)) >= 5
    result = predict_multiscale(booster, arrays, [1, 0], [0, 0], shape, cost_map=True,
                                blocks=VoxelGrid((1, 1, 1)).blocks)
    np.testing.assert_array_equal(result.values[..., 0], expected)
    np.testing.assert_allclose(result.cost_map, cost, rtol=0, atol=1e-12)
