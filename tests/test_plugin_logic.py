"""The napari plugin's logic without Qt: frames, scribble snapshots, jobs, debouncing, layer
specs, the lazy reader, sample data; and the library's tabular cost sweep that its tabular
widget (and the CLI) run."""

import threading

import numpy as np
import pytest
import tifffile
from scipy import ndimage
from sklearn.base import clone

from msclassify import CEGBClassifier
from msclassify.datasets import sample_data_path
from msclassify.io import FrameReadError, read_label_stack
from msclassify.pixel import PixelClassifier
from msclassify.tabular import (DEFAULT_COST_TRADEOFFS, TabularData, cost_sweep, load_csv,
                                load_feature_costs, load_svmlight, split_train_test)
from msclassify.features import FeatureSpec
from msclassify.pixel import FrameExport
from msclassify_napari._controller import (CLASS_COLORS_KEY, CLASS_NAMES_KEY,
                                           DEFAULT_CLASS_COLORS, LIVE_COLSAMPLE, LIVE_MAX_BINS,
                                           LIVE_MIN_TREES,
                                           LIVE_N_COST_SAMPLES, LIVE_TREE_BUDGET,
                                           LIVE_N_ESTIMATORS, LIVE_WITHOUT_TEACHER, PREDICT,
                                           RETRAIN, TRAIN,
                                           ClassifierSettings, CostSummary, FramePrediction,
                                           FrameStack, LabelHints, LiveUpdateScheduler,
                                           ScribbledFrames, TrainedModel, apply_to_frames,
                                           class_colors, class_names, color_rgb,
                                           cost_map_spec, describe_feature,
                                           describe_model, eta_text, export_frames, label_hints,
                                           label_hints_spec, load_classifier, new_labels,
                                           probability_spec,
                                           segmentation_spec, snapshot_scribbles,
                                           training_status, uncertainty_spec, update_job)
from msclassify_napari._frame_labels import FrameLabels
from msclassify_napari._reader import LazyFrames, activate, get_reader, read_frames
from msclassify_napari._sample_data import sample_flies

TABULAR = sample_data_path("tabular")

SMALL = ClassifierSettings(n_estimators=8, max_leaves=7, features="fast")


def two_region_stack(n_frames=3, size=48):
    """Dark frames with a bright square whose position moves with t, and its mask."""
    rng = np.random.default_rng(0)
    frames = rng.integers(10, 40, (n_frames, size, size)).astype(np.uint8)
    masks = np.zeros((n_frames, size, size), bool)
    for t in range(n_frames):
        masks[t, 10 + 2 * t:30 + 2 * t, 12:32] = True
    frames[masks] += 150
    return frames, masks


def iou(a, b):
    return (a & b).sum() / (a | b).sum()


def scribbles_for(masks, frame=0):
    """Every 3rd pixel inside the square (2) and of the floor 3 px away from it (1)."""
    labels = np.zeros(masks.shape, np.uint8)
    floor = ~ndimage.binary_dilation(masks[frame], iterations=3)
    for value, region in ((1, floor), (2, masks[frame])):
        ys, xs = np.nonzero(region)
        labels[frame, ys[::3], xs[::3]] = value
    return labels


# -- frames and scribbles ------------------------------------------------------------------------

@pytest.mark.parametrize("shape, rgb, n_frames, frame_shape", [
    ((20, 30), False, 1, (20, 30)),
    ((20, 30, 3), True, 1, (20, 30)),
    ((4, 20, 30), False, 4, (20, 30)),
    ((4, 20, 30, 4), True, 4, (20, 30)),
])
def test_frame_stack_layouts(shape, rgb, n_frames, frame_shape):
    data = np.arange(np.prod(shape), dtype=np.uint32).reshape(shape)
    stack = FrameStack(data, rgb=rgb)
    assert (stack.n_frames, stack.frame_shape, stack.is_stack) == (n_frames, frame_shape,
                                                                  n_frames > 1)
    last = stack.frame(n_frames - 1)
    expected = data[n_frames - 1] if n_frames > 1 else data
    np.testing.assert_array_equal(last, expected[..., :3] if rgb else expected)
    assert last.shape == frame_shape + ((3,) if rgb else ())


def test_frame_stack_rejects_what_it_cannot_segment():
    with pytest.raises(ValueError, match="Split Stack"):
        FrameStack(np.zeros((2, 3, 20, 30)))
    with pytest.raises(ValueError, match="3 or 4 channels"):
        FrameStack(np.zeros((20, 30, 5)), rgb=True)
    with pytest.raises(IndexError, match="out of range"):
        FrameStack(np.zeros((2, 20, 30))).frame(2)
    with pytest.raises(ValueError, match="create a new scribble layer"):
        FrameStack(np.zeros((2, 20, 30))).check_labels((2, 20, 31))


def test_snapshot_copies_only_labelled_frames():
    frames, masks = two_region_stack()
    labels = scribbles_for(masks, frame=1)
    snapshot = snapshot_scribbles(labels, FrameStack(frames))
    assert snapshot.frame_indices == (1,)
    assert snapshot.classes.tolist() == [1, 2]
    assert snapshot.n_labelled == int(np.count_nonzero(labels))
    labels[1] = 0                                   # the user keeps painting...
    assert snapshot.n_labelled > 0                  # ... the worker's copy does not change


def test_snapshot_needs_two_classes_and_integers():
    stack = FrameStack(np.zeros((2, 8, 8)))
    labels = np.zeros((2, 8, 8), np.uint8)
    with pytest.raises(ValueError, match="holds nothing"):
        snapshot_scribbles(labels, stack)
    labels[0, 0, 0] = 3
    with pytest.raises(ValueError, match="only label 3"):
        snapshot_scribbles(labels, stack)
    with pytest.raises(TypeError, match="integer"):
        snapshot_scribbles(labels.astype(float), stack)
    single = snapshot_scribbles(np.array([[1, 0], [0, 2]]), FrameStack(np.zeros((2, 2))))
    assert single.frame_indices == (0,)


def test_snapshot_of_given_frames_skips_the_scan_and_empty_frames():
    frames, masks = two_region_stack()
    labels = scribbles_for(masks, frame=1)
    stack = FrameStack(frames)
    # frame 0 is named but empty (erased): dropped; frame 2 holds scribbles but is not named
    labels[2, 0, 0], labels[2, 5, 5] = 1, 2
    assert snapshot_scribbles(labels, stack, frames=[0, 1]).frame_indices == (1,)
    assert snapshot_scribbles(labels, stack).frame_indices == (1, 2)


