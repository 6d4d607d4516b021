"""Image feature pipeline: pyramid, filters, ids/costs, selection, validation.

Cases are tiny and hand-checkable; filters are compared with scipy/numpy
references on small random images.
"""

import json
import os
import sys
import threading

import numpy as np
import pytest
from scipy import ndimage as ndi

from msclassify.features import (FeatureBank, FeatureSpec, PyramidImage, as_frame_stack, make_id,
                                 modelled_batch_cost, parse_id)
from msclassify.features import _kernels


def random_image(shape, seed=0):
    return np.random.default_rng(seed).random(shape).astype(np.float32)


def feature_plane(image, feature_id, n_channels=1):
    """Level-grid plane of one feature, computed through the bank."""
    bank = FeatureBank(specs=[feature_id], n_channels=n_channels)
    return bank.compute_levels(image).arrays[FeatureSpec.from_id(feature_id).level][:, :, 0]


# ---------------------------------------------------------------- pyramid


def test_block_means_hand_checked():
    image = np.arange(16, dtype=np.float32).reshape(4, 4)
    pyramid = PyramidImage(image)
    assert pyramid.padded_shape == (8, 8)
    # symmetric padding mirrors the 4x4 image: rows 4..7 are rows 3..0
    assert np.array_equal(pyramid.level(0)[4, :4], image[3])
    assert np.array_equal(pyramid.level(0)[:4, 7], image[:, 0])
    level1 = pyramid.level(1)
    assert level1.shape == (4, 4)
    assert level1[0, 0] == (0 + 1 + 4 + 5) / 4
    assert level1[1, 1] == (10 + 11 + 14 + 15) / 4
    assert pyramid.level(2)[0, 0] == np.arange(16).mean()
    # the mirrored 8x8 image holds every value four times
    assert pyramid.level(3).shape == (1, 1) and pyramid.level(3)[0, 0] == 7.5


def test_block_means_match_numpy_on_odd_size():
    image = np.random.default_rng(1).integers(0, 9, (11, 21)).astype(np.float32)
    pyramid = PyramidImage(image)
    padded = np.pad(image, ((0, 5), (0, 3)), mode="symmetric")
    assert np.array_equal(pyramid.level(0), padded)
    for level in (1, 2, 3):
        b = 2 ** level
        expected = padded.reshape(16 // b, b, 24 // b, b).mean(axis=(1, 3))
        # integer inputs: every block mean is exact in float32
        assert np.array_equal(pyramid.level(level), expected)


def test_odd_size_crops_back_and_level_shapes():
    image = random_image((37, 53))
    bank = FeatureBank("fast")
    levels = bank.compute_levels(image)
    assert levels.padded_shape == (40, 56)
    assert [a.shape[:2] for a in levels.arrays] == [(40, 56), (20, 28), (10, 14), (5, 7)]
    assert all(a.flags.c_contiguous and a.dtype == np.float32 for a in levels.arrays)
    full = bank.compute_full(image)
    assert full.shape == (37, 53, len(bank))
    assert np.array_equal(full[:, :, bank.index("L0:intensity:c0")], image)


def test_level_arrays_are_what_compute_full_upsamples():
    image = random_image((37, 53, 3), seed=2)
    bank = FeatureBank("fast", n_channels=3)
    levels = bank.compute_levels(image)
    full = bank.compute_full(image)
    for j in range(len(bank)):
        level, slot = levels.level[j], levels.slot[j]
        b = 2 ** level
        upsampled = np.repeat(np.repeat(levels.arrays[level][:, :, slot], b, 0), b, 1)
        assert np.array_equal(full[:, :, j], upsampled[:37, :53])
        assert j in levels.columns[level]


def test_gather_equals_compute_full_at_same_pixels():
    image = random_image((37, 53), seed=3)
    bank = FeatureBank("pyramid")
    rng = np.random.default_rng(0)
    ys = np.r_[rng.integers(0, 37, 40), 0, 36, 36]
    xs = np.r_[rng.integers(0, 53, 40), 0, 52, 0]
    full = bank.compute_full(image)
    assert np.array_equal(bank.gather(image, ys, xs), full[ys, xs])
    subset = ["L3:structure_min:s1.6:c0", "L0:gauss:s0.7:c0", "L2:dog:s3.5:c0"]
    columns = [bank.index(i) for i in subset]
    assert np.array_equal(bank.gather(image, ys, xs, subset), full[ys, xs][:, columns])
    assert np.array_equal(bank.gather(image, ys, xs, columns), full[ys, xs][:, columns])


def test_threads_do_not_change_results():
    image = random_image((45, 70, 2), seed=9)
    bank = FeatureBank("pyramid", n_channels=2)
    serial = bank.compute_levels(image, n_threads=1)
    threaded = bank.compute_levels(image, n_threads=3)
    for a, b in zip(serial.arrays, threaded.arrays):
        assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="n_threads"):
        bank.compute_levels(image, n_threads=0)


