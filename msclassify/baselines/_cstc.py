"""CSTC: the cost-sensitive tree of classifiers of Xu, Kusner, Weinberger & Chen (ICML 2013).

The paper is ``shared/papers/cstc-xu-2013.txt``; equation and section numbers
below are to it.

* Feature map (Sec. 3, "boosting trick"): gradient-boosted regression trees of
  limited depth are fitted with the squared loss by the CEGB core (cost-blind,
  ``cost_tradeoff=0``, breadth-first) and ``phi_t(x) = h_t(x)`` is the output of
  tree t (learning rate applied, so ``beta = 1`` reproduces the ensemble).
  ``F[a, t] = 1`` iff tree t splits on raw feature a; ``e_t = tree_cost``.
  ``feature_map="identity"`` uses ``phi(x) = x``, ``F = I``, ``e_t = 0`` (the
  synthetic experiment of Sec. 5.1).
* Model (Sec. 4, Fig. 1): a binary tree of classifier nodes ``v^k`` with weight
  vectors ``beta^k`` (plus an unpenalised intercept ``b^k``, which the paper
  folds into phi) and thresholds ``theta^k``. An input goes to the upper child
  iff ``phi(x)' beta^k + b^k > theta^k`` (hard traversal, used at test time); a
  missing child is a terminal element that returns its parent's prediction.
* Training minimises Eq. (5): the expected tree risk (6)
  ``1/n sum_i sum_k p_i^k l(phi_i' beta^k, y_i)`` with soft traversal
  ``p(upper | x, v^k) = sigmoid(s * (phi' beta^k + b^k - theta^k))`` (``s =
  routing_sharpness``, 1 in the paper), plus ``rho * sum_k |beta^k|_1``, plus
  ``lambda * sum_l p^l [sum_t e_t ||beta_t^{pi_l}||_2 + sum_a c_a ||beta_{F_a}^{pi_l}||_2]``,
  the mixed-norm relaxation (3) of the exact path cost, where ``p^l`` is the mean
  probability of reaching terminal element l and the norms run over all
  classifiers on its path ``pi^l``. Both terminal elements of a node share the
  node's path, so their terms are merged.
* Optimisation (Sec. 4.2): every square root and ``|.|`` is replaced by
  ``min_z (g / z + z) / 2`` (Lemma 1); cyclic block-coordinate descent then
  alternates L-BFGS over one node's ``(beta^k, b^k, theta^k)`` (the paper uses
  conjugate gradients) with the closed-form update ``z = sqrt(g)``. A weight
  whose magnitude falls below ``1e-6`` is set to zero and stays there (its
  auxiliary variable would otherwise make the quadratic bound infinite).
* Initialisation (Sec. 4.2): top-down, one depth at a time; each new node
  starts from its parent's weights with fresh auxiliary variables, the parent's
  threshold is the weighted median of its scores, and the new node is optimised
  as a leaf (a convex problem) before the whole tree is refined jointly.
* Pruning (Sec. 4.2): with validation data, bottom-up, a subtree is removed
  when the validation accuracy (R^2 for the regressor) does not drop.
* Fine-tuning, Eq. (8): every classifier that has a terminal child is refitted
  on its non-zero weights with ``l1`` regularisation, its samples weighted by
  the probability of reaching its terminal elements (``p_i^k`` for a leaf
  classifier, as in Eq. (8)). The refitted weights are used for *predictions*
  only; routing keeps the weights of Eq. (5), so the paths and costs do not
  change.

Prediction cost (the paper's model, the cost ``c^l`` of Sec. 4.1): a sample
that exits at terminal element l pays ``e_t`` once for every weak learner with
a non-zero weight in any classifier on ``pi^l`` (``evaluation``) and ``c_a``
once for every raw feature used by any of those weak learners (``feature``).
Evaluating a tree is charged all of its features, an upper bound of lazy
acquisition along the path taken inside the tree; evaluating the linear
classifiers themselves is free. Weak learners not selected anywhere are never
evaluated.
"""

from numbers import Integral, Real

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..cegb import PredictionCost, train
from ..cegb._params import _per_feature

_ZERO = 1e-6        # weights below this magnitude are exactly zero from then on
_AUX_FLOOR = 1e-12  # floor of the auxiliary variables of Lemma 1 (never divide by 0)


# -- losses ------------------------------------------------------------------------------------
def _logistic(score, y):
    """Logistic loss on y in {0, 1} and its derivative in the score."""
    return np.logaddexp(0.0, score) - y * score, expit(score) - y