def test_scribbled_frames_follow_strokes_without_rescanning():
    labels = np.zeros((5, 8, 8), np.uint8)
    labels[1, 0, 0], labels[1, 4, 4] = 1, 2
    stack = FrameStack(np.zeros((5, 8, 8)))
    tracked = ScribbledFrames()
    assert not tracked.scanned
    assert tracked.snapshot(labels, stack).frame_indices == (1,)   # scans once when needed
    assert tracked.scanned and tracked.frames == [1]
    labels[3, 2, 2] = 1                        # painted without telling: not seen ...
    assert tracked.snapshot(labels, stack).frame_indices == (1,)
    tracked.mark(3)                            # ... the stroke's paint event marks its frame
    assert tracked.snapshot(labels, stack).frame_indices == (1, 3)
    labels[1] = 0                              # erasing a frame drops it
    tracked.mark(1)
    with pytest.raises(ValueError, match="only label 1"):
        tracked.snapshot(labels, stack)
    tracked.reset()
    assert tracked.frames == [] and not tracked.scanned
    flat = ScribbledFrames().snapshot(np.array([[1, 2]], np.uint8), FrameStack(np.zeros((1, 2))))
    assert flat.frame_indices == (0,)


def test_frame_labels_store_only_written_frames_and_index_like_numpy():
    reference = np.zeros((6, 5, 7), np.uint16)
    labels = FrameLabels(6, (5, 7), np.uint16)
    assert labels.shape == reference.shape and labels.ndim == 3 and len(labels) == 6
    assert labels.nbytes_stored == 0 and labels.stored_frames() == []
    row = np.random.default_rng(0).integers(0, 9, 7)
    # napari's brush: one index array per axis, across two frames
    stroke = (np.array([1, 1, 4, 4]), np.array([0, 2, 4, 4]), np.array([6, 1, 0, 3]))
    for target in (reference, labels):
        target[stroke] = 3
        target[2, 1:3, 2:5] = 7                      # an integer frame and slices
        target[-1, 0] = row                           # negative frame, a row
        target[[0, 3], 4, 4] = 9                     # a list of frames
    assert labels.stored_frames() == [0, 1, 2, 3, 4, 5]
    for key in (1, -1, (2, 1), (slice(1, 5), slice(None), 2), [0, 4], stroke,
                (np.array([4]), np.array([4]), np.array([3])), slice(None, None, -2),
                ([4, 1, 4], [0, 2, 4]),                       # frames broadcast with pixels
                ([[1], [4]], 0, [6, 0, 1]), (slice(None, 3), [1, 2], [2, 3]), ([], 0)):
        np.testing.assert_array_equal(labels[key], reference[key])
    np.testing.assert_array_equal(np.asarray(labels), reference)
    fresh = FrameLabels(3, (2, 2))
    page = fresh[1]                         # a frame never written reads as zeros ...
    page[0, 0] = 5                          # ... and writing to that copy changes nothing
    assert fresh.stored_frames() == [] and fresh[1].sum() == 0
    with pytest.raises(IndexError):
        fresh[3]
    with pytest.raises(TypeError, match="integer"):
        FrameLabels(2, (2, 2), np.float32)


def test_scribbles_in_frame_labels_are_found_without_a_scan():
    frames, masks = two_region_stack()
    stack = FrameStack(frames)
    labels = new_labels(stack)
    assert isinstance(labels, FrameLabels)
    labels[1] = scribbles_for(masks, frame=1)[1]
    labels[2, 0, 0] = 1
    labels[2, 0, 0] = 0                          # painted, then erased: not a scribbled frame
    tracked = ScribbledFrames()
    tracked.rescan(labels)
    assert tracked.frames == [1]
    snapshot = snapshot_scribbles(labels, stack)
    assert snapshot.frame_indices == (1,) and snapshot.classes.tolist() == [1, 2]


def test_class_colours_from_metadata_or_the_default_palette():
    assert class_colors({}, [1, 2, 11]) == [DEFAULT_CLASS_COLORS[0], DEFAULT_CLASS_COLORS[1],
                                            DEFAULT_CLASS_COLORS[0]]
    assert class_colors({CLASS_COLORS_KEY: {"3": "#123456"}}, [3]) == ["#123456"]
    assert len(set(DEFAULT_CLASS_COLORS)) == len(DEFAULT_CLASS_COLORS) >= 4
    assert color_rgb("#00ff80") == [0.0, 1.0, 128 / 255]


def test_class_names_from_metadata():
    assert class_names({CLASS_NAMES_KEY: {1: "floor", "2": "fly"}}, [1, 2, 3]) == \
        ["floor", "fly", "class 3"]
    assert class_names(None, np.array([4])) == ["class 4"]


# -- jobs ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained():
    frames, masks = two_region_stack()
    stack = FrameStack(frames)
    scribbles = snapshot_scribbles(scribbles_for(masks), stack)
    results = list(update_job(TRAIN, SMALL.replace(cost_tradeoff=2e-4), stack, 2, scribbles))
    return frames, masks, stack, scribbles, results


def test_train_job_yields_model_prediction_and_cost(trained):
    frames, masks, _, _, results = trained
    assert [type(r) for r in results] == [TrainedModel, FramePrediction, CostSummary]
    model, prediction, cost = results
    assert model.n_labelled > 0 and model.frame_indices == (0,) and model.seconds > 0
    assert not model.live and model.settings == SMALL.replace(cost_tradeoff=2e-4)
    assert model.classifier.n_estimators == SMALL.n_estimators
    # frame 2 was not scribbled: the square moved, the model must still find it
    assert prediction.frame_index == 2
    # mu > 0 picks coarse (8x8- or 4x4-block) features: blocky edges (measured IoU 0.83)
    assert iou(prediction.labels == 2, masks[2]) > 0.75
    np.testing.assert_allclose(prediction.probabilities.sum(axis=2), 1, atol=1e-5)
    np.testing.assert_allclose(prediction.uncertainty, 1 - prediction.probabilities.max(axis=2))
    np.testing.assert_array_equal(prediction.labels, model.classifier.predict(frames[2]))
    # cost summary: mean of the public cost map, features from the bank
    assert cost.cost_map.shape == (48, 48) and cost.frame_index == 2
    assert cost.evaluation == pytest.approx(float(model.classifier.cost_map(frames[2]).mean()))
    bank = model.classifier.bank_
    assert cost.features == pytest.approx(
        sum(bank.specs[bank.index(i)].batch_cost for i in model.classifier.features_used_))


def test_plain_boosting_segments_the_moved_square_exactly():
    """Floor scribbles up to 1 px from the edge pin it down for mu = 0.

    With the 3 px gap of `scribbles_for`, full-resolution and 4x4-block intensity
    separate the scribbles equally well, so which one later trees pick decides the
    moved square's edges (measured: 80 of 2304 pixels off by 2 rows).
    """
    frames, masks = two_region_stack()
    stack = FrameStack(frames)
    labels = np.zeros(masks.shape, np.uint8)
    for value, region in ((1, ~ndimage.binary_dilation(masks[0])), (2, masks[0])):
        ys, xs = np.nonzero(region)
        labels[0, ys[::3], xs[::3]] = value
    scribbles = snapshot_scribbles(labels, stack)
    _, prediction, _ = update_job(RETRAIN, SMALL.replace(cost_tradeoff=0.0), stack, 2, scribbles)
    np.testing.assert_array_equal(prediction.labels == 2, masks[2])


