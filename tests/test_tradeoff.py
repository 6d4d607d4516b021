"""``cost_tradeoff="auto"``: hold-out splits, the choice, two fitted cases, model files, the CLI."""

import numpy as np
import pytest
import tifffile

from msclassify import load_model
from msclassify.cegb import train
from msclassify.cli import main
from msclassify.datasets import sample_data_path
from msclassify.modelfile import ModelFileError, read_model, write_model
from msclassify.pixel import PixelClassifier
from msclassify.pixel._tradeoff import (AUTO_PATH, MAX_PATH_FITS, balanced_accuracy, choose,
                                        holdout_split, search_path, stroke_holdout)

# -- hold-out splits ---------------------------------------------------------------------------


def two_class_frame():
    lab = np.zeros((8, 8), np.uint8)
    lab[0, :4] = 1
    lab[7, 4:] = 2
    return lab


def test_holdout_by_frame_takes_every_fourth_frame():
    frames = [two_class_frame() for _ in range(8)]
    held, how = holdout_split(frames, np.array([1, 2]))
    assert [bool(h.any()) for h in held] == [False, False, False, True] * 2
    assert np.array_equal(held[3], frames[3] > 0)
    assert how == "held out 2 of 8 labelled frames"
    held, how = holdout_split(frames[:2], np.array([1, 2]))     # fewer than 4: the last
    assert [bool(h.any()) for h in held] == [False, True]


def test_holdout_falls_back_to_strokes_when_a_held_out_frame_lacks_a_class():
    only_background = np.zeros((8, 8), np.uint8)
    only_background[2, 1:7] = 1
    frames = [two_class_frame(), only_background]        # frame 1 (held out) has no class 2
    held, how = holdout_split(frames, np.array([1, 2]))
    assert how.startswith("held out") and "frames" not in how
    # by stroke: every class of both frames has one stroke -> its last quarter
    assert np.flatnonzero(held[0][0]).tolist() == [3]          # 4 px stroke: cols >= 0 + 3
    assert np.flatnonzero(held[0][7]).tolist() == [7]
    assert np.flatnonzero(held[1][2]).tolist() == [6]          # cols 1..6: >= 1 + ceil(4.5)


def test_holdout_by_stroke_takes_every_fourth_stroke_or_the_last():
    lab = np.zeros((20, 20), np.uint8)
    for row in (0, 4, 8, 12, 16):                  # class 1: five strokes, scan order = rows
        lab[row, 2:9] = 1
    lab[2:9, 15] = 2                               # class 2: two vertical strokes
    lab[11:18, 15] = 2
    held, n_whole, n_split = stroke_holdout(lab, np.array([1, 2]))
    assert (n_whole, n_split) == (2, 0)
    assert np.array_equal(np.flatnonzero(held.any(axis=1)), [11, 12, 13, 14, 15, 16, 17])
    assert held[12, 2:9].all() and held[:, :9].sum() == 7       # class 1: its 4th stroke only
    assert held[11:18, 15].all() and not held[2:9, 15].any()    # class 2: the last stroke


def test_a_single_stroke_loses_the_last_quarter_along_its_longer_side():
    lab = np.zeros((30, 10), np.uint8)
    lab[2:22, 4:6] = 1                             # 20 rows x 2 columns: split by rows
    held, n_whole, n_split = stroke_holdout(lab, np.array([1]))
    assert (n_whole, n_split) == (0, 1)
    assert np.array_equal(np.flatnonzero(held.any(axis=1)), np.arange(17, 22))   # 2 + 15 ..
    assert held.sum() == 10


def test_nothing_held_out_uses_cost_tradeoff_zero_and_says_so():
    image = np.zeros((16, 16))
    image[8:] = 1
    labels = np.zeros((16, 16), np.uint8)
    labels[0, 0], labels[15, 15] = 1, 2                 # one-pixel strokes: nothing to hold out
    clf = PixelClassifier(cost_tradeoff="auto", n_estimators=2, min_samples_leaf=1,
                          random_state=0).fit(image, labels)
    assert clf.cost_tradeoff_ == 0.0 and clf.tradeoff_path_ == []
    assert "too few scribbles" in clf.tradeoff_reason_


