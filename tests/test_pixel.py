"""PixelClassifier: training from scribbles, multi-scale prediction, costs, model files, errors."""

import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi
from sklearn.base import clone

from msclassify import ModelFileError, load_model
from msclassify.features import FeatureBank, FeatureCache
from msclassify.metrics import label_instances, seg_score
from msclassify.modelfile import read_model, write_model
from msclassify.pixel import ImageCost, PixelClassifier, most_probable, training_set
from msclassify.pixel import _classifier


def _blobs(seed, shape=(61, 75), n_blobs=4, radius=7):
    """Bright noisy disks on a dark noisy floor, their mask and user-like scribbles."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:shape[0], :shape[1]]
    mask = np.zeros(shape, dtype=bool)
    centres = []
    for _ in range(1000):
        if len(centres) == n_blobs:
            break
        c = rng.uniform([radius + 2, radius + 2], [shape[0] - radius - 3, shape[1] - radius - 3])
        if all(np.hypot(*(c - d)) > 2 * radius + 6 for d in centres):
            centres.append(c)
            mask |= np.hypot(yy - c[0], xx - c[1]) <= radius
    assert len(centres) == n_blobs, "image too small for that many blobs"
    image = np.where(mask, 0.75, 0.15) + rng.normal(0, 0.05, shape)
    image = np.clip(image * 255, 0, 255).astype(np.uint8)
    labels = np.zeros(shape, dtype=np.uint8)
    for cy, cx in centres:
        labels[int(cy), int(cx) - 3:int(cx) + 4] = 2          # a stroke inside each blob
    far = ~ndi.binary_dilation(mask, iterations=4)
    labels[::9][far[::9]] = 1                                  # background rows away from blobs
    return image, mask, labels


SMALL = dict(features="fast", n_estimators=15, min_samples_leaf=5, random_state=0)


@pytest.fixture(scope="module")
def trained():
    image, _, labels = _blobs(0)
    return PixelClassifier(**SMALL).fit(image, labels)


def test_segments_unseen_image_and_keeps_label_values():
    image, mask, labels = _blobs(1)
    clf = PixelClassifier(**SMALL).fit(image, np.where(labels == 2, 7, labels * 3))  # classes 3, 7
    test, test_mask, _ = _blobs(2)
    prediction = clf.predict(test)
    assert prediction.dtype == np.uint8 and prediction.shape == test.shape
    np.testing.assert_array_equal(clf.classes_, [3, 7])
    assert set(np.unique(prediction)) <= {3, 7}
    assert np.mean((prediction == 7) == test_mask) > 0.95
    assert seg_score(label_instances(test_mask), label_instances(prediction, foreground=7)) > 0.7


@pytest.mark.parametrize("shape", [(61, 75), (64, 48), (13, 29)])
def test_multiscale_equals_per_pixel(trained, shape):
    image = _blobs(3, shape=(64, 80))[0][:shape[0], :shape[1]]
    fast = trained.predict_proba(image)
    reference = trained.predict_proba(image, strategy="per_pixel")
    assert fast.dtype == np.float32 and fast.shape == shape + (2,)
    np.testing.assert_allclose(fast, reference, atol=1e-6)
    np.testing.assert_allclose(fast.sum(axis=2), 1, atol=1e-6)
    np.testing.assert_array_equal(trained.predict(image), trained.predict(image, "per_pixel"))


def test_multiclass_and_rgb():
    image, mask, labels = _blobs(4)
    rgb = np.stack([image, 255 - image, image // 2], axis=2)
    labels = labels.copy()
    labels[:, :8][labels[:, :8] == 1] = 3            # a third class: background on the left
    clf = PixelClassifier(**SMALL).fit(rgb, labels)
    assert clf.n_channels_ == 3 and clf.booster_.n_outputs == 3
    proba = clf.predict_proba(rgb)
    assert proba.shape == image.shape + (3,)
    np.testing.assert_allclose(proba, clf.predict_proba(rgb, strategy="per_pixel"), atol=1e-6)
    np.testing.assert_array_equal(clf.predict(rgb), clf.classes_[np.argmax(proba, axis=2)])
    with pytest.raises(ValueError, match=r"\(H, W, 3\)"):
        clf.predict(image)


def test_many_classes_draw_half_the_features_per_tree_by_default(tmp_path, monkeypatch):
    """colsample=None: all features with two classes, half with more (one tree per class and
    round) but all for the teacher; a given colsample is kept (teacher too); the file keeps
    None."""
    image, mask, labels = _blobs(4)
    rgb = np.stack([image, 255 - image, image // 2], axis=2)
    three = labels.copy()
    three[:, :8][three[:, :8] == 1] = 3
    params = dict(SMALL, n_estimators=4, distill_weight=1.0)
    drawn, teacher = {}, {}
    real_fit_teacher = _classifier.fit_teacher

    def spy(X, y, weight, params, *args, **kwargs):
        teacher[name] = params["colsample"]
        return real_fit_teacher(X, y, weight, params, *args, **kwargs)
    monkeypatch.setattr(_classifier, "fit_teacher", spy)
    for name, lab, colsample in (("2", labels, None), ("3", three, None), ("3, 0.8", three, 0.8)):
        clf = PixelClassifier(colsample=colsample, **params).fit(rgb, lab)
        assert clf.get_params()["colsample"] == colsample
        drawn[name] = clf.booster_.params["colsample"]
        # every tree splits only on features of its draw: at most that share of the bank
        for tree in clf.booster_.trees:
            assert np.unique(tree["feature"][tree["feature"] >= 0]).size <= \
                round(drawn[name] * len(clf.bank_))
    assert drawn == {"2": 1.0, "3": 0.5, "3, 0.8": 0.8}
    assert teacher == {"2": 1.0, "3": 1.0, "3, 0.8": 0.8}
    # two classes: the very model of colsample=1.0 (what the default was)
    two = [PixelClassifier(colsample=c, **params).fit(rgb, labels).booster_ for c in (None, 1.0)]
    for a, b in zip(*(booster.trees for booster in two)):
        np.testing.assert_array_equal(a["feature"], b["feature"])
        np.testing.assert_array_equal(a["value"], b["value"])
    clf = PixelClassifier(**params).fit(rgb, three)
    assert np.mean(clf.predict(rgb)[three > 0] == three[three > 0]) > 0.9
    clf.save(tmp_path / "m.msc")
    loaded = load_model(tmp_path / "m.msc")
    assert loaded.get_params()["colsample"] is None
    np.testing.assert_array_equal(loaded.predict(rgb), clf.predict(rgb))


def test_uncertainty_is_one_minus_max_probability(trained):
    image, _, _ = _blobs(5)
    uncertainty = trained.uncertainty(image)
    np.testing.assert_allclose(uncertainty, 1 - trained.predict_proba(image).max(axis=2))
    assert uncertainty.min() >= 0 and uncertainty.max() <= 0.5


def test_cost_map_matches_the_reported_cost(trained):
    image, _, _ = _blobs(6, shape=(45, 67), n_blobs=3)
    cost_map = trained.cost_map(image)
    full = FeatureBank("fast").compute_full(image)
    reported = trained.booster_.prediction_cost(full.reshape(-1, full.shape[2])).evaluation
    np.testing.assert_allclose(cost_map.ravel(), reported, rtol=1e-6)

    cost = trained.prediction_cost(image)
    assert isinstance(cost, ImageCost)
    assert cost.evaluation == pytest.approx(reported.sum(), rel=1e-12)
    used = trained.booster_.features_used()
    assert cost.features == pytest.approx(trained.bank_.batch_costs()[used].sum() * image.size)
    assert cost.total == cost.evaluation + cost.features
    # The multi-scale predictor's work is the pixel-weighted evaluation count (it is larger
    # only by blocks that reach into the padding).
    assert cost.n_node_evaluations >= cost.evaluation / trained.split_cost


def test_node_evaluations_equal_reported_cost_on_multiple_of_eight(trained):
    image, _, _ = _blobs(7, shape=(64, 80))
    cost = trained.prediction_cost(image)
    assert cost.n_node_evaluations == pytest.approx(cost.evaluation / trained.split_cost,
                                                    rel=1e-12)


def test_only_used_features_are_computed(trained, monkeypatch):
    requested = []
    original = FeatureBank.compute_levels

    def spy(self, image, feature_indices=None, **kwargs):
        requested.append(None if feature_indices is None else list(feature_indices))
        return original(self, image, feature_indices, **kwargs)

    monkeypatch.setattr(FeatureBank, "compute_levels", spy)
    image, _, _ = _blobs(8)
    trained.predict(image)
    assert requested == [trained.booster_.features_used().tolist()]
    assert trained.features_used_ == [trained.bank_.ids[i] for i in requested[0]]
    assert len(trained.features_used_) < len(trained.bank_)


def test_cost_samples_represent_one_whole_image():
    bank = FeatureBank("fast")
    pairs = [(_blobs(s)[0], _blobs(s)[2]) for s in (0, 1)]
    pairs[1] = (pairs[1][0][:40], pairs[1][1][:40])            # frames of different sizes
    classes = np.array([1, 2])
    X, y, sample_weight, cost_weight, pixels = training_set(bank.compute_levels, pairs, classes,
                                                            1000, np.random.default_rng(0))
    n_labelled = sum(int(np.count_nonzero(lab)) for _, lab in pairs)
    assert pixels == np.mean([lab.size for _, lab in pairs])
    assert X.shape == (n_labelled + 1000, len(bank))
    # labelled rows carry the loss and no cost; cost rows carry no loss
    assert sample_weight.sum() == n_labelled
    assert np.all(cost_weight[sample_weight > 0] == 0)
    assert np.all(sample_weight[cost_weight > 0] == 0)
    # together the cost rows weigh one (average) image; each frame's rows weigh
    # its own pixel count over the number of frames
    assert cost_weight.sum() == pytest.approx(pixels)
    first_frame_rows = np.count_nonzero(pairs[0][1]) + 500
    assert cost_weight[:first_frame_rows].sum() == pytest.approx(pairs[0][1].size / 2)


def test_feature_cache_computes_a_frame_once_and_gives_the_same_model():
    image, _, labels = _blobs(0)
    cache = FeatureCache()
    computed = []
    bank_compute = FeatureBank.compute_levels

    def counting(bank, frame, *args, **kwargs):
        computed.append(frame.shape)
        return bank_compute(bank, frame, *args, **kwargs)

    reference = PixelClassifier(**SMALL).fit(image, labels)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FeatureBank, "compute_levels", counting)
        first = PixelClassifier(**SMALL).fit(image, labels, feature_cache=cache)
        more = labels.copy()
        more[0, :5] = 1                                     # a new stroke, same frame
        PixelClassifier(**SMALL).fit(image, more, feature_cache=cache)
        assert len(computed) == 1
        edited = image.copy()
        edited[0, 0] += 1                                   # another frame content: recomputed
        PixelClassifier(**SMALL).fit(edited, labels, feature_cache=cache)
        assert len(computed) == 2
    assert first.booster_.dump() == reference.booster_.dump()
    assert len(cache) == 2 and cache.nbytes > 0
    with pytest.raises(TypeError, match="FeatureCache"):
        PixelClassifier(**SMALL).fit(image, labels, feature_cache={})


def test_feature_cache_evicts_the_least_recently_used_frame():
    bank = FeatureBank("fast")
    frames = [np.full((16, 16), value, np.uint8) for value in (1, 2, 3)]
    one_frame = sum(a.nbytes for a in bank.compute_levels(frames[0]).arrays)
    cache = FeatureCache(max_bytes=2 * one_frame)
    first = cache.levels(bank, frames[0])
    cache.levels(bank, frames[1])
    assert cache.levels(bank, frames[0]) is first           # frame 0 is now the most recent
    cache.levels(bank, frames[2])                           # evicts frame 1
    assert len(cache) == 2 and cache.nbytes == 2 * one_frame
    assert cache.levels(bank, frames[0]) is first
    other_bank = cache.levels(FeatureBank("default"), frames[0])   # same frame, another bank
    assert other_bank.n_features == len(FeatureBank("default")) != first.n_features
    with pytest.raises(ValueError, match="max_bytes"):
        FeatureCache(max_bytes=-1)


def test_costs_reach_the_core_per_image():
    image, _, labels = _blobs(0)
    clf = PixelClassifier(**SMALL, cost_tradeoff=1e-3, distill_weight=0).fit(image, labels)
    params = clf.booster_.params
    n_labelled = np.count_nonzero(labels)
    assert params["cost_tradeoff"] == pytest.approx(1e-3 * n_labelled / image.size)
    # teacher-labelled pixels count as labelled ones, distill_weight times the scribbles
    distilled = PixelClassifier(**SMALL, cost_tradeoff=1e-3, distill_weight=3).fit(image, labels)
    assert distilled.booster_.params["cost_tradeoff"] == pytest.approx(
        1e-3 * 4 * n_labelled / image.size)
    np.testing.assert_allclose(params["feature_batch_costs"], clf.bank_.batch_costs() * image.size)
    np.testing.assert_array_equal(params["feature_share"], clf.bank_.shares())
    assert params["share_mode"] == "path"


def test_cost_tradeoff_buys_a_cheaper_model_of_similar_accuracy():
    image, _, labels = _blobs(9, shape=(96, 128), n_blobs=6)
    test, test_mask, _ = _blobs(10, shape=(96, 128), n_blobs=6)
    params = dict(SMALL, n_estimators=30, distill_weight=0)     # the cost tradeoff alone
    free = PixelClassifier(**params, cost_tradeoff=0.0).fit(image, labels)
    cheap = PixelClassifier(**params, cost_tradeoff=1e-3).fit(image, labels)
    free_cost, cheap_cost = free.prediction_cost(test), cheap.prediction_cost(test)
    assert cheap_cost.total < 0.5 * free_cost.total
    assert len(cheap.features_used_) < len(free.features_used_)
    accuracy = [np.mean((clf.predict(test) == 2) == test_mask) for clf in (free, cheap)]
    assert accuracy[1] > 0.95 and accuracy[1] > accuracy[0] - 0.02


def test_stacks_lists_and_unlabelled_frames():
    (a, _, la), (b, _, lb) = _blobs(0), _blobs(1)
    stack = PixelClassifier(**SMALL).fit(np.stack([a, b, a]),
                                         np.stack([la, lb, np.zeros_like(la)]))
    listed = PixelClassifier(**SMALL).fit([a, b], [la, lb])
    np.testing.assert_array_equal(stack.predict_proba(a), listed.predict_proba(a))
    ragged = PixelClassifier(**SMALL).fit([a, b[:50, :60]], [la, lb[:50, :60]])
    assert ragged.predict(b).shape == b.shape


def test_callback_can_stop_training():
    image, _, labels = _blobs(0)
    seen = []
    clf = PixelClassifier(**SMALL).fit(image, labels,
                                       callback=lambda i, n: seen.append((i, n)) or i >= 4)
    assert seen[-1] == (4, 15) and clf.booster_.n_iterations == 4


def test_sklearn_params_and_clone(trained):
    params = trained.get_params()
    assert params["features"] == "fast" and params["n_estimators"] == 15
    copy = clone(trained)
    assert copy.get_params() == params and not hasattr(copy, "booster_")


def test_the_same_model_saved_later_is_the_same_file(trained, tmp_path, monkeypatch):
    """A store records its model's hash, so a re-saved model must hash alike (resume)."""
    import time
    trained.save(tmp_path / "a.msc")
    later = time.time() + 3600
    monkeypatch.setattr(time, "time", lambda: later)          # zip entries' clock
    trained.save(tmp_path / "b.msc")
    assert (tmp_path / "a.msc").read_bytes() == (tmp_path / "b.msc").read_bytes()