def test_predict_job_reuses_the_classifier(trained):
    frames, masks, stack, _, results = trained
    classifier = results[0].classifier
    prediction, cost = list(update_job(PREDICT, SMALL, stack, 1, classifier=classifier))
    assert iou(prediction.labels == 2, masks[1]) > 0.75
    np.testing.assert_array_equal(prediction.labels, classifier.predict(frames[1]))
    assert cost.frame_index == 1
    with pytest.raises(ValueError, match="train a model or load one"):
        list(update_job(PREDICT, SMALL, stack, 1))
    with pytest.raises(ValueError, match="kind"):
        list(update_job(7, SMALL, stack, 1, classifier=classifier))


def test_live_update_trains_the_quick_model_and_train_the_full_one(trained):
    _, _, stack, scribbles, _ = trained
    settings = SMALL.replace(n_estimators=LIVE_N_ESTIMATORS + 5, semi_supervised=True)
    live = next(update_job(RETRAIN, settings, stack, 0, scribbles))
    assert live.live and live.settings == settings.for_live_update()
    assert live.classifier.n_estimators == LIVE_N_ESTIMATORS
    assert live.classifier.n_cost_samples == LIVE_N_COST_SAMPLES
    assert live.classifier.semi_supervised is False
    full = next(update_job(TRAIN, settings.replace(semi_supervised=False), stack, 0,
                           lambda: scribbles))          # scribbles taken in the worker
    assert not full.live and full.classifier.n_estimators == LIVE_N_ESTIMATORS + 5


def test_job_with_hints_outlines_where_the_model_hesitates(trained):
    _, _, stack, scribbles, results = trained
    kinds = [type(r) for r in update_job(PREDICT, SMALL, stack, 2,
                                         classifier=results[0].classifier, hints=True)]
    assert kinds == [FramePrediction, LabelHints, CostSummary]


def test_live_job_without_cost_summary_stops_after_the_prediction(trained):
    """Live updates skip the cost pass (a second walk of the trees) unless the cost map is shown."""
    _, _, stack, scribbles, _ = trained
    kinds = [type(r) for r in update_job(RETRAIN, SMALL, stack, 2, scribbles, cost=False)]
    assert kinds == [TrainedModel, FramePrediction]


def test_cancelled_training_yields_nothing(trained):
    _, _, stack, scribbles, _ = trained
    cancel = threading.Event()
    progress = []

    def on_progress(iteration, n_iterations):
        progress.append(iteration)
        cancel.set()

    assert list(update_job(RETRAIN, SMALL, stack, 0, scribbles, cancel=cancel,
                           on_progress=on_progress)) == []
    assert progress == [1]          # stopped after the first boosting round


def test_training_reports_its_stages_to_on_stage(trained):
    _, _, stack, scribbles, _ = trained
    reports = []
    kinds = [type(r) for r in update_job(TRAIN, SMALL, stack, 0, scribbles, cost=False,
                                         on_stage=reports.append)]
    assert kinds == [TrainedModel, FramePrediction]
    stages = list(dict.fromkeys(r.stage for r in reports))
    assert stages[0] == "features" and stages[-2:] == ["model", "done"]
    assert training_status(reports[-2]) == "model, 100%, done"


def test_label_hints_rank_regions_by_summed_uncertainty():
    uncertainty = np.zeros((30, 30), np.float32)
    uncertainty[2:5, 2:5] = 0.3              # 9 px, sum 2.7
    uncertainty[20:24, 20:24] = 0.4          # 16 px, sum 6.4: the most uncertain region
    uncertainty[12, 12] = 0.45               # 1 px: too small
    uncertainty[2:4, 20:22] = 0.2            # below half of the largest possible (0.25)
    hints = label_hints(uncertainty, n_classes=2, min_pixels=4)
    assert hints.dtype == np.uint8
    assert hints[21, 21] == 1 and hints[3, 3] == 2
    assert hints[12, 12] == 0 and hints[2, 20] == 0
    # each region is grown by 2 px so that nearby fragments join
    assert hints[0, 3] == 2 and hints[5, 3] == 2 and hints[8, 3] == 0
    assert label_hints(uncertainty, 2, n_regions=1, min_pixels=4).max() == 1
    assert not label_hints(np.zeros((5, 5), np.float32), 3).any()
    # three classes: the largest uncertainty is 2/3, so a third is the threshold
    assert label_hints(np.full((4, 4), 0.3, np.float32), 3, min_pixels=1).max() == 0


def test_apply_to_frames_reads_only_a_few_frames_ahead_and_matches_predict(trained):
    frames, _, stack, _, results = trained
    classifier = results[0].classifier
    calls = []

    class CountingStack(FrameStack):
        def frame(self, index):
            calls.append(index)
            return super().frame(index)

    many = np.concatenate([frames] * 10)
    generator = apply_to_frames(classifier, CountingStack(many))
    index, labels = next(generator)
    generator.close()                                   # what cancelling does
    assert index == 0
    np.testing.assert_array_equal(labels, classifier.predict(many[0]))
    for thread in threading.enumerate():    # the frames in flight end after the close
        if thread.name == "msclassify predict_frames":
            thread.join(timeout=30)
    # in order, and not the whole stack: one shown, up to three handed over (two waiting
    # and one whose run waits for room), two in flight, two read ahead
    assert calls == sorted(calls) and len(calls) <= 8 < len(many)
    seen = list(apply_to_frames(classifier, stack, [2, 0]))
    assert [i for i, _ in seen] == [2, 0]
    for index, labels in seen:
        np.testing.assert_array_equal(labels, classifier.predict(frames[index]))


def test_eta_text():
    assert eta_text(0, 10, 0.0) == "estimating time left…"
    assert eta_text(1, 3, 2.0) == "about 4 s left"
    assert eta_text(1, 100, 2.0) == "about 3 min left"
    assert eta_text(1, 10000, 2.0) == "about 5.6 h left"
    assert eta_text(3, 3, 9.0) == "done"


