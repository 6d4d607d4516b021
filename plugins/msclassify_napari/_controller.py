"""The pixel-classifier widget's logic, without Qt or napari: testable in plain Python.

The widget (`_widget.py`) only wires Qt controls and napari layers to what is
here:

* `FrameStack` views an image layer's data (2-D, RGB, or a time stack, lazy or
  not) as frames; `snapshot_scribbles` copies the labelled frames of a Labels
  layer so a worker thread trains on a stable copy while the user keeps painting.
* `update_job` is the generator a worker thread runs for Train, for a live
  update and for a frame change: it yields a `TrainedModel`, then the current
  frame's `FramePrediction`, then its `CostSummary`, then (for Train) the mu = 0
  model's `CostSummary`, so the segmentation appears before the slower extras.
* `apply_to_frames` and `export_masks` are generators too: one yield per frame
  drives a progress bar, and stopping the generator between yields cancels.
* `LiveUpdateScheduler` turns paint events into retrain jobs: it debounces, runs
  one job at a time and coalesces whatever arrives meanwhile into one follow-up.
* `prediction_layers` describes the output layers as `LayerSpec`s.
"""

import dataclasses
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from msclassify import pixel
from msclassify.io import open_writer
from msclassify.pixel import PixelClassifier, label_dtype, load_pixel_model

__all__ = ["CLASS_NAMES_KEY", "PREDICT", "RETRAIN", "TRAIN", "ClassifierSettings", "CostSummary",
           "FramePrediction", "FrameStack", "LayerSpec", "LiveUpdateScheduler", "Scribbles",
           "TrainedModel", "apply_to_frames", "class_names", "cost_map_layer", "cost_summary",
           "export_masks", "load_classifier", "predict_frame", "prediction_layers",
           "segmentation_spec", "snapshot_scribbles", "update_job"]

# Labels-layer metadata key holding {label value: class name}.
CLASS_NAMES_KEY = "msclassify_class_names"

# Job kinds, ordered: a pending request is upgraded to the strongest one asked for.
PREDICT, RETRAIN, TRAIN = 1, 2, 3
_KIND_NAMES = {PREDICT: "predict", RETRAIN: "retrain", TRAIN: "train"}

_DEFAULTS = PixelClassifier().get_params()
LIVE_N_ESTIMATORS = 30


@dataclass(frozen=True)
class ClassifierSettings:
    """The knobs the widget exposes; everything else keeps `PixelClassifier`'s defaults.

    One exception: 30 trees instead of 50, so that a live update of a 1024² frame
    takes under 0.3 s (``benchmarks/bench_napari.py``); on the fly benchmark the
    SEG is the same (synthetic 0.848) or 0.002 lower (real clip 0.690).

    Examples
    --------
    >>> settings = ClassifierSettings(n_estimators=10)
    >>> settings.make_classifier().get_params()["n_estimators"]
    10
    >>> settings.replace(cost_tradeoff=0.0).cost_tradeoff
    0.0
    """

    features: str = _DEFAULTS["features"]
    cost_tradeoff: float = _DEFAULTS["cost_tradeoff"]
    split_cost: float = _DEFAULTS["split_cost"]
    n_estimators: int = LIVE_N_ESTIMATORS
    max_leaves: int = _DEFAULTS["max_leaves"]
    semi_supervised: bool = _DEFAULTS["semi_supervised"]
    random_state: int = 0

    TOOLTIPS = {
        "features": "Candidate features: 'fast' (few, cheap), 'default' (full resolution and "
                    "2x2 blocks), 'pyramid' (also 4x4 / 8x8 blocks: cheapest models, blockier "
                    "outlines), 'rich' (more scales). Each is computed on the full image or a "
                    "2x2 / 4x4 / 8x8 block-mean level.",
        "cost_tradeoff": "Cost tradeoff mu: how much accuracy the model gives up per operation "
                         "per pixel it saves. 0 = plain gradient boosting (most accurate, most "
                         "expensive); larger = fewer, coarser features and shallower paths.",
        "split_cost": "Split cost alpha: cost of one tree-node evaluation, in operations of the "
                      "feature cost model (4 = about four filter multiply-adds).",
        "n_estimators": "Number of boosting rounds (trees per class). Fewer train faster: 30 "
                        "keeps a live update of a 1024² frame under 0.3 s.",
        "max_leaves": "Maximum leaves per tree (trees grow best-first).",
        "semi_supervised": "Also learn from unlabelled pixels of the scribbled frames (GRBB): "
                           "helps when there are only a few scribbles; adds about a second "
                           "to training.",
    }

    def replace(self, **changes):
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def make_classifier(self):
        """An unfitted `PixelClassifier` with these settings."""
        return PixelClassifier(self.features, cost_tradeoff=self.cost_tradeoff,
                               split_cost=self.split_cost, n_estimators=self.n_estimators,
                               max_leaves=self.max_leaves, semi_supervised=self.semi_supervised,
                               random_state=self.random_state)


