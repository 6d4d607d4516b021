"""Scribble robustness (issue 24): class-balanced loss weights and training progress.

Tiny hand-checkable cases. Two noisy regions overlap in intensity (class 1 mean
0.4, class 2 mean 0.6, per-pixel noise 0.15, nothing else to tell them apart): a
pixel's class follows from whether it is above 0.5, unless the model has learnt
a prior. Scribbles with 10 pixels of one class for every pixel of another teach
such a prior (log-odds ln 10 = 2.3, which moves the boundary from 0.5 to about
0.76 for these two Gaussians): without re-weighting most of the rare class's
region flips to the common class; with class-balanced weights it does not.
"""

import numpy as np
import pytest

from msclassify.pixel import PixelClassifier, TrainingProgress
from msclassify.pixel._balance import class_balanced_weights, under_scribbled_weights

MEANS = (0.4, 0.6)
NOISE = 0.15


def noisy_regions(means, width=48, height=48, seed=0):
    """Vertical bands of the given mean intensities, i.i.d. Gaussian noise per pixel."""
    rng = np.random.default_rng(seed)
    truth = np.repeat(np.arange(1, len(means) + 1), width // len(means))[None, :]
    truth = np.repeat(truth, height, axis=0).astype(np.uint8)
    image = np.asarray(means)[truth - 1] + rng.normal(0, NOISE, truth.shape)
    return image, truth


def strokes(truth, per_class):
    """``per_class[c]`` labelled pixels of class c + 1, a few full columns inside its band."""
    labels = np.zeros_like(truth)
    for value, count in enumerate(per_class, start=1):
        xs, ys = np.nonzero(truth.T == value)                  # column by column
        skip = 2 * truth.shape[0]                              # 2 columns off the band's edge
        labels[ys[skip:skip + count], xs[skip:skip + count]] = value
    return labels


def pixel_only(distill=False, **params):
    """A model on the pixel's intensity (smoothing features would average the noise away);
    with ``distill``, also the 8x8-block mean, so that a teacher on the intensity distils
    into a model that may use both (the default distillation)."""
    features = ["L0:intensity:c0"] + (["L3:intensity:c0"] if distill else [])
    return PixelClassifier(features=features, n_estimators=30, random_state=0,
                           min_samples_leaf=5, **params)


@pytest.mark.parametrize("distill", [False, True])
def test_unbalanced_strokes_flip_the_rare_region_unless_classes_are_balanced(distill):
    image, truth = noisy_regions(MEANS)
    labels = strokes(truth, [480, 48])                        # 10:1
    recall = {}
    for weight in (None, "sqrt", "balanced"):
        model = pixel_only(distill, class_weight=weight).fit(image, labels)
        assert (model.teacher_features_ is not None) == distill
        predicted = model.predict(image)
        recall[weight] = float((predicted[truth == 2] == 2).mean())
    # the Gaussians put 75% of class 2 above 0.5 and 14% above 0.76 (measured: 0.20 and 0.57
    # without distillation, 0.24 and 0.57 with it); "sqrt" weighs the strokes 3.2:1, a prior
    # of ln 3.2 = 1.15 that moves the boundary to about 0.63 (42% of class 2 above it)
    assert recall[None] < 0.3
    assert recall["balanced"] > 0.5
    assert recall[None] < recall["sqrt"] < recall["balanced"]


def bands(widths, means, height=48, seed=1):
    """Vertical bands of the given widths and mean intensities (classes 1, 2, ...) with the
    noise of `noisy_regions`."""
    truth = np.repeat(np.arange(1, len(widths) + 1), widths)[None, :].repeat(height, axis=0)
    image = np.asarray(means)[truth - 1] + np.random.default_rng(seed).normal(0, NOISE,
                                                                             truth.shape)
    return image, truth.astype(np.uint8)


def test_auto_weights_raise_an_under_scribbled_class_and_not_an_over_scribbled_one():
    # under-scribbled (a thin brush on a common class): the two classes are half of the
    # image each, scribbled 10:1. The teacher, which learnt the 10:1 prior, still finds
    # class 2 in more than 1/11 of the pixels, so "auto" weighs the classes equally and
    # class 2's region is no longer flipped (measured recall 0.24 None, 0.55 auto and balanced)
    image, truth = noisy_regions(MEANS)
    labels = strokes(truth, [480, 48])
    recall = {w: float((pixel_only(True, class_weight=w).fit(image, labels).predict(image)
                        [truth == 2] == 2).mean()) for w in (None, "auto", "balanced")}
    assert recall[None] < 0.3 and recall["auto"] == recall["balanced"] > 0.5
    # without a teacher there is no estimate: "auto" is None
    assert np.array_equal(pixel_only(class_weight="auto").fit(image, labels).predict(image),
                          pixel_only(class_weight=None).fit(image, labels).predict(image))

    # over-scribbled (a few strokes on a rare class): class 2 is 10% of the image and 25% of
    # the scribbles. Weighing it up grows it into class 1 (the overlap of the intensities);
    # "auto" leaves the weights as they are: the same model as None (measured: class-1 pixels
    # taken for class 2: 317 None and auto, 876 balanced, 527 sqrt; accuracy 0.891 / 0.765)
    image, truth = bands([72, 8], MEANS)
    labels = strokes(truth, [300, 100])
    predicted = {w: pixel_only(True, class_weight=w).fit(image, labels).predict(image)
                 for w in (None, "auto", "balanced")}
    assert np.array_equal(predicted["auto"], predicted[None])
    wrong = {w: int((p[truth == 1] == 2).sum()) for w, p in predicted.items()}
    assert wrong["balanced"] > 1.5 * wrong[None]
    accuracy = {w: float((p == truth).mean()) for w, p in predicted.items()}
    assert accuracy["auto"] > accuracy["balanced"]


def test_auto_weights_of_a_volume_compare_the_scribbles_with_the_slices_scribbled():
    # one scribbled slice where class 2 is a rare band (10%), drawn over-represented (25% of
    # the scribbles); on the other slices class 2 is half of the voxels. Over the whole volume
    # class 2 looks under-scribbled (about 40% of the voxels); on the slice drawn on it is not,
    # so "auto" keeps the scribbles' weights there: the same model as None, not "balanced"
    rare, rare_truth = bands([72, 8], MEANS)
    half = [bands([40, 40], MEANS, seed=seed)[0] for seed in range(2, 7)]
    volume = np.stack([rare] + half)
    labels = np.zeros(volume.shape, np.uint8)
    labels[0] = strokes(rare_truth, [300, 100])
    predicted = {w: pixel_only(True, class_weight=w, spacing=(1.0, 1.0, 1.0)).fit(
        volume, labels).predict(volume) for w in (None, "auto", "balanced")}
    assert np.array_equal(predicted["auto"], predicted[None])
    assert not np.array_equal(predicted["balanced"], predicted[None])


def test_progress_follows_the_teachers_refit_with_auto_weights():
    """With "auto" weights the teacher's stage counts two fits: the refit (a class scribbled
    10:1) reports steps past the first fit's and the overall fraction never goes back;
    without the refit ("balanced" weights) the stage ends after one fit."""
    image, truth = noisy_regions(MEANS)
    labels = strokes(truth, [480, 48])
    for class_weight, refit in (("auto", True), ("balanced", False)):
        seen = []
        pixel_only(True, class_weight=class_weight).fit(image, labels, progress=seen.append)
        teacher = [p.step for p in seen if p.stage == "teacher"]
        n_steps = {p.n_steps for p in seen if p.stage == "teacher"}
        assert n_steps == {60 if class_weight == "auto" else 30}
        assert max(teacher) == (60 if refit else 30)
        fractions = [p.fraction for p in seen]
        assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_under_scribbled_weights_raise_only_classes_below_their_share_and_an_equal_one():
    y = np.array([0] * 6 + [1] * 3 + [2] * 1 + [0])
    weight = np.ones(11)
    weight[-1] = 0                                             # a cost sample
    # class 2: 10% scribbled, 30% by the estimate -> a third; class 1: 30% scribbled, 60%
    # estimated, below a third too -> a third; class 0 (60% scribbled) the rest
    out = under_scribbled_weights(y, weight, 3, np.array([0.1, 0.6, 0.3]))
    sums = np.bincount(y, weights=out)
    assert np.allclose(sums, 10 / 3) and out[-1] == 0
    # class 1 over-scribbled (30% vs 5%): kept; class 2 raised to a third; class 0 the rest
    out = under_scribbled_weights(y, weight, 3, np.array([0.65, 0.05, 0.3]))
    sums = np.bincount(y, weights=out)
    assert np.allclose(sums / 10, [2 / 3 * 6 / 9, 2 / 3 * 3 / 9, 1 / 3])
    # nothing under-scribbled below an equal share: the same array
    assert under_scribbled_weights(y, weight, 3, np.array([0.7, 0.25, 0.05])) is weight


def test_balanced_strokes_need_no_reweighting():
    image, truth = noisy_regions(MEANS)
    labels = strokes(truth, [240, 240])
    recall = [float((pixel_only(class_weight=w).fit(image, labels)
                     .predict(image)[truth == 2] == 2).mean()) for w in (None, "balanced")]
    assert recall[0] == recall[1] > 0.5                        # identical weights, same model


@pytest.mark.parametrize("distill", [False, True])
def test_a_rarely_scribbled_class_of_three_survives_with_balanced_weights(distill):
    image, truth = noisy_regions((0.2, 0.5, 0.8), width=48)
    labels = strokes(truth, [300, 300, 24])                   # the bright class: 1 in 25
    recall = {}
    for weight in (None, "balanced"):
        predicted = pixel_only(distill, class_weight=weight).fit(image, labels).predict(image)
        recall[weight] = float((predicted[truth == 3] == 3).mean())
    # measured: 0.44 and 0.79 without distillation, 0.45 and 0.69 with it
    assert recall[None] < 0.5 < 0.65 < recall["balanced"]


def test_class_balanced_weights_equalise_classes_and_keep_the_total():
    y = np.array([0, 0, 0, 0, 1, 2, 2, 1])
    weight = np.array([1.0, 1, 1, 1, 1, 1, 1, 0])            # the last row is a cost sample
    out = class_balanced_weights(y, weight, 4)                 # class 3 has no rows
    sums = np.bincount(y, weights=out, minlength=4)
    assert np.allclose(sums[:3], weight.sum() / 3) and sums[3] == 0
    assert out[-1] == 0 and np.isclose(out.sum(), weight.sum())


def test_sqrt_class_weights_make_class_totals_the_square_root_of_the_scribbled():
    y = np.array([0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1])
    weight = np.ones(11)
    weight[-1] = 0                                             # a cost sample
    out = class_balanced_weights(y, weight, 2, power=0.5)      # 9:1 scribbled
    sums = np.bincount(y, weights=out)
    assert np.isclose(sums[0] / sums[1], 3.0)                  # sqrt(9):1
    assert out[-1] == 0 and np.isclose(out.sum(), weight.sum())
    assert np.array_equal(class_balanced_weights(y, weight, 2, power=0.0), weight)


def test_class_weight_must_be_auto_balanced_sqrt_or_none():
    image, truth = noisy_regions(MEANS)
    with pytest.raises(ValueError,
                       match="class_weight must be 'auto', 'balanced', 'sqrt' or None"):
        pixel_only(class_weight="equal").fit(image, strokes(truth, [50, 50]))


# ----------------------------------------------------------------------------------- progress

def tiny_problem():
    image, truth = noisy_regions((0.2, 0.8), width=64, height=64)
    return image, strokes(truth, [200, 200])


def test_progress_reports_stages_in_order_with_a_rising_fraction_and_an_eta():
    image, labels = tiny_problem()
    reports, calls = [], []
    PixelClassifier(n_estimators=6, random_state=0).fit(
        image, labels, progress=reports.append, callback=lambda i, n: calls.append((i, n)))
    assert all(isinstance(r, TrainingProgress) for r in reports)
    stages = list(dict.fromkeys(r.stage for r in reports))
    assert stages == ["features", "teacher", "distillation", "model", "done"]
    fractions = [r.fraction for r in reports]
    assert fractions == sorted(fractions) and fractions[0] == 0 and fractions[-1] == 1
    assert [r.step for r in reports if r.stage == "model"] == list(range(7))
    assert all(r.eta_s is not None and r.eta_s >= 0 for r in reports[1:])
    assert calls == [(i, 6) for i in range(1, 7)]             # the old callback still works


def test_progress_names_every_fit_of_the_auto_path_and_callback_still_stops():
    image, labels = tiny_problem()
    reports = []
    auto = PixelClassifier(n_estimators=4, cost_tradeoff="auto", random_state=0).fit(
        image, labels, progress=reports.append)
    stages = list(dict.fromkeys(r.stage for r in reports))
    # the fits of the path in the order searched (at most 4), then the refit, always the last
    # of 5
    fitted = len(auto.tradeoff_path_)
    assert 3 <= fitted <= 4
    assert stages[3:] == [f"μ path {k}/5" for k in range(1, fitted + 1)] + ["μ path 5/5", "done"]
    assert [r.fraction for r in reports] == sorted(r.fraction for r in reports)
    stopped = PixelClassifier(n_estimators=10, random_state=0).fit(
        image, labels, callback=lambda i, n: i >= 3)
    assert stopped.booster_.n_iterations == 3


def test_progress_must_be_callable():
    image, labels = tiny_problem()
    with pytest.raises(TypeError, match="progress must be callable or None, got int"):
        PixelClassifier(n_estimators=2).fit(image, labels, progress=3)