def test_export_frames_writes_stored_frames_and_predicts_the_rest(trained, tmp_path):
    frames, masks, stack, _, results = trained
    classifier = results[0].classifier
    stored = {0: np.full((48, 48), 2, np.uint8)}          # "already segmented" frame 0
    asked = []

    def segmented(index):
        asked.append(index)
        return stored.get(index)

    written = list(export_frames(classifier, stack, [0, 2], tmp_path / "masks",
                                 FrameExport("mask", target=2), segmented=segmented))
    assert written == [0, 2] and asked == [0, 2]
    saved = read_label_stack(tmp_path / "masks")
    assert saved.names() == ["frame_000000", "frame_000002"]
    np.testing.assert_array_equal(saved.read(0), np.full((48, 48), 255))     # from the layer
    np.testing.assert_array_equal(saved.read(1), (classifier.predict(frames[2]) == 2) * 255)
    # a probability is always predicted (the layer holds labels only), here into a stack
    list(export_frames(classifier, stack, [1], tmp_path / "p.tif",
                       FrameExport("probability", target=2), "tiff-stack", segmented))
    probability = tifffile.imread(tmp_path / "p.tif")
    assert probability.dtype == np.float32 and probability.shape == (48, 48)
    np.testing.assert_allclose(probability, classifier.predict_proba(frames[1])[..., 1])
    assert asked == [0, 2]
    with pytest.raises(ValueError, match="no frames"):
        list(export_frames(classifier, stack, [], tmp_path / "none", FrameExport()))
    with pytest.raises(ValueError, match="class 7 is not one"):
        list(export_frames(classifier, stack, [0], tmp_path / "x", FrameExport("mask", 7)))


def test_load_classifier_round_trip_and_checks(trained, tmp_path):
    frames, _, stack, _, results = trained
    classifier = results[0].classifier
    classifier.save(tmp_path / "pixel.msc")
    loaded = load_classifier(tmp_path / "pixel.msc", stack)
    np.testing.assert_array_equal(loaded.predict(frames[1]), classifier.predict(frames[1]))
    with pytest.raises(ValueError, match="1-channel images but the selected image has 3"):
        load_classifier(tmp_path / "pixel.msc", FrameStack(np.zeros((8, 8, 3)), rgb=True))
    X = np.random.default_rng(0).normal(size=(60, 2))
    CEGBClassifier(n_estimators=2).fit(X, X[:, 0] > 0).save(tmp_path / "tabular.msc")
    with pytest.raises(ValueError, match="not a pixel classifier"):
        load_classifier(tmp_path / "tabular.msc")
    # picking an image instead of a model says what the file is
    tifffile.imwrite(tmp_path / "frame.tif", frames[0])
    with pytest.raises(ValueError, match=r"^frame.tif is a TIFF image, not an msclassify model "
                                         r"file: choose a .msc file"):
        load_classifier(tmp_path / "frame.tif")
    (tmp_path / "notes.msc").write_text("hello")
    with pytest.raises(ValueError, match="notes.msc is another kind of file, not an msclassify"):
        load_classifier(tmp_path / "notes.msc")
    truncated = (tmp_path / "pixel.msc").read_bytes()[:200]
    (tmp_path / "cut.msc").write_bytes(truncated)       # a damaged model is still called one
    with pytest.raises(ValueError) as damaged:
        load_classifier(tmp_path / "cut.msc")
    assert "not an msclassify model" not in str(damaged.value)


def test_settings_make_the_classifier_with_library_defaults():
    defaults = PixelClassifier().get_params()
    settings = ClassifierSettings()
    assert (settings.cost_tradeoff, settings.split_cost, settings.max_leaves, settings.features,
            settings.semi_supervised, settings.n_estimators, settings.n_cost_samples) == (
        defaults["cost_tradeoff"], defaults["split_cost"], defaults["max_leaves"],
        defaults["features"], defaults["semi_supervised"], defaults["n_estimators"],
        defaults["n_cost_samples"])
    params = settings.replace(cost_tradeoff=0.5, max_leaves=4,
                              semi_supervised=True).make_classifier().get_params()
    assert params["cost_tradeoff"] == 0.5 and params["max_leaves"] == 4
    assert params["semi_supervised"] is True
    assert set(ClassifierSettings.TOOLTIPS) == {"features", "cost_tradeoff", "split_cost",
                                                "n_estimators", "max_leaves", "semi_supervised"}
    assert settings.make_classifier().get_params()["distill_weight"] == defaults["distill_weight"]
    live = settings.replace(semi_supervised=True).for_live_update()
    assert (live.n_estimators, live.n_cost_samples, live.semi_supervised, live.distill_weight) == (
        LIVE_N_ESTIMATORS, LIVE_N_COST_SAMPLES, False, 0.0)
    assert live.make_classifier().get_params()["distill_weight"] == 0.0
    # without the teacher, the default bank's coarse levels would draw staircases
    assert settings.features == "default" and defaults["cost_tradeoff"] > 2e-4
    assert (live.features, live.cost_tradeoff) == LIVE_WITHOUT_TEACHER["default"] == ("fine", 2e-4)
    assert settings.replace(cost_tradeoff=0.0).for_live_update().cost_tradeoff == 0.0
    other = settings.replace(features="fast", cost_tradeoff=0.01).for_live_update()
    assert (other.features, other.cost_tradeoff) == ("fast", 0.01)
    assert (live.split_cost, live.max_leaves) == (settings.split_cost, settings.max_leaves)
    assert settings.replace(n_estimators=5).for_live_update().n_estimators == 5
    # two classes: all features (None: PixelClassifier's choice, all of them with two classes)
    assert live.colsample is settings.colsample is None


def test_live_model_for_many_classes_keeps_a_tree_budget():
    settings = ClassifierSettings()
    by_classes = {n: settings.for_live_update(n) for n in (2, 3, 4, 8, 20)}
    assert by_classes[2] == settings.for_live_update()
    assert [by_classes[n].n_estimators for n in (2, 3, 4, 8, 20)] == [
        LIVE_N_ESTIMATORS, LIVE_TREE_BUDGET // 3, LIVE_TREE_BUDGET // 4, LIVE_MIN_TREES,
        LIVE_MIN_TREES]
    assert [by_classes[n].colsample for n in (2, 3, 4)] == [None, LIVE_COLSAMPLE, LIVE_COLSAMPLE]
    assert settings.replace(colsample=0.3).for_live_update(4).colsample == 0.3
    # never more trees than Train's, and the colsample reaches the classifier
    assert settings.replace(n_estimators=3).for_live_update(4).n_estimators == 3
    assert by_classes[4].make_classifier().get_params()["colsample"] == LIVE_COLSAMPLE
    # fewer bins with more than two classes only; Train keeps PixelClassifier's
    assert [by_classes[n].max_bins for n in (2, 3, 4)] == [
        PixelClassifier().max_bins, LIVE_MAX_BINS, LIVE_MAX_BINS]
    assert settings.make_classifier().get_params()["max_bins"] == PixelClassifier().max_bins
    assert by_classes[4].make_classifier().get_params()["max_bins"] == LIVE_MAX_BINS
    assert settings.replace(max_bins=31).for_live_update(4).max_bins == 31


