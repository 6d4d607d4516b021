"""Volumes: the 3D pyramid's block rule, sigma per axis in physical units, 3D features,
exact multi-scale prediction in 3D, and the pixel classifier on volumes."""


import numpy as np
import pytest
from scipy import ndimage as ndi

from msclassify.cegb import train
from msclassify.features import FeatureBank, PyramidVolume, VoxelGrid, smooth_volume
from msclassify.features import _volume as volume_module
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


def test_volume_features_are_computed_a_group_at_a_time_holding_only_its_intermediates(
        monkeypatch):
    # The bank asks the pyramid for each feature once, a group (level, channel, sigma) after
    # another; while a feature is computed, the pyramid holds no smoothed image or eigenvalue
    # pair of a group already done (only the current sigma's, and the DoG's second Gaussian).
    # The features equal those computed with every intermediate kept (a pyramid passed in).
    volume = np.random.default_rng(3).random((5, 12, 13)).astype(np.float32)
    bank = FeatureBank("default", spacing=(2, 1, 1))
    asked = []
    feature = PyramidVolume.feature

    def recording(self, spec):
        asked.append((spec, [key for key in self._cache if key[0] != "level"]))
        return feature(self, spec)
    monkeypatch.setattr(PyramidVolume, "feature", recording)
    levels = bank.compute_levels(volume, n_threads=1)
    monkeypatch.undo()
    assert sorted(spec.id for spec, _ in asked) == sorted(bank.ids)
    groups = [(s.level, s.source_level, s.channel, s.sigma) for s, _ in asked]
    assert len(set(groups)) == sum(1 for a, b in zip([None] + groups, groups) if a != b)
    for spec, held in asked:
        allowed = {spec.sigma, None if spec.sigma is None else 0.66 * spec.sigma}
        assert all(key[1:3] == (spec.source_level, spec.channel) and key[3] in allowed
                   for key in held), (spec.id, held)
    kept = bank.compute_levels(PyramidVolume(volume, bank.grid), n_threads=1)
    two_threads = bank.compute_levels(volume, n_threads=2)
    for array, same, also in zip(levels.arrays, kept.arrays, two_threads.arrays):
        assert np.array_equal(array, same) and np.array_equal(array, also)
    zs, ys, xs = np.nonzero(np.ones(volume.shape, bool))
    assert np.array_equal(bank.gather(volume, ys, xs, zs=zs), levels.gather(zs, ys, xs))


@pytest.mark.parametrize("spacing", [(1, 1, 1), (3, 1, 1), (50, 4, 4)])
def test_volume_eigenvalues_slab_by_slab_equal_the_whole_volumes(monkeypatch, spacing):
    # The Hessian's and the structure tensor's eigenvalues are computed a slab of slices at a
    # time, holding one slab's six entries (the structure tensor's from the outer Gaussian's
    # z reach around the slab): bit for bit those of the whole volume at once, for slabs of
    # one slice, of two (which the volume's 13 slices do not divide) and of the volume.
    volume = np.random.default_rng(5).random((13, 20, 19)).astype(np.float32)
    bank = FeatureBank(specs=[f"L{level}:{name}:s{sigma}:c0" for level in (0, 1)
                              for sigma in (0.7, 3.5) for name in (
                                  "hessian_max", "hessian_min", "structure_max",
                                  "structure_min")], spacing=spacing)
    monkeypatch.setattr(volume_module, "_SLAB_VOXELS", 1 << 40)
    whole = bank.compute_levels(volume, n_threads=1)
    for slab_voxels in (1, 2 * 20 * 19):
        monkeypatch.setattr(volume_module, "_SLAB_VOXELS", slab_voxels)
        slabs = bank.compute_levels(volume, n_threads=1)
        assert all(np.array_equal(a, b) for a, b in zip(whole.arrays, slabs.arrays))


