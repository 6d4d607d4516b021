"""Object classes, cost-efficiently: CEGB on per-object features that cost what they take.

Each object gets three groups of features, each computed by one call that
takes real time per object:

``shape``
    from the object's mask alone (``regionprops_table``, image moments): area,
    axis lengths, eccentricity, extent. Cheap.
``intensity``
    the frame's intensities inside the object: mean, standard deviation, min, max.
``texture``
    grey-level co-occurrences inside the object (contrast, homogeneity, energy,
    correlation; `skimage.feature.graycomatrix` on the object's pixels at 32
    levels, distance 1, two directions) and its mean gradient magnitude. Dear.

`ObjectClassifier.fit` times each group on the training objects (seconds per
object: ``group_costs_``) and gives every feature of a group that cost, so that
`CEGBClassifier` with ``cost_tradeoff`` > 0 uses a dearer group only where it
pays in accuracy; `ObjectClassifier.predict` then computes only the groups
its trees use (``groups_used_``), and that is the time it saves.
"""

import time

import numpy as np
import pandas as pd
from scipy import ndimage as ndi
from skimage.feature import graycomatrix, graycoprops
from skimage.measure import regionprops_table

from ..cegb import CEGBClassifier
from ._measure import _packed_objects

__all__ = ["FEATURE_GROUPS", "ObjectClassifier", "object_features"]

FEATURE_GROUPS = {
    "shape": "area, axis lengths, eccentricity, extent (mask only)",
    "intensity": "mean, standard deviation, min and max of the frame inside the object",
    "texture": "grey-level co-occurrence contrast, homogeneity, energy, correlation and mean "
               "gradient magnitude inside the object",
}
_SHAPE = ("area", "axis_major_length", "axis_minor_length", "eccentricity", "extent")
_INTENSITY = ("intensity_mean", "intensity_std", "intensity_min", "intensity_max")
_TEXTURE = ("contrast", "homogeneity", "energy", "correlation")
_LEVELS = 32


def _frame(image):
    if image is None:
        raise ValueError("intensity and texture features need the image the objects were found "
                         "on: give its frame (in napari, choose the segmentation's Image)")
    return np.asarray(image)


def _grey(image):
    """The frame (or a crop of it) as float32, a multichannel one averaged over channels."""
    image = np.asarray(image, dtype=np.float32)
    return image if image.ndim == 2 else image.mean(axis=-1)


def _shape(objects, image, boxes):
    # regionprops_table on the objects' crops packed into one small image: the shape of an
    # object does not depend on where its box is, and no pass over the frame is made
    return regionprops_table(_packed_objects(objects, boxes)[-1], properties=_SHAPE)


def _intensity(objects, image, boxes):
    # regionprops' statistics of each object's pixels (the same float32 values in the same
    # order, so the same numbers), from its crop rather than the whole frame
    image = _frame(image)
    rows = {name: [] for name in _INTENSITY}
    for number, box in enumerate(boxes, start=1):
        if box is None:
            continue
        values = _grey(image[box])[objects[box] == number]
        rows["intensity_mean"].append(np.mean(values, axis=0))
        rows["intensity_std"].append(np.std(values, axis=0))
        rows["intensity_min"].append(np.min(values, axis=0))
        rows["intensity_max"].append(np.max(values, axis=0))
    return rows


def _texture(objects, image, boxes):
    grey = _grey(_frame(image))
    low, high = float(grey.min()), float(grey.max())
    # levels 1.._LEVELS inside objects, 0 outside (dropped from the co-occurrences)
    levels = 1 + np.minimum((grey - low) / max(high - low, 1e-12) * _LEVELS, _LEVELS - 1)
    gradient = np.hypot(ndi.sobel(grey, axis=0), ndi.sobel(grey, axis=1))
    rows = {name: [] for name in _TEXTURE + ("gradient_mean",)}
    for index, box in enumerate(boxes, start=1):
        if box is None:
            continue
        inside = objects[box] == index
        crop = np.where(inside, levels[box], 0).astype(np.uint8)
        matrix = graycomatrix(crop, [1], [0, np.pi / 2], levels=_LEVELS + 1, symmetric=True)
        matrix = matrix[1:, 1:].astype(np.float64)
        total = matrix.sum(axis=(0, 1), keepdims=True)
        matrix = np.divide(matrix, total, out=np.zeros_like(matrix), where=total > 0)
        for name in _TEXTURE:
            rows[name].append(float(np.nan_to_num(graycoprops(matrix, name)).mean()))
        rows["gradient_mean"].append(float(gradient[box][inside].mean()))
    return rows


