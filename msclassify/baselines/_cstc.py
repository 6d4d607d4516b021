"""CSTC: the cost-sensitive tree of classifiers of Xu, Kusner, Weinberger & Chen (ICML 2013).

The paper is "Cost-sensitive tree of classifiers" (ICML 2013); equation and
section numbers below are to it.

* Feature map (Sec. 3, "boosting trick"): gradient-boosted regression trees of
  limited depth are fitted with the squared loss by the CEGB core (cost-blind,
  ``cost_tradeoff=0``, breadth-first to ``weak_learner_depth``) and
  ``phi_t(x) = h_t(x)`` is the output of tree t (learning rate applied, so
  ``beta = 1`` reproduces the ensemble). ``F[a, t] = 1`` iff tree t splits on
  raw feature a, and every tree costs ``e_t = tree_cost`` to evaluate.
  ``feature_map="identity"`` uses ``phi(x) = x``, ``F = I``, ``e_t = 0`` (the
  synthetic experiment of Sec. 5.1).
* Model (Sec. 4, Fig. 1): a binary tree of classifier nodes ``v^k`` with weight
  vectors ``beta^k``, an unpenalised intercept ``b^k`` (the paper folds it into
  phi) and thresholds ``theta^k``. An input goes to the upper child iff
  ``phi(x)' beta^k + b^k > theta^k`` (hard traversal, used at test time); a
  missing child is a terminal element that returns its parent's prediction.
* Loss: the squared loss of the paper; `CSTCClassifier` regresses on targets
  -1/+1 and predicts the sign (binary only).
* Training minimises Eq. (5): the expected tree risk (6)
  ``1/n sum_i sum_k p_i^k l(phi_i' beta^k + b^k, y_i)`` over *all* nodes, with
  soft traversal ``p(upper | x, v^k) = sigmoid(s (phi' beta^k + b^k - theta^k))``,
  plus ``rho sum_k |beta^k|_1``, plus
  ``lambda sum_l p^l [sum_t e_t ||beta_t over pi^l||_2 + sum_a c_a ||beta_{F_a} over pi^l||_2]``,
  the mixed-norm relaxation (3) of the exact path cost; ``p^l`` is the mean
  probability of reaching terminal element l and the norms run over all
  classifiers on its path ``pi^l`` (both terminal elements of a node share the
  node's path, so their terms are merged).
* Routing slope ``s = routing_sharpness``: the paper's sigmoid has ``s = 1`` in
  score units. When the predictions of different input regions differ by less
  than a few units (always, with the classifier's -1/+1 targets) that sends
  many samples down both branches: the children learn from mixtures of regions
  and reject the expert features of their own region, which are noise for the
  others. Our default ``s = 20`` keeps the soft traversal close to the hard one
  used at test time; on the synthetic data of ``tests/test_cstc.py`` s = 1
  mixes the quadrants and s = 20 separates them. Choose ``s`` so that ``1 / s``
  is small against the gap between the predictions of different regions.
* Optimisation (Sec. 4.2): every square root and ``|.|`` is replaced by
  ``min_z (g / z + z) / 2`` (Lemma 1); cyclic block-coordinate descent then
  alternates L-BFGS over one node's ``(beta^k, b^k, theta^k)`` (the paper uses
  conjugate gradients) with the closed-form update ``z = sqrt(g)``. A weight
  whose magnitude falls below ``1e-6`` is set to zero and stays there (its
  auxiliary variable would otherwise make the quadratic bound infinite).
* Initialisation (Sec. 4.2): top-down, one depth at a time; each new node
  starts from its parent's weights with fresh auxiliary variables (``z = 1``),
  the parent's threshold is the weighted mean of its scores, and the new node is
  optimised as a leaf (a convex problem) before the whole tree is refined.
* Exact-cost pruning of weights (our addition, ``l0_pruning``): the relaxation
  charges a weight in proportion to its size while the real cost charges a
  weak learner and its features in full for any non-zero weight on a path, so
  the coordinate descent leaves small weights that buy expensive features for
  whole paths. Afterwards, weak learner t is removed from all paths through a
  node k (k's ancestors and subtree) whenever that does not increase Eq. (5)
  with the exact l0 path costs ``c^l`` of Sec. 4.1, trying the moves that remove
  the least ``sum |beta_t| std(phi_t)`` first; then the descent resumes.
* Tree pruning (Sec. 4.2): given validation data, bottom-up, a subtree is
  removed when the validation accuracy (mean squared error for the regressor)
  does not get worse.
* Fine-tuning, Eq. (8): every classifier that has a terminal child is refitted
  on its non-zero weights with the l1 penalty (exact, by L-BFGS-B on the
  positive and negative parts). The paper weights the samples by the soft
  ``p_i^k``; we use the samples that exit at that node under the hard (test-time)
  traversal, because the refit is meant to undo the relaxation's shrinkage on
  the predictions actually made, and with soft weights a few samples from other
  regions (where an expert feature is noise) pull the expert's weight back
  towards zero. The refitted weights are used for *predictions* only; routing
  keeps the weights of Eq. (5), so the paths and their costs do not change.

Prediction cost (the paper's model, the cost ``c^l`` of Sec. 4.1): a sample
exiting at terminal element l pays ``e_t`` once for every weak learner with a
non-zero weight in any classifier on ``pi^l`` (``evaluation``) and ``c_a`` once
for every raw feature used by any of those weak learners (``feature``). A tree
is charged all of its features, an upper bound of lazy acquisition along the
path taken inside it; evaluating the linear classifiers themselves is free.
Units: feature costs are in units of one weak-learner evaluation when
``tree_cost = 1``, as in the paper's Yahoo! experiment.

Training cost: every L-BFGS step evaluates all ``n`` samples on one node
(``O(n T)``); expect minutes for ``n`` in the tens of thousands and ``T = 100``.
"""

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from ..budget import PredictionCost
from ..cegb import Booster, train
from ..checks import as_seed, check_int, check_number, check_per_feature
from ..modelfile import (ModelFileError, estimator_params, model_array, model_classes,
                         model_number, write_model)