@pytest.mark.parametrize("spacing", [(1, 1, 1), (3, 1, 1)])
def test_upsampled_volume_feature_is_trilinear(spacing):
    """A level's block means of a linear ramp sit at the block centres, so trilinear
    interpolation gives the ramp back away from the border; cost and share of a level-0
    feature plus the interpolation (`VoxelGrid.upsample_cost`)."""
    zz, yy, xx = np.indices((16, 32, 32)).astype(np.float32)
    ramp = (zz + 2 * yy + 3 * xx) / 200
    grid = VoxelGrid(spacing)
    pyramid = PyramidVolume(ramp, grid)
    full = pyramid.feature("L0:intensity:c0")
    bz, by, bx = grid.blocks[2]
    up = pyramid.feature("L2up:intensity:c0")
    assert up.shape == full.shape == (16, 32, 32)
    inner = (slice(bz // 2, 16 - bz // 2), slice(2, 30), slice(2, 30))
    np.testing.assert_allclose(up[inner], full[inner], atol=1e-5)
    assert not np.allclose(pyramid.feature("L2:intensity:c0"), full[::bz, ::4, ::4])
    spec = FeatureBank(specs=["L2up:intensity:c0"], spacing=spacing).specs[0]
    assert spec.share == 1 and spec.block == (1, 1, 1)
    assert spec.batch_cost == pytest.approx(grid.batch_cost(2, "intensity")
                                            + grid.upsample_cost(2))
    # 2x2x2 blocks of level 1: x pass on a quarter, y pass on a half, z pass on all, store
    assert VoxelGrid((1, 1, 1)).upsample_cost(1) == 2 / 4 + 2 / 2 + 2 + 1


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


@pytest.mark.parametrize("shape, spacing, objective, n_per_level", [
    ((11, 13, 19), (1, 1, 1), "binary", (2, 2, 2, 2)),       # 2x2x2 blocks, nothing divides 8
    ((5, 21, 17), (50, 4, 4), "multiclass", (2, 2, 2, 2)),   # 1x2x2 blocks (EM-like)
    ((9, 16, 10), (2, 1, 1), "regression", (2, 2, 2, 2)),    # 1x2x2 then 2x2x2
    ((6, 9, 5), (1, 1, 1), "binary", (3, 3, 3, 3)),          # more features than level columns
])
def test_3d_multiscale_equals_per_voxel_prediction_and_cost(shape, spacing, objective,
                                                            n_per_level):
    rng = np.random.default_rng(sum(shape))
    grid = VoxelGrid(spacing)
    arrays, levels, slots, X = _volume_levels(rng, shape, grid.blocks, n_per_level)
    signal = X[:, 0] + X[:, -1] + 0.5 * X[:, 3] + 0.5 * X[:, -2]
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


# -- the pixel classifier on volumes ----------------------------------------------------------
def _ball_volume(seed=0, shape=(13, 45, 51)):
    rng = np.random.default_rng(seed)
    zz, yy, xx = np.mgrid[:shape[0], :shape[1], :shape[2]]
    ball = ((zz - 6) * 3) ** 2 + (yy - 22) ** 2 + (xx - 25) ** 2 < 15 ** 2
    volume = (rng.normal(0.3, 0.08, shape) + 0.4 * ball).astype(np.float32)
    labels = np.zeros(shape, np.uint8)
    labels[6, 2:6, 2:40] = 1
    labels[6, 20:24, 20:30] = 2
    labels[2, 40:44, 5:45] = 1
    return volume, labels, ball


@pytest.fixture(scope="module")
def volume_model():
    from msclassify import PixelClassifier
    volume, labels, ball = _ball_volume()
    clf = PixelClassifier(n_estimators=12, random_state=0, spacing=(3, 1, 1)).fit(volume, labels)
    return clf, volume, ball


def test_volume_model_segments_and_multiscale_equals_per_voxel(volume_model):
    clf, volume, ball = volume_model
    assert clf.bank_.grid.spacing == (3.0, 1.0, 1.0)
    proba = clf.predict_proba(volume)
    assert proba.shape == volume.shape + (2,)
    np.testing.assert_allclose(proba, clf.predict_proba(volume, strategy="per_pixel"), atol=1e-6)
    labels = clf.predict(volume)
    assert ((labels == 2) == ball).mean() > 0.98
    cost = clf.prediction_cost(volume)
    assert cost.evaluation == pytest.approx(clf.cost_map(volume).astype(np.float64).sum(),
                                            rel=1e-5)
    assert cost.features == pytest.approx(clf.feature_cost_per_pixel_ * volume.size)


def test_volume_model_file_round_trip(volume_model, tmp_path):
    from msclassify import load_model
    clf, volume, _ = volume_model
    clf.save(tmp_path / "v.msc")
    loaded = load_model(tmp_path / "v.msc")
    assert loaded.bank_ == clf.bank_ and loaded.bank_.grid.blocks == clf.bank_.grid.blocks
    np.testing.assert_array_equal(loaded.predict_proba(volume), clf.predict_proba(volume))


def test_volume_model_file_with_wrong_spacing_is_refused(volume_model, tmp_path):
    import json
    import zipfile
    from msclassify import load_model
    from msclassify.modelfile import ModelFileError
    clf, _, _ = volume_model
    clf.save(tmp_path / "v.msc")
    with zipfile.ZipFile(tmp_path / "v.msc") as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    for field, value, message in (("params", [1, 1, 1], "disagrees with its feature bank"),
                                  ("grid", [1, 1, 1], "do not follow from the spacing"),
                                  ("params", [0, 1, 1], "invalid voxel spacing")):
        meta = json.loads(members["model.json"])
        if field == "params":
            meta["meta"]["params"]["spacing"] = value
        else:
            meta["meta"]["bank"]["grid"]["spacing"] = value
        with zipfile.ZipFile(tmp_path / "bad.msc", "w") as zf:
            for name, data in members.items():
                zf.writestr(name, json.dumps(meta) if name == "model.json" else data)
        with pytest.raises(ModelFileError, match=message):
            load_model(tmp_path / "bad.msc")


def test_time_series_of_volumes_and_channels():
    from msclassify import PixelClassifier
    volume, labels, ball = _ball_volume(shape=(13, 40, 40))
    series = np.stack([volume, volume[:, ::-1]])
    series_labels = np.stack([labels, np.zeros_like(labels)])
    clf = PixelClassifier(n_estimators=5, random_state=0, spacing=(3, 1, 1))
    clf.fit(series, series_labels)
    assert clf.predict(series[1]).shape == volume.shape
    two_channels = np.stack([volume, 1 - volume], axis=-1)
    clf.fit(two_channels, labels)
    assert clf.n_channels_ == 2 and clf.predict(two_channels).shape == volume.shape


@pytest.mark.parametrize("case, message", [
    ("2d model on a volume", "if this is a volume, this 2D model predicts it slice by slice"),
    ("volume model on a frame", "this is a volume model"),
    ("labels of another shape", "do not match; labels must be (Z, Y, X)"),
    ("no scribbles", "no labelled pixels on any slice"),
    ("frame labels for a volume model", "labels must be (Z, Y, X) for one volume"),
])
def test_bad_volume_input_is_one_line_error(volume_model, case, message):
    from msclassify import PixelClassifier
    clf, volume, _ = volume_model
    _, labels, _ = _ball_volume()
    with pytest.raises(ValueError) as info:
        if case == "2d model on a volume":
            PixelClassifier(n_estimators=2).fit(volume[6], labels[6]).predict(volume)
        elif case == "volume model on a frame":
            clf.predict(volume[0])
        elif case == "labels of another shape":
            PixelClassifier(spacing=(1, 1, 1)).fit(volume, labels[:, :-1])
        elif case == "no scribbles":
            PixelClassifier(spacing=(1, 1, 1)).fit(volume, np.zeros_like(labels))
        else:
            PixelClassifier(spacing=(1, 1, 1)).fit(volume, labels[0].reshape(1, -1))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_per_slice_mode_is_the_2d_model_on_a_stack():
    from msclassify import PixelClassifier
    volume, labels, _ = _ball_volume()
    per_slice = PixelClassifier(n_estimators=5, random_state=0).fit(volume, labels)
    assert per_slice.bank_.grid is None
    frames = PixelClassifier(n_estimators=5, random_state=0).fit(list(volume), list(labels))
    np.testing.assert_array_equal(per_slice.predict_proba(volume[6]),
                                  frames.predict_proba(volume[6]))


# -- the command line on volumes --------------------------------------------------------------
@pytest.fixture(scope="module")
def volume_files(tmp_path_factory):
    import tifffile
    from msclassify.metrics import label_instances
    folder = tmp_path_factory.mktemp("volumes")
    volume, labels, ball = _ball_volume()
    volume = (volume * 255).clip(0, 255).astype(np.uint8)
    tifffile.imwrite(folder / "vol.tif", volume, imagej=True, resolution=(1, 1),
                     metadata={"axes": "ZYX", "spacing": 3.0})
    tifffile.imwrite(folder / "plain.tif", volume)
    tifffile.imwrite(folder / "zero.tif", volume, imagej=True, resolution=(1, 1),
                     metadata={"axes": "ZYX", "spacing": 0.0})     # a file's wrong metadata
    tifffile.imwrite(folder / "lab.tif", labels)
    tifffile.imwrite(folder / "gt.tif", label_instances(ball, volume=True).astype(np.uint16))
    return folder


def _cli(capsys, *args):
    from msclassify.cli import main
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_trains_predicts_and_evaluates_a_volume(volume_files, tmp_path, capsys):
    f = volume_files
    code, out, err = _cli(capsys, "train", f / "vol.tif", "--labels", f / "lab.tif", "--axes",
                          "zyx", "-o", tmp_path / "m.msc", "--n-estimators", "8")
    assert code == 0, err
    assert "voxel spacing (z, y, x): 3 x 1 x 1 (recorded in" in out
    assert "training on 1 labelled volume(s) (grey)" in out and "frame(s)" not in out
    code, out, _ = _cli(capsys, "info", tmp_path / "m.msc", "--image", f / "vol.tif", "--axes",
                        "zyx")
    assert "geometry:   volumes, 3D, voxel spacing (z, y, x) 3 x 1 x 1; pyramid blocks 1x2x2, " \
           "1x4x4, 2x8x8" in out
    assert "cost on" in out and "(first volume, 13x45x51)" in out and "per voxel" in out
    code, out, err = _cli(capsys, "predict", tmp_path / "m.msc", f / "vol.tif", "-o",
                          tmp_path / "out", "--axes", "zyx")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["msclassify_volumes.json",
                                                                   "volume_0000.tif"]
    code, out, _ = _cli(capsys, "predict", tmp_path / "m.msc", f / "vol.tif", "-o",
                        tmp_path / "out", "--axes", "zyx")
    assert code == 0 and "all 1 volumes are already in" in out and "nothing to do" in out
    code, out, _ = _cli(capsys, "evaluate", tmp_path / "out", f / "gt.tif", "--volumes")
    assert code == 0
    assert float(out.split("SEG ")[-1].split()[0]) > 0.95


def test_cli_ctrl_c_between_volumes_keeps_the_finished_one_and_resumes(volume_files, tmp_path,
                                                                       capsys, monkeypatch):
    import tifffile

    from msclassify import PixelClassifier, load_model
    f = volume_files
    volume = tifffile.imread(f / "vol.tif")
    tifffile.imwrite(tmp_path / "two.tif", np.stack([volume, volume[:, ::-1]]))
    assert _cli(capsys, "train", f / "vol.tif", "--labels", f / "lab.tif", "--axes", "zyx",
                "-o", tmp_path / "m.msc", "--n-estimators", "4")[0] == 0
    predict, calls = PixelClassifier.predict, []

    def interrupted_second(self, image):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return predict(self, image)

    monkeypatch.setattr(PixelClassifier, "predict", interrupted_second)
    args = ("predict", tmp_path / "m.msc", tmp_path / "two.tif", "-o", tmp_path / "out",
            "--axes", "tzyx", "--spacing", "3", "1", "1")
    code, _, err = _cli(capsys, *args)
    assert code == 130 and "1 of 2 volumes are complete" in err and "resume" in err
    assert [p.name for p in sorted((tmp_path / "out").glob("volume_*"))] == ["volume_0000.tif"]
    monkeypatch.setattr(PixelClassifier, "predict", predict)
    code, out, err = _cli(capsys, *args)
    assert code == 0 and "resuming: 1 of 2 volumes" in out and "wrote 1 label volume(s)" in out
    assert np.array_equal(tifffile.imread(tmp_path / "out" / "volume_0001.tif"),
                          predict(load_model(tmp_path / "m.msc"), volume[:, ::-1]))


@pytest.mark.parametrize("args, message", [
    (["train", "plain.tif", "--labels", "lab.tif", "--axes", "zyx", "-o", "{tmp}/x.msc"],
     "records no voxel spacing; pass --spacing Z Y X"),
    (["train", "zero.tif", "--labels", "lab.tif", "--axes", "zyx", "-o", "{tmp}/x.msc"],
     "the voxel spacing zero.tif records must be three positive finite voxel sizes"),
    (["train", "vol.tif", "--labels", "lab.tif", "--axes", "zyx", "--spacing", "0", "1", "1",
      "-o", "{tmp}/x.msc"], "--spacing must be three positive finite voxel sizes"),
    (["train", "vol.tif", "--labels", "lab.tif", "--axes", "zyx", "--spacing", "-1", "1", "1",
      "-o", "{tmp}/x.msc"], "--spacing must be three positive finite voxel sizes"),
    (["train", "vol.tif", "--labels", "lab.tif", "--axes", "zyx", "--spacing", "nan", "1", "1",
      "-o", "{tmp}/x.msc"], "--spacing must be three positive finite voxel sizes"),
    (["train", "vol.tif", "--labels", "lab.tif", "--spacing", "1", "1", "1", "-o",
      "{tmp}/x.msc"], "--spacing and --per-slice are for volumes"),
    (["train", "vol.tif", "--labels", "gt.tif", "--axes", "tzyx", "-o", "{tmp}/x.msc"],
     "name each of its 3 axes"),
])
def test_cli_bad_volume_input_writes_nothing(volume_files, tmp_path, capsys, monkeypatch, args,
                                            message):
    monkeypatch.chdir(volume_files)
    code, _, err = _cli(capsys, *[a.format(tmp=tmp_path) for a in args])
    assert code == 1 and message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_cli_refuses_models_of_the_other_kind(volume_files, tmp_path, capsys):
    f = volume_files
    assert _cli(capsys, "train", f / "vol.tif", "--labels", f / "lab.tif", "--axes", "zyx",
                "--per-slice", "-o", tmp_path / "flat.msc", "--n-estimators", "3")[0] == 0
    assert _cli(capsys, "train", f / "vol.tif", "--labels", f / "lab.tif", "--axes", "zyx",
                "-o", tmp_path / "deep.msc", "--n-estimators", "3")[0] == 0
    for model, extra, message in (
            ("flat.msc", ["--axes", "zyx"], "is a 2D model; predict the volume slice by slice"),
            ("deep.msc", [], "is a volume model"),
            ("deep.msc", ["--axes", "zyx", "--spacing", "1", "1", "1"],
             "was trained on (3.0, 1.0, 1.0)")):
        code, _, err = _cli(capsys, "predict", tmp_path / model, f / "vol.tif", "-o",
                            tmp_path / "out", *extra)
        assert code == 1 and message in err
        assert not (tmp_path / "out").exists()
    code, _, err = _cli(capsys, "predict", tmp_path / "flat.msc", f / "vol.tif", "-o",
                        tmp_path / "out", "--axes", "zyx", "--per-slice")
    assert code == 0, err


def test_cli_refuses_a_spacing_a_file_records_wrongly(volume_files, tmp_path, capsys):
    """A file recording a voxel size of 0 is told, not read as "no spacing" (then predict
    took the model's spacing in silence); --spacing still overrides it."""
    f = volume_files
    assert _cli(capsys, "train", f / "vol.tif", "--labels", f / "lab.tif", "--axes", "zyx",
                "-o", tmp_path / "m.msc", "--n-estimators", "3")[0] == 0
    code, _, err = _cli(capsys, "predict", tmp_path / "m.msc", f / "zero.tif", "-o",
                        tmp_path / "out", "--axes", "zyx")
    assert code == 1 and "zero.tif records must be three positive" in err
    assert "pass --spacing Z Y X" in err and not (tmp_path / "out").exists()
    code, _, err = _cli(capsys, "predict", tmp_path / "m.msc", f / "zero.tif", "-o",
                        tmp_path / "out", "--axes", "zyx", "--spacing", "3", "1", "1")
    assert code == 0, err


def test_cli_never_writes_volumes_over_their_input(volume_files, tmp_path, capsys):
    import shutil
    f = volume_files
    assert _cli(capsys, "train", f / "vol.tif", "--labels", f / "lab.tif", "--axes", "zyx",
                "-o", tmp_path / "m.msc", "--n-estimators", "3")[0] == 0
    out = tmp_path / "out"
    assert _cli(capsys, "predict", tmp_path / "m.msc", f / "vol.tif", "-o", out, "--axes",
                "zyx")[0] == 0
    shutil.copy(f / "vol.tif", out / "volume_0000.tif")      # the next input lies in -o
    before = (out / "volume_0000.tif").read_bytes()
    code, _, err = _cli(capsys, "predict", tmp_path / "m.msc", out / "volume_0000.tif", "-o",
                        out, "--axes", "zyx", "--overwrite")
    assert code == 1 and "would destroy it" in err and "Traceback" not in err
    assert (out / "volume_0000.tif").read_bytes() == before
    code, _, err = _cli(capsys, "predict", tmp_path / "m.msc", f / "vol.tif", "--table",
                        tmp_path / "t.csv", "--axes", "zyx")
    assert code == 1 and "--table" in err and not (tmp_path / "t.csv").exists()


def test_reading_a_volume_from_a_fifo_or_a_missing_file_is_refused_at_once(tmp_path):
    import os
    from msclassify.io import read_volume
    os.mkfifo(tmp_path / "pipe.tif")
    for path, problem in ((tmp_path / "pipe.tif", "not a regular file"),
                          (tmp_path / "none.tif", "does not exist")):
        with pytest.raises(ValueError, match=f"TIFF volume .* {problem}"):
            read_volume(path, "zyx")


def test_cli_says_when_a_z_stack_is_read_as_frames(volume_files, tmp_path, capsys):
    f = volume_files
    code, out, err = _cli(capsys, "train", f / "vol.tif", "--labels", f / "lab.tif", "-o",
                          tmp_path / "m.msc", "--n-estimators", "2", "--distill-weight", "0")
    assert code == 0, err
    assert "records the axes ZYX; without --axes it is read as frames" in out


def test_read_volume_spacing_and_axes(tmp_path):
    import tifffile
    from msclassify.io import read_volume, write_volume
    data = np.arange(2 * 3 * 4 * 5, dtype=np.uint8).reshape(2, 3, 4, 5)      # (Z, C, Y, X)
    tifffile.imwrite(tmp_path / "o.ome.tif", data, metadata={
        "axes": "ZCYX", "PhysicalSizeX": 4, "PhysicalSizeY": 4, "PhysicalSizeZ": 0.05,
        "PhysicalSizeXUnit": "nm", "PhysicalSizeYUnit": "nm", "PhysicalSizeZUnit": "µm"})
    volume = read_volume(tmp_path / "o.ome.tif", "zcyx")
    assert volume.spacing == pytest.approx((50.0, 4.0, 4.0))       # in x's unit (nm)
    assert volume.data.shape == (1, 2, 4, 5, 3)                      # (T, Z, Y, X, C)
    np.testing.assert_array_equal(volume.data[0, 1, :, :, 2], data[1, 2])
    write_volume(tmp_path / "ij.tif", data[:, 0], (3.0, 0.5, 0.5))
    imagej = read_volume(tmp_path / "ij.tif", "zyx")
    assert imagej.spacing == pytest.approx((3.0, 0.5, 0.5)) and imagej.recorded_axes == "ZYX"
    tifffile.imwrite(tmp_path / "plain.tif", data[:, 0])
    assert read_volume(tmp_path / "plain.tif", "zyx").spacing is None
    with pytest.raises(ValueError, match="name each of its 3 axes"):
        read_volume(tmp_path / "plain.tif", "tzyx")