def test_save_and_load_round_trip(trained, tmp_path):
    path = tmp_path / "model.msc"
    trained.save(path)
    loaded = load_model(path)
    assert isinstance(loaded, PixelClassifier)
    image, _, _ = _blobs(11)
    np.testing.assert_array_equal(loaded.predict_proba(image), trained.predict_proba(image))
    assert loaded.bank_ == trained.bank_ and loaded.features_used_ == trained.features_used_
    np.testing.assert_array_equal(loaded.classes_, trained.classes_)
    assert loaded.get_params() == trained.get_params()

    params = dict(SMALL, features=trained.bank_.subset([0, 3, 7, 20]), n_estimators=np.int64(5))
    custom = PixelClassifier(**params).fit(*_blobs(0)[::2])
    custom.save(path)
    loaded = load_model(path)
    assert loaded.bank_.ids == custom.bank_.ids and loaded.n_estimators == 5


def test_inconsistent_model_file_is_refused(trained, tmp_path):
    path = tmp_path / "model.msc"
    trained.save(path)
    kind, meta, arrays = read_model(path)
    meta["bank"]["features"] = meta["bank"]["features"][:5]
    write_model(path, kind, meta, arrays)
    with pytest.raises(ModelFileError, match="bank has 5"):
        load_model(path)
    trained.save(path)
    kind, meta, arrays = read_model(path)
    meta["classes"] = [1, 2, 3]
    write_model(path, kind, meta, arrays)
    with pytest.raises(ModelFileError, match="3 classes for 1 model output"):
        load_model(path)
    meta["bank"]["pipeline_version"] = 999
    write_model(path, kind, meta, arrays)
    with pytest.raises(ModelFileError, match="feature bank"):
        load_model(path)