def test_coarse_value_is_read_at_shifted_coordinates():
    image = random_image((16, 16), seed=4)
    bank = FeatureBank(specs=["L2:intensity:c0"])
    values = bank.gather(image, [5, 6, 9], [7, 4, 15])[:, 0]
    expected = [image[4:8, 4:8].mean(), image[4:8, 4:8].mean(), image[8:12, 12:16].mean()]
    np.testing.assert_allclose(values, expected, rtol=1e-6)


# ---------------------------------------------------------------- filters


def _symmetric(plane):
    return np.pad(plane.astype(np.float64), 1, mode="symmetric")


def _smoothed(image, sigma):
    return ndi.gaussian_filter(image.astype(np.float64), sigma, mode="reflect", truncate=3.0)


def test_gaussian_matches_scipy():
    image = random_image((23, 31), seed=5)
    for sigma in (0.3, 0.7, 1.6, 3.5, 10.0):   # 10: kernel wider than the image
        expected = _smoothed(image, sigma)
        got = _kernels.gaussian_smooth(image, sigma, 3.0)
        np.testing.assert_allclose(got, expected, atol=1e-6)


def test_derivative_filters_match_numpy_references():
    image = random_image((16, 24), seed=6)   # multiple of 8: no padding
    sigma = 1.6
    p = _symmetric(_smoothed(image, sigma))
    gx = (p[1:-1, 2:] - p[1:-1, :-2]) / 2
    gy = (p[2:, 1:-1] - p[:-2, 1:-1]) / 2
    hxx = p[1:-1, 2:] - 2 * p[1:-1, 1:-1] + p[1:-1, :-2]
    hyy = p[2:, 1:-1] - 2 * p[1:-1, 1:-1] + p[:-2, 1:-1]
    hxy = (p[2:, 2:] - p[2:, :-2] - p[:-2, 2:] + p[:-2, :-2]) / 4
    hessian = np.linalg.eigvalsh(np.stack([np.stack([hxx, hxy], -1), np.stack([hxy, hyy], -1)], -1))
    outer = [_smoothed(g, 0.5 * sigma) for g in (gx * gx, gx * gy, gy * gy)]
    structure = np.linalg.eigvalsh(np.stack([np.stack(outer[:2], -1),
                                             np.stack(outer[1:], -1)], -1))
    expected = {
        "gradmag": np.hypot(gx, gy),
        "log": ndi.laplace(_smoothed(image, sigma), mode="reflect"),
        "dog": _smoothed(image, sigma) - _smoothed(image, 0.66 * sigma),
        "hessian_max": hessian[..., 1], "hessian_min": hessian[..., 0],
        "structure_max": structure[..., 1], "structure_min": structure[..., 0],
    }
    for filter, reference in expected.items():
        got = feature_plane(image, make_id(0, filter, sigma))
        np.testing.assert_allclose(got, reference, atol=2e-6, err_msg=filter)


def test_filters_on_a_quadratic_surface():
    # f = 0.5 x^2 + 2 y^2: Hessian eigenvalues 4 and 1, Laplacian 5, smoothing keeps the
    # curvature, so away from the border every value is known by hand.
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float64)
    image = (0.5 * (xx - 16) ** 2 + 2.0 * (yy - 16) ** 2).astype(np.float32)
    inner = (slice(8, 24), slice(8, 24))
    np.testing.assert_allclose(feature_plane(image, "L0:hessian_max:s1.0:c0")[inner], 4, atol=1e-3)
    np.testing.assert_allclose(feature_plane(image, "L0:hessian_min:s1.0:c0")[inner], 1, atol=1e-3)
    np.testing.assert_allclose(feature_plane(image, "L0:log:s1.0:c0")[inner], 5, atol=1e-3)
    gradient = np.hypot(xx - 16, 4 * (yy - 16))
    np.testing.assert_allclose(feature_plane(image, "L0:gradmag:s1.0:c0")[inner], gradient[inner],
                               atol=1e-3)


# ---------------------------------------------------------------- normalisation, channels


