"""Volumes: the 3D pyramid's block rule, sigma per axis in physical units, 3D features,
exact multi-scale prediction in 3D, and the pixel classifier on volumes."""

import math

import numpy as np
import pytest
from scipy import ndimage as ndi

from msclassify.cegb import train
from msclassify.features import FeatureBank, PyramidVolume, VoxelGrid, smooth_volume
from msclassify.pixel import predict_multiscale


# -- the block rule ---------------------------------------------------------------------------
@pytest.mark.parametrize("spacing, blocks", [
    ((1, 1, 1), [(2, 2, 2), (4, 4, 4), (8, 8, 8)]),            # isotropic: 2x2x2 throughout
    ((50, 4, 4), [(1, 2, 2), (1, 4, 4), (1, 8, 8)]),           # EM sections: never pool z
    ((2, 1, 1), [(1, 2, 2), (2, 4, 4), (4, 8, 8)]),            # 1x2x2 once, then isotropic
    ((1.4, 1, 1), [(2, 2, 2), (4, 4, 4), (8, 8, 8)]),          # 1.4 <= sqrt(2): pool
    ((1.5, 1, 1), [(1, 2, 2), (2, 4, 4), (4, 8, 8)]),          # 1.5 > sqrt(2); then 0.75: pool
    ((5, 1, 1), [(1, 2, 2), (1, 4, 4), (2, 8, 8)]),            # 5, 2.5, 1.25: pool at level 3
    ((0.5, 1, 1), [(2, 2, 2), (4, 4, 4), (8, 8, 8)]),          # z finer than x: always pool
])
def test_block_rule(spacing, blocks):
    grid = VoxelGrid(spacing)
    assert list(grid.blocks[1:]) == blocks
    assert grid.shares == tuple(int(np.prod(b)) for b in grid.blocks)


def test_isotropic_shares_are_8_64_512_and_nest():
    bank = FeatureBank("fast", spacing=(1, 1, 1))
    assert sorted(set(bank.shares().astype(int))) == [1, 8, 64, 512]


@pytest.mark.parametrize("spacing", [(0, 1, 1), (1, -2, 1), (float("nan"), 1, 1), (1, 1),
                                     "1,1,1", (1, 1, float("inf"))])
def test_bad_spacing_is_one_line_error(spacing):
    with pytest.raises(ValueError, match="three positive finite voxel sizes") as info:
        FeatureBank("fast", spacing=spacing)
    assert "\n" not in str(info.value)


def test_block_mean_2x2x2_by_hand():
    volume = np.arange(8, dtype=np.float32).reshape(2, 2, 2)     # one 2x2x2 block
    pyramid = PyramidVolume(volume, (1, 1, 1))
    assert pyramid.padded_shape == (8, 8, 8)                     # reflected to the 8x8x8 grid
    assert pyramid.level(1)[0, 0, 0] == pytest.approx(3.5)      # mean of 0..7
    anisotropic = PyramidVolume(volume, (50, 4, 4))
    assert anisotropic.padded_shape == (2, 8, 8)                 # z is never pooled: no z pad
    np.testing.assert_allclose(anisotropic.level(1)[:, 0, 0], [1.5, 5.5])   # 1x2x2 blocks


def test_block_decision_2x2x2_by_hand():
    # One level-1 feature (2x2x2 block means) and one voxel feature; a 2x2x4 volume holds
    # two level-1 blocks. The root splits on the block mean: the dark block is decided
    # once for its 8 voxels, the bright block descends to its voxels.
    volume = np.zeros((2, 2, 4), np.float32)
    volume[:, :, 2:] = [[[0.6, 1.0], [0.6, 1.0]], [[0.6, 1.0], [0.6, 1.0]]]
    bank = FeatureBank(specs=["L0:intensity:c0", "L1:intensity:c0"], spacing=(1, 1, 1))
    levels = bank.compute_levels(volume)
    assert levels.arrays[1][0, 0, :2, 0].tolist() == pytest.approx([0.0, 0.8])
    tree = {"feature": np.array([1, -1, 0, -1, -1], np.int32),
            "threshold": np.array([0.5, np.nan, 0.8, np.nan, np.nan]),
            "default_left": np.zeros(5, bool), "left": np.array([1, -1, 3, -1, -1], np.int32),
            "right": np.array([2, -1, 4, -1, -1], np.int32),
            "value": np.array([0.0, 1.0, 0.0, 2.0, 3.0]), "count": np.ones(5),
            "share": np.array([8.0, 8.0, 1.0, 1.0, 1.0]), "gain": np.zeros(5)}
    from msclassify.cegb import Booster
    booster = Booster([tree], [0.0], 2, "regression", split_cost=1.0,
                      feature_share=bank.shares())
    result = predict_multiscale(booster, levels.arrays, levels.level, levels.slot, (2, 2, 4),
                                blocks=bank.grid.blocks, cost_map=True)
    expected = np.where(volume == 0, 1.0, np.where(volume <= 0.8, 2.0, 3.0))
    np.testing.assert_array_equal(result.values[..., 0], expected)
    # root once per block (2) + the bright block's 8 voxels once each
    assert result.n_evaluations == 10 and result.pixel_evaluations == 10
    np.testing.assert_allclose(result.cost_map[:, :, :2], 1 / 8)
    np.testing.assert_allclose(result.cost_map[:, :, 2:], 1 / 8 + 1)


