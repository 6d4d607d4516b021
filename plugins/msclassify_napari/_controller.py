"""The pixel-classifier widget's logic, without Qt or napari: testable in plain Python.

The widget (`_widget.py`) only wires Qt controls and napari layers to what is
here:

* `ClassifierSettings` holds the model settings the widget exposes, in one
  place; `ClassifierSettings.for_live_update` derives the quicker model that
  live updates train, so "Train" and "Live update" can differ.
* `FrameStack` views an image layer's data (2-D, RGB, or a time stack, lazy or
  not) as frames; `ScribbledFrames` remembers which frames of a scribble layer
  hold scribbles, so a retrain copies those frames (`snapshot_scribbles`)
  instead of scanning a whole movie.
* `update_job` is the generator a worker thread runs for Train, a live update
  and "Segment this frame": it yields a `TrainedModel`, then the frame's
  `FramePrediction`, then (if asked) its `LabelHints`, then its `CostSummary`,
  so the segmentation appears before the slower extras.
* `describe_model` turns a fitted model and its timings into the Result panel's
  plain words, with the exact terms for tooltips.
* `apply_to_frames` and `export_frames` are generators too: one yield per frame
  drives a progress bar (`eta_text` says how long is left, `training_status` words a
  training stage and its ETA), and stopping the
  generator between yields cancels.
* `LiveUpdateScheduler` turns paint events into retrain jobs: it debounces, runs
  one job at a time and coalesces whatever arrives meanwhile into one follow-up.
* `segmentation_spec`, `probability_spec`, `uncertainty_spec`, `cost_map_spec`
  and `label_hints_spec` describe the output layers as `LayerSpec`s.
"""

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy import ndimage

from msclassify import pixel
from msclassify.pixel import PixelClassifier, label_dtype, load_pixel_model, \
    open_export
from msclassify.pixel.batch import predict_frames

from ._frame_labels import FrameLabels

__all__ = ["CLASS_COLORS_KEY", "CLASS_NAMES_KEY", "COST_COLORMAP", "ClassifierSettings",
           "CostSummary", "DEFAULT_CLASS_COLORS", "FramePrediction", "FrameStack", "ImageModel",
           "LIVE_COLSAMPLE", "LIVE_MAX_BINS", "LIVE_MIN_TREES", "LIVE_N_COST_SAMPLES",
           "LIVE_N_ESTIMATORS", "LIVE_TREE_BUDGET", "LIVE_WITHOUT_TEACHER", "LabelHints",
           "LayerSpec", "LiveUpdateScheduler", "PREDICT", "PROBABILITY_COLORMAP", "RETRAIN",
           "ResultRow", "SEGMENTATION_OPACITY", "ScribbledFrames", "Scribbles", "TRAIN",
           "TrainedModel", "UNCERTAINTY_COLORMAP", "apply_to_frames", "class_colors", "class_legend_path",
           "class_names", "color_rgb", "cost_map_spec", "cost_summary", "describe_feature",
           "describe_model", "eta_text", "export_frames", "label_hints", "label_hints_spec",
           "load_classifier", "new_labels", "predict_frame", "probability_spec",
           "segmentation_spec", "snapshot_scribbles", "training_status", "uncertainty_spec",
           "update_job", "write_class_legend"]

# Labels-layer metadata keys holding {label value: class name} and {label value: "#rrggbb"}.
CLASS_NAMES_KEY = "msclassify_class_names"
CLASS_COLORS_KEY = "msclassify_class_colors"
# Colours of classes 1, 2, 3, ... until the user picks others (the class table): distinct on
# grey and colour images, the second one green (the object of a two-class task).
DEFAULT_CLASS_COLORS = ("#4c8dff", "#1fd655", "#ff3d3d", "#ffd21f", "#c34dff", "#1fe5e5",
                        "#ff8c1a", "#ff5ccd", "#a6e22e", "#8c6bb1")

# Job kinds, ordered: a pending request is upgraded to the strongest one asked for.
PREDICT, RETRAIN, TRAIN = 1, 2, 3
_KIND_NAMES = {PREDICT: "predict", RETRAIN: "retrain", TRAIN: "train"}

_DEFAULTS = PixelClassifier().get_params()
# The quick model of live updates: few trees and fewer pixels standing for the whole
# image in the cost terms, so that a stroke shows its effect within ~0.3 s on a 1024²
# frame (benchmarks/bench_napari.py); "Train" fits the full model.
LIVE_N_ESTIMATORS = 20
LIVE_N_COST_SAMPLES = 4096
# With more than two classes a boosting round grows one tree per class: the live model keeps
# about LIVE_TREE_BUDGET trees in all (at least LIVE_MIN_TREES per class), each looking at
# LIVE_COLSAMPLE of the candidate features. On the 4-class photo of bench_napari (fly larvae,
# 7,056 scribbled pixels) that made the live fit 2.4x cheaper (0.26 s instead of 0.64 s of
# CPU, one thread) while its segmentation still agrees with the full Train's on 92.9 % of the
# pixels (93.3 % before; `benchmarks/study_live_model.py --multiclass`).
LIVE_TREE_BUDGET = 40
LIVE_MIN_TREES = 5
LIVE_COLSAMPLE = 0.5
# ... and bins its features into at most LIVE_MAX_BINS values (Train: 255). On the same photo
# (4 scribble draws x 3 seeds) the live fit took 0.17 s of CPU instead of 0.24 s (binning,
# and the split search and histograms run over fewer bins) and still agreed with Train's
# segmentation on 93.2 % of the pixels, as with 255 bins (larva F1 0.726 vs 0.728, +-0.003).
# Two classes keep 255: on fly frames 63 bins lost SEG on two of five frames.
LIVE_MAX_BINS = 63
# Live updates skip the distillation teacher (it made a live refit of a 1024² fly frame take
# 0.63 s instead of ~0.15 s). Without a teacher the coarse levels of the "default" bank draw
# staircases, so live updates use the bank and cost tradeoff that are best without one
# (issue 11's measurements): "fine" (full resolution and 2x2 blocks) at μ <= 2e-4. On one real
# fly frame (fly_masks_dev, 20 trees, 3 test frames) that gave SEG 0.927 vs 0.914 distilled.
LIVE_WITHOUT_TEACHER = {"default": ("fine", 2e-4)}