def test_uint8_uint16_bool_normalisation():
    rng = np.random.default_rng(7)
    raw8 = rng.integers(0, 256, (19, 13)).astype(np.uint8)
    raw16 = rng.integers(0, 65536, (19, 13)).astype(np.uint16)
    bank = FeatureBank("fast")
    np.testing.assert_allclose(bank.compute_full(raw8), bank.compute_full(raw8 / 255.0), atol=1e-6)
    np.testing.assert_allclose(bank.compute_full(raw16), bank.compute_full(raw16 / 65535.0),
                               atol=1e-6)
    intensity = bank.compute_full(raw8)[:, :, bank.index("L0:intensity:c0")]
    assert intensity.max() <= 1.0 and np.isclose(intensity.max(), raw8.max() / 255)
    mask = raw8 > 128
    assert np.array_equal(bank.compute_full(mask), bank.compute_full(mask.astype(np.float32)))
    as_float = raw8 / 255.0
    for variant in (as_float.astype(">f8"), as_float.astype(np.float16)):
        np.testing.assert_allclose(bank.compute_full(variant), bank.compute_full(as_float),
                                   atol=1e-3 if variant.dtype == np.float16 else 1e-6)


def test_rgb_features_are_per_channel():
    image = (np.random.default_rng(8).random((21, 18, 3)) * 255).astype(np.uint8)
    rgb_bank = FeatureBank("pyramid", n_channels=3)
    gray_bank = FeatureBank("pyramid")
    full = rgb_bank.compute_full(image)
    for channel in range(3):
        gray = gray_bank.compute_full(image[:, :, channel])
        for j, feature_id in enumerate(gray_bank.ids):
            rgb_id = feature_id[:-1] + str(channel)
            assert np.array_equal(full[:, :, rgb_bank.index(rgb_id)], gray[:, :, j])
    channel_first = np.moveaxis(image, -1, 0)
    assert np.array_equal(rgb_bank.compute_full(channel_first, channel_axis=0), full)


def test_as_frame_stack_axis_rules():
    assert as_frame_stack(np.zeros((6, 7))).shape == (1, 6, 7, 1)
    assert as_frame_stack(np.zeros((6, 7, 3))).shape == (1, 6, 7, 3)
    assert as_frame_stack(np.zeros((6, 7, 4))).shape == (1, 6, 7, 4)
    assert as_frame_stack(np.zeros((5, 6, 7))).shape == (5, 6, 7, 1)          # gray stack
    assert as_frame_stack(np.zeros((5, 6, 3)), channel_axis=None).shape == (5, 6, 3, 1)
    assert as_frame_stack(np.zeros((2, 6, 7)), channel_axis=0).shape == (1, 6, 7, 2)
    assert as_frame_stack(np.zeros((5, 6, 7, 3))).shape == (5, 6, 7, 3)
    assert as_frame_stack(np.zeros((5, 3, 6, 7)), channel_axis=1).shape == (5, 6, 7, 3)
    stack = np.arange(2 * 8 * 8, dtype=np.uint8).reshape(2, 8, 8)
    frames = as_frame_stack(stack)
    bank = FeatureBank("fast")
    assert np.array_equal(bank.gather(frames[1], [3], [4]), bank.gather(stack[1], [3], [4]))


# ---------------------------------------------------------------- computing only what is asked


@pytest.fixture
def kernel_calls(monkeypatch):
    """Record (kernel name, shape of its first argument, extra args) of every kernel call."""
    calls = []
    for name in ("normalize_pad", "block_mean_2x2", "gaussian_smooth", "gradient_magnitude",
                 "laplacian", "hessian_eigenvalues", "gradient_products", "symmetric_eigenvalues"):
        original = getattr(_kernels, name)

        def wrapper(*args, _original=original, _name=name):
            calls.append((_name, args[0].shape, args[1:]))
            return _original(*args)
        monkeypatch.setattr(_kernels, name, wrapper)
    return calls


def test_single_coarse_feature_computes_no_full_resolution_filter(kernel_calls):
    bank = FeatureBank("pyramid")
    levels = bank.compute_levels(random_image((64, 64)), ["L3:gauss:s1.6:c0"])
    assert [a.shape for a in levels.arrays] == [(64, 64, 0), (32, 32, 0), (16, 16, 0), (8, 8, 1)]
    names = [name for name, _, _ in kernel_calls]
    assert names.count("normalize_pad") == 1
    assert names.count("block_mean_2x2") == 3
    filters = [(name, shape) for name, shape, _ in kernel_calls
               if name not in ("normalize_pad", "block_mean_2x2")]
    assert filters == [("gaussian_smooth", (8, 8))]