@pytest.mark.parametrize("images, labels, error, message", [
    (np.zeros((20, 20)), np.zeros((20, 20), float), TypeError, "must hold integers"),
    (np.zeros((20, 20)), -np.ones((20, 20), int), ValueError, "negative"),
    (np.zeros((20, 20)), np.zeros((20, 20), int), ValueError, "no labelled pixels"),
    (np.zeros((20, 20)), np.ones((20, 20), int), ValueError, "only class 1"),
    (np.zeros((20, 21)), np.ones((20, 20), int), ValueError, "do not match"),
    (np.zeros((2, 20, 20)), np.ones((3, 20, 20), int), ValueError, "2 image frame"),
    (np.zeros((20, 20)), np.ones((1, 1, 20, 20), int), ValueError, "labels must be"),
])
def test_bad_training_input(images, labels, error, message):
    with pytest.raises(error, match=message):
        PixelClassifier(**SMALL).fit(images, labels)


def test_bad_parameters_and_prediction_input(trained):
    image, _, labels = _blobs(0)
    with pytest.raises(ValueError, match="n_cost_samples"):
        PixelClassifier(n_cost_samples=0).fit(image, labels)
    with pytest.raises(TypeError, match="features must be"):
        PixelClassifier(features=3).fit(image, labels)
    with pytest.raises(ValueError, match="unknown preset"):
        PixelClassifier(features="huge").fit(image, labels)
    with pytest.raises(ValueError, match="1-channel"):
        PixelClassifier(features=FeatureBank("fast")).fit(np.dstack([image] * 3), labels)
    with pytest.raises(TypeError, match="callback"):
        PixelClassifier(**SMALL).fit(image, labels, callback=5)
    with pytest.raises(ValueError, match="learning_rate"):
        PixelClassifier(learning_rate=-1).fit(image, labels)
    with pytest.raises(ValueError, match="one frame"):
        trained.predict(np.stack([image, image]))
    with pytest.raises(ValueError, match="strategy"):
        trained.predict(image, strategy="fastest")
    with pytest.raises(Exception, match="not fitted"):
        PixelClassifier().predict(image)


