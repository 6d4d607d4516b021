"""BudgetRF (Nan, Wang & Saligrama, ICML 2015): split rule, cost accounting, budgets, real data."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.utils.estimator_checks import check_estimator

from benchmarks.shared_sets import load_miniboone_tiny
from msclassify.baselines import BudgetRFClassifier, threshold_pairs_impurity
from msclassify.modelfile import read_model


def _exact_stump(**params):
    """One tree on the whole sample with every threshold evaluated: fully deterministic."""
    return BudgetRFClassifier(n_estimators=1, bootstrap=False, n_candidate_stumps=None,
                              random_state=0, **params)


def _noisy_data(n=600, n_features=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features))
    y = (X[:, 0] + 0.7 * X[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(int)
    return X, y


# -- the impurity and the split rule ---------------------------------------------------------------
@pytest.mark.parametrize("counts, alpha, expected", [
    ([2, 2], 0.0, 8.0),        # ordered pairs: 2 * (2 * 2)
    ([3, 1], 0.0, 6.0),        # 2 * (3 * 1)
    ([4, 0], 0.0, 0.0),        # pure
    ([2, 1, 1], 0.0, 10.0),    # 2 * (2*1 + 2*1 + 1*1)
    ([2, 1, 1], 0.5, 2.0),     # 2 * ([1.5*0.5 - 0.25] + [1.5*0.5 - 0.25] + [0.5*0.5 - 0.25]_+)
    ([2, 2], 1.0, 0.0),        # [1*1 - 1]_+ = 0: alpha tolerates a 2/2 mix
    ([5, 3], 1.0, 14.0),       # 2 * [4*2 - 1]
])
def test_threshold_pairs_impurity_by_hand(counts, alpha, expected):
    assert threshold_pairs_impurity(np.array(counts, dtype=np.float64), alpha) == expected


def test_cheap_feature_wins_at_equal_impurity_reduction():
    # Both features separate the classes perfectly (reduction 8 -> 0); risk = cost / 8.
    X = np.array([[0.0, 10.0], [1.0, 11.0], [2.0, 12.0], [3.0, 13.0]])
    y = np.array([0, 0, 1, 1])
    root = _exact_stump(feature_costs=[1.0, 5.0]).fit(X, y).trees_[0]
    assert root["feature"][0] == 0 and root["threshold"][0] == 1.5  # midpoint of the gap
    root = _exact_stump(feature_costs=[5.0, 1.0]).fit(X, y).trees_[0]
    assert root["feature"][0] == 1 and root["threshold"][0] == 11.5


def test_risk_divides_cost_by_worst_child_reduction():
    # F(S) = 2*2*2 = 8. Feature 0 orders the labels 0,1,0,1: its best stump splits {0,1}|{0,1},
    # worst child F = 2*1*1 = 2, reduction 6, risk c0/6. Feature 1 is perfect: risk c1/8.
    X = np.array([[0.0, 0.0], [1.0, 2.0], [2.0, 1.0], [3.0, 3.0]])
    y = np.array([0, 1, 0, 1])
    # c0 = 1: risk 1/6 = 0.1667. c1 = 1.2 -> 0.15 (feature 1 wins); c1 = 1.4 -> 0.175 (feature 0).
    assert _exact_stump(feature_costs=[1.0, 1.2]).fit(X, y).trees_[0]["feature"][0] == 1
    tree = _exact_stump(feature_costs=[1.0, 1.4]).fit(X, y).trees_[0]
    assert tree["feature"][0] == 0 and tree["threshold"][0] == 1.5
    # Feature 0 alone cannot finish: its children {0,1} are split again.
    assert tree["feature"].size > 3


def test_trees_grow_until_leaves_are_pure_with_alpha_zero():
    X, y = _noisy_data(300)
    forest = _exact_stump().fit(X, y)
    tree = forest.trees_[0]
    leaves = tree["feature"] < 0
    assert np.all(np.count_nonzero(tree["class_counts"][leaves], axis=1) == 1)
    assert np.all(forest.predict(X) == y)  # distinct rows, pure leaves: training error 0
    # a larger alpha stops earlier: fewer nodes, impure leaves allowed
    shallow = _exact_stump(impurity_threshold=5.0).fit(X, y).trees_[0]
    assert shallow["feature"].size < tree["feature"].size


def test_paper_stump_schedule_is_an_approximation_of_the_exact_split():
    X, y = _noisy_data(3000, seed=1)
    exact = _exact_stump().fit(X, y).trees_[0]
    drawn = BudgetRFClassifier(n_estimators=1, bootstrap=False, random_state=0).fit(X, y).trees_[0]
    assert exact["feature"][0] == drawn["feature"][0] == 0  # the strong feature either way
    assert exact["threshold"][0] != drawn["threshold"][0]   # 80 random stumps miss the exact one


# -- costs -----------------------------------------------------------------------------------------
def test_feature_paid_once_per_sample_across_trees():
    X, y = _noisy_data()
    X[:, 3] = np.where(y == 1, 1.0, -1.0)  # feature 3 alone separates the classes
    forest = BudgetRFClassifier(n_estimators=10, feature_costs=[5, 5, 5, 2, 5, 5],
                                random_state=0).fit(X, y)
    assert all(tree["feature"].tolist() == [3, -1, -1] for tree in forest.trees_)
    cost = forest.prediction_cost(X)
    assert np.all(cost.feature == 2.0) and np.all(cost.n_features == 1)  # not 10 x 2
    assert np.all(cost.per_sample == cost.feature) and np.all(cost.evaluation == 0)


def test_prediction_cost_matches_brute_force_paths():
    X, y = _noisy_data()
    costs = np.array([3.0, 1.0, 2.0, 5.0, 1.0, 4.0])
    forest = BudgetRFClassifier(n_estimators=6, feature_costs=costs, random_state=1).fit(X, y)
    expected_cost, expected_count, per_tree_sum = [], [], []
    for x in X[:100]:
        acquired, summed = set(), 0.0
        for tree in forest.trees_:
            node, on_path = 0, set()
            while tree["feature"][node] >= 0:
                on_path.add(int(tree["feature"][node]))
                go_left = x[tree["feature"][node]] <= tree["threshold"][node]
                node = tree["left"][node] if go_left else tree["right"][node]
            acquired |= on_path
            summed += costs[list(on_path)].sum()
        expected_cost.append(costs[list(acquired)].sum())
        expected_count.append(len(acquired))
        per_tree_sum.append(summed)
    cost = forest.prediction_cost(X[:100])
    np.testing.assert_allclose(cost.feature, expected_cost)
    np.testing.assert_array_equal(cost.n_features, expected_count)
    assert cost.feature.sum() < np.sum(per_tree_sum)  # sharing across trees really saves


def test_cost_curve_is_cumulative_and_ends_at_prediction_cost():
    X, y = _noisy_data()
    forest = BudgetRFClassifier(n_estimators=8, random_state=0).fit(X, y)
    curve = forest.cost_curve(X)
    assert curve["feature"].shape == (8,) and np.all(np.diff(curve["feature"]) >= 0)
    assert curve["feature"][-1] == pytest.approx(forest.prediction_cost(X).feature.mean())
    assert curve["feature"][2] == pytest.approx(forest.prediction_cost(X, n_trees=3).feature.mean())
    np.testing.assert_allclose(curve["n_features"], curve["feature"])  # unit costs by default


# -- budgets ---------------------------------------------------------------------------------------
def test_budget_stops_before_the_tree_that_exceeds_it():
    X, y = _noisy_data(seed=2)
    X_val, y_val = _noisy_data(300, seed=3)
    costs = [1, 2, 3, 4, 5, 6]
    full = BudgetRFClassifier(n_estimators=20, feature_costs=costs, random_state=5).fit(X, y, X_val)
    curve = full.validation_cost_curve_
    assert curve.shape == (20,)
    np.testing.assert_allclose(curve, full.cost_curve(X_val)["feature"])
    k = int(np.argmax(curve > 0.5 * (curve[0] + curve[-1])))  # the first tree over a mid budget
    budget = 0.5 * (curve[k - 1] + curve[k])
    budgeted = BudgetRFClassifier(n_estimators=20, feature_costs=costs, budget=budget,
                                  random_state=5, n_jobs=2).fit(X, y, X_val)
    assert budgeted.n_trees_ == k
    assert budgeted.prediction_cost(X_val).feature.mean() <= budget < curve[k]
    for mine, reference in zip(budgeted.trees_, full.trees_):  # same trees, only fewer
        np.testing.assert_array_equal(mine["threshold"], reference["threshold"])


def test_budget_below_one_tree_gives_the_free_prior_model():
    X, y = _noisy_data()
    y[:400] = 1  # majority class 1
    with pytest.warns(UserWarning, match="the forest is empty"):
        forest = BudgetRFClassifier(n_estimators=5, budget=0.5, random_state=0).fit(X, y, X)
    assert forest.n_trees_ == 0
    assert np.all(forest.predict(X) == 1)
    np.testing.assert_allclose(forest.predict_proba(X)[0], np.bincount(y) / y.size)
    assert np.all(forest.prediction_cost(X).feature == 0)


def test_with_budget_picks_the_most_accurate_affordable_prefix():
    X, y = _noisy_data(seed=4)
    X_val, y_val = _noisy_data(400, seed=5)
    forest = BudgetRFClassifier(n_estimators=15, random_state=0).fit(X, y, X_val, y_val)
    costs = np.r_[0.0, forest.cost_curve(X_val)["feature"]]
    accuracy = np.r_[np.mean(y_val == np.argmax(np.bincount(y))), forest.validation_accuracy_curve_]
    staged = [np.mean(p == y_val) for p in forest.staged_predict(X_val)]
    np.testing.assert_allclose(accuracy[1:], staged)
    for budget in (0.0, costs[1], 0.5 * (costs[3] + costs[4]), costs[-1] + 1):
        feasible = np.flatnonzero(costs <= budget)
        expected = feasible[np.argmax(accuracy[feasible])]
        pruned = forest.with_budget(budget, X_val, y_val)
        assert pruned.n_trees_ == expected
        assert pruned.validation_cost_ <= budget
        assert pruned.validation_score_ == pytest.approx(accuracy[expected])
        assert np.mean(pruned.predict(X_val) == y_val) == pytest.approx(accuracy[expected])
    assert forest.n_trees_ == 15  # the original is untouched
    by_auc = forest.with_budget(costs[-1], X_val, y_val,
                                scoring=lambda truth, proba: -np.mean(np.abs(truth - proba[:, 1])))
    assert by_auc.validation_score_ <= 0


# -- estimator behaviour ---------------------------------------------------------------------------
def test_random_state_makes_fits_reproducible_and_threads_do_not_matter():
    X, y = _noisy_data()
    one = BudgetRFClassifier(n_estimators=6, random_state=3, n_jobs=1).fit(X, y)
    two = BudgetRFClassifier(n_estimators=6, random_state=3, n_jobs=2).fit(X, y)
    other = BudgetRFClassifier(n_estimators=6, random_state=4).fit(X, y)
    for a, b in zip(one.trees_, two.trees_):
        for name in ("feature", "threshold", "left", "right", "class_counts"):
            np.testing.assert_array_equal(a[name], b[name])
    np.testing.assert_array_equal(one.predict_proba(X), two.predict_proba(X))
    assert not np.array_equal(one.predict_proba(X), other.predict_proba(X))


def test_majority_vote_and_leaf_count_confidence():
    X, y = _noisy_data()
    forest = BudgetRFClassifier(n_estimators=7, random_state=0).fit(X, y)
    votes = np.zeros((X.shape[0], 2))
    counts = np.zeros((X.shape[0], 2))
    for tree in forest.trees_:
        for i, x in enumerate(X):
            node = 0
            while tree["feature"][node] >= 0:
                go_left = x[tree["feature"][node]] <= tree["threshold"][node]
                node = tree["left"][node] if go_left else tree["right"][node]
            votes[i, np.argmax(tree["class_counts"][node])] += 1
            counts[i] += tree["class_counts"][node]
    np.testing.assert_allclose(forest.predict_proba(X), counts / counts.sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(forest.predict(X), np.argmax(votes, axis=1))  # 7 trees: no ties


def test_multiclass_and_string_labels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    names = np.array(["ant", "bee", "cat"])
    y = names[np.digitize(X[:, 0] + 0.2 * rng.normal(size=600), [-0.5, 0.5])]
    forest = BudgetRFClassifier(n_estimators=10, random_state=0).fit(X[:400], y[:400])
    assert forest.predict_proba(X).shape == (600, 3)
    assert np.mean(forest.predict(X[400:]) == y[400:]) > 0.8


def test_save_and_reload(tmp_path):
    X, y = _noisy_data()
    forest = BudgetRFClassifier(n_estimators=4, feature_costs=[1, 2, 3, 4, 5, 6],
                                random_state=0).fit(X, y)
    forest.save(tmp_path / "forest.msc")
    kind, meta, arrays = read_model(tmp_path / "forest.msc")
    assert kind == "budgetrf_classifier"
    loaded = BudgetRFClassifier._from_model_file(meta, arrays)
    np.testing.assert_array_equal(loaded.predict_proba(X), forest.predict_proba(X))
    np.testing.assert_array_equal(loaded.prediction_cost(X).feature,
                                  forest.prediction_cost(X).feature)
    assert loaded.get_params() == forest.get_params() | {"feature_costs": [1, 2, 3, 4, 5, 6]}


@pytest.mark.parametrize("params, fit_kwargs, message", [
    ({"budget": 3.0}, {}, "budget needs validation data"),
    ({"feature_costs": [1, 2]}, {}, "feature_costs has 2 value"),
    ({"feature_costs": [1, -1, 1, 1, 1, 1]}, {}, "finite and >= 0"),
    ({"n_candidate_stumps": "many"}, {}, "n_candidate_stumps must be"),
    ({"impurity_threshold": -1}, {}, "impurity_threshold"),
    ({"n_estimators": 0}, {}, "n_estimators"),
    ({}, {"X_val": np.zeros((3, 2))}, "features"),
    ({}, {"X_val": np.zeros((3, 6)), "y_val": [0, 1]}, "one label per row"),
    ({}, {"X_val": np.zeros((2, 6)), "y_val": [0, 7]}, "not in the training classes"),
])
def test_bad_input_is_explained(params, fit_kwargs, message):
    X, y = _noisy_data(100)
    with pytest.raises(ValueError, match=message):
        BudgetRFClassifier(**params).fit(X, y, **fit_kwargs)


def test_nan_and_single_class_are_refused():
    X, y = _noisy_data(100)
    X[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        BudgetRFClassifier().fit(X, y)
    with pytest.raises(ValueError, match="only one class"):
        BudgetRFClassifier().fit(np.ones((5, 2)), np.zeros(5))


def test_sklearn_check_estimator():
    check_estimator(BudgetRFClassifier(n_estimators=5, random_state=0), expected_failed_checks={
        "check_classifiers_train":
            "predict is the paper's majority vote of the trees (Sec. 2.1) while predict_proba is "
            "its leaf-count confidence (Sec. 3); the two rules can disagree on a few samples"})


# -- real data -------------------------------------------------------------------------------------
def test_miniboone_accuracy_and_table1_feature_usage_trend(shared_data):
    """Paper Table 1: BudgetRF uses far fewer features per sample than a random forest.

    Measured here (random_state 0-3): BudgetRF uses 10-12 / 44-46 / 60-63 / 77-80 % of the 50
    features after 1 / 10 / 20 / 40 trees; sklearn's RandomForest (Gini, sqrt features, as the
    paper's TreeBagger) 16-18 / 72-76 / 89-90 / 97-98 %. Test accuracy 0.908-0.917 vs 0.905-0.910.
    """
    folder = shared_data("fnan_budgetrf").parent
    train, test = load_miniboone_tiny(folder, "train"), load_miniboone_tiny(folder, "test")
    forest = BudgetRFClassifier(n_estimators=40, random_state=0, n_jobs=2).fit(train.X, train.y)
    budget_pct = 100 * forest.cost_curve(test.X)["n_features"] / test.n_features
    accuracy = np.mean(forest.predict(test.X) == test.y)
    assert accuracy > 0.89

    rf = RandomForestClassifier(n_estimators=40, max_features="sqrt", random_state=0).fit(train.X,
                                                                                          train.y)
    used = np.zeros(test.X.shape, dtype=bool)
    rf_pct = []
    for tree in rf.estimators_:
        path = tree.decision_path(test.X).tocoo()
        feature = tree.tree_.feature[path.col]
        used[path.row[feature >= 0], feature[feature >= 0]] = True
        rf_pct.append(100 * used.sum(axis=1).mean() / test.n_features)
    for n_trees, margin in ((10, 20), (20, 15), (40, 10)):
        assert budget_pct[n_trees - 1] < rf_pct[n_trees - 1] - margin
    assert accuracy > rf.score(test.X, test.y) - 0.02  # the saving costs no accuracy