# -- the choice --------------------------------------------------------------------------------


def test_balanced_accuracy_weighs_every_class_alike():
    y_true = np.array([0] * 98 + [1, 1])
    assert balanced_accuracy(y_true, np.zeros(100, int), 2) == 0.5     # plain accuracy: 0.98
    assert balanced_accuracy(y_true, y_true, 2) == 1.0


def test_choose_keeps_the_cheapest_within_tolerance_and_breaks_ties():
    path = [dict(cost_tradeoff=0.0, score=0.99, cost_per_pixel=30.0),
            dict(cost_tradeoff=1e-4, score=0.985, cost_per_pixel=3.0),
            dict(cost_tradeoff=3e-4, score=0.986, cost_per_pixel=3.0),
            dict(cost_tradeoff=1e-3, score=0.90, cost_per_pixel=1.0)]
    assert choose(path, 0.01)[0] == 2        # same cost as index 1, higher score
    assert choose(path, 0.0)[0] == 0
    assert choose(path, 0.2)[0] == 3
    index, reason = choose(path, 0.01)
    assert "cost_tradeoff=0.0003 is the cheapest" in reason and "0.9900" in reason


def searched(scores, tolerance, costs=None):
    """``(values fitted in order, value chosen)`` of `search_path` + `choose` on a score table."""
    values = tuple(scores)
    costs = costs or {mu: 100.0 / (1 + 1e4 * mu) for mu in values}   # cheaper as mu grows
    fitted = []

    def fit(mu):
        fitted.append(mu)
        return dict(cost_tradeoff=mu, score=scores[mu], cost_per_pixel=costs[mu])
    path = search_path(fit, tolerance, values)
    assert [p["cost_tradeoff"] for p in path] == sorted(fitted)      # table in path order
    return fitted, path[choose(path, tolerance)[0]]["cost_tradeoff"]


def test_search_bisects_for_the_largest_value_within_tolerance_of_the_best():
    # 0 first, then the middle value 1e-4 (0.986: within 0.005 of 0.99), then the larger
    # half: 1e-3 (0.95) and 3e-4 (0.98) are not, so 1e-4 is the largest that is
    scores = {0.0: 0.99, 1e-5: 0.989, 3e-5: 0.988, 1e-4: 0.986, 3e-4: 0.98, 1e-3: 0.95}
    assert searched(scores, 0.005) == ([0.0, 1e-4, 1e-3, 3e-4], 1e-4)
    assert searched(scores, 0.05) == ([0.0, 1e-4, 1e-3], 1e-3)   # the cheapest one is enough
    # none within tolerance: the smaller half down to 1e-5, and plain boosting is kept
    assert searched(scores, 0.0) == ([0.0, 1e-4, 3e-5, 1e-5], 0.0)


def test_search_fits_at_most_four_models_of_the_path():
    rng = np.random.default_rng(1)
    for _ in range(200):
        scores = dict(zip(AUTO_PATH, rng.uniform(0.9, 1.0, len(AUTO_PATH))))
        fitted, chosen = searched(scores, rng.choice([0.0, 0.005, 0.05]))
        assert fitted[0] == 0.0 and len(fitted) <= MAX_PATH_FITS == 4 and chosen in fitted


def test_search_raises_the_bar_when_a_larger_value_beats_zero():
    # 3e-4 scores above 0 (0.97 vs 0.95): it is the best so far and within tolerance of itself
    scores = {0.0: 0.95, 1e-5: 0.95, 1e-4: 0.96, 3e-4: 0.97, 1e-3: 0.90}
    assert searched(scores, 0.005) == ([0.0, 3e-4, 1e-3], 3e-4)