def test_real_nuclei_image_multiscale_equals_per_pixel(shared_data):
    image = tifffile.imread(shared_data("stardist_wheel/img2d.tif"))
    mask = tifffile.imread(shared_data("stardist_wheel/mask2d.tif"))
    nuclei = mask > 0
    rows = np.zeros(image.shape, dtype=bool)
    rows[::12, :256] = True                       # scribbles on every 12th row, left half only
    labels = np.zeros(image.shape, dtype=np.uint8)
    labels[rows & ndi.binary_erosion(nuclei, iterations=2)] = 2
    labels[rows & ~ndi.binary_dilation(nuclei, iterations=2)] = 1
    clf = PixelClassifier(random_state=0).fit(image, labels)
    np.testing.assert_allclose(clf.predict_proba(image),
                               clf.predict_proba(image, strategy="per_pixel"), atol=1e-6)
    prediction = clf.predict(image)
    assert seg_score(mask[:, 256:], label_instances(prediction[:, 256:], foreground=2)) > 0.6
    cost = clf.prediction_cost(image)
    assert cost.n_node_evaluations == pytest.approx(cost.evaluation / clf.split_cost, rel=1e-12)


@pytest.mark.slow
def test_default_classifier_on_sample_flies():
    from msclassify.datasets import load_sample_flies
    frames, masks, scribbles = load_sample_flies()
    clf = PixelClassifier(random_state=0).fit(frames[:2], scribbles[:2])
    predictions = np.stack([clf.predict(frame) for frame in frames[2:4]])
    assert seg_score(masks[2:4], label_instances(predictions, foreground=2)) > 0.8
    cost = clf.prediction_cost(frames[2])
    # cheap: a few mostly coarse features, a few node evaluations per pixel (the teacher makes
    # the outlines full resolution: 89 operations per pixel, 65 of them node evaluations)
    assert len(clf.features_used_) <= 10
    assert cost.total / frames[2].size < 100