def _squared(score, y):
    residual = score - y
    return 0.5 * residual * residual, residual


_LOSSES = {"logistic": _logistic, "squared": _squared}


# -- the tree objective ------------------------------------------------------------------------
class _TreeObjective:
    """Eq. (5) over a heap-indexed tree (children of k: 2k+1 low, 2k+2 high).

    Holds the parameters (``coef`` (K, T), ``intercept``, ``threshold``), the
    layout (``children`` (K, 2), -1 = terminal element; ``active`` nodes) and the
    auxiliary variables of Lemma 1: ``zeta`` (K, T) for the l1 terms, and per
    node k with a terminal child ``u`` (K, T), ``w`` (K, d) for the evaluation-
    and feature-cost norms over the path to k.
    """

    def __init__(self, phi, y, loss, tree_cost, feature_costs, uses, cost_tradeoff, l1,
                 sharpness, depth):
        self.phi = phi
        self.y = y
        self.loss = _LOSSES[loss]
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

    def _block(self, x, k, free):
        """Smoothed objective and its gradient in node k's (beta_free, b, theta)."""
        self.coef[k, free] = x[:-2]
        self.intercept[k], self.threshold[k] = x[-2], x[-1]
        self.scores[:, k] = self.phi[:, free] @ x[:-2] + x[-2]
        nodes, p, q, terminal = self._forward()
        S, R = self._path_squares()
        path_cost = self._path_costs(S, R, smoothed=True)
        losses, derivs = self._node_losses
        losses[k], derivs[k] = self.loss(self.scores[:, k], self.y)
        risk = sum(p[:, j] @ losses[j] for j in nodes)
        mass = terminal.mean(axis=0)
        beta = self.coef[k]
        value = (risk / self.n + self.lam * mass @ path_cost
                 + 0.5 * self.rho * np.sum(beta * beta / self.zeta[k]))
        # Backward: to_go[j] = d value / d p_j per sample (risk of the subtree below j).
        exit_value = self.lam * path_cost / self.n
        to_go = {}
        for j in nodes[::-1]:
            if j != k and not self.ancestors[j, k]:
                continue
            branch_values = [to_go[c] if c >= 0 else exit_value[j] for c in self.children[j]]
            to_go[j] = (losses[j] / self.n + (1.0 - q[:, j]) * branch_values[0]
                        + q[:, j] * branch_values[1])
        low, high = self.children[k]
        diff = ((to_go[high] if high >= 0 else exit_value[k])
                - (to_go[low] if low >= 0 else exit_value[k]))
        slope = self.sharp * q[:, k] * (1.0 - q[:, k]) * diff * p[:, k]
        grad_score = p[:, k] * derivs[k] / self.n + slope
        penalty = self.rho / self.zeta[k]
        below = self.subtree(k)
        weight = mass[below]
        if self.with_eval:
            penalty = penalty + self.lam * (weight @ (self.e / self.u[below]))
        if self.with_feat:
            penalty = penalty + self.lam * ((weight @ (self.c / self.w[below])) @ self.uses)
        grad = np.empty_like(x)
        grad[:-2] = self.phi[:, free].T @ grad_score + (penalty * beta)[free]
        grad[-2] = grad_score.sum()
        grad[-1] = -slope.sum()
        return value, grad

    def optimise_node(self, k, max_iter):
        """One block step of the cyclic coordinate descent: L-BFGS over node k."""
        free = np.flatnonzero(~self.frozen[k])
        # Only node k's scores change inside the block: cache the other nodes' losses.
        losses = [self.loss(self.scores[:, j], self.y) for j in range(self.K)]
        self._node_losses = ([v for v, _ in losses], [d for _, d in losses])
        x0 = np.concatenate([self.coef[k, free], [self.intercept[k], self.threshold[k]]])
        result = minimize(self._block, x0, args=(k, free), jac=True, method="L-BFGS-B",
                          options={"maxiter": max_iter})
        self._block(result.x, k, free)   # leave the state at the optimum found

    def sparsify(self):
        """Zero every weight whose removal does not increase the relaxed objective (5).

        Lemma 1 drives unneeded weights to zero only geometrically; a weight of
        1e-3 would still buy its feature on every path. Candidates are tried from
        the smallest magnitude up. Returns whether any weight was zeroed.
        """
        current = self.value()
        changed = False
        for k in self.nodes():
            for t in np.flatnonzero(self.coef[k])[np.argsort(np.abs(self.coef[k][self.coef[k] != 0]))]:
                weight = self.coef[k, t]
                self.coef[k, t] = 0.0
                self.scores[:, k] -= weight * self.phi[:, t]
                trial = self.value()
                if trial <= current:
                    current, changed = trial, True
                    self.frozen[k, t] = True
                else:
                    self.coef[k, t] = weight
                    self.scores[:, k] += weight * self.phi[:, t]
        if changed:
            self.update_auxiliary()
        return changed

    def refresh_scores(self):
        self.scores = self.phi @ self.coef.T + self.intercept


