"""``cost_tradeoff="auto"``: the cheapest model whose held-out score is near the best.

`PixelClassifier` with ``cost_tradeoff="auto"`` builds its training rows once
(features are computed once per frame), holds out part of the scribbles
(`holdout_split`), fits models along `AUTO_PATH` on the rest (0 first, then a
bisection of the others for the largest value within ``tolerance`` of the best
score so far: `search_path`), scores each, keeps the cheapest model whose
score is within ``tolerance`` of the best (`choose`) and refits that
``cost_tradeoff`` on all scribbles.

The score of a model is the lower of two class-balanced numbers
(`balanced_accuracy`): its accuracy on the held-out scribbles, and its
agreement with the ``cost_tradeoff=0`` model of the path (the "teacher", plain
boosting) on the cost-sample pixels (drawn uniformly from the labelled frames)
whose teacher probability is at least `TEACHER_CONFIDENCE`: where the teacher
itself is unsure (ambiguous texture), disagreeing with it says nothing about
accuracy. Scribbles stay away from object outlines, so every model
classifies held-out scribbles almost perfectly; the teacher agreement is what
sees a coarse model's blocky outlines (edge pixels of a rare class weigh as much
as the background). The cost of a path model is the modelled cost per image
pixel the classifier reports (`PixelClassifier.prediction_cost`: tree
evaluations + feature computation), estimated on the same cost samples.
"""

import numpy as np
from scipy import ndimage as ndi

from ..cegb import class_probabilities, most_probable_class

__all__ = ["AUTO_PATH", "MAX_PATH_FITS", "PATH_KEYS", "auto_tradeoff", "balanced_accuracy",
           "choose", "holdout_split", "path_point", "read_tradeoff_record", "search_path",
           "stroke_holdout", "tradeoff_record"]

# 0 (plain gradient boosting) and a geometric path, half a decade apart.
AUTO_PATH = (0.0, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3)
# With cost_tradeoff=0 chosen (plain boosting, the dearest refit) the refit continues the path
# model's trees (a quarter of them) instead of growing all anew. Not with a value > 0: there it
# cost EM 0.0002-0.0030 membrane F1 and raised fly-4's prediction cost 6-12 % (the path model's
# features, paid, stay in the model; docs/scribbles.md section 20).
WARM_REFIT = (0.0,)
# Path models `search_path` fits at most: 0, then a bisection of the other values.
MAX_PATH_FITS = 1 + int(np.ceil(np.log2(len(AUTO_PATH))))
# The teacher's labels count where its most probable class has at least this probability.
TEACHER_CONFIDENCE = 0.9
# Every HOLDOUT_EVERY-th frame / stroke is held out; a lone stroke loses its last quarter.
HOLDOUT_EVERY = 4
_EIGHT_CONNECTED = np.ones((3, 3), dtype=bool)


def holdout_split(label_frames, classes):
    """Which scribbled pixels to hold out, frame by frame, and how they were chosen.

    Rules, in order (each deterministic):

    1. **By frame**, with 2 or more labelled frames: frames ``3, 7, 11, ...``
       (every 4th, counting from 0) are held out, or the last frame when there
       are fewer than 4. Used only if every class is scribbled both in the kept
       and in the held-out frames.
    2. **By stroke** otherwise (`stroke_holdout` on every frame): a stroke is a
       connected component (8-connected) of one class's scribbles.

    Parameters
    ----------
    label_frames : sequence of ndarray
        ``(H, W)`` integer labels per frame (0 = unlabelled).
    classes : ndarray
        The class values scribbled.

    Returns
    -------
    held_out : list of ndarray of bool
        Per frame, the held-out pixels (a subset of the labelled ones).
    how : str
        The rule used, e.g. ``"held out 2 of 10 frames"``.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.zeros((4, 4), int); a[0] = 1; a[3] = 2
    >>> held, how = holdout_split([a, a, a], np.array([1, 2]))
    >>> [int(h.sum()) for h in held], how
    ([0, 0, 8], 'held out 1 of 3 labelled frames')
    """
    n = len(label_frames)
    if n >= 2:
        frames = [t for t in range(n) if t % HOLDOUT_EVERY == HOLDOUT_EVERY - 1] or [n - 1]
        kept = [t for t in range(n) if t not in frames]
        present = lambda ts: set(np.concatenate([np.unique(label_frames[t]) for t in ts]).tolist())
        if set(classes.tolist()) <= present(frames) & present(kept):
            held = [lab > 0 if t in frames else np.zeros(lab.shape, bool)
                    for t, lab in enumerate(label_frames)]
            return held, f"held out {len(frames)} of {n} labelled frames"
    held, n_strokes, n_split = [], 0, 0
    for lab in label_frames:
        mask, strokes, split = stroke_holdout(lab, classes)
        held.append(mask)
        n_strokes += strokes
        n_split += split
    parts = [f"{n_strokes} stroke(s)"] if n_strokes else []
    parts += [f"the last quarter of {n_split} single stroke(s)"] if n_split else []
    return held, "held out " + " and ".join(parts or ["nothing"])


