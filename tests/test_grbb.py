"""GRBB (gradient regularized budgeted boosting) and the LapGBRT baseline."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_moons
from sklearn.utils.estimator_checks import check_estimator

from msclassify import CEGBClassifier
from msclassify.baselines import GRBBClassifier, LaplacianBoostingClassifier
from msclassify.graph import knn_laplacian, prediction_variance_bound
from msclassify.modelfile import read_model


def _gradients(model, X_all, labels, raw):
    """The callable objective ``model`` builds for rows [labelled, unlabelled]."""
    encoded = np.searchsorted(np.unique(labels), labels)
    n_classes = np.unique(labels).size
    function = model._gradient_function(knn_laplacian(X_all, model.n_neighbors), encoded,
                                        n_classes)
    return function(np.asarray(raw, dtype=float), None)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


# -- gradients by hand -------------------------------------------------------------------------
def test_unlabelled_gradient_is_the_harmonic_extension_on_a_chain():
    # Points 0, 1, 2.1, 3.3 on a line: the 1-NN graph is the chain 0-1-2.1-3.3 (no ties).
    # Labelled: 0 (class 0) and 3.3 (class 1); rows are [labelled..., unlabelled...].
    X_all = np.array([[0.0], [3.3], [1.0], [2.1]])
    raw = np.array([1.0, 0.0, 0.5, -0.5])
    grad, hess = _gradients(GRBBClassifier(n_neighbors=1, laplacian_regularization=0.0),
                            X_all, np.array([0, 1]), raw)
    g0, g3 = _sigmoid(1.0) - 0.0, _sigmoid(0.0) - 1.0
    # Harmonic on the chain: g1 = (g0 + g2) / 2, g2 = (g1 + g3) / 2.
    np.testing.assert_allclose(grad, [g0, g3, (2 * g0 + g3) / 3, (g0 + 2 * g3) / 3])
    np.testing.assert_array_equal(hess, 1.0)

    # Eq. (3): the labelled rows add lambda (L H)_L with (L H)_0 = H(0) - H(1) and
    # (L H)_3.3 = H(3.3) - H(2.1).
    lam = 0.7
    grad, _ = _gradients(GRBBClassifier(n_neighbors=1, laplacian_regularization=lam),
                         X_all, np.array([0, 1]), raw)
    g0, g3 = g0 + lam * (1.0 - 0.5), g3 + lam * (0.0 - (-0.5))
    np.testing.assert_allclose(grad, [g0, g3, (2 * g0 + g3) / 3, (g0 + 2 * g3) / 3])


def test_label_free_component_gets_zero_gradient():
    # A second chain far away holds no label: L_UU is singular there without the ridge.
    X_all = np.array([[0.0], [2.0], [1.0], [100.0], [101.0], [102.0]])
    grad, _ = _gradients(GRBBClassifier(n_neighbors=1, laplacian_regularization=0.0),
                         X_all, np.array([0, 1]), np.zeros(6))
    np.testing.assert_allclose(grad, [0.5, -0.5, 0.0, 0.0, 0.0, 0.0], atol=1e-12)


def test_laplacian_boosting_gradient_is_eq2():
    X_all = np.array([[0.0], [3.3], [1.0], [2.1]])     # the chain of the test above
    raw = np.array([1.0, 0.0, 0.5, -0.5])
    lam = 0.7
    grad, _ = _gradients(LaplacianBoostingClassifier(n_neighbors=1, laplacian_regularization=lam),
                         X_all, np.array([0, 1]), raw)
    L_times_raw = np.array([1.0 - 0.5, 0.0 - (-0.5), 2 * 0.5 - 1.0 + 0.5, 2 * -0.5 - 0.5 - 0.0])
    expected = lam * L_times_raw + [_sigmoid(1.0), _sigmoid(0.0) - 1.0, 0.0, 0.0]
    np.testing.assert_allclose(grad, expected)


def test_multiclass_gradients_propagate_per_class():
    X_all = np.array([[0.0], [4.0], [8.5], [2.0], [6.2]])   # chain 0-2-4-6.2-8.5
    grad, _ = _gradients(GRBBClassifier(n_neighbors=1, laplacian_regularization=0.0),
                         X_all, np.array([0, 1, 2]), np.zeros((5, 3)))
    labelled = np.full((3, 3), 1 / 3) - np.eye(3)
    np.testing.assert_allclose(grad[:3], labelled)
    np.testing.assert_allclose(grad[3], (labelled[0] + labelled[1]) / 2)
    np.testing.assert_allclose(grad[4], (labelled[1] + labelled[2]) / 2)


# -- the paper's synthetic experiment ------------------------------------------------------------
@pytest.fixture(scope="module")
def two_moons():
    """Fig. 1: two classes on two manifolds, two labelled points (one per class)."""
    X, truth = make_moons(600, noise=0.05, random_state=0)
    X_test, truth_test = make_moons(2000, noise=0.05, random_state=1)
    labelled = [int(np.flatnonzero(truth == c)[np.argmin(np.linalg.norm(
        X[truth == c] - X[truth == c].mean(axis=0), axis=1))]) for c in (0, 1)]
    y = np.full(600, -1)
    y[labelled] = truth[labelled]
    return X, y, labelled, truth, X_test, truth_test


def test_two_labels_suffice_with_one_tree(two_moons):
    X, y, labelled, truth, X_test, truth_test = two_moons
    grbb = GRBBClassifier(n_estimators=10, random_state=0).fit(X, y)
    accuracy = [np.mean(p == truth_test) for p in grbb.staged_predict(X_test)]
    assert accuracy[0] > 0.95 and accuracy[-1] > 0.95

    # Plain boosting on the two labelled points alone cannot find the manifolds.
    plain = CEGBClassifier(n_estimators=10, min_samples_leaf=1, random_state=0)
    plain.fit(X[labelled], truth[labelled])
    assert np.mean(plain.predict(X_test) == truth_test) < 0.8

    # LapGBRT spreads labels about one graph hop per tree: after 50 trees it is still worse
    # than GRBB after one (it passes 95% after ~150 trees on this data).
    lap = LaplacianBoostingClassifier(n_estimators=50, random_state=0).fit(X, y)
    lap_accuracy = [np.mean(p == truth_test) for p in lap.staged_predict(X_test)]
    assert lap_accuracy[-1] > lap_accuracy[0] + 0.2      # it is learning ...
    assert lap_accuracy[-1] < accuracy[0] - 0.1          # ... but slowly


def test_minus_one_labels_equal_separate_unlabelled_inputs(two_moons):
    X, y, labelled, *_ = two_moons
    params = dict(n_estimators=3, random_state=0)
    combined = GRBBClassifier(**params).fit(X, y)
    unlabelled = np.flatnonzero(y == -1)
    labelled = np.sort(labelled)                          # rows keep their order in X
    separate = GRBBClassifier(**params).fit(X[labelled], y[labelled], X_unlabelled=X[unlabelled])
    assert combined.booster_.dump() == separate.booster_.dump()
    assert (combined.n_labelled_, combined.n_unlabelled_) == (2, 598)


def test_feature_costs_apply_to_all_rows(two_moons):
    # A third, expensive feature that separates the classes almost as well.
    X, y, _, truth, X_test, truth_test = two_moons
    rng = np.random.default_rng(0)
    with_copy = np.column_stack([X, truth + 0.3 * rng.normal(size=len(X))])
    test_copy = np.column_stack([X_test, truth_test + 0.3 * rng.normal(size=len(X_test))])
    params = dict(n_estimators=5, feature_costs=[1.0, 1.0, 100.0], random_state=0)
    free = GRBBClassifier(cost_tradeoff=0.0, **params).fit(with_copy, y)
    budgeted = GRBBClassifier(cost_tradeoff=0.01, **params).fit(with_copy, y)
    assert 2 in free.booster_.features_used()
    assert 2 not in budgeted.booster_.features_used()
    assert (budgeted.prediction_cost(test_copy).per_sample.mean()
            < free.prediction_cost(test_copy).per_sample.mean())
    assert np.mean(budgeted.predict(test_copy) == truth_test) > 0.95


def test_multiclass_blobs_from_one_label_each():
    X, truth = make_blobs(450, centers=[[0, 0], [6, 0], [0, 6]], cluster_std=0.8, random_state=0)
    y = np.full(450, -1)
    for c in range(3):
        y[np.flatnonzero(truth == c)[0]] = c
    model = GRBBClassifier(n_estimators=5, random_state=0).fit(X, y)
    assert model.predict_proba(X).shape == (450, 3)
    assert np.mean(model.predict(X) == truth) > 0.98


def test_save_and_reload(tmp_path, two_moons):
    X, y, *_ = two_moons
    model = GRBBClassifier(n_estimators=3, n_neighbors=7, random_state=0).fit(X, y)
    model.save(tmp_path / "grbb.msc")
    kind, meta, arrays = read_model(tmp_path / "grbb.msc")
    assert kind == "grbb_classifier"
    loaded = GRBBClassifier._from_model_file(meta, arrays)
    assert loaded.get_params() == model.get_params()
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_sklearn_check_estimator():
    check_estimator(GRBBClassifier(n_estimators=2, n_neighbors=3), expected_failed_checks={
        "check_classifiers_classes": "y = -1 marks unlabelled rows (scikit-learn's "
                                     "semi-supervised convention), so -1 cannot be a class"})


def test_bad_inputs_are_explained():
    X = np.arange(40.0).reshape(20, 2)
    with pytest.raises(ValueError, match="no labelled rows"):
        GRBBClassifier().fit(X, np.full(20, -1))
    with pytest.raises(ValueError, match="at least 2 classes"):
        GRBBClassifier().fit(X, np.r_[0, np.full(19, -1)])
    with pytest.raises(ValueError, match="n_neighbors"):
        GRBBClassifier(n_neighbors=25).fit(X, np.r_[0, 1, np.full(18, -1)])
    with pytest.raises(ValueError, match="n_neighbors"):
        GRBBClassifier(n_neighbors=0).fit(X, np.r_[0, 1, np.full(18, -1)])
    with pytest.raises(ValueError, match="laplacian_regularization"):
        GRBBClassifier(laplacian_regularization=-1).fit(X, np.r_[0, 1, np.full(18, -1)])
    with pytest.raises(ValueError, match="X_unlabelled has 3 features"):
        GRBBClassifier().fit(X[:2], [0, 1], X_unlabelled=np.zeros((5, 3)))
    with pytest.raises(ValueError, match="one label per row"):
        GRBBClassifier().fit(X, [0, 1])


def test_variance_bound_by_hand_and_for_unlabelled_components():
    from scipy import sparse
    # path 0 - 1 - 2, node 0 labelled, H = 0 (slope 1/4): Fisher = [[5/4,-1,0],[-1,2,-1],[0,-1,1]]
    # for lambda = 1, whose inverse has the diagonal 4, 5, 6 (a hand-solved tridiagonal system)
    L = sparse.csr_matrix([[1.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 1.0]])
    assert prediction_variance_bound(L, np.zeros(3), 1, 1.0) == pytest.approx((4 + 5 + 6) / 16 / 3)
    # a larger lambda ties the unlabelled rows more tightly to the label: less variance
    assert prediction_variance_bound(L, np.zeros(3), 1, 10.0) < (4 + 5 + 6) / 16 / 3
    # node 2 cut off from every label: its prediction is not pinned down
    cut = sparse.csr_matrix([[1.0, -1.0, 0.0], [-1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    assert prediction_variance_bound(cut, np.zeros(3), 1, 1.0) == np.inf


def test_variance_bound_falls_as_labels_are_added():
    X, truth = make_moons(600, noise=0.05, random_state=0)
    rng = np.random.default_rng(0)
    order = [rng.permutation(np.flatnonzero(truth == c)) for c in (0, 1)]
    bounds = []
    for per_class in (1, 5, 25, 100):
        y = np.full(600, -1)
        for c in (0, 1):
            y[order[c][:per_class]] = c
        bounds.append(GRBBClassifier(n_estimators=10, random_state=0).fit(X, y)
                      .prediction_variance_bound_)
    assert all(a > b for a, b in zip(bounds, bounds[1:])), bounds
    assert bounds[0] > 5 * bounds[-1]
    y = np.full(600, -1)
    y[[order[0][0], order[1][0]]] = 0, 1
    assert GRBBClassifier(n_estimators=3, laplacian_regularization=0.0).fit(
        X, y).prediction_variance_bound_ is None
