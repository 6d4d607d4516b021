"""Budgets: ``with_budget`` of the CEGB estimators and `select_within_budget` across model kinds.

The data has a cheap feature (cost 1) and an expensive one (cost 10); the label
depends on both, the cheap one more. Boosted stumps split every sample at the
root, so the mean cost of a prefix is known by hand: 1 once the cheap feature
has been used, plus 10 once the expensive one has.
"""

import math

import numpy as np
import pytest

from msclassify import CEGBClassifier, CEGBRegressor, GreedyMiserClassifier, load_model
from msclassify.baselines import BudgetRFClassifier, CSTCClassifier
from msclassify.budget import select_within_budget, with_feature_costs

COSTS = [1.0, 10.0]


def make_data(n, seed, regression=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    latent = X[:, 0] + 0.3 * X[:, 1]
    return X, (latent + 0.1 * rng.normal(size=n) if regression else (latent > 0).astype(int))


@pytest.fixture(scope="module")
def data():
    return make_data(300, 0), make_data(300, 1)


@pytest.fixture(scope="module")
def stumps(data):
    (X, y), _ = data
    return CEGBClassifier(n_estimators=20, max_leaves=2, min_samples_leaf=5, learning_rate=0.3,
                          feature_costs=COSTS).fit(X, y)


def hand_costs(model):
    """Mean cost of every prefix (0..n iterations) of boosted stumps, from their root features."""
    roots = [int(tree["feature"][0]) for tree in model.booster_.trees]
    return np.array([sum(COSTS[f] for f in set(roots[:j]) if f >= 0)
                     for j in range(len(roots) + 1)])


def prefix_accuracies(model, X, y):
    constant = np.mean(model.predict(X, n_iterations=0) == y)
    return np.r_[constant, [np.mean(p == y) for p in model.staged_predict(X)]]


def test_prefix_costs_are_the_hand_computed_ones(stumps, data):
    _, (X_val, _) = data
    costs = hand_costs(stumps)
    roots = [int(tree["feature"][0]) for tree in stumps.booster_.trees]
    # the premise of the tests below: cheap stumps first, the expensive feature later
    assert roots[:3] == [0, 0, 0] and 1 in roots
    np.testing.assert_allclose(np.r_[0.0, stumps.cost_curve(X_val)["total"]], costs)
    for j in range(stumps.n_iterations_ + 1):
        assert stumps.prediction_cost(X_val, j).per_sample.mean() == pytest.approx(costs[j])


def test_budget_below_the_expensive_feature_never_buys_it(stumps, data):
    _, (X_val, y_val) = data
    costs, accuracy = hand_costs(stumps), prefix_accuracies(stumps, X_val, y_val)
    first_expensive = int(np.argmax(costs >= 10))
    for budget in (1.0, 5.0, 9.99):
        cut = stumps.with_budget(budget, X_val, y_val)
        assert 1 not in cut.booster_.features_used()
        assert cut.n_iterations_ < first_expensive
        expected = int(np.argmax(accuracy[:first_expensive]))  # first maximum = cheapest
        assert cut.n_iterations_ == expected
        assert cut.validation_score_ == pytest.approx(accuracy[expected])
        assert cut.validation_cost_ == pytest.approx(costs[expected])
        assert cut.validation_cost_ <= budget
        assert cut.prediction_cost(X_val).per_sample.mean() == pytest.approx(cut.validation_cost_)
    assert cut.n_iterations_ > 0 and cut.validation_score_ > accuracy[0]  # cheap beats constant


def test_budget_zero_gives_the_constant_model(stumps, data):
    (_, y), (X_val, y_val) = data
    cut = stumps.with_budget(0, X_val, y_val)
    assert cut.n_iterations_ == 0 and cut.booster_.n_trees == 0
    assert cut.validation_cost_ == 0.0 and cut.budget_ == 0.0
    majority = np.argmax(np.bincount(y))
    np.testing.assert_array_equal(cut.predict(X_val), majority)
    np.testing.assert_allclose(cut.predict_proba(X_val)[:, 1], y.mean())
    assert cut.validation_score_ == pytest.approx(np.mean(y_val == majority))
    cost = cut.prediction_cost(X_val)
    assert cost.per_sample.max() == 0.0 and cut.booster_.features_used().size == 0


def test_huge_budget_picks_the_most_accurate_prefix(stumps, data):
    _, (X_val, y_val) = data
    accuracy = prefix_accuracies(stumps, X_val, y_val)
    cut = stumps.with_budget(1e9, X_val, y_val)
    assert cut.n_iterations_ == int(np.argmax(accuracy))
    assert cut.validation_score_ == pytest.approx(accuracy.max())
    assert accuracy.max() > accuracy[1]  # buying the expensive feature pays off here
    np.testing.assert_array_equal(cut.predict(X_val), stumps.predict(X_val, cut.n_iterations_))
    assert cut.validation_cost_ == pytest.approx(cut.prediction_cost(X_val).per_sample.mean())


def test_custom_scoring_gets_probabilities(stumps, data):
    _, (X_val, y_val) = data
    seen = []

    def brier(truth, proba):
        seen.append(proba.shape)
        return -np.mean((proba[:, 1] - truth) ** 2)

    cut = stumps.with_budget(1e9, X_val, y_val, scoring=brier)
    assert seen == [(len(y_val), 2)] * (stumps.n_iterations_ + 1)
    assert cut.validation_score_ == pytest.approx(brier(y_val, cut.predict_proba(X_val)))


def test_the_original_estimator_is_unchanged(stumps, data):
    _, (X_val, y_val) = data
    before = stumps.predict_proba(X_val)
    n_trees = stumps.booster_.n_trees
    stumps.with_budget(5.0, X_val, y_val)
    assert stumps.booster_.n_trees == n_trees
    assert not hasattr(stumps, "budget_")
    np.testing.assert_array_equal(stumps.predict_proba(X_val), before)


def test_a_cut_model_survives_save_and_load(stumps, data, tmp_path):
    _, (X_val, y_val) = data
    cut = stumps.with_budget(5.0, X_val, y_val)
    path = tmp_path / "cut.msc"
    cut.save(path)
    loaded = load_model(path)
    assert type(loaded) is CEGBClassifier
    assert loaded.n_iterations_ == cut.n_iterations_ < stumps.n_iterations_
    np.testing.assert_array_equal(loaded.predict_proba(X_val), cut.predict_proba(X_val))
    np.testing.assert_array_equal(loaded.prediction_cost(X_val).per_sample,
                                  cut.prediction_cost(X_val).per_sample)
    for name in ("budget_", "validation_cost_", "validation_score_"):
        assert getattr(loaded, name) == getattr(cut, name)


@pytest.mark.parametrize("budget", [-1.0, math.nan, math.inf, "5", None, True])
def test_bad_budgets_are_rejected(stumps, data, budget):
    _, (X_val, y_val) = data
    with pytest.raises(ValueError, match="budget must be a finite number >= 0"):
        stumps.with_budget(budget, X_val, y_val)
    with pytest.raises(ValueError, match="budget must be a finite number >= 0"):
        select_within_budget([stumps], budget, X_val, y_val)


def test_bad_validation_labels_are_rejected(stumps, data):
    _, (X_val, y_val) = data
    with pytest.raises(ValueError, match="not in the training classes"):
        stumps.with_budget(5.0, X_val, y_val + 2)
    with pytest.raises(ValueError, match="one label per row"):
        stumps.with_budget(5.0, X_val, y_val[:-1])


def test_regressor_budget_uses_r2_and_the_hand_costs():
    X, y = make_data(300, 0, regression=True)
    X_val, y_val = make_data(300, 1, regression=True)
    model = CEGBRegressor(n_estimators=20, max_leaves=2, min_samples_leaf=5, learning_rate=0.3,
                          feature_costs=COSTS).fit(X, y)
    costs = hand_costs(model)
    r2 = [1 - np.sum((y_val - p) ** 2) / np.sum((y_val - y_val.mean()) ** 2)
          for p in [model.predict(X_val, 0), *model.staged_predict(X_val)]]
    for budget in (0.0, 5.0, 1e9):
        cut = model.with_budget(budget, X_val, y_val)
        feasible = np.flatnonzero(costs <= budget)
        assert cut.n_iterations_ == feasible[np.argmax(np.asarray(r2)[feasible])]
        assert cut.validation_score_ == pytest.approx(r2[cut.n_iterations_])
        assert cut.validation_cost_ == pytest.approx(costs[cut.n_iterations_])
        assert cut.validation_cost_ <= budget


def test_greedy_miser_and_multiclass_keep_their_kind(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3))
    y = np.digitize(X[:, 0] + 0.5 * X[:, 2], [-0.5, 0.5])   # three classes
    miser = GreedyMiserClassifier(n_estimators=10, cost_tradeoff=0.01,
                                  feature_costs=[1, 1, 10]).fit(X[:200], y[:200])
    cut = miser.with_budget(1e9, X[200:], y[200:])
    assert type(cut) is GreedyMiserClassifier and cut.booster_.n_outputs == 3
    assert cut.booster_.n_trees == 3 * cut.n_iterations_
    cut.save(tmp_path / "miser.msc")
    loaded = load_model(tmp_path / "miser.msc")
    assert type(loaded) is GreedyMiserClassifier
    np.testing.assert_array_equal(loaded.predict(X[200:]), cut.predict(X[200:]))


