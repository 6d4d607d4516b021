"""Budgeted learning: what a prediction costs, budget checks, and the best model within a budget.

Shared by every budgeted model (CEGB and GreedyMiser in `msclassify.cegb`,
BudgetRF and CSTC in `msclassify.baselines`):

`PredictionCost`
    the per-sample evaluation and feature cost and the per-batch cost of a prediction
`check_budget`, `check_validation_labels`
    the checks of a budget and of the validation labels it is measured on
`PrefixBudgetMixin`
    ``with_budget`` of staged models: their most accurate prefix within a budget
`select_within_budget`
    the most accurate of several fitted models within one budget
`with_feature_costs`
    a fitted model whose prediction cost is priced with other feature costs

A cost-accuracy sweep trains many models (CEGB at several tradeoffs mu,
GreedyMiser, BudgetRF, CSTC, ...). For a budget B the user wants the most
accurate one whose mean prediction cost per validation sample is <= B. Staged
models (boosted ensembles, forests) are first cut to their best prefix within B
by their own ``with_budget``; a model without one (a CSTC tree) is used whole.
"""

import copy
from dataclasses import dataclass

import numpy as np
from sklearn.base import is_classifier, is_regressor
from sklearn.metrics import r2_score
from sklearn.utils.validation import check_is_fitted

from .checks import check_number

__all__ = ["PredictionCost", "PrefixBudgetMixin", "check_budget", "check_validation_labels",
           "select_within_budget", "with_feature_costs"]


@dataclass
class PredictionCost:
    """Prediction cost of a model on some samples (docs/design.md, *The cost model*).

    Attributes
    ----------
    evaluation : ndarray, shape (N,)
        Sum of ``alpha * eps`` over the split nodes each sample visits.
    feature : ndarray, shape (N,)
        Sum of ``beta_m`` over the distinct features on each sample's paths.
    batch : float
        Sum of ``gamma_m`` over the features the model uses (paid once per image/batch).
    """

    evaluation: np.ndarray
    feature: np.ndarray
    batch: float

    @property
    def per_sample(self):
        return self.evaluation + self.feature


def check_budget(budget):
    """``budget`` as a float; ValueError unless it is a finite number >= 0."""
    return check_number(budget, "budget",
                        note="the mean prediction cost allowed per validation sample")


def check_validation_labels(X_val, y_val, classes):
    """``y_val`` as an array, ValueError unless it holds one known class label per row of X_val."""
    y_val = np.asarray(y_val)
    if y_val.shape != (X_val.shape[0],):
        raise ValueError(f"y_val must have one label per row of X_val ({X_val.shape[0]}), got "
                         f"shape {y_val.shape}")
    unknown = np.setdiff1d(y_val, classes)
    if unknown.size:
        raise ValueError(f"y_val has labels {unknown.tolist()} that are not in the training "
                         f"classes {classes.tolist()}")
    return y_val


class PrefixBudgetMixin:
    """``with_budget`` for staged models: boosted ensembles (iterations), forests (trees).

    The first k stages of such a model are a model too. A class using this mixin
    provides ``_prefix_costs_and_scores(X_val, y_val, scoring)``, the mean
    validation cost and the validation score of every prefix from 0 stages to all
    (two arrays of ``n_stages + 1``, the 0-stage prefix costing 0), and
    ``_prefix(n_stages)``, a new fitted model of the first ``n_stages`` stages.
    """

    def with_budget(self, budget, X_val, y_val, scoring=None):
        """The most accurate prefix of the model whose mean validation cost is <= ``budget``.

        Fit once with many stages (boosting iterations, trees), then call this for
        each budget of a cost-accuracy curve. Prefixes of 0 stages (a constant
        prediction: the initial score or the class prior, cost 0) to all stages
        are considered; ties go to the cheaper prefix. The cost of a prefix is its
        mean per-sample prediction cost on ``X_val``, feature acquisition plus
        split evaluation (``prediction_cost(X_val).per_sample.mean()``, the
        ``"total"`` of `cost_curve`); a per-batch cost (gamma) is not a
        per-sample cost and is not counted.

        Parameters
        ----------
        budget : float
            Mean per-sample prediction cost allowed on ``X_val``.
        X_val, y_val : array-like
            Validation data.
        scoring : callable, optional
            Higher is better. Classifiers: ``scoring(y_val, proba_val) -> float``
            (e.g. a ranking metric), default the accuracy of `predict`.
            Regressors: ``scoring(y_val, prediction_val) -> float``, default R^2
            (which ranks prefixes as the negative mean squared error does).

        Returns
        -------
        estimator
            A new fitted estimator of the same class holding only the chosen
            stages (sharing their arrays), with ``budget_``, ``validation_cost_``
            and ``validation_score_`` set. `predict`, `prediction_cost` and
            ``save`` use only those stages; the constructor parameters are the
            original's, so refitting trains the full model again. This
            estimator is not changed.

        Examples
        --------
        >>> import numpy as np
        >>> from msclassify import CEGBClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(400, 2)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
        >>> clf = CEGBClassifier(n_estimators=30, feature_costs=[1, 10]).fit(X[:300], y[:300])
        >>> small = clf.with_budget(5.0, X[300:], y[300:])
        >>> bool(small.validation_cost_ <= 5.0), 1 in small.booster_.features_used()
        (True, False)
        """
        check_is_fitted(self)
        budget = check_budget(budget)
        costs, scores = self._prefix_costs_and_scores(X_val, y_val, scoring)
        feasible = np.flatnonzero(costs <= budget)  # never empty: 0 stages cost 0
        best = int(feasible[np.argmax(scores[feasible])])
        pruned = self._prefix(best)
        pruned.budget_, pruned.validation_cost_, pruned.validation_score_ = \
            budget, float(costs[best]), float(scores[best])
        return pruned