class FrameStack:
    """An image layer's data seen as frames: ``(H, W)``, ``(H, W, C)``, ``(T, H, W[, C])``.

    ``data`` may be any array-like napari accepts (numpy, dask, zarr); a frame
    is read only when asked for.

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

    def check_labels(self, labels_shape):
        """Raise ValueError unless a Labels layer of ``labels_shape`` matches the image."""
        if tuple(labels_shape) != self.labels_shape:
            raise ValueError(f"the scribble layer has shape {tuple(labels_shape)} but the image "
                             f"needs {self.labels_shape}; create a new scribble layer for this "
                             "image")


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


def snapshot_scribbles(labels, stack):
    """Copy the labelled frames of ``labels`` (the scribble layer's data) for training.

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
    labels = np.asarray(labels)
    stack.check_labels(labels.shape)
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(f"scribbles must be an integer Labels layer, got dtype {labels.dtype}")
    if stack.is_stack:
        indices = np.flatnonzero(labels.reshape(labels.shape[0], -1).any(axis=1))
        frames = tuple(labels[t].copy() for t in indices)
    else:
        indices = [0] if labels.any() else []
        frames = (labels.copy(),) if indices else ()
    classes = np.unique(np.concatenate([np.unique(f[f > 0]) for f in frames])) if frames \
        else np.zeros(0, labels.dtype)
    if classes.size < 2:
        found = "nothing" if classes.size == 0 else f"only label {classes[0]}"
        raise ValueError(f"the scribble layer holds {found}: paint at least two classes "
                         "(e.g. 1 = background, 2 = object; 0 is unlabelled)")
    return Scribbles(tuple(int(t) for t in indices), frames, classes)


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


# -- job results ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrainedModel:
    classifier: PixelClassifier
    seconds: float
    n_labelled: int
    frame_indices: tuple

    @property
    def features_used(self):
        return tuple(self.classifier.features_used_)


@dataclass(frozen=True)
class FramePrediction:
    """Segmentation of one frame: labels (class values), probabilities, uncertainty."""

    frame_index: int
    labels: np.ndarray          # (H, W), values of classifier.classes_
    probabilities: np.ndarray   # (H, W, K) float32
    uncertainty: np.ndarray     # (H, W) float32, 1 - max probability
    seconds: float


@dataclass(frozen=True)
class CostSummary:
    """Prediction cost per pixel of one model on one frame, in modelled operations.

    ``evaluation`` is the mean of the cost map (tree-node evaluations times
    split_cost, divided by the pixels sharing each evaluation); ``features`` is
    the whole-image cost of the features the model computes, per pixel.
    ``baseline`` marks the mu = 0 model trained for comparison.
    """

    frame_index: int
    evaluation: float
    features: float
    features_used: tuple
    cost_map: np.ndarray | None = None
    baseline: bool = False
    seconds: float = 0.0

    @property
    def total(self):
        return self.evaluation + self.features


def _train(settings, stack, scribbles, cancel, on_progress, feature_cache):
    def callback(iteration, n_iterations):
        if on_progress is not None:
            on_progress(iteration, n_iterations)
        return cancel is not None and cancel.is_set()

    frames = [stack.frame(t) for t in scribbles.frame_indices]
    classifier = settings.make_classifier()
    start = time.perf_counter()
    classifier.fit(frames, list(scribbles.labels), callback=callback, feature_cache=feature_cache)
    return TrainedModel(classifier, time.perf_counter() - start, scribbles.n_labelled,
                        scribbles.frame_indices)


def predict_frame(classifier, frame, frame_index):
    """Segment one frame with a single feature computation and tree pass."""
    start = time.perf_counter()
    labels, probabilities, uncertainty = pixel.predict_frame(classifier, frame, probabilities=True)
    return FramePrediction(frame_index, labels, probabilities, uncertainty,
                           time.perf_counter() - start)


def cost_summary(classifier, frame, frame_index, baseline=False, keep_map=True, seconds=0.0):
    """Mean evaluation and feature cost per pixel of ``classifier`` on ``frame``."""
    cost_map = classifier.cost_map(frame)
    return CostSummary(frame_index, float(cost_map.mean()), classifier.feature_cost_per_pixel_,
                       tuple(classifier.features_used_), cost_map if keep_map else None,
                       baseline, seconds)


def update_job(kind, settings, stack, frame_index, scribbles=None, classifier=None, cancel=None,
               on_progress=None, feature_cache=None):
    """What a worker thread runs for Train, a live update or a frame change.

    Parameters
    ----------
    kind : PREDICT, RETRAIN or TRAIN
        PREDICT segments ``frame_index`` with ``classifier``; RETRAIN first trains
        a new model on ``scribbles``; TRAIN also trains the mu = 0 model and
        reports its cost for comparison (skipped when mu is already 0).
    settings : ClassifierSettings
    stack : FrameStack
    frame_index : int
    scribbles : Scribbles, optional
        Required for RETRAIN and TRAIN.
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

    Yields
    ------
    TrainedModel, FramePrediction, CostSummary, then (TRAIN) the baseline CostSummary.
    """
    if kind not in _KIND_NAMES:
        raise ValueError(f"kind must be PREDICT, RETRAIN or TRAIN, got {kind!r}")
    cancel = cancel or threading.Event()
    if kind >= RETRAIN:
        if scribbles is None:
            raise ValueError("training needs scribbles")
        model = _train(settings, stack, scribbles, cancel, on_progress, feature_cache)
        if cancel.is_set():
            return
        classifier = model.classifier
        yield model
    elif classifier is None:
        raise ValueError("nothing to predict with: train a model or load one first")
    frame = stack.frame(frame_index)
    yield predict_frame(classifier, frame, frame_index)
    yield cost_summary(classifier, frame, frame_index)
    if kind == TRAIN and settings.cost_tradeoff > 0 and not cancel.is_set():
        baseline = _train(settings.replace(cost_tradeoff=0.0), stack, scribbles, cancel, None,
                          feature_cache)
        if cancel.is_set():
            return
        yield cost_summary(baseline.classifier, frame, frame_index, baseline=True, keep_map=False,
                           seconds=baseline.seconds)


def apply_to_frames(classifier, stack, frame_indices=None):
    """Segment frames one by one; yields ``(frame_index, labels)``.

    Stop iterating (napari: ``worker.quit()``) to cancel; frames already
    yielded stay valid.
    """
    indices = range(stack.n_frames) if frame_indices is None else frame_indices
    for index in indices:
        yield index, classifier.predict(stack.frame(index))


def export_masks(segmentation, frame_indices, path, names=None, file_format="tiff"):
    """Write the segmentation of ``frame_indices`` with `msclassify.io.open_writer`.

    ``segmentation`` is ``(H, W)`` or ``(T, H, W)``; frames are written atomically
    and the output can be resumed or read back by `msclassify.io.open_frames`.
    Yields each frame index after it is written.
    """
    segmentation = np.asarray(segmentation)
    stacked = segmentation.ndim == 3
    n_frames = segmentation.shape[0] if stacked else 1
    if not np.issubdtype(segmentation.dtype, np.integer):
        raise TypeError(f"the segmentation must hold integer labels, got {segmentation.dtype}")
    dtype = label_dtype(segmentation)
    writer = open_writer(path, n_frames, segmentation.shape[-2:], dtype=dtype, names=names,
                         format=file_format)
    with writer:
        for index in frame_indices:
            frame = segmentation[index] if stacked else segmentation
            writer.write(index, np.asarray(frame).astype(dtype, copy=False))
            yield index


def load_classifier(path, stack=None):
    """Load a saved `PixelClassifier`, checking it fits the image's channels.

    Raises
    ------
    ValueError
        If the file holds another kind of model or was trained on images with
        another number of channels (e.g. RGB vs grey).
    """
    return load_pixel_model(path, None if stack is None else 3 if stack.rgb else 1,
                            "the selected image")


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
        supersedes a pending one anyway).
        """
        if self.enabled:
            self._add(kind)
            self._timer.start(self.delay_ms if delay_ms is None else int(delay_ms))

    def run_now(self, kind):
        """Start ``kind`` without debouncing (the Train button), or right after the current job."""
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
    """An output layer: ``viewer.add_<layer_type>(data, name=name, **kwargs)``."""

    name: str
    layer_type: str
    data: np.ndarray
    kwargs: dict = field(default_factory=dict)


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


def segmentation_spec(image_name, stack, classes, scale=None, translate=None):
    """The segmentation Labels layer: one label image per frame, 0 until predicted.

    ``np.zeros`` leaves untouched pages unallocated, so a long stack costs
    memory only for the frames that get predicted.
    """
    dtype = label_dtype(classes)
    return LayerSpec(f"{image_name} segmentation", "labels",
                     np.zeros(stack.labels_shape, dtype=dtype),
                     _placement(stack, scale, translate))


def prediction_layers(image_name, stack, prediction, names, scale=None, translate=None):
    """Image layers of one frame's class probabilities and uncertainty."""
    place, placement = _frame_placement(stack, prediction.frame_index, scale, translate)
    n_classes = prediction.probabilities.shape[2]
    specs = [LayerSpec(f"{image_name} P({name})", "image",
                       place(np.ascontiguousarray(prediction.probabilities[:, :, k])),
                       {**placement, "colormap": "magma", "contrast_limits": (0.0, 1.0),
                        "visible": False, "blending": "additive"})
             for k, name in enumerate(names)]
    specs.append(LayerSpec(f"{image_name} uncertainty", "image", place(prediction.uncertainty),
                           {**placement, "colormap": "inferno", "visible": False,
                            "contrast_limits": (0.0, 1.0 - 1.0 / n_classes),
                            "blending": "additive"}))
    return specs


def cost_map_layer(image_name, stack, summary, scale=None, translate=None):
    """Image layer of where the model spent computation (operations per pixel)."""
    place, placement = _frame_placement(stack, summary.frame_index, scale, translate)
    top = float(summary.cost_map.max())
    return LayerSpec(f"{image_name} cost map", "image", place(summary.cost_map),
                     {**placement, "colormap": "viridis", "visible": False,
                      "contrast_limits": (0.0, top if top > 0 else 1.0),
                      "blending": "additive"})
