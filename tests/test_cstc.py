"""CSTC (Xu et al., ICML 2013): objective gradients, the paper's synthetic data, costs, API."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator

from msclassify import ModelFileError, load_model
from msclassify.baselines import CSTCClassifier, CSTCRegressor
from msclassify.baselines._cstc import _TreeObjective  # white-box: the optimiser's gradients
from msclassify.datasets import QUADRANT_FEATURE_COSTS, make_cost_quadrants
from msclassify.modelfile import read_model, write_model

CHEAP, EXPENSIVE = QUADRANT_FEATURE_COSTS[0], QUADRANT_FEATURE_COSTS[-1]
COSTS = list(QUADRANT_FEATURE_COSTS)
quadrant_data = make_cost_quadrants


def _check_quadrant_tree(model, X_test, quadrant):
    """Each quadrant exits at its own node, whose path buys at most its own expert."""
    exits = model.apply(X_test)
    exit_of = {}
    for q in range(4):
        nodes, counts = np.unique(exits[quadrant == q], return_counts=True)
        assert counts.max() >= 0.99 * counts.sum(), f"quadrant {q} is split over nodes {nodes}"
        exit_of[q] = nodes[np.argmax(counts)]
    assert len(set(exit_of.values())) == 4
    for q, node in exit_of.items():
        experts = set(model.path_features(node).tolist()) - {0, 1}
        assert experts <= {2 + q}, f"quadrant {q}'s path buys experts {experts}"
    return exit_of


# -- the objective ------------------------------------------------------------------------------
def _random_problem(seed=0, n=40, T=5, d=4):
    rng = np.random.default_rng(seed)
    problem = _TreeObjective(rng.normal(size=(n, T)), rng.normal(size=n), rng.random(T),
                             3 * rng.random(d), rng.random((d, T)) < 0.5, cost_tradeoff=0.3,
                             l1=0.05, sharpness=1.3, depth=3)
    for k in range(6):                   # node 2 keeps one terminal element (a pruned layout)
        problem.activate(k)
    problem.coef[:6] = rng.normal(size=(6, T))
    problem.frozen[:, 2] = True
    problem.coef[:, 2] = 0.0
    problem.intercept[:] = rng.normal(size=7)
    problem.threshold[:] = rng.normal(size=7)
    problem.refresh_scores()
    return problem, rng


@pytest.mark.parametrize("node", [0, 1, 2, 4, 5])
def test_block_gradient_matches_finite_differences(node):
    problem, rng = _random_problem()
    problem.zeta = rng.random(problem.zeta.shape) + 0.5      # any positive auxiliaries
    problem.u = rng.random(problem.u.shape) + 0.5
    problem.w = rng.random(problem.w.shape) + 0.5
    block = problem.prepare_block(node)
    free = block[0]
    assert 2 not in free
    x0 = np.concatenate([problem.coef[node, free], [problem.intercept[node],
                                                    problem.threshold[node]]])
    numeric = approx_fprime(x0, lambda x: problem._block(x, node, block)[0], 1e-6)
    _, analytic = problem._block(x0, node, block)
    np.testing.assert_allclose(analytic, numeric, atol=1e-5)


def test_lemma1_bound_is_tight_at_the_closed_form_auxiliaries():
    # With z = sqrt(g) the smoothed objective equals Eq. (5) except for the l1 terms, which
    # the block keeps only for its own node and without the constant z/2.
    problem, _ = _random_problem(seed=1)
    problem.update_auxiliary()
    node = 1
    block = problem.prepare_block(node)
    free = block[0]
    x0 = np.concatenate([problem.coef[node, free], [problem.intercept[node],
                                                    problem.threshold[node]]])
    smoothed, _ = problem._block(x0, node, block)
    l1 = np.abs(problem.coef[problem.nodes()]).sum(axis=1)
    expected = problem.value() - problem.rho * (l1.sum() - l1[node] / 2)
    assert smoothed == pytest.approx(expected, rel=1e-10)


def test_coordinate_descent_never_increases_the_objective():
    X, y, _ = quadrant_data(400, 3)
    model = CSTCRegressor(max_depth=3, feature_map="identity", cost_tradeoff=0.01,
                          feature_costs=COSTS, l0_pruning=False).fit(X, y)
    curve = model.objective_curve_
    assert len(curve) > 2
    assert np.all(np.diff(curve) <= 1e-9 * np.abs(curve[:-1]))


# -- the paper's synthetic experiment -------------------------------------------------------------
def test_paper_synthetic_regression_tree():
    """Sec. 5.1 / Fig. 2: cheap features route each quadrant, one expert each, cost 12, MSE ~ 0."""
    X, y, _ = quadrant_data(1000, 0)
    X_test, y_test, quadrant = quadrant_data(4000, 1)
    model = CSTCRegressor(max_depth=3, feature_map="identity", cost_tradeoff=0.01,
                          feature_costs=COSTS).fit(X, y)
    exit_of = _check_quadrant_tree(model, X_test, quadrant)
    for q, node in exit_of.items():
        assert model.path_features(node).tolist() == [0, 1, 2 + q]
    cost = model.prediction_cost(X_test)
    np.testing.assert_allclose(cost.feature, 2 * CHEAP + EXPENSIVE)   # 12, as in the paper
    assert np.all(cost.evaluation == 0)
    mse = np.mean((model.predict(X_test) - y_test) ** 2)
    assert mse < 0.01

    # A single cost-sensitive linear model (Eq. 4) at no more cost is far worse.
    best_single = np.inf
    for cost_tradeoff in (0.0, 1e-3, 0.01, 0.1):
        single = CSTCRegressor(max_depth=1, feature_map="identity", cost_tradeoff=cost_tradeoff,
                               feature_costs=COSTS).fit(X, y)
        if single.prediction_cost(X_test).per_sample.mean() <= 12.0:
            best_single = min(best_single, np.mean((single.predict(X_test) - y_test) ** 2))
    assert best_single > 0.5 > 50 * mse

    # The paper's slope s = 1 mixes the quadrants in training (module docstring).
    soft = CSTCRegressor(max_depth=3, feature_map="identity", cost_tradeoff=0.01,
                         feature_costs=COSTS, routing_sharpness=1.0).fit(X, y)
    assert np.mean((soft.predict(X_test) - y_test) ** 2) > 10 * mse


def test_classifier_on_quadrant_data_beats_single_linear_model_at_equal_cost():
    X, y, _ = quadrant_data(1000, 0, "classification")
    X_test, y_test, quadrant = quadrant_data(4000, 1, "classification")
    model = CSTCClassifier(max_depth=3, feature_map="identity", cost_tradeoff=0.003,
                           feature_costs=COSTS).fit(X, y)
    _check_quadrant_tree(model, X_test, quadrant)
    cost = model.prediction_cost(X_test).per_sample.mean()
    accuracy = np.mean(model.predict(X_test) == y_test)
    assert accuracy > 0.98

    singles = []
    for cost_tradeoff in (0.0, 3e-4, 1e-3, 3e-3, 0.01):
        single = CSTCClassifier(max_depth=1, feature_map="identity",
                                cost_tradeoff=cost_tradeoff, feature_costs=COSTS).fit(X, y)
        single_cost = single.prediction_cost(X_test).per_sample.mean()
        singles.append((single_cost, np.mean(single.predict(X_test) == y_test)))
    affordable = [acc for c, acc in singles if c <= cost]
    assert affordable, f"no single model at cost <= {cost}: {singles}"
    assert max(affordable) < accuracy - 0.1


# -- costs ----------------------------------------------------------------------------------------
def test_identity_costs_by_hand():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X @ [1.0, -2.0, 0.5] + 0.1 * rng.normal(size=200)
    costs = [1.0, 2.0, 4.0]
    free = CSTCRegressor(max_depth=1, feature_map="identity", cost_tradeoff=0.0,
                         feature_costs=costs).fit(X, y)
    np.testing.assert_array_equal(free.prediction_cost(X).feature, 7.0)
    priced_out = CSTCRegressor(max_depth=1, feature_map="identity", cost_tradeoff=100.0,
                               feature_costs=costs).fit(X, y)
    assert priced_out.features_used().size == 0
    np.testing.assert_array_equal(priced_out.prediction_cost(X).feature, 0.0)
    np.testing.assert_allclose(priced_out.predict(X), y.mean())


def test_tree_feature_map_costs_match_the_paper_model():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 5))
    y = (X[:, 0] * X[:, 1] + X[:, 2] > 0).astype(int)
    costs = np.array([1.0, 2.0, 3.0, 50.0, 50.0])
    model = CSTCClassifier(max_depth=2, cost_tradeoff=1e-3, feature_costs=costs, tree_cost=0.5,
                           n_weak_learners=20, weak_learner_depth=2, random_state=0).fit(X, y)
    np.testing.assert_allclose(model._phi(X), model.booster_.tree_outputs(X))
    assert np.mean(model.predict(X) == y) > 0.8
    cost = model.prediction_cost(X)
    exits = model.apply(X)
    for i in range(0, 600, 37):     # recompute c^l from the raw model for a few samples
        path, node = [], exits[i]
        while True:
            path.append(node)
            parents = np.flatnonzero(np.any(model.children_ == node, axis=1))
            if parents.size == 0:
                break
            node = parents[0]
        trees = np.flatnonzero(np.any(model.coef_[path] != 0, axis=0))
        features = set()
        for t in trees:
            split_on = model.booster_.trees[t]["feature"]
            features |= set(split_on[split_on >= 0].tolist())
        assert cost.evaluation[i] == pytest.approx(0.5 * trees.size)
        assert cost.feature[i] == pytest.approx(costs[sorted(features)].sum())


# -- pruning and fine-tuning ----------------------------------------------------------------------
def test_validation_pruning_keeps_what_pays_and_drops_what_does_not():
    X, y, _ = quadrant_data(1000, 0, "classification")
    X_val, y_val, _ = quadrant_data(1000, 2, "classification")
    X_test, y_test, quadrant = quadrant_data(4000, 1, "classification")
    model = CSTCClassifier(max_depth=3, feature_map="identity", cost_tradeoff=0.003,
                           feature_costs=COSTS).fit(X, y, X_val, y_val)
    assert model.n_nodes_ == 7
    _check_quadrant_tree(model, X_test, quadrant)

    # Labels from the cheap features only: the subtrees add nothing on validation data.
    y_cheap = (X[:, 0] > 0).astype(int)
    pruned = CSTCClassifier(max_depth=3, feature_map="identity", cost_tradeoff=0.003,
                            feature_costs=COSTS).fit(X, y_cheap, X_val, (X_val[:, 0] > 0))
    assert pruned.n_nodes_ < 7
    assert np.mean(pruned.predict(X_test) == (X_test[:, 0] > 0)) == 1.0


def test_fine_tuning_keeps_the_support_and_lowers_the_training_loss():
    X, y, _ = quadrant_data(500, 0)
    tuned = CSTCRegressor(max_depth=3, feature_map="identity", cost_tradeoff=0.01,
                          feature_costs=COSTS).fit(X, y)
    assert np.all((tuned.prediction_coef_ != 0) <= (tuned.coef_ != 0))
    plain = CSTCRegressor(max_depth=3, feature_map="identity", cost_tradeoff=0.01,
                          feature_costs=COSTS, fine_tune=False).fit(X, y)
    np.testing.assert_array_equal(plain.prediction_coef_, plain.coef_)
    np.testing.assert_array_equal(tuned.coef_, plain.coef_)   # routing is untouched
    np.testing.assert_array_equal(tuned.apply(X), plain.apply(X))
    assert np.mean((tuned.predict(X) - y) ** 2) < np.mean((plain.predict(X) - y) ** 2)


# -- API ------------------------------------------------------------------------------------------
def test_sklearn_check_estimator():
    check_estimator(CSTCClassifier(max_depth=2, feature_map="identity", max_sweeps=2))


def test_sklearn_conventions():
    X, y, _ = quadrant_data(300, 0, "classification")
    labels = np.array(["no", "yes"])[y]
    model = CSTCClassifier(max_depth=2, feature_map="identity", feature_costs=COSTS)
    assert clone(model).get_params() == model.get_params()
    with pytest.raises(NotFittedError):
        model.predict(X)
    model.fit(X, labels)
    assert set(model.predict(X)) <= {"no", "yes"}
    proba = model.predict_proba(X)
    assert proba.shape == (300, 2) and np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(model.classes_[(proba[:, 1] > 0.5).astype(int)],
                                  model.predict(X))
    assert model.decision_function(X).shape == (300,)
    assert 0.0 <= model.score(X, labels) <= 1.0


@pytest.mark.parametrize("params, message", [
    ({"max_depth": 0}, "max_depth"),
    ({"cost_tradeoff": -1.0}, "cost_tradeoff"),
    ({"routing_sharpness": 0.0}, "routing_sharpness"),
    ({"feature_map": "kernel"}, "feature_map"),
    ({"feature_costs": [1.0, 2.0]}, "feature_costs"),
])
def test_bad_parameters_are_explained(params, message):
    X, y, _ = quadrant_data(100, 0, "classification")
    with pytest.raises(ValueError, match=message):
        CSTCClassifier(**({"feature_map": "identity"} | params)).fit(X, y)


def test_bad_inputs_are_explained():
    X, y, _ = quadrant_data(100, 0, "classification")
    with pytest.raises(ValueError, match="Only binary classification"):
        CSTCClassifier(feature_map="identity").fit(X, np.arange(100) % 3)
    with pytest.raises(ValueError, match="both X_val and y_val"):
        CSTCClassifier(feature_map="identity").fit(X, y, X_val=X)
    with pytest.raises(ValueError, match="not in y's classes"):
        CSTCClassifier(feature_map="identity").fit(X, y, X, np.full(100, 7))
    model = CSTCRegressor(max_depth=1, feature_map="identity").fit(X, y.astype(float))
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :3])


@pytest.mark.parametrize("feature_map", ["identity", "trees"])
def test_save_and_load_give_the_same_tree(tmp_path, feature_map):
    X, y, _ = quadrant_data(600, 0, "classification")
    X_test, _, _ = quadrant_data(500, 1, "classification")
    model = CSTCClassifier(feature_map=feature_map, feature_costs=COSTS, cost_tradeoff=0.003,
                           random_state=0).fit(X, y)
    model.save(tmp_path / "cstc.msc")
    loaded = load_model(tmp_path / "cstc.msc")
    assert type(loaded) is CSTCClassifier and loaded.get_params() == model.get_params()
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))
    np.testing.assert_array_equal(loaded.apply(X_test), model.apply(X_test))
    np.testing.assert_array_equal(loaded.prediction_cost(X_test).per_sample,
                                  model.prediction_cost(X_test).per_sample)
    regressor = CSTCRegressor(feature_costs=COSTS, random_state=0).fit(*quadrant_data(300, 0)[:2])
    regressor.save(tmp_path / "regressor.msc")
    np.testing.assert_array_equal(load_model(tmp_path / "regressor.msc").predict(X_test),
                                  regressor.predict(X_test))


def test_a_model_file_whose_tree_loops_is_refused(tmp_path):
    X, y, _ = quadrant_data(300, 0, "classification")
    CSTCClassifier(feature_map="identity", feature_costs=COSTS, random_state=0).fit(X, y).save(
        tmp_path / "cstc.msc")
    kind, meta, arrays = read_model(tmp_path / "cstc.msc")
    arrays["children"] = arrays["children"].copy()
    arrays["children"][1] = [0, -1]                  # node 1 points back to the root
    write_model(tmp_path / "bad.msc", kind, meta, arrays)
    with pytest.raises(ModelFileError, match="do not fit together"):
        load_model(tmp_path / "bad.msc")