def select_within_budget(models, budget, X_val, y_val, scoring=None):
    """The most accurate of ``models`` (or prefix of one) whose mean validation cost is <= budget.

    Parameters
    ----------
    models : sequence of fitted estimators
        Classifiers only or regressors only, each with ``prediction_cost(X)``.
        A model with ``with_budget`` (CEGB, GreedyMiser, BudgetRF) contributes its
        best prefix within the budget; its 0-iteration prefix costs 0, so it
        always fits. Any other model (CSTC) counts with its whole cost
        ``prediction_cost(X_val).per_sample.mean()``.
    budget : float
        Mean per-sample prediction cost allowed on ``X_val``.
    X_val, y_val : array-like
        Validation data.
    scoring : callable, optional
        Higher is better. Classifiers: ``scoring(y_val, predict_proba(X_val))``,
        default accuracy of ``predict``; regressors:
        ``scoring(y_val, predict(X_val))``, default R^2.

    Returns
    -------
    estimator
        The winner (ties go to the cheaper model, then to the earlier in
        ``models``), a copy with ``budget_``, ``validation_cost_`` and
        ``validation_score_`` set; the given models are not changed.

    Raises
    ------
    ValueError
        If the budget is not a finite number >= 0, ``models`` is empty or mixes
        classifiers and regressors, or no model fits the budget.

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify import CEGBClassifier
    >>> from msclassify.baselines import BudgetRFClassifier
    >>> from msclassify.budget import select_within_budget
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 2)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> models = [CEGBClassifier(n_estimators=20, feature_costs=[1, 10]).fit(X[:400], y[:400]),
    ...           BudgetRFClassifier(n_estimators=5, feature_costs=[1, 10],
    ...                              random_state=0).fit(X[:400], y[:400])]
    >>> best = select_within_budget(models, 5.0, X[400:], y[400:])
    >>> bool(best.validation_cost_ <= 5.0)
    True
    """
    budget = check_budget(budget)
    models = list(models)
    if not models:
        raise ValueError("models is empty; give at least one fitted model")
    for model in models:
        if not hasattr(model, "prediction_cost") or not hasattr(model, "predict"):
            raise TypeError(f"{type(model).__name__} has no prediction_cost; give fitted "
                            "budgeted models (CEGB, GreedyMiser, BudgetRF, CSTC)")
    if all(is_classifier(model) for model in models):
        classify = True
    elif all(is_regressor(model) for model in models):
        classify = False
    else:
        raise ValueError("models mixes classifiers and regressors, whose scores cannot be "
                         "compared; select among one kind at a time")

    candidates, too_expensive = [], []
    for model in models:
        if hasattr(model, "with_budget"):
            candidates.append(model.with_budget(budget, X_val, y_val, scoring))
            continue
        cost = float(np.mean(model.prediction_cost(X_val).per_sample))
        if cost > budget:
            too_expensive.append((cost, type(model).__name__))
            continue
        whole = copy.copy(model)
        whole.budget_, whole.validation_cost_ = budget, cost
        whole.validation_score_ = _score(whole, X_val, y_val, scoring, classify)
        candidates.append(whole)
    if not candidates:
        cost, name = min(too_expensive)
        raise ValueError(f"no model fits the budget {budget:g}: the cheapest, a {name}, costs "
                         f"{cost:.4g} per validation sample; raise the budget or add a model "
                         "that can be cut to any budget (CEGB, GreedyMiser, BudgetRF)")
    # max() keeps the first of equal keys: the cheaper model, then the earlier one
    return max(candidates, key=lambda m: (m.validation_score_, -m.validation_cost_))


def with_feature_costs(model, feature_costs):
    """A shallow copy of a fitted model whose prediction cost uses ``feature_costs``.

    The trees (or other fitted arrays) are shared, not copied; only the price of
    each feature changes, e.g. to evaluate a model under another cost model.
    Models that price features themselves (BudgetRF, CSTC: ``feature_costs_``)
    get new ``feature_costs_``; CEGB models a booster with new ``feature_costs``.
    """
    model = copy.copy(model)
    if hasattr(model, "feature_costs_"):      # CSTC's booster_ is its feature map, not priced
        model.feature_costs_ = np.asarray(feature_costs, dtype=np.float64)
    else:
        model.booster_ = copy.copy(model.booster_)
        model.booster_.feature_costs = np.asarray(feature_costs, dtype=np.float64)
    return model


def _score(model, X_val, y_val, scoring, classify):
    y_val = np.asarray(y_val)
    if classify:
        if scoring is None:
            return float(np.mean(model.predict(X_val) == y_val))
        return float(scoring(y_val, model.predict_proba(X_val)))
    prediction = model.predict(X_val)
    return float(r2_score(y_val, prediction) if scoring is None else scoring(y_val, prediction))