@dataclass(frozen=True)
class ClassifierSettings:
    """The model settings the widget exposes; everything else keeps `PixelClassifier`'s defaults.

    Examples
    --------
    >>> settings = ClassifierSettings(n_estimators=100)
    >>> settings.make_classifier().get_params()["n_estimators"]
    100
    >>> settings.for_live_update().n_estimators   # live updates train a quicker model
    20
    >>> live = settings.for_live_update(n_classes=4)   # one tree per class and round
    >>> live.n_estimators, live.colsample, live.max_bins
    (10, 0.5, 63)
    """

    features: str = _DEFAULTS["features"]
    cost_tradeoff: float = _DEFAULTS["cost_tradeoff"]
    split_cost: float = _DEFAULTS["split_cost"]
    n_estimators: int = _DEFAULTS["n_estimators"]
    max_leaves: int = _DEFAULTS["max_leaves"]
    semi_supervised: bool = _DEFAULTS["semi_supervised"]
    n_cost_samples: int = _DEFAULTS["n_cost_samples"]
    distill_weight: float = _DEFAULTS["distill_weight"]
    colsample: float | None = _DEFAULTS["colsample"]   # None: PixelClassifier's (by classes)
    max_bins: int = _DEFAULTS["max_bins"]
    random_state: int = 0

    TOOLTIPS = {
        "features": "Candidate image features (features=...): 'default' (every filter at "
                    "three scales on full resolution and 2x2, 4x4, 8x8 blocks; outlines are "
                    "refined at full resolution by the teacher model trained first), 'fine' "
                    "(full resolution and 2x2 blocks only), 'fast' (few, cheap), 'pyramid' "
                    "(the former default), 'rich' (more scales). The model picks the ones it "
                    "needs.",
        "cost_tradeoff": "Cost tradeoff μ (cost_tradeoff): how much accuracy the model gives "
                         "up per operation per pixel it saves. 0 = plain gradient boosting (most "
                         "accurate, slowest); larger = fewer, coarser features and shorter "
                         "paths through the trees (faster).",
        "split_cost": "Split cost α (split_cost): the cost of one decision in a tree, in the "
                      "operations of the feature cost model (4 = about four filter "
                      "multiply-adds per pixel). Larger favours shallow trees.",
        "n_estimators": "Trees per class (n_estimators) of the model that Train fits. Live "
                        f"updates fit at most {LIVE_N_ESTIMATORS} (with more classes, about "
                        f"{LIVE_TREE_BUDGET} in all, each on half the features) so a stroke "
                        "shows its effect within a fraction of a second.",
        "max_leaves": "Largest number of leaves per tree (max_leaves; trees grow best-first).",
        "semi_supervised": "Also learn from unlabelled pixels of the scribbled frames (GRBB; "
                           "semi_supervised=True): helps when there are only a few scribbles; "
                           "adds about a second to Train. Live updates do not use it.",
    }

    def replace(self, **changes):
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def for_live_update(self, n_classes=2):
        """The quicker settings live updates train with: at most `LIVE_N_ESTIMATORS` trees,
        `LIVE_N_COST_SAMPLES` cost pixels, no semi-supervised term and no distillation teacher
        (with the "default" bank: the "fine" bank at a cost tradeoff of at most 2e-4, see
        `LIVE_WITHOUT_TEACHER`); with more than two classes (``n_classes``) about
        `LIVE_TREE_BUDGET` trees in all, `LIVE_COLSAMPLE` of the features per tree and at
        most `LIVE_MAX_BINS` bins per feature; the rest unchanged."""
        features, cost_tradeoff = self.features, self.cost_tradeoff
        if features in LIVE_WITHOUT_TEACHER:
            features, largest = LIVE_WITHOUT_TEACHER[features]
            cost_tradeoff = min(cost_tradeoff, largest)
        trees, colsample, max_bins = LIVE_N_ESTIMATORS, self.colsample, self.max_bins
        if n_classes > 2:
            trees = max(LIVE_MIN_TREES, min(trees, LIVE_TREE_BUDGET // int(n_classes)))
            colsample = LIVE_COLSAMPLE if colsample is None else min(colsample, LIVE_COLSAMPLE)
            max_bins = min(max_bins, LIVE_MAX_BINS)
        return self.replace(n_estimators=min(self.n_estimators, trees),
                            n_cost_samples=min(self.n_cost_samples, LIVE_N_COST_SAMPLES),
                            semi_supervised=False, distill_weight=0.0, features=features,
                            cost_tradeoff=cost_tradeoff, colsample=colsample, max_bins=max_bins)

    def make_classifier(self):
        """An unfitted `PixelClassifier` with these settings."""
        return PixelClassifier(self.features, cost_tradeoff=self.cost_tradeoff,
                               split_cost=self.split_cost, n_estimators=self.n_estimators,
                               max_leaves=self.max_leaves, semi_supervised=self.semi_supervised,
                               n_cost_samples=self.n_cost_samples,
                               distill_weight=self.distill_weight,
                               colsample=self.colsample, max_bins=self.max_bins,
                               random_state=self.random_state)


class FrameStack:
    """An image layer's data seen as frames: ``(H, W)``, ``(H, W, C)``, ``(T, H, W[, C])``.

    ``data`` may be any array-like napari accepts (numpy, dask, zarr, the
    reader's lazy frames); a frame is read only when asked for.

    Parameters
    ----------
    data : array-like
    rgb : bool
        Whether the last axis holds colour channels (napari's ``layer.rgb``).

    Examples
    --------
    >>> stack = FrameStack(np.zeros((5, 32, 48, 3), np.uint8), rgb=True)
    >>> stack.n_frames, stack.frame_shape, stack.labels_shape, stack.frame(4).shape
    (5, (32, 48), (5, 32, 48), (32, 48, 3))
    """

    def __init__(self, data, rgb=False):
        shape = tuple(int(size) for size in np.shape(data))
        if rgb and (len(shape) < 3 or shape[-1] not in (3, 4)):
            raise ValueError(f"an RGB layer needs 3 or 4 channels last, got shape {shape}")
        labels_shape = shape[:-1] if rgb else shape
        if len(labels_shape) not in (2, 3):
            raise ValueError(
                f"the image layer has shape {shape}: the pixel classifier takes one 2-D frame, "
                "an RGB frame or a time stack (T, H, W[, RGB]); for more axes, split the "
                "stack (napari: right-click the layer > Split Stack) or pick one channel")
        self.data = data
        self.rgb = bool(rgb)
        self.labels_shape = labels_shape
        self.is_stack = len(labels_shape) == 3
        self.n_frames = labels_shape[0] if self.is_stack else 1
        self.frame_shape = labels_shape[-2:]

    def frame(self, index):
        """Frame ``index`` as an ndarray (the alpha channel of RGBA is dropped)."""
        if not 0 <= index < self.n_frames:
            raise IndexError(f"frame {index} is out of range: the image has {self.n_frames} "
                             "frame(s)")
        frame = np.asarray(self.data[index] if self.is_stack else self.data)
        # alpha is opacity, not image content: a model must not learn from it
        return frame[..., :3] if self.rgb else frame

    def read(self, index):
        """`frame`: a FrameStack is a frame source (`msclassify.pixel.batch.predict_frames`)."""
        return self.frame(index)

    def check_labels(self, labels_shape):
        """Raise ValueError unless a Labels layer of ``labels_shape`` matches the image."""
        if tuple(labels_shape) != self.labels_shape:
            raise ValueError(f"the scribble layer has shape {tuple(labels_shape)} but the image "
                             f"needs {self.labels_shape}; create a new scribble layer for this "
                             "image")


# -- scribbles -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scribbles:
    """A copy of the labelled frames of a scribble layer.

    Attributes
    ----------
    frame_indices : tuple of int
        Frames with at least one labelled pixel.
    labels : tuple of ndarray
        ``(H, W)`` label image of each of those frames (0 = unlabelled).
    classes : ndarray
        Label values used (sorted, at least two).
    """

    frame_indices: tuple
    labels: tuple
    classes: np.ndarray

    @property
    def n_labelled(self):
        return int(sum(np.count_nonzero(frame) for frame in self.labels))


def _scribbled(labels):
    """Frames of a ``(T, H, W)`` label stack holding a label (a `FrameLabels` looks only at the
    frames it stores; anything else is scanned whole)."""
    if isinstance(labels, FrameLabels):
        return {t for t in labels.stored_frames() if labels.frame(t).any()}
    labels = np.asarray(labels)
    return {int(t) for t in np.flatnonzero(labels.reshape(labels.shape[0], -1).any(axis=1))}


def new_labels(stack, dtype=np.uint8):
    """An empty label image for ``stack``: a `FrameLabels` (frames allocated when written) for a
    time stack, a NumPy array for one frame.

    Examples
    --------
    >>> type(new_labels(FrameStack(np.zeros((1500, 64, 64), np.uint8)))).__name__
    'FrameLabels'
    >>> new_labels(FrameStack(np.zeros((64, 64, 3), np.uint8), rgb=True)).shape
    (64, 64)
    """
    if stack.is_stack:
        return FrameLabels(stack.n_frames, stack.frame_shape, dtype)
    return np.zeros(stack.labels_shape, dtype)


def snapshot_scribbles(labels, stack, frames=None):
    """Copy the labelled frames of ``labels`` (the scribble layer's data) for training.

    Parameters
    ----------
    labels : array-like
        The scribble layer's data, shaped like ``stack.labels_shape``.
    stack : FrameStack
    frames : iterable of int, optional
        Only look at these frames of a stack (see `ScribbledFrames`); default:
        scan every frame.

    Raises
    ------
    ValueError
        If the shape does not fit ``stack`` or fewer than two classes are scribbled.

    Examples
    --------
    >>> labels = np.zeros((3, 8, 8), np.uint8); labels[2, 0, 0] = 1; labels[2, 5, 5] = 2
    >>> snapshot = snapshot_scribbles(labels, FrameStack(np.zeros((3, 8, 8))))
    >>> snapshot.frame_indices, snapshot.classes.tolist(), snapshot.n_labelled
    ((2,), [1, 2], 2)
    """
    stack.check_labels(np.shape(labels))
    dtype = np.dtype(labels.dtype)
    if not np.issubdtype(dtype, np.integer):
        raise TypeError(f"scribbles must be an integer Labels layer, got dtype {dtype}")
    if stack.is_stack:
        candidates = _scribbled(labels) if frames is None else frames
        copies = [(t, np.array(labels[t])) for t in sorted(candidates)]
        copies = [(t, frame) for t, frame in copies if frame.any()]
    else:
        frame = np.array(labels)
        copies = [(0, frame)] if frame.any() else []
    indices = tuple(int(t) for t, _ in copies)
    frames_copied = tuple(frame for _, frame in copies)
    classes = np.unique(np.concatenate([np.unique(f[f > 0]) for f in frames_copied])) \
        if frames_copied else np.zeros(0, dtype)
    if classes.size < 2:
        found = "nothing" if classes.size == 0 else f"only label {classes[0]}"
        raise ValueError(f"the scribble layer holds {found}: paint at least two classes "
                         "(e.g. 1 = background, 2 = object; 0 is unlabelled)")
    return Scribbles(indices, frames_copied, classes)


class ScribbledFrames:
    """Which frames of a scribble stack may hold scribbles, kept current without rescanning.

    A full scan of a long movie's scribble layer (thousands of 1024² frames)
    takes a noticeable fraction of a second, too long for the GUI thread on
    every stroke. `rescan` (in a worker thread) finds the scribbled frames once;
    `mark` adds the frame a stroke was painted on; `snapshot` then copies only
    those frames. Thread-safe.

    Examples
    --------
    >>> labels = np.zeros((4, 8, 8), np.uint8); labels[1, 0, 0] = 1
    >>> frames = ScribbledFrames(); frames.rescan(labels); frames.frames
    [1]
    >>> labels[3, 5, 5] = 2; frames.mark(3)              # a stroke on frame 3
    >>> frames.snapshot(labels, FrameStack(np.zeros((4, 8, 8)))).frame_indices
    (1, 3)
    """

    def __init__(self):
        self._frames = set()
        self._scanned = False
        self._lock = threading.Lock()

    @property
    def frames(self):
        with self._lock:
            return sorted(self._frames)

    @property
    def scanned(self):
        """Whether a full scan has been done since the last `reset`."""
        return self._scanned

    def reset(self):
        """Forget everything (another scribble layer, or its data was replaced)."""
        with self._lock:
            self._frames.clear()
            self._scanned = False

    def mark(self, frame):
        """Scribbles on ``frame`` were painted or erased."""
        with self._lock:
            self._frames.add(int(frame))

    def rescan(self, labels):
        """Scan every frame of the ``(T, H, W)`` label stack ``labels``."""
        found = _scribbled(labels)
        with self._lock:
            self._frames |= found
            self._scanned = True

    def snapshot(self, labels, stack):
        """`snapshot_scribbles` of the known frames (scanning first if never scanned; a
        `FrameLabels` is always looked at whole: it knows its written frames)."""
        if not stack.is_stack or isinstance(labels, FrameLabels):
            return snapshot_scribbles(labels, stack)
        if not self._scanned:
            self.rescan(labels)
        return snapshot_scribbles(labels, stack, frames=self.frames)


def class_names(metadata, values):
    """Class name of each label value: from ``metadata[CLASS_NAMES_KEY]``, else ``"class k"``.

    Examples
    --------
    >>> class_names({CLASS_NAMES_KEY: {1: "background"}}, [1, 2])
    ['background', 'class 2']
    """
    names = (metadata or {}).get(CLASS_NAMES_KEY, {})
    # keys may have become strings on a round trip through JSON
    return [str(names.get(int(v), names.get(str(int(v)), f"class {int(v)}"))) for v in values]


def class_colors(metadata, values):
    """Colour (``"#rrggbb"``) of each label value: from ``metadata[CLASS_COLORS_KEY]``, else
    `DEFAULT_CLASS_COLORS` (cycled).

    Examples
    --------
    >>> class_colors({CLASS_COLORS_KEY: {2: "#00ff00"}}, [1, 2])
    ['#4c8dff', '#00ff00']
    """
    colors = (metadata or {}).get(CLASS_COLORS_KEY, {})
    default = DEFAULT_CLASS_COLORS
    return [str(colors.get(int(v), colors.get(str(int(v)), default[(int(v) - 1) % len(default)])))
            for v in values]


def color_rgb(color):
    """``"#rrggbb"`` as three floats 0-1.

    Examples
    --------
    >>> color_rgb("#ff8000")
    [1.0, 0.5019607843137255, 0.0]
    """
    return [int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)]


@dataclass
class ImageModel:
    """What the widget knows about one image: its model, the last results, the frames
    segmented. The widget keeps one per image, so choosing another image shows that image's
    model, and choosing it back brings the first one back."""

    classifier: PixelClassifier = None
    training: "TrainedModel" = None         # how the classifier was trained here
    prediction: "FramePrediction" = None    # the last frame segmented
    cost: "CostSummary" = None
    hints: "LabelHints" = None
    origin: str = None                      # where a loaded model came from
    predicted_frames: set = field(default_factory=set)


# -- job results ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrainedModel:
    """A model a job trained: the classifier, how long it took and on what."""

    classifier: PixelClassifier
    seconds: float
    n_labelled: int
    frame_indices: tuple
    settings: ClassifierSettings
    live: bool = False      # the quick model of a live update (see `ClassifierSettings`)
    finished_at: float = 0.0    # time.perf_counter() when the fit ended (latency breakdowns)


@dataclass(frozen=True)
class FramePrediction:
    """Segmentation of one frame: labels (class values), probabilities, uncertainty."""

    frame_index: int
    labels: np.ndarray          # (H, W), values of classifier.classes_
    probabilities: np.ndarray   # (H, W, K) float32
    uncertainty: np.ndarray     # (H, W) float32, 1 - max probability
    seconds: float
    finished_at: float = 0.0    # time.perf_counter() when the prediction ended


@dataclass(frozen=True)
class LabelHints:
    """Where to scribble next on one frame: `label_hints` of its uncertainty."""

    frame_index: int
    regions: np.ndarray         # (H, W) uint8, 0 = none, 1 = the most uncertain region, ...


@dataclass(frozen=True)
class CostSummary:
    """Prediction cost per pixel of one model on one frame, in modelled operations.

    ``evaluation`` is the mean of the cost map (tree-node evaluations times
    split_cost, divided by the pixels sharing each evaluation); ``features`` is
    the whole-image cost of the features the model computes, per pixel.
    """

    frame_index: int
    evaluation: float
    features: float
    cost_map: np.ndarray

    @property
    def total(self):
        return self.evaluation + self.features


def _train(settings, stack, scribbles, cancel, on_progress, feature_cache, live, on_stage=None):
    def callback(iteration, n_iterations):
        if on_progress is not None:
            on_progress(iteration, n_iterations)
        return cancel is not None and cancel.is_set()

    frames = [stack.frame(t) for t in scribbles.frame_indices]
    classifier = settings.make_classifier()
    start = time.perf_counter()
    classifier.fit(frames, list(scribbles.labels), callback=callback, feature_cache=feature_cache,
                   progress=on_stage)
    end = time.perf_counter()
    return TrainedModel(classifier, end - start, scribbles.n_labelled, scribbles.frame_indices,
                        settings, live, end)


def predict_frame(classifier, frame, frame_index):
    """Segment one frame with a single feature computation and tree pass."""
    start = time.perf_counter()
    labels, probabilities, uncertainty = pixel.predict_frame(classifier, frame, probabilities=True)
    end = time.perf_counter()
    return FramePrediction(frame_index, labels, probabilities, uncertainty, end - start, end)


def cost_summary(classifier, frame, frame_index):
    """Mean evaluation and feature cost per pixel of ``classifier`` on ``frame``, and its map."""
    cost_map = classifier.cost_map(frame)
    return CostSummary(frame_index, float(cost_map.mean()), classifier.feature_cost_per_pixel_,
                       cost_map)


def label_hints(uncertainty, n_classes, n_regions=5, min_pixels=20):
    """The regions of a frame where the model is least sure: where a scribble helps most.

    Pixels whose uncertainty (``1 - max probability``) is at least half of the
    largest possible (``1 - 1/n_classes``: 0.25 for two classes, i.e. a
    probability between 0.25 and 0.75) are grown by 2 pixels so that nearby
    fragments join, split into connected regions, and the ``n_regions`` regions
    with the largest summed uncertainty (of at least ``min_pixels`` pixels) are
    numbered 1, 2, ... from the most uncertain.

    Returns
    -------
    ndarray of uint8, shape (H, W)

    Examples
    --------
    >>> u = np.zeros((12, 12), np.float32); u[1:4, 1:4] = 0.4; u[8:11, 8:11] = 0.3
    >>> hints = label_hints(u, n_classes=2, min_pixels=1)
    >>> int(hints[2, 2]), int(hints[9, 9]), int(hints[6, 6])
    (1, 2, 0)
    """
    uncertain = uncertainty >= 0.5 * (1.0 - 1.0 / n_classes)
    grown = ndimage.binary_dilation(uncertain, iterations=2)
    regions, n_found = ndimage.label(grown, structure=np.ones((3, 3), bool))
    hints = np.zeros(uncertainty.shape, np.uint8)
    if n_found == 0:
        return hints
    index = np.arange(1, n_found + 1)
    weight = ndimage.sum_labels(uncertainty * uncertain, regions, index)
    size = ndimage.sum_labels(uncertain, regions, index)
    ranked = [region for region in index[np.argsort(-weight, kind="stable")]
              if size[region - 1] >= min_pixels][:n_regions]
    for rank, region in enumerate(ranked, start=1):
        hints[regions == region] = rank
    return hints


def update_job(kind, settings, stack, frame_index, scribbles=None, classifier=None, cancel=None,
               on_progress=None, feature_cache=None, hints=False, cost=True, on_stage=None):
    """What a worker thread runs for Train, a live update or "Segment this frame".

    Parameters
    ----------
    kind : PREDICT, RETRAIN or TRAIN
        PREDICT segments ``frame_index`` with ``classifier``; RETRAIN first trains
        the quick live-update model (``settings.for_live_update(n_classes)``) on
        ``scribbles``; TRAIN trains the full model (``settings``).
    settings : ClassifierSettings
    stack : FrameStack
    frame_index : int
    scribbles : Scribbles or callable, optional
        Required for RETRAIN and TRAIN; a callable returning `Scribbles` is
        called here, in the worker thread (e.g. to scan a long stack).
    classifier : PixelClassifier, optional
        Required for PREDICT.
    cancel : threading.Event, optional
        Set it to stop: training stops at the next boosting round and the job
        ends without yielding a half-trained model.
    on_progress : callable, optional
        ``on_progress(iteration, n_iterations)`` during training (called from the
        worker thread).
    feature_cache : msclassify.features.FeatureCache, optional
        Keeps the scribbled frames' features between retrains.
    on_stage : callable, optional
        ``on_stage(report)`` with a `msclassify.pixel.TrainingProgress` (stage,
        fraction, ETA) during training (worker thread); `training_status` words it.
    hints : bool, optional
        Also yield the frame's `LabelHints`.
    cost : bool, optional
        Also yield the frame's `CostSummary` (a second pass over the trees: live updates
        skip it unless the cost map is shown, so the next stroke's retrain need not wait).

    Yields
    ------
    TrainedModel (RETRAIN, TRAIN), FramePrediction, LabelHints (if ``hints``), CostSummary
    (if ``cost``).
    """
    if kind not in _KIND_NAMES:
        raise ValueError(f"kind must be PREDICT, RETRAIN or TRAIN, got {kind!r}")
    cancel = cancel or threading.Event()
    if kind >= RETRAIN:
        if scribbles is None:
            raise ValueError("training needs scribbles")
        if callable(scribbles):
            scribbles = scribbles()
        live = kind == RETRAIN
        model = _train(settings.for_live_update(scribbles.classes.size) if live else settings,
                       stack, scribbles, cancel,
                       on_progress, feature_cache, live, on_stage)
        if cancel.is_set():
            return
        classifier = model.classifier
        yield model
    elif classifier is None:
        raise ValueError("nothing to predict with: train a model or load one first")
    frame = stack.frame(frame_index)
    prediction = predict_frame(classifier, frame, frame_index)
    yield prediction
    if hints:
        yield LabelHints(frame_index, label_hints(prediction.uncertainty,
                                                  prediction.probabilities.shape[2]))
    if cost and not cancel.is_set():
        yield cost_summary(classifier, frame, frame_index)


# -- what the model is, in words -----------------------------------------------------------------

class ResultRow(NamedTuple):
    """One line of the Result panel: a heading, plain words, and the exact terms (tooltip)."""

    label: str
    text: str
    tooltip: str


_FILTER_WORDS = {
    "intensity": "brightness",
    "gauss": "smoothed brightness",
    "gradmag": "edges",
    "log": "spots and blobs",
    "dog": "blob contrast",
    "hessian_max": "dark lines",
    "hessian_min": "bright lines",
    "structure_max": "texture strength",
    "structure_min": "corners",
}
_RGB = ("red", "green", "blue")


def describe_feature(spec, n_channels=1):
    """A feature in plain words, e.g. ``"smoothed brightness at 4×4 pixels (~6 px)"``.

    Examples
    --------
    >>> from msclassify.features import FeatureSpec
    >>> describe_feature(FeatureSpec.from_id("L2:gauss:s1.6:c0"))
    'smoothed brightness at 4×4 pixels (~6 px)'
    >>> describe_feature(FeatureSpec.from_id("L0:intensity:c1"), n_channels=3)
    'brightness of green at full resolution'
    """
    words = _FILTER_WORDS[spec.filter]
    if n_channels > 1:
        words += f" of {_RGB[spec.channel]}" if n_channels == 3 else f" of channel {spec.channel}"
    block = 2 ** spec.level
    words += " at full resolution" if spec.level == 0 else f" at {block}×{block} pixels"
    if spec.sigma is not None:
        words += f" (~{spec.sigma * block:.0f} px)"
    return words


def _share(part, whole):
    """``part / whole`` as a plain percentage.

    Examples
    --------
    >>> _share(1, 665), _share(3, 100), _share(0, 10)
    ('less than 1 %', '3 %', 'none')
    """
    if whole <= 0 or part <= 0:
        return "none"
    ratio = part / whole
    return "less than 1 %" if ratio < 0.01 else f"{ratio * 100:.0f} %"


# Features named in the Result panel (the rest in its tooltip): keeps the panel short.
_FEATURES_SHOWN = 3


def describe_model(classifier, training=None, prediction=None, cost=None, origin=None):
    """The Result panel: what the model is and costs, in plain words, with the exact terms.

    Parameters
    ----------
    classifier : PixelClassifier
        Fitted.
    training : TrainedModel, optional
        How it was trained (time, scribbles, settings, live or full).
    prediction : FramePrediction, optional
        Its last frame: the measured speed.
    cost : CostSummary, optional
        The modelled cost on that frame (tooltip of the "Work" row).
    origin : str, optional
        Where the model came from when it was not trained here (e.g. a file name).

    Returns
    -------
    list of ResultRow
        "Model", "Speed" (with a prediction), "Work", "Features".
    """
    bank = classifier.bank_
    specs = {spec.id: spec for spec in bank.specs}
    used = [specs[feature] for feature in classifier.features_used_]
    params = classifier.get_params()
    tradeoff = params["cost_tradeoff"]     # a number, or "auto" (chosen while fitting)
    tradeoff = f"{tradeoff:g}" if isinstance(tradeoff, (int, float)) else repr(tradeoff)
    exact = (f"PixelClassifier(features={params['features']!r}, "
             f"cost_tradeoff={tradeoff}, "
             f"split_cost={params['split_cost']:g}, n_estimators={params['n_estimators']}, "
             f"max_leaves={params['max_leaves']}, semi_supervised={params['semi_supervised']}, "
             f"n_cost_samples={params['n_cost_samples']})")
    chosen = getattr(classifier, "cost_tradeoff_", None)
    if chosen is not None and tradeoff == "'auto'":
        exact += (f"; chosen while fitting: cost_tradeoff_={chosen:g} "
                  f"({getattr(classifier, 'tradeoff_reason_', '')})")
    rows = []
    if training is not None:
        frames = len(training.frame_indices)
        what = (f"quick live-update model ({params['n_estimators']} trees; Train fits the full "
                "model)" if training.live else f"full model ({params['n_estimators']} trees)")
        rows.append(ResultRow("Model", f"{what}, trained in {training.seconds:.2f} s on "
                                       f"{training.n_labelled:,} scribbled pixels in {frames} "
                                       f"frame{'s' if frames != 1 else ''}", exact))
    else:
        rows.append(ResultRow("Model", f"{params['n_estimators']} trees"
                                       + (f", {origin}" if origin else ""), exact))
    if prediction is not None:
        height, width = prediction.labels.shape
        seconds = prediction.seconds
        rows.append(ResultRow(
            "Speed", f"segments a {width}×{height} frame in {seconds * 1000:.0f} ms "
                     f"(~{1 / max(seconds, 1e-6):.0f} frames/s on this computer)",
            "Measured on the last segmented frame in the worker thread: features, trees, class "
            "probabilities and uncertainty. Batch prediction (Apply to frames, msclassify "
            "predict) skips the probabilities and is a little faster."))
    all_cost = float(bank.batch_costs().sum())
    work = (f"computes {len(used)} of {len(bank)} candidate image features, "
            f"{_share(classifier.feature_cost_per_pixel_, all_cost)} of the time all of them "
            "would take")
    work_tip = (f"Feature cost: {classifier.feature_cost_per_pixel_:.3g} modelled operations per "
                f"pixel (sum of the batch_cost γ of the features used) vs {all_cost:.3g} for "
                "all candidates.")
    if cost is not None:
        work_tip += (f" Tree evaluation cost: {cost.evaluation:.3g} operations per pixel on "
                     f"frame {cost.frame_index} (split cost α × node evaluations / pixels "
                     "sharing each; the mean of the cost map).")
    rows.append(ResultRow("Work", work, work_tip))
    n_channels = classifier.n_channels_
    words = [describe_feature(spec, n_channels) for spec in used]
    shown = "; ".join(words[:_FEATURES_SHOWN]) or "none"
    if len(words) > _FEATURES_SHOWN:
        shown += f"; and {len(words) - _FEATURES_SHOWN} more (point here for all)"
    rows.append(ResultRow("Features", shown,
                          "\n".join(f"{text} ({spec.id}: {spec.name})"
                                    for text, spec in zip(words, used))))
    return rows


# -- all frames, files ---------------------------------------------------------------------------

def apply_to_frames(classifier, stack, frame_indices=None, nice=0, should_stop=None):
    """Segment frames in order; yields ``(frame_index, labels)``.

    The next frames are read and predicted while the caller shows one, two at a time where
    the cores and the memory allow (`msclassify.pixel.batch.predict_frames`, as the command
    line's ``predict`` does), ``nice`` steps below the caller's CPU priority (Linux; the
    widget: `msclassify.pixel.BACKGROUND_NICE`, so the window keeps its share of a busy
    core). Stop iterating (napari: ``worker.quit()``, and ``should_stop`` its
    ``abort_requested``, as a napari worker does not close the generator) to cancel: the
    frames in flight are dropped, frames already yielded stay valid.

    Examples
    --------
    >>> class Threshold:
    ...     def predict(self, frame):
    ...         return (frame > 0).astype(np.uint8) + 1
    >>> stack = FrameStack(np.arange(3 * 2 * 2).reshape(3, 2, 2) - 5)
    >>> [(index, labels.tolist()) for index, labels in apply_to_frames(Threshold(), stack, [2, 0])]
    [(2, [[2, 2], [2, 2]]), (0, [[1, 1], [1, 1]])]
    """
    indices = list(range(stack.n_frames) if frame_indices is None else frame_indices)
    for position, result in predict_frames(classifier, stack, range(len(indices)),
                                           frame_index=indices, nice=nice,
                                           should_stop=should_stop):
        yield indices[position], result.labels


def training_status(report):
    """A training progress report (`msclassify.pixel.TrainingProgress`) in words.

    Examples
    --------
    >>> from msclassify.pixel import TrainingProgress
    >>> training_status(TrainingProgress("teacher", 10, 50, 0.25, 3.0, 1.0))
    'teacher, 25%, about 3 s left'
    >>> training_status(TrainingProgress("μ path 3/5", 0, 50, 0.0, None, 0.1))
    'μ path 3/5, 0%, estimating time left…'
    """
    return (f"{report.stage}, {report.fraction:.0%}, "
            f"{eta_text(report.fraction, 1.0, report.elapsed_s)}")


def eta_text(done, total, elapsed):
    """How long the rest of a run takes at the speed so far, in words.

    Examples
    --------
    >>> eta_text(0, 100, 0.0)
    'estimating time left…'
    >>> eta_text(10, 100, 5.0), eta_text(10, 1000, 5.0), eta_text(100, 100, 50.0)
    ('about 45 s left', 'about 8 min left', 'done')
    """
    if done >= total:
        return "done"
    if done == 0 or elapsed <= 0:
        return "estimating time left…"
    left = elapsed / done * (total - done)
    if left < 60:
        return f"about {max(1, round(left))} s left"
    if left < 3600:
        return f"about {round(left / 60)} min left"
    return f"about {left / 3600:.1f} h left"


def export_frames(classifier, stack, frame_indices, path, export, file_format="tiff",
                  segmented=None):
    """Write `FrameExport` ``export`` of ``frame_indices`` with `msclassify.pixel.open_export`.

    Parameters
    ----------
    classifier : PixelClassifier
    stack : FrameStack
    frame_indices : sequence of int
        Frames to write, in order; file names are ``frame_<index>``.
    path : str or Path
        Folder (``"tiff"``) or file (``"tiff-stack"``).
    export : msclassify.pixel.FrameExport
    file_format : {"tiff", "tiff-stack"}
    segmented : callable, optional
        ``segmented(index)`` returns the labels this model already predicted for
        a frame, or None; those frames are written without predicting again.

    Yields
    ------
    int
        Each frame index after it is written; stop iterating to cancel.
    """
    frame_indices = [int(index) for index in frame_indices]
    if not frame_indices:
        raise ValueError("no frames to export: choose a frame range")
    names = [f"frame_{index:06d}" for index in frame_indices]
    writer = open_export(path, len(frame_indices), stack.frame_shape, export,
                         classifier.classes_, names=names, format=file_format)
    with writer:
        for position, index in enumerate(frame_indices):
            labels = None if segmented is None or writer.needs_probabilities \
                else segmented(index)
            if labels is None:
                labels, probabilities, _ = pixel.predict_frame(
                    classifier, stack.frame(index), writer.needs_probabilities, writer.dtype)
            else:
                probabilities = None
            writer.write(position, labels, probabilities)
            yield index


def class_legend_path(path):
    """Where `write_class_legend` puts the legend of an export at ``path``: beside it.

    Examples
    --------
    >>> class_legend_path("out/flies_mask").name, class_legend_path("out/flies.tif").name
    ('flies_mask_classes.csv', 'flies_classes.csv')
    """
    path = Path(path)
    stem = path.stem if path.suffix.lower() in (".tif", ".tiff") else path.name
    return path.with_name(f"{stem}_classes.csv")


def write_class_legend(path, values, names, colors):
    """Write the classes of an export, ``value,name,color`` per line (``"#rrggbb"``: the
    colours of the scribbles and the result), atomically, to `class_legend_path`.

    Examples
    --------
    >>> import tempfile, os
    >>> legend = write_class_legend(os.path.join(tempfile.mkdtemp(), "masks"), [1, 2],
    ...                             ["background", "fly, adult"], ["#4c8dff", "#1fd655"])
    >>> print(legend.read_text().strip())
    value,name,color
    1,background,#4c8dff
    2,"fly, adult",#1fd655
    """
    import csv
    import io
    import os
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["value", "name", "color"])
    writer.writerows(zip((int(v) for v in values), names, colors))
    legend = class_legend_path(path)
    partial = legend.with_name(legend.name + ".partial")
    partial.write_text(text.getvalue(), encoding="utf-8")
    os.replace(partial, legend)
    return legend