def _fit_sparse_linear(phi, y, weights, support, rho, loss, coef, intercept, max_iter):
    """Eq. (8): ``min sum_i w_i l(phi_i' beta + b, y_i) / n + rho |beta|_1``, beta zero off support.

    The l1 term is exact: beta = beta_plus - beta_minus with both >= 0 (L-BFGS-B bounds).
    """
    loss = _LOSSES[loss]
    sub = phi[:, support]
    m = support.size
    n = phi.shape[0]

    def objective(x):
        beta = x[:m] - x[m:2 * m]
        score = sub @ beta + x[-1]
        value, deriv = loss(score, y)
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

    _loss = None

    def __init__(self, cost_tradeoff=1.0, l1_regularization=1e-3, max_depth=3, feature_costs=None,
                 tree_cost=1.0, feature_map="trees", n_weak_learners=100, weak_learner_depth=3,
                 weak_learner_learning_rate=0.1, routing_sharpness=1.0, max_sweeps=30,
                 max_node_iter=50, tol=1e-5, fine_tune=True, random_state=None):
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
        self.max_sweeps = max_sweeps
        self.max_node_iter = max_node_iter
        self.tol = tol
        self.fine_tune = fine_tune
        self.random_state = random_state

    # -- parameter checks ----------------------------------------------------------------------
    def _check_params(self):
        def number(name, low=0.0, strict=False):
            value = getattr(self, name)
            ok = isinstance(value, Real) and not isinstance(value, bool) and np.isfinite(value)
            if not ok or value < low or (strict and value <= low):
                relation = ">" if strict else ">="
                raise ValueError(f"{name} must be a finite number {relation} {low}, got {value!r}")

        def integer(name, low=1):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")

        for name in ("cost_tradeoff", "l1_regularization", "tree_cost", "tol"):
            number(name)
        number("routing_sharpness", strict=True)
        number("weak_learner_learning_rate", strict=True)
        for name in ("max_depth", "n_weak_learners", "weak_learner_depth", "max_sweeps",
                     "max_node_iter"):
            integer(name)
        if self.max_depth > 10:
            raise ValueError(f"max_depth={self.max_depth} means {2 ** self.max_depth - 1} "
                             "classifier nodes; use at most 10 (the paper uses up to 4)")
        if self.feature_map not in ("trees", "identity"):
            raise ValueError("feature_map must be 'trees' (boosted-tree outputs, Sec. 3) or "
                             f"'identity' (phi(x) = x, Sec. 5.1), got {self.feature_map!r}")

    # -- fitting -------------------------------------------------------------------------------
    def _feature_map(self, X, target):
        """Build phi on the training data; return (phi, F, e)."""
        n_features = X.shape[1]
        if self.feature_map == "identity":
            self.booster_ = None
            return X.astype(np.float64), np.eye(n_features, dtype=bool), np.zeros(n_features)
        depth = self.weak_learner_depth
        params = {"n_estimators": self.n_weak_learners,
                  "learning_rate": self.weak_learner_learning_rate, "max_depth": depth,
                  "max_leaves": max(2, 2 ** depth), "growth": "breadth_first",
                  "min_samples_leaf": 1 if X.shape[0] < 100 else 20,
                  "random_state": self._seed()}
        self.booster_ = train(X, target, "regression", params)
        uses = np.zeros((n_features, self.booster_.n_trees), dtype=bool)
        for t, tree in enumerate(self.booster_.trees):
            uses[tree["feature"][tree["feature"] >= 0], t] = True
        e = np.full(self.booster_.n_trees, float(self.tree_cost))
        return self._phi(X), uses, e

    def _seed(self):
        state = self.random_state
        if isinstance(state, np.random.RandomState):
            return int(state.randint(2**31))
        return state

    def _phi(self, X):
        if self.booster_ is None:
            return np.ascontiguousarray(X, dtype=np.float64)
        return self.booster_.tree_outputs(X)

    def _fit(self, X, target, X_val, y_val):
        self._check_params()
        costs = _per_feature("feature_costs", self.feature_costs, X.shape[1], 1.0)
        self.feature_costs_ = costs
        phi, uses, e = self._feature_map(X, target)
        self.weak_learner_features_ = uses
        self.weak_learner_costs_ = e
        problem = _TreeObjective(phi, target, self._loss, e, costs, uses, self.cost_tradeoff,
                                 self.l1_regularization, self.routing_sharpness, self.max_depth)
        problem.intercept[0] = self._initial_score(target)
        problem.refresh_scores()
        self._initialise_top_down(problem)
        self.objective_curve_ = self._coordinate_descent(problem, problem.nodes())
        if problem.sparsify():
            curve = self._coordinate_descent(problem, problem.nodes())
            self.objective_curve_ = np.concatenate([self.objective_curve_, curve])
        self._store(problem)
        if X_val is not None:
            self._prune(X_val, y_val)
        self.prediction_coef_ = self.coef_.copy()
        self.prediction_intercept_ = self.intercept_.copy()
        if self.fine_tune:
            self._fine_tune(problem)
        return self

    def _initial_score(self, target):
        mean = float(np.mean(target))
        if self._loss == "logistic":
            mean = float(np.clip(mean, 1e-6, 1 - 1e-6))
            return np.log(mean / (1 - mean))
        return mean

    def _initialise_top_down(self, problem):
        """Sec. 4.2: optimise depth by depth, each new node as if it were a leaf."""
        for depth in range(self.max_depth):
            new = np.arange(2 ** depth - 1, 2 ** (depth + 1) - 1)
            if depth > 0:
                _, p, _, _ = problem._forward()
                for parent in np.unique(problem.parent[new]):
                    problem.threshold[parent] = np.average(problem.scores[:, parent],
                                                           weights=p[:, parent])
                for k in new:
                    parent = problem.parent[k]
                    problem.coef[k] = problem.coef[parent]
                    problem.intercept[k] = problem.intercept[parent]
                    problem.threshold[k] = problem.threshold[parent]
                    problem.scores[:, k] = problem.scores[:, parent]
                    problem.frozen[k] = False
                    # Fresh auxiliary variables: any z > 0 bounds the objective from above,
                    # and the parent's zeros must not be inherited as absorbing states.
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
            # The first sweep may start from loose auxiliary variables (new nodes), after
            # which each sweep is a majorise-minimise step and cannot increase (5).
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
        self._heap_index = keep

    def _prune(self, X_val, y_val):
        """Sec. 4.2: remove subtrees whose removal does not lower the validation score."""
        phi = self._phi(X_val)
        best = self._validation_score(phi, y_val)
        changed = True
        while changed:
            changed = False
            for node in range(self.children_.shape[0] - 1, -1, -1):
                for side in (0, 1):
                    child = self.children_[node, side]
                    if child < 0:
                        continue
                    self.children_[node, side] = -1
                    score = self._validation_score(phi, y_val)
                    if score >= best:
                        best, changed = score, True
                    else:
                        self.children_[node, side] = child
        self._compact()

    def _compact(self):
        """Drop nodes no longer reachable from the root (after pruning)."""
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
        self._heap_index = self._heap_index[keep]

    def _fine_tune(self, problem):
        """Eq. (8) for every classifier with a terminal child, on the samples that exit there.

        The paper weights samples by the soft ``p_i^k``; we use the hard
        (test-time) traversal, because the refit is meant to undo the shrinkage of
        the relaxation on the predictions actually made, and soft weights let a
        few samples of other regions (for which an expert feature is noise) pull
        the expert's weight towards zero.
        """
        phi, target = problem.phi, problem.y
        exit_node = self._exit_nodes(phi)
        for k in range(self.children_.shape[0]):
            exits = (exit_node == k).astype(np.float64)
            if not exits.any():
                continue
            support = np.flatnonzero(self.coef_[k] != 0)
            self.prediction_coef_[k], self.prediction_intercept_[k] = _fit_sparse_linear(
                phi, target, exits, support, self.l1_regularization, self._loss, self.coef_[k],
                self.intercept_[k], 10 * self.max_node_iter)

    # -- traversal and costs -------------------------------------------------------------------
    def _check_X(self, X):
        check_is_fitted(self, "coef_")
        return validate_data(self, X, reset=False, dtype=(np.float64, np.float32))

    def _exit_nodes(self, phi):
        """Hard traversal: the classifier node whose terminal element each sample reaches."""
        node = np.zeros(phi.shape[0], dtype=np.int64)
        done = np.zeros(phi.shape[0], dtype=bool)
        while not done.all():
            open_rows = np.flatnonzero(~done)
            k = node[open_rows]
            score = np.einsum("ij,ij->i", phi[open_rows], self.coef_[k]) + self.intercept_[k]
            child = self.children_[k, (score > self.threshold_[k]).astype(np.int64)]
            finished = child < 0
            done[open_rows[finished]] = True
            node[open_rows[~finished]] = child[~finished]
        return node

    def _raw_from_phi(self, phi, coef=None, intercept=None):
        coef = self.prediction_coef_ if coef is None else coef
        intercept = self.prediction_intercept_ if intercept is None else intercept
        node = self._exit_nodes(phi)
        return np.einsum("ij,ij->i", phi, coef[node]) + intercept[node]

    def apply(self, X):
        """Index of the classifier node whose terminal element each sample exits through."""
        return self._exit_nodes(self._phi(self._check_X(X)))

    def _paths(self):
        parent = np.full(self.children_.shape[0], -1)
        for k, kids in enumerate(self.children_):
            parent[kids[kids >= 0]] = k
        paths = []
        for k in range(self.children_.shape[0]):
            path, j = [], k
            while j >= 0:
                path.append(j)
                j = parent[j]
            paths.append(path[::-1])
        return paths

    def path_weak_learners(self, node):
        """Weak learners (phi dimensions) evaluated by a sample exiting at ``node``."""
        check_is_fitted(self, "coef_")
        path = self._paths()[node]
        return np.flatnonzero(np.any(self.coef_[path] != 0, axis=0))

    def path_features(self, node):
        """Raw features extracted by a sample exiting at ``node``."""
        learners = self.path_weak_learners(node)
        return np.flatnonzero(self.weak_learner_features_[:, learners].any(axis=1))

    def prediction_cost(self, X):
        """Per-sample test-time cost under the paper's cost model (module docstring).

        Returns
        -------
        PredictionCost
            ``evaluation``: sum of ``e_t`` over the weak learners evaluated on the
            sample's path; ``feature``: sum of the raw feature costs those weak
            learners need; ``batch``: 0.0 (CSTC has no per-batch cost).
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
        check_is_fitted(self, "coef_")
        return self.children_.shape[0]


class CSTCClassifier(ClassifierMixin, _CSTCBase):
    """Cost-sensitive tree of classifiers (CSTC; Xu, Kusner, Weinberger & Chen, ICML 2013).

    A binary tree of sparse linear classifiers over a boosted-tree feature map;
    each sample follows one path and pays only for the weak learners and raw
    features used along it. Binary classification with the logistic loss (the
    paper uses the squared loss for regression; see `CSTCRegressor`). See the
    module docstring for the exact objective, optimisation and cost model.

    Parameters
    ----------
    cost_tradeoff : float
        lambda of Eq. (5): weight of the relaxed expected test-time cost.
    l1_regularization : float
        rho of Eq. (5): l1 penalty on every classifier's weights.
    max_depth : int
        Levels of classifier nodes (1 = the single cost-sensitive linear model of
        Eq. (4); 3 = the tree of Fig. 2, 7 nodes).
    feature_costs : array-like of shape (n_features,), optional
        Extraction cost ``c_a`` of each raw feature (default 1).
    tree_cost : float
        Evaluation cost ``e_t`` of each weak learner (the paper's unit of cost).
    feature_map : {"trees", "identity"}
        ``phi`` = outputs of boosted trees (Sec. 3) or the raw features (Sec. 5.1).
    n_weak_learners, weak_learner_depth, weak_learner_learning_rate
        The squared-loss boosted trees of the feature map (``feature_map="trees"``).
    routing_sharpness : float
        Slope ``s`` of the soft traversal ``sigmoid(s (score - theta))`` in training
        (1 in the paper).
    max_sweeps, max_node_iter, tol
        Cyclic coordinate descent: at most ``max_sweeps`` sweeps over the nodes,
        ``max_node_iter`` L-BFGS iterations per node, stop when the relative
        decrease of Eq. (5) over a sweep is below ``tol``.
    fine_tune : bool
        Refit the predicting classifiers on their non-zero weights (Eq. 8).
    random_state : int, RandomState or None
        Seeds the binning of the boosted feature map.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    coef_, intercept_, threshold_ : ndarray
        Per classifier node (after pruning): routing weights of Eq. (5), intercept
        and threshold; a sample goes to ``children_[k, 1]`` iff
        ``phi(x) @ coef_[k] + intercept_[k] > threshold_[k]``, else ``children_[k, 0]``.
    children_ : ndarray of shape (n_nodes, 2)
        Node indices; -1 is a terminal element (predict with this node).
    prediction_coef_, prediction_intercept_ : ndarray
        Weights used for predictions (fine-tuned, Eq. 8; equal to ``coef_`` without).
    booster_ : Booster or None
        The boosted trees of the feature map.
    weak_learner_features_ : ndarray of bool, shape (n_features, n_weak_learners)
        F of the paper.
    objective_curve_ : ndarray
        Eq. (5) after each sweep of the final coordinate descent.

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

    _loss = "logistic"

    def fit(self, X, y, X_val=None, y_val=None):
        """Fit on ``X`` (n, d) and binary labels ``y``; ``X_val, y_val`` enable pruning."""
        X, y = validate_data(self, X, y, dtype=(np.float64, np.float32))
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) != 2:
            raise ValueError(f"CSTCClassifier is a binary classifier (as in the paper); y has "
                             f"{len(self.classes_)} classes. Combine it with sklearn's "
                             "OneVsRestClassifier for more classes.")
        if (X_val is None) != (y_val is None):
            raise ValueError("give both X_val and y_val (validation pruning) or neither")
        if X_val is not None:
            X_val = validate_data(self, X_val, reset=False, dtype=(np.float64, np.float32))
            y_val = np.asarray(y_val)
            if y_val.shape != (X_val.shape[0],):
                raise ValueError(f"y_val must have one label per row of X_val ({X_val.shape[0]}), "
                                 f"got shape {y_val.shape}")
            unknown = ~np.isin(y_val, self.classes_)
            if unknown.any():
                raise ValueError(f"y_val has label(s) {np.unique(y_val[unknown]).tolist()} not "
                                 f"seen in y {self.classes_.tolist()}")
            y_val = np.searchsorted(self.classes_, y_val).astype(np.float64)
        encoded = encoded.astype(np.float64)
        if self._loss == "squared":
            encoded = 2.0 * encoded - 1.0
            if y_val is not None:
                y_val = 2.0 * y_val - 1.0
        return self._fit(X, encoded, X_val, y_val)

    def _validation_score(self, phi, target):
        raw = self._raw_from_phi(phi, self.coef_, self.intercept_)
        return float(np.mean((raw > 0) == (target > 0)))

    def decision_function(self, X):
        """Log-odds of ``classes_[1]`` from the classifier each sample exits at."""
        return self._raw_from_phi(self._phi(self._check_X(X)))

    def predict_proba(self, X):
        p = expit(self.decision_function(X))
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        return self.classes_[(self.decision_function(X) > 0).astype(np.intp)]


