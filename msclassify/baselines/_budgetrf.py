"""BudgetRF: the feature-budgeted random forest of Nan, Wang & Saligrama (ICML 2015).

The paper is "Feature-budgeted random forest" (ICML 2015, PMLR 37); equation,
section and algorithm-line references below are to it.

* GREEDYTREE (Algorithm 1, lines 8-18) grows a tree on a bootstrap sample. At
  node S with impurity F(S) > 0 it scores every feature t by its risk

      R(t) = min_{g in G_t} max_{i in outcomes} c(t) / (F(S) - F(S_g^i)),

  i.e. the feature cost divided by the impurity reduction of the *worst* child
  of the best stump on t, and splits on the feature of least risk. A node with
  F(S) = 0 is a leaf.
* F is the threshold-Pairs impurity, Eq. (11):
  ``F_alpha(G) = sum_{i != j} [[n_i - alpha]_+ [n_j - alpha]_+ - alpha^2]_+`` over
  ordered pairs of classes (so twice the sum over unordered pairs; the factor
  cancels in argmin R).
* G_t are stumps ``x_t <= threshold``. Section 3 approximates the minimum over
  G_t "by randomly generating 80, 40 and 20 stumps if the number of examples
  exceeds 2000, 500 and less than 500" (``n_candidate_stumps="paper"``); we draw
  the thresholds uniformly among the gaps between consecutive distinct values of
  x_t in the node (the midpoint of a gap), and evaluate all gaps when there are
  no more of them than stumps to draw. ``n_candidate_stumps=None`` evaluates
  every gap (exact minimum, as in the authors' released code).
* BUDGETRF (lines 1-7) adds trees while the average validation cost of the
  forest is <= B and returns the forest without the tree that broke the budget.
  A sample's cost is the sum of the costs of the distinct features on its paths
  through all trees: a feature acquired once is free thereafter (Sec. 2.2).
* Prediction (Sec. 2.1): majority vote of the trees, each leaf predicting the
  majority class of its training examples. Confidence (Sec. 3, Yahoo!): the
  training examples of each class in the reached leaves are summed over the
  trees; their ratio is ``predict_proba``.
"""

import copy
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numba import njit, prange
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..budget import PredictionCost, PrefixBudgetMixin, check_budget, check_validation_labels
from ..checks import check_int, check_number, check_per_feature, is_int
from ..modelfile import (ModelFileError, estimator_params, model_array, model_classes,
                         model_number, write_model)

# Section 3: stumps drawn per feature for nodes of > 2000, > 500 and <= 500 examples.
PAPER_STUMP_SCHEDULE = (80, 40, 20)
_ROW_CHUNK = 16384  # rows per block when tracking acquired features (bounds the N x M bool matrix)
_TREE_FIELDS = ("feature", "threshold", "left", "right", "class_counts")


@dataclass
class BudgetRFCost(PredictionCost):
    """`PredictionCost` of a BudgetRF forest plus the number of distinct features per sample.

    BudgetRF prices feature acquisition only: ``evaluation`` is zero and
    ``batch`` is 0.0; ``feature`` is the per-sample acquisition cost.
    """

    n_features: np.ndarray


@njit(cache=True)
def threshold_pairs_impurity(class_counts, threshold):
    """Threshold-Pairs impurity, Eq. (11): ``sum_{i != j} [[n_i - a]_+ [n_j - a]_+ - a^2]_+``.

    The sum runs over ordered pairs of classes. ``threshold`` (alpha) >= 0; with
    alpha = 0 it is ``sum_{i != j} n_i n_j`` (e.g. 2 * n_0 * n_1 for two classes).
    """
    total = 0.0
    excess_floor = threshold * threshold
    for i in range(class_counts.shape[0]):
        a = class_counts[i] - threshold
        if a <= 0.0:
            continue
        for j in range(class_counts.shape[0]):
            if j == i:
                continue
            b = class_counts[j] - threshold
            if b <= 0.0:
                continue
            pair = a * b - excess_floor
            if pair > 0.0:
                total += pair
    return total


