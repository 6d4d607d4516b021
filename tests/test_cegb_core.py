"""Hand-checkable tests of the CEGB core (msclassify.cegb)."""

import numpy as np
import pytest

from msclassify.cegb import train
from _reference_cegb import reference_trees


def _regression(X, y, **params):
    base = dict(n_estimators=1, learning_rate=1.0, max_leaves=2, min_samples_leaf=1,
                l2_regularization=0.0)
    return train(X, y, "regression", base | params)


def test_equal_gain_cheaper_feature_wins():
    x = np.repeat([0.0, 1.0], 10)
    X = np.column_stack([x, x])          # two copies: identical raw gain
    y = x * 4.0
    for costs, expected in (([5.0, 1.0], 1), ([1.0, 5.0], 0)):
        tree = _regression(X, y, cost_tradeoff=0.01, feature_costs=costs).trees[0]
        assert tree["feature"][0] == expected


def test_cost_flips_the_split():
    # feature 0 separates perfectly, feature 1 makes one mistake: gain0 > gain1.
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1], float) * 2
    X = np.column_stack([[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 0, 1, 1, 1]]).astype(float)
    g = y.mean() - y
    def gain(left):
        gl, gr, G = g[left].sum(), g[~left].sum(), g.sum()
        return 0.5 * (gl**2 / left.sum() + gr**2 / (~left).sum() - G**2 / 8)
    gain0, gain1 = gain(X[:, 0] <= 0.5), gain(X[:, 1] <= 0.5)
    assert gain0 > gain1 > 0
    assert _regression(X, y).trees[0]["feature"][0] == 0
    # Feature 0 costs beta per sample, all 8 unpaid: flip once mu*8*beta > gain0 - gain1.
    beta = (gain0 - gain1) / 8 * 1.5
    flipped = _regression(X, y, cost_tradeoff=1.0, feature_costs=[beta, 0.0]).trees[0]
    assert flipped["feature"][0] == 1
    assert flipped["gain"][0] == pytest.approx(gain1)


def test_batch_cost_paid_once_then_free():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 2))
    y = X[:, 0] + 1.05 * X[:, 1]        # feature 1 slightly more useful
    free = train(X, y, "regression", dict(n_estimators=5, max_leaves=2, min_samples_leaf=5))
    assert 1 in free.features_used(1)
    gamma = [0.0, 1e6]                   # feature 1 would need to win once by 1e6 to be paid
    model = train(X, y, "regression", dict(n_estimators=5, max_leaves=2, min_samples_leaf=5,
                                           cost_tradeoff=1.0, feature_batch_costs=gamma))
    assert model.features_used().tolist() == [0]
    # When both are expensive, the first one paid keeps being used although the other is
    # slightly better: its gamma is paid, the other's is not.
    both = train(X, y, "regression", dict(n_estimators=5, max_leaves=2, min_samples_leaf=5,
                                          cost_tradeoff=1.0, feature_batch_costs=[1.0, 1e6]))
    assert both.features_used().tolist() == [0]
    assert both.prediction_cost(X).batch == 1.0