def test_live_update_with_four_classes_trains_the_smaller_model():
    rng = np.random.default_rng(0)
    frame = np.repeat(np.repeat(np.arange(4, dtype=np.uint8) * 60, 16)[None, :], 32, axis=0)
    frame = (frame + rng.integers(0, 20, frame.shape)).astype(np.uint8)
    labels = np.zeros(frame.shape, np.uint8)
    for value in range(4):
        labels[4:28:3, 16 * value + 4:16 * value + 12] = value + 1
    stack = FrameStack(frame)
    scribbles = snapshot_scribbles(labels, stack)
    settings = SMALL.replace(n_estimators=LIVE_N_ESTIMATORS)
    model, prediction, _ = update_job(RETRAIN, settings, stack, 0, scribbles)
    assert model.settings == settings.for_live_update(4)
    assert model.classifier.n_estimators == LIVE_TREE_BUDGET // 4
    assert model.classifier.colsample == LIVE_COLSAMPLE
    assert np.mean(prediction.labels[:, 8::16] == np.arange(1, 5)) > 0.9


# -- the Result panel ----------------------------------------------------------------------------

def test_features_in_plain_words():
    assert describe_feature(FeatureSpec.from_id("L2:gauss:s1.6:c0")) == \
        "smoothed brightness at 4×4 pixels (~6 px)"
    assert describe_feature(FeatureSpec.from_id("L0:gradmag:s0.7:c0")) == \
        "edges at full resolution (~1 px)"
    assert describe_feature(FeatureSpec.from_id("L3:intensity:c2"), n_channels=3) == \
        "brightness of blue at 8×8 pixels"
    assert describe_feature(FeatureSpec.from_id("L1:log:s3.5:c1"), n_channels=2) == \
        "spots and blobs of channel 1 at 2×2 pixels (~7 px)"


def test_describe_model_in_plain_words_with_exact_terms_in_tooltips(trained):
    _, _, stack, scribbles, results = trained
    model, prediction, cost = results
    rows = describe_model(model.classifier, model, prediction, cost)
    assert [row.label for row in rows] == ["Model", "Speed", "Work", "Features"]
    text = {row.label: row.text for row in rows}
    tips = {row.label: row.tooltip for row in rows}
    assert text["Model"].startswith(f"full model ({SMALL.n_estimators} trees), trained in ")
    assert f"on {scribbles.n_labelled:,} scribbled pixels in 1 frame" in text["Model"]
    assert "cost_tradeoff=0.0002," in tips["Model"] and "split_cost=" in tips["Model"]
    fps = 1 / prediction.seconds
    assert text["Speed"] == (f"segments a 48×48 frame in {prediction.seconds * 1000:.0f} ms "
                             f"(~{fps:.0f} frames/s on this computer)")
    used = model.classifier.features_used_
    bank = model.classifier.bank_
    assert text["Work"].startswith(f"computes {len(used)} of {len(bank)} candidate image "
                                   "features, ")
    share = model.classifier.feature_cost_per_pixel_ / bank.batch_costs().sum()
    assert text["Work"].endswith(("less than 1 %" if share < 0.01 else f"{share:.0%}"
                                  .replace("%", " %")) + " of the time all of them would take")
    assert f"{cost.evaluation:.3g} operations per pixel" in tips["Work"]
    for feature in used:
        assert feature in tips["Features"]
    # at most three named in the panel, all of them in the tooltip
    assert text["Features"].count(";") == min(len(used), 4) - 1
    assert len(used) <= 3 or text["Features"].endswith(f"and {len(used) - 3} more (point here "
                                                       "for all)")
    # no jargon in the words the panel shows
    for row in rows:
        for term in ("μ", "α", "L0:", "L1:", "L2:", "L3:", "cost_tradeoff", "1/",
                     "operations"):
            assert term not in row.text
    live = next(update_job(RETRAIN, SMALL, stack, 0, scribbles))
    assert describe_model(live.classifier, live)[0].text.startswith(
        f"quick live-update model ({SMALL.n_estimators} trees; Train fits the full model)")
    loaded = describe_model(model.classifier, origin="loaded from m.msc")
    assert [row.label for row in loaded] == ["Model", "Work", "Features"]
    assert loaded[0].text == f"{SMALL.n_estimators} trees, loaded from m.msc"
    # a model whose cost tradeoff was chosen while fitting (cost_tradeoff="auto") says so
    auto = clone(model.classifier).set_params(cost_tradeoff="auto")
    auto.__dict__.update({k: v for k, v in vars(model.classifier).items() if k.endswith("_")})
    tooltip = describe_model(auto)[0].tooltip
    assert "cost_tradeoff='auto'," in tooltip
    assert f"cost_tradeoff_={model.classifier.cost_tradeoff_:g} ({auto.tradeoff_reason_})" in tooltip


# -- live updates --------------------------------------------------------------------------------

class FakeTimer:
    def __init__(self):
        self.running, self.starts, self.delays = False, 0, []

    def start(self, milliseconds):
        self.running, self.starts = True, self.starts + 1
        self.delays.append(milliseconds)

    def stop(self):
        self.running = False


def make_scheduler():
    started, timer = [], FakeTimer()
    scheduler = LiveUpdateScheduler(started.append, timer, delay_ms=50)
    scheduler.enabled = True
    return scheduler, timer, started


def fire(scheduler, timer):
    if timer.running:
        timer.running = False
        scheduler.timer_fired()


def test_burst_of_edits_makes_one_job():
    scheduler, timer, started = make_scheduler()
    for _ in range(5):
        scheduler.request(RETRAIN)
    assert started == [] and timer.starts == 5          # each edit restarts the quiet period
    fire(scheduler, timer)
    assert started == [RETRAIN] and scheduler.running == RETRAIN
    assert timer.delays == [50] * 5
    scheduler.request(PREDICT, delay_ms=10)
    assert timer.delays[-1] == 10


def test_edits_during_a_job_coalesce_into_one_follow_up():
    scheduler, timer, started = make_scheduler()
    scheduler.request(RETRAIN)
    fire(scheduler, timer)
    scheduler.request(PREDICT)
    fire(scheduler, timer)
    scheduler.request(RETRAIN)
    fire(scheduler, timer)
    assert started == [RETRAIN]                          # busy: nothing started
    scheduler.job_finished()
    assert started == [RETRAIN, RETRAIN]                 # one follow-up, the stronger kind
    scheduler.job_finished()
    assert started == [RETRAIN, RETRAIN] and scheduler.running is None


