"""GRBB: gradient regularized budgeted boosting (Xu, Kusner, Weinberger & Zheng).

The paper is ``shared/papers/grbb-xu-semisupervised-budgeted-boosting.txt``;
equation numbers below are to it.

* Graph (Sec. 2): a symmetric k-nearest-neighbour graph over the labelled and
  unlabelled inputs, ``k_ij = 1`` if either point is among the other's
  ``n_neighbors`` nearest neighbours (the paper uses 9), and its Laplacian
  ``L = D - W`` split into the labelled (L) and unlabelled (U) blocks.
* Gradients (Algorithm 1): with the logistic loss (softmax for more than two
  classes), the labelled rows get Eq. (3),
  ``grad_L = dl/dH(x) + lambda (L H)_L``, and the unlabelled rows the
  regularised gradient of Eq. (5), ``grad_U = -L_UU^{-1} L_LU' grad_L``, the
  minimiser of ``[grad_L, grad_U] L [grad_L, grad_U]'`` (the harmonic extension
  of the labelled gradients along the graph). ``L_UU`` is factorised once with
  `scipy.sparse.linalg.splu` and the factor reused in every iteration.
* Trees: the CEGB core fits every tree to ``[grad_L, grad_U]`` through a
  callable objective with unit hessians (a least-squares fit of the negative
  gradient, as Greedy Miser does in Eq. (6)), over all labelled and unlabelled
  rows. The feature, evaluation and batch cost parameters of CEGB apply
  unchanged, and every row, labelled or not, counts in the cost terms, so the
  budget reflects the whole input distribution.
* A singular ``L_UU``: a connected component of the graph that holds no
  labelled point makes ``L_UU`` singular. In a component that does hold one,
  every connected piece of its unlabelled part is adjacent to a labelled point,
  so its block is irreducibly diagonally dominant, hence non-singular. We add a ridge
  (``1.0`` on the diagonal) on the rows of label-free components only: their
  right-hand side ``L_LU' grad_L`` is exactly zero (no edge to a labelled
  point), so any ridge gives them the gradient 0 - no information, no push -
  which is the limit of a vanishing ridge, while the other components are
  solved exactly.

`LaplacianBoostingClassifier` is the paper's baseline LapGBRT (Sec. 3): plain
gradient boosting of the Laplacian-regularised objective of Eq. (2), whose
unlabelled rows only get ``lambda (L H)_U``, so labels spread by one graph hop
per tree. With unit hessians its steps grow with ``learning_rate *
laplacian_regularization`` times the node degrees: on two moons with 9
neighbours 0.1 converged and 0.3 diverged.
"""

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components, laplacian
from scipy.sparse.linalg import splu
from sklearn.neighbors import kneighbors_graph
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, column_or_1d, validate_data

from ..cegb import output_probabilities
from ..cegb._sklearn import CEGBClassifier
from ..checks import check_int, check_number

UNLABELLED = -1  # scikit-learn's semi-supervised convention for y

_LABEL_FREE_RIDGE = 1.0
_MIN_HESSIAN = 1e-16   # the core's floor for the built-in losses' hessians