class CSTCRegressor(RegressorMixin, _CSTCBase):
    """Cost-sensitive tree of regressors with the squared loss (the paper's own setting).

    Same parameters and attributes as `CSTCClassifier` (no ``classes_``); used
    for the synthetic regression data of Sec. 5.1 and relevance regression
    (Yahoo! LTR, Sec. 5.2).

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

    _loss = "squared"

    def fit(self, X, y, X_val=None, y_val=None):
        """Fit on ``X`` (n, d) and real targets ``y``; ``X_val, y_val`` enable pruning."""
        X, y = validate_data(self, X, y, dtype=(np.float64, np.float32), y_numeric=True)
        if (X_val is None) != (y_val is None):
            raise ValueError("give both X_val and y_val (validation pruning) or neither")
        if X_val is not None:
            X_val = validate_data(self, X_val, reset=False, dtype=(np.float64, np.float32))
            y_val = np.asarray(y_val, dtype=np.float64)
            if y_val.shape != (X_val.shape[0],):
                raise ValueError(f"y_val must have one value per row of X_val ({X_val.shape[0]}), "
                                 f"got shape {y_val.shape}")
        return self._fit(X, np.asarray(y, dtype=np.float64), X_val, y_val)

    def _validation_score(self, phi, target):
        raw = self._raw_from_phi(phi, self.coef_, self.intercept_)
        return -float(np.mean((raw - target) ** 2))

    def predict(self, X):
        return self._raw_from_phi(self._phi(self._check_X(X)))
