"""scikit-learn estimators over the CEGB core: thin wrappers around `train` and `Booster`."""

import copy

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.metrics import r2_score
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..budget import PrefixBudgetMixin, check_validation_labels
from ..checks import as_seed
from ..modelfile import (ModelFileError, estimator_params, model_classes, model_number,
                         write_model)
from ._booster import Booster
from ._losses import class_probabilities, most_probable_class
from ._params import CEGBParams
from ._train import train

_PARAM_NAMES = tuple(CEGBParams.__dataclass_fields__)
_BUDGET_ATTRIBUTES = ("budget_", "validation_cost_", "validation_score_")


class _CEGBBase(PrefixBudgetMixin, BaseEstimator):
    """Shared constructor, fit plumbing, cost reporting, budgets and saving.

    A fitted model may carry ``column_names_``, the names of its training columns
    (``msclassify tabular train`` sets them from the data file's header); they are
    saved with it, so data whose columns come in another order is matched by name.
    """

    _model_kind = None
    _objectives = ("regression",)  # what a model file of this class may hold

    def __init__(self, n_estimators=100, learning_rate=0.1, max_leaves=31, max_depth=None,
                 min_samples_leaf=20, min_hessian_leaf=1e-3, l2_regularization=1.0,
                 max_bins=255, subsample=1.0, colsample=1.0, random_state=None,
                 cost_tradeoff=0.0, split_cost=0.0, feature_costs=None,
                 feature_batch_costs=None, feature_share=None, share_mode="path",
                 growth="best_first", hessian="exact", feature_cost_mode="lazy",
                 evaluation_cost_mode="leaf"):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_leaves = max_leaves
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.min_hessian_leaf = min_hessian_leaf
        self.l2_regularization = l2_regularization
        self.max_bins = max_bins
        self.subsample = subsample
        self.colsample = colsample
        self.random_state = random_state
        self.cost_tradeoff = cost_tradeoff
        self.split_cost = split_cost
        self.feature_costs = feature_costs
        self.feature_batch_costs = feature_batch_costs
        self.feature_share = feature_share
        self.share_mode = share_mode
        self.growth = growth
        self.hessian = hessian
        self.feature_cost_mode = feature_cost_mode
        self.evaluation_cost_mode = evaluation_cost_mode

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def _cegb_params(self):
        params = {name: getattr(self, name) for name in _PARAM_NAMES}
        params["random_state"] = as_seed(params["random_state"])
        return params

    def _validate_X(self, X, reset=False):
        return validate_data(self, X, reset=reset, ensure_all_finite="allow-nan",
                             dtype=(np.float64, np.float32))

    def _train(self, X, y, objective, n_classes, sample_weight, cost_weight, callback):
        self.booster_ = train(X, y, objective, self._cegb_params(), n_classes=n_classes,
                              sample_weight=sample_weight, cost_weight=cost_weight,
                              callback=callback)
        return self

    @property
    def feature_importances_(self):
        """Total split gain per feature, normalised to sum to 1 (zeros if no split)."""
        check_is_fitted(self, "booster_")
        gain = self.booster_.feature_importances("gain")
        return gain / gain.sum() if gain.sum() > 0 else gain

    @property
    def n_iterations_(self):
        check_is_fitted(self, "booster_")
        return self.booster_.n_iterations

    def features_used(self, n_iterations=None):
        """Sorted indices of the features the (first ``n_iterations``) trees split on."""
        check_is_fitted(self, "booster_")
        return self.booster_.features_used(n_iterations)

    def prediction_cost(self, X, n_iterations=None):
        """Per-sample evaluation and feature cost and the batch cost; see `Booster.prediction_cost`."""
        check_is_fitted(self, "booster_")
        return self.booster_.prediction_cost(self._validate_X(X), n_iterations)

    def cost_curve(self, X):
        """Mean prediction cost per number of iterations; see `Booster.cost_curve`."""
        check_is_fitted(self, "booster_")
        return self.booster_.cost_curve(self._validate_X(X))

    def _raw(self, X, n_iterations=None):
        check_is_fitted(self, "booster_")
        return self.booster_.predict_raw(self._validate_X(X), n_iterations)

    def save(self, path):
        """Save to a versioned model file (no pickle); load with `msclassify.load_model`."""
        check_is_fitted(self, "booster_")
        meta, arrays = self.booster_.to_model_file()
        meta["estimator_params"] = estimator_params(self)
        meta.update(self._extra_meta())
        write_model(path, self._model_kind, meta, arrays)

    def _extra_meta(self):
        meta = {}
        if getattr(self, "column_names_", None) is not None:
            meta["column_names"] = [str(name) for name in self.column_names_]
        if hasattr(self, "budget_"):
            meta["budget"] = {name: getattr(self, name) for name in _BUDGET_ATTRIBUTES}
        return meta

    @classmethod
    def _from_model_file(cls, meta, arrays):
        params = meta.get("estimator_params")
        if not isinstance(params, dict):
            raise ModelFileError("estimator_params must be a JSON object")
        estimator = cls(**params)
        estimator.booster_ = Booster.from_model_file(meta, arrays, cls._objectives)
        estimator.n_features_in_ = estimator.booster_.n_features
        estimator._restore_extra(meta)
        return estimator

    def _restore_extra(self, meta):
        names = meta.get("column_names")
        if names is not None:
            if not isinstance(names, list) or len(names) != self.n_features_in_ or \
                    not all(isinstance(name, str) for name in names):
                raise ModelFileError(f"column_names must be {self.n_features_in_} strings")
            self.column_names_ = tuple(names)
        budget = meta.get("budget", {})
        if not isinstance(budget, dict):
            raise ModelFileError("budget must be a JSON object")
        for name in _BUDGET_ATTRIBUTES:
            if name in budget:
                setattr(self, name, model_number(budget, name))

    # -- budgets (with_budget: msclassify.budget.PrefixBudgetMixin) ----------------------------
    def _prefix_costs_and_scores(self, X_val, y_val, scoring):
        X_val = self._validate_X(X_val)
        y_val = self._check_y_val(X_val, y_val)
        costs = np.r_[0.0, self.booster_.cost_curve(X_val)["total"]]
        stages = [self.booster_.predict_raw(X_val, 0), *self.booster_.staged_predict_raw(X_val)]
        return costs, np.array([self._budget_score(y_val, raw, scoring) for raw in stages])

    def _prefix(self, n_stages):
        pruned = copy.copy(self)
        pruned.booster_ = self.booster_.truncated(n_stages)
        return pruned