@pytest.mark.parametrize("n_classes", [2, 3])
def test_most_probable_is_argmax_and_one_minus_max(n_classes):
    probabilities = np.random.default_rng(0).random((20, 30, n_classes)).astype(np.float32)
    probabilities[0, 0] = 0.5                           # a tie goes to the first class
    best, uncertainty = most_probable(probabilities)
    np.testing.assert_array_equal(best, np.argmax(probabilities, axis=2))
    np.testing.assert_array_equal(uncertainty, 1.0 - probabilities.max(axis=2))
    assert uncertainty.dtype == np.float32 and best[0, 0] == 0


def test_most_probable_keeps_numpy_s_nan_and_float64_rules_and_predict_frame_agrees():
    """One pass per pixel, numpy's rules: a NaN makes the uncertainty NaN (numpy.maximum) and
    no later class wins against it; float64 stays float64; predict_frame's labels are the
    classes of the same argmax."""
    from msclassify.pixel import predict_frame
    probabilities = np.array([[[0.25, np.nan, 0.5], [np.nan, 0.75, 0.25], [0.25, 0.25, 0.5],
                               [0.5, 0.5, 0.0]]])
    best, uncertainty = most_probable(probabilities)
    assert best.tolist() == [[0, 0, 2, 0]] and uncertainty.dtype == np.float64
    np.testing.assert_array_equal(uncertainty, [[np.nan, np.nan, 0.5, 0.5]])

    class Fixed:
        classes_ = np.array([4, 7, 9], np.uint8)

        def predict_proba(self, frame):
            return probabilities
    labels, _, uncertainty = predict_frame(Fixed(), np.zeros((1, 4)), probabilities=True)
    assert labels.tolist() == [[4, 4, 9, 4]] and labels.dtype == np.uint8
    assert uncertainty.dtype == np.float32
