"""Upsampled features (``L<n>up:...``): a coarse filter interpolated back to full resolution.

Checked by hand on a 2x2 plane, against scipy's block-centred linear zoom, through
the bank (ids, costs, shares, gather = full), and through a PixelClassifier whose
multi-scale prediction must equal per-pixel prediction.
"""

import numpy as np
import pytest
from scipy import ndimage as ndi

from msclassify.features import (FeatureBank, FeatureSpec, PyramidImage, make_id,
                                 modelled_batch_cost, parse_id)
from msclassify.features import _kernels
from msclassify.pixel import PixelClassifier


def test_upsample_hand_checked():
    # block centres of a 2-px block sit at 0.5 and 2.5; pixels 0 and 3 lie outside
    # them and take the edge value (half-sample symmetric border), 1 and 2 interpolate
    plane = np.array([[0, 4], [8, 12]], dtype=np.float32)
    expected = np.array([[0, 1, 3, 4], [2, 3, 5, 6], [6, 7, 9, 10], [8, 9, 11, 12]])
    assert np.array_equal(_kernels.upsample_linear(plane, 1), expected)
    # a constant plane stays constant; a ramp stays a ramp between the first and last
    # block centres (3.5 and 19.5 for 8-px blocks) and is flat outside them
    assert np.array_equal(_kernels.upsample_linear(np.full((3, 2), 7, np.float32), 3),
                          np.full((24, 16), 7))
    ramp = _kernels.upsample_linear(np.array([[0, 8, 16]], np.float32), 3)
    assert np.array_equal(ramp[0, 4:20], np.arange(4, 20) - 3.5)
    assert np.array_equal(ramp[0, [0, 3, 20, 23]], [0, 0, 16, 16])


@pytest.mark.parametrize("level", [1, 2, 3])
def test_upsample_matches_scipy_zoom(level):
    plane = np.random.default_rng(level).random((5, 7)).astype(np.float32)
    reference = ndi.zoom(plane, 2 ** level, order=1, mode="nearest", grid_mode=True)
    np.testing.assert_allclose(_kernels.upsample_linear(plane, level), reference, atol=1e-6)


def test_upsampled_feature_is_the_coarse_feature_interpolated():
    image = np.random.default_rng(0).random((37, 53)).astype(np.float32)
    pyramid = PyramidImage(image)
    for coarse in ("L2:gauss:s1.0:c0", "L3:hessian_min:s1.6:c0", "L1:intensity:c0"):
        up = coarse.replace(":", "up:", 1)
        level = parse_id(coarse).level
        expected = ndi.zoom(pyramid.feature(coarse), 2 ** level, order=1, mode="nearest",
                            grid_mode=True)
        got = pyramid.feature(up)
        assert got.shape == pyramid.padded_shape
        np.testing.assert_allclose(got, expected, atol=1e-6)
    bank = FeatureBank(specs=["L2up:gauss:s1.0:c0", "L3up:dog:s1.6:c0", "L1:gauss:s1.0:c0"])
    levels = bank.compute_levels(image)
    assert [a.shape[2] for a in levels.arrays] == [2, 1, 0, 0]
    full = bank.compute_full(image)
    ys, xs = np.random.default_rng(1).integers(0, 37, 200), np.random.default_rng(2).integers(
        0, 53, 200)
    assert np.array_equal(bank.gather(image, ys, xs), full[ys, xs])


def test_upsampled_ids_costs_and_shares():
    spec = FeatureSpec.from_id("L2up:gauss:s1.6:c1")
    assert (spec.level, spec.share, spec.source_level, spec.upsampled) == (0, 1, 2, True)
    assert (spec.filter, spec.sigma, spec.channel) == ("gauss", 1.6, 1)
    assert "4x4 block means, interpolated to full resolution" in spec.name
    assert make_id(2, "gauss", 1.6, 1, upsampled=True) == spec.id
    assert parse_id(spec.id) == (2, "gauss", 1.6, 1, True)
    assert FeatureSpec.from_id(FeatureSpec.make(3, "intensity", upsampled=True).id).id == \
        "L3up:intensity:c0"
    # the coarse filter's cost, plus one horizontal pass over a quarter of the rows
    # (2 ops per output pixel of those rows) and a 2-op blend and a store per pixel
    assert modelled_batch_cost(2, "gauss", 1.6, upsampled=True) == \
        modelled_batch_cost(2, "gauss", 1.6) + 2 / 4 + 3
    assert spec.batch_cost == modelled_batch_cost(2, "gauss", 1.6, upsampled=True)
    # far cheaper than the same scale at full resolution
    assert spec.batch_cost < modelled_batch_cost(0, "gauss", 6.4) / 5
    # plain ids keep their meaning
    plain = FeatureSpec.from_id("L2:gauss:s1.6:c0")
    assert (plain.level, plain.share, plain.source_level, plain.upsampled) == (2, 16, 2, False)
    bank = FeatureBank(specs=["L0:intensity:c0", "L3up:log:s1.0:c0"])
    assert FeatureBank.from_dict(bank.to_dict()) == bank


def test_bad_upsampled_ids():
    with pytest.raises(ValueError, match="already is"):
        parse_id("L0up:gauss:s1.0:c0")
    with pytest.raises(ValueError, match="already is"):
        make_id(0, "gauss", 1.0, upsampled=True)
    with pytest.raises(ValueError, match="malformed"):
        parse_id("L2UP:gauss:s1.0:c0")
    with pytest.raises(ValueError, match="level"):
        parse_id("L4up:gauss:s1.0:c0")
    with pytest.raises(ValueError, match="disagree"):
        FeatureSpec(id="L2up:gauss:s1.0:c0", name="x", level=2, share=16, batch_cost=1.0,
                    channel=0, filter="gauss", sigma=1.0)


def test_multiscale_prediction_equals_per_pixel_with_upsampled_features():
    # labels that no single feature explains (a smoothed-noise pattern, half the pixels
    # labelled) make plain boosting use features of every kind and level
    rng = np.random.default_rng(0)
    image = rng.random((61, 75)).astype(np.float32)
    pattern = ndi.gaussian_filter(image, 2.0) + 0.3 * image
    labels = np.where(pattern > np.median(pattern), 2, 1).astype(np.uint8)
    labels[rng.random(labels.shape) < 0.5] = 0
    features = ["L0:intensity:c0", "L1up:gauss:s1.0:c0", "L2up:hessian_max:s1.0:c0",
                "L3up:intensity:c0", "L1:gauss:s1.0:c0", "L2:gauss:s1.0:c0",
                "L3:gradmag:s1.0:c0"]
    clf = PixelClassifier(features, cost_tradeoff=0.0, n_estimators=10, random_state=0,
                          distill_weight=0)      # plain boosting: no teacher to steer it
    clf.fit(image, labels)
    used = set(clf.features_used_)
    assert {"L1up:gauss:s1.0:c0", "L3up:intensity:c0"} <= used
    assert {"L1:gauss:s1.0:c0", "L2:gauss:s1.0:c0", "L3:gradmag:s1.0:c0"} <= used
    test = rng.random((61, 75)).astype(np.float32)
    np.testing.assert_allclose(clf.predict_proba(test),
                               clf.predict_proba(test, strategy="per_pixel"), atol=1e-6)
    assert np.array_equal(clf.predict(test), clf.predict(test, strategy="per_pixel"))