def test_without_quiet_time_an_edit_starts_at_once_unless_a_job_runs():
    started, timer = [], FakeTimer()
    scheduler = LiveUpdateScheduler(started.append, timer, delay_ms=0)
    scheduler.enabled = True
    scheduler.request(RETRAIN)                  # a finished stroke: no timer, no wait
    assert started == [RETRAIN] and timer.starts == 0 and scheduler.pending is None
    scheduler.request(RETRAIN)                  # while it runs: queued, not started
    scheduler.request(RETRAIN)
    assert started == [RETRAIN] and scheduler.pending == RETRAIN
    scheduler.job_finished()                    # ... then exactly one follow-up
    assert started == [RETRAIN, RETRAIN]
    scheduler.job_finished()
    scheduler.request(PREDICT, delay_ms=40)     # a frame change keeps its quiet time
    assert started == [RETRAIN, RETRAIN] and timer.delays == [0, 0, 40]


def test_disabled_scheduler_ignores_edits_but_runs_explicit_jobs():
    scheduler, timer, started = make_scheduler()
    scheduler.enabled = False
    scheduler.request(RETRAIN)
    assert timer.starts == 0 and scheduler.pending is None
    scheduler.run_now(TRAIN)
    assert started == [TRAIN]
    scheduler.run_now(PREDICT)                           # queued behind the running job
    assert started == [TRAIN]
    scheduler.job_finished()
    assert started == [TRAIN, PREDICT]


def test_cancel_pending_and_bad_kind():
    scheduler, timer, started = make_scheduler()
    scheduler.request(RETRAIN)
    scheduler.cancel_pending()
    assert not timer.running
    scheduler.timer_fired()
    assert started == []
    with pytest.raises(ValueError, match="kind"):
        scheduler.request(0)


# -- layer specs ---------------------------------------------------------------------------------

def test_layer_specs_place_frame_results_at_their_frame(trained):
    _, _, stack, _, results = trained
    model, prediction, cost = results
    specs = [probability_spec("im", stack, prediction, 1, "square", "#ff8000", scale=(2, 1, 1),
                              translate=(10, 0, 5))]
    specs.append(uncertainty_spec("im", stack, prediction, scale=(2, 1, 1), translate=(10, 0, 5)))
    assert [s.name for s in specs] == ["im P(square) (0–1)", "im uncertainty (0 = sure)"]
    for spec in specs:
        assert spec.layer_type == "image" and spec.data.shape == (1, 48, 48)
        assert spec.kwargs["translate"] == (10 + 2 * 2, 0, 5)      # frame 2 at scale 2
        # transparent where there is nothing to see
        assert spec.kwargs["colormap"]["colors"][0][3] == 0
    np.testing.assert_array_equal(specs[0].data[0], prediction.probabilities[:, :, 1])
    # drawn in the class's colour, from transparent to nearly opaque
    np.testing.assert_allclose(specs[0].kwargs["colormap"]["colors"],
                               [[1, 128 / 255, 0, 0], [1, 128 / 255, 0, 0.85]])
    assert specs[1].kwargs["contrast_limits"] == (0.0, 0.5)
    cost_spec = cost_map_spec("im", stack, cost)
    assert cost_spec.name == "im cost map (computation per pixel)"
    assert cost_spec.data.shape == (1, 48, 48) and cost_spec.kwargs["translate"][0] == 2
    assert cost_spec.kwargs["contrast_limits"][1] == pytest.approx(
        float(np.percentile(cost.cost_map, 99.5)))
    hints = label_hints_spec("im", stack, LabelHints(2, np.ones((48, 48), np.uint8)))
    assert hints.layer_type == "labels" and hints.attributes == {"contour": 3}
    seg = segmentation_spec("im", stack, model.classifier.classes_)
    assert seg.layer_type == "labels" and seg.data.shape == (3, 48, 48)
    assert isinstance(seg.data, FrameLabels) and seg.data.stored_frames() == []   # nothing held
    assert seg.data.dtype == np.uint8 and not np.asarray(seg.data).any()
    assert seg.kwargs["opacity"] < 1             # fainter than the scribbles drawn over it
    assert segmentation_spec("im", stack, np.array([1, 300])).data.dtype == np.uint16
    flat = probability_spec("im", FrameStack(np.zeros((48, 48))), prediction, 0, "a")
    assert flat.data.shape == (48, 48) and flat.kwargs["translate"] == (0.0, 0.0)
    assert segmentation_spec("im", FrameStack(np.zeros((48, 48)))).data.shape == (48, 48)


# -- reader and sample data ----------------------------------------------------------------------

def test_reader_claims_videos_and_tiffs_only(tmp_path):
    stack = tmp_path / "stack.tif"
    tifffile.imwrite(stack, np.zeros((2, 4, 4), np.uint8))
    (tmp_path / "notes.txt").write_text("x")
    assert get_reader(str(stack)) is read_frames
    assert get_reader(str(tmp_path / "notes.txt")) is None
    assert get_reader(str(tmp_path / "missing.tif")) is None
    assert get_reader([str(stack), str(stack)]) is None


def test_tiff_stack_reads_lazily_frame_by_frame(tmp_path, monkeypatch):
    frames = np.random.default_rng(1).integers(0, 255, (5, 16, 24), dtype=np.uint8)
    path = tmp_path / "movie.tif"
    tifffile.imwrite(path, frames)
    [(data, kwargs, layer_type)] = read_frames(str(path))
    assert layer_type == "image" and kwargs["name"] == "movie" and not kwargs["rgb"]
    assert isinstance(data, LazyFrames) and data.shape == (5, 16, 24) and data.ndim == 3
    assert kwargs["contrast_limits"] == (0, 255)     # napari need not read frames to guess
    import msclassify.io as msio
    reads = []
    original = msio.FrameSource.read
    monkeypatch.setattr(msio.FrameSource, "read",
                        lambda self, index: reads.append(index) or original(self, index))
    np.testing.assert_array_equal(np.asarray(data[3]), frames[3])
    assert reads == [3]                                  # only the frame asked for
    np.testing.assert_array_equal(data[3, 2:4, -1], frames[3, 2:4, -1])
    np.testing.assert_array_equal(data[-1], frames[4])
    assert reads == [3, 4]                               # frame 3 came from the cache
    np.testing.assert_array_equal(data[1:4:2, 0], frames[1:4:2, 0])
    np.testing.assert_array_equal(data[[0, 2]], frames[[0, 2]])
    assert reads == [3, 4, 1, 0, 2]
    np.testing.assert_array_equal(np.asarray(data), frames)
    assert data[3].flags.writeable is False             # cached frames are shared
    with pytest.raises(IndexError):
        data[..., 0]


def test_deeper_stacks_take_contrast_limits_from_the_first_frame_only(tmp_path, monkeypatch):
    frames = np.random.default_rng(1).integers(100, 4000, (4, 8, 8)).astype(np.uint16)
    tifffile.imwrite(tmp_path / "deep.tif", frames)
    import msclassify.io as msio
    reads = []
    original = msio.FrameSource.read
    monkeypatch.setattr(msio.FrameSource, "read",
                        lambda self, index: reads.append(index) or original(self, index))
    [(_, kwargs, _)] = read_frames(str(tmp_path / "deep.tif"))
    assert kwargs["contrast_limits"] == (frames[0].min(), frames[0].max()) and set(reads) == {0}