def test_search_chooses_as_the_whole_path_when_the_score_falls_as_the_value_grows():
    rng = np.random.default_rng(0)
    for _ in range(200):
        falling = 1 - np.cumsum(rng.exponential(0.004, len(AUTO_PATH)))
        scores = dict(zip(AUTO_PATH, falling))
        for tolerance in (0.0, 0.005, 0.02):
            whole = [dict(cost_tradeoff=mu, score=s, cost_per_pixel=100.0 / (1 + 1e4 * mu))
                     for mu, s in scores.items()]
            assert searched(scores, tolerance)[1] == \
                whole[choose(whole, tolerance)[0]]["cost_tradeoff"]


# -- fitted cases ------------------------------------------------------------------------------

TILES = ((np.arange(64)[:, None] // 16 + np.arange(64)[None, :] // 16) % 2).astype(np.uint8) + 1


def tiles_image(seed):
    """Noisy 16x16 tiles of two brightnesses: every outline lies on an 8x8 block edge."""
    return np.random.default_rng(seed).normal(0.3, 0.12, (64, 64)) + 0.4 * (TILES == 2)


def tile_scribbles():
    """A small cross of the right class in every tile, away from the tile edges."""
    labels = np.zeros((64, 64), np.uint8)
    for r in range(4, 64, 16):
        for c in range(4, 64, 16):
            labels[r:r + 8, c + 3] = TILES[r, c]
            labels[r + 3, c:c + 8] = TILES[r, c]
    return labels


def test_path_fits_share_one_binning_and_train_the_same_models():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(float)
    weight = np.ones(300)
    weight[::5] = 0                                   # held out: routed, not learned from
    bins = {}
    for mu in (0.0, 1e-2, 1e-1):
        params = dict(n_estimators=5, cost_tradeoff=mu, feature_costs=[1, 2, 3, 4],
                      random_state=0)
        shared = train(X, y, "binary", params, sample_weight=weight, bin_cache=bins)
        if mu == 0.0:
            binned = bins["Xb"]
        alone = train(X, y, "binary", params, sample_weight=weight)
        assert np.array_equal(shared.predict_raw(X), alone.predict_raw(X))
        assert np.array_equal(shared.features_used(), alone.features_used())
        assert bins["Xb"] is binned                   # binned once, reused
    other = weight.copy()
    other[1] = 0                                      # other rows carry loss: binned anew
    train(X, y, "binary", dict(n_estimators=2, random_state=0), sample_weight=other,
          bin_cache=bins)
    assert bins["Xb"] is not binned


def assert_searched(auto):
    """The path of a fitted model is what `search_path` fits: replaying the search on the
    recorded scores fits the recorded values (and no other) in path order."""
    path = auto.tradeoff_path_
    values = [p["cost_tradeoff"] for p in path]
    assert values[0] == 0.0 and values == sorted(values) and set(values) <= set(AUTO_PATH)
    recorded = {p["cost_tradeoff"]: p for p in path}
    replayed = search_path(lambda mu: recorded[mu], auto.tolerance)   # KeyError: not recorded
    assert replayed == path and len(path) <= MAX_PATH_FITS
    assert path[choose(path, auto.tolerance)[0]]["cost_tradeoff"] == auto.cost_tradeoff_
    skipped = len(AUTO_PATH) - len(path)
    assert (f"({skipped} value(s) of the path not fitted" in auto.tradeoff_reason_) == \
        bool(skipped)


def test_auto_picks_a_cheaper_model_when_it_is_as_good():
    labels = tile_scribbles()
    # the tradeoff alone (distillation, on by default, is tested in test_distill.py)
    params = dict(n_estimators=10, random_state=0, distill_weight=0)
    auto = PixelClassifier(cost_tradeoff="auto", **params).fit(tiles_image(0), labels)
    plain = PixelClassifier(cost_tradeoff=0.0, **params).fit(tiles_image(0), labels)
    assert_searched(auto)
    assert auto.cost_tradeoff_ > 0
    chosen = next(p for p in auto.tradeoff_path_ if p["cost_tradeoff"] == auto.cost_tradeoff_)
    assert chosen["cost_per_pixel"] < auto.tradeoff_path_[0]["cost_per_pixel"] / 5
    assert "is the cheapest" in auto.tradeoff_reason_
    # as good on a new noise draw: the tiles are found as well as plain boosting finds them
    fresh = tiles_image(1)
    assert np.mean(auto.predict(fresh) == TILES) >= np.mean(plain.predict(fresh) == TILES) - 0.005
    assert auto.feature_cost_per_pixel_ < plain.feature_cost_per_pixel_
    # with a value > 0 chosen the refit is a fresh fit of that value on all scribbles
    fixed = PixelClassifier(cost_tradeoff=auto.cost_tradeoff_, **params).fit(tiles_image(0),
                                                                           labels)
    assert np.array_equal(auto.predict_proba(fresh), fixed.predict_proba(fresh))


def test_auto_keeps_a_costlier_model_when_the_cheap_ones_lose_a_rare_class():
    # class 3: 2x2 checkerboard specks whose 2x2 block mean equals the background, so only
    # full-resolution features see them; they are 3% of the scribbles, which the cheapest
    # models of the path give up (plain accuracy would hardly notice, balanced accuracy does)
    truth = np.ones((64, 64), np.uint8)
    truth[:, 32:] = 2
    for r in (4, 20, 36, 52):
        for c in (8, 20):
            truth[r:r + 2, c:c + 2] = 3
    checker = np.where((np.arange(64)[:, None] + np.arange(64)[None, :]) % 2 == 0, 0.3, -0.3)

    def image(seed):
        noise = np.random.default_rng(seed).normal(0.3, 0.02, (64, 64))
        return noise + 0.4 * (truth == 2) + checker * (truth == 3)

    labels = np.zeros((64, 64), np.uint8)
    labels[1:63:4, 2:30] = 1
    labels[1:63:4, 34:62] = 2
    labels[truth == 3] = 3
    # the "fine" bank (full resolution and 2x2 blocks): its only coarse features cannot see them;
    # unweighted classes (class_weight=None): balanced weights make even the cheapest model
    # keep the specks, and this test is about auto's scoring when a model loses them
    params = dict(features="fine", n_estimators=10, min_samples_leaf=5, split_cost=200.0,
                  random_state=0, distill_weight=0, class_weight=None)
    auto = PixelClassifier(cost_tradeoff="auto", **params).fit(image(0), labels)
    path = auto.tradeoff_path_
    cheapest = min(path, key=lambda p: p["cost_per_pixel"])
    best = max(p["score"] for p in path)
    assert cheapest["score"] < best - auto.tolerance           # the cheap model is worse ...
    chosen = next(p for p in path if p["cost_tradeoff"] == auto.cost_tradeoff_)
    assert chosen["score"] >= best - auto.tolerance
    assert chosen["cost_per_pixel"] > cheapest["cost_per_pixel"]   # ... so auto pays more
    # the cheapest value of the path (bisection may not fit it: a smaller one already lost)
    cheap = PixelClassifier(cost_tradeoff=AUTO_PATH[-1], **params).fit(image(0), labels)
    fresh = image(1)
    assert np.mean(auto.predict(fresh)[truth == 3] == 3) >= 0.9
    # 0 chosen: the refit continues the path model of 0 (its first trees, all 10 rounds in all)
    assert auto.cost_tradeoff_ == 0.0 and auto.booster_.n_iterations == 10
    plain = PixelClassifier(cost_tradeoff=0.0, **params).fit(image(0), labels)
    assert not np.array_equal(auto.booster_.trees[0]["value"], plain.booster_.trees[0]["value"])
    assert np.mean(cheap.predict(fresh)[truth == 3] == 3) <= 0.1


def test_auto_progress_counts_every_fit_and_a_fixed_value_behaves_as_before():
    labels = np.zeros((64, 64), np.uint8)
    labels[2:6, 2:60] = 1
    labels[30:34, 2:60] = 2
    labels[50:54, 2:60] = 1
    calls = []
    auto = PixelClassifier(cost_tradeoff="auto", n_estimators=3, random_state=0)
    auto.fit(tiles_image(0), labels, callback=lambda i, n: calls.append((i, n)))
    n_fits = MAX_PATH_FITS + 1
    # counted as if every fit had n_estimators iterations (the path fits grow fewer trees):
    # rising, ending at all of them
    assert calls[-1] == (3 * n_fits, 3 * n_fits)
    assert [i for i, _ in calls] == sorted({i for i, _ in calls})
    stopped = PixelClassifier(cost_tradeoff="auto", n_estimators=3, random_state=0)
    stopped.fit(tiles_image(0), labels, callback=lambda i, n: True)
    assert stopped.booster_.n_iterations == 1 and stopped.cost_tradeoff_ == 0.0
    assert stopped.tradeoff_path_ == [] and "stopped" in stopped.tradeoff_reason_
    fixed = PixelClassifier(cost_tradeoff=2e-4, n_estimators=3, random_state=0)
    fixed.fit(tiles_image(0), labels)
    assert (fixed.cost_tradeoff_, fixed.tradeoff_path_) == (2e-4, None)
    assert fixed.tradeoff_reason_ == "cost_tradeoff=0.0002 was given"


@pytest.mark.parametrize("params, message", [
    ({"cost_tradeoff": "fast"}, "cost_tradeoff must be 'auto' or a number"),
    ({"cost_tradeoff": -1.0}, "cost_tradeoff must be a finite number >= 0"),
    ({"tolerance": -0.1}, "tolerance must be a finite number >= 0"),
    ({"cost_tradeoff": "auto", "semi_supervised": True}, "does not combine"),
])
def test_bad_tradeoff_parameters_are_rejected(params, message):
    labels = np.zeros((16, 16), np.uint8)
    labels[0], labels[15] = 1, 2
    with pytest.raises(ValueError, match=message):
        PixelClassifier(**params).fit(np.zeros((16, 16)), labels)


# -- model files -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def auto_model(tmp_path_factory):
    labels = np.zeros((64, 64), np.uint8)
    labels[2:6, 2:60] = 1
    labels[30:34, 2:60] = 2
    labels[50:54, 2:60] = 1
    clf = PixelClassifier(cost_tradeoff="auto", n_estimators=3, random_state=0)
    path = tmp_path_factory.mktemp("auto") / "auto.msc"
    clf.fit(tiles_image(0), labels).save(path)
    return clf, path


def test_model_file_round_trip_of_the_choice(auto_model):
    clf, path = auto_model
    loaded = load_model(path)
    assert loaded.get_params()["cost_tradeoff"] == "auto"
    assert loaded.cost_tradeoff_ == clf.cost_tradeoff_
    assert loaded.tradeoff_path_ == clf.tradeoff_path_
    assert loaded.tradeoff_reason_ == clf.tradeoff_reason_
    np.testing.assert_array_equal(loaded.predict(tiles_image(1)), clf.predict(tiles_image(1)))


def rewrite(path, new_path, change):
    kind, meta, arrays = read_model(path)
    change(meta)
    write_model(new_path, kind, meta, arrays)
    return new_path


def test_old_model_files_without_the_record_still_load(auto_model, tmp_path):
    _, path = auto_model

    def as_old_fixed(meta):
        del meta["tradeoff"]
        meta["params"]["cost_tradeoff"] = 2e-4
        del meta["params"]["tolerance"]

    loaded = load_model(rewrite(path, tmp_path / "old.msc", as_old_fixed))
    assert loaded.cost_tradeoff_ == 2e-4 and loaded.tradeoff_path_ is None
    assert loaded.tradeoff_reason_ == "cost_tradeoff=0.0002 was given"


@pytest.mark.parametrize("change, message", [
    (lambda m: m.pop("tradeoff"), "does not record the choice"),
    (lambda m: m["tradeoff"].update(cost_tradeoff=-1.0), "finite number >= 0"),
    (lambda m: m["tradeoff"].update(cost_tradeoff=0.123), "not on the recorded path"),
    (lambda m: m["tradeoff"]["path"][0].update(score=1.5), "score must be at most 1"),
    (lambda m: m["tradeoff"]["path"][0].pop("teacher_agreement"), "must hold exactly"),
    (lambda m: m["tradeoff"].update(path="all"), "no path table"),
    (lambda m: m["tradeoff"].update(reason=3), "reason must be a string"),
    (lambda m: m["params"].update(cost_tradeoff="sometimes"), "'auto' or a number"),
    (lambda m: m["params"].update(cost_tradeoff=1e-3), "was given but the file records"),
])
def test_bad_tradeoff_records_are_rejected(auto_model, tmp_path, change, message):
    _, path = auto_model
    with pytest.raises(ModelFileError, match=message):
        load_model(rewrite(path, tmp_path / "bad.msc", change))


# -- the command line --------------------------------------------------------------------------


def test_cli_train_auto_on_the_sample_data_prints_and_saves_the_choice(tmp_path, capsys):
    folder = sample_data_path("flies")
    frames = tifffile.imread(folder / "frames.tif")[:2, 128:512, 128:512]
    labels = tifffile.imread(folder / "scribbles.tif")[:2, 128:512, 128:512]
    tifffile.imwrite(tmp_path / "frames.tif", frames)
    tifffile.imwrite(tmp_path / "scribbles.tif", labels)
    out = tmp_path / "auto.msc"
    assert main(["train", str(tmp_path / "frames.tif"), "--labels", str(tmp_path / "scribbles.tif"),
                 "-o", str(out), "--cost-tradeoff", "auto", "--tolerance", "0.01",
                 "--n-estimators", "5", "--random-state", "0"]) == 0
    printed = capsys.readouterr().out
    model = load_model(out)
    assert model.get_params()["tolerance"] == 0.01
    assert f"cost tradeoff: {model.cost_tradeoff_:g} (chosen automatically)" in printed
    assert model.tradeoff_reason_ in printed
    assert main(["info", str(out)]) == 0
    info = capsys.readouterr().out
    assert "(chosen automatically)" in info and len(model.tradeoff_path_) >= 2
    assert info.count("\n") > len(model.tradeoff_path_) + 5           # the path table is printed
    # a given value is said in one line, without the table
    fixed = tmp_path / "fixed.msc"
    assert main(["train", str(tmp_path / "frames.tif"), "--labels", str(tmp_path / "scribbles.tif"),
                 "-o", str(fixed), "--cost-tradeoff", "3e-4", "--n-estimators", "5", "-q"]) == 0
    assert main(["info", str(fixed)]) == 0
    info = capsys.readouterr().out
    assert "cost tradeoff: 0.0003 (fixed)\n" in info and "chosen" not in info


def test_auto_with_distillation_holds_out_scribbles_only_and_trains_on_teacher_pixels():
    labels = tile_scribbles()
    params = dict(n_estimators=10, random_state=0, n_distill_pixels=500)
    auto = PixelClassifier(cost_tradeoff="auto", **params).fit(tiles_image(0), labels)
    assert auto.teacher_features_                      # distilled ...
    assert_searched(auto)                                                        # ... and chosen
    # scored on the held-out scribbles only: the teacher's pixels are not counted among them
    held = int(auto.tradeoff_reason_.split("scored on ")[1].split()[0])
    assert 0 < held < np.count_nonzero(labels)
    assert np.mean(auto.predict(tiles_image(1)) == TILES) > 0.9