_ZERO = 1e-6        # weights below this magnitude are exactly zero from then on
_AUX_FLOOR = 1e-12  # floor of the auxiliary variables of Lemma 1 (never divide by 0)


def _squared_loss(score, y):
    """``(score - y)^2 / 2`` and its derivative in the score."""
    residual = score - y
    return 0.5 * residual * residual, residual


# -- the tree objective ------------------------------------------------------------------------
class _TreeObjective:
    """Eq. (5) over a heap-indexed tree (children of k: 2k+1 low, 2k+2 high).

    Holds the parameters (``coef`` (K, T), ``intercept``, ``threshold``), the
    layout (``children`` (K, 2), -1 = terminal element; ``active`` nodes) and the
    auxiliary variables of Lemma 1: ``zeta`` (K, T) for the l1 terms, and per
    node k with a terminal child ``u`` (K, T), ``w`` (K, d) for the evaluation-
    and feature-cost norms over the path to k.
    """

    def __init__(self, phi, y, tree_cost, feature_costs, uses, cost_tradeoff, l1, sharpness,
                 depth):
        self.phi = phi
        self.y = y
        self.loss = _squared_loss
        self.n, self.T = phi.shape
        self.e = tree_cost
        self.c = feature_costs
        self.uses = uses.astype(np.float64)            # F, shape (d, T)
        self.lam, self.rho, self.sharp = float(cost_tradeoff), float(l1), float(sharpness)
        self.with_eval = self.lam > 0 and np.any(self.e > 0)
        self.with_feat = self.lam > 0 and np.any(self.c > 0) and np.any(self.uses > 0)
        K = 2 ** depth - 1
        self.K = K
        self.coef = np.zeros((K, self.T))
        self.intercept = np.zeros(K)
        self.threshold = np.zeros(K)
        self.frozen = np.zeros((K, self.T), dtype=bool)
        self.children = np.full((K, 2), -1, dtype=np.int64)
        self.active = np.zeros(K, dtype=bool)
        self.zeta = np.ones((K, self.T))
        self.u = np.ones((K, self.T))
        self.w = np.ones((K, uses.shape[0]))
        self.parent = np.array([-1] + [(k - 1) // 2 for k in range(1, K)])
        self.ancestors = np.zeros((K, K), dtype=bool)     # [k, j]: j on the path root..k
        for k in range(K):
            j = k
            while j >= 0:
                self.ancestors[k, j] = True
                j = self.parent[j]
        self.scores = np.zeros((self.n, K))

    # -- layout --------------------------------------------------------------------------------
    def activate(self, k):
        self.active[k] = True
        if k > 0:
            parent = self.parent[k]
            self.children[parent, (k - 1) % 2] = k

    def nodes(self):
        return np.flatnonzero(self.active)

    def subtree(self, k):
        return np.flatnonzero(self.active & self.ancestors[:, k])

    # -- forward / backward --------------------------------------------------------------------
    def _forward(self):
        """Reach probabilities p (n, K), upper-branch probabilities q and terminal mass."""
        nodes = self.nodes()
        q = expit(self.sharp * (self.scores - self.threshold))
        p = np.zeros((self.n, self.K))
        terminal = np.zeros((self.n, self.K))
        p[:, 0] = 1.0
        for k in nodes:
            low, high = self.children[k]
            for child, branch in ((low, 1.0 - q[:, k]), (high, q[:, k])):
                if child >= 0:
                    p[:, child] = p[:, k] * branch
                else:
                    terminal[:, k] += p[:, k] * branch
        return nodes, p, q, terminal

    def _path_squares(self):
        """S[k, t] = sum over the path root..k of beta_t^2 (and R = S F' per raw feature)."""
        S = self.ancestors.astype(np.float64) @ (self.coef * self.coef)
        return S, (S @ self.uses.T if self.with_feat else None)

    def _path_costs(self, S, R, smoothed):
        """Relaxed cost of every path: with the auxiliary variables, or exact norms."""
        cost = np.zeros(self.K)
        if self.with_eval:
            cost += (0.5 * (S / self.u + self.u) if smoothed else np.sqrt(S)) @ self.e
        if self.with_feat:
            cost += (0.5 * (R / self.w + self.w) if smoothed else np.sqrt(R)) @ self.c
        return cost

    def value(self):
        """The relaxed objective (5) itself (auxiliary variables at their optimum)."""
        nodes, p, _, terminal = self._forward()
        risk = 0.0
        for k in nodes:
            risk += p[:, k] @ self.loss(self.scores[:, k], self.y)[0]
        S, R = self._path_squares()
        mass = terminal.mean(axis=0)
        return (risk / self.n + self.lam * mass @ self._path_costs(S, R, smoothed=False)
                + self.rho * np.abs(self.coef[nodes]).sum())

    def update_auxiliary(self):
        """Closed-form minimisation over the auxiliary variables (Lemma 1: z = sqrt(g))."""
        self.frozen |= np.abs(self.coef) < _ZERO
        self.coef[self.frozen] = 0.0
        S, R = self._path_squares()
        self.zeta = np.maximum(np.abs(self.coef), _AUX_FLOOR)
        self.u = np.maximum(np.sqrt(S), _AUX_FLOOR)
        if self.with_feat:
            self.w = np.maximum(np.sqrt(R), _AUX_FLOOR)

    def _block(self, x, k, block):
        """Smoothed objective and its gradient in node k's (beta_free, b, theta).

        Only node k's scores change, so only the reach probabilities of its
        subtree are recomputed; ``block`` caches everything else (`optimise_node`).
        """
        free, phi_free, subtree, p, q, terminal, losses, derivs, fixed_risk = block
        self.coef[k, free] = x[:-2]
        self.intercept[k], self.threshold[k] = x[-2], x[-1]
        self.scores[:, k] = phi_free @ x[:-2] + x[-2]
        losses[k], derivs[k] = self.loss(self.scores[:, k], self.y)
        q[:, k] = expit(self.sharp * (self.scores[:, k] - self.threshold[k]))
        risk = fixed_risk
        for j in subtree:                      # heap order: parents before children
            risk += p[:, j] @ losses[j]
            terminal[:, j] = 0.0
            for child, branch in zip(self.children[j], (1.0 - q[:, j], q[:, j])):
                if child >= 0:
                    p[:, child] = p[:, j] * branch
                else:
                    terminal[:, j] += p[:, j] * branch
        S, R = self._path_squares()
        path_cost = self._path_costs(S, R, smoothed=True)
        mass = terminal.mean(axis=0)
        beta = self.coef[k]
        value = (risk / self.n + self.lam * mass @ path_cost
                 + 0.5 * self.rho * np.sum(beta * beta / self.zeta[k]))
        # Backward: to_go[j] = d value / d p_j per sample (the subtree of j below it).
        exit_value = self.lam * path_cost / self.n
        to_go = {}
        for j in subtree[::-1]:
            branch_values = [to_go[c] if c >= 0 else exit_value[j] for c in self.children[j]]
            to_go[j] = (losses[j] / self.n + (1.0 - q[:, j]) * branch_values[0]
                        + q[:, j] * branch_values[1])
        low, high = self.children[k]
        diff = ((to_go[high] if high >= 0 else exit_value[k])
                - (to_go[low] if low >= 0 else exit_value[k]))
        slope = self.sharp * q[:, k] * (1.0 - q[:, k]) * diff * p[:, k]
        grad_score = p[:, k] * derivs[k] / self.n + slope
        penalty = self.rho / self.zeta[k]
        weight = mass[subtree]
        if self.with_eval:
            penalty = penalty + self.lam * (weight @ (self.e / self.u[subtree]))
        if self.with_feat:
            penalty = penalty + self.lam * ((weight @ (self.c / self.w[subtree])) @ self.uses)
        grad = np.empty_like(x)
        grad[:-2] = grad_score @ phi_free + (penalty * beta)[free]
        grad[-2] = grad_score.sum()
        grad[-1] = -slope.sum()
        return value, grad

    def prepare_block(self, k):
        """Cache for `_block`: node k's free weights and the state outside its subtree."""
        free = np.flatnonzero(~self.frozen[k])
        nodes, p, q, terminal = self._forward()
        subtree = self.subtree(k)
        losses, derivs = [None] * self.K, [None] * self.K
        for j in nodes:
            losses[j], derivs[j] = self.loss(self.scores[:, j], self.y)
        outside = np.setdiff1d(nodes, subtree)
        fixed_risk = sum(p[:, j] @ losses[j] for j in outside)
        return (free, np.ascontiguousarray(self.phi[:, free]), subtree, p, q, terminal, losses,
                derivs, fixed_risk)

    def optimise_node(self, k, max_iter):
        """One block step of the cyclic coordinate descent: L-BFGS over node k."""
        block = self.prepare_block(k)
        free = block[0]
        x0 = np.concatenate([self.coef[k, free], [self.intercept[k], self.threshold[k]]])
        result = minimize(self._block, x0, args=(k, block), jac=True, method="L-BFGS-B",
                          options={"maxiter": max_iter})
        self._block(result.x, k, block)   # leave the state at the optimum found

    def exact_value(self):
        """Eq. (5) with the exact (l0) path costs c^l of Sec. 4.1 instead of the relaxation."""
        nodes, p, _, terminal = self._forward()
        risk = sum(p[:, k] @ self.loss(self.scores[:, k], self.y)[0] for k in nodes)
        used = (self.ancestors.astype(np.float64) @ (self.coef != 0)) > 0       # (K, T)
        cost = used @ self.e + ((used @ self.uses.T) > 0) @ self.c
        return (risk / self.n + self.lam * terminal.mean(axis=0) @ cost
                + self.rho * np.abs(self.coef[nodes]).sum())

    def sparsify(self):
        """Remove weak learners from paths when that does not increase `exact_value`.

        The relaxation charges a weight in proportion to its size while the real
        cost charges the whole weak learner and its features for any non-zero
        weight on a path, so the coordinate descent leaves small weights that buy
        expensive features for entire paths. A move zeroes weak learner t on every
        classifier whose path passes through node k (k's ancestors and subtree),
        which frees those paths of t; moves are tried from the smallest removed
        contribution ``sum |beta_t| * std(phi_t)`` up. Returns whether any move
        was accepted.
        """
        if self.lam == 0:
            return False
        current = self.exact_value()
        spread = self.phi.std(axis=0)
        nodes = self.nodes()
        moves = []
        for k in nodes:
            members = nodes[self.ancestors[k, nodes] | self.ancestors[nodes, k]]
            for t in np.flatnonzero(np.any(self.coef[members] != 0, axis=0)):
                moves.append((np.abs(self.coef[members, t]).sum() * spread[t], t, members))
        changed = False
        for _, t, members in sorted(moves, key=lambda move: move[0]):
            members = members[self.coef[members, t] != 0]
            if members.size == 0:
                continue
            weights = self.coef[members, t].copy()
            self.coef[members, t] = 0.0
            self.scores[:, members] -= self.phi[:, [t]] * weights
            trial = self.exact_value()
            if trial <= current:
                current, changed = trial, True
                self.frozen[members, t] = True
            else:
                self.coef[members, t] = weights
                self.scores[:, members] += self.phi[:, [t]] * weights
        if changed:
            self.update_auxiliary()
        return changed

    def refresh_scores(self):
        self.scores = self.phi @ self.coef.T + self.intercept


def _fit_sparse_linear(phi, y, weights, support, rho, coef, intercept, max_iter):
    """Eq. (8): ``min sum_i w_i l(phi_i' beta + b, y_i) / n + rho |beta|_1``, beta zero off support.

    The l1 term is exact: beta = beta_plus - beta_minus with both >= 0 (L-BFGS-B bounds).
    """
    sub = phi[:, support]
    m = support.size
    n = phi.shape[0]

    def objective(x):
        beta = x[:m] - x[m:2 * m]
        score = sub @ beta + x[-1]
        value, deriv = _squared_loss(score, y)
        g = weights * deriv / n
        grad_beta = sub.T @ g
        return (weights @ value / n + rho * x[:2 * m].sum(),
                np.concatenate([grad_beta + rho, -grad_beta + rho, [g.sum()]]))

    start = coef[support]
    x0 = np.concatenate([np.maximum(start, 0), np.maximum(-start, 0), [intercept]])
    bounds = [(0, None)] * (2 * m) + [(None, None)]
    result = minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                      options={"maxiter": max_iter})
    out = np.zeros_like(coef)
    out[support] = result.x[:m] - result.x[m:2 * m]
    return out, float(result.x[-1])


# -- estimators --------------------------------------------------------------------------------
class _CSTCBase(BaseEstimator):
    """Shared fitting, traversal and cost accounting of the CSTC estimators."""

    def __init__(self, cost_tradeoff=0.01, l1_regularization=1e-3, max_depth=3, feature_costs=None,
                 tree_cost=1.0, feature_map="trees", n_weak_learners=100, weak_learner_depth=3,
                 weak_learner_learning_rate=0.1, routing_sharpness=20.0, l0_pruning=True,
                 fine_tune=True, max_sweeps=30, max_node_iter=20, tol=1e-4, random_state=None):
        self.cost_tradeoff = cost_tradeoff
        self.l1_regularization = l1_regularization
        self.max_depth = max_depth
        self.feature_costs = feature_costs
        self.tree_cost = tree_cost
        self.feature_map = feature_map
        self.n_weak_learners = n_weak_learners
        self.weak_learner_depth = weak_learner_depth
        self.weak_learner_learning_rate = weak_learner_learning_rate
        self.routing_sharpness = routing_sharpness
        self.l0_pruning = l0_pruning
        self.fine_tune = fine_tune
        self.max_sweeps = max_sweeps
        self.max_node_iter = max_node_iter
        self.tol = tol
        self.random_state = random_state

    # -- parameter checks ----------------------------------------------------------------------
    def _check_params(self):
        for name in ("cost_tradeoff", "l1_regularization", "tree_cost", "tol"):
            check_number(getattr(self, name), name)
        for name in ("routing_sharpness", "weak_learner_learning_rate"):
            check_number(getattr(self, name), name, strict=True)
        for name in ("max_depth", "n_weak_learners", "weak_learner_depth", "max_sweeps",
                     "max_node_iter"):
            check_int(getattr(self, name), name)
        if self.max_depth > 8:
            raise ValueError(f"max_depth={self.max_depth} means {2 ** self.max_depth - 1} "
                             "classifier nodes; use at most 8 (the paper uses up to 4)")
        if self.feature_map not in ("trees", "identity"):
            raise ValueError("feature_map must be 'trees' (boosted-tree outputs, Sec. 3) or "
                             f"'identity' (phi(x) = x, Sec. 5.1), got {self.feature_map!r}")

    def _check_validation(self, X_val, y_val):
        if (X_val is None) != (y_val is None):
            raise ValueError("give both X_val and y_val (for validation pruning) or neither")
        if X_val is None:
            return None, None
        X_val = validate_data(self, X_val, reset=False, dtype=(np.float64, np.float32))
        y_val = np.asarray(y_val)
        if y_val.shape != (X_val.shape[0],):
            raise ValueError(f"y_val must have one value per row of X_val ({X_val.shape[0]}), "
                             f"got shape {y_val.shape}")
        return X_val, y_val

    # -- fitting -------------------------------------------------------------------------------
    def _fit(self, X, target, X_val, target_val):
        self._check_params()
        self.feature_costs_ = check_per_feature("feature_costs", self.feature_costs, X.shape[1],
                                                1.0)
        phi = self._fit_feature_map(X, target)
        problem = _TreeObjective(phi, target, self.weak_learner_costs_, self.feature_costs_,
                                 self.weak_learner_features_, self.cost_tradeoff,
                                 self.l1_regularization, self.routing_sharpness, self.max_depth)
        problem.intercept[0] = target.mean()
        problem.refresh_scores()
        # The per-node problems are matrix-vector products on a few hundred columns, where
        # BLAS threads mostly spin: one thread was 5x faster on 2 cores (2000 x 6 data).
        with threadpool_limits(1, user_api="blas"):
            self._initialise_top_down(problem)
            curve = [self._coordinate_descent(problem, problem.nodes())]
            for _ in range(3 if self.l0_pruning else 0):
                if not problem.sparsify():
                    break
                curve.append(self._coordinate_descent(problem, problem.nodes()))
            self.objective_curve_ = np.concatenate(curve)
            self._store(problem)
            if X_val is not None:
                self._prune(X_val, target_val)
            self.prediction_coef_ = self.coef_.copy()
            self.prediction_intercept_ = self.intercept_.copy()
            if self.fine_tune:
                self._fine_tune(phi, target)
        return self

    def _fit_feature_map(self, X, target):
        """Build phi on the training data and set F (``weak_learner_features_``) and e."""
        n_features = X.shape[1]
        if self.feature_map == "identity":
            self.booster_ = None
            self.weak_learner_features_ = np.eye(n_features, dtype=bool)
            self.weak_learner_costs_ = np.zeros(n_features)
            return np.ascontiguousarray(X, dtype=np.float64)
        depth = self.weak_learner_depth
        seed = as_seed(self.random_state)
        params = {"n_estimators": self.n_weak_learners, "max_depth": depth,
                  "learning_rate": self.weak_learner_learning_rate, "max_leaves": 2 ** depth,
                  "growth": "breadth_first", "min_samples_leaf": 1, "random_state": seed}
        self.booster_ = train(X, target, "regression", params)
        uses = np.zeros((n_features, self.booster_.n_trees), dtype=bool)
        for t, tree in enumerate(self.booster_.trees):
            uses[tree["feature"][tree["feature"] >= 0], t] = True
        self.weak_learner_features_ = uses
        self.weak_learner_costs_ = np.full(self.booster_.n_trees, float(self.tree_cost))
        return self._phi(X)

    def _phi(self, X):
        if self.booster_ is None:
            return np.ascontiguousarray(X, dtype=np.float64)
        return self.booster_.tree_outputs(X)

    def _initialise_top_down(self, problem):
        """Sec. 4.2: optimise depth by depth, each new node as if it were a leaf."""
        for depth in range(self.max_depth):
            new = np.arange(2 ** depth - 1, 2 ** (depth + 1) - 1)
            if depth > 0:
                _, reach, _, _ = problem._forward()
                for parent in np.unique(problem.parent[new]):
                    problem.threshold[parent] = np.average(problem.scores[:, parent],
                                                           weights=reach[:, parent])
                for k in new:
                    parent = problem.parent[k]
                    problem.coef[k] = problem.coef[parent]
                    problem.intercept[k] = problem.intercept[parent]
                    problem.threshold[k] = problem.threshold[parent]
                    problem.scores[:, k] = problem.scores[:, parent]
                    problem.frozen[k] = False
                    # Any z > 0 bounds the objective from above (Lemma 1); z = 1 keeps the
                    # parent's zeros from being inherited as absorbing states.
                    problem.zeta[k] = 1.0
                    problem.u[k] = 1.0
                    problem.w[k] = 1.0
            for k in new:
                problem.activate(k)
            self._coordinate_descent(problem, new)

    def _coordinate_descent(self, problem, nodes):
        """Cyclic block-coordinate descent over ``nodes`` with Lemma-1 updates."""
        curve = [problem.value()]
        for sweep in range(self.max_sweeps):
            for k in nodes:
                problem.optimise_node(k, self.max_node_iter)
                problem.update_auxiliary()
            curve.append(problem.value())
            # The first sweep may start from loose auxiliary variables (new nodes); after
            # it each sweep is a majorise-minimise step and cannot increase Eq. (5).
            if sweep > 0 and curve[-2] - curve[-1] <= self.tol * max(abs(curve[-2]), 1e-12):
                break
        return np.array(curve)

    def _store(self, problem):
        keep = problem.nodes()
        index = np.full(problem.K, -1, dtype=np.int64)
        index[keep] = np.arange(keep.size)
        self.coef_ = problem.coef[keep].copy()
        self.intercept_ = problem.intercept[keep].copy()
        self.threshold_ = problem.threshold[keep].copy()
        children = problem.children[keep]
        self.children_ = np.where(children >= 0, index[np.maximum(children, 0)], -1)

    def _prune(self, X_val, target_val):
        """Sec. 4.2: remove subtrees whose removal does not lower the validation score."""
        phi = self._phi(X_val)
        best = self._validation_score(phi, target_val)
        changed = True
        while changed:
            changed = False
            for node in range(self.children_.shape[0] - 1, -1, -1):
                for side in (0, 1):
                    child = self.children_[node, side]
                    if child < 0:
                        continue
                    self.children_[node, side] = -1
                    score = self._validation_score(phi, target_val)
                    if score >= best:
                        best, changed = score, True
                    else:
                        self.children_[node, side] = child
        self._drop_unreachable()

    def _drop_unreachable(self):
        reachable = np.zeros(self.children_.shape[0], dtype=bool)
        stack = [0]
        while stack:
            k = stack.pop()
            reachable[k] = True
            stack.extend(c for c in self.children_[k] if c >= 0)
        keep = np.flatnonzero(reachable)
        index = np.full(reachable.size, -1, dtype=np.int64)
        index[keep] = np.arange(keep.size)
        children = self.children_[keep]
        self.children_ = np.where(children >= 0, index[np.maximum(children, 0)], -1)
        self.coef_, self.intercept_ = self.coef_[keep], self.intercept_[keep]
        self.threshold_ = self.threshold_[keep]

    def _validation_score(self, phi, target):
        raw = self._raw_from_phi(phi, self.coef_, self.intercept_)
        return -float(np.mean((raw - target) ** 2))

    def _fine_tune(self, phi, target):
        """Eq. (8) for every node with a terminal child, on the samples that exit there."""
        exit_node = self._exit_nodes(phi)
        for k in range(self.children_.shape[0]):
            exits = (exit_node == k).astype(np.float64)
            if not exits.any():
                continue
            support = np.flatnonzero(self.coef_[k] != 0)
            self.prediction_coef_[k], self.prediction_intercept_[k] = _fit_sparse_linear(
                phi, target, exits, support, self.l1_regularization, self.coef_[k],
                self.intercept_[k], 10 * self.max_node_iter)

    # -- traversal and costs -------------------------------------------------------------------
    def _check_X(self, X):
        check_is_fitted(self, "coef_")
        return validate_data(self, X, reset=False, dtype=(np.float64, np.float32))

    def _exit_nodes(self, phi):
        """Hard traversal: the classifier node whose terminal element each sample reaches."""
        node = np.zeros(phi.shape[0], dtype=np.int64)
        open_rows = np.arange(phi.shape[0])
        while open_rows.size:
            k = node[open_rows]
            score = np.einsum("ij,ij->i", phi[open_rows], self.coef_[k]) + self.intercept_[k]
            child = self.children_[k, (score > self.threshold_[k]).astype(np.int64)]
            moving = child >= 0
            node[open_rows[moving]] = child[moving]
            open_rows = open_rows[moving]
        return node

    def _raw_from_phi(self, phi, coef=None, intercept=None):
        coef = self.prediction_coef_ if coef is None else coef
        intercept = self.prediction_intercept_ if intercept is None else intercept
        node = self._exit_nodes(phi)
        return np.einsum("ij,ij->i", phi, coef[node]) + intercept[node]

    def apply(self, X):
        """Index of the classifier node at whose terminal element each sample exits."""
        return self._exit_nodes(self._phi(self._check_X(X)))

    def path_nodes(self, node):
        """Classifier nodes from the root to ``node`` (the path ``pi`` of its terminal elements)."""
        check_is_fitted(self, "coef_")
        path = [int(node)]
        while path[-1] != 0:
            path.append(int(np.flatnonzero(np.any(self.children_ == path[-1], axis=1))[0]))
        return path[::-1]

    def path_weak_learners(self, node):
        """Weak learners (columns of phi) evaluated by a sample exiting at ``node``."""
        return np.flatnonzero(np.any(self.coef_[self.path_nodes(node)] != 0, axis=0))

    def path_features(self, node):
        """Raw features extracted by a sample exiting at ``node``."""
        learners = self.path_weak_learners(node)
        return np.flatnonzero(self.weak_learner_features_[:, learners].any(axis=1))

    def prediction_cost(self, X):
        """Per-sample test-time cost under the paper's cost model (see the module docstring).

        Returns
        -------
        PredictionCost
            ``evaluation``: sum of ``e_t`` over the weak learners evaluated on each
            sample's path; ``feature``: sum of the costs of the raw features those
            weak learners use; ``batch``: 0.0 (CSTC has no per-batch cost).
        """
        node = self.apply(X)
        n_nodes = self.children_.shape[0]
        evaluation = np.array([self.weak_learner_costs_[self.path_weak_learners(k)].sum()
                               for k in range(n_nodes)])
        feature = np.array([self.feature_costs_[self.path_features(k)].sum()
                            for k in range(n_nodes)])
        return PredictionCost(evaluation[node], feature[node], 0.0)

    def features_used(self):
        """Raw features used anywhere in the tree."""
        check_is_fitted(self, "coef_")
        learners = np.flatnonzero(np.any(self.coef_ != 0, axis=0))
        return np.flatnonzero(self.weak_learner_features_[:, learners].any(axis=1))

    @property
    def n_nodes_(self):
        """Number of classifier nodes (after pruning)."""
        check_is_fitted(self, "coef_")
        return self.children_.shape[0]

    # -- model files ---------------------------------------------------------------------------
    def save(self, path):
        """Save to a versioned model file (no pickle); load with `msclassify.load_model`."""
        check_is_fitted(self, "coef_")
        params = estimator_params(self)
        arrays = {name: getattr(self, name + "_") for name in _FITTED_ARRAYS}
        meta = {"estimator_params": params, "n_features": int(self.n_features_in_),
                **self._extra_meta()}
        if self.booster_ is not None:
            meta["feature_map"], booster_arrays = self.booster_.to_model_file()
            arrays.update({"phi_" + name: array for name, array in booster_arrays.items()})
        write_model(path, self._model_kind, meta, arrays)

    def _extra_meta(self):
        return {}

    @classmethod
    def _from_model_file(cls, meta, arrays):
        params = meta.get("estimator_params")
        if not isinstance(params, dict):
            raise ModelFileError("estimator_params must be a JSON object")
        model = cls(**params)
        model.n_features_in_ = model_number(meta, "n_features", integer=True, low=1)
        for name in _FITTED_ARRAYS:
            kind, ndim = _FITTED_ARRAY_KINDS.get(name, ("float", 1))
            setattr(model, name + "_", model_array(arrays, name, kind, ndim,
                                                   low=0 if name.endswith("costs") else None))
        model.weak_learner_features_ = model.weak_learner_features_.astype(bool)
        model.booster_ = None
        if "feature_map" in meta:
            model.booster_ = Booster.from_model_file(
                meta["feature_map"], {name[4:]: array for name, array in arrays.items()
                                      if name.startswith("phi_")}, ("regression",))
        _check_tree(model)
        model._restore_extra(meta)
        return model

    def _restore_extra(self, meta):
        pass


# Fitted arrays a model file holds (each as the attribute of that name plus "_").
_FITTED_ARRAYS = ("coef", "intercept", "threshold", "children", "prediction_coef",
                  "prediction_intercept", "weak_learner_features", "weak_learner_costs",
                  "feature_costs")
# (kind, ndim) of the fitted arrays that are not 1-D floats (msclassify.modelfile.model_array)
_FITTED_ARRAY_KINDS = {"coef": ("float", 2), "prediction_coef": ("float", 2),
                       "children": ("int", 2), "weak_learner_features": ("bool", 2)}


def _check_tree(model):
    """ModelFileError unless a loaded tree's arrays agree and its links cannot loop."""
    n_nodes, n_learners = model.coef_.shape
    n_phi = model.n_features_in_ if model.booster_ is None else model.booster_.n_trees
    nodes = np.arange(n_nodes)[:, None]
    children = model.children_
    consistent = (
        n_nodes >= 1 and n_learners == n_phi
        and (model.booster_ is None or model.booster_.n_features == model.n_features_in_)
        and model.children_.shape == (n_nodes, 2)
        and all(getattr(model, name + "_").shape == (n_nodes,)
                for name in ("intercept", "threshold", "prediction_intercept"))
        and model.prediction_coef_.shape == (n_nodes, n_learners)
        and model.weak_learner_features_.shape == (model.n_features_in_, n_learners)
        and model.weak_learner_costs_.shape == (n_learners,)
        and model.feature_costs_.shape == (model.n_features_in_,)
        # children come after their parent: traversal always ends
        and np.all((children == -1) | ((children > nodes) & (children < n_nodes))))
    if not consistent:
        raise ModelFileError("the CSTC tree arrays do not fit together")


_SHARED_DOC = """
    Parameters
    ----------
    cost_tradeoff : float
        lambda of Eq. (5): weight of the relaxed expected test-time cost, in
        units of the mean squared loss per unit of cost.
    l1_regularization : float
        rho of Eq. (5): l1 penalty on every classifier's weights.
    max_depth : int
        Levels of classifier nodes: 1 is the single cost-sensitive linear model
        of Eq. (4); 3 is the tree of Fig. 2 (7 nodes).
    feature_costs : array-like of shape (n_features,), optional
        Extraction cost ``c_a`` of each raw feature (default 1).
    tree_cost : float
        Evaluation cost ``e_t`` of each weak learner (``feature_map="trees"``).
    feature_map : {"trees", "identity"}
        phi = the outputs of boosted regression trees (Sec. 3) or the raw
        features (Sec. 5.1).
    n_weak_learners, weak_learner_depth, weak_learner_learning_rate
        The squared-loss boosted trees of ``feature_map="trees"``.
    routing_sharpness : float
        Slope s of the soft traversal ``sigmoid(s (score - theta))`` used in
        training (the paper: 1; see the module docstring for our default).
    l0_pruning : bool
        Remove weak learners from paths by the exact cost (module docstring);
        False is the paper's procedure.
    fine_tune : bool
        Refit the predicting classifiers on their non-zero weights (Eq. 8).
    max_sweeps, max_node_iter, tol
        Cyclic coordinate descent: at most ``max_sweeps`` sweeps over the nodes
        and ``max_node_iter`` L-BFGS iterations per node; stops when a sweep
        lowers Eq. (5) by less than ``tol`` (relative).
    random_state : int, RandomState or None
        Seeds the binning of the boosted feature map.

    Attributes
    ----------
    coef_, intercept_, threshold_ : ndarray
        Per classifier node (after pruning): the weights of Eq. (5), intercept
        and threshold. A sample goes to ``children_[k, 1]`` iff
        ``phi(x) @ coef_[k] + intercept_[k] > threshold_[k]``, else to
        ``children_[k, 0]``.
    children_ : ndarray of shape (n_nodes, 2)
        Child node indices; -1 is a terminal element (predict with node k).
    prediction_coef_, prediction_intercept_ : ndarray
        Weights used for predictions (fine-tuned, Eq. 8; equal to ``coef_``
        without fine-tuning). Their non-zeros are a subset of ``coef_``'s.
    booster_ : Booster or None
        The boosted trees of the feature map (``tree_outputs`` is phi).
    weak_learner_features_ : ndarray of bool, shape (n_features, n_weak_learners)
        F of the paper.
    weak_learner_costs_ : ndarray
        e_t of every weak learner.
    feature_costs_ : ndarray
    objective_curve_ : ndarray
        Eq. (5) after each sweep of the final coordinate descent(s).
"""


class CSTCClassifier(ClassifierMixin, _CSTCBase):
    __doc__ = """Cost-sensitive tree of classifiers (CSTC; Xu, Kusner, Weinberger & Chen 2013).

    A binary tree of sparse linear classifiers over a boosted-tree feature map;
    each sample follows one path and pays only for the weak learners and raw
    features used along it. Binary: the squared loss of the paper on targets
    -1 (``classes_[0]``) and +1 (``classes_[1]``). See the module docstring for
    the objective, the optimisation and the cost model.
    """ + _SHARED_DOC + """    classes_ : ndarray of shape (2,)

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify.baselines import CSTCClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); y = (X[:, 0] > 0).astype(int)
    >>> X[:, 2] = X[:, 0] + 0.01 * rng.normal(size=300)     # an expensive near-copy
    >>> clf = CSTCClassifier(max_depth=1, feature_map="identity", cost_tradeoff=0.01,
    ...                      feature_costs=[1, 1, 20]).fit(X, y)
    >>> clf.features_used().tolist()
    [0]
    """

    _model_kind = "cstc_classifier"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _extra_meta(self):
        return {"classes": self.classes_.tolist(), "classes_dtype": self.classes_.dtype.str}

    def _restore_extra(self, meta):
        self.classes_ = model_classes(meta, 2)

    def fit(self, X, y, X_val=None, y_val=None):
        """Fit on ``X`` (n, d) and binary labels ``y``; ``X_val, y_val`` enable tree pruning."""
        X, y = validate_data(self, X, y, dtype=(np.float64, np.float32))
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) != 2:
            raise ValueError(f"Only binary classification is supported (as in the paper); y has "
                             f"{len(self.classes_)} class(es). Wrap CSTCClassifier in sklearn's "
                             "OneVsRestClassifier for more classes.")
        X_val, y_val = self._check_validation(X_val, y_val)
        if y_val is not None:
            unknown = ~np.isin(y_val, self.classes_)
            if unknown.any():
                raise ValueError(f"y_val has label(s) {np.unique(y_val[unknown]).tolist()} not "
                                 f"in y's classes {self.classes_.tolist()}")
            y_val = 2.0 * np.searchsorted(self.classes_, y_val) - 1.0
        return self._fit(X, 2.0 * encoded - 1.0, X_val, y_val)

    def _validation_score(self, phi, target):
        raw = self._raw_from_phi(phi, self.coef_, self.intercept_)
        return float(np.mean((raw > 0) == (target > 0)))

    def decision_function(self, X):
        """Score of the classifier each sample exits at (> 0 means ``classes_[1]``)."""
        return self._raw_from_phi(self._phi(self._check_X(X)))

    def predict_proba(self, X):
        """``clip((score + 1) / 2, 0, 1)``; the squared-loss score is not calibrated."""
        p = np.clip(0.5 * (self.decision_function(X) + 1.0), 0.0, 1.0)
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        score = self.decision_function(X)
        return self.classes_[(score > 0).astype(np.intp)]


