"""Cost-accuracy curves of budgeted models: the Pareto frontier of (cost, score) and its area."""

from dataclasses import dataclass

import numpy as np

from ._ranking import _as_1d


@dataclass(frozen=True, eq=False)
class CostAccuracyCurve:
    """The Pareto frontier of (cost, score) points: what each budget can buy.

    Attributes
    ----------
    costs : ndarray, shape (P,)
        Strictly increasing costs of the frontier points.
    scores : ndarray, shape (P,)
        Strictly increasing scores (higher is better).
    indices : ndarray of int, shape (P,)
        Position of each frontier point in the input.
    """

    costs: np.ndarray
    scores: np.ndarray
    indices: np.ndarray

    def score_at(self, budget):
        """Best score of a model costing at most ``budget`` (NaN if none is that cheap)."""
        budget = np.asarray(budget, dtype=np.float64)
        position = np.searchsorted(self.costs, budget, side="right") - 1
        return np.where(position >= 0, self.scores[np.maximum(position, 0)], np.nan)

    def area(self, cost_range=None):
        """Mean best score over a cost range: the normalised area under the step curve.

        ``area = (1 / (hi - lo)) * integral_lo^hi score_at(c) dc``, so the result is
        in score units (an accuracy stays in [0, 1]) and curves compared over the
        same ``cost_range`` are directly comparable. Between frontier points the
        curve is a step (a budget buys the best model that fits in it), not a
        line.

        Parameters
        ----------
        cost_range : (lo, hi), optional
            Default: from the cheapest to the most expensive frontier point. ``lo``
            may not be below the cheapest point (the curve is undefined there);
            for ``lo == hi`` the score at ``lo`` is returned.
        """
        lo, hi = (self.costs[0], self.costs[-1]) if cost_range is None else map(float, cost_range)
        if not (np.isfinite(lo) and np.isfinite(hi)) or hi < lo:
            raise ValueError(f"cost_range must be finite with lo <= hi, got {(lo, hi)}")
        if lo < self.costs[0]:
            raise ValueError(f"cost_range starts at {lo} but the cheapest model costs "
                             f"{self.costs[0]}; start the range at or above it (for two curves, "
                             "at the larger of their cheapest costs)")
        if hi == lo:
            return float(self.score_at(lo))
        edges = np.concatenate([[lo], self.costs[(self.costs > lo) & (self.costs < hi)], [hi]])
        return float(np.sum(self.score_at(edges[:-1]) * np.diff(edges)) / (hi - lo))


def cost_accuracy_curve(costs, scores):
    """Pareto frontier of models given as (mean prediction cost, score) pairs.

    A point is kept if no other point is at most as expensive and at least as
    good (with one of the two strict); among identical points the first is kept.

    Parameters
    ----------
    costs : array-like, shape (P,)
        Mean prediction cost of each model (e.g. per number of trees).
    scores : array-like, shape (P,)
        Its accuracy or other score, higher is better.

    Returns
    -------
    CostAccuracyCurve

    Examples
    --------
    >>> curve = cost_accuracy_curve([1, 2, 3, 5], [0.5, 0.4, 0.9, 0.9])
    >>> curve.costs, curve.scores, curve.indices
    (array([1., 3.]), array([0.5, 0.9]), array([0, 2]))
    >>> curve.area((1, 5))   # 0.5 on [1, 3), 0.9 on [3, 5]
    0.7
    """
    costs = _as_1d(costs, "costs").astype(np.float64)
    scores = _as_1d(scores, "scores", costs.shape[0]).astype(np.float64)
    if not (np.all(np.isfinite(costs)) and np.all(np.isfinite(scores))):
        raise ValueError("costs and scores must be finite")
    order = np.lexsort((-scores, costs))  # by cost, the best score first within equal cost
    keep, best = [], -np.inf
    for index in order:
        if scores[index] > best:
            keep.append(index)
            best = scores[index]
    keep = np.array(keep, dtype=np.int64)
    return CostAccuracyCurve(costs[keep], scores[keep], keep)


def cost_accuracy_auc(costs, scores, cost_range=None):
    """Normalised area under the cost-accuracy frontier; see `CostAccuracyCurve.area`.

    Examples
    --------
    >>> cost_accuracy_auc([1, 3], [0.5, 0.9], cost_range=(1, 5))
    0.7
    """
    return cost_accuracy_curve(costs, scores).area(cost_range)
