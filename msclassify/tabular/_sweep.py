"""Cost-accuracy sweeps on tabular data: CEGB at several cost tradeoffs against plain boosting.

One sweep trains plain gradient boosting (``cost_tradeoff = 0``) and one CEGB
model per tradeoff mu, and scores each on held-out data by its mean prediction
cost per sample (feature acquisition, plus split evaluation when
``split_cost > 0``) and its accuracy, or its precision@5 and NDCG@5 when the data
has queries. Ranking data is binarised as in Peter et al. (2017), section 5:
grade > 0 is relevant. The napari tabular widget and the ``msclassify tabular``
command share everything here (scoring, the sweep, its plot; loading is in
`msclassify.tabular.load_train_test`); nothing here knows about Qt.
"""

import math
import time
from dataclasses import dataclass

import numpy as np

from ..cegb import CEGBClassifier
from ..metrics import accuracy, ndcg_at_k, precision_at_k, roc_auc
from ._data import TabularData

__all__ = ["DEFAULT_COST_TRADEOFFS", "CostSweep", "SweepPoint", "check_trainable", "cost_sweep",
           "parse_cost_tradeoffs", "plot_cost_sweep", "score_model", "training_targets"]

DEFAULT_COST_TRADEOFFS = (1e-4, 1e-3, 3e-3, 1e-2, 3e-2)


@dataclass(frozen=True)
class SweepPoint:
    """One trained model of a sweep, scored on the test data.

    Attributes
    ----------
    name : str
        ``"plain GB"`` or ``"CEGB mu=<value>"``.
    cost_tradeoff : float
        mu (0 for plain gradient boosting).
    mean_cost : float
        Mean prediction cost per test sample (feature + evaluation cost).
    scores : dict of str to float
        ``"accuracy"`` (and ``"roc_auc"`` for two classes), or ``"precision@5"`` and
        ``"ndcg@5"`` for ranking data.
    features_used : tuple of str
        Names of the features the model splits on.
    n_trees : int
    train_seconds : float
    """

    name: str
    cost_tradeoff: float
    mean_cost: float
    scores: dict
    features_used: tuple
    n_trees: int
    train_seconds: float


@dataclass(frozen=True)
class CostSweep:
    """Result of `cost_sweep`: plain GB first, then CEGB in the order of the tradeoffs.

    Attributes
    ----------
    points : tuple of SweepPoint
    metric : str
        The main score: ``"accuracy"`` or ``"precision@5"``.
    task : str
        ``"classification"`` or ``"ranking"``.
    completed : bool
        False when the sweep was cancelled; ``points`` then holds the finished models.
    """

    points: tuple
    metric: str
    task: str
    completed: bool = True

    @property
    def costs(self):
        """(P,) mean prediction cost of each point."""
        return np.array([point.mean_cost for point in self.points])

    def scores(self, metric=None):
        """(P,) score of each point for ``metric`` (default the main one)."""
        return np.array([point.scores[metric or self.metric] for point in self.points])

    def to_dict(self):
        """JSON-able dict."""
        return {"metric": self.metric, "task": self.task, "completed": self.completed,
                "points": [{"name": p.name, "cost_tradeoff": p.cost_tradeoff,
                            "mean_cost": p.mean_cost, "scores": dict(p.scores),
                            "features_used": list(p.features_used), "n_trees": p.n_trees,
                            "train_seconds": p.train_seconds} for p in self.points]}


def parse_cost_tradeoffs(text):
    """``"1e-3, 0.01 0.1"`` -> ``[0.001, 0.01, 0.1]`` (sorted, unique); ValueError on a bad entry.

    Examples
    --------
    >>> parse_cost_tradeoffs("1e-3, 0.01  0.1")
    [0.001, 0.01, 0.1]
    """
    values = []
    for token in text.replace(",", " ").replace(";", " ").split():
        try:
            value = float(token)
        except ValueError:
            raise ValueError(f"cost tradeoff {token!r} is not a number; give values > 0 such as "
                             "1e-3, 1e-2") from None
        if not np.isfinite(value) or value <= 0:
            raise ValueError(f"cost tradeoffs must be > 0 (plain GB, mu = 0, is always "
                             f"included), got {token}")
        values.append(value)
    if not values:
        raise ValueError("give at least one cost tradeoff mu > 0, e.g. 1e-3, 1e-2")
    return sorted(set(values))