def stroke_holdout(labels, classes):
    """Held-out pixels of one frame, by stroke.

    For each class, the strokes (8-connected components of its pixels) are
    numbered in scan order (`scipy.ndimage.label`); strokes ``3, 7, 11, ...``
    are held out, or the last one when the class has 2 or 3 strokes. A class
    with a single stroke keeps its first three quarters along the stroke's
    longer side (rows if its bounding box is taller than wide, else columns)
    and holds out the pixels at or beyond ``start + ceil(0.75 x extent)``: a
    100 px horizontal stroke loses its right-most 25 columns.

    Parameters
    ----------
    labels : ndarray
        ``(H, W)`` integer labels (0 = unlabelled).
    classes : ndarray
        The class values to split.

    Returns
    -------
    held_out : ndarray of bool, shape (H, W)
    n_held_strokes : int
        Whole strokes held out.
    n_split_strokes : int
        Single strokes split in two.

    Examples
    --------
    >>> import numpy as np
    >>> lab = np.zeros((5, 12), int); lab[0, :8] = 1; lab[4, 2:6] = 2; lab[4, 8:12] = 2
    >>> held, whole, split = stroke_holdout(lab, np.array([1, 2]))
    >>> np.flatnonzero(held[0]).tolist(), np.flatnonzero(held[4]).tolist(), whole, split
    ([6, 7], [8, 9, 10, 11], 1, 1)
    """
    held = np.zeros(labels.shape, dtype=bool)
    n_held, n_split = 0, 0
    for value in classes:
        strokes, count = ndi.label(labels == value, structure=_EIGHT_CONNECTED)
        if count >= 2:
            chosen = [s for s in range(1, count + 1) if s % HOLDOUT_EVERY == 0] or [count]
            held |= np.isin(strokes, chosen)
            n_held += len(chosen)
        elif count == 1:
            ys, xs = np.nonzero(strokes)
            along = ys if np.ptp(ys) > np.ptp(xs) else xs
            start, extent = int(along.min()), int(np.ptp(along)) + 1
            cut = start + int(np.ceil(0.75 * extent))
            held[ys[along >= cut], xs[along >= cut]] = True
            n_split += 1
    return held, n_held, n_split


def balanced_accuracy(y_true, y_pred, n_classes):
    """Mean over the classes present in ``y_true`` of the share of their pixels predicted right.

    Class-balanced, so a rare class (a thin membrane, a fly's edge) weighs as
    much as the background that dominates the pixels.

    Examples
    --------
    >>> balanced_accuracy(np.array([0, 0, 0, 0, 1, 1]), np.array([0, 0, 0, 0, 0, 1]), 2)
    0.75
    """
    recalls = [float(np.mean(y_pred[y_true == k] == k)) for k in range(n_classes)
               if np.any(y_true == k)]
    return float(np.mean(recalls))


# The entries of a path table (`path_point`), as fitted models hold and model files store them.
PATH_KEYS = ("cost_tradeoff", "score", "scribble_score", "teacher_agreement", "cost_per_pixel",
             "evaluation_per_pixel", "features_per_pixel", "features_used")
_SCORE_KEYS = ("score", "scribble_score", "teacher_agreement")


def path_point(booster, cost_tradeoff, scribble_score, teacher_agreement, X_cost, cost_weight,
               batch_costs, feature_ids):
    """The path table entry of a model fitted with ``cost_tradeoff``.

    Its ``score`` is the lower of ``scribble_score`` (balanced accuracy on the
    held-out scribbles) and ``teacher_agreement`` (balanced agreement with the
    ``cost_tradeoff=0`` model on the cost-sample pixels it is sure of). Its cost per image
    pixel is the tree evaluation cost averaged over the cost samples (weighted by
    ``cost_weight``) plus the ``batch_cost`` of the features it uses, the two
    terms of `PixelClassifier.prediction_cost`.
    """
    evaluation = booster.prediction_cost(X_cost).evaluation
    evaluation = float(np.average(evaluation, weights=cost_weight))
    used = booster.features_used()
    features = float(batch_costs[used].sum())
    return {"cost_tradeoff": float(cost_tradeoff),
            "score": float(min(scribble_score, teacher_agreement)),
            "scribble_score": float(scribble_score), "teacher_agreement": float(teacher_agreement),
            "cost_per_pixel": evaluation + features, "evaluation_per_pixel": evaluation,
            "features_per_pixel": features, "features_used": [feature_ids[i] for i in used]}