@njit(cache=True, nogil=True)
def _grow_greedy_tree(X, y, rows, n_classes, costs, threshold, stump_schedule, seed):
    """GREEDYTREE on ``X[rows]`` (rows may repeat: a bootstrap sample).

    ``stump_schedule`` holds the stumps to draw per feature for nodes of > 2000,
    > 500 and fewer examples; a negative entry means "evaluate every gap".
    Returns node arrays (feature -1 at leaves; ``x <= threshold`` goes left) and the
    training class counts of every node.
    """
    np.random.seed(seed)
    n, n_features = rows.shape[0], X.shape[1]
    max_nodes = 2 * n - 1  # a binary tree whose leaves each hold >= 1 example
    feature = np.full(max_nodes, -1, dtype=np.int32)
    split_at = np.zeros(max_nodes, dtype=np.float64)
    left = np.full(max_nodes, -1, dtype=np.int32)
    right = np.full(max_nodes, -1, dtype=np.int32)
    counts = np.zeros((max_nodes, n_classes), dtype=np.float64)

    index = rows.copy()
    values = np.empty(n, dtype=np.float64)
    gap_positions = np.empty(n, dtype=np.int64)
    evaluate = np.zeros(n, dtype=np.bool_)
    left_counts = np.empty(n_classes, dtype=np.float64)
    right_counts = np.empty(n_classes, dtype=np.float64)
    stack_node = np.empty(max_nodes, dtype=np.int64)
    stack_start = np.empty(max_nodes, dtype=np.int64)
    stack_stop = np.empty(max_nodes, dtype=np.int64)
    stack_node[0], stack_start[0], stack_stop[0] = 0, 0, n
    depth_of_stack, n_nodes = 1, 1

    while depth_of_stack > 0:
        depth_of_stack -= 1
        node = stack_node[depth_of_stack]
        start, stop = stack_start[depth_of_stack], stack_stop[depth_of_stack]
        m = stop - start
        for k in range(start, stop):
            counts[node, y[index[k]]] += 1.0
        impurity = threshold_pairs_impurity(counts[node], threshold)
        if impurity <= 0.0:
            continue
        if m > 2000:
            n_stumps = stump_schedule[0]
        elif m > 500:
            n_stumps = stump_schedule[1]
        else:
            n_stumps = stump_schedule[2]

        best_risk, best_reduction = np.inf, 0.0
        best_feature, best_threshold = -1, 0.0
        for f in range(n_features):
            for k in range(m):
                values[k] = X[index[start + k], f]
            order = np.argsort(values[:m], kind="mergesort")
            n_gaps = 0
            for p in range(m - 1):
                if values[order[p]] < values[order[p + 1]]:
                    gap_positions[n_gaps] = p
                    n_gaps += 1
            if n_gaps == 0:
                continue
            if n_stumps < 0 or n_gaps <= n_stumps:
                for g in range(n_gaps):
                    evaluate[gap_positions[g]] = True
            else:
                for _ in range(n_stumps):
                    evaluate[gap_positions[np.random.randint(0, n_gaps)]] = True
            left_counts[:] = 0.0
            best_worst, best_position = np.inf, -1
            for p in range(m - 1):
                left_counts[y[index[start + order[p]]]] += 1.0
                if evaluate[p]:
                    evaluate[p] = False
                    for c in range(n_classes):
                        right_counts[c] = counts[node, c] - left_counts[c]
                    worst = max(threshold_pairs_impurity(left_counts, threshold),
                                threshold_pairs_impurity(right_counts, threshold))
                    if worst < best_worst:
                        best_worst, best_position = worst, p
            reduction = impurity - best_worst
            if reduction <= 1e-12 * impurity:
                continue  # no stump on f lowers the impurity of every child: R(t) is infinite
            risk = costs[f] / reduction
            if risk < best_risk or (risk == best_risk and reduction > best_reduction):
                low, high = values[order[best_position]], values[order[best_position + 1]]
                middle = 0.5 * low + 0.5 * high
                best_threshold = middle if low <= middle < high else low
                best_risk, best_reduction, best_feature = risk, reduction, f
        if best_feature < 0:
            continue

        i, j = start, stop - 1
        while i <= j:
            if X[index[i], best_feature] <= best_threshold:
                i += 1
            else:
                index[i], index[j] = index[j], index[i]
                j -= 1
        feature[node], split_at[node] = best_feature, best_threshold
        left[node], right[node] = n_nodes, n_nodes + 1
        for child, child_start, child_stop in ((n_nodes, start, i), (n_nodes + 1, i, stop)):
            stack_node[depth_of_stack] = child
            stack_start[depth_of_stack] = child_start
            stack_stop[depth_of_stack] = child_stop
            depth_of_stack += 1
        n_nodes += 2
    return (feature[:n_nodes].copy(), split_at[:n_nodes].copy(), left[:n_nodes].copy(),
            right[:n_nodes].copy(), counts[:n_nodes].copy())


