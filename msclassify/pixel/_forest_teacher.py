"""A forest of extremely randomised trees as the distillation teacher (opt-in).

On a handful of clicks the model copies its distillation teacher, and plain
boosting on ~1,000 clicked pixels loses to scikit-image's recipe (a random
forest) by 0.016 membrane F1 on the EM slices (docs/scribbles.md, section 11).
A forest of extremely randomised trees (Geurts et al. 2006) on the same
full-resolution features does not: averaging 50 trees with random thresholds
varies less with which pixels were clicked than 50 boosted trees fitted in
sequence to the same few pixels. With it as the teacher the default model's
margin to the recipe on EM clicks goes from -0.016 to -0.0004 (8 draws) and on
the larvae clicks from -0.005 to +0.068 (10 draws); but its outlines are less
precise, and on the real fly crop of ``tests/test_real_fly_outlines.py`` the
model's outline error rises from 0.18-0.19 to 0.31-0.35 (docs/scribbles.md,
section 14). So it is opt-in: ``PixelClassifier(teacher="forest")``. So is
``teacher="mean"`` (`MeanTeacher`), which fits both and gives a pixel the
class of the mean of their raw scores: the boosted teacher's outlines with
part of the forest's gain (docs/scribbles.md, section 16). The teacher only
labels training pixels: prediction costs the same.
"""

import numpy as np

__all__ = ["BLEND_DISTANCE", "BLEND_FAR_SHARE", "BLEND_FOREST_TREES", "FOREST_TREES",
           "PROBABILITY_FLOOR", "BlendTeacher", "ForestTeacher", "MeanTeacher"]

# BlendTeacher: the boosted teacher's weight falls as exp(-d / BLEND_DISTANCE), d in pixels to
# the nearest scribble (docs/scribbles.md, section 24: 10 and 30 measured).
BLEND_DISTANCE = 30.0
# BlendTeacher: the forest is asked in a frame where it outweighs the boosted teacher
# (d > BLEND_DISTANCE * ln 2) on at least this share of the pixels; in a frame scribbled more
# densely the boosted teacher alone labels it (docs/scribbles.md, section 28).
BLEND_FAR_SHARE = 0.5
# Trees of a forest teacher (teacher="forest", "mean"), and of the blend's forest
# (docs/scribbles.md, section 25: 25 as accurate as 50).
FOREST_TREES = 50
BLEND_FOREST_TREES = 25
# Probabilities are clipped to [floor, 1 - floor] before the log (|log-odds| <= 6.9).
PROBABILITY_FLOOR = 1e-3
# ForestTeacher.predict_raw gives a thread at least this many rows.
_ROWS_PER_THREAD = 8192


def _threads():
    """Numba's threads (``NUMBA_NUM_THREADS``, `numba.set_num_threads`): the forest's too."""
    import numba
    return numba.get_num_threads()


