"""Numba prediction kernels over a flattened ensemble.

All trees are laid out anew as one array of node records (`NODE_DTYPE`) by
`pack_nodes`: tree by tree, breadth first, the two children of a split side by
side, so a step down a tree is ``left + (x > threshold)`` without a branch
(`_step`; NaN follows ``missing_left``). Chunks of rows run in parallel; within
a chunk, blocks of `ROW_BLOCK` rows walk each tree together, for as many steps
as the tree is deep (a leaf points to itself), so that their walks overlap and
no branch depends on the data.
"""

import numpy as np
from numba import njit, prange


# One record per node, four to a cache line: ``code`` is ``2 * feature + missing_left`` at
# splits and -1 at leaves; ``left`` is the packed index of the left child (the right one
# follows it), a leaf's points to the leaf itself.
NODE_DTYPE = np.dtype([("threshold", np.float64), ("code", np.int32), ("left", np.int32)],
                      align=True)
# Rows walked through a tree together: their walks are independent, so the CPU overlaps
# them instead of waiting for each step's loads; a tree's records are read once per block.
ROW_BLOCK = 32
# Rows per parallel task.
ROW_CHUNK = 1024


@njit(cache=True, nogil=True)
def _breadth_first(feature, left, right, roots, origin, packed_left, packed_roots, depth):
    """Packed order of `pack_nodes`; returns the number of packed nodes (-1 if a node is
    reached twice: not a tree)."""
    n = feature.shape[0]
    reached = np.zeros(n, dtype=np.bool_)
    node_depth = np.zeros(n, dtype=np.int64)
    end = 0
    for t in range(roots.shape[0]):
        head = end
        packed_roots[t] = end
        origin[end] = roots[t]
        node_depth[end] = 0
        end += 1
        deepest = 0
        while head < end:
            node = origin[head]
            if reached[node]:
                return -1
            reached[node] = True
            packed_left[head] = head
            if feature[node] >= 0:
                if end + 2 > n:  # more records than nodes: some node has two parents
                    return -1
                packed_left[head] = end
                origin[end] = left[node]
                origin[end + 1] = right[node]
                node_depth[end] = node_depth[end + 1] = node_depth[head] + 1
                deepest = max(deepest, node_depth[head] + 1)
                end += 2
            head += 1
        depth[t] = deepest
    return end


def pack_nodes(feature, threshold, default_left, left, right, roots):
    """Flat node arrays (global child indices, tree ``t`` rooted at ``roots[t]``) as
    `NODE_DTYPE` records, children side by side.

    Returns a dict: ``nodes`` (the records), ``roots`` (packed root of each tree),
    ``depth`` (each tree's depth) and ``origin`` (the flat node of each record).

    >>> import numpy as np
    >>> packed = pack_nodes(np.array([0, -1, -1], np.int32), np.array([0.5, 0, 0]),
    ...                     np.array([True, False, False]), np.array([2, -1, -1], np.int32),
    ...                     np.array([1, -1, -1], np.int32), np.array([0], np.int32))
    >>> packed["origin"].tolist(), packed["nodes"]["left"].tolist(), packed["depth"].tolist()
    ([0, 2, 1], [1, 1, 2], [1])
    """
    n = feature.shape[0]
    origin = np.zeros(n, dtype=np.int64)
    packed_left = np.zeros(n, dtype=np.int32)
    packed_roots = np.zeros(roots.shape[0], dtype=np.int32)
    depth = np.zeros(roots.shape[0], dtype=np.int64)
    n_packed = _breadth_first(feature, left, right, roots, origin, packed_left, packed_roots,
                              depth)
    if n_packed < 0:
        raise ValueError("a tree node has two parents: the trees are not trees")
    origin = origin[:n_packed]
    split = feature[origin] >= 0
    nodes = np.zeros(n_packed, dtype=NODE_DTYPE)
    nodes["threshold"] = np.where(split, threshold[origin], 0.0)
    nodes["code"] = np.where(split, 2 * feature[origin] + default_left[origin], -1)
    nodes["left"] = packed_left[:n_packed]
    return {"nodes": nodes, "roots": packed_roots, "depth": depth, "origin": origin}


@njit(inline="always")
def _step(x, node, nodes):
    """One step down from ``node`` (a leaf stays put): ``x <= threshold`` goes left, NaN by
    the node's ``missing_left``, without branches (NaN compares false both ways)."""
    code = nodes[node].code
    v = x[max(code, 0) >> 1]
    go_right = (v > nodes[node].threshold) | ((v != v) & ((code & 1) == 0))
    return nodes[node].left + np.intp(go_right & (code >= 0))


@njit(inline="always")
def _walk_block(X, start, stop, root, depth, nodes, reached):
    """Leaves reached from ``root`` by rows ``start:stop`` (at most ROW_BLOCK) into ``reached``."""
    for r in range(stop - start):
        reached[r] = root
    for _ in range(depth):
        for r in range(stop - start):
            reached[r] = _step(X[start + r], reached[r], nodes)


@njit(parallel=True, cache=True, nogil=True)
def predict_raw(X, nodes, value, roots, depth, tree_output, n_trees, out):
    """Add the first ``n_trees`` trees' outputs to ``out`` (N, K), prefilled with the init score
    (``value`` per packed node)."""
    n_rows = X.shape[0]
    for c in prange((n_rows + ROW_CHUNK - 1) // ROW_CHUNK):
        reached = np.empty(ROW_BLOCK, dtype=np.int64)
        for start in range(c * ROW_CHUNK, min((c + 1) * ROW_CHUNK, n_rows), ROW_BLOCK):
            stop = min(start + ROW_BLOCK, n_rows)
            for t in range(n_trees):
                _walk_block(X, start, stop, roots[t], depth[t], nodes, reached)
                k = tree_output[t]
                for r in range(stop - start):
                    out[start + r, k] += value[reached[r]]


@njit(parallel=True, cache=True, nogil=True)
def predict_leaves(X, nodes, roots, depth, leaf_id, out):
    """Leaf reached in every tree, as ``leaf_id`` of its packed node."""
    n_rows = X.shape[0]
    for c in prange((n_rows + ROW_CHUNK - 1) // ROW_CHUNK):
        reached = np.empty(ROW_BLOCK, dtype=np.int64)
        for start in range(c * ROW_CHUNK, min((c + 1) * ROW_CHUNK, n_rows), ROW_BLOCK):
            stop = min(start + ROW_BLOCK, n_rows)
            for t in range(roots.shape[0]):
                _walk_block(X, start, stop, roots[t], depth[t], nodes, reached)
                for r in range(stop - start):
                    out[start + r, t] = leaf_id[reached[r]]


@njit(parallel=True, cache=True, nogil=True)
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