@njit(cache=True, parallel=True)
def _acquire_features(X, feature, threshold, left, right, costs, acquired, cost, n_acquired):
    """Route each row through one tree; pay for features it meets for the first time."""
    for i in prange(X.shape[0]):
        node = 0
        while feature[node] >= 0:
            f = feature[node]
            if not acquired[i, f]:
                acquired[i, f] = True
                cost[i] += costs[f]
                n_acquired[i] += 1
            node = left[node] if X[i, f] <= threshold[node] else right[node]


@njit(cache=True, parallel=True)
def _add_tree_votes(X, feature, threshold, left, right, class_counts, count_sum, votes):
    """Add one tree's leaf class counts (confidence) and its majority-class vote per row."""
    for i in prange(X.shape[0]):
        node = 0
        while feature[node] >= 0:
            node = left[node] if X[i, feature[node]] <= threshold[node] else right[node]
        best = 0
        for c in range(class_counts.shape[1]):
            count_sum[i, c] += class_counts[node, c]
            if class_counts[node, c] > class_counts[node, best]:
                best = c
        votes[i, best] += 1.0


def _check_stump_setting(value):
    if isinstance(value, str) and value == "paper":
        return np.array(PAPER_STUMP_SCHEDULE, dtype=np.int64)
    if value is None:
        return np.full(3, -1, dtype=np.int64)
    if is_int(value, 1):
        return np.full(3, int(value), dtype=np.int64)
    raise ValueError("n_candidate_stumps must be 'paper' (80/40/20 random stumps per feature, "
                     f"Sec. 3), None (every threshold) or a positive integer, got {value!r}")