def test_only_requested_channels_are_read(kernel_calls):
    bank = FeatureBank("fast", n_channels=3)
    bank.gather(random_image((16, 16, 3)), [1], [2], ["L1:gradmag:s1.0:c1"])
    channels = [args[0] for name, _, args in kernel_calls if name == "normalize_pad"]
    assert channels == [1]


def test_smoothed_image_is_shared_between_features(kernel_calls):
    bank = FeatureBank("pyramid")
    wanted = [make_id(0, f, 1.6) for f in ("gauss", "gradmag", "log", "hessian_max", "hessian_min")]
    bank.compute_levels(random_image((16, 16)), wanted)
    names = [name for name, _, _ in kernel_calls]
    assert names.count("gaussian_smooth") == 1
    assert names.count("hessian_eigenvalues") == 1


# ---------------------------------------------------------------- specs, ids, costs


def test_ids_shares_and_costs():
    bank = FeatureBank("default")
    assert bank.ids[:3] == ["L0:intensity:c0", "L0:gauss:s0.7:c0", "L0:gradmag:s0.7:c0"]
    spec = FeatureSpec.from_id("L2:gauss:s1.6:c0")
    assert (spec.level, spec.share, spec.filter, spec.sigma) == (2, 16, "gauss", 1.6)
    assert spec.channel == 0 and spec.sample_cost == 0.0
    assert set(bank.shares()) == {1.0, 4.0, 16.0, 64.0}
    assert set(FeatureBank("fine").shares()) == {1.0, 4.0}
    assert set(FeatureBank("pyramid").shares()) == {1.0, 4.0, 16.0, 64.0}
    assert np.array_equal(bank.shares(), [4.0 ** s.level for s in bank.specs])
    assert not bank.sample_costs().any()
    # radius int(3 * 1.0 + 0.5) = 3: 2 passes x 7 taps + 1 store, a quarter of the pixels,
    # plus one 2x2-mean pass over the full image
    assert modelled_batch_cost(1, "gauss", 1.0) == 0.25 * 15 + 1
    assert modelled_batch_cost(0, "intensity") == 1
    assert modelled_batch_cost(3, "intensity") == 1 / 64 + 1 + 1 / 4 + 1 / 16
    assert modelled_batch_cost(0, "gauss", 3.5) > modelled_batch_cost(0, "gauss", 0.7)
    assert modelled_batch_cost(3, "gauss", 3.5) < modelled_batch_cost(0, "gauss", 3.5)
    assert np.array_equal(FeatureBank("default").batch_costs(), bank.batch_costs())
    assert [len(FeatureBank(p)) for p in ("fast", "default", "fine", "pyramid", "rich")] == \
        [21, 100, 50, 92, 160]
    # the default: intensity and 8 filters x 3 sigmas on every level; "fine": levels 0-1
    default = FeatureBank("default")
    assert [s.level for s in default.specs] == [0] * 25 + [1] * 25 + [2] * 25 + [3] * 25
    assert {s.sigma for s in default.specs} == {None, 0.7, 1.6, 3.5}
    assert FeatureBank("fine").ids == default.ids[:50]


def test_to_dict_round_trip_keeps_ids_and_costs():
    bank = FeatureBank("default", n_channels=2).subset(["L1:dog:s3.5:c1", "L0:intensity:c0"])
    restored = FeatureBank.from_dict(json.loads(json.dumps(bank.to_dict())))
    assert restored == bank
    assert restored.ids == ["L1:dog:s3.5:c1", "L0:intensity:c0"]
    assert restored.n_channels == 2
    custom = FeatureBank(specs=[FeatureSpec.from_id("L0:gauss:s1.0:c0", batch_cost=7.0)])
    assert FeatureBank.from_dict(custom.to_dict()).batch_costs()[0] == 7.0
    for preset in ("fast", "default", "fine", "pyramid", "rich"):
        original = FeatureBank(preset, n_channels=3)
        assert FeatureBank.from_ids(original.ids) == original