# -- select_within_budget ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def three_kinds(data, stumps):
    (X, y), (X_val, y_val) = data
    forest = BudgetRFClassifier(n_estimators=8, feature_costs=COSTS, random_state=0).fit(X, y)
    tree = CSTCClassifier(max_depth=1, feature_map="identity", cost_tradeoff=0.0,
                          feature_costs=COSTS).fit(X, y)
    return [stumps, forest, tree]


def test_cstc_counts_with_its_whole_cost(three_kinds, data):
    _, (X_val, y_val) = data
    tree = three_kinds[2]
    cost = tree.prediction_cost(X_val).per_sample.mean()
    assert cost == pytest.approx(11.0)   # a linear model on both features buys both
    chosen = select_within_budget([tree], 11.0, X_val, y_val)
    assert chosen is not tree and not hasattr(tree, "budget_")
    assert chosen.validation_cost_ == pytest.approx(11.0)
    assert chosen.validation_score_ == pytest.approx(np.mean(tree.predict(X_val) == y_val))
    # the label is linear, so the linear CSTC model is the most accurate once it is affordable
    assert type(select_within_budget(three_kinds, 11.0, X_val, y_val)) is CSTCClassifier
    assert type(select_within_budget(three_kinds, 10.5, X_val, y_val)) is not CSTCClassifier
    with pytest.raises(ValueError, match=r"no model fits the budget 10.*CSTCClassifier.*costs 11"):
        select_within_budget([tree], 10.0, X_val, y_val)