def load_classifier(path, stack=None):
    """Load a saved `PixelClassifier`, checking it fits the image's channels.

    Raises
    ------
    ValueError
        If the file holds another kind of model or was trained on images with
        another number of channels (e.g. RGB vs grey).
    """
    _check_is_model_file(path)
    return load_pixel_model(path, None if stack is None else 3 if stack.rgb else 1,
                            "the selected image")


# First bytes of files people pick by mistake in "Load model" (a model file is a zip container)
_NOT_MODELS = {b"II*\0": "a TIFF image", b"MM\0*": "a TIFF image", b"\x89PNG": "a PNG image",
               b"\xff\xd8\xff": "a JPEG image"}


def _check_is_model_file(path):
    """ValueError saying so when ``path`` is a readable file but no model container at all (a
    damaged model file is left to `load_pixel_model` to describe)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return                   # missing, a folder, unreadable: load_pixel_model says which
    if head.startswith(b"PK"):
        return
    kind = next((kind for magic, kind in _NOT_MODELS.items() if head.startswith(magic)),
                "another kind of file")
    raise ValueError(f"{Path(path).name} is {kind}, not an msclassify model file: choose a "
                     ".msc file saved with 'Save model…' (or `msclassify train`)")


# -- live updates --------------------------------------------------------------------------------

class LiveUpdateScheduler:
    """Debounce edits into jobs: at most one job runs; requests meanwhile coalesce into one.

    Parameters
    ----------
    start_job : callable
        ``start_job(kind)`` launches a job (e.g. a napari worker) and must lead to
        `job_finished` being called when it ends, however it ends.
    timer : object
        Single-shot timer with ``start(milliseconds)`` (restarting it if running)
        and ``stop()``, whose timeout calls `timer_fired` (a ``QTimer`` does this).
    delay_ms : int
        Quiet time after the last edit before a job starts.

    Examples
    --------
    >>> class Timer:
    ...     def start(self, ms): self.running = True
    ...     def stop(self): self.running = False
    >>> started = []
    >>> scheduler = LiveUpdateScheduler(started.append, Timer(), delay_ms=100)
    >>> scheduler.enabled = True
    >>> scheduler.request(RETRAIN); scheduler.request(RETRAIN); scheduler.timer_fired()
    >>> started                                      # two edits, one job
    [2]
    >>> scheduler.request(RETRAIN); scheduler.timer_fired()   # edit while the job runs
    >>> scheduler.job_finished(); started            # ... runs once, right after it
    [2, 2]
    """

    def __init__(self, start_job, timer, delay_ms=20):
        self._start_job = start_job
        self._timer = timer
        self.delay_ms = int(delay_ms)
        self.enabled = False
        self.running = None    # kind of the running job, or None
        self.pending = None    # strongest kind requested and not yet started

    def request(self, kind, delay_ms=None):
        """An edit (RETRAIN) or a frame change (PREDICT) happened; ignored when disabled.

        ``delay_ms`` overrides the quiet time for this request (a frame change
        needs less than a paint stroke: predicting is cheap and a new request
        supersedes a pending one anyway). Without a quiet time the job starts at
        once when none is running (not after the window's pending repaints).
        """
        if self.enabled:
            self._add(kind)
            delay_ms = self.delay_ms if delay_ms is None else int(delay_ms)
            if delay_ms == 0 and self.running is None:
                self._timer.stop()
                self._launch()
            else:
                self._timer.start(delay_ms)

    def run_now(self, kind):
        """Start ``kind`` without debouncing (Train, Segment this frame), or right after the
        current job."""
        self._add(kind)
        self._timer.stop()
        if self.running is None:
            self._launch()

    def timer_fired(self):
        if self.running is None and self.pending is not None:
            self._launch()

    def job_finished(self):
        self.running = None
        if self.pending is not None:
            self._launch()

    def cancel_pending(self):
        """Forget requests not yet started (e.g. live update switched off)."""
        self.pending = None
        self._timer.stop()

    def _add(self, kind):
        if kind not in _KIND_NAMES:
            raise ValueError(f"kind must be PREDICT, RETRAIN or TRAIN, got {kind!r}")
        self.pending = kind if self.pending is None else max(self.pending, kind)

    def _launch(self):
        kind, self.pending = self.pending, None
        self.running = kind
        self._start_job(kind)


# -- output layers -------------------------------------------------------------------------------

@dataclass
class LayerSpec:
    """An output layer: ``viewer.add_<layer_type>(data, name=name, **kwargs)``, then
    ``setattr(layer, key, value)`` for each of ``attributes`` (what ``add_*`` does not take)."""

    name: str
    layer_type: str
    data: np.ndarray
    kwargs: dict = field(default_factory=dict)
    attributes: dict = field(default_factory=dict)


# Colormaps of the output images (napari's dict form): transparent at 0, so the image stays
# visible where nothing is to see, opaque at the top of the contrast range.
PROBABILITY_COLORMAP = {"name": "msclassify probability",
                        "colors": [[0.0, 0.9, 0.4, 0.0], [0.0, 0.9, 0.4, 0.85]]}
UNCERTAINTY_COLORMAP = {"name": "msclassify uncertainty",
                        "colors": [[1.0, 0.5, 0.0, 0.0], [1.0, 0.5, 0.0, 0.5],
                                   [1.0, 0.1, 0.7, 0.9]]}
COST_COLORMAP = {"name": "msclassify cost",
                 "colors": [[0.2, 0.3, 1.0, 0.0], [0.2, 0.6, 1.0, 0.5], [1.0, 1.0, 0.2, 0.95]]}


def _placement(stack, scale, translate):
    n_dims = len(stack.labels_shape)
    return {"scale": tuple(scale) if scale is not None else (1.0,) * n_dims,
            "translate": tuple(translate) if translate is not None else (0.0,) * n_dims}


def _frame_placement(stack, frame_index, scale, translate):
    """How to shape and place a 2-D result so a stack shows it at its frame only."""
    placement = _placement(stack, scale, translate)
    if not stack.is_stack:
        return (lambda image: image), placement
    first, *rest = placement["translate"]
    placement["translate"] = (first + frame_index * placement["scale"][0], *rest)
    return (lambda image: image[np.newaxis]), placement


# The segmentation is drawn fainter than the scribbles (opacity 1), so strokes stay apart from
# the result of the same colour.
SEGMENTATION_OPACITY = 0.45


def segmentation_spec(image_name, stack, classes=(1, 2), scale=None, translate=None):
    """The segmentation Labels layer: one label image per frame, 0 until predicted
    (`new_labels`: a long stack costs memory only for the frames that get predicted)."""
    return LayerSpec(f"{image_name} segmentation", "labels",
                     new_labels(stack, label_dtype(classes)),
                     {**_placement(stack, scale, translate), "opacity": SEGMENTATION_OPACITY})


def probability_spec(image_name, stack, prediction, column, name, color=None, scale=None,
                     translate=None):
    """Image layer of one frame's probability (0-1) of the class in ``column`` of the
    prediction, called ``name``, drawn from transparent (0) to ``color`` (``"#rrggbb"``, the
    class's colour; default green)."""
    place, placement = _frame_placement(stack, prediction.frame_index, scale, translate)
    colormap = PROBABILITY_COLORMAP
    if color is not None:
        rgb = color_rgb(color)
        colormap = {"name": f"msclassify probability {color}",
                    "colors": [[*rgb, 0.0], [*rgb, 0.85]]}
    return LayerSpec(f"{image_name} P({name}) (0–1)", "image",
                     place(np.ascontiguousarray(prediction.probabilities[:, :, column])),
                     {**placement, "colormap": colormap, "contrast_limits": (0.0, 1.0)})


def uncertainty_spec(image_name, stack, prediction, scale=None, translate=None):
    """Image layer of one frame's uncertainty, ``1 - max probability`` (0 = sure)."""
    place, placement = _frame_placement(stack, prediction.frame_index, scale, translate)
    n_classes = prediction.probabilities.shape[2]
    return LayerSpec(f"{image_name} uncertainty (0 = sure)", "image",
                     place(prediction.uncertainty),
                     {**placement, "colormap": UNCERTAINTY_COLORMAP,
                      "contrast_limits": (0.0, 1.0 - 1.0 / n_classes)})


def cost_map_spec(image_name, stack, summary, scale=None, translate=None):
    """Image layer of where the model spent computation (tree operations per pixel)."""
    place, placement = _frame_placement(stack, summary.frame_index, scale, translate)
    top = float(np.percentile(summary.cost_map, 99.5))
    return LayerSpec(f"{image_name} cost map (computation per pixel)", "image",
                     place(summary.cost_map),
                     {**placement, "colormap": COST_COLORMAP,
                      "contrast_limits": (0.0, top if top > 0 else 1.0)})


def label_hints_spec(image_name, stack, hints, scale=None, translate=None):
    """Labels layer outlining where to scribble next (`label_hints`)."""
    place, placement = _frame_placement(stack, hints.frame_index, scale, translate)
    return LayerSpec(f"{image_name} where to label next", "labels", place(hints.regions),
                     {**placement, "opacity": 1.0}, {"contour": 3})
