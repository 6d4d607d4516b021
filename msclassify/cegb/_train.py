"""Functional training entry point of the CEGB core."""

from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numba
import numpy as np

from ._binning import BinMapper
from ._booster import Booster
from ._grow import CostState, TreeGrower, grow_class_trees
from ._kernels import PARALLEL_LEAF_WORK
from ._losses import make_objective
from ._params import CEGBParams
from ._validation import check_features, check_weights

# Rows x features from which the class trees of a fit with a cost penalty grow side by side. On
# two threads a 4-class photo's model (48,440 x 300) is estimated to gain ~0.3 s of wall on an
# idle box (per-thread CPU) but took 4 % more wall and 7 % more CPU on a busy one, and the
# widget's live model (11,152 x 150) more of both: smaller fits grow a tree at a time.
COUPLED_SIDE_BY_SIDE_WORK = 1 << 22


def train(X, y, objective="binary", params=None, n_classes=None, sample_weight=None,
          cost_weight=None, callback=None, bin_cache=None, init_booster=None):
    """Train a cost-efficient gradient-boosted ensemble.

    Parameters
    ----------
    X : array-like, shape (N, M)
        Features; NaN is missing (learned default direction), infinities are rejected.
    y : array-like, shape (N,)
        Targets: real values (regression), 0/1 (binary), 0..K-1 (multiclass).
    objective : {"regression", "binary", "multiclass"} or callable
        A callable ``f(raw, y) -> (grad, hess)`` gives custom gradients (raw has
        shape (N,) or (N, n_classes)).
    params : CEGBParams or dict, optional
    n_classes : int, optional
        Number of outputs for "multiclass" and multi-output callables.
    sample_weight : array-like, shape (N,), optional
        Weight of each sample in the loss. Rows with weight 0 still count in the
        cost terms: the pixel classifier uses them to represent a whole image.
    cost_weight : array-like, shape (N,), optional
        Weight of each sample in the cost terms (default 1).
    callback : callable, optional
        ``callback(iteration, n_iterations)`` after every iteration; a truthy
        return value stops training (the trees so far are kept).
    bin_cache : dict, optional
        Shares the binned features between fits on the same ``X`` (a path of
        models that differ only in their parameters): an empty dict is filled
        with this fit's binning, which later fits given the same dict reuse when
        ``X``'s shape, the rows carrying loss weight, ``max_bins`` and
        ``random_state`` match (the caller keeps ``X`` unchanged). The models are
        those of fits without it.
    init_booster : Booster, optional
        Warm start: its trees are the first iterations of the model and boosting
        goes on from its raw scores on ``X`` up to ``n_estimators`` iterations in
        all (none if it has as many). The features it splits on count as already
        computed (their whole-image cost is paid). It must have ``X``'s features
        and outputs, and ``feature_costs`` must be all zero (the per-row costs it
        paid are not tracked).

    Returns
    -------
    Booster

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify.cegb import train
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = (X[:, 0] > 0).astype(float)
    >>> booster = train(X, y, "binary", {"n_estimators": 10, "feature_costs": [1, 1, 1],
    ...                                  "cost_tradeoff": 0.01})
    >>> booster.features_used().tolist()
    [0]
    """
    p = CEGBParams.from_any(params)
    X = check_features(X)
    n_rows, n_features = X.shape
    beta, gamma, share = p.validate(n_features)
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or y.shape[0] != n_rows:
        raise ValueError(f"y must have one value per row of X ({n_rows}), got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinite values")
    sample_weight = check_weights(sample_weight, n_rows, "sample_weight")
    cost_weight = check_weights(cost_weight, n_rows, "cost_weight")
    if not sample_weight.sum() > 0:
        raise ValueError("sample_weight is all zero: at least one sample must carry loss weight")
    loss = make_objective(objective, n_classes)
    if loss.name == "binary" and not np.all((y == 0) | (y == 1)):
        raise ValueError("objective='binary' needs y in {0, 1}")
    if loss.name == "multiclass" and not np.all((y == np.round(y)) & (y >= 0) & (y < loss.n_outputs)):
        raise ValueError(f"objective='multiclass' needs integer y in [0, {loss.n_outputs})")

    rng = np.random.default_rng(p.random_state)
    # Thresholds come from the samples that carry loss; cost-only rows are just routed.
    carries_loss = sample_weight > 0
    seed = int(rng.integers(2**31))
    key = (X.shape, p.max_bins, seed)
    if bin_cache is not None and bin_cache.get("key") == key \
            and np.array_equal(bin_cache["carries_loss"], carries_loss):
        binner, Xb = bin_cache["binner"], bin_cache["Xb"]
    else:
        binner = BinMapper(p.max_bins, seed).fit(X if carries_loss.all() else X[carries_loss])
        Xb = binner.transform(X)
        if bin_cache is not None:
            bin_cache.update(key=key, carries_loss=carries_loss, binner=binner, Xb=Xb)
    labelled = carries_loss.astype(np.float64)
    state = CostState(n_rows, n_features)
    grower = TreeGrower(Xb, binner, p, beta, gamma, share, labelled, cost_weight, state)

    K = loss.n_outputs
    trees = []
    if init_booster is None:
        init = loss.init_score(y, sample_weight) if sample_weight.sum() > 0 else np.zeros(K)
        raw = np.tile(init, (n_rows, 1))
    else:
        _check_init_booster(init_booster, n_features, K, beta)
        init, trees = init_booster.init_score, list(init_booster.trees)
        raw = init_booster.predict_raw(X).reshape(n_rows, K)
        state.used[init_booster.features_used()] = True
    n_sample = max(1, int(round(p.subsample * n_rows)))
    # The trees of a round grow side by side (`grow_class_trees`), one per Numba thread, when
    # their roots are worth threads (smaller trees take less than waking a thread costs), and
    # trees that a cost penalty couples only when large (docs/scribbles.md, section 21).
    least_work = COUPLED_SIDE_BY_SIDE_WORK if grower.coupled_by_used else PARALLEL_LEAF_WORK
    side_by_side = 1 if K == 1 or n_sample < n_rows or grower.coupled_by_rows \
        or n_rows * n_features < least_work else min(K, numba.get_num_threads())
    growers = [grower] + [TreeGrower(Xb, binner, p, beta, gamma, share, labelled, cost_weight,
                                     state) for _ in range(side_by_side - 1)]
    with ThreadPoolExecutor(side_by_side - 1) if side_by_side > 1 else nullcontext() as pool:
        trees = _boost(X, y, p, loss, sample_weight, raw, trees, growers, pool, n_sample, rng,
                       callback)
    return Booster(trees, init, n_features, loss.name, p.split_cost, beta, gamma, share,
                   params=p.to_dict())