def training_targets(data):
    """Labels a classifier is trained on: binary relevance (grade > 0) for ranking data."""
    return (data.y > 0).astype(np.int64) if data.qid is not None else data.y


def check_trainable(data):
    """ValueError unless ``data`` has two classes (relevant and irrelevant rows for ranking)."""
    if np.unique(training_targets(data)).size >= 2:
        return
    if data.qid is not None:
        raise ValueError("every training document has grade 0 (or every one > 0); ranking "
                         "needs relevant and irrelevant documents")
    raise ValueError("the training labels hold a single class; a classifier needs two")


def score_model(model, data):
    """Scores of a fitted classifier on ``data``: ranking or classification metrics.

    Ranking data (with ``qid``) gets ``"precision@5"`` and ``"ndcg@5"`` of the
    grades ranked by ``predict_proba(X)[:, 1]``; other data ``"accuracy"`` and, for
    two classes present in both model and data, ``"roc_auc"``.
    """
    if data.qid is not None:
        relevance = model.predict_proba(data.X)[:, 1]
        return {"precision@5": precision_at_k(data.y, relevance, data.qid, k=5),
                "ndcg@5": ndcg_at_k(data.y, relevance, data.qid, k=5)}
    scores = {"accuracy": accuracy(data.y, model.predict(data.X))}
    if len(model.classes_) == 2 and np.isin(data.y, model.classes_).all():
        if np.unique(data.y).size == 2:
            scores["roc_auc"] = roc_auc(np.searchsorted(model.classes_, data.y),
                                        model.predict_proba(data.X)[:, 1])
    return scores


def plot_cost_sweep(sweep, ax):
    """Draw a sweep on matplotlib axes: score against mean cost, CEGB line, plain GB star.

    The x axis becomes symlog when the positive costs span more than 30x.

    Parameters
    ----------
    sweep : CostSweep
    ax : matplotlib.axes.Axes

    Returns
    -------
    ax

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> point = SweepPoint("plain GB", 0.0, 3.0, {"accuracy": 0.9}, ("a",), 10, 0.1)
    >>> ax = plot_cost_sweep(CostSweep((point,), "accuracy", "classification"),
    ...                      Figure().add_subplot())
    >>> ax.get_ylabel()
    'accuracy'
    """
    costs, scores = sweep.costs, sweep.scores()
    cegb = [i for i, p in enumerate(sweep.points) if p.cost_tradeoff > 0]
    if cegb:
        ax.plot(costs[cegb], scores[cegb], "o-", color="tab:blue", label="CEGB")
    plain = [i for i, p in enumerate(sweep.points) if p.cost_tradeoff == 0]
    if plain:
        ax.plot(costs[plain], scores[plain], "*", color="tab:red", markersize=12,
                label="plain GB")
    positive = costs[costs > 0]
    if positive.size > 1 and positive.max() / positive.min() > 30:
        ax.set_xscale("symlog", linthresh=positive.min())
    ax.set_xlabel("mean prediction cost per sample")
    ax.set_ylabel(sweep.metric)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.autoscale_view()
    _label_points(ax, [(costs[i], scores[i], f"μ={sweep.points[i].cost_tradeoff:g}")
                       for i in cegb])
    return ax


# Where a point's label may go, in points from the point, tried in this order.
_LABEL_OFFSETS = ((4, 4), (4, -11), (-4, 4), (-4, -11), (4, 14), (4, -21), (-4, 14), (-4, -21))


def _label_points(ax, points):
    """Annotate ``(x, y, text)`` points, each label at the first offset where it overlaps no
    label placed before it; a label that fits nowhere is left out (the table lists every point).
    """
    placed = []
    for x, y, text in points:
        for dx, dy in _LABEL_OFFSETS:
            label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy),
                                fontsize=7, ha="left" if dx >= 0 else "right")
            box = label.get_window_extent().expanded(1.05, 1.1)
            if not any(box.overlaps(other) for other in placed):
                placed.append(box)
                break
            label.remove()


