"""Growth of one cost-penalised regression tree (best-first or breadth-first).

Every open leaf caches, per feature, the best threshold and its *unpenalised*
gain, plus the cost weight of its rows that have not yet paid each feature.
The penalty is applied afresh whenever a split is chosen, so when a split pays
a feature's whole-image cost every other leaf is re-ranked with its correctly
penalised gain (LightGBM 4.7 promotes cached splits with the unpenalised gain).
"""

import threading

import numpy as np
from numba import njit

from ._kernels import (N_SLOTS, PARALLEL_LEAF_WORK, PARTITION_CHUNK, mark_paid_on_paths,
                       root_splits_parallel, root_splits_serial, route_binned, split_leaf_parallel,
                       split_leaf_serial)
from ._lanes import LANES


class CostState:
    """Cost bookkeeping shared by all trees of a model (docs/design.md, *CEGB, exactly*).

    ``used[m]``: feature m's whole-image cost is paid. ``paid_bits[m]``: bitset
    over training rows that already have feature m (its per-sample cost is paid).
    """

    def __init__(self, n_rows, n_features):
        self.used = np.zeros(n_features, dtype=np.bool_)
        self.paid_bits = np.zeros((n_features, (n_rows + 63) // 64), dtype=np.uint64)


# Leaf work (rows x features) no leaf reaches: `TreeGrower.grow(serial=True)` runs no kernel in
# parallel.
_NEVER_PARALLEL = 2**62

_NODE_ARRAYS = (("feature", np.int32), ("threshold_bin", np.int32), ("default_left", np.bool_),
                ("left", np.int32), ("right", np.int32), ("value", np.float64),
                ("count", np.float64), ("share", np.float64), ("gain", np.float64))


class TreeGrower:
    """Grows trees on binned data with the cost penalty of docs/design.md.

    Parameters
    ----------
    Xb : ndarray of uint8, shape (M, N)
        Binned data, feature-major.
    binner : BinMapper
        Gives raw thresholds for the chosen bins.
    params : CEGBParams
    beta, gamma, share : ndarray, shape (M,)
        Per-sample cost, whole-model cost and pixel share of each feature.
    labelled : ndarray of float64, shape (N,)
        1 for rows with positive sample weight (they count in ``min_samples_leaf``).
    cost_weight : ndarray of float64, shape (N,)
    state : CostState

    Notes
    -----
    A whole tree grows in one compiled call (`_grow_tree`); the arrays it works
    in are allocated here once per model: a histogram slot per open leaf and,
    per slot and feature, the best threshold, its unpenalised gain, the
    unpaid cost weight and whether none of the leaf's rows has paid the feature.
    """

    def __init__(self, Xb, binner, params, beta, gamma, share, labelled, cost_weight, state):
        self.Xb = Xb
        self.edges = binner.edges
        self.n_bins = binner.n_bins
        self.p = params
        n_features, n_rows = Xb.shape
        self.labelled = labelled
        self.cost_weight = cost_weight
        self.state = state
        total_cost_weight = float(cost_weight.sum())
        if params.feature_cost_mode == "coupled":
            # Paid for every sample at once, the per-sample cost acts as a whole-model cost.
            gamma = gamma + beta * total_cost_weight
            beta = np.zeros_like(beta)
        mu = float(params.cost_tradeoff)
        self.count_unpaid = (beta > 0) & (mu > 0)
        self.costs = (self.count_unpaid, state.paid_bits, state.used, np.ascontiguousarray(beta),
                      np.ascontiguousarray(gamma), share)
        # Trees depend on each other through the cost state: with per-sample costs through
        # the rows' paid features (nearly every split), else through the features whose
        # whole-model cost is paid (`used`), and only when a penalty reads it.
        self.coupled_by_rows = bool(self.count_unpaid.any())
        self.coupled_by_used = mu != 0.0 and bool(np.any(np.asarray(gamma) != 0.0))
        max_depth = params.max_depth if params.max_depth is not None else np.iinfo(np.int32).max
        settings = (mu, float(params.split_cost), params.evaluation_cost_mode == "leaf",
                    total_cost_weight, params.share_mode == "path",
                    params.growth == "breadth_first", int(params.max_leaves), int(max_depth),
                    float(params.l2_regularization), int(params.min_samples_leaf),
                    float(params.min_hessian_leaf), float(params.learning_rate),
                    float(share.max()) if share.size else 1.0)
        # Cost weights 1 (the default) or 0: unpaid weights are counts.
        unit_cost = bool(np.all((cost_weight == 1.0) | (cost_weight == 0.0)))
        self.settings = settings + (PARALLEL_LEAF_WORK, unit_cost)
        self.serial_settings = settings + (_NEVER_PARALLEL, unit_cost)
        n_slots = params.max_leaves
        per_feature = (n_slots, n_features)
        self.slots = (np.empty((n_slots, n_features, N_SLOTS, LANES)), np.empty(per_feature),
                      np.empty(per_feature, dtype=np.int32), np.empty(per_feature, dtype=np.bool_),
                      np.zeros(per_feature), np.zeros(per_feature, dtype=np.bool_))
        # Gradient, hessian, labelled and a padding lane of every row: one vector per row.
        self.ghc = np.zeros((n_rows, LANES))
        self.ghc[:, 2] = labelled
        self.is_loss = (labelled != 0).astype(np.uint8)
        # Rows of every leaf: in rows[0] or rows[1] (a split partitions from one into the other).
        self.rows = np.empty((2, n_rows), dtype=np.int32)
        self.work = (np.zeros((n_rows + 63) // 64, dtype=np.uint64),
                     np.empty((n_rows // PARTITION_CHUNK + 1, 5), dtype=np.int64),
                     np.empty(n_rows, dtype=np.int32), np.empty((n_rows, LANES)),
                     np.empty(n_rows, dtype=np.int32), np.empty(n_rows))
        n_nodes = 2 * n_slots - 1
        self.nodes = tuple(np.empty(n_nodes, dtype=dtype) for _, dtype in _NODE_ARRAYS)

    def grow(self, grad, hess, sample, active, all_rows=None, used=None, serial=False):
        """Grow one tree on the rows ``sample``.

        Parameters
        ----------
        grad, hess : ndarray of float64, shape (N,)
            Weighted gradients and hessians of all rows.
        sample : ndarray of int32
            Rows used by this tree, in increasing order.
        active : ndarray of bool, shape (M,)
            Features this tree may use.
        all_rows : ndarray of int32 or None
            Rows outside the sample, routed afterwards (row subsampling).
        used : ndarray of bool, shape (M,), optional
            The features whose whole-model cost is paid, read and updated by this
            tree instead of the shared ``state.used`` (`grow_class_trees`).
        serial : bool, optional
            Grow with the serial kernels only (for a tree grown beside others).

        Returns
        -------
        tree : dict of node arrays (creation order, root 0)
        leaf_of_row : ndarray of int32, shape (N,)
            The leaf node each training row ends in.
        """
        if sample.shape[0] == grad.shape[0]:  # all rows, in order
            sums = (grad.sum(), hess.sum(), self.labelled.sum(), self.cost_weight.sum())
        else:
            sums = tuple(a[sample].sum() for a in (grad, hess, self.labelled, self.cost_weight))
        self.rows[0, :sample.shape[0]] = sample
        leaf_of_row = np.empty(self.Xb.shape[1], dtype=np.int32)
        costs = self.costs if used is None else self.costs[:2] + (used,) + self.costs[3:]
        n_nodes = _grow_tree(self.Xb, self.n_bins, active, self.ghc, grad, hess, self.is_loss,
                             self.cost_weight, self.rows, sample.shape[0],
                             tuple(float(s) for s in sums), self.work, self.slots, costs,
                             self.serial_settings if serial else self.settings, self.nodes,
                             leaf_of_row)
        tree = {name: array[:n_nodes].copy() for (name, _), array in zip(_NODE_ARRAYS, self.nodes)}
        split = tree["feature"] >= 0
        tree["threshold"] = np.full(n_nodes, np.nan)
        tree["threshold"][split] = self.edges[tree["feature"][split], tree["threshold_bin"][split]]
        if all_rows is not None and all_rows.size:
            routed = np.empty(all_rows.shape[0], dtype=np.int32)
            route_binned(self.Xb, all_rows, tree["feature"], tree["threshold_bin"],
                         tree["default_left"], tree["left"], tree["right"], routed)
            leaf_of_row[all_rows] = routed
            if self.count_unpaid.any():
                mark_paid_on_paths(self.Xb, tree["feature"], tree["threshold_bin"],
                                   tree["default_left"], tree["left"], tree["right"], all_rows,
                                   self.state.paid_bits)
        return tree, leaf_of_row


def grow_class_trees(growers, executor, grad, hess, sample, active):
    """The K trees of one boosting round, several at once; yields ``(k, (tree, leaf_of_row))``
    in class order, each tree exactly the one `TreeGrower.grow` grows after the trees before it.

    A round's trees share its gradients and features; they depend on each other only
    through the features whose whole-model cost is paid (``state.used``): a tree that
    pays a new one lowers the penalties of the trees after it. So the round's trees
    grow side by side, every one from the features paid before the first: this thread
    and ``len(growers) - 1`` threads of ``executor`` each take the next class's tree
    (serial kernels) until none is left, or until a finished tree paid a new feature
    (the trees after it would grow again anyway). A tree is kept if no tree before it
    paid a new feature; the trees after the first one that did grow again from the
    features it paid. Trees rarely pay a new feature after the first few rounds (9 of
    the 200 trees of a 4-class photo's model did), so most rounds grow all their trees
    side by side. The last tree of a round left alone grows with the parallel kernels.
    Without a cost penalty that reads paid features (``coupled_by_used`` False: the
    distillation teacher) every tree is kept.

    Parameters
    ----------
    growers : list of TreeGrower
        On the same data and `CostState` (``growers[0].state``), one per thread; they
        must not use per-sample costs (``coupled_by_rows``).
    executor : concurrent.futures.Executor
        Runs ``len(growers) - 1`` threads beside this one.
    grad, hess : ndarray of float64, shape (N, K)
    sample : ndarray of int32
        All rows, in order (no row subsampling).
    active : ndarray of bool, shape (M,)
    """
    state = growers[0].state
    n_classes = grad.shape[1]
    coupled = growers[0].coupled_by_used

    def grow(grower, k, used, serial):
        return grower.grow(np.ascontiguousarray(grad[:, k]), np.ascontiguousarray(hess[:, k]),
                           sample, active, used=used, serial=serial)

    k = 0
    while k < n_classes:
        if k == n_classes - 1:
            yield k, grow(growers[0], k, None, False)
            return
        before = state.used.copy()
        results = {}
        lock = threading.Lock()
        queue = {"next": k, "stop": n_classes}    # no tree starts at "stop" or after

        def work(grower):
            while True:
                with lock:
                    j = queue["next"]
                    if j >= queue["stop"]:
                        return
                    queue["next"] = j + 1
                paid = before.copy()
                results[j] = paid, grow(grower, j, paid, True)
                if coupled and not np.array_equal(paid, before):
                    with lock:
                        queue["stop"] = min(queue["stop"], j + 1)

        futures = [executor.submit(work, grower) for grower in growers[1:]]
        work(growers[0])
        for future in futures:
            future.result()
        for j in range(k, n_classes):
            paid, result = results[j]
            yield j, result
            k = j + 1
            if not np.array_equal(paid, before):
                state.used |= paid
                if coupled:                 # the trees after it grow again
                    break


@njit(cache=True, nogil=True)
def _penalised_best(gain, unpaid, W, leaf_share, costs, settings):
    """Best feature of a leaf and its gain minus ``mu * dPsi`` (docs/design.md); the first
    feature on ties."""
    _, _, used, beta, gamma, share = costs
    mu, alpha, leaf_weight, total_cost_weight, path_share = settings[:5]
    weight = W if leaf_weight else total_cost_weight
    best = -np.inf
    best_feature = 0
    for m in range(gain.shape[0]):
        g = gain[m]
        if mu != 0.0:
            effective_share = min(leaf_share, share[m]) if path_share else share[m]
            penalty = (alpha * weight / effective_share + gamma[m] * (0.0 if used[m] else 1.0)
                       + beta[m] * unpaid[m])
            g = g - mu * penalty
        if m == 0 or g > best:
            best = g
            best_feature = m
    return best_feature, best


@njit(inline="always")
def _new_node(nodes, node, value, count, share):
    """Write a new leaf node (no split yet) into the node arrays."""
    feature, threshold_bin, default_left, left, right, values, counts, shares, gains = nodes
    feature[node] = -1
    threshold_bin[node] = 0
    default_left[node] = False
    left[node] = -1
    right[node] = -1
    values[node] = value
    counts[node] = count
    shares[node] = share
    gains[node] = 0.0


@njit(cache=True, nogil=True)
def _grow_tree(Xb, n_bins, active, ghc, grad, hess, is_loss, cost_weight, rows, n, root_sums,
               work, slots, costs, settings, nodes, leaf_of_row):
    """Grow one tree best-first (or breadth-first); returns its number of nodes.

    Open leaves are kept in a list in creation order (a split removes the leaf
    and appends its left, then right child); the next split is the open leaf
    with the largest penalised gain, the first one on ties. A leaf's ranking is
    cached until a split pays a new feature's whole-model cost. Nodes are
    written to ``nodes`` in creation order, ``leaf_of_row`` gets the leaf of
    row of the tree (``rows[0, :n]``).
    """
    cost_mask, chunk_counts, loss_rows, sorted_ghc, cost_rows, sorted_cost = work
    hist, gain, split_bin, default_left, unpaid, none_paid = slots
    count_unpaid, paid_bits, used, beta, gamma, share = costs
    (mu, alpha, leaf_weight, total_cost_weight, path_share, breadth_first, max_leaves, max_depth,
     l2, min_samples, min_hessian, learning_rate, root_share, parallel_work, unit_cost) = settings
    n_features = Xb.shape[0]
    features = np.flatnonzero(active).astype(np.int64)
    node_feature, node_bin, node_default_left, node_left, node_right, _, _, node_share, \
        node_gain = nodes
    for i in range(ghc.shape[0]):
        ghc[i, 0] = grad[i]
        ghc[i, 1] = hess[i]
    order = rows[0]
    if count_unpaid.any():
        cost_mask[:] = 0
        for k in range(n):
            i = order[k]
            if cost_weight[i] != 0.0:
                cost_mask[i >> 6] |= np.uint64(1) << np.uint64(i & 63)

    # Per slot (open leaf): its node, rows rows[leaf_rows, start:stop], depth, sums, share, ranking.
    leaf_node = np.empty(max_leaves, dtype=np.int64)
    leaf_start = np.empty(max_leaves, dtype=np.int64)
    leaf_stop = np.empty(max_leaves, dtype=np.int64)
    leaf_rows = np.empty(max_leaves, dtype=np.int64)  # which of the two row buffers
    leaf_depth = np.empty(max_leaves, dtype=np.int64)
    leaf_sums = np.empty((max_leaves, 4))
    leaf_share = np.empty(max_leaves)
    best_feature = np.empty(max_leaves, dtype=np.int64)
    best_gain = np.empty(max_leaves)
    ranked_at = np.empty(max_leaves, dtype=np.int64)
    open_slots = np.empty(max_leaves, dtype=np.int64)
    penalty_version = 0
    # Leaves' cost weights W enter the penalty only through the split cost of leaf mode.
    weigh_leaves = mu != 0.0 and alpha != 0.0 and leaf_weight

    G, H, N, W = root_sums
    _new_node(nodes, 0, -G / (H + l2) * learning_rate, N, root_share)
    n_nodes = 1
    leaf_node[0], leaf_start[0], leaf_stop[0], leaf_depth[0], leaf_rows[0] = 0, 0, n, 0, 0
    leaf_sums[0, 0], leaf_sums[0, 1], leaf_sums[0, 2], leaf_sums[0, 3] = G, H, N, W
    leaf_share[0] = root_share
    root_may_split = 0 < max_depth and N >= 2 * min_samples
    root_args = (Xb, order, n, ghc, is_loss, cost_weight, unit_cost, cost_mask, paid_bits,
                 count_unpaid, n_bins, features, G, H, N, root_may_split, l2, min_samples,
                 min_hessian, loss_rows, sorted_ghc, hist, gain, split_bin, default_left, unpaid,
                 none_paid)
    if n * n_features >= parallel_work:
        root_splits_parallel(*root_args)
    else:
        root_splits_serial(*root_args)
    best_feature[0], best_gain[0] = _penalised_best(gain[0], unpaid[0], W, root_share, costs,
                                                    settings)
    ranked_at[0] = penalty_version
    open_slots[0] = 0
    n_open = 1

    while n_open < max_leaves:
        chosen = -1
        for k in range(n_open):
            s = open_slots[k]
            if ranked_at[s] != penalty_version:
                best_feature[s], best_gain[s] = _penalised_best(
                    gain[s], unpaid[s], leaf_sums[s, 3], leaf_share[s], costs, settings)
                ranked_at[s] = penalty_version
            if not best_gain[s] > 0.0:
                continue
            if chosen < 0:
                better = True
            elif breadth_first:
                better = leaf_depth[s] < leaf_depth[open_slots[chosen]] or (
                    leaf_depth[s] == leaf_depth[open_slots[chosen]]
                    and best_gain[s] > best_gain[open_slots[chosen]])
            else:
                better = best_gain[s] > best_gain[open_slots[chosen]]
            if better:
                chosen = k
        if chosen < 0:
            break
        slot = open_slots[chosen]
        for k in range(chosen, n_open - 1):
            open_slots[k] = open_slots[k + 1]
        n_open -= 1

        m = best_feature[slot]
        threshold_bin = split_bin[slot, m]
        missing_left = default_left[slot, m]
        start, stop, depth = leaf_start[slot], leaf_stop[slot], leaf_depth[slot]
        G, H, N, W = leaf_sums[slot, 0], leaf_sums[slot, 1], leaf_sums[slot, 2], leaf_sums[slot, 3]
        new_slot = n_open + 1  # slots are handed out in order and never freed
        src = leaf_rows[slot]
        # The children split only below the depth limit and if this split leaves room for
        # another (the tree's last split's children are neither ranked nor split).
        children_may_split = depth + 1 < max_depth and n_open + 2 < max_leaves
        split_args = (Xb, rows, src, start, stop, m, threshold_bin, missing_left, ghc, is_loss,
                      cost_weight, unit_cost, weigh_leaves, paid_bits, count_unpaid, n_bins,
                      active, features, G, H, N, children_may_split, l2, min_samples,
                      min_hessian, chunk_counts, loss_rows, sorted_ghc, cost_rows, sorted_cost,
                      hist, slot, new_slot, gain, split_bin, default_left, unpaid, none_paid)
        # The smaller child, histogrammed, has at most half the parent's rows.
        if (stop - start) * n_features >= 2 * parallel_work:
            n_left, w_left, GL, HL, NL = split_leaf_parallel(*split_args)
        else:
            n_left, w_left, GL, HL, NL = split_leaf_serial(*split_args)
        if not used[m]:
            used[m] = True
            penalty_version += 1
        child_share = min(leaf_share[slot], share[m]) if path_share else share[m]

        node = leaf_node[slot]
        node_feature[node] = m
        node_bin[node] = threshold_bin
        node_default_left[node] = missing_left
        node_gain[node] = best_gain[slot]
        node_share[node] = child_share
        node_left[node] = n_nodes
        node_right[node] = n_nodes + 1
        mid = start + n_left
        small_is_left = n_left <= stop - mid
        children = (
            (n_nodes, new_slot if small_is_left else slot, start, mid, GL, HL, NL, w_left),
            (n_nodes + 1, slot if small_is_left else new_slot, mid, stop, G - GL, H - HL, N - NL,
             W - w_left))
        for child, s, lo, hi, Gc, Hc, Nc, Wc in children:
            _new_node(nodes, child, -Gc / (Hc + l2) * learning_rate, Nc, child_share)
            leaf_node[s], leaf_start[s], leaf_stop[s], leaf_depth[s] = child, lo, hi, depth + 1
            leaf_rows[s] = 1 - src
            leaf_sums[s, 0], leaf_sums[s, 1], leaf_sums[s, 2], leaf_sums[s, 3] = Gc, Hc, Nc, Wc
            leaf_share[s] = child_share
            best_feature[s], best_gain[s] = _penalised_best(gain[s], unpaid[s], Wc, child_share,
                                                            costs, settings)
            ranked_at[s] = penalty_version
            open_slots[n_open] = s
            n_open += 1
        n_nodes += 2

    for k in range(n_open):
        s = open_slots[k]
        leaf = rows[leaf_rows[s]]
        for j in range(leaf_start[s], leaf_stop[s]):
            leaf_of_row[leaf[j]] = leaf_node[s]
    return n_nodes