class BudgetRFClassifier(PrefixBudgetMixin, ClassifierMixin, BaseEstimator):
    """Feature-budgeted random forest (BudgetRF; Nan, Wang & Saligrama, ICML 2015).

    Trees are grown by GREEDYTREE with minimax cost-weighted threshold-Pairs
    splits on bootstrap samples and added until the mean feature-acquisition
    cost on validation data exceeds ``budget`` (Algorithm 1). Prediction is the
    majority vote of the trees. See the module docstring for the exact rules.

    Parameters
    ----------
    n_estimators : int
        Maximum number of trees (the paper builds up to 40 or 140).
    budget : float or None
        Mean per-sample feature cost B on the validation data given to `fit`;
        None builds ``n_estimators`` trees. See also `with_budget`.
    feature_costs : array-like of shape (n_features,), optional
        Acquisition cost c(t) of each feature; default 1 (uniform, as the paper
        for MiniBooNE, Forest and CIFAR).
    impurity_threshold : float
        alpha of threshold-Pairs, Eq. (11); 0 grows trees until leaves are pure,
        larger values stop earlier (cheaper, weaker trees).
    n_candidate_stumps : "paper", int or None
        Stumps drawn per feature and node: "paper" = 80 / 40 / 20 for nodes of
        > 2000 / > 500 / fewer examples (Sec. 3); an int = that many always;
        None = every threshold (exact minimax split).
    bootstrap : bool
        Grow each tree on n examples drawn with replacement (Algorithm 1, line 4).
    random_state : int, RandomState or None
        Seeds bootstrap samples and stumps; results do not depend on ``n_jobs``.
    n_jobs : int or None
        Threads growing trees in parallel (None = 1, -1 = all cores).

    Attributes
    ----------
    classes_ : ndarray
    trees_ : list of dict
        Per tree: ``feature`` (-1 at leaves), ``threshold`` (``x <= threshold`` goes
        left), ``left``, ``right`` and ``class_counts`` (training examples of each
        class per node, bootstrap duplicates counted).
    feature_costs_ : ndarray
    validation_cost_curve_ : ndarray or None
        Mean validation cost after each kept tree (when `fit` got ``X_val``).
    validation_accuracy_curve_ : ndarray or None
        Validation accuracy after each kept tree (when `fit` got ``y_val``).

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify.baselines import BudgetRFClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 3)); y = (X[:, 0] > 0).astype(int)
    >>> X[:, 2] = X[:, 0]                         # an expensive copy of feature 0
    >>> forest = BudgetRFClassifier(n_estimators=5, feature_costs=[1, 1, 10],
    ...                             random_state=0).fit(X, y)
    >>> 2 in forest.features_used()                # the copy is never bought
    False
    >>> float(forest.prediction_cost(X).feature.mean()) <= 2.0
    True
    """

    _model_kind = "budgetrf_classifier"

    def __init__(self, n_estimators=40, budget=None, feature_costs=None, impurity_threshold=0.0,
                 n_candidate_stumps="paper", bootstrap=True, random_state=None, n_jobs=None):
        self.n_estimators = n_estimators
        self.budget = budget
        self.feature_costs = feature_costs
        self.impurity_threshold = impurity_threshold
        self.n_candidate_stumps = n_candidate_stumps
        self.bootstrap = bootstrap
        self.random_state = random_state
        self.n_jobs = n_jobs

    # -- fitting -------------------------------------------------------------------------------
    def _check_params(self):
        check_int(self.n_estimators, "n_estimators")
        if self.budget is not None:
            check_budget(self.budget)
        check_number(self.impurity_threshold, "impurity_threshold", note="alpha of Eq. 11")
        if self.n_jobs is not None and not (is_int(self.n_jobs) and self.n_jobs != 0):
            raise ValueError(f"n_jobs must be None, -1 or a positive integer, got {self.n_jobs!r}")
        return _check_stump_setting(self.n_candidate_stumps)

    def _n_threads(self):
        if self.n_jobs is None:
            return 1
        return max(1, os.cpu_count() + 1 + self.n_jobs) if self.n_jobs < 0 else self.n_jobs

    def _check_X(self, X):
        check_is_fitted(self, "trees_")
        return validate_data(self, X, reset=False, dtype=np.float64, order="C")

    def fit(self, X, y, X_val=None, y_val=None):
        """Grow the forest on ``X``, ``y``; with ``budget`` set, stop by the cost on ``X_val``.

        Parameters
        ----------
        X : array-like, shape (N, M)
            Finite features (impute NaN first: the paper has no missing-value rule).
        y : array-like, shape (N,)
            Class labels (two or more classes).
        X_val : array-like, shape (N_val, M), optional
            Validation data whose mean acquisition cost is held to ``budget``.
            Required when ``budget`` is set.
        y_val : array-like, shape (N_val,), optional
            Validation labels; only used to record ``validation_accuracy_curve_``.
        """
        stump_schedule = self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float64, order="C")
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError(f"y has only one class ({self.classes_[0]!r}); a classifier needs "
                             "samples of at least 2 classes")
        encoded = encoded.astype(np.int64)
        n_samples, n_features = X.shape
        self.feature_costs_ = check_per_feature("feature_costs", self.feature_costs, n_features,
                                                1.0)
        self.class_prior_ = np.bincount(encoded, minlength=self.classes_.size) / n_samples
        if self.budget is not None and X_val is None:
            raise ValueError("budget needs validation data: call fit(X, y, X_val=...); Algorithm 1 "
                             "adds trees while the mean feature cost on X_val stays <= budget")
        if X_val is not None:
            X_val = validate_data(self, X_val, reset=False, dtype=np.float64, order="C")
        if y_val is not None:
            if X_val is None:
                raise ValueError("y_val was given without X_val")
            y_val = self._check_y_val(X_val, y_val)

        entropy = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

        def grow(tree_index):
            state = np.random.SeedSequence(entropy, spawn_key=(tree_index,)).generate_state(2)
            rows = (np.random.default_rng(state[0]).integers(0, n_samples, n_samples)
                    if self.bootstrap else np.arange(n_samples))
            arrays = _grow_greedy_tree(X, encoded, rows, self.classes_.size, self.feature_costs_,
                                       float(self.impurity_threshold), stump_schedule,
                                       int(state[1] % (2**32 - 1)))
            return dict(zip(_TREE_FIELDS, arrays))

        self.trees_ = []
        tracker = _CostTracker(X_val, self.feature_costs_) if X_val is not None else None
        cost_curve = []
        n_threads = self._n_threads()
        with ThreadPoolExecutor(max_workers=n_threads) as pool:
            next_tree, over_budget = 0, False
            while next_tree < self.n_estimators and not over_budget:
                batch = range(next_tree, min(next_tree + n_threads, self.n_estimators))
                for tree in pool.map(grow, batch):
                    if tracker is not None:
                        mean_cost = tracker.add(tree).mean()
                        if self.budget is not None and mean_cost > self.budget:
                            over_budget = True  # line 7: return the forest without this tree
                            if not self.trees_:
                                warnings.warn(
                                    f"budget {self.budget} is below the mean validation cost of "
                                    f"a single tree ({mean_cost:.4g}); the forest is empty and "
                                    "predicts the training class prior. Raise the budget or "
                                    "impurity_threshold (shallower, cheaper trees).", stacklevel=2)
                            break
                        cost_curve.append(mean_cost)
                    self.trees_.append(tree)
                next_tree = batch.stop
        self.validation_cost_curve_ = np.array(cost_curve) if tracker is not None else None
        self.validation_accuracy_curve_ = (
            np.array([np.mean(self.classes_[np.argmax(vote_scores, axis=1)] == y_val)
                      for _, vote_scores in self._staged_outputs(X_val)])
            if y_val is not None else None)
        return self

    def _check_y_val(self, X_val, y_val):
        return check_validation_labels(X_val, y_val, self.classes_)

    # -- prediction ----------------------------------------------------------------------------
    @property
    def n_trees_(self):
        check_is_fitted(self, "trees_")
        return len(self.trees_)

    def _trees(self, n_trees):
        check_is_fitted(self, "trees_")
        if n_trees is None:
            return self.trees_
        if not (is_int(n_trees) and 0 <= n_trees <= len(self.trees_)):
            raise ValueError(f"n_trees must be an integer in [0, {len(self.trees_)}], got "
                             f"{n_trees!r}")
        return self.trees_[:n_trees]

    def _staged_outputs(self, X, n_trees=None):
        """Yield ``(proba, vote_scores)`` after each tree; argmax of vote_scores is the vote.

        ``vote_scores = votes + 0.5 * proba``: votes are whole numbers and proba <= 1,
        so the vote decides and the confidence only breaks ties.
        """
        count_sum = np.zeros((X.shape[0], self.classes_.size))
        votes = np.zeros_like(count_sum)
        for tree in self._trees(n_trees):
            _add_tree_votes(X, tree["feature"], tree["threshold"], tree["left"], tree["right"],
                            tree["class_counts"], count_sum, votes)
            proba = count_sum / count_sum.sum(axis=1, keepdims=True)
            yield proba, votes + 0.5 * proba

    def _proba_and_scores(self, X, n_trees=None):
        outputs = None
        for outputs in self._staged_outputs(X, n_trees):
            pass
        if outputs is None:  # a zero-tree forest (budget below one tree) predicts the class prior
            prior = np.tile(self.class_prior_, (X.shape[0], 1))
            return prior, prior
        return outputs

    def predict_proba(self, X, n_trees=None):
        """Confidence of each class: its share of the training examples in the reached leaves.

        Sec. 3: "aggregate the number of training examples at these leaf nodes for
        class 0 and 1 separately"; shape (N, n_classes), columns as ``classes_``.
        ``n_trees`` uses only the first trees. This is the paper's ranking score; its
        argmax can differ from `predict` (the majority vote) on a few samples.
        """
        return self._proba_and_scores(self._check_X(X), n_trees)[0]

    def predict(self, X, n_trees=None):
        """Majority vote of the trees (ties broken by `predict_proba`)."""
        vote_scores = self._proba_and_scores(self._check_X(X), n_trees)[1]
        return self.classes_[np.argmax(vote_scores, axis=1)]

    def staged_predict_proba(self, X):
        """Yield `predict_proba` after each tree."""
        for proba, _ in self._staged_outputs(self._check_X(X)):
            yield proba

    def staged_predict(self, X):
        """Yield `predict` after each tree."""
        for _, vote_scores in self._staged_outputs(self._check_X(X)):
            yield self.classes_[np.argmax(vote_scores, axis=1)]

    # -- costs ---------------------------------------------------------------------------------
    def prediction_cost(self, X, n_trees=None):
        """Feature-acquisition cost of each sample, each feature paid once across all trees.

        Returns
        -------
        BudgetRFCost
            ``.feature`` (N,) cost per sample, ``.n_features`` (N,) number of distinct
            features it acquires, ``.per_sample`` = ``.feature``.
        """
        X = self._check_X(X)
        cost = np.zeros(X.shape[0])
        n_acquired = np.zeros(X.shape[0], dtype=np.int64)
        for rows in _row_blocks(X.shape[0]):
            tracker = _CostTracker(X[rows], self.feature_costs_)
            for tree in self._trees(n_trees):
                tracker.add(tree)
            cost[rows], n_acquired[rows] = tracker.cost, tracker.n_acquired
        return BudgetRFCost(np.zeros(X.shape[0]), cost, 0.0, n_acquired)

    def cost_curve(self, X):
        """Mean cost after each tree (index j = first j+1 trees).

        Returns
        -------
        dict of (n_trees,) arrays: ``feature`` and ``total`` (mean acquisition cost),
        ``evaluation`` and ``batch`` (zeros; BudgetRF prices features only) and
        ``n_features`` (mean number of distinct features per sample).
        """
        X = self._check_X(X)
        n_trees = self.n_trees_
        cost, n_acquired = np.zeros(n_trees), np.zeros(n_trees)
        for rows in _row_blocks(X.shape[0]):
            tracker = _CostTracker(X[rows], self.feature_costs_)
            for t, tree in enumerate(self.trees_):
                tracker.add(tree)
                cost[t] += tracker.cost.sum()
                n_acquired[t] += tracker.n_acquired.sum()
        cost, n_acquired = cost / X.shape[0], n_acquired / X.shape[0]
        return {"feature": cost, "total": cost.copy(), "evaluation": np.zeros(n_trees),
                "batch": np.zeros(n_trees), "n_features": n_acquired}

    def features_used(self, n_trees=None):
        """Sorted indices of the features any (of the first ``n_trees``) tree splits on."""
        used = [tree["feature"][tree["feature"] >= 0] for tree in self._trees(n_trees)]
        return np.unique(np.concatenate(used)) if used else np.zeros(0, dtype=np.int32)

    # -- budgets (with_budget: msclassify.budget.PrefixBudgetMixin) ----------------------------
    def _prefix_costs_and_scores(self, X_val, y_val, scoring):
        X_val = self._check_X(X_val)
        y_val = self._check_y_val(X_val, y_val)
        costs = np.r_[0.0, self.cost_curve(X_val)["feature"]]
        scores = np.array([self._score(y_val, proba, vote_scores, scoring) for proba, vote_scores
                           in [self._proba_and_scores(X_val, 0), *self._staged_outputs(X_val)]])
        return costs, scores

    def _prefix(self, n_stages):
        pruned = copy.copy(self)
        pruned.trees_ = self.trees_[:n_stages]
        for name in ("validation_cost_curve_", "validation_accuracy_curve_"):
            curve = getattr(self, name, None)
            setattr(pruned, name, None if curve is None else curve[:n_stages])
        return pruned

    def _score(self, y_val, proba, vote_scores, scoring):
        if scoring is None:
            return float(np.mean(self.classes_[np.argmax(vote_scores, axis=1)] == y_val))
        return float(scoring(y_val, proba))

    # -- model files ---------------------------------------------------------------------------
    def save(self, path):
        """Save to a versioned model file (no pickle); load with `msclassify.load_model`."""
        check_is_fitted(self, "trees_")
        params = estimator_params(self)
        sizes = [tree["feature"].size for tree in self.trees_]
        arrays = {name: (np.concatenate([tree[name] for tree in self.trees_]) if self.trees_ else
                         np.zeros((0, self.classes_.size) if name == "class_counts" else 0))
                  for name in _TREE_FIELDS}
        arrays.update(tree_sizes=np.array(sizes, dtype=np.int64), feature_costs=self.feature_costs_,
                      class_prior=self.class_prior_)
        meta = {"estimator_params": params, "classes": self.classes_.tolist(),
                "classes_dtype": self.classes_.dtype.str, "n_features": int(self.n_features_in_)}
        write_model(path, self._model_kind, meta, arrays)

    @classmethod
    def _from_model_file(cls, meta, arrays):
        params = meta.get("estimator_params")
        if not isinstance(params, dict):
            raise ModelFileError("estimator_params must be a JSON object")
        forest = cls(**params)
        forest.classes_ = classes = model_classes(meta)
        forest.n_features_in_ = n_features = model_number(meta, "n_features", integer=True,
                                                          low=1)
        forest.feature_costs_ = model_array(arrays, "feature_costs", shape=(n_features,), low=0)
        forest.class_prior_ = model_array(arrays, "class_prior", shape=(classes.size,), low=0)
        sizes = model_array(arrays, "tree_sizes", "int", low=1)
        total = int(sizes.sum())
        feature = model_array(arrays, "feature", "int", shape=(total,), low=-1,
                              high=n_features - 1)
        split = feature >= 0
        threshold = model_array(arrays, "threshold", shape=(total,), finite=False)
        if not np.all(np.isfinite(threshold[split])):
            raise ModelFileError("a split threshold is NaN or infinite")
        left = model_array(arrays, "left", "int", shape=(total,))
        right = model_array(arrays, "right", "int", shape=(total,))
        counts = model_array(arrays, "class_counts", ndim=2, shape=(total, classes.size), low=0)
        if np.any(counts[~split].sum(axis=1) <= 0):
            raise ModelFileError("a leaf holds no training examples (its class counts are 0)")
        node_arrays = {"feature": feature.astype(np.int32), "threshold": threshold,
                       "left": left.astype(np.int32), "right": right.astype(np.int32),
                       "class_counts": counts}
        bounds = np.r_[0, np.cumsum(sizes)]
        forest.trees_ = []
        for t, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
            tree = {name: np.ascontiguousarray(node_arrays[name][lo:hi]) for name in _TREE_FIELDS}
            at = np.flatnonzero(tree["feature"] >= 0)
            # children come after their parent: the walk in the prediction kernels ends
            for child in (tree["left"][at], tree["right"][at]):
                if np.any((child <= at) | (child >= hi - lo)):
                    raise ModelFileError(f"tree {t} has invalid node links")
            forest.trees_.append(tree)
        forest.validation_cost_curve_ = forest.validation_accuracy_curve_ = None
        return forest


class _CostTracker:
    """Which features each row has acquired so far, and what they cost."""

    def __init__(self, X, feature_costs):
        self.X = np.ascontiguousarray(X)
        self.feature_costs = feature_costs
        self.acquired = np.zeros(self.X.shape, dtype=np.bool_)
        self.cost = np.zeros(self.X.shape[0])
        self.n_acquired = np.zeros(self.X.shape[0], dtype=np.int64)

    def add(self, tree):
        _acquire_features(self.X, tree["feature"], tree["threshold"], tree["left"], tree["right"],
                          self.feature_costs, self.acquired, self.cost, self.n_acquired)
        return self.cost


def _row_blocks(n_rows):
    return [slice(start, min(start + _ROW_CHUNK, n_rows)) for start in range(0, n_rows, _ROW_CHUNK)]