_COMPUTE = {"shape": _shape, "intensity": _intensity, "texture": _texture}


def object_features(objects, image, groups=tuple(FEATURE_GROUPS), *, timings=None, boxes=None):
    """Per-object features of the chosen groups, one row per object in the order of its number.

    Parameters
    ----------
    objects : ndarray of int (H, W)
        Objects numbered 1, 2, ... (0 = background).
    image : ndarray (H, W) or (H, W, C)
        The frame (a multichannel frame is averaged over its channels).
    groups : sequence of str
        Keys of `FEATURE_GROUPS`.
    timings : dict, optional
        Seconds spent per group are added to it.
    boxes : list of tuple of slice, optional
        The objects' bounding boxes, ``scipy.ndimage.find_objects(objects)``, when
        already known (saves a pass over the whole frame).

    Returns
    -------
    pandas.DataFrame
        Columns ``GROUP:NAME``.

    Examples
    --------
    >>> objects = np.zeros((6, 8), int); objects[1:5, 1:3] = 1; objects[1:3, 5:7] = 2
    >>> object_features(objects, objects * 1.0, ["shape"])["shape:area"].tolist()
    [8.0, 4.0]
    """
    unknown = [group for group in groups if group not in FEATURE_GROUPS]
    if unknown:
        raise ValueError(f"unknown feature group(s) {unknown}; choose from "
                         f"{', '.join(FEATURE_GROUPS)}")
    return pd.DataFrame(_features(np.asarray(objects), image, groups, timings, boxes))


def _features(objects, image, groups, timings=None, boxes=None):
    """`object_features`' columns (a dict), each group computed on the objects' crops."""
    if boxes is None:
        boxes = ndi.find_objects(objects)
    columns = {}
    for group in groups:
        start = time.perf_counter()
        values = _COMPUTE[group](objects, image, boxes)
        if timings is not None:
            timings[group] = timings.get(group, 0.0) + time.perf_counter() - start
        columns.update({f"{group}:{name}": np.asarray(column, dtype=np.float64)
                        for name, column in values.items()})
    return columns


def _measured_costs(samples, groups, n_objects, repeats=3):
    """Seconds per object of each group over all ``samples``: the best of ``repeats`` passes
    (after the pass of `fit`, so nothing is timed cold)."""
    best = {}
    for _ in range(repeats):
        timings = {}
        for objects, image in samples:
            object_features(np.asarray(objects), image, groups, timings=timings)
        best = {g: min(best.get(g, np.inf), timings[g]) for g in groups}
    return {g: best[g] / max(n_objects, 1) for g in groups}