class CEGBClassifier(ClassifierMixin, _CEGBBase):
    """Cost-efficient gradient boosting classifier (binary logistic or softmax).

    Parameters are those of `CEGBParams`; costs are given per feature
    (``feature_costs`` = beta, ``feature_batch_costs`` = gamma, ``feature_share`` = s)
    and traded off against the loss by ``cost_tradeoff`` (mu).

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify import CEGBClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)); y = (X[:, 0] + X[:, 3] > 0).astype(int)
    >>> clf = CEGBClassifier(n_estimators=20, cost_tradeoff=0.01,
    ...                      feature_costs=[1, 1, 1, 50]).fit(X, y)
    >>> 3 in clf.booster_.features_used()   # the expensive feature is avoided
    False
    """

    _model_kind = "cegb_classifier"
    _objectives = ("binary", "multiclass")

    def fit(self, X, y, sample_weight=None, cost_weight=None, callback=None):
        """Fit on ``X`` (N, M) and labels ``y``; see `msclassify.cegb.train` for the weights."""
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan",
                             dtype=(np.float64, np.float32))
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"y has only one class ({self.classes_[0]!r}); a classifier needs "
                             "samples of at least 2 classes")
        multi = len(self.classes_) > 2
        return self._train(X, encoded.astype(np.float64), "multiclass" if multi else "binary",
                           len(self.classes_) if multi else None, sample_weight, cost_weight,
                           callback)

    def decision_function(self, X):
        return self._raw(X)

    def predict_proba(self, X, n_iterations=None):
        """Class probabilities, shape (N, n_classes), columns in the order of ``classes_``."""
        return class_probabilities(self._raw(X, n_iterations))

    def predict(self, X, n_iterations=None):
        return self._labels(self._raw(X, n_iterations))

    def _labels(self, raw):
        return self.classes_[most_probable_class(raw)]

    def _check_y_val(self, X_val, y_val):
        return check_validation_labels(X_val, y_val, self.classes_)

    def _budget_score(self, y_val, raw, scoring):
        if scoring is None:
            return float(np.mean(self._labels(raw) == y_val))
        return float(scoring(y_val, class_probabilities(raw)))

    def staged_predict_proba(self, X):
        """Yield class probabilities after each iteration."""
        check_is_fitted(self, "booster_")
        for raw in self.booster_.staged_predict_raw(self._validate_X(X)):
            yield class_probabilities(raw)

    def staged_predict(self, X):
        for proba in self.staged_predict_proba(X):
            yield self.classes_[np.argmax(proba, axis=1)]

    def _extra_meta(self):
        return super()._extra_meta() | {"classes": self.classes_.tolist(),
                                        "classes_dtype": self.classes_.dtype.str}

    def _restore_extra(self, meta):
        super()._restore_extra(meta)
        self.classes_ = model_classes(meta, max(2, self.booster_.n_outputs))


