"""The trained ensemble: prediction, prediction cost, dump and model files."""

import numpy as np

from ..budget import PredictionCost
from . import _predict
from ._validation import check_features

# What a model file may hold as a Booster's objective ("custom": a callable, e.g. GRBB's).
OBJECTIVES = ("regression", "binary", "multiclass", "custom")
_NODE_FIELDS = ("feature", "threshold", "default_left", "left", "right", "value", "count", "share")


class Booster:
    """An ensemble of regression trees trained by `msclassify.cegb.train`.

    Trees are stored in training order; with ``n_outputs = K`` outputs each
    iteration adds K trees, tree ``t`` contributing to output ``t % K``.
    """

    def __init__(self, trees, init_score, n_features, objective, split_cost=0.0,
                 feature_costs=None, feature_batch_costs=None, feature_share=None, params=None):
        self.trees = trees
        self.init_score = np.asarray(init_score, dtype=np.float64)
        self.n_outputs = self.init_score.shape[0]
        self.n_features = int(n_features)
        self.objective = objective
        self.split_cost = float(split_cost)
        zeros = np.zeros(self.n_features)
        self.feature_costs = zeros if feature_costs is None else np.asarray(feature_costs, float)
        self.feature_batch_costs = (zeros if feature_batch_costs is None
                                    else np.asarray(feature_batch_costs, float))
        self.feature_share = (np.ones(self.n_features) if feature_share is None
                              else np.asarray(feature_share, float))
        self.params = params or {}
        self._flat = None

    # -- structure -----------------------------------------------------------------------------
    @property
    def n_trees(self):
        return len(self.trees)

    @property
    def n_iterations(self):
        return len(self.trees) // self.n_outputs

    def _n_trees_for(self, n_iterations):
        if n_iterations is None:
            return self.n_trees
        if not 0 <= n_iterations <= self.n_iterations:
            raise ValueError(f"n_iterations must be in [0, {self.n_iterations}], got {n_iterations}")
        return int(n_iterations) * self.n_outputs

    def truncated(self, n_iterations):
        """A Booster of the first ``n_iterations`` iterations only (0: the constant init score).

        The tree arrays are shared with this Booster, not copied.

        Examples
        --------
        >>> import numpy as np
        >>> from msclassify.cegb import train
        >>> X = np.arange(40.0).reshape(20, 2); y = (X[:, 0] > 19).astype(float)
        >>> b = train(X, y, "binary", {"n_estimators": 5, "min_samples_leaf": 1})
        >>> short = b.truncated(2)
        >>> short.n_iterations, bool(np.allclose(short.predict_raw(X), b.predict_raw(X, 2)))
        (2, True)
        """
        return Booster(self.trees[:self._n_trees_for(n_iterations)], self.init_score,
                       self.n_features, self.objective, self.split_cost, self.feature_costs,
                       self.feature_batch_costs, self.feature_share, self.params)

    def features_used(self, n_iterations=None):
        """Sorted indices of the features split on by the first ``n_iterations`` iterations."""
        used = [t["feature"][t["feature"] >= 0] for t in self.trees[:self._n_trees_for(n_iterations)]]
        return np.unique(np.concatenate(used)) if used else np.zeros(0, dtype=np.int32)

    def tree_statistics(self):
        """Leaves and split nodes summed over the trees, and the greatest depth of a leaf.

        Returns
        -------
        dict
            ``n_leaves``, ``n_splits`` and ``max_depth`` (0 for trees of one leaf).

        Examples
        --------
        >>> import numpy as np
        >>> from msclassify.cegb import train
        >>> X = np.arange(40.0).reshape(20, 2); y = ((X[:, 0] > 10) & (X[:, 0] < 30)) * 1.0
        >>> booster = train(X, y, "binary", {"n_estimators": 2, "max_leaves": 3,
        ...                                  "min_samples_leaf": 1})
        >>> booster.tree_statistics()     # two trees: a split, then a split of one side
        {'n_leaves': 6, 'n_splits': 4, 'max_depth': 2}
        """
        leaves = splits = depth = 0
        for tree in self.trees:
            feature, left, right = tree["feature"], tree["left"], tree["right"]
            node_depth = np.zeros(len(feature), dtype=np.int64)
            for node in range(len(feature)):  # children are created after their parent
                if feature[node] >= 0:
                    node_depth[left[node]] = node_depth[right[node]] = node_depth[node] + 1
            leaves += int(np.count_nonzero(feature < 0))
            splits += int(np.count_nonzero(feature >= 0))
            depth = max(depth, int(node_depth.max(initial=0)))
        return {"n_leaves": leaves, "n_splits": splits, "max_depth": depth}

    def feature_importances(self, kind="gain"):
        """Total split gain (``kind="gain"``) or number of splits (``"split"``) per feature."""
        if kind not in ("gain", "split"):
            raise ValueError(f"kind must be 'gain' or 'split', got {kind!r}")
        out = np.zeros(self.n_features)
        for tree in self.trees:
            splits = tree["feature"] >= 0
            weights = tree["gain"][splits] if kind == "gain" else np.ones(splits.sum())
            np.add.at(out, tree["feature"][splits], weights)
        return out

    def flat_arrays(self):
        """All trees as flat node arrays with global child indices (cached).

        Keys: ``feature``, ``threshold``, ``default_left``, ``left``, ``right``, ``value``,
        ``node_cost`` (alpha / share at split nodes), ``roots`` (first node of each tree),
        ``tree_output``, ``tree_iteration`` and ``packed``: the nodes as prediction walks
        them (`_predict.pack_nodes`: ``nodes``, ``roots``, ``depth``, ``origin``) with
        ``value``, ``node_cost`` and ``leaf_id`` (node id within its tree) per packed node.
        """
        if self._flat is None:
            sizes = np.array([t["feature"].shape[0] for t in self.trees], dtype=np.int64)
            offsets = (np.cumsum(sizes) - sizes).astype(np.int32)  # also for 0 trees
            cat = lambda key, dtype: np.ascontiguousarray(
                np.concatenate([t[key] for t in self.trees]) if self.trees else np.zeros(0),
                dtype=dtype)
            feature = cat("feature", np.int32)
            left = cat("left", np.int32)
            right = cat("right", np.int32)
            shift = np.repeat(offsets, sizes)
            split = feature >= 0
            left[split] += shift[split]
            right[split] += shift[split]
            node_cost = np.where(split, self.split_cost / cat("share", np.float64), 0.0)
            self._flat = {
                "feature": feature, "threshold": cat("threshold", np.float64),
                "default_left": cat("default_left", np.bool_), "left": left, "right": right,
                "value": cat("value", np.float64), "node_cost": node_cost, "roots": offsets,
                "tree_output": (np.arange(self.n_trees) % self.n_outputs).astype(np.int32),
                "tree_iteration": (np.arange(self.n_trees) // self.n_outputs).astype(np.int32),
            }
            packed = _predict.pack_nodes(feature, self._flat["threshold"],
                                         self._flat["default_left"], left, right, offsets)
            origin = packed["origin"]
            packed["value"] = self._flat["value"][origin]
            packed["node_cost"] = node_cost[origin]
            packed["leaf_id"] = (origin - shift[origin]).astype(np.int32)
            self._flat["packed"] = packed
        return self._flat

    # -- prediction ----------------------------------------------------------------------------
    def predict_raw(self, X, n_iterations=None):
        """Raw scores (margins): shape (N,) for one output, (N, K) otherwise."""
        X = check_features(X, self.n_features)
        f = self.flat_arrays()
        out = np.tile(self.init_score, (X.shape[0], 1))
        p = f["packed"]
        _predict.predict_raw(X, p["nodes"], p["value"], p["roots"], p["depth"], f["tree_output"],
                             self._n_trees_for(n_iterations), out)
        return out[:, 0] if self.n_outputs == 1 else out

    def staged_predict_raw(self, X):
        """Yield the raw scores after each iteration."""
        outputs = self.tree_outputs(X)
        raw = np.tile(self.init_score, (outputs.shape[0], 1))
        for it in range(self.n_iterations):
            for k in range(self.n_outputs):
                raw[:, k] += outputs[:, it * self.n_outputs + k]
            yield raw[:, 0].copy() if self.n_outputs == 1 else raw.copy()

    def apply(self, X):
        """Leaf reached in every tree, shape (N, n_trees), node ids within each tree."""
        X = check_features(X, self.n_features)
        f = self.flat_arrays()
        out = np.empty((X.shape[0], self.n_trees), dtype=np.int32)
        p = f["packed"]
        _predict.predict_leaves(X, p["nodes"], p["roots"], p["depth"], p["leaf_id"], out)
        return out

    def tree_outputs(self, X):
        """Each tree's output (learning rate applied), shape (N, n_trees)."""
        leaves = self.apply(X)
        out = np.empty(leaves.shape)
        for t, tree in enumerate(self.trees):
            out[:, t] = tree["value"][leaves[:, t]]
        return out

    # -- cost ----------------------------------------------------------------------------------
    def _cost(self, X, n_iterations=None):
        X = check_features(X, self.n_features)
        f = self.flat_arrays()
        n = X.shape[0]
        evaluation, feature = np.zeros(n), np.zeros(n)
        eval_it, feat_it = np.zeros(self.n_iterations), np.zeros(self.n_iterations)
        p = f["packed"]
        _predict.prediction_cost(X, p["nodes"], p["node_cost"], p["roots"], f["tree_iteration"],
                                 self.feature_costs, self._n_trees_for(n_iterations),
                                 self.n_iterations, evaluation, feature, eval_it, feat_it)
        return evaluation, feature, eval_it / n, feat_it / n

    def prediction_cost(self, X, n_iterations=None):
        """Prediction cost of the first ``n_iterations`` iterations on ``X``.

        Examples
        --------
        >>> import numpy as np
        >>> from msclassify.cegb import train
        >>> X = np.arange(40.0).reshape(20, 2); y = (X[:, 0] > 19).astype(float)
        >>> b = train(X, y, "binary", {"n_estimators": 2, "min_samples_leaf": 1, "split_cost": 1.0})
        >>> cost = b.prediction_cost(X)
        >>> cost.evaluation.shape
        (20,)
        """
        evaluation, feature, _, _ = self._cost(X, n_iterations)
        used = self.features_used(n_iterations)
        return PredictionCost(evaluation, feature, float(self.feature_batch_costs[used].sum()))

    def cost_curve(self, X):
        """Mean costs as a function of the number of iterations (index ``j`` = first ``j+1``).

        Returns
        -------
        dict with ``evaluation``, ``feature``, ``batch`` and ``total`` arrays of length
        ``n_iterations``, where ``total = evaluation + feature`` (per sample).
        """
        _, _, eval_it, feat_it = self._cost(X)
        batch = np.array([self.feature_batch_costs[self.features_used(j + 1)].sum()
                          for j in range(self.n_iterations)])
        evaluation, feature = np.cumsum(eval_it), np.cumsum(feat_it)
        return {"evaluation": evaluation, "feature": feature, "batch": batch,
                "total": evaluation + feature}

    # -- serialisation -------------------------------------------------------------------------
    def dump(self):
        """JSON-able dict of the model; nodes of each tree in the order they were created."""
        trees = []
        for tree in self.trees:
            entry = {key: tree[key].tolist() for key in _NODE_FIELDS if key != "threshold"}
            entry["threshold"] = [None if f < 0 else float(t)
                                  for f, t in zip(tree["feature"], tree["threshold"])]
            entry["gain"] = tree["gain"].tolist()
            trees.append(entry)
        return {"objective": self.objective, "n_features": self.n_features,
                "init_score": self.init_score.tolist(), "split_cost": self.split_cost,
                "feature_costs": self.feature_costs.tolist(),
                "feature_batch_costs": self.feature_batch_costs.tolist(),
                "feature_share": self.feature_share.tolist(), "params": self.params,
                "trees": trees}

    @classmethod
    def from_dict(cls, d):
        """Inverse of `dump`."""
        dtypes = {"feature": np.int32, "threshold": np.float64, "default_left": np.bool_,
                  "left": np.int32, "right": np.int32, "value": np.float64,
                  "count": np.float64, "share": np.float64, "gain": np.float64}
        trees = []
        for entry in d["trees"]:
            tree = {k: np.asarray([np.nan if v is None else v for v in entry[k]], dtype=dt)
                    for k, dt in dtypes.items()}
            trees.append(tree)
        return cls(trees, d["init_score"], d["n_features"], d["objective"], d["split_cost"],
                   d["feature_costs"], d["feature_batch_costs"], d["feature_share"], d["params"])

    def to_model_file(self):
        """``(meta, arrays)`` for `msclassify.modelfile.write_model`."""
        meta = {k: v for k, v in self.dump().items() if k != "trees"}
        meta["n_trees"] = self.n_trees
        sizes = np.array([t["feature"].shape[0] for t in self.trees], dtype=np.int64)
        arrays = {"tree_sizes": sizes}
        for key in _NODE_FIELDS + ("gain",):
            arrays[f"node_{key}"] = (np.concatenate([t[key] for t in self.trees])
                                     if self.trees else np.zeros(0))
        return meta, arrays

    @classmethod
    def from_model_file(cls, meta, arrays, objectives=OBJECTIVES):
        """Inverse of `to_model_file`, validating every field that changes a prediction.

        Parameters
        ----------
        meta, arrays
            As `to_model_file` gives them (read back by `msclassify.modelfile.read_model`).
        objectives : sequence of str
            The objectives the model's class can hold.

        Raises
        ------
        msclassify.modelfile.ModelFileError
            Naming the field: an unknown objective, a scores/outputs mismatch, NaN or
            infinite leaf values, thresholds or costs, feature ids out of range, node
            links that do not point forward (they could loop), arrays of the wrong
            type or size.
        """
        from ..modelfile import ModelFileError, model_array, model_number, model_numbers

        if not isinstance(meta, dict):
            raise ModelFileError("the trees' description is not a JSON object")
        objective = meta.get("objective")
        if objective not in objectives:
            raise ModelFileError(f"objective {objective!r} is not one of "
                                 f"{', '.join(map(repr, objectives))}")
        n_features = model_number(meta, "n_features", integer=True, low=1)
        n_trees = model_number(meta, "n_trees", integer=True, low=0)
        init_score = model_numbers(meta, "init_score")
        n_outputs = init_score.size
        if n_outputs < 1 or (objective == "multiclass") != (n_outputs > 1) or \
                n_trees % n_outputs:
            raise ModelFileError(f"{n_outputs} initial score(s) and {n_trees} trees do not fit "
                                 f"the objective {objective!r}")
        split_cost = model_number(meta, "split_cost", low=0)
        costs = [model_numbers(meta, key, n_features, low=0)
                 for key in ("feature_costs", "feature_batch_costs", "feature_share")]
        if np.any(costs[2] <= 0):
            raise ModelFileError("feature_share must be > 0 for every feature")
        params = meta.get("params")
        if not isinstance(params, dict):
            raise ModelFileError("params must be a JSON object")
        sizes = model_array(arrays, "tree_sizes", "int", shape=(n_trees,), low=1)
        total = int(sizes.sum())
        node = {key: model_array(arrays, f"node_{key}", kind, shape=(total,), finite=finite)
                for key, kind, finite in (("feature", "int", True), ("threshold", "float", False),
                                          ("default_left", "bool", True), ("left", "int", True),
                                          ("right", "int", True), ("value", "float", True),
                                          ("count", "float", True), ("share", "float", False),
                                          ("gain", "float", False))}
        split = node["feature"] >= 0
        if node["feature"].size and (node["feature"].min() < -1
                                     or node["feature"].max() >= n_features):
            raise ModelFileError(f"the trees split on feature ids outside 0..{n_features - 1}")
        if not np.all(np.isfinite(node["threshold"][split])):
            raise ModelFileError("a split threshold is NaN or infinite")
        if not np.all(np.isfinite(node["share"][split]) & (node["share"][split] > 0)):
            raise ModelFileError("a split's share is not a finite number > 0")
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        dtypes = {"feature": np.int32, "threshold": np.float64, "default_left": np.bool_,
                  "left": np.int32, "right": np.int32, "value": np.float64,
                  "count": np.float64, "share": np.float64, "gain": np.float64}
        trees = []
        for t in range(n_trees):
            tree = {k: node[k][bounds[t]:bounds[t + 1]].astype(dtypes[k])
                    for k in _NODE_FIELDS + ("gain",)}
            at = np.flatnonzero(tree["feature"] >= 0)
            n = sizes[t]
            # Children are always created after their parent, so links only point forward:
            # this also rules out cycles that would hang prediction.
            # and no node may have two parents (prediction lays the trees out anew).
            children = np.concatenate([tree["left"][at], tree["right"][at]])
            if (np.any((node["left"][bounds[t] + at] <= at) | (node["left"][bounds[t] + at] >= n))
                    or np.any((node["right"][bounds[t] + at] <= at)
                              | (node["right"][bounds[t] + at] >= n))
                    or np.unique(children).size != children.size):
                raise ModelFileError(f"tree {t} has invalid node links")
            trees.append(tree)
        return cls(trees, init_score, n_features, objective, split_cost, *costs, params)
