"""Numba prediction kernels over a flattened ensemble.

All trees are concatenated into one array of node records (`NODE_DTYPE`) with
global child indices; ``roots[t]`` is the first node of tree ``t``. Every step
down a tree is `_step` (``x <= threshold`` goes left, NaN follows
``default_left``). Chunks of rows run in parallel; within a chunk, blocks of
`ROW_BLOCK` rows walk each tree together.
"""

import numpy as np
from numba import njit, prange


# One record per node, so that a step down a tree reads one cache line: ``code`` is
# ``2 * feature + missing_left`` at splits and -1 at leaves; ``left``/``right`` are
# global node indices, a leaf's both point to itself.
NODE_DTYPE = np.dtype([("threshold", np.float64), ("code", np.int32), ("left", np.int32),
                       ("right", np.int32), ("pad", np.int32)], align=True)
# Rows walked through a tree together: their walks are independent, so the CPU overlaps
# them instead of waiting for each step's loads.
ROW_BLOCK = 8
# Rows per parallel task.
ROW_CHUNK = 1024


def pack_nodes(feature, threshold, default_left, left, right):
    """Flat node arrays as `NODE_DTYPE` records."""
    nodes = np.zeros(feature.shape[0], dtype=NODE_DTYPE)
    split = feature >= 0
    itself = np.arange(feature.shape[0])
    nodes["threshold"] = np.where(split, threshold, 0.0)
    nodes["code"] = np.where(split, 2 * feature + default_left, -1)
    nodes["left"] = np.where(split, left, itself)
    nodes["right"] = np.where(split, right, itself)
    return nodes


@njit(inline="always")
def _step(x, node, nodes):
    """One step down from ``node`` (a leaf stays put): ``x <= threshold`` goes left, NaN by
    the node's ``missing_left``, without branches (NaN compares false both ways)."""
    code = nodes[node].code
    v = x[max(code, 0) >> 1]
    go_right = (v > nodes[node].threshold) | ((v != v) & ((code & 1) == 0))
    return nodes[node].right if go_right and code >= 0 else nodes[node].left


@njit(inline="always")
def _walk_block(X, start, stop, root, nodes, reached):
    """Leaves reached from ``root`` by rows ``start:stop`` (at most ROW_BLOCK) into ``reached``."""
    for r in range(stop - start):
        reached[r] = root
    walking = True
    while walking:
        walking = False
        for r in range(stop - start):
            node = _step(X[start + r], reached[r], nodes)
            reached[r] = node
            walking |= nodes[node].code >= 0


@njit(parallel=True, cache=True)
def predict_raw(X, nodes, value, roots, tree_output, n_trees, out):
    """Add the first ``n_trees`` trees' outputs to ``out`` (N, K), prefilled with the init score."""
    n_rows = X.shape[0]
    for c in prange((n_rows + ROW_CHUNK - 1) // ROW_CHUNK):
        reached = np.empty(ROW_BLOCK, dtype=np.int64)
        for start in range(c * ROW_CHUNK, min((c + 1) * ROW_CHUNK, n_rows), ROW_BLOCK):
            stop = min(start + ROW_BLOCK, n_rows)
            for t in range(n_trees):
                _walk_block(X, start, stop, roots[t], nodes, reached)
                k = tree_output[t]
                for r in range(stop - start):
                    out[start + r, k] += value[reached[r]]


@njit(parallel=True, cache=True)
def predict_leaves(X, nodes, roots, out):
    """Leaf node reached in every tree, numbered within its tree."""
    n_rows = X.shape[0]
    for c in prange((n_rows + ROW_CHUNK - 1) // ROW_CHUNK):
        reached = np.empty(ROW_BLOCK, dtype=np.int64)
        for start in range(c * ROW_CHUNK, min((c + 1) * ROW_CHUNK, n_rows), ROW_BLOCK):
            stop = min(start + ROW_BLOCK, n_rows)
            for t in range(roots.shape[0]):
                _walk_block(X, start, stop, roots[t], nodes, reached)
                for r in range(stop - start):
                    out[start + r, t] = reached[r] - roots[t]


@njit(parallel=True, cache=True)
def prediction_cost(X, nodes, node_cost, roots, tree_iteration, beta, n_trees, n_iterations,
                    evaluation, feature_cost, evaluation_by_iteration, feature_by_iteration):
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
                while nodes[node].code >= 0:
                    f = nodes[node].code >> 1
                    e_total += node_cost[node]
                    eval_parts[c, it] += node_cost[node]
                    if seen[f] != i:
                        seen[f] = i
                        f_total += beta[f]
                        feat_parts[c, it] += beta[f]
                    node = _step(x, node, nodes)
            evaluation[i] = e_total
            feature_cost[i] = f_total
    for c in range(n_chunks):
        for it in range(n_iterations):
            evaluation_by_iteration[it] += eval_parts[c, it]
            feature_by_iteration[it] += feat_parts[c, it]
