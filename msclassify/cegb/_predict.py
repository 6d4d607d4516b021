"""Numba prediction kernels over a flattened ensemble.

All trees are concatenated into flat node arrays with global child indices;
``roots[t]`` is the first node of tree ``t``. Samples are processed in
parallel; each walks every tree (``x <= threshold`` goes left, NaN follows
``default_left``).
"""

import numpy as np
from numba import njit, prange


@njit(inline="always")
def _child(v, node, threshold, default_left, left, right):
    """The child of split ``node`` that feature value ``v`` goes to."""
    if np.isnan(v):
        return left[node] if default_left[node] else right[node]
    return left[node] if v <= threshold[node] else right[node]


@njit(inline="always")
def _leaf(x, node, feature, threshold, default_left, left, right):
    while feature[node] >= 0:
        node = _child(x[feature[node]], node, threshold, default_left, left, right)
    return node


@njit(parallel=True, cache=True)
def predict_raw(X, feature, threshold, default_left, left, right, value, roots, tree_output,
                n_trees, out):
    """Add the first ``n_trees`` trees' outputs to ``out`` (N, K), prefilled with the init score."""
    for i in prange(X.shape[0]):
        x = X[i]
        for t in range(n_trees):
            node = _leaf(x, roots[t], feature, threshold, default_left, left, right)
            out[i, tree_output[t]] += value[node]


@njit(parallel=True, cache=True)
def predict_leaves(X, feature, threshold, default_left, left, right, roots, out):
    """Leaf node reached in every tree, numbered within its tree."""
    for i in prange(X.shape[0]):
        x = X[i]
        for t in range(roots.shape[0]):
            out[i, t] = _leaf(x, roots[t], feature, threshold, default_left, left, right) - roots[t]


@njit(parallel=True, cache=True)
def prediction_cost(X, feature, threshold, default_left, left, right, node_cost, roots,
                    tree_iteration, beta, n_trees, n_iterations, evaluation, feature_cost,
                    evaluation_by_iteration, feature_by_iteration):
    """Per-sample evaluation and feature cost, and their per-iteration sums over samples.

    A sample pays ``node_cost`` (alpha / share) for every split node it visits
    and ``beta[m]`` once for every distinct feature on any of its paths; the
    iteration in which it first needs a feature is charged for it.
    """
    n_rows, n_features = X.shape
    n_chunks = min(n_rows, 64)
    chunk = (n_rows + n_chunks - 1) // max(n_chunks, 1)
    eval_parts = np.zeros((n_chunks, n_iterations))
    feat_parts = np.zeros((n_chunks, n_iterations))
    for c in prange(n_chunks):
        seen = np.full(n_features, -1, dtype=np.int64)
        for i in range(c * chunk, min((c + 1) * chunk, n_rows)):
            x = X[i]
            e_total = 0.0
            f_total = 0.0
            for t in range(n_trees):
                it = tree_iteration[t]
                node = roots[t]
                while feature[node] >= 0:
                    f = feature[node]
                    e_total += node_cost[node]
                    eval_parts[c, it] += node_cost[node]
                    if seen[f] != i:
                        seen[f] = i
                        f_total += beta[f]
                        feat_parts[c, it] += beta[f]
                    node = _child(x[f], node, threshold, default_left, left, right)
            evaluation[i] = e_total
            feature_cost[i] = f_total
    for c in range(n_chunks):
        for it in range(n_iterations):
            evaluation_by_iteration[it] += eval_parts[c, it]
            feature_by_iteration[it] += feat_parts[c, it]