def test_activate_makes_this_reader_napari_s_choice_for_videos_keeping_the_users():
    class Plugins:
        extension2reader = {"*.avi": "someone-else", "*.png": "other"}

    class Settings:
        plugins = Plugins()

    settings = Settings()
    activate(None, settings)
    chosen = settings.plugins.extension2reader
    assert chosen["*.mp4"] == chosen["*.webm"] == "msclassify"
    assert chosen["*.avi"] == "someone-else" and chosen["*.png"] == "other"
    assert "*.tif" not in chosen                     # TIFFs stay napari's to choose


def test_grey_footage_stored_as_rgb_opens_grey_and_colour_stays_colour(tmp_path):
    grey = np.random.default_rng(2).integers(0, 255, (3, 8, 8), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "grey.tif", np.repeat(grey[..., None], 3, axis=3),
                     photometric="rgb")
    [(data, kwargs, _)] = read_frames(str(tmp_path / "grey.tif"))
    assert data.shape == (3, 8, 8) and not kwargs["rgb"]
    np.testing.assert_array_equal(np.asarray(data), grey)
    colour = np.random.default_rng(3).integers(0, 255, (2, 8, 8, 3), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "colour.tif", colour, photometric="rgb")
    [(data, kwargs, _)] = read_frames(str(tmp_path / "colour.tif"))
    assert data.shape == (2, 8, 8, 3) and kwargs["rgb"]
    one = tmp_path / "one.tif"
    tifffile.imwrite(one, grey[0])
    [(data, _, _)] = read_frames(str(one))
    assert isinstance(data, np.ndarray) and data.shape == (8, 8)


def test_reader_reports_corrupt_files(tmp_path):
    bad = tmp_path / "broken.tif"
    bad.write_bytes(b"II*\x00garbage")
    with pytest.raises(FrameReadError, match="broken.tif"):
        read_frames(str(bad))