# -- sigma per axis in physical units ---------------------------------------------------------
def test_sigma_per_axis_follows_spacing():
    grid = VoxelGrid((50, 4, 4))
    assert grid.sigmas(0, 2.5) == pytest.approx((0.2, 2.5, 2.5))
    assert grid.sigmas(3, 2.5) == pytest.approx((2.5 * 32 / 50, 2.5, 2.5))  # 1x8x8 blocks
    iso = VoxelGrid((2, 1, 1))   # level 1: 1x2x2 blocks of 2 x 2 x 2 units: isotropic
    assert iso.sigmas(1, 1.5) == pytest.approx((1.5, 1.5, 1.5))


def test_anisotropic_gaussian_equals_scipy_with_per_axis_sigma():
    rng = np.random.default_rng(0)
    volume = rng.random((9, 20, 24)).astype(np.float32)
    grid = VoxelGrid((3, 1, 1))
    sigmas = grid.sigmas(0, 1.6)
    assert sigmas == pytest.approx((1.6 / 3, 1.6, 1.6))
    expected = ndi.gaussian_filter(volume.astype(np.float64), sigmas, mode="reflect", truncate=3)
    np.testing.assert_allclose(smooth_volume(volume, sigmas), expected, atol=2e-6)
    # y and x of different sizes go through scipy too
    np.testing.assert_allclose(smooth_volume(volume, (0.5, 1.0, 2.0)),
                               ndi.gaussian_filter(volume.astype(np.float64), (0.5, 1.0, 2.0),
                                                   mode="reflect", truncate=3), atol=2e-6)


def test_thin_sections_are_not_smoothed_across():
    # 50 nm sections of 4 nm pixels: a sigma of 1.6 pixels (6.4 nm) is 0.13 of a section,
    # radius 0: every section is smoothed on its own, as in 2D.
    rng = np.random.default_rng(1)
    volume = rng.random((4, 16, 16)).astype(np.float32)
    pyramid = PyramidVolume(volume, (50, 4, 4))
    smoothed = pyramid.feature("L0:gauss:s1.6:c0")
    for z in range(4):
        np.testing.assert_allclose(smoothed[z], ndi.gaussian_filter(
            volume[z].astype(np.float64), 1.6, mode="reflect", truncate=3), atol=2e-6)


def test_gradient_is_per_physical_unit():
    # A ramp of 1 per z plane: with 2 units per plane (x pixels of 1 unit) the gradient
    # magnitude is 0.5 per x pixel inside the volume; with isotropic voxels it is 1.
    volume = np.broadcast_to(np.arange(8, dtype=np.float32)[:, None, None] / 8,
                             (8, 8, 8)).copy()
    for spacing, slope in (((2, 1, 1), 0.5), ((1, 1, 1), 1.0)):
        pyramid = PyramidVolume(volume, spacing, intensity_scale=8.0)
        grad = pyramid.feature("L0:gradmag:s0.3:c0")   # radius 1 smoothing keeps a linear ramp
        np.testing.assert_allclose(grad[2:6, 2:6, 2:6], slope, rtol=1e-5)


