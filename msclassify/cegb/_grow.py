"""Growth of one cost-penalised regression tree (best-first or breadth-first).

Every open leaf caches, per feature, the best threshold and its *unpenalised*
gain, plus the cost weight of its rows that have not yet paid each feature.
The penalty is applied afresh whenever a split is chosen, so when a split pays
a feature's whole-image cost every other leaf is re-ranked with its correctly
penalised gain (LightGBM 4.7 promotes cached splits with the unpenalised gain).
"""

import numpy as np

from ._kernels import (MISSING_BIN, N_SLOTS, build_histograms, find_best_splits, gather_rows,
                       mark_paid_on_paths, partition, route_binned)


class CostState:
    """Cost bookkeeping shared by all trees of a model (docs/design.md, *CEGB, exactly*).

    ``used[m]``: feature m's whole-image cost is paid. ``paid_bits[m]``: bitset
    over training rows that already have feature m (its per-sample cost is paid).
    """

    def __init__(self, n_rows, n_features):
        self.used = np.zeros(n_features, dtype=np.bool_)
        self.paid_bits = np.zeros((n_features, (n_rows + 63) // 64), dtype=np.uint64)


class _Leaf:
    __slots__ = ("node", "start", "stop", "depth", "G", "H", "N", "W", "share", "slot",
                 "gain", "bin", "default_left", "unpaid")


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
        self.mu = float(params.cost_tradeoff)
        self.alpha = float(params.split_cost)
        self.share = share
        self.root_share = float(share.max()) if share.size else 1.0
        self.total_cost_weight = float(cost_weight.sum())
        if params.feature_cost_mode == "coupled":
            # Paid for every sample at once, the per-sample cost acts as a whole-model cost.
            self.gamma = gamma + beta * self.total_cost_weight
            self.beta = np.zeros_like(beta)
        else:
            self.gamma = gamma
            self.beta = beta
        self.count_unpaid = (self.beta > 0) & (self.mu > 0)
        self.max_depth = params.max_depth if params.max_depth is not None else np.iinfo(np.int32).max
        self.hist = np.empty((params.max_leaves, n_features, N_SLOTS, 3))
        self.scratch = np.empty(n_rows, dtype=np.int32)
        self.ordered = [np.empty(n_rows) for _ in range(3)]
        self.ordered_rows = [np.empty(n_rows, dtype=np.int32) for _ in range(2)]

    # -- penalties -----------------------------------------------------------------------------
    def penalised_gain(self, leaf):
        """Gain of splitting ``leaf`` on each feature, minus ``mu * dPsi``."""
        if self.mu == 0.0:
            return leaf.gain
        weight = leaf.W if self.p.evaluation_cost_mode == "leaf" else self.total_cost_weight
        if self.p.share_mode == "path":
            effective_share = np.minimum(leaf.share, self.share)
        else:
            effective_share = self.share
        penalty = (self.alpha * weight / effective_share
                   + self.gamma * ~self.state.used
                   + self.beta * leaf.unpaid)
        return leaf.gain - self.mu * penalty

    # -- leaf construction ---------------------------------------------------------------------
    def _new_leaf(self, node, start, stop, depth, G, H, N, W, share, slot):
        leaf = _Leaf()
        leaf.node, leaf.start, leaf.stop, leaf.depth = node, start, stop, depth
        leaf.G, leaf.H, leaf.N, leaf.W, leaf.share, leaf.slot = G, H, N, W, share, slot
        n_features = self.Xb.shape[0]
        leaf.gain = np.empty(n_features)
        leaf.bin = np.empty(n_features, dtype=np.int32)
        leaf.default_left = np.empty(n_features, dtype=np.bool_)
        leaf.unpaid = np.zeros(n_features)
        return leaf

    def _histogram(self, leaf, order, grad, hess, active):
        rows = order[leaf.start:leaf.stop]
        n = rows.shape[0]
        loss_rows, cost_rows = (a[:n] for a in self.ordered_rows)
        g, h, cw = (a[:n] for a in self.ordered)
        n_loss, n_cost = gather_rows(rows, grad, hess, self.labelled, self.cost_weight,
                                     loss_rows, g, h, cost_rows, cw)
        build_histograms(self.Xb, loss_rows[:n_loss], g[:n_loss], h[:n_loss],
                         cost_rows[:n_cost], cw[:n_cost], active, self.state.paid_bits,
                         self.count_unpaid, self.hist[leaf.slot], leaf.unpaid)

    def _find_splits(self, leaf, active):
        if leaf.depth >= self.max_depth or leaf.N < 2 * self.p.min_samples_leaf:
            leaf.gain[:] = -np.inf
            return
        find_best_splits(self.hist[leaf.slot], self.n_bins, active, leaf.G, leaf.H, leaf.N,
                         self.p.l2_regularization, self.p.min_samples_leaf, self.p.min_hessian_leaf,
                         leaf.gain, leaf.bin, leaf.default_left)

    # -- growth --------------------------------------------------------------------------------
    def grow(self, grad, hess, order, active, all_rows=None):
        """Grow one tree on ``order`` (the rows of this tree's sample, sorted).

        Parameters
        ----------
        grad, hess : ndarray of float64, shape (N,)
            Weighted gradients and hessians of all rows.
        order : ndarray of int32
            Rows used by this tree; permuted in place into leaf segments.
        active : ndarray of bool, shape (M,)
            Features this tree may use.
        all_rows : ndarray of int32 or None
            Rows outside the sample, routed afterwards (row subsampling).

        Returns
        -------
        tree : dict of node arrays (creation order, root 0)
        leaf_of_row : ndarray of int32, shape (N,)
            The leaf node each training row ends in.
        """
        p = self.p
        nodes = {k: [] for k in ("feature", "threshold", "threshold_bin", "default_left", "left",
                                 "right", "value", "count", "share", "gain")}

        def add_node(G, H, N, share):
            for key, value in (("feature", -1), ("threshold", np.nan), ("threshold_bin", 0),
                               ("default_left", False), ("left", -1), ("right", -1),
                               ("value", -G / (H + p.l2_regularization) * p.learning_rate),
                               ("count", N), ("share", share), ("gain", 0.0)):
                nodes[key].append(value)
            return len(nodes["feature"]) - 1

        n = order.shape[0]
        G = float(grad[order].sum())
        H = float(hess[order].sum())
        N = float(self.labelled[order].sum())
        W = float(self.cost_weight[order].sum())
        free_slots = list(range(p.max_leaves - 1, 0, -1))
        root = self._new_leaf(add_node(G, H, N, self.root_share), 0, n, 0, G, H, N, W,
                              self.root_share, 0)
        self._histogram(root, order, grad, hess, active)
        self._find_splits(root, active)
        open_leaves = [root]

        while len(open_leaves) < p.max_leaves:
            choice = self._choose(open_leaves)
            if choice is None:
                break
            leaf, m, gain = choice
            open_leaves.remove(leaf)
            open_leaves.extend(self._split(leaf, m, gain, nodes, add_node, order, grad, hess,
                                           active, free_slots))

        tree = {
            "feature": np.asarray(nodes["feature"], dtype=np.int32),
            "threshold": np.asarray(nodes["threshold"], dtype=np.float64),
            "threshold_bin": np.asarray(nodes["threshold_bin"], dtype=np.int32),
            "default_left": np.asarray(nodes["default_left"], dtype=np.bool_),
            "left": np.asarray(nodes["left"], dtype=np.int32),
            "right": np.asarray(nodes["right"], dtype=np.int32),
            "value": np.asarray(nodes["value"], dtype=np.float64),
            "count": np.asarray(nodes["count"], dtype=np.float64),
            "share": np.asarray(nodes["share"], dtype=np.float64),
            "gain": np.asarray(nodes["gain"], dtype=np.float64),
        }
        leaf_of_row = np.empty(self.Xb.shape[1], dtype=np.int32)
        for leaf in open_leaves:
            leaf_of_row[order[leaf.start:leaf.stop]] = leaf.node
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

    def _choose(self, open_leaves):
        """The (leaf, feature, penalised gain) to split next, or None when nothing gains."""
        best = None
        for leaf in open_leaves:
            gains = self.penalised_gain(leaf)
            m = int(np.argmax(gains))
            gain = gains[m]
            if not gain > 0.0:
                continue
            if self.p.growth == "breadth_first":
                key = (-leaf.depth, gain)
            else:
                key = (gain,)
            if best is None or key > best[0]:
                best = (key, leaf, m, float(gain))
        return None if best is None else best[1:]

    def _split(self, leaf, m, gain, nodes, add_node, order, grad, hess, active, free_slots):
        p = self.p
        threshold_bin = int(leaf.bin[m])
        default_left = bool(leaf.default_left[m])
        mark_paid = bool(self.count_unpaid[m])
        n_left, w_left = partition(order, leaf.start, leaf.stop, self.Xb[m], threshold_bin,
                                   default_left, self.cost_weight, self.state.paid_bits[m],
                                   mark_paid, self.scratch)
        self.state.used[m] = True

        hm = self.hist[leaf.slot, m]
        left_stats = hm[: threshold_bin + 1].sum(axis=0)
        if default_left:
            left_stats = left_stats + hm[MISSING_BIN]
        GL, HL, NL = (float(v) for v in left_stats)
        GR, HR, NR = leaf.G - GL, leaf.H - HL, leaf.N - NL
        WL, WR = w_left, leaf.W - w_left
        child_share = min(leaf.share, self.share[m]) if p.share_mode == "path" else self.share[m]

        node = leaf.node
        nodes["feature"][node] = m
        nodes["threshold_bin"][node] = threshold_bin
        nodes["threshold"][node] = float(self.edges[m, threshold_bin])
        nodes["default_left"][node] = default_left
        nodes["gain"][node] = gain
        nodes["share"][node] = child_share
        left_node = add_node(GL, HL, NL, child_share)
        right_node = add_node(GR, HR, NR, child_share)
        nodes["left"][node] = left_node
        nodes["right"][node] = right_node

        mid = leaf.start + n_left
        left = self._new_leaf(left_node, leaf.start, mid, leaf.depth + 1, GL, HL, NL, WL,
                              child_share, -1)
        right = self._new_leaf(right_node, mid, leaf.stop, leaf.depth + 1, GR, HR, NR, WR,
                               child_share, -1)
        small, large = (left, right) if n_left <= leaf.stop - mid else (right, left)
        small.slot = free_slots.pop()
        large.slot = leaf.slot
        self._histogram(small, order, grad, hess, active)
        # Larger child by subtraction, for the histogram and the unpaid counts alike.
        self.hist[large.slot] -= self.hist[small.slot]
        np.subtract(leaf.unpaid, small.unpaid, out=large.unpaid)
        np.maximum(large.unpaid, 0.0, out=large.unpaid)
        large.unpaid[m] = 0.0
        self._find_splits(left, active)
        self._find_splits(right, active)
        return left, right
