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

__all__ = ["BLEND_DISTANCE", "BLEND_FLOOR", "PROBABILITY_FLOOR", "BlendTeacher", "ForestTeacher",
           "MeanTeacher", "ScribbleDistance"]

# BlendTeacher: the boosted teacher's weight falls as exp(-d / BLEND_DISTANCE), d in pixels to
# the nearest scribble (docs/scribbles.md, section 24: 10 and 30 measured).
BLEND_DISTANCE = 30.0
# ... and is 0 where it would be below BLEND_FLOOR (d >= 30 ln 1000 = 207 px): the boosted
# teacher is not predicted there, and a raw score moves by at most 1e-3 |near - far|
# (docs/scribbles.md, section 25).
BLEND_FLOOR = 1e-3
# Probabilities are clipped to [floor, 1 - floor] before the log (|log-odds| <= 6.9).
PROBABILITY_FLOOR = 1e-3


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

    def __init__(self, n_estimators=50, max_depth=10, random_state=None):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.random_state = random_state

    def fit(self, X, y, sample_weight, n_classes):
        """Fit on rows ``X`` with class indices ``y`` (0 .. ``n_classes`` - 1) and weights."""
        from sklearn.ensemble import ExtraTreesClassifier
        self.n_classes_ = int(n_classes)
        self.forest_ = ExtraTreesClassifier(
            n_estimators=self.n_estimators, max_depth=self.max_depth, n_jobs=1,
            random_state=self.random_state).fit(X, y.astype(np.intp), sample_weight=sample_weight)
        return self

    def predict_raw(self, X):
        """Log-odds of class 1, shape (n,) (two classes), or log-probabilities, (n, K)."""
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
    0.37 for it, 90 px away 0.05, and from ``cutoff`` = ``distance * ln(1 / floor)``
    on (207 px) 0, the forest alone. Where labels are dense the sharp boosted
    teacher draws the outlines; where they are sparse (a few clicks in a large
    frame) the forest, which varies less with which pixels were clicked,
    decides (docs/scribbles.md, section 24; 10 px gave the forest too much of
    the fly clicks' outlines). Each teacher predicts only the rows where its
    weight is not 0: the forest not on the scribbles, the boosted one not
    beyond ``cutoff`` (docs/scribbles.md, section 25: there its weight was below
    ``floor`` = 1e-3, so a raw score is within ``floor * |near - far|`` of the
    unclipped blend). Without distances (`predict_raw`'s ``distance`` None: the
    cost samples of ``class_weight="auto"``) it is the boosted teacher.

    Parameters
    ----------
    near, far : fitted teachers with ``predict_raw``
        The boosted teacher (`msclassify.cegb.Booster`) and the `ForestTeacher`.
    distance : float, optional
    floor : float, optional
        The boosted teacher's smallest weight that is not set to 0 (``BLEND_FLOOR``; 0: never).

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
    >>> round(teacher.cutoff, 1)
    69.1
    """

    def __init__(self, near, far, distance=BLEND_DISTANCE, floor=BLEND_FLOOR):
        self.near = near
        self.far = far
        self.distance = float(distance)
        self.floor = float(floor)

    @property
    def cutoff(self):
        """Pixels from the nearest scribble from which on the boosted teacher's weight is 0."""
        return float(self.distance * np.log(1 / self.floor)) if self.floor > 0 else np.inf

    def weights(self, distance):
        """The boosted teacher's weight at pixels ``distance`` px from the nearest scribble."""
        distance = np.asarray(distance, np.float64)
        w = np.exp(-distance / self.distance)
        w[distance >= self.cutoff] = 0.0
        return w

    def predict_raw(self, X, distance=None):
        """Raw scores at rows ``X`` whose pixels lie ``distance`` px from the nearest scribble."""
        if distance is None:
            return np.asarray(self.near.predict_raw(X), np.float64)
        w = self.weights(distance)
        near, far = w > 0, w < 1
        raw = None
        for rows, teacher, weight in ((near, self.near, w), (far, self.far, 1 - w)):
            if not rows.any():
                continue
            part = np.asarray(teacher.predict_raw(X if rows.all() else X[rows]), np.float64)
            if raw is None:
                raw = np.zeros((len(w),) + part.shape[1:])
            raw[rows] += (weight[rows] if part.ndim == 1 else weight[rows, None]) * part
        return raw


class ScribbleDistance:
    """Pixels to the nearest scribbled pixel, computed where asked (``self[index]``).

    The value ``scipy.ndimage.distance_transform_edt(labels == 0)[index]`` would
    have, below ``cutoff``, and ``inf`` beyond (`BlendTeacher`
    does not need more). The nearest scribbled pixel of an unscribbled one is
    always one with an unscribbled neighbour (a step towards the pixel would
    be nearer), so a k-d tree of those answers: on a 1024² fly frame the
    distances the coarse-to-fine class map asks for took 4x less than the
    whole frame's transform (docs/scribbles.md, section 25).

    Parameters
    ----------
    labels : ndarray of int
        A frame's (or volume's) scribbles, 0 = not scribbled.
    cutoff : float, optional

    Examples
    --------
    >>> labels = np.zeros((5, 8), np.uint8); labels[2, 1] = 1
    >>> ScribbleDistance(labels)[2, :].tolist()
    [1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    >>> ScribbleDistance(labels, cutoff=3)[(np.array([0, 2]), np.array([1, 7]))].tolist()
    [2.0, inf]
    """

    def __init__(self, labels, cutoff=np.inf):
        from scipy import ndimage as ndi
        from scipy.spatial import cKDTree
        self.scribbled = np.asarray(labels) != 0
        self.shape = self.scribbled.shape
        self.cutoff = float(cutoff)
        inner = ndi.binary_erosion(self.scribbled,
                                   ndi.generate_binary_structure(self.scribbled.ndim, 1),
                                   border_value=1)
        edge = np.argwhere(self.scribbled & ~inner)
        self.tree_ = cKDTree(edge) if edge.size else None

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        index = index + (slice(None),) * (len(self.shape) - len(index))
        if all(isinstance(i, (slice, int, np.integer)) for i in index):    # a grid: its points
            axes = [np.arange(n)[i] for n, i in zip(self.shape, index)]
            out_shape = tuple(np.size(a) for a, i in zip(axes, index) if isinstance(i, slice))
            points = np.stack([p.ravel() for p in np.meshgrid(*axes, indexing="ij")], axis=1)
        else:
            out_shape = np.broadcast(*index).shape
            points = np.stack([np.broadcast_to(i, out_shape).ravel() for i in index], axis=1)
        if self.tree_ is None:
            return np.full(out_shape, np.inf)
        d, _ = self.tree_.query(points, distance_upper_bound=self.cutoff)
        d[self.scribbled[tuple(points.T)]] = 0.0
        return d.reshape(out_shape)
