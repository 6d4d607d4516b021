"""Gradients regularised on a kNN graph: GRBB's propagation of labels to unlabelled rows.

Gradient regularized budgeted boosting (Xu, Kusner, Weinberger & Zheng; equation
numbers below are to the paper) trains on labelled and unlabelled rows alike.
Used by `msclassify.baselines.GRBBClassifier` (and its baseline LapGBRT) and by
`msclassify.PixelClassifier` with ``semi_supervised=True``:

* Graph (Sec. 2, `knn_laplacian`): a symmetric k-nearest-neighbour graph over the
  labelled and unlabelled inputs, ``k_ij = 1`` if either point is among the
  other's ``n_neighbors`` nearest neighbours (the paper uses 9), and its Laplacian
  ``L = D - W`` split into the labelled (L) and unlabelled (U) blocks.
* Gradients (Algorithm 1, `regularised_gradients`): with the logistic loss
  (softmax for more than two classes), the labelled rows get Eq. (3),
  ``grad_L = dl/dH(x) + lambda (L H)_L``, and the unlabelled rows the
  regularised gradient of Eq. (5), ``grad_U = -L_UU^{-1} L_LU' grad_L``, the
  minimiser of ``[grad_L, grad_U] L [grad_L, grad_U]'`` (the harmonic extension
  of the labelled gradients along the graph). ``L_UU`` is factorised once with
  `scipy.sparse.linalg.splu` and the factor reused in every iteration.
* A singular ``L_UU``: a connected component of the graph that holds no
  labelled point makes ``L_UU`` singular. In a component that does hold one,
  every connected piece of its unlabelled part is adjacent to a labelled point,
  so its block is irreducibly diagonally dominant, hence non-singular. We add a ridge
  (``1.0`` on the diagonal) on the rows of label-free components only: their
  right-hand side ``L_LU' grad_L`` is exactly zero (no edge to a labelled
  point), so any ridge gives them the gradient 0 - no information, no push -
  which is the limit of a vanishing ridge, while the other components are
  solved exactly.
* "Label more?" (Sec. 5, `prediction_variance_bound`): a lower bound on the
  variance of the predictions over the graph.
"""

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components, laplacian
from scipy.sparse.linalg import splu
from sklearn.neighbors import kneighbors_graph

from .cegb import MIN_HESSIAN, output_probabilities
from .checks import check_int, check_number

__all__ = ["check_graph_params", "class_targets", "knn_laplacian", "loss_gradient",
           "prediction_variance_bound", "regularised_gradients"]

_LABEL_FREE_RIDGE = 1.0


def knn_laplacian(X, n_neighbors):
    """Unnormalised Laplacian ``D - W`` of the symmetrised 0/1 kNN graph (sparse CSR).

    Examples
    --------
    >>> knn_laplacian(np.array([[0.0], [1.0], [3.0]]), 1).toarray().tolist()
    [[1.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 1.0]]
    """
    W = kneighbors_graph(X, n_neighbors, mode="connectivity", include_self=False)
    W = W.maximum(W.T)
    return laplacian(W.astype(np.float64)).tocsr()


def check_graph_params(n_neighbors, laplacian_regularization):
    """ValueError unless n_neighbors is an int >= 1 and the regularisation a finite number >= 0."""
    check_int(n_neighbors, "n_neighbors")
    check_number(laplacian_regularization, "laplacian_regularization")


def class_targets(encoded, n_classes):
    """Targets of class indices ``encoded``: logistic 0/1 for two classes, one-hot rows for more.

    Examples
    --------
    >>> class_targets(np.array([0, 2]), 3).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    return np.eye(n_classes)[encoded] if n_classes > 2 else encoded.astype(np.float64)


def loss_gradient(raw, target):
    """Logistic (raw (n,), target 0/1) or softmax (raw (n, K), one-hot target) gradient."""
    return output_probabilities(raw) - target


def regularised_gradients(L, target, laplacian_regularization, exact_hessian=False):
    """GRBB's objective ``f(raw, _) -> (grad, hess)`` for the graph rows [labelled, unlabelled].

    Parameters
    ----------
    L : sparse matrix, shape (n, n)
        Graph Laplacian (`knn_laplacian`) over the labelled rows first, then the
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
        grad_labelled = loss_gradient(raw[:n_labelled], target)
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
        return both[..., 0], np.maximum(both[..., 1], MIN_HESSIAN)

    return gradients


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