class ObjectClassifier:
    """Classes of objects (fly vs debris, male vs female) from a few labelled examples.

    Parameters
    ----------
    groups : sequence of str
        The feature groups the classifier may use (`FEATURE_GROUPS`).
    cost_tradeoff : float
        CEGB's mu: loss given up per unit of feature cost per object (the
        cheapest group's cost is the unit). 0 ignores costs.
    group_costs : dict, optional
        Cost per object of each group; by default measured in `fit` (seconds).
    n_estimators : int
    random_state : int

    Attributes
    ----------
    classes_ : ndarray of str
    group_costs_ : dict
        Seconds per object of each group (measured, or as given).
    groups_used_ : list of str
        The groups the trees use; `predict` computes only these.

    Examples
    --------
    Long objects are flies, round ones debris: the shape group suffices.

    >>> objects = np.zeros((40, 60), int)
    >>> for k in range(4):
    ...     objects[2 + 10 * k:6 + 10 * k, 2:22] = 1 + 2 * k    # long
    ...     objects[2 + 10 * k:6 + 10 * k, 40:44] = 2 + 2 * k   # square
    >>> y = {1 + 2 * k: "fly" for k in range(4)} | {2 + 2 * k: "debris" for k in range(4)}
    >>> clf = ObjectClassifier(cost_tradeoff=0.1, group_costs={"shape": 1, "intensity": 5,
    ...                        "texture": 50}).fit([(objects, objects * 1.0)], [y])
    >>> clf.predict(objects, objects * 1.0).tolist()[:4], clf.groups_used_
    (['fly', 'debris', 'fly', 'debris'], ['shape'])
    """

    def __init__(self, groups=tuple(FEATURE_GROUPS), cost_tradeoff=0.05, group_costs=None,
                 n_estimators=50, random_state=0):
        self.groups = groups
        self.cost_tradeoff = cost_tradeoff
        self.group_costs = group_costs
        self.n_estimators = n_estimators
        self.random_state = random_state

    def fit(self, samples, y):
        """Learn from labelled objects.

        Parameters
        ----------
        samples : sequence of (objects, image)
            Label images (objects numbered 1, 2, ...) and their frames.
        y : sequence of dict
            For each sample, ``{object number: class}`` of its labelled objects.

        Raises
        ------
        ValueError
            When a label names no object, or a class has fewer than two examples.
        """
        groups = list(dict.fromkeys(self.groups))
        if not groups or any(group not in FEATURE_GROUPS for group in groups):
            raise ValueError(f"groups must be some of {', '.join(FEATURE_GROUPS)}, got "
                             f"{self.groups!r}")
        if len(samples) != len(y):
            raise ValueError(f"{len(samples)} samples but {len(y)} label sets; give one "
                             "{object: class} dict per sample")
        rows, classes, n_objects = [], [], 0
        for position, ((objects, image), labels) in enumerate(zip(samples, y)):
            objects = np.asarray(objects)
            present = np.unique(objects[objects > 0])
            missing = [label for label in labels if label not in set(present.tolist())]
            if missing:
                raise ValueError(f"sample {position}: object(s) {missing} are not in its label "
                                 "image; label objects that were found")
            features = object_features(objects, image, groups)
            n_objects += len(present)
            wanted = [int(np.searchsorted(present, label)) for label in labels]
            rows.append(features.iloc[wanted])
            classes += [str(value) for value in labels.values()]
        names, counts = np.unique(classes, return_counts=True)
        if len(names) < 2:
            raise ValueError(f"the object labels name {len(names)} class(es) "
                             f"({', '.join(names)}); label objects of at least two classes")
        if (counts < 2).any():
            few = ", ".join(f"{str(n)!r} ({c})" for n, c in zip(names, counts) if c < 2)
            raise ValueError(f"class(es) {few} have fewer than 2 labelled objects; label at "
                             "least 2 objects of every class")
        X = pd.concat(rows, ignore_index=True)
        self.group_costs_ = (dict(self.group_costs) if self.group_costs is not None else
                             _measured_costs(samples, groups, n_objects))
        unit = min(self.group_costs_[g] for g in groups) or 1.0
        group_of = [name.split(":")[0] for name in X.columns]
        self.feature_names_ = list(X.columns)
        self.classes_ = names
        self.booster_ = CEGBClassifier(
            n_estimators=self.n_estimators, min_samples_leaf=1, learning_rate=0.3,
            cost_tradeoff=self.cost_tradeoff, random_state=self.random_state,
            feature_costs=[self.group_costs_[g] / unit for g in group_of]).fit(
                X.to_numpy(), np.searchsorted(names, classes))
        used = sorted(int(m) for m in self.booster_.booster_.features_used())
        self.groups_used_ = [g for g in groups if any(group_of[m] == g for m in used)]
        return self

    def cost_per_object(self):
        """Seconds per object of the groups `predict` computes (their measured cost)."""
        return float(sum(self.group_costs_[g] for g in self.groups_used_))

    def predict(self, objects, image, *, boxes=None):
        """Class of every object of ``objects`` (in the order of their numbers).

        ``boxes``, the objects' bounding boxes (``scipy.ndimage.find_objects(objects)``),
        saves a pass over the whole frame when already known.
        """
        objects = np.asarray(objects)
        if boxes is None:
            boxes = ndi.find_objects(objects)
        computed = _features(objects, image, self.groups_used_, boxes=boxes)
        n_objects = sum(box is not None for box in boxes)
        if n_objects == 0:
            return np.array([], dtype=self.classes_.dtype)
        X = np.zeros((n_objects, len(self.feature_names_)))
        for m, name in enumerate(self.feature_names_):
            if name in computed:
                X[:, m] = computed[name]
        return self.classes_[self.booster_.predict(X)]