@pytest.mark.parametrize("budget", [0.0, 1.0, 5.0, 10.5, 11.0, 1e9])
def test_select_within_budget_picks_the_best_affordable_model(three_kinds, data, budget):
    _, (X_val, y_val) = data
    chosen = select_within_budget(three_kinds, budget, X_val, y_val)
    assert chosen.validation_cost_ <= budget
    assert chosen.prediction_cost(X_val).per_sample.mean() == pytest.approx(chosen.validation_cost_)
    assert chosen.validation_score_ == pytest.approx(np.mean(chosen.predict(X_val) == y_val))
    # every model (cut to the budget where it can be) is at most as accurate
    stumps, forest, tree = three_kinds
    rivals = [stumps.with_budget(budget, X_val, y_val), forest.with_budget(budget, X_val, y_val)]
    rival_scores = [r.validation_score_ for r in rivals]
    if tree.prediction_cost(X_val).per_sample.mean() <= budget:
        rival_scores.append(np.mean(tree.predict(X_val) == y_val))
    assert chosen.validation_score_ == pytest.approx(max(rival_scores))


def test_select_within_budget_rejects_bad_model_lists(three_kinds, data):
    _, (X_val, y_val) = data
    X, y = make_data(100, 3, regression=True)
    regressor = CEGBRegressor(n_estimators=3).fit(X, y)
    with pytest.raises(ValueError, match="mixes classifiers and regressors"):
        select_within_budget([three_kinds[0], regressor], 5.0, X_val, y_val)
    with pytest.raises(ValueError, match="models is empty"):
        select_within_budget([], 5.0, X_val, y_val)
    with pytest.raises(TypeError, match="no prediction_cost"):
        select_within_budget([object()], 5.0, X_val, y_val)


# -- with_feature_costs --------------------------------------------------------------------------
@pytest.mark.parametrize("make_model", [
    lambda: CEGBClassifier(n_estimators=10, feature_costs=COSTS),
    lambda: BudgetRFClassifier(n_estimators=3, feature_costs=COSTS, random_state=0),
    lambda: CSTCClassifier(max_depth=2, n_weak_learners=5, feature_costs=COSTS, random_state=0),
    lambda: CSTCClassifier(max_depth=1, feature_map="identity", feature_costs=COSTS),
], ids=["CEGB", "BudgetRF", "CSTC", "CSTC identity map"])
def test_with_feature_costs_reprices_every_model_kind(make_model, data):
    (X, y), (X_val, _) = data
    model = make_model().fit(X, y)
    before = model.prediction_cost(X_val)
    priced = with_feature_costs(model, 3 * np.asarray(COSTS))
    after = priced.prediction_cost(X_val)
    # every feature costs three times as much; evaluating the model costs the same
    assert before.feature.sum() > 0
    np.testing.assert_allclose(after.feature, 3 * before.feature)
    np.testing.assert_allclose(after.evaluation, before.evaluation)
    np.testing.assert_array_equal(priced.predict(X_val), model.predict(X_val))
    np.testing.assert_array_equal(model.prediction_cost(X_val).feature, before.feature)