class CEGBRegressor(RegressorMixin, _CEGBBase):
    """Cost-efficient gradient boosting regressor (squared error).

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify import CEGBRegressor
    >>> X = np.linspace(0, 1, 200)[:, None]; y = np.sin(6 * X[:, 0])
    >>> CEGBRegressor(n_estimators=50).fit(X, y).score(X, y) > 0.95
    True
    """

    _model_kind = "cegb_regressor"

    def fit(self, X, y, sample_weight=None, cost_weight=None, callback=None):
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", y_numeric=True,
                             dtype=(np.float64, np.float32))
        return self._train(X, np.asarray(y, dtype=np.float64), "regression", None,
                           sample_weight, cost_weight, callback)

    def predict(self, X, n_iterations=None):
        return self._raw(X, n_iterations)

    def _check_y_val(self, X_val, y_val):
        y_val = np.asarray(y_val)
        if y_val.shape != (X_val.shape[0],) or not np.issubdtype(y_val.dtype, np.number):
            raise ValueError(f"y_val must hold one number per row of X_val ({X_val.shape[0]}), "
                             f"got shape {y_val.shape} of {y_val.dtype}")
        return y_val.astype(np.float64)

    def _budget_score(self, y_val, raw, scoring):
        return float(r2_score(y_val, raw) if scoring is None else scoring(y_val, raw))

    def staged_predict(self, X):
        check_is_fitted(self, "booster_")
        yield from self.booster_.staged_predict_raw(self._validate_X(X))


_GREEDY_MISER = dict(hessian="unit", growth="breadth_first", max_depth=4, max_leaves=16,
                     feature_cost_mode="coupled", evaluation_cost_mode="tree")


class _GreedyMiserMixin:
    """GreedyMiser (Xu et al. 2012) as the special case of CEGB (Peter et al. 2017, supplement).

    First-order (unit hessian), breadth-first trees of depth 4, every sample pays
    every split of a tree, and a feature's cost is paid for all samples at once.
    Only these knobs are exposed; the preset fixes the rest of the CEGB parameters.
    """

    def __init__(self, n_estimators=100, learning_rate=0.1, min_samples_leaf=1,
                 l2_regularization=1.0, max_bins=255, random_state=None, cost_tradeoff=0.0,
                 split_cost=1.0, feature_costs=None, feature_batch_costs=None):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.max_bins = max_bins
        self.random_state = random_state
        self.cost_tradeoff = cost_tradeoff
        self.split_cost = split_cost
        self.feature_costs = feature_costs
        self.feature_batch_costs = feature_batch_costs

    def _cegb_params(self):
        params = CEGBParams().to_dict() | self.get_params() | _GREEDY_MISER
        params["random_state"] = as_seed(params["random_state"])
        return params


class GreedyMiserClassifier(_GreedyMiserMixin, CEGBClassifier):
    __doc__ = _GreedyMiserMixin.__doc__
    _model_kind = "greedy_miser_classifier"


class GreedyMiserRegressor(_GreedyMiserMixin, CEGBRegressor):
    __doc__ = _GreedyMiserMixin.__doc__
    _model_kind = "greedy_miser_regressor"