def test_reader_on_the_real_fly_video(shared_data):
    [(data, kwargs, _)] = read_frames(str(shared_data("fly_sleap/clip.mp4")))
    assert data.shape[1:] == (1024, 1024) and data.shape[0] > 100 and not kwargs["rgb"]
    frame = np.asarray(data[data.shape[0] // 2])
    assert frame.dtype == np.uint8 and frame.std() > 5


def test_lazy_frames_is_thread_safe(shared_data):
    from concurrent.futures import ThreadPoolExecutor

    from msclassify.io import open_frames
    path = shared_data("fly_sleap/clip.mp4")
    indices = [40, 3, 41, 20, 3, 60, 42, 5] * 2
    with open_frames(path, as_gray=True) as source:
        expected = {index: source.read(index) for index in set(indices)}
    data = LazyFrames(open_frames(path, as_gray=True), cache_frames=2)
    with ThreadPoolExecutor(4) as pool:
        frames = list(pool.map(lambda index: data[index], indices))
    for index, frame in zip(indices, frames):
        np.testing.assert_array_equal(frame, expected[index])


@pytest.mark.parametrize("module, heavy", [
    # opening a file must not wait for Numba, scikit-learn or SciPy's statistics to load
    ("msclassify_napari._reader", ("numba", "sklearn", "scipy.stats", "dask.array")),
    # docking the tabular widget took ~3.5 s of the GUI thread with these: a worker imports them
    ("msclassify_napari._tabular_widget", ("msclassify.tabular", "msclassify.cegb", "sklearn",
                                           "matplotlib"))])
def test_what_napari_imports_first_imports_no_heavy_library(module, heavy):
    import subprocess
    import sys
    code = (f"import sys, {module}; "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_sample_data_layers():
    layers = sample_flies()
    assert [(kind, kwargs["name"]) for _, kwargs, kind in layers] == [
        ("image", "flies"), ("labels", "fly masks (reference)"), ("labels", "scribbles")]
    frames, masks, scribbles = (data for data, _, _ in layers)
    assert frames.shape == masks.shape == scribbles.shape and frames.ndim == 3
    assert set(np.unique(scribbles)) == {0, 1, 2}
    assert layers[2][1]["metadata"][CLASS_NAMES_KEY] == {1: "background", 2: "fly"}


# -- the library's tabular sweep -----------------------------------------------------------------

def yahoo():
    train = load_svmlight(TABULAR / "yahoo_style.train", n_features=30)
    test = load_svmlight(TABULAR / "yahoo_style.test", n_features=30)
    return train, test, load_feature_costs(TABULAR / "yahoo_style.cost", 30)


def test_split_keeps_queries_whole_and_classes_stratified():
    train, _, _ = yahoo()
    a, b = split_train_test(train, 0.3, random_state=0)
    assert a.n_samples + b.n_samples == train.n_samples
    assert not set(a.qid) & set(b.qid)
    data = load_csv(TABULAR / "csv_style.csv", "label")
    a, b = split_train_test(data, 0.25)
    assert abs(b.y.mean() - data.y.mean()) < 0.02
    with pytest.raises(ValueError, match="test_fraction"):
        split_train_test(data, 1.5)
    with pytest.raises(TypeError, match="TabularData"):
        split_train_test(data.X)


def test_cost_sweep_on_ranking_data_trades_cost_for_precision():
    train, test, costs = yahoo()
    steps = []
    sweep = cost_sweep(train, test, costs, cost_tradeoffs=[1e-3, 1e-2], n_estimators=30,
                       callback=lambda step, n: steps.append((step, n)))
    assert sweep.task == "ranking" and sweep.metric == "precision@5" and sweep.completed
    assert [p.name for p in sweep.points] == ["plain GB", "CEGB mu=0.001", "CEGB mu=0.01"]
    assert steps[-1] == (90, 90) and len(steps) == 90
    plain, mild, strong = sweep.points
    # the mu sweep must buy cheaper models (measured: ~980 -> ~150 -> ~30 per document)
    assert strong.mean_cost < mild.mean_cost < plain.mean_cost
    assert len(strong.features_used) < len(plain.features_used)
    assert set(strong.features_used) <= set(train.feature_names)
    for point in sweep.points:
        assert set(point.scores) == {"precision@5", "ndcg@5"}
        assert 0 <= point.scores["precision@5"] <= 1
    # precision holds up at moderate mu (measured 0.90 plain, 0.91 at mu=1e-3)
    assert mild.scores["precision@5"] >= plain.scores["precision@5"] - 0.1
    # the reported cost is the booster's own cost accounting on the test set
    model = CEGBClassifier(n_estimators=30, max_leaves=15, min_samples_leaf=20, random_state=0,
                           cost_tradeoff=1e-2, feature_costs=costs)
    model.fit(train.X, (train.y > 0).astype(int))
    assert strong.mean_cost == pytest.approx(model.prediction_cost(test.X).per_sample.mean())
    as_dict = sweep.to_dict()
    assert as_dict["points"][2]["features_used"] == list(strong.features_used)
    np.testing.assert_allclose(sweep.costs, [p.mean_cost for p in sweep.points])
    np.testing.assert_allclose(sweep.scores("ndcg@5"), [p.scores["ndcg@5"] for p in sweep.points])


def test_cost_sweep_classification_and_cancel():
    data = load_csv(TABULAR / "csv_style.csv", "label")
    costs = load_feature_costs(TABULAR / "csv_style.cost", 7)
    train, test = split_train_test(data)
    sweep = cost_sweep(train, test, costs, cost_tradeoffs=[0.05], n_estimators=10,
                       callback=lambda step, n: step >= 15)
    assert not sweep.completed and [p.name for p in sweep.points] == ["plain GB"]
    assert set(sweep.points[0].scores) == {"accuracy", "roc_auc"}
    assert sweep.metric == "accuracy"


def test_cost_sweep_rejects_bad_input():
    train, test, costs = yahoo()
    with pytest.raises(ValueError, match="one cost per feature"):
        cost_sweep(train, test, costs[:5])
    with pytest.raises(ValueError, match="> 0"):
        cost_sweep(train, test, costs, cost_tradeoffs=[0.0])
    plain = TabularData(test.X, test.y, None, test.feature_names)
    with pytest.raises(ValueError, match="queries"):
        cost_sweep(train, plain, costs)
    narrow = TabularData(test.X[:, :3], test.y, test.qid, test.feature_names[:3])
    with pytest.raises(ValueError, match="same n_features"):
        cost_sweep(train, narrow, costs)
    assert all(mu > 0 for mu in DEFAULT_COST_TRADEOFFS)


def test_update_or_add_layer_updates_in_place_and_replaces_another_kind_or_dimensions():
    from napari.components import ViewerModel
    from msclassify_napari._layers import update_or_add_layer
    viewer = ViewerModel()
    first, added = update_or_add_layer(viewer, "labels", np.zeros((4, 5), np.uint8), "result",
                                       opacity=0.3)
    assert added and first.opacity == 0.3
    first.opacity = 0.8                                   # the user's setting stays
    again, added = update_or_add_layer(viewer, "labels", np.ones((4, 5), np.uint8), "result",
                                       translate=(2.0, 3.0), opacity=0.3)
    assert not added and again is first and again.opacity == 0.8
    assert again.data.sum() == 20 and tuple(again.translate) == (2.0, 3.0)
    # labels of another shape and dtype: in place too (napari's remove + add cost 2-4 repaints)
    reshaped, added = update_or_add_layer(viewer, "labels", np.ones((6, 5), np.uint16),
                                          "result")
    assert not added and reshaped is first and reshaped.data.shape == (6, 5)
    assert reshaped.data.dtype == np.uint16 and reshaped.opacity == 0.8
    other, added = update_or_add_layer(viewer, "labels", np.ones((2, 6, 5), np.uint16), "result")
    assert added and other is not first and len(viewer.layers) == 1
    image, added = update_or_add_layer(viewer, "image", np.ones((6, 5), np.uint16), "result")
    assert added and len(viewer.layers) == 1 and viewer.layers["result"] is image
    tracks = np.array([[0, 0, 1.0, 1.0], [0, 1, 2.0, 2.0]])
    layer, added = update_or_add_layer(viewer, "tracks", tracks, "tracks")
    moved, added_again = update_or_add_layer(viewer, "tracks", tracks + [0, 0, 1, 1], "tracks")
    assert added and not added_again and moved is layer and moved.data[0, 2] == 2.0


def test_update_or_add_layer_places_a_new_layer_and_can_leave_the_selection_alone():
    from napari.components import ViewerModel
    from msclassify_napari._layers import update_or_add_layer
    viewer = ViewerModel()
    image = viewer.add_image(np.zeros((4, 5)), name="image")
    scribbles = viewer.add_labels(np.zeros((4, 5), np.uint8), name="scribbles")
    assert viewer.layers.selection.active is scribbles
    seen = []
    for emitter in (viewer.layers.selection.events.changed, viewer.layers.selection.events.active):
        emitter.connect(lambda event: seen.append(event.type))
    result, added = update_or_add_layer(viewer, "labels", np.ones((4, 5), np.uint8), "result",
                                        above=image, keep_selection=True, opacity=0.5)
    assert added and [layer.name for layer in viewer.layers] == ["image", "result", "scribbles"]
    assert result.opacity == 0.5 and viewer.layers.selection.active is scribbles
    assert set(viewer.layers.selection) == {scribbles} and seen == []
    # without keep_selection (or with nothing selected) napari selects the new layer, as usual
    other, _ = update_or_add_layer(viewer, "labels", np.ones((4, 5), np.uint8), "other",
                                   above=image)
    assert [layer.name for layer in viewer.layers][1] == "other"
    assert viewer.layers.selection.active is other and seen
    viewer.layers.selection.clear()
    last, _ = update_or_add_layer(viewer, "labels", np.ones((4, 5), np.uint8), "last",
                                  keep_selection=True)
    assert viewer.layers[-1] is last and viewer.layers.selection.active is last


def test_update_or_add_layer_inserts_a_made_layer_only_while_it_is_what_the_arguments_make():
    from napari.components import ViewerModel
    from napari.utils.colormaps import CyclicLabelColormap
    from msclassify_napari._layers import make_layer, update_or_add_layer

    def colormap(rgba):
        return CyclicLabelColormap(colors=np.array([[0, 0, 0, 0], rgba], np.float32),
                                   background_value=0)

    before = {"data": np.zeros((4, 5), np.uint8), "scale": (2.0, 1.0),
              "colormap": colormap([1, 0, 0, 1])}
    viewer = ViewerModel()
    made = make_layer("labels", name="result", **before)
    layer, added = update_or_add_layer(viewer, "labels", name="result", made=made, **before)
    assert added and layer is made and viewer.layers["result"] is made
    # made turns before, the arguments changed in between: a new layer, as they say now
    for changed in ({"data": np.zeros((4, 6), np.uint8)}, {"data": np.zeros((4, 5), np.uint16)},
                    {"scale": (3.0, 1.0)}, {"colormap": colormap([0, 1, 0, 1])}):
        made = make_layer("labels", name="other", **before)
        now = {**before, **changed}
        other, added = update_or_add_layer(viewer, "labels", name="other", made=made, **now)
        assert added and other is not made and viewer.layers["other"] is other
        assert other.data.shape == now["data"].shape and other.data.dtype == now["data"].dtype
        assert tuple(other.scale) == now["scale"]
        viewer.layers.remove("other")