def _check_inputs(train, test, feature_costs, cost_tradeoffs):
    for name, data in (("train", train), ("test", test)):
        if not isinstance(data, TabularData):
            raise TypeError(f"{name} must be a TabularData (from msclassify.tabular), got "
                            f"{type(data).__name__}")
    if train.n_features != test.n_features:
        raise ValueError(f"train has {train.n_features} features but test has "
                         f"{test.n_features}; load both with the same n_features")
    if (train.qid is None) != (test.qid is None):
        raise ValueError("train and test must both have queries (ranking) or neither; "
                         "check the .query files / qid fields")
    if feature_costs is None:
        feature_costs = np.ones(train.n_features)
    feature_costs = np.asarray(feature_costs, dtype=np.float64)
    if feature_costs.shape != (train.n_features,):
        raise ValueError(f"feature_costs has {feature_costs.size} values but the data has "
                         f"{train.n_features} features; give one cost per feature")
    tradeoffs = [float(mu) for mu in cost_tradeoffs]
    if not tradeoffs or any(not math.isfinite(mu) or mu <= 0 for mu in tradeoffs):
        raise ValueError(f"cost_tradeoffs must be finite and > 0 (plain GB, mu = 0, is always "
                         f"included), got {list(cost_tradeoffs)}")
    return feature_costs, tradeoffs


class _Cancelled(Exception):
    pass


def cost_sweep(train, test, feature_costs=None, cost_tradeoffs=DEFAULT_COST_TRADEOFFS, *,
               split_cost=0.0, n_estimators=100, max_leaves=15, learning_rate=0.1,
               min_samples_leaf=20, random_state=0, callback=None):
    """Train plain GB and CEGB for each cost tradeoff; score cost and accuracy on ``test``.

    Parameters
    ----------
    train, test : TabularData
        Ranking data (with ``qid``) is scored by precision@5 (main) and NDCG@5 on
        its grades and trained as binary relevance (grade > 0); other data by
        accuracy (and ROC AUC for two classes).
    feature_costs : array-like, shape (M,), optional
        Per-sample acquisition cost beta of each feature (default 1 each).
    cost_tradeoffs : sequence of float
        The CEGB tradeoffs mu (> 0) to train, besides plain GB.
    split_cost : float
        alpha, the cost of evaluating one split (0: only features cost).
    n_estimators, max_leaves, learning_rate, min_samples_leaf, random_state
        Boosting parameters shared by all models.
    callback : callable, optional
        ``callback(step, n_steps)`` after every boosting iteration of every model
        (``n_steps`` = models x ``n_estimators``); a truthy return cancels the sweep,
        which then returns the models finished so far with ``completed=False``.

    Returns
    -------
    CostSweep

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify.tabular import TabularData, split_train_test
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 3)); y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    >>> data = TabularData(X, y, None, ("cheap", "mid", "noise"))
    >>> train, test = split_train_test(data)
    >>> sweep = cost_sweep(train, test, [1, 5, 5], cost_tradeoffs=[0.01], n_estimators=20)
    >>> [p.name for p in sweep.points], sweep.metric
    (['plain GB', 'CEGB mu=0.01'], 'accuracy')
    >>> sweep.points[1].mean_cost <= sweep.points[0].mean_cost
    True
    """
    feature_costs, tradeoffs = _check_inputs(train, test, feature_costs, cost_tradeoffs)
    check_trainable(train)
    runs = [("plain GB", 0.0)] + [(f"CEGB mu={mu:g}", mu) for mu in tradeoffs]
    n_steps = len(runs) * n_estimators
    points = []
    for index, (name, mu) in enumerate(runs):
        def on_iteration(iteration, _n_iterations, offset=index * n_estimators):
            if callback is not None and callback(offset + iteration, n_steps):
                raise _Cancelled
        model = CEGBClassifier(n_estimators=n_estimators, max_leaves=max_leaves,
                               learning_rate=learning_rate, min_samples_leaf=min_samples_leaf,
                               random_state=random_state, cost_tradeoff=mu, split_cost=split_cost,
                               feature_costs=feature_costs)
        start = time.perf_counter()
        try:
            model.fit(train.X, training_targets(train), callback=on_iteration)
        except _Cancelled:
            break
        seconds = time.perf_counter() - start
        cost = model.prediction_cost(test.X)
        used = model.booster_.features_used()
        points.append(SweepPoint(name, mu, float(cost.per_sample.mean()),
                                 score_model(model, test),
                                 tuple(train.feature_names[i] for i in used),
                                 model.booster_.n_trees, seconds))
    task = "ranking" if train.qid is not None else "classification"
    return CostSweep(tuple(points), "precision@5" if task == "ranking" else "accuracy", task,
                     completed=len(points) == len(runs))
