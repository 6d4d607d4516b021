"""A forest of extremely randomised trees as the distillation teacher when the scribbles are few.

On a handful of clicks the model copies its distillation teacher, and plain
boosting on ~1,000 clicked pixels loses to scikit-image's recipe (a random
forest) by 0.016 membrane F1 on the EM slices (docs/scribbles.md, section 11).
A forest of extremely randomised trees (Geurts et al. 2006) on the same
full-resolution features does not (docs/scribbles.md, section 13): averaging
50 trees with random thresholds varies less with which pixels were clicked than
50 boosted trees fitted in sequence to the same few pixels (a random forest
lies in between). `PixelClassifier` uses it as the teacher when
at most `FOREST_TEACHER_PIXELS` pixels are labelled (``teacher="auto"``); the
teacher only labels training pixels, so prediction costs the same.

`ForestTeacher` has the one method the distillation stage asks of a teacher,
``predict_raw``, in the units of a boosted teacher's raw scores: the log-odds
of class 1 (two classes) or log-probabilities (more), the probabilities
clipped to [`PROBABILITY_FLOOR`, 1 - `PROBABILITY_FLOOR`].
"""

import numpy as np

__all__ = ["FOREST_TEACHER_PIXELS", "PROBABILITY_FLOOR", "ForestTeacher", "MeanTeacher"]

# The scribbled pixels at or below which teacher="auto" fits a forest (docs/scribbles.md,
# section 13: the clicks of every set are below it, the thin and balanced strokes above).
FOREST_TEACHER_PIXELS = 4000
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
    """Teachers whose raw scores are averaged (a boosted teacher and a `ForestTeacher`).

    Log-odds (two classes) and log-probabilities or softmax scores (more: equal
    up to a constant per row) average into the scores of the geometric mean of
    the teachers' probabilities.

    Examples
    --------
    >>> class Fixed:
    ...     def __init__(self, raw): self.raw = np.asarray(raw)
    ...     def predict_raw(self, X): return self.raw
    >>> MeanTeacher([Fixed([2.0, -4.0]), Fixed([[0.0], [2.0]])]).predict_raw(None).tolist()
    [1.0, -1.0]
    """

    def __init__(self, teachers):
        self.teachers = list(teachers)

    def predict_raw(self, X):
        """The mean of the teachers' raw scores (shape of the last teacher's)."""
        raws = [np.asarray(t.predict_raw(X), np.float64) for t in self.teachers]
        return np.mean([raw.reshape(raws[-1].shape) for raw in raws], axis=0)
