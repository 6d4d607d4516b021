"""GRBB: gradient regularized budgeted boosting (Xu, Kusner, Weinberger & Zheng).

Equation numbers below are to the paper. The graph, the regularised gradients
and the variance bound are in `msclassify.graph` (shared with the
semi-supervised pixel classifier); here they drive the CEGB core:

* Trees: the CEGB core fits every tree to ``[grad_L, grad_U]`` through a
  callable objective with unit hessians (a least-squares fit of the negative
  gradient, as Greedy Miser does in Eq. (6)), over all labelled and unlabelled
  rows. The feature, evaluation and batch cost parameters of CEGB apply
  unchanged, and every row, labelled or not, counts in the cost terms, so the
  budget reflects the whole input distribution.

`LaplacianBoostingClassifier` is the paper's baseline LapGBRT (Sec. 3): plain
gradient boosting of the Laplacian-regularised objective of Eq. (2), whose
unlabelled rows only get ``lambda (L H)_U``, so labels spread by one graph hop
per tree. With unit hessians its steps grow with ``learning_rate *
laplacian_regularization`` times the node degrees: on two moons with 9
neighbours 0.1 converged and 0.3 diverged.
"""

import numpy as np
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, column_or_1d, validate_data

from ..cegb import CEGBClassifier
from ..graph import (check_graph_params, class_targets, knn_laplacian, loss_gradient,
                     prediction_variance_bound, regularised_gradients)

UNLABELLED = -1  # scikit-learn's semi-supervised convention for y


class GRBBClassifier(CEGBClassifier):
    """Gradient regularized budgeted boosting: semi-supervised CEGB (binary or multi-class).

    Trees are fitted to the labelled rows' loss gradients and to unlabelled
    gradients propagated from them over a kNN graph in closed form
    (``grad_U = -L_UU^{-1} L_LU' grad_L``), so labels reach the whole data
    manifold in a few trees. See `msclassify.graph` for the exact rules.

    Parameters
    ----------
    n_neighbors : int
        Neighbours per point in the kNN graph (the paper: 9).
    laplacian_regularization : float
        lambda of Eqs. (2)-(3): weight of the smoothness term in the labelled
        rows' gradient (the paper tunes it). The propagation to unlabelled rows
        works without it: on two moons with two labels, lambda = 1 is best after
        one tree and decays with more trees (0.96 -> 0.81 after 200), lambda = 0
        stays at 0.96 (``benchmarks/bench_cstc_grbb.py``).
    n_estimators, learning_rate, ... evaluation_cost_mode
        The CEGB parameters (see `msclassify.CEGBClassifier`), including the
        cost parameters ``cost_tradeoff``, ``split_cost``, ``feature_costs``,
        ``feature_batch_costs`` and ``feature_share``. ``hessian`` has no effect
        (the hessians are 1).

    Attributes
    ----------
    classes_ : ndarray
    booster_ : Booster
    n_labelled_, n_unlabelled_ : int
        Rows of each kind used in training.
    prediction_variance_bound_ : float or None
        The paper's "label more?" signal (Sec. 5, Eqs. 10-13): a lower bound on
        the mean variance of the predicted probability over all training rows,
        ``mean_i sigma'(H_i)^2 [(Delta + lambda L)^-1]_ii``. It falls as labels
        are added; ``inf`` when a graph component holds no label. Binary
        problems with ``laplacian_regularization > 0`` only (None otherwise:
        without the smoothness term the unlabelled rows have no Fisher
        information). Computed at fit time, not saved with the model.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_moons
    >>> from msclassify.baselines import GRBBClassifier
    >>> X, truth = make_moons(600, noise=0.05, random_state=0)
    >>> labelled = [np.flatnonzero(truth == c)[0] for c in (0, 1)]
    >>> y = np.full(600, -1); y[labelled] = truth[labelled]   # two labels, 598 unlabelled
    >>> clf = GRBBClassifier(n_estimators=5, random_state=0).fit(X, y)
    >>> bool(np.mean(clf.predict(X) == truth) > 0.95)
    True
    """

    _model_kind = "grbb_classifier"
    _objectives = ("custom",)  # trained on the graph-regularised gradients

    def __init__(self, n_neighbors=9, laplacian_regularization=1.0, n_estimators=100,
                 learning_rate=0.1, max_leaves=31, max_depth=None, min_samples_leaf=20,
                 min_hessian_leaf=1e-3, l2_regularization=1.0, max_bins=255, subsample=1.0,
                 colsample=1.0, random_state=None, cost_tradeoff=0.0, split_cost=0.0,
                 feature_costs=None, feature_batch_costs=None, feature_share=None,
                 share_mode="path", growth="best_first", hessian="exact",
                 feature_cost_mode="lazy", evaluation_cost_mode="leaf"):
        super().__init__(
            n_estimators=n_estimators, learning_rate=learning_rate, max_leaves=max_leaves,
            max_depth=max_depth, min_samples_leaf=min_samples_leaf,
            min_hessian_leaf=min_hessian_leaf, l2_regularization=l2_regularization,
            max_bins=max_bins, subsample=subsample, colsample=colsample,
            random_state=random_state, cost_tradeoff=cost_tradeoff, split_cost=split_cost,
            feature_costs=feature_costs, feature_batch_costs=feature_batch_costs,
            feature_share=feature_share, share_mode=share_mode, growth=growth, hessian=hessian,
            feature_cost_mode=feature_cost_mode, evaluation_cost_mode=evaluation_cost_mode)
        self.n_neighbors = n_neighbors
        self.laplacian_regularization = laplacian_regularization

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False      # the kNN graph needs every feature value
        return tags

    def _validate_X(self, X, reset=False):
        return validate_data(self, X, reset=reset, dtype=(np.float64, np.float32))

    def fit(self, X, y, X_unlabelled=None, callback=None):
        """Fit on labelled and unlabelled inputs.

        Parameters
        ----------
        X : array-like of shape (n, d)
        y : array-like of shape (n,)
            Labels; ``-1`` marks an unlabelled row (scikit-learn's convention),
            so -1 cannot be a class.
        X_unlabelled : array-like of shape (m, d), optional
            More unlabelled inputs.
        callback : callable, optional
            ``callback(iteration, n_iterations)``; a truthy return stops training.
        """
        self._check_graph_params()
        X_labelled, y_labelled, X_free = self._split(X, y, X_unlabelled)
        self.classes_, encoded = np.unique(y_labelled, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"the labelled rows hold {len(self.classes_)} class(es); a "
                             "classifier needs labelled samples of at least 2 classes")
        X_all = np.vstack([X_labelled, X_free])
        n_all = X_all.shape[0]
        if self.n_neighbors >= n_all:
            raise ValueError(f"n_neighbors={self.n_neighbors} needs more than {self.n_neighbors} "
                             f"training rows, got {n_all}; lower n_neighbors or add unlabelled "
                             "data")
        self.n_features_in_ = X_all.shape[1]
        self.n_labelled_, self.n_unlabelled_ = X_labelled.shape[0], X_free.shape[0]
        n_classes = len(self.classes_)
        L = knn_laplacian(X_all, self.n_neighbors)
        gradients = self._gradient_function(L, encoded, n_classes)
        self._train(X_all, np.zeros(n_all), gradients, n_classes if n_classes > 2 else None,
                    None, None, callback)
        lam = float(self.laplacian_regularization)
        self.prediction_variance_bound_ = (
            prediction_variance_bound(L, self.booster_.predict_raw(X_all), self.n_labelled_, lam)
            if n_classes == 2 and lam > 0 else None)
        return self

    # -- input handling ------------------------------------------------------------------------
    def _check_graph_params(self):
        check_graph_params(self.n_neighbors, self.laplacian_regularization)

    def _split(self, X, y, X_unlabelled):
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y "
                             "is None; mark unlabelled rows with -1")
        X = check_array(X, dtype=(np.float64, np.float32))
        y = column_or_1d(y, warn=True)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y must have one label per row of X ({X.shape[0]}), got "
                             f"{y.shape[0]}")
        unlabelled = _is_unlabelled(y)
        X_free = X[unlabelled]
        if X_unlabelled is not None:
            X_unlabelled = check_array(X_unlabelled, dtype=(np.float64, np.float32))
            if X_unlabelled.shape[1] != X.shape[1]:
                raise ValueError(f"X_unlabelled has {X_unlabelled.shape[1]} features but X has "
                                 f"{X.shape[1]}; pass the same feature columns")
            X_free = np.vstack([X_free, X_unlabelled])
        y_labelled = y[~unlabelled]
        if y_labelled.size == 0:
            raise ValueError("no labelled rows: every y is -1 (unlabelled)")
        check_classification_targets(y_labelled)
        return X[~unlabelled], y_labelled, X_free

    # -- gradients -----------------------------------------------------------------------------
    def _gradient_function(self, L, encoded, n_classes):
        """The callable objective of `msclassify.cegb.train` for the rows [labelled, unlabelled]."""
        return regularised_gradients(L, class_targets(encoded, n_classes),
                                     float(self.laplacian_regularization))