def choose(path, tolerance):
    """Index of the cheapest model within ``tolerance`` of the best score, and why.

    The best score is the highest one (ties: the smaller ``cost_tradeoff``).

    Parameters
    ----------
    path : sequence of dict
        Entries with ``cost_tradeoff``, ``score`` and ``cost_per_pixel``.
    tolerance : float
        Score a model may lose against the best one and still be chosen.

    Returns
    -------
    index : int
        Ties in cost go to the higher score, then to the smaller ``cost_tradeoff``.
    reason : str
        One sentence.

    Examples
    --------
    >>> path = [dict(cost_tradeoff=0.0, score=0.99, cost_per_pixel=30.0),
    ...         dict(cost_tradeoff=1e-4, score=0.985, cost_per_pixel=3.0),
    ...         dict(cost_tradeoff=1e-3, score=0.90, cost_per_pixel=1.0)]
    >>> choose(path, 0.01)[0], choose(path, 0.001)[0]
    (1, 0)
    """
    best = max(range(len(path)), key=lambda i: (path[i]["score"], -path[i]["cost_tradeoff"]))
    best_score = path[best]["score"]
    good = [i for i, p in enumerate(path) if p["score"] >= best_score - tolerance]
    chosen = min(good, key=lambda i: (path[i]["cost_per_pixel"], -path[i]["score"],
                                      path[i]["cost_tradeoff"]))
    p = path[chosen]
    if chosen == best:
        reason = (f"cost_tradeoff={p['cost_tradeoff']:g} has the best held-out score "
                  f"({p['score']:.4f}) of the {len(path)} fitted and no model within "
                  f"{tolerance:g} of it is cheaper ({p['cost_per_pixel']:.3g} operations "
                  "per pixel)")
    else:
        reason = (f"cost_tradeoff={p['cost_tradeoff']:g} is the cheapest of the {len(path)} "
                  f"fitted models ({p['cost_per_pixel']:.3g} vs {path[best]['cost_per_pixel']:.3g}"
                  f" operations per pixel) whose held-out score ({p['score']:.4f}) "
                  f"is within {tolerance:g} of the best ({best_score:.4f}, "
                  f"cost_tradeoff={path[best]['cost_tradeoff']:g})")
    return chosen, reason


def search_path(fit_and_score, tolerance, values=AUTO_PATH):
    """Fit 0, then bisect the other values for the largest within ``tolerance`` of the best.

    ``values[0]`` (0: plain boosting, the most accurate and the dearest) is fitted
    first. The other values are bisected for the largest one that passes, a
    model whose score is within ``tolerance`` of the best score so far: the
    middle of the values not yet settled is fitted (rounding up, towards the
    cheaper end); if it passes, the search goes on among the larger values, else
    among the smaller ones. When the score falls as the value grows (the usual
    case) the values that pass are the smallest ones, so the largest is found
    with at most ``1 + ceil(log2(len(values)))`` fits (4 of the 6 of `AUTO_PATH`)
    and `choose` picks what it would pick from the whole path; the values not
    fitted are left out of the table.

    Parameters
    ----------
    fit_and_score : callable
        ``fit_and_score(cost_tradeoff) -> dict`` with at least ``score`` (a
        `path_point`).
    tolerance : float
        As in `choose`.
    values : sequence of float
        Increasing, from 0.

    Returns
    -------
    path : list of dict
        The points fitted, in the order of ``values``.

    Examples
    --------
    >>> scores = {0.0: 0.99, 1e-5: 0.99, 3e-5: 0.99, 1e-4: 0.988, 3e-4: 0.97, 1e-3: 0.95}
    >>> fitted = []
    >>> def fit(mu):
    ...     fitted.append(mu)
    ...     return dict(cost_tradeoff=mu, score=scores[mu])
    >>> [p["cost_tradeoff"] for p in search_path(fit, 0.005, tuple(scores))]
    [0.0, 0.0001, 0.0003, 0.001]
    >>> fitted
    [0.0, 0.0001, 0.001, 0.0003]
    """
    points = {0: fit_and_score(values[0])}
    best = points[0]["score"]
    passes, fails = 0, len(values)          # the largest index known to pass, the smallest to fail
    while fails - passes > 1:
        index = (passes + fails + 1) // 2
        points[index] = fit_and_score(values[index])
        best = max(best, points[index]["score"])
        if points[index]["score"] >= best - tolerance:
            passes = index
        else:
            fails = index
    return [points[index] for index in sorted(points)]