class CSTCRegressor(RegressorMixin, _CSTCBase):
    __doc__ = """Cost-sensitive tree of regressors with the squared loss (the paper's own setting).

    Used for the synthetic regression data of Sec. 5.1 and for relevance
    regression (Yahoo! LTR, Sec. 5.2). See the module docstring.
    """ + _SHARED_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from msclassify.baselines import CSTCRegressor
    >>> X = np.linspace(-1, 1, 200)[:, None]; y = 3 * X[:, 0]
    >>> reg = CSTCRegressor(max_depth=1, feature_map="identity", cost_tradeoff=0.0,
    ...                     l1_regularization=0.0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.99)
    True
    """

    _model_kind = "cstc_regressor"

    def fit(self, X, y, X_val=None, y_val=None):
        """Fit on ``X`` (n, d) and real targets ``y``; ``X_val, y_val`` enable tree pruning."""
        X, y = validate_data(self, X, y, dtype=(np.float64, np.float32), y_numeric=True)
        X_val, y_val = self._check_validation(X_val, y_val)
        if y_val is not None:
            y_val = y_val.astype(np.float64)
        return self._fit(X, np.asarray(y, dtype=np.float64), X_val, y_val)

    def predict(self, X):
        return self._raw_from_phi(self._phi(self._check_X(X)))