def test_bad_ids_and_specs():
    with pytest.raises(ValueError, match="canonical"):
        parse_id("L2:gauss:s1.60:c0")
    with pytest.raises(ValueError, match="malformed"):
        parse_id("gauss-1.6")
    with pytest.raises(ValueError, match="unknown filter"):
        parse_id("L0:sobel:s1.0:c0")
    with pytest.raises(ValueError, match="level"):
        parse_id("L4:gauss:s1.0:c0")
    with pytest.raises(ValueError, match="takes no sigma"):
        make_id(0, "intensity", 1.0)
    with pytest.raises(ValueError, match="disagree"):
        FeatureSpec(id="L0:gauss:s1.0:c0", name="x", level=1, share=4, batch_cost=1.0, channel=0,
                    filter="gauss", sigma=1.0)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("image, error, message", [
    (np.zeros(10), ValueError, "frame must be"),
    (np.zeros((2, 8, 8, 1)), ValueError, "frame must be"),
    (np.zeros((0, 8)), ValueError, "empty"),
    (np.array([[0.0, np.nan], [1.0, 2.0]]), ValueError, "NaN"),
    (np.array([[0.0, np.inf], [1.0, 2.0]]), ValueError, "NaN or infinite"),
    (np.zeros((8, 8), dtype=complex), TypeError, "dtype"),
    (np.zeros((8, 8, 3)), ValueError, "built for 1"),
])
def test_bad_images_raise_clear_errors(image, error, message):
    with pytest.raises(error, match=message):
        FeatureBank("fast").compute_levels(image)


def test_channel_mismatch_and_bad_selection():
    bank = FeatureBank("fast", n_channels=3)
    image = random_image((8, 8))
    with pytest.raises(ValueError, match="1 channel.*built for 3"):
        bank.gather(image, [0], [0])
    rgb = random_image((8, 8, 3))
    with pytest.raises(ValueError, match=r"must lie in \[0, 8\)"):
        bank.gather(rgb, [8], [0])
    with pytest.raises(TypeError, match="integer pixel"):
        bank.gather(rgb, [0.5], [0])
    with pytest.raises(ValueError, match="same length"):
        bank.gather(rgb, [0, 1], [0])
    with pytest.raises(ValueError, match="duplicates"):
        bank.compute_levels(rgb, [1, 1])
    with pytest.raises(ValueError, match="must lie in"):
        bank.compute_levels(rgb, [len(bank)])
    with pytest.raises(ValueError, match="not in this bank"):
        bank.compute_levels(rgb, ["L0:gauss:s9.0:c0"])
    with pytest.raises(ValueError, match="unknown preset"):
        FeatureBank("huge")
    with pytest.raises(ValueError, match="beyond n_channels"):
        FeatureBank(specs=["L0:gauss:s1.0:c2"], n_channels=2)
    with pytest.raises(ValueError, match="pipeline version"):
        FeatureBank.from_dict({**bank.to_dict(), "pipeline_version": 99})
    with pytest.raises(ValueError, match="needs channel_axis"):
        PyramidImage(rgb, channel_axis=None)


# ---------------------------------------------------------------- real data


def test_real_nuclei_image_gather_matches_full(shared_data):
    path = shared_data("stardist_wheel/img2d.tif")
    import tifffile
    image = tifffile.imread(path)[:203, :150]     # uint16, odd crop
    bank = FeatureBank("default")
    rng = np.random.default_rng(0)
    ys, xs = rng.integers(0, 203, 500), rng.integers(0, 150, 500)
    full = bank.compute_full(image)
    assert np.array_equal(bank.gather(image, ys, xs), full[ys, xs])
    assert np.isfinite(full).all()
    # uint16 counts are divided by 65535, not by the image maximum
    intensity = full[:, :, bank.index("L0:intensity:c0")]
    np.testing.assert_allclose(intensity, image / 65535.0, rtol=1e-6)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_feature_threads_are_kept_and_run_at_their_callers_priority():
    # compute_levels' worker threads are kept between frames, one pool per caller's nice
    # value: a caller lowered in priority (a background run) gets workers as low as itself.
    from msclassify.features._bank import _shared_pool

    def nice():
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def worker_nices():
        pool = _shared_pool(2)
        assert _shared_pool(2) is pool
        return nice(), set(pool.map(lambda _: nice(), range(8)))

    here, workers = worker_nices()
    assert workers == {here}
    lowered = {}

    def background():
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(here + 3, 19))
        lowered["caller"], lowered["workers"] = worker_nices()

    thread = threading.Thread(target=background)
    thread.start()
    thread.join()
    assert lowered["caller"] == min(here + 3, 19) != here
    assert lowered["workers"] == {lowered["caller"]}
    assert worker_nices()[1] == {here}