class _PathProgress:
    """The user's ``callback(iteration, n)`` over all fits of the path and the refit."""

    def __init__(self, callback, n_fits):
        self.callback, self.n_fits, self.fit, self.stopped = callback, n_fits, 0, False

    def __call__(self, iteration, n_iterations):
        stop = self.callback(self.fit * n_iterations + iteration, self.n_fits * n_iterations)
        self.stopped = self.stopped or bool(stop)
        return stop


def auto_tradeoff(fit_core, label_frames, scribbled_rows, classes, X, y, sample_weight,
                  cost_weight, tolerance, batch_costs, feature_ids, callback=None):
    """Search the `AUTO_PATH` (`search_path`), choose a ``cost_tradeoff`` (`choose`) and refit
    it on all scribbles.

    Parameters
    ----------
    fit_core : callable
        ``fit_core(cost_tradeoff, sample_weight, callback, path, init) -> Booster``
        trains on the rows ``X`` with the given loss weights; ``path`` is True for
        the models of the path (which may be fitted on fewer rows: they only rank
        the values) and False for the model returned, which continues the trees of
        ``init`` (the chosen path model if its value is in `WARM_REFIT`; else None:
        a fresh fit).
    label_frames : sequence of ndarray
        The ``(H, W)`` labels of the frames the rows come from.
    scribbled_rows : ndarray of int
        The rows of their labelled pixels, frame by frame in ``np.nonzero`` order
        (`msclassify.pixel.training_set`); other rows with ``sample_weight > 0``
        (pixels labelled by a distillation teacher) are always trained on.
    classes : ndarray
        The class values; ``y`` holds their indices.
    X, y, sample_weight, cost_weight : ndarray
        The training rows (labelled pixels and cost samples).
    tolerance : float
        Held-out balanced accuracy a cheaper model may lose.
    batch_costs : ndarray
        Whole-image cost per pixel of each bank feature.
    feature_ids : sequence of str
        Ids of the bank's features.
    callback : callable, optional
        ``callback(iteration, n_iterations)`` counted over every fit (path and
        refit); a truthy return stops: the model being fitted is kept as it is.

    Returns
    -------
    booster : msclassify.cegb.Booster
    cost_tradeoff : float
    path : list of dict
        One `path_point` per fitted model, in `AUTO_PATH` order (the values
        `search_path` skipped are left out); empty if nothing could be held out or
        training was stopped.
    reason : str
    """
    labelled = np.asarray(scribbled_rows)
    held, how = holdout_split(label_frames, classes)
    flags = np.concatenate([h[lab > 0] for h, lab in zip(held, label_frames)])
    if flags.size != labelled.size:
        raise RuntimeError("the training rows do not match the labelled pixels of the frames")
    if not flags.any():
        booster = fit_core(0.0, sample_weight, callback, False, None)
        return booster, 0.0, [], ("too few scribbles to hold any out, so the most accurate "
                                  "setting, cost_tradeoff=0, was used; scribble longer or "
                                  "more strokes to let the cost tradeoff be chosen")
    held_rows = labelled[flags]
    weights = sample_weight.copy()
    weights[held_rows] = 0.0
    X_held, y_held = X[held_rows], y[held_rows].astype(np.int64)
    cost_rows = cost_weight > 0
    X_cost, cost_weight = X[cost_rows], cost_weight[cost_rows]
    progress = None if callback is None else _PathProgress(callback, MAX_PATH_FITS + 1)
    teacher, sure, models = None, None, {}

    def fit_and_score(cost_tradeoff):
        nonlocal teacher, sure
        booster = fit_core(cost_tradeoff, weights, progress, True, None)
        models[cost_tradeoff] = booster
        if progress is not None and progress.stopped:
            raise _Stopped(booster, cost_tradeoff)
        if teacher is None:                                    # the search starts at 0
            proba = class_probabilities(booster.predict_raw(X_cost))
            sure = proba.max(axis=1) >= TEACHER_CONFIDENCE
            sure = sure if sure.any() else np.ones_like(sure)
            teacher = np.argmax(proba, axis=1)[sure]
        if progress is not None:
            progress.fit += 1
        return path_point(
            booster, cost_tradeoff,
            balanced_accuracy(y_held, most_probable_class(booster.predict_raw(X_held)),
                              classes.size),
            balanced_accuracy(teacher, most_probable_class(booster.predict_raw(X_cost[sure])),
                              classes.size),
            X_cost, cost_weight, batch_costs, feature_ids)

    try:
        path = search_path(fit_and_score, tolerance)
    except _Stopped as stop:
        return stop.booster, stop.cost_tradeoff, [], (
            f"training was stopped while fitting cost_tradeoff={stop.cost_tradeoff:g} of the "
            "path; that model (trained on the kept part of the scribbles) is kept")
    chosen, reason = choose(path, tolerance)
    cost_tradeoff = path[chosen]["cost_tradeoff"]
    if progress is not None:
        progress.fit = progress.n_fits - 1                     # the refit is the last fit
    skipped = len(AUTO_PATH) - len(path)
    skipped = f" ({skipped} value(s) of the path not fitted: bisected)" if skipped else ""
    init = models[cost_tradeoff] if cost_tradeoff in WARM_REFIT else None
    return (fit_core(cost_tradeoff, sample_weight, progress, False, init), cost_tradeoff, path,
            f"{reason}{skipped}; scored on {held_rows.size} held-out scribbled pixels ({how}) "
            f"and {int(sure.sum())} pixels the cost_tradeoff=0 model is sure of; refit on all "
            "scribbles")