def test_gamma_paid_reranks_other_leaves_with_penalised_gain():
    """After a split pays gamma_m, a cached candidate on m must keep its beta penalty.

    Raw gains (l2 = 0): leaf A: feature 2 -> 5.0, feature 1 -> 1.8; leaf B: feature 2 -> 11.25,
    feature 1 -> 4.05. Feature 2 costs gamma = 1 and beta = 0.4 per sample. B splits first on
    feature 2 (11.25 - 1 - 4 = 6.25) and pays its gamma. A's candidate on feature 2 is still
    penalised by beta * 10 unpaid rows (5 - 4 = 1 < 1.8), so A must split on feature 1.
    Promoting A's cached candidate with its unpenalised gain (LightGBM 4.7) picks feature 2.
    """
    n = 10
    side = np.repeat([0.0, 1.0], n)                      # feature 0: root split A | B
    a = np.tile(np.repeat([0.0, 1.0], n // 2), 2)        # feature 2: clean step in both halves
    b = a.copy(); b[[4, 5, 14, 15]] = b[[5, 4, 15, 14]]  # feature 1: one swap in both halves
    X = np.column_stack([side, b, a])
    y = 100 * side + np.where(side == 0, 2.0, 3.0) * a   # B's step larger: B split before A
    params = dict(max_leaves=4, cost_tradeoff=1.0, feature_batch_costs=[0, 0, 1.0],
                  feature_costs=[0, 0, 0.4])
    tree = _regression(X, y, **params).trees[0]
    order = np.argsort(np.where(tree["feature"] >= 0, tree["left"], np.inf))
    split_features = [int(tree["feature"][i]) for i in order if tree["feature"][i] >= 0]
    assert split_features == [0, 2, 1]
    # The reference (penalty recomputed from scratch at every step) agrees.
    ref = reference_trees(X, y, 1, 4, 1.0, 0.0, np.array([0, 0, 0.4]), np.array([0, 0, 1.0]),
                          np.ones(3), l2=0.0)[0]
    assert np.array_equal(ref["feature"], tree["feature"])


def test_split_cost_prefers_small_leaf_best_first_order():
    # Root splits 80 | 20 rows; both halves then have a split on feature 1, A's slightly better.
    group = np.r_[np.zeros(80), np.ones(20)]
    half = np.r_[np.repeat([0.0, 1.0], 40), np.repeat([0.0, 1.0], 10)]
    y = np.where(group == 0, np.where(half == 0, -1.0, 1.0), 10 + np.where(half == 0, -1.9, 1.9))
    X = np.column_stack([group, half])
    plain = _regression(X, y, max_leaves=3).trees[0]
    assert plain["feature"][0] == 0 and plain["feature"][1] == 1   # big leaf A (node 1) first
    costly = _regression(X, y, max_leaves=3, cost_tradeoff=1.0, split_cost=0.1).trees[0]
    assert costly["feature"][2] == 1 and costly["feature"][1] == -1  # small leaf B (node 2)
    assert costly["left"][2] == 3                                     # B's children created next


def test_lazy_cost_only_for_unpaid_samples_across_trees():
    # Tree 1: root on free feature 0, then the left half (5 rows) on costly feature 1.
    # Tree 2 splits the root on feature 1: only the 5 right rows still pay beta.
    X = np.column_stack([np.repeat([0.0, 1.0], 5), np.tile([0.0, 1.0], 5)])
    y = np.array([0, 3, 0, 3, 0, 10, 10, 10, 10, 10.0]) + 0.5 * X[:, 1]
    beta = 0.01
    model = train(X, y, "regression", dict(n_estimators=2, learning_rate=1.0, max_leaves=3,
                                           min_samples_leaf=1, cost_tradeoff=1.0,
                                           l2_regularization=0.0, feature_costs=[0.0, beta]))
    t1, t2 = model.trees
    assert t1["feature"][0] == 0 and t1["feature"][1] == 1
    assert t2["feature"][0] == 1
    ref = reference_trees(X, y, 2, 3, 1.0, 0.0, np.array([0, beta]), np.zeros(2), np.ones(2),
                          l2=0.0)
    for ours, theirs in zip(model.trees, ref):
        assert np.array_equal(ours["feature"], theirs["feature"])
        np.testing.assert_allclose(ours["value"], theirs["value"], rtol=1e-12, atol=1e-12)
    # Tree 2's root gain carries beta * 5 (unpaid rows), not beta * 10.
    pred = model.init_score[0] + t1["value"][model.apply(X)[:, 0]]
    g = pred - y
    left = X[:, 1] <= 0.5
    raw = 0.5 * (g[left].sum()**2 / left.sum() + g[~left].sum()**2 / (~left).sum()
                 - g.sum()**2 / 10)
    assert t2["gain"][0] == pytest.approx(raw - 5 * beta, rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_matches_reference_implementation(seed):
    """Random tiny problems with every cost term: trees equal the naive reference exactly."""
    _check_against_reference(seed, 4, 2)


@pytest.mark.parametrize("n_features, min_samples_leaf", [(1, 2), (2, 6), (5, 2), (7, 6)])
def test_matches_reference_with_features_in_threes_and_children_that_may_not_split(
        n_features, min_samples_leaf):
    """Features are histogrammed three at a time (here with a last group of one or two), and
    a child that may not split gets no histograms (the last split of every tree; with 6
    samples a leaf of 40 rows, many children of fewer than 12 labelled rows): the trees
    are still the reference's."""
    _check_against_reference(10 + n_features, n_features, min_samples_leaf)


def _check_against_reference(seed, m, min_samples_leaf):
    rng = np.random.default_rng(seed)
    n = 40
    X = rng.integers(0, 6, size=(n, m)).astype(float)
    y = X @ rng.normal(size=m) + rng.normal(scale=0.5, size=n)
    beta = rng.uniform(0, 0.05, m)
    gamma = rng.uniform(0, 2, m)
    share = rng.choice([1.0, 4.0, 16.0, 64.0], m)
    alpha = 0.02
    model = train(X, y, "regression", dict(n_estimators=4, learning_rate=1.0, max_leaves=6,
                                           min_samples_leaf=min_samples_leaf, cost_tradeoff=1.0,
                                           split_cost=alpha, feature_costs=beta,
                                           feature_batch_costs=gamma, feature_share=share))
    ref = reference_trees(X, y, 4, 6, 1.0, alpha, beta, gamma, share,
                          min_samples_leaf=min_samples_leaf)
    assert len(model.trees) == len(ref) == 4
    for ours, theirs in zip(model.trees, ref):
        assert np.array_equal(ours["feature"], theirs["feature"])
        assert np.array_equal(ours["left"], theirs["left"])
        split = ours["feature"] >= 0
        np.testing.assert_allclose(ours["threshold"][split], theirs["threshold"][split])
        np.testing.assert_allclose(ours["value"], theirs["value"], rtol=1e-10, atol=1e-10)


def test_path_share_cost_equals_reported_evaluation_cost():
    """Training's alpha term uses min(s_p, s_m); prediction_cost reports alpha / that share."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 3))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(float)
    share = np.array([64.0, 4.0, 1.0])
    model = train(X, y, "binary", dict(n_estimators=3, max_leaves=8, split_cost=1.0,
                                       feature_share=share, min_samples_leaf=5))
    cost = model.prediction_cost(X).evaluation
    expected = np.zeros(len(X))
    for tree in model.trees:
        for i, x in enumerate(X):
            node, s = 0, 64.0
            while tree["feature"][node] >= 0:
                f = tree["feature"][node]
                s = min(s, share[f])
                expected[i] += 1.0 / s
                node = tree["left"][node] if x[f] <= tree["threshold"][node] else tree["right"][node]
    np.testing.assert_allclose(cost, expected)


def test_missing_values_learn_a_direction():
    rng = np.random.default_rng(0)
    x = rng.normal(size=600)
    y = (x > 0).astype(float)
    x_missing = x.copy()
    x_missing[y == 1][:150] = np.nan
    x_missing[np.flatnonzero(y == 1)[:150]] = np.nan   # missing only among positives
    model = train(x_missing[:, None], y, "binary", dict(n_estimators=20))
    p_nan = model.predict_raw(np.array([[np.nan]]))[0]
    assert p_nan > 0   # NaN routed with the positives


def test_breadth_first_grows_level_by_level():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] ** 2 + X[:, 1]
    tree = train(X, y, "regression", dict(n_estimators=1, max_leaves=16, max_depth=4,
                                          growth="breadth_first", min_samples_leaf=2)).trees[0]
    depth = np.zeros(len(tree["feature"]), int)
    for node in range(len(depth)):
        if tree["feature"][node] >= 0:
            depth[tree["left"][node]] = depth[tree["right"][node]] = depth[node] + 1
    splits = np.flatnonzero(tree["feature"] >= 0)
    split_order = splits[np.argsort(tree["left"][splits])]
    assert np.all(np.diff(depth[split_order]) >= 0)
    assert depth.max() <= 4


def test_softmax_trees_share_cost_state():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = np.digitize(X[:, 0], [-0.5, 0.5]).astype(float)
    model = train(X, y, "multiclass", dict(n_estimators=3, max_leaves=2, cost_tradeoff=1.0,
                                           feature_batch_costs=[5.0, 5.0]), n_classes=3)
    assert model.n_trees == 9 and model.n_outputs == 3
    # gamma is paid once by the first class tree; the others reuse feature 0 for free.
    first = model.trees[0]["gain"][0]
    assert all(t["feature"][0] == 0 for t in model.trees)
    assert model.prediction_cost(X).batch == 5.0
    assert first > 0


@pytest.mark.parametrize("mu", [0.05, 0.0])
def test_class_trees_grown_side_by_side_are_those_grown_one_at_a_time(monkeypatch, mu):
    """A round's class trees grow side by side, one per thread, after a round that paid no
    new feature; when one of them pays a new feature's whole-model cost the trees after
    it grow again. With ``mu`` = 0 costs are not read: every round grows side by side and
    no tree grows again. The model must be the one grown a tree at a time, whatever the
    number of threads (2 and 3 with 4 classes). Trees of few rows x features grow one at
    a time (waking a thread costs more than they take)."""
    import types
    from msclassify.cegb import _grow, _train
    rng = np.random.default_rng(6)
    X = rng.normal(size=(3000, 8))
    X[rng.random(X.shape) < 0.02] = np.nan
    y = np.digitize(np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1] * X[:, 2]), [-1, 0, 1])
    params = dict(n_estimators=12, max_leaves=8, cost_tradeoff=mu, colsample=0.75,
                  feature_batch_costs=[1, 2, 3, 4, 1, 2, 3, 4], random_state=0)
    grown = []
    grow = _grow.TreeGrower.grow

    def counted(self, *args, **kwargs):
        grown.append(kwargs.get("serial", False))
        return grow(self, *args, **kwargs)
    monkeypatch.setattr(_grow.TreeGrower, "grow", counted)
    n_trees = 12 * 4
    monkeypatch.setattr(_train, "numba", types.SimpleNamespace(get_num_threads=lambda: 2))
    train(X, y, "multiclass", params, n_classes=4)
    assert grown == [False] * n_trees       # trees this small are not worth a thread
    monkeypatch.setattr(_train, "PARALLEL_LEAF_WORK", 0)
    monkeypatch.setattr(_train, "COUPLED_SIDE_BY_SIDE_WORK", 0)
    dumps = []
    for threads in (1, 2, 3):
        monkeypatch.setattr(_train, "numba", types.SimpleNamespace(
            get_num_threads=lambda threads=threads: threads))
        grown.clear()
        model = train(X, y, "multiclass", params, n_classes=4)
        dumps.append(model.dump())
        if threads == 1:
            assert grown == [False] * n_trees
        elif mu == 0:
            assert grown == [True] * n_trees
        else:
            assert sum(grown) >= n_trees // 4          # the calm rounds' trees
            assert len(grown) > n_trees                # some grew again
    assert dumps[0] == dumps[1] == dumps[2]
    assert model.features_used().size > 3


def test_callback_can_stop_training():
    X = np.random.default_rng(0).normal(size=(100, 2))
    seen = []
    model = train(X, X[:, 0], "regression", dict(n_estimators=50),
                  callback=lambda it, total: seen.append((it, total)) or it >= 3)
    assert model.n_iterations == 3 and seen[-1] == (3, 50)


def test_cost_curve_is_cumulative_and_ends_at_total():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = (X.sum(axis=1) > 0).astype(float)
    model = train(X, y, "binary", dict(n_estimators=8, split_cost=1.0,
                                       feature_costs=[1, 2, 3, 4], feature_batch_costs=[1, 1, 1, 1]))
    curve = model.cost_curve(X)
    cost = model.prediction_cost(X)
    assert np.all(np.diff(curve["total"]) >= 0)
    assert curve["total"][-1] == pytest.approx(cost.per_sample.mean())
    assert curve["batch"][-1] == cost.batch
    assert curve["evaluation"][2] == pytest.approx(model.prediction_cost(X, 3).evaluation.mean())


def test_serial_and_parallel_kernels_have_their_own_cache_entries():
    """Numba caches by function name, bytecode and signature, not by ``parallel``: twins
    compiled from one function under one name would load each other's machine code."""
    from msclassify.cegb import _kernels
    for name in ("root_splits", "split_leaf"):
        serial = getattr(_kernels, name + "_serial").py_func
        parallel = getattr(_kernels, name + "_parallel").py_func
        assert serial.__code__ is parallel.__code__          # one kernel, two compilations
        assert serial.__qualname__ != parallel.__qualname__  # two cache files


def test_binning_lookup_gives_the_plain_binary_search_bins():
    """The grid lookup of `bin_data` must bin every value as the plain search does."""
    from msclassify.cegb._binning import BinMapper
    rng = np.random.default_rng(0)
    n = 6000
    columns = [rng.normal(size=n), rng.standard_cauchy(size=n),              # heavy tails
               1e15 + rng.integers(0, 3000, n) * 0.125,                      # coarse float spacing
               np.round(rng.normal(size=n), 1), rng.integers(0, 2, n) * 1.0,  # few values
               np.full(n, 3.0), np.r_[np.zeros(n - 1), 1.0]]                  # constant, 2 values
    X = np.column_stack(columns)
    X[::13, 0] = np.nan
    for max_bins in (255, 63, 4):            # many, few and very few edges per grid cell
        binner = BinMapper(max_bins).fit(X)
        at_edges = np.where(np.isfinite(binner.edges), binner.edges, 0.0)[:, :200].T
        nudged = np.nextafter(at_edges, np.inf)
        below = np.nextafter(at_edges, -np.inf)
        for data in (X, at_edges, nudged, below, X.astype(np.float32)):
            data = np.ascontiguousarray(data)
            expected = np.empty((data.shape[1], data.shape[0]), dtype=np.uint8)
            for m in range(data.shape[1]):
                last = binner.n_bins[m] - 1
                expected[m] = np.searchsorted(binner.edges[m, :last], data[:, m], side="left")
                expected[m, np.isnan(data[:, m])] = 255
            np.testing.assert_array_equal(binner.transform(data), expected)


def test_parallel_and_serial_growth_give_identical_trees(monkeypatch):
    """The parallel kernels (chunked partition, features in parallel) must grow exactly the
    trees of the serial ones: the chunks are fixed, so results do not depend on threads."""
    from msclassify.cegb import _grow, _kernels
    rng = np.random.default_rng(4)
    n = 3 * _kernels.PARTITION_CHUNK + 123          # several partition chunks
    X = rng.normal(size=(n, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1] * X[:, 2]) > 0).astype(float)
    sample_weight = np.where(rng.random(n) < 0.3, 0.0, 1.0)       # cost-only rows
    cost_weight = np.where(sample_weight == 0, 2.5, rng.choice([0.0, 1.0], n))
    params = dict(n_estimators=4, max_leaves=12, min_samples_leaf=5, cost_tradeoff=1e-3,
                  split_cost=0.05, feature_costs=[0.1, 0.2, 0.3, 0.4, 0.5],
                  feature_batch_costs=[0, 5, 0, 5, 0], subsample=0.9, random_state=0)
    dumps = []
    for work in (0, 2**62):                          # everything parallel / everything serial
        monkeypatch.setattr(_grow, "PARALLEL_LEAF_WORK", work)
        dumps.append(train(X, y, "binary", params, sample_weight=sample_weight,
                           cost_weight=cost_weight).dump())
    assert dumps[0] == dumps[1]
    assert sum(len(t["feature"]) for t in dumps[0]["trees"]) > 4 * 15


def test_unit_cost_weights_counted_give_the_trees_of_weighed_rows():
    """Cost weights of 1 are counted (popcount, integer adds); weights of 2 with half the
    per-sample costs are summed as floats. Both give every penalty exactly, so the trees
    must be identical, over several trees of partly paid features."""
    rng = np.random.default_rng(5)
    n = 2000
    X = rng.normal(size=(n, 6))
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.normal(size=n) > 0).astype(float)
    beta = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
    params = dict(n_estimators=6, max_leaves=8, min_samples_leaf=5, cost_tradeoff=2e-3)
    counted = train(X, y, "binary", params | dict(feature_costs=beta))
    weighed = train(X, y, "binary", params | dict(feature_costs=beta / 2),
                    cost_weight=np.full(n, 2.0))
    for a, b in zip(counted.trees, weighed.trees):
        for key in ("feature", "threshold_bin", "left", "value", "gain"):
            np.testing.assert_array_equal(a[key], b[key])
    assert 1 < len(counted.features_used()) < 6        # the costs shaped the trees


def test_popcount_counts_the_set_bits_of_a_word():
    from numba import njit
    from msclassify.cegb._kernels import _popcount

    words = np.array([0, 1, 2**63, 2**64 - 1, 0x5555555555555555, 0xF0F0_0000_0000_8001],
                     dtype=np.uint64)
    count = njit(lambda w: np.array([_popcount(x) for x in w]))
    assert count(words).tolist() == [bin(int(w)).count("1") for w in words]


def test_add_lanes_adds_four_doubles_at_each_offset():
    from numba import njit
    from msclassify.cegb._lanes import add_lanes

    @njit
    def add(dst, i, src, j):
        add_lanes(dst, i, src, j)

    @njit
    def add_twice(dst, i, k, src, j):
        add_lanes(dst, (i, k), src, j)

    src = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    dst = np.arange(8.0)
    add(dst, 3, src, 1)
    np.testing.assert_array_equal(dst, [0, 1, 2, 3 + 20, 4 + 30, 5 + 40, 6 + 50, 7])
    dst = np.arange(12.0)
    add_twice(dst, 8, 1, src, 2)  # one source vector, two destinations
    np.testing.assert_array_equal(dst, [0, 1 + 30, 2 + 40, 3 + 50, 4 + 60, 5, 6, 7,
                                        8 + 30, 9 + 40, 10 + 50, 11 + 60])


@pytest.mark.parametrize("missing_left", [True, False])
def test_prediction_routes_by_threshold_and_missing_direction(missing_left):
    """A stump on feature 1 with threshold 0.5: <= goes left, > right, NaN by default_left."""
    from msclassify.cegb import Booster
    stump = {"feature": [1, -1, -1], "threshold": [0.5, None, None],
             "default_left": [missing_left, False, False], "left": [1, -1, -1],
             "right": [2, -1, -1], "value": [0.0, -1.0, 2.0], "count": [3, 1, 2],
             "share": [1, 1, 1], "gain": [1.0, 0, 0]}
    booster = Booster.from_dict({
        "objective": "regression", "n_features": 2, "init_score": [0.25], "split_cost": 0.0,
        "feature_costs": [0, 0], "feature_batch_costs": [0, 0], "feature_share": [1, 1],
        "params": {}, "trees": [stump, stump]})
    X = np.array([[9.0, 0.5], [9.0, 0.4999], [np.nan, 0.5000001], [0.0, np.nan], [0.0, -1e300]])
    nan_value = -1.0 if missing_left else 2.0
    expected = 0.25 + 2 * np.array([-1.0, -1.0, 2.0, nan_value, -1.0])
    np.testing.assert_array_equal(booster.predict_raw(X), expected)
    np.testing.assert_array_equal(booster.apply(X)[:, 0], [1, 1, 2, 1 if missing_left else 2, 1])


def _preorder_tree_booster(left_of_root=1):
    """x0 <= 0 ? (x1 <= 0 ? 1 : 2) : 3, nodes in depth-first order as LightGBM lists them:
    the root's children (1 and 4) are not side by side."""
    from msclassify.cegb import Booster
    tree = {"feature": [0, 1, -1, -1, -1], "threshold": [0.0, 0.0, None, None, None],
            "default_left": [True, False, False, False, False],
            "left": [left_of_root, 2, -1, -1, -1], "right": [4, 3, -1, -1, -1], "value": [0.0, 0.0, 1.0, 2.0, 3.0],
            "count": [3, 2, 1, 1, 1], "share": [1] * 5, "gain": [1.0, 1.0, 0, 0, 0]}
    return Booster.from_dict({
        "objective": "regression", "n_features": 2, "init_score": [0.0], "split_cost": 0.0,
        "feature_costs": [1.0, 2.0], "feature_batch_costs": [0, 0], "feature_share": [1, 1],
        "params": {}, "trees": [tree]})


def test_prediction_lays_out_trees_whose_children_are_not_side_by_side():
    booster = _preorder_tree_booster()
    X = np.array([[-1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [np.nan, 1.0]])
    np.testing.assert_array_equal(booster.predict_raw(X), [1.0, 2.0, 3.0, 2.0])
    np.testing.assert_array_equal(booster.apply(X)[:, 0], [2, 3, 4, 3])   # the file's node ids
    np.testing.assert_array_equal(booster.prediction_cost(X).feature, [3.0, 3.0, 1.0, 3.0])


def test_a_node_with_two_parents_is_not_a_tree():
    booster = _preorder_tree_booster(left_of_root=4)      # both children of the root are node 4
    with pytest.raises(ValueError, match="two parents"):
        booster.predict_raw(np.zeros((1, 2)))


def test_threshold_falls_halfway_between_two_tied_groups():
    """300 zeros (class 0), 300 ones and 400 distinct values in [2, 3] (class 1): more
    distinct values than bins, so this column is cut at quantiles. The only useful split
    is between the tied groups 0 and 1; it must sit halfway (0.5), so an unseen 0.4 goes
    with the zeros and 0.6 with the ones (a threshold at the tied value 0 itself would
    send 0.4 to class 1)."""
    x = np.r_[np.zeros(300), np.ones(300), np.linspace(2, 3, 400)]
    y = np.r_[np.zeros(300), np.ones(700)]
    model = train(x[:, None], y, "binary", dict(n_estimators=1, max_leaves=2, min_samples_leaf=1))
    assert model.trees[0]["threshold"][0] == 0.5
    raw = model.predict_raw(np.array([[0.0], [0.4], [0.6], [1.0]]))
    assert raw[0] == raw[1] < raw[2] == raw[3]


def test_quantile_bins_end_halfway_to_the_next_value():
    """Eight zeros and the values 1..8 once each, at most 5 bins: the row quantiles
    (method "lower", 16 rows) at 1/5 .. 4/5 are the values 0, 0, 2, 5, so the bins are
    {0} | {1, 2} | {3, 4, 5} | {6, 7, 8} with edges halfway to the next value."""
    from msclassify.cegb._binning import BinMapper
    X = np.r_[np.zeros(8), np.arange(1.0, 9.0)][:, None]
    binner = BinMapper(max_bins=5).fit(X)
    assert binner.n_bins[0] == 4
    assert binner.edges[0, :3].tolist() == [0.5, 2.5, 5.5]
    assert binner.transform(X)[0].tolist() == [0] * 8 + [1, 1, 2, 2, 2, 3, 3, 3]


def test_adjacent_float32_values_are_split_apart():
    """Two tied groups at adjacent float32 values: their float32 midpoint rounds (half to
    even) up to the larger one, which would put both groups in one bin; the edge must lie
    in [a, b), so a tree separates the classes exactly."""
    a = np.float32(1 + 2.0**-23)
    b = np.nextafter(a, np.float32(2))
    assert np.float32((a + b) / np.float32(2)) == b          # the rounding this guards against
    X = np.r_[np.full(20, a), np.full(20, b)].astype(np.float32)[:, None]
    y = np.r_[np.zeros(20), np.ones(20)]
    model = train(X, y, "binary", dict(n_estimators=1, max_leaves=2, min_samples_leaf=1))
    assert a <= model.trees[0]["threshold"][0] < b
    raw = model.predict_raw(X)
    assert raw[0] < raw[-1] and len(np.unique(raw)) == 2


def test_bin_edges_are_midpoints_of_adjacent_distinct_values():
    """Random columns with heavy ties, few and many distinct values: every edge is the
    midpoint of two adjacent distinct training values, no tied group is split (all its
    rows share a bin), one bin per value when they fit, never more than max_bins."""
    from msclassify.cegb._binning import BinMapper
    rng = np.random.default_rng(1)
    n = 3000
    columns = [rng.integers(0, 40, n) / 4.0,                                # 40 values
               np.where(rng.random(n) < 0.6, 0.0, rng.normal(size=n)),      # 60% ties at 0
               np.round(rng.exponential(size=n), 2),                        # many small ties
               rng.normal(size=n)]                                          # all distinct
    X = np.column_stack(columns)
    for max_bins in (255, 16):
        binner = BinMapper(max_bins=max_bins).fit(X)
        bins = binner.transform(X)
        for m in range(X.shape[1]):
            values = np.unique(X[:, m])
            edges = binner.edges[m, :binner.n_bins[m] - 1]
            assert binner.n_bins[m] <= max_bins
            if values.size <= max_bins:
                assert binner.n_bins[m] == values.size
            below = values[np.searchsorted(values, edges) - 1]
            above = values[np.searchsorted(values, edges)]
            np.testing.assert_array_equal(edges, (below + above) / 2)
            for value in values:
                assert np.unique(bins[m][X[:, m] == value]).size == 1


def test_radix_sort_orders_floats_as_numpy():
    """`sort_floats` on negative, positive, tiny, huge and signed-zero values, and on
    float32 values cast to float64 (low 29 bits zero: passes that move nothing are
    skipped), gives numpy's order; -0.0 lands next to +0.0."""
    from msclassify.cegb._kernels import sort_floats
    hand = np.array([3.0, -1.0, 0.0, -0.0, 5e-324, -5e-324, 1e308, -1e308, 2.5, -1.0])
    rng = np.random.default_rng(2)
    for values in (hand, rng.normal(size=5000), rng.normal(size=5000).astype(np.float32) * 1.0,
                   np.round(rng.exponential(size=3000), 2), np.array([7.0]), np.empty(0)):
        values = np.array(values, dtype=np.float64)
        expected = np.sort(values)
        keys, spare = np.empty(values.size, np.uint64), np.empty(values.size, np.uint64)
        sort_floats(values, keys, spare)
        np.testing.assert_array_equal(values, expected)
    sort_floats(hand, np.empty(hand.size, np.uint64), np.empty(hand.size, np.uint64))
    assert hand[:5].tolist() == [-1e308, -1.0, -1.0, -5e-324, -0.0]
    assert np.signbit(hand[4]) and not np.signbit(hand[5])


def test_bin_edges_follow_the_quantile_rule_of_numpy():
    """`BinMapper` (the `column_edges` kernel) against its rule written with NumPy:
    distinct values, ``np.quantile(..., method="lower")`` of the non-NaN values,
    float64 midpoints; columns with NaN, all NaN, one value, ties, float32."""
    from msclassify.cegb._binning import BinMapper
    rng = np.random.default_rng(3)
    n = 4000
    X = np.column_stack([rng.normal(size=n), np.round(rng.normal(size=n), 1),
                         np.where(rng.random(n) < 0.7, 0.0, rng.exponential(size=n)),
                         np.full(n, np.nan), np.full(n, -2.0), rng.integers(0, 300, n) * 1.0])
    X[rng.random(n) < 0.2, 0] = np.nan
    for data in (X, X.astype(np.float32)):
        for max_bins in (255, 8):
            binner = BinMapper(max_bins=max_bins).fit(data)
            for m in range(X.shape[1]):
                column = data[:, m][~np.isnan(data[:, m])].astype(np.float64)
                values = np.unique(column)
                if values.size <= max_bins:
                    low = values[:-1]
                else:
                    q = np.quantile(column, np.linspace(0, 1, max_bins + 1)[1:-1], method="lower")
                    low = np.unique(q)
                    low = low[low < values[-1]]
                high = values[np.searchsorted(values, low) + 1]
                mid = 0.5 * low + 0.5 * high
                expected = np.where(mid < high, mid, low)
                assert binner.n_bins[m] == expected.size + 1
                np.testing.assert_array_equal(binner.edges[m, :expected.size], expected)
                assert np.all(np.isinf(binner.edges[m, expected.size:]))


def test_softmax_gradients_by_hand_and_as_scipy():
    """Equal raw scores of 4 classes: p = 1/4, so the gradient is (1/4 - onehot) * w and
    the hessian 3/16 * w; random scores of 3 and 9 classes give SciPy's softmax values bit
    for bit; every class's column is contiguous (a per-class tree reads it in place)."""
    from scipy.special import softmax
    from msclassify.cegb._losses import MIN_HESSIAN, _row_max, make_objective
    grad, hess = make_objective("multiclass", 4).gradients(
        np.zeros((2, 4)), np.array([0.0, 3.0]), np.array([1.0, 2.0]))
    assert grad.tolist() == [[-0.75, 0.25, 0.25, 0.25], [0.5, 0.5, 0.5, -1.5]]
    assert hess.tolist() == [[0.1875] * 4, [0.375] * 4]
    assert all(grad[:, k].flags["C_CONTIGUOUS"] for k in range(4))
    rng = np.random.default_rng(4)
    row_max = np.empty((2, 1))                  # the shift, wherever a row's largest score is
    _row_max(np.array([[1.0, 5.0, 2.0, 9.0], [-3.0, -7.0, -1.0, -2.0]]), row_max)
    assert row_max.tolist() == [[9.0], [-1.0]]
    for n_classes in (3, 9):
        raw = rng.normal(size=(1000, n_classes)) * 20
        y = rng.integers(0, n_classes, 1000).astype(float)
        weight = rng.random(1000)
        p = softmax(raw, axis=-1)
        onehot = np.eye(n_classes)[y.astype(int)]
        grad, hess = make_objective("multiclass", n_classes).gradients(raw, y, weight)
        np.testing.assert_array_equal(grad, (p - onehot) * weight[:, None])
        np.testing.assert_array_equal(hess, np.maximum(p * (1 - p), MIN_HESSIAN) * weight[:, None])


def test_warm_start_continues_the_trees_and_counts_their_features_as_paid():
    x = np.repeat([0.0, 1.0], 10)
    X = np.column_stack([x, x])          # two copies: identical raw gain
    y = x * 4.0
    base = dict(learning_rate=0.5, max_leaves=2, min_samples_leaf=1, l2_regularization=0.0)
    first = train(X, y, "regression", base | dict(n_estimators=1))   # μ = 0: the tie goes to 0
    assert first.trees[0]["feature"][0] == 0
    costly = base | dict(n_estimators=2, cost_tradeoff=0.01, feature_batch_costs=[5.0, 1.0])
    fresh = train(X, y, "regression", costly)
    warm = train(X, y, "regression", costly, init_booster=first)
    assert [t["feature"][0] for t in fresh.trees] == [1, 1]           # the cheaper copy
    assert warm.trees[0] is first.trees[0]
    assert warm.trees[1]["feature"][0] == 0                            # already paid: free
    # mean 2, first tree +-2 x 0.5, second tree the residual +-1 x 0.5
    np.testing.assert_allclose(warm.predict_raw(X), np.where(x > 0, 3.5, 0.5))
    done = train(X, y, "regression", base | dict(n_estimators=1), init_booster=first)
    assert done.n_trees == 1 and np.array_equal(done.predict_raw(X), first.predict_raw(X))
    with pytest.raises(ValueError, match="init_booster has 2 features and 1 outputs, the fit 3"):
        train(np.column_stack([x, x, x]), y, "regression", base, init_booster=first)
    with pytest.raises(ValueError, match="feature_costs all zero"):
        train(X, y, "regression", base | dict(feature_costs=[1.0, 0.0]), init_booster=first)