def test_hessian_eigenvalues_match_numpy():
    rng = np.random.default_rng(2)
    volume = rng.random((6, 7, 8)).astype(np.float32)
    spacing = (1.5, 1, 1)
    pyramid = PyramidVolume(volume, spacing)
    larger = pyramid.feature("L0:hessian_max:s1.0:c0")
    smaller = pyramid.feature("L0:hessian_min:s1.0:c0")
    s = pyramid.smoothed(0, 0, 1.0).astype(np.float64)
    f = VoxelGrid(spacing).axis_factors(0)
    p = np.pad(s, 1, mode="edge")
    at = lambda dz, dy, dx: p[1 + dz:p.shape[0] - 1 + dz, 1 + dy:p.shape[1] - 1 + dy,
                              1 + dx:p.shape[2] - 1 + dx]
    steps = [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
    H = np.empty(s.shape + (3, 3))
    for a in range(3):
        for b in range(3):
            if a == b:
                H[..., a, a] = f[a] ** 2 * (at(*steps[a]) + at(*np.negative(steps[a])) - 2 * s)
            else:
                ua, ub = np.array(steps[a]), np.array(steps[b])
                H[..., a, b] = 0.25 * f[a] * f[b] * ((at(*(ua + ub)) - at(*(ua - ub)))
                                                     - (at(*(ub - ua)) - at(*(-ua - ub))))
    eig = np.linalg.eigvalsh(H)
    np.testing.assert_allclose(larger, eig[..., -1], atol=2e-5)
    np.testing.assert_allclose(smaller, eig[..., 0], atol=2e-5)


def test_3d_cost_model_by_hand():
    grid = VoxelGrid((1, 1, 1))
    # level 1 gauss sigma 1: radius 3 on every axis: 3 x 7 taps + 1 store, / 8, + 1 (level 0 read)
    assert grid.batch_cost(1, "gauss", 1.0) == pytest.approx(22 / 8 + 1)
    em = VoxelGrid((50, 4, 4))
    # level 0 gauss sigma 1.6 on 50 nm sections: z radius 0, y and x radius 5: 2 x 11 + 1
    assert em.batch_cost(0, "gauss", 1.6) == pytest.approx(23.0)
    assert em.batch_cost(2, "intensity") == pytest.approx(1 / 16 + 1 + 1 / 4)


# -- exact multi-scale prediction in 3D -------------------------------------------------------
def _volume_levels(rng, shape, blocks, n_per_level):
    padded = tuple(-(-n // m) * m for n, m in zip(shape, blocks[-1]))
    arrays = [rng.normal(size=tuple(p // b for p, b in zip(padded, block)) + (n,))
              .astype(np.float32) for block, n in zip(blocks, n_per_level)]
    levels = np.repeat(np.arange(4), n_per_level)
    slots = np.concatenate([np.arange(n) for n in n_per_level]).astype(np.int64)
    zs, ys, xs = (a.ravel() for a in np.mgrid[:shape[0], :shape[1], :shape[2]])
    X = np.stack([arrays[L][zs // blocks[L][0], ys // blocks[L][1], xs // blocks[L][2], s]
                  for L, s in zip(levels, slots)], axis=1)
    return arrays, levels, slots, X


@pytest.mark.parametrize("shape, spacing, objective", [
    ((11, 13, 19), (1, 1, 1), "binary"),          # 2x2x2 blocks, nothing divides 8
    ((5, 21, 17), (50, 4, 4), "multiclass"),      # 1x2x2 blocks (EM-like)
    ((9, 16, 10), (2, 1, 1), "regression"),       # 1x2x2 then 2x2x2
])
def test_3d_multiscale_equals_per_voxel_prediction_and_cost(shape, spacing, objective):
    rng = np.random.default_rng(sum(shape))
    grid = VoxelGrid(spacing)
    arrays, levels, slots, X = _volume_levels(rng, shape, grid.blocks, (2, 2, 2, 2))
    signal = X[:, 0] + X[:, -1] + 0.5 * X[:, 3]
    y = {"binary": (signal > 0).astype(float), "regression": signal,
         "multiclass": np.digitize(signal, [-0.7, 0.7]).astype(float)}[objective]
    shares = np.array(grid.shares, float)[levels]
    booster = train(X, y, objective, dict(n_estimators=10, max_leaves=8, min_samples_leaf=3,
                                          split_cost=1.5, cost_tradeoff=0.01,
                                          feature_share=shares, random_state=0),
                    n_classes=3 if objective == "multiclass" else None)
    assert set(levels[booster.features_used()]) != {0}
    result = predict_multiscale(booster, arrays, levels, slots, shape, cost_map=True,
                                blocks=grid.blocks)
    expected = booster.predict_raw(X).reshape(shape + (-1,))
    np.testing.assert_allclose(result.values, expected, rtol=0, atol=1e-12)
    reported = booster.prediction_cost(X).evaluation
    np.testing.assert_allclose(result.cost_map.ravel(), reported, rtol=1e-12, atol=1e-12)
    assert result.pixel_evaluations * booster.split_cost == pytest.approx(reported.sum(),
                                                                         rel=1e-12)
    assert result.n_evaluations >= result.pixel_evaluations      # border blocks count whole
    if objective != "regression":
        classes = predict_multiscale(booster, arrays, levels, slots, shape, output="class",
                                     blocks=grid.blocks).values
        assert classes.shape == shape
        proba = predict_multiscale(booster, arrays, levels, slots, shape, output="proba",
                                   blocks=grid.blocks).values
        np.testing.assert_array_equal(np.argmax(proba, axis=-1), classes)


def test_volume_blocks_are_required_and_checked():
    rng = np.random.default_rng(0)
    grid = VoxelGrid((1, 1, 1))
    arrays, levels, slots, X = _volume_levels(rng, (8, 8, 8), grid.blocks, (1, 1, 1, 1))
    booster = train(X, (X[:, 0] > 0).astype(float), "binary",
                    dict(n_estimators=2, feature_share=np.array(grid.shares, float)[levels]))
    with pytest.raises(ValueError, match="needs the pyramid's blocks"):
        predict_multiscale(booster, arrays, levels, slots, (8, 8, 8))
    with pytest.raises(ValueError, match="nested"):
        predict_multiscale(booster, arrays, levels, slots, (8, 8, 8),
                           blocks=[(1, 1, 1), (2, 2, 2), (8, 4, 4), (8, 8, 8)])