class GRBBClassifier(CEGBClassifier):
    """Gradient regularized budgeted boosting: semi-supervised CEGB (binary or multi-class).

    Trees are fitted to the labelled rows' loss gradients and to unlabelled
    gradients propagated from them over a kNN graph in closed form
    (``grad_U = -L_UU^{-1} L_LU' grad_L``), so labels reach the whole data
    manifold in a few trees. See the module docstring for the exact rules.

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
        L = _knn_laplacian(X_all, self.n_neighbors)
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
        return regularised_gradients(L, _target(encoded, n_classes),
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
        target = _target(encoded, n_classes)
        lam = float(self.laplacian_regularization)

        def gradients(raw, _):
            grad = lam * (L @ raw)
            grad[:n_labelled] += _loss_gradient(raw[:n_labelled], target)
            return grad, np.ones_like(raw)

        return gradients


def check_graph_params(n_neighbors, laplacian_regularization):
    """ValueError unless n_neighbors is an int >= 1 and the regularisation a finite number >= 0."""
    check_int(n_neighbors, "n_neighbors")
    check_number(laplacian_regularization, "laplacian_regularization")


def regularised_gradients(L, target, laplacian_regularization, exact_hessian=False):
    """GRBB's objective ``f(raw, _) -> (grad, hess)`` for the graph rows [labelled, unlabelled].

    Parameters
    ----------
    L : sparse matrix, shape (n, n)
        Graph Laplacian (`_knn_laplacian`) over the labelled rows first, then the
        unlabelled ones.
    target : ndarray, shape (n_labelled,) of 0/1 or (n_labelled, K) one-hot
        Logistic (raw scores (n,)) or softmax (raw scores (n, K)) targets.
    laplacian_regularization : float
        lambda of Eq. (3).
    exact_hessian : bool, optional
        False (the paper): unit hessians, a least-squares fit of the gradients.
        True: the labelled rows get the diagonal of the objective's hessian,
        ``p (1 - p) + lambda L_ii`` (without the Laplacian's diagonal the
        smoothing term's gradient, unbounded, over tiny ``p (1 - p)`` makes the
        Newton steps diverge), and the unlabelled rows its harmonic extension,
        like their gradients, so that a leaf of unlabelled rows takes about the
        Newton step of the labelled rows it is tied to
        (`msclassify.PixelClassifier` with ``hessian="exact"``).

    Returns
    -------
    callable
        For `msclassify.cegb.train`; `L_UU` is factorised once, here.
    """
    n_labelled = target.shape[0]
    L = L.tocsr()
    L_labelled_rows = L[:n_labelled]
    coupling = L[n_labelled:, :n_labelled]             # L_LU' (L is symmetric)
    solve = _factorise_unlabelled_block(L, n_labelled)
    lam = float(laplacian_regularization)
    degree = L.diagonal()[:n_labelled]

    def extend(labelled_values, out):
        """Rows [labelled, unlabelled] with the harmonic extension (Eq. 5) on U."""
        out[:n_labelled] = labelled_values
        if solve is not None:
            columns = labelled_values.reshape(n_labelled, -1)
            out[n_labelled:] = -solve(coupling @ columns).reshape(out[n_labelled:].shape)
        return out

    def gradients(raw, _):
        grad_labelled = _loss_gradient(raw[:n_labelled], target)
        if lam > 0:
            grad_labelled = grad_labelled + lam * (L_labelled_rows @ raw)
        if not exact_hessian:
            return extend(grad_labelled, np.empty_like(raw)), np.ones_like(raw)
        p = output_probabilities(raw[:n_labelled])
        hess_labelled = p * (1.0 - p) + lam * (degree if raw.ndim == 1 else degree[:, None])
        # One solve for both (the factor is read once for two right-hand sides).
        both = extend(np.stack([grad_labelled, hess_labelled], axis=-1),
                      np.empty(raw.shape + (2,)))
        # Label-free graph components get 0 from the extension; keep hessians positive.
        return both[..., 0], np.maximum(both[..., 1], _MIN_HESSIAN)

    return gradients


def prediction_variance_bound(L, raw, n_labelled, laplacian_regularization):
    """GRBB Sec. 5: lower bound on the mean variance of ``sigma(H)`` over the graph's rows.

    ``mean_i sigma'(H_i)^2 V_ii`` with ``V = (Delta + lambda L)^-1`` (Eqs. 10, 13), the
    inverse of the empirical Fisher information of loss plus Laplacian term;
    ``Delta`` holds the logistic loss's second derivative ``sigma (1 - sigma)`` on the
    labelled rows (the first ``n_labelled``) and 0 on the others. (The paper prints
    ``sigma^2 (1 - sigma)``; the logistic loss's is ``sigma (1 - sigma)``.)

    Parameters
    ----------
    L : sparse matrix, shape (n, n)
        Graph Laplacian over the labelled rows first, then the unlabelled ones.
    raw : ndarray, shape (n,)
        The model's raw scores H on those rows.
    n_labelled : int
    laplacian_regularization : float
        lambda, > 0.

    Returns
    -------
    float
        ``inf`` when a connected component of the graph holds no labelled row
        (its predictions are not pinned down by any label).

    Examples
    --------
    Two nodes, one labelled, at H = 0 (sigma' = 1/4): V = diag(1/d, 1/d + 1/lambda)
    with d = 1/4, so the bound is (4 + 4 + 1) / 16 / 2 for lambda = 1:

    >>> from scipy import sparse
    >>> L = sparse.csr_matrix([[1.0, -1.0], [-1.0, 1.0]])
    >>> round(prediction_variance_bound(L, np.zeros(2), 1, 1.0), 12), 9 / 32
    (0.28125, 0.28125)
    """
    n = L.shape[0]
    _, component = connected_components(L, directed=False)
    if np.setdiff1d(component, component[:n_labelled]).size:
        return np.inf
    p = output_probabilities(raw)
    slope = p * (1.0 - p)
    fisher = (laplacian_regularization * L).tolil()
    fisher.setdiag(fisher.diagonal() + np.r_[slope[:n_labelled], np.zeros(n - n_labelled)])
    factor = splu(fisher.tocsc())
    # diag(V): solves against blocks of unit vectors keep the memory at n x 256
    variance = np.empty(n)
    for start in range(0, n, 256):
        stop = min(start + 256, n)
        unit = np.zeros((n, stop - start))
        unit[np.arange(start, stop), np.arange(stop - start)] = 1.0
        variance[start:stop] = factor.solve(unit)[np.arange(start, stop), np.arange(stop - start)]
    return float(np.mean(slope ** 2 * variance))


def _target(encoded, n_classes):
    """Logistic 0/1 targets for two classes, one-hot rows for more."""
    return np.eye(n_classes)[encoded] if n_classes > 2 else encoded.astype(np.float64)


def _is_unlabelled(y):
    if y.dtype.kind in "iuf":
        return y == UNLABELLED
    if y.dtype.kind == "O":
        return np.array([isinstance(v, (int, float, np.number)) and v == UNLABELLED for v in y],
                        dtype=bool)
    return np.zeros(y.shape, dtype=bool)


def _loss_gradient(raw, target):
    """Logistic (raw (n,), target 0/1) or softmax (raw (n, K), one-hot target) gradient."""
    return output_probabilities(raw) - target


def _knn_laplacian(X, n_neighbors):
    """Unnormalised Laplacian ``D - W`` of the symmetrised 0/1 kNN graph (sparse CSR)."""
    W = kneighbors_graph(X, n_neighbors, mode="connectivity", include_self=False)
    W = W.maximum(W.T)
    return laplacian(W.astype(np.float64)).tocsr()


def _factorise_unlabelled_block(L, n_labelled):
    """``solve(b) = L_UU^{-1} b`` from one sparse LU factorisation, or None without U rows.

    Rows of graph components without a labelled point get a ridge (module docstring).
    """
    n_unlabelled = L.shape[0] - n_labelled
    if n_unlabelled == 0:
        return None
    L_uu = L[n_labelled:, n_labelled:]
    _, component = connected_components(abs(L) > 0, directed=False)
    labelled_components = np.unique(component[:n_labelled])
    label_free = ~np.isin(component[n_labelled:], labelled_components)
    if label_free.any():
        L_uu = L_uu + sparse.diags(_LABEL_FREE_RIDGE * label_free.astype(np.float64))
    # L_UU is symmetric positive definite: a symmetric fill-reducing order with diagonal
    # pivots halves the fill of scipy's default (COLAMD) on kNN graphs.
    factor = splu(sparse.csc_matrix(L_uu), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                  options={"SymmetricMode": True})

    def solve(b):
        return factor.solve(np.asarray(b, dtype=np.float64))

    return solve