class _Stopped(Exception):
    """The user's callback stopped a fit of the path."""

    def __init__(self, booster, cost_tradeoff):
        super().__init__(cost_tradeoff)
        self.booster, self.cost_tradeoff = booster, cost_tradeoff


def tradeoff_record(cost_tradeoff, path, reason):
    """What a model file stores of the choice: JSON-able, read back by `read_tradeoff_record`."""
    return {"cost_tradeoff": float(cost_tradeoff), "path": path, "reason": str(reason)}


def read_tradeoff_record(record, requested):
    """``(cost_tradeoff, path, reason)`` from a model file's record, validated.

    Parameters
    ----------
    record : dict or None
        As `tradeoff_record` wrote it; None for files written before it existed
        (then ``requested`` must be a number: the value given).
    requested : float or "auto"
        The model's ``cost_tradeoff`` parameter.

    Raises
    ------
    ValueError
        Naming what is wrong with the record.

    Examples
    --------
    >>> read_tradeoff_record(None, 2e-4)
    (0.0002, None, 'cost_tradeoff=0.0002 was given')
    >>> read_tradeoff_record({"cost_tradeoff": -1.0, "path": None, "reason": ""}, "auto")
    Traceback (most recent call last):
        ...
    ValueError: the chosen cost_tradeoff must be a finite number >= 0, got -1.0
    """
    if record is None:
        if requested == "auto":
            raise ValueError("cost_tradeoff is 'auto' but the file does not record the choice")
        return float(requested), None, f"cost_tradeoff={float(requested):g} was given"
    if not isinstance(record, dict) or set(record) != {"cost_tradeoff", "path", "reason"}:
        raise ValueError("the cost tradeoff record must hold exactly cost_tradeoff, path and "
                         "reason")
    chosen = _finite(record["cost_tradeoff"], "the chosen cost_tradeoff")
    path, reason = record["path"], record["reason"]
    if not isinstance(reason, str):
        raise ValueError(f"the cost tradeoff reason must be a string, got {reason!r}")
    if requested != "auto":
        if path is not None or chosen != requested:
            raise ValueError(f"cost_tradeoff={requested!r} was given but the file records "
                             f"{chosen!r} and a path")
        return chosen, None, reason
    if not isinstance(path, list):
        raise ValueError("cost_tradeoff is 'auto' but the file holds no path table")
    for point in path:
        if not isinstance(point, dict) or set(point) != set(PATH_KEYS):
            raise ValueError(f"every path entry must hold exactly {', '.join(PATH_KEYS)}")
        for key in PATH_KEYS[:-1]:
            _finite(point[key], f"path entry {key}")
        for key in _SCORE_KEYS:
            if point[key] > 1:
                raise ValueError(f"path entry {key} must be at most 1, got {point[key]!r}")
        used = point["features_used"]
        if not isinstance(used, list) or not all(isinstance(f, str) for f in used):
            raise ValueError("path entry features_used must be a list of feature ids")
    if path and chosen not in [point["cost_tradeoff"] for point in path]:
        raise ValueError(f"the chosen cost_tradeoff {chosen!r} is not on the recorded path")
    return chosen, path, reason


def _finite(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) \
            or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)