class LaplacianBoostingClassifier(GRBBClassifier):
    """LapGBRT, the baseline of the GRBB paper (Sec. 3): boosting of Eq. (2).

    Gradient boosting of the logistic loss plus ``lambda/2 H' L H`` over labelled
    and unlabelled rows; an unlabelled row's gradient is only ``lambda (L H)_U``,
    so label information spreads one graph hop per tree and many trees are
    needed. Same parameters as `GRBBClassifier`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_moons
    >>> from msclassify.baselines import LaplacianBoostingClassifier
    >>> X, truth = make_moons(300, noise=0.05, random_state=0)
    >>> labelled = [np.flatnonzero(truth == c)[0] for c in (0, 1)]
    >>> y = np.full(300, -1); y[labelled] = truth[labelled]
    >>> clf = LaplacianBoostingClassifier(n_estimators=5).fit(X, y)
    >>> clf.booster_.n_trees
    5
    """

    _model_kind = "laplacian_boosting_classifier"

    def _gradient_function(self, L, encoded, n_classes):
        n_labelled = encoded.shape[0]
        L = L.tocsr()
        target = class_targets(encoded, n_classes)
        lam = float(self.laplacian_regularization)

        def gradients(raw, _):
            grad = lam * (L @ raw)
            grad[:n_labelled] += loss_gradient(raw[:n_labelled], target)
            return grad, np.ones_like(raw)

        return gradients


def _is_unlabelled(y):
    if y.dtype.kind in "iuf":
        return y == UNLABELLED
    if y.dtype.kind == "O":
        return np.array([isinstance(v, (int, float, np.number)) and v == UNLABELLED for v in y],
                        dtype=bool)
    return np.zeros(y.shape, dtype=bool)