def _boost(X, y, p, loss, sample_weight, raw, trees, growers, pool, n_sample, rng, callback):
    """``trees`` (a warm start's, or none) continued to ``p.n_estimators`` rounds from the
    scores ``raw`` (updated in place; fewer rounds if ``callback`` stops them); ``pool`` grows
    each round's class trees side by side."""
    n_rows, n_features = X.shape
    K = loss.n_outputs
    all_rows = np.arange(n_rows, dtype=np.int32)
    n_active = max(1, int(round(p.colsample * n_features)))
    trees = list(trees)
    state, coupled = growers[0].state, growers[0].coupled_by_used
    # Side by side only after a round that paid no new feature: paying ones come in runs (the
    # first rounds, a large cost_tradeoff), and each makes the trees grown beside it wasted.
    calm = not coupled
    for iteration in range(len(trees) // K, p.n_estimators):
        scores = raw[:, 0] if K == 1 else raw
        grad, hess = loss.gradients(scores, y, sample_weight)
        grad, hess = grad.reshape(n_rows, K), hess.reshape(n_rows, K)
        if p.hessian == "unit":
            hess = np.repeat(sample_weight[:, None], K, axis=1)
        if n_sample < n_rows:
            in_sample = np.zeros(n_rows, dtype=bool)
            in_sample[rng.choice(n_rows, n_sample, replace=False)] = True
            sampled, outside = all_rows[in_sample], all_rows[~in_sample]
        else:
            sampled, outside = all_rows, None
        active = np.zeros(n_features, dtype=np.bool_)
        active[rng.choice(n_features, n_active, replace=False)] = True
        paid = state.used.copy()
        if pool is None or not calm:
            round_trees = ((k, growers[0].grow(np.ascontiguousarray(grad[:, k]),
                                               np.ascontiguousarray(hess[:, k]), sampled,
                                               active, outside)) for k in range(K))
        else:
            round_trees = grow_class_trees(growers, pool, grad, hess, sampled, active)
        for k, (tree, leaf_of_row) in round_trees:
            raw[:, k] += tree["value"][leaf_of_row]
            trees.append(tree)
        calm = not coupled or np.array_equal(paid, state.used)
        if callback is not None and callback(iteration + 1, p.n_estimators):
            break
    return trees


def _check_init_booster(booster, n_features, n_outputs, feature_costs):
    """Raise ValueError unless ``booster`` can start a fit of these features and outputs."""
    if not isinstance(booster, Booster):
        raise ValueError(f"init_booster must be a Booster, got {type(booster).__name__}")
    if booster.n_features != n_features or booster.n_outputs != n_outputs:
        raise ValueError(f"init_booster has {booster.n_features} features and "
                         f"{booster.n_outputs} outputs, the fit {n_features} and {n_outputs}")
    if np.any(feature_costs > 0):
        raise ValueError("init_booster needs feature_costs all zero (per-row costs it paid "
                         "are not tracked)")