class ForestTeacher:
    """scikit-learn's ``ExtraTreesClassifier(n_estimators, max_depth)`` with raw scores.

    Parameters
    ----------
    n_estimators : int, optional
    max_depth : int, optional
        The size of scikit-image's recipe's random forest (50 trees, depth 10).
    random_state : int or None, optional

    Examples
    --------
    >>> X = np.linspace(0, 1, 100, dtype=np.float32)[:, None]
    >>> teacher = ForestTeacher(n_estimators=5, random_state=0).fit(
    ...     X, (X[:, 0] > 0.5).astype(float), np.ones(100), 2)
    >>> raw = teacher.predict_raw(np.array([[0.1], [0.9]], np.float32))
    >>> bool(raw[0] < 0 < raw[1])
    True
    """

    def __init__(self, n_estimators=FOREST_TREES, max_depth=10, random_state=None):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.random_state = random_state

    def fit(self, X, y, sample_weight, n_classes):
        """Fit on rows ``X`` with class indices ``y`` (0 .. ``n_classes`` - 1) and weights.

        The trees grow on Numba's threads: each tree's seed is drawn first, so
        they are the trees one thread grows."""
        from sklearn.ensemble import ExtraTreesClassifier
        self.n_classes_ = int(n_classes)
        self.forest_ = ExtraTreesClassifier(
            n_estimators=self.n_estimators, max_depth=self.max_depth, n_jobs=_threads(),
            random_state=self.random_state).fit(X, y.astype(np.intp), sample_weight=sample_weight)
        self.forest_.n_jobs = 1
        return self

    def predict_raw(self, X):
        """Log-odds of class 1, shape (n,) (two classes), or log-probabilities, (n, K).

        Many rows are split among Numba's threads, each summing its rows' trees
        in their order: the scores one thread gives."""
        threads = min(_threads(), X.shape[0] // _ROWS_PER_THREAD)
        if threads > 1:
            from concurrent.futures import ThreadPoolExecutor
            bounds = np.linspace(0, X.shape[0], threads + 1).astype(int)
            with ThreadPoolExecutor(threads) as pool:
                return np.concatenate(list(pool.map(
                    lambda a, b: self.predict_raw(X[a:b]), bounds[:-1], bounds[1:])))
        proba = np.zeros((X.shape[0], self.n_classes_))
        proba[:, self.forest_.classes_] = self.forest_.predict_proba(X)
        proba = np.clip(proba, PROBABILITY_FLOOR, 1 - PROBABILITY_FLOOR)
        if self.n_classes_ == 2:
            return np.log(proba[:, 1]) - np.log(proba[:, 0])
        return np.log(proba)


class MeanTeacher:
    """Several teachers as one: the class of the mean of their raw scores.

    `predict_raw` returns the *sum* of the teachers' raw scores (log-odds, or
    per-class log-probabilities / logits): its most probable class is the
    mean's, and its margin adds the teachers' margins, so a pixel where both
    teachers are sure stays sure for the coarse-to-fine class map
    (`msclassify.pixel._distill.teacher_classes` refines where the margin is
    below 4). The mean itself would halve the margin and send far more pixels
    to refinement (a 2-class RGB photo: distillation 2-3x slower).

    Parameters
    ----------
    teachers : sequence
        Fitted teachers with ``predict_raw`` (`msclassify.cegb.Booster`, `ForestTeacher`).

    Examples
    --------
    >>> class Fixed:
    ...     def __init__(self, raw): self.raw = np.asarray(raw, float)
    ...     def predict_raw(self, X): return self.raw
    >>> MeanTeacher([Fixed([4.0, 1.0]), Fixed([-1.0, -3.0])]).predict_raw(None).tolist()
    [3.0, -2.0]
    """

    def __init__(self, teachers):
        self.teachers = list(teachers)

    def predict_raw(self, X):
        """The sum of the teachers' raw scores at rows ``X``, shape (n,) or (n, K)."""
        return np.sum([np.asarray(t.predict_raw(X), np.float64) for t in self.teachers], axis=0)


class BlendTeacher:
    """The boosted teacher near the scribbles, the forest far from them.

    At a pixel ``d`` pixels from the nearest scribbled pixel the raw score is
    ``w * near + (1 - w) * far`` with ``w = exp(-d / distance)``: on a scribble
    the boosted teacher alone, 30 px away (the default ``distance``) a weight of
    0.37 for it, 90 px away 0.05. Where labels are sparse (a few clicks in a
    large frame) the forest, which varies less with which pixels were clicked,
    decides (docs/scribbles.md, section 24; 10 px gave the forest too much of
    the fly clicks' outlines). Where they are dense (the forest would outweigh
    the boosted teacher, ``d > distance * ln 2``, on less than
    ``BLEND_FAR_SHARE`` of a frame's pixels: `frame_distance` returns None) the
    boosted teacher alone labels the frame, and a forest that no frame needs is
    never fitted (docs/scribbles.md, section 28). A teacher whose weight is 0
    at every row is not asked: the forest when all rows are scribbled (``d`` =
    0), the boosted one in a frame without scribbles (``d`` = inf). Without
    distances (`predict_raw`'s ``distance`` None: the cost samples of
    ``class_weight="auto"``, a densely scribbled frame) it is the boosted teacher.

    Parameters
    ----------
    near : fitted teacher with ``predict_raw``
        The boosted teacher (`msclassify.cegb.Booster`).
    far : fitted teacher with ``predict_raw``, or a callable without arguments
        The `ForestTeacher`, or what fits it (called when a row first needs it).
    distance : float, optional

    Examples
    --------
    >>> class Fixed:
    ...     def __init__(self, raw): self.raw = np.asarray(raw, float)
    ...     def predict_raw(self, X): return self.raw[:len(X)]
    >>> teacher = BlendTeacher(Fixed([4.0, 4.0]), Fixed([-2.0, -2.0]), distance=10)
    >>> teacher.predict_raw(np.zeros((2, 1)), np.array([0.0, np.inf])).tolist()
    [4.0, -2.0]
    >>> teacher.predict_raw(np.zeros((2, 1))).tolist()
    [4.0, 4.0]
    >>> dense = np.zeros((40, 40), int); dense[::10, ::10] = 1
    >>> teacher.frame_distance(dense) is None, teacher.frame_distance(dense[:1, :1]) is None
    (True, True)
    >>> float(teacher.frame_distance(np.pad(dense[:1, :1], (0, 39)))[39, 39])
    55.154328932550705
    """

    def __init__(self, near, far, distance=BLEND_DISTANCE):
        self.near = near
        self.far = far
        self.distance = float(distance)

    def frame_distance(self, labels):
        """Pixels of a frame (or volume) to its nearest scribble, or None if densely scribbled.

        ``labels``: 0 unlabelled. None when the forest would outweigh the
        boosted teacher on less than ``BLEND_FAR_SHARE`` of the pixels: the
        frame's class map is then the boosted teacher's."""
        from scipy import ndimage as ndi
        labels = np.asarray(labels)
        if not labels.any():
            return np.full(labels.shape, np.inf)
        d = ndi.distance_transform_edt(labels == 0)
        far = np.count_nonzero(d > self.distance * np.log(2))
        return d if far >= BLEND_FAR_SHARE * d.size else None

    def predict_raw(self, X, distance=None):
        """Raw scores at rows ``X`` whose pixels lie ``distance`` px from the nearest scribble."""
        if distance is None:
            return np.asarray(self.near.predict_raw(X), np.float64)
        w = np.exp(-np.asarray(distance, np.float64) / self.distance)
        # a teacher that weighs 0 at every row is not asked (exact: w * near + (1 - w) * far);
        # asking each only for its rows copied them and cost more than it saved (section 25)
        near = np.asarray(self.near.predict_raw(X), np.float64) if w.any() else None
        far = None
        if (w < 1).any():
            if not hasattr(self.far, "predict_raw"):      # fitted the first time it is needed
                self.far = self.far()
            far = np.asarray(self.far.predict_raw(X), np.float64)
        if (near if near is not None else far).ndim == 2:
            w = w[:, None]
        if far is None:
            return w * near
        return (1 - w) * far if near is None else w * near + (1 - w) * far
