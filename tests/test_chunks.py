"""Chunked prediction is exact: the chunk plan's geometry, the halo of every filter on
every level, and whole models on real and synthetic images with awkward chunk sizes."""

import imageio.v3 as iio
import numpy as np
import pytest

from msclassify import PixelClassifier
from msclassify.features import (FILTERS, FeatureSpec, PyramidImage, support_pixels,
                                 support_radius)
from msclassify.pixel import ChunkPlan, model_halo, predict_chunks, predict_region


def test_plan_geometry_by_hand():
    plan = ChunkPlan((21, 30), (10, 13), halo=3)      # halo rounds up to one 8-pixel block
    assert plan.halo == 8 and plan.grid == (3, 3) and len(plan) == 9
    assert list(plan)[:4] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert plan.chunk((2, 2)) == (slice(20, 21), slice(26, 30))
    # the region starts on the 8-pixel grid at or before the chunk
    assert plan.region((1, 1)) == (slice(8, 20), slice(8, 26))
    # the window: region +- halo, its end on the grid, clipped to the image
    assert plan.window((1, 1)) == (slice(0, 21), slice(0, 30))
    assert plan.window((0, 0), halo=0) == (slice(0, 16), slice(0, 16))
    # at the image's last partial block the window holds the pixels its padding reflects:
    # 21 rows pad to 24 by mirroring rows 18-20, so a window ending at 21 starts by 16
    assert plan.window((2, 0), halo=0) == (slice(16, 21), slice(0, 16))
    with pytest.raises(IndexError, match="outside the chunk grid"):
        plan.chunk((3, 0))


def test_plan_is_dimension_agnostic():
    plan = ChunkPlan((9, 20, 20), 16, halo=4)
    assert plan.grid == (1, 2, 2)
    assert plan.window((0, 1, 0)) == (slice(0, 9), slice(8, 20), slice(0, 20))


def test_a_chunk_smaller_than_the_halo_is_refused():
    with pytest.raises(ValueError, match="chunk size 16 along axis 1 is smaller than the model's "
                                         "halo of 24 pixels"):
        ChunkPlan((100, 100), (32, 16), halo=20).check_chunks()
    ChunkPlan((100, 10), (32, 10), halo=20).check_chunks()   # a chunk spanning its axis is fine


def test_support_by_hand():
    assert support_radius("L0:gauss:s1.0:c0") == 3                  # int(3 * 1 + 0.5)
    assert support_radius("L1:gradmag:s1.0:c0") == 4                # + central difference
    assert support_radius("L0:dog:s1.6:c0") == 5                    # the wider Gaussian
    assert support_radius("L0:structure_min:s3.5:c0") == 11 + 1 + 5
    assert support_pixels("L2:hessian_max:s0.7:c0") == (2 + 1) * 4
    assert support_pixels("L3up:log:s1.0:c0") == (3 + 1 + 1) * 8


ALL_SPECS = ([FeatureSpec.make(level, f, None if f == "intensity" else sigma)
              for level in range(4) for f in FILTERS for sigma in (0.7, 1.6)]
             + [FeatureSpec.make(level, f, 1.0, upsampled=True)
                for level in (1, 3) for f in ("gauss", "structure_max", "hessian_min")])


@pytest.mark.parametrize("shape, chunks", [((67, 91), (29, 37)), ((120, 64), (64, 41))])
def test_every_filter_on_every_level_is_exact_in_its_window(shape, chunks):
    """The halo rule itself: each feature computed on its chunk's window equals, on the
    chunk's region, the feature of the whole image (bit for bit)."""
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, shape).astype(np.uint8)
    whole = PyramidImage(image)
    for spec in ALL_SPECS:
        plan = ChunkPlan(shape, chunks, halo=support_pixels(spec))
        reference = whole.feature(spec)
        step = 1 << spec.level
        for index in plan:
            window = plan.window(index)
            region = plan.region(index)
            local = PyramidImage(image[window]).feature(spec)
            rows, cols = ((r.start // step, -(-r.stop // step)) for r in region)
            offset = [w.start // step for w in window]
            got = local[rows[0] - offset[0]:rows[1] - offset[0],
                        cols[0] - offset[1]:cols[1] - offset[1]]
            assert np.array_equal(got, reference[rows[0]:rows[1], cols[0]:cols[1]]), \
                (spec.id, index)


def test_a_smaller_halo_would_not_be_exact():
    """The support is tight: one block less halo changes a coarse Gaussian in the chunk."""
    image = np.random.default_rng(2).integers(0, 256, (96, 96)).astype(np.uint8)
    spec = FeatureSpec.from_id("L3:gauss:s1.0:c0")          # support 3 level px = 24 px
    reference = PyramidImage(image).feature(spec)
    plan = ChunkPlan((96, 96), 32, halo=support_pixels(spec) - 8)
    window = plan.window((1, 1))
    local = PyramidImage(image[window]).feature(spec)
    assert not np.array_equal(local[2:6, 2:6], reference[4:8, 4:8])


def _em(shared_data):
    folder = shared_data("isbi2012_em")
    image = iio.imread(folder / "image_0.png")
    membrane = iio.imread(folder / "label_0.png") == 0
    scribbles = np.zeros(image.shape, np.uint8)
    rng = np.random.default_rng(0)
    for value, mask in ((1, ~membrane), (2, membrane)):
        ys, xs = np.nonzero(mask)
        pick = rng.choice(ys.size, 1500, replace=False)
        scribbles[ys[pick], xs[pick]] = value
    return image, scribbles


@pytest.mark.slow
def test_real_em_image_chunked_equals_whole(shared_data):
    """A default model (distilled, four levels) on a real 512x512 EM image: labels bit for
    bit, probabilities equal, for chunk sizes that divide neither 512 nor 8."""
    image, scribbles = _em(shared_data)
    model = PixelClassifier(n_estimators=30, cost_tradeoff=1e-4, random_state=0).fit(
        image, scribbles)
    levels = {FeatureSpec.from_id(i).source_level for i in model.features_used_}
    assert len(levels) >= 3, model.features_used_          # coarse and fine features in play
    halo = model_halo(model)
    labels, proba = model.predict(image), model.predict_proba(image)
    for chunks in ((halo + 5, 2 * halo + 3), (211, 173), (512, halo + 1)):
        got_labels, got_proba = predict_chunks(model, image, chunks, ("class", "proba"))
        assert np.array_equal(got_labels, labels), chunks
        np.testing.assert_allclose(got_proba, proba, rtol=0, atol=1e-6)


def test_synthetic_multiclass_rgb_with_upsampled_features_is_exact():
    rng = np.random.default_rng(3)
    shape = (150, 133)
    image = rng.normal(60, 20, shape + (3,))
    image[20:90, 30:70] += [120, 0, 40]
    image[100:140, 60:120] += [0, 90, 90]
    image = np.clip(image, 0, 255).astype(np.uint8)
    labels = np.zeros(shape, np.uint8)
    labels[2:6, 2:120] = 1
    labels[40:60, 40:60] = 2
    labels[110:130, 80:110] = 3
    features = ["L0:intensity:c0", "L0:gauss:s1.6:c1", "L1up:structure_max:s1.0:c2",
                "L2:hessian_min:s1.6:c0", "L3:gauss:s0.7:c1", "L3up:gradmag:s1.0:c0"]
    model = PixelClassifier(features, n_estimators=20, cost_tradeoff=0, random_state=0,
                            distill_weight=0, min_samples_leaf=5).fit(image, labels)
    assert len(model.features_used_) >= 4, model.features_used_
    halo = model_halo(model)
    for chunks in ((halo, halo + 1), (halo + 13, 133)):
        got_labels, got_proba = predict_chunks(model, image, chunks, ("class", "proba"))
        assert np.array_equal(got_labels, model.predict(image)), chunks
        np.testing.assert_allclose(got_proba, model.predict_proba(image), rtol=0, atol=1e-6)
    whole = model.predict(image)
    for region in ((slice(0, 37), slice(90, 133)), (slice(141, 150), slice(3, 11)),
                   (slice(60, 61), slice(None))):
        assert np.array_equal(predict_region(model, image, region), whole[region]), region


_BOUNDED_MEMORY_SCRIPT = r"""
import resource, sys
import numpy as np, zarr
from msclassify import PixelClassifier
from msclassify.pixel import predict_chunks

folder, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
tile = rng.normal(80, 10, (512, 512)); tile[100:300, 150:400] += 100
tile = np.clip(tile, 0, 255).astype(np.uint8)
labels = np.zeros(tile.shape, np.uint8); labels[5:20, 5:500] = 1; labels[180:220, 250:300] = 2
model = PixelClassifier("fast", n_estimators=5, random_state=0).fit(tile, labels)
image = zarr.create_array(f"{folder}/in.zarr", shape=(n, n), chunks=(512, 512), dtype=np.uint8)
for y in range(0, n, 512):
    for x in range(0, n, 512):
        image[y:y + 512, x:x + 512] = np.roll(tile, (y + x) // 7, axis=1)
out = [zarr.create_array(f"{folder}/labels.zarr", shape=(n, n), chunks=(256, 256),
                         dtype=np.uint8),
       zarr.create_array(f"{folder}/proba.zarr", shape=(n, n, 2), chunks=(256, 256, 2),
                         dtype=np.float32)]
predict_chunks(model, tile, 256, ("class", "proba"))                     # compile, warm up
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
predict_chunks(model, image, 256, ("class", "proba"), out=out)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
corner = model.predict(image[:512, :512])
print((after - before) * 1024, int((out[0][:512, :512] == corner).all()))
"""


@pytest.mark.slow
def test_memory_depends_on_the_chunk_not_the_image(tmp_path):
    """A 4096x4096 image (16.7 Mpx) from a zarr store into zarr stores: the peak RSS grows by
    far less than one float32 plane of the image (67 MB), which the whole-image path
    allocates many of (its features, probabilities and accumulators)."""
    import subprocess
    import sys

    n = 4096
    run = subprocess.run([sys.executable, "-c", _BOUNDED_MEMORY_SCRIPT, str(tmp_path), str(n)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    grown, corner_ok = (int(v) for v in run.stdout.split())
    assert corner_ok == 1
    one_plane = n * n * 4
    assert grown < one_plane / 2, f"peak RSS grew by {grown / 2**20:.0f} MB"


def test_training_windows_read_overlapping_halos_once():
    """Scribbles in neighbouring chunks: their windows overlap (halo > chunk), so they are
    read as one crop, no larger than the two apart; a far scribble keeps its own crop."""
    from msclassify.pixel import training_windows

    image = np.arange(700 * 700, dtype=np.uint32).reshape(700, 700) % 251
    labels = np.zeros(image.shape, np.uint8)
    labels[10, 10], labels[10, 70], labels[690, 690] = 1, 2, 1
    frames, label_frames = training_windows(image, labels, "fast", chunks=64)
    assert len(frames) == 2
    assert sorted(int((lab > 0).sum()) for lab in label_frames) == [1, 2]
    apart = 0
    for y, x in ((10, 10), (10, 70)):
        one = np.zeros_like(labels)
        one[y, x] = labels[y, x]
        (frame,), _ = training_windows(image, one, "fast", chunks=64)
        apart += frame.size
    merged = next(f for f, lab in zip(frames, label_frames) if (lab > 0).sum() == 2)
    assert merged.size < apart


def test_merge_windows_by_hand():
    """Side by side (the box around them = the two): merged, and a window that fits only
    the merged box is absorbed in the next pass; a gap or a far window: kept apart; every
    part kept once."""
    from msclassify.pixel._chunks import _merge_windows

    def box(y0, y1, x0, x1):
        return (slice(y0, y1), slice(x0, x1))

    # c (10x20, first) fits neither a nor b (box 20x20 = 400 > 200 + 100); a and b side by
    # side merge (10x20 = 200 <= 100 + 100); then c absorbs a + b (400 <= 200 + 200).
    merged = _merge_windows([[box(10, 20, 0, 20), ["c"]], [box(0, 10, 0, 10), ["a"]],
                             [box(0, 10, 10, 20), ["b"]], [box(500, 510, 500, 510), ["far"]]])
    assert [(w, sorted(parts)) for w, parts in merged] == [
        (box(0, 20, 0, 20), ["a", "b", "c"]), (box(500, 510, 500, 510), ["far"])]
    # a 2-column gap between a and b: their box (10x20 = 200) holds more than the two
    # (100 + 80), so nothing merges
    apart = [[box(10, 20, 0, 20), ["c"]], [box(0, 10, 0, 10), ["a"]],
             [box(0, 10, 12, 20), ["b"]]]
    assert _merge_windows(apart) == apart
    # many far-apart windows: none merged, each part kept, in order
    far = [[box(100 * k, 100 * k + 10, 0, 10), [k]] for k in range(300)]
    assert _merge_windows(far) == far


def test_training_windows_give_the_scribbles_their_whole_image_features():
    from msclassify.features import FeatureBank
    from msclassify.pixel import training_windows

    rng = np.random.default_rng(4)
    image = rng.integers(0, 256, (1203, 1000)).astype(np.uint8)
    labels = np.zeros(image.shape, np.uint8)
    labels[5, 3:40] = 1                   # at the top edge
    labels[510:513, 400:600] = 2          # across chunk borders
    labels[1200:1203, 990:1000] = 1       # in the last partial block
    frames, label_frames = training_windows(image, labels, "default", chunks=512)
    assert sum(int((lab > 0).sum()) for lab in label_frames) == int((labels > 0).sum())
    assert sum(f.size for f in frames) < image.size        # only around the scribbles
    bank = FeatureBank("default")
    ys, xs = np.nonzero(labels)
    whole = bank.gather(image, ys, xs)
    rows = []
    for frame, lab in zip(frames, label_frames):
        fy, fx = np.nonzero(lab)
        rows.append((lab[fy, fx], bank.gather(frame, fy, fx)))
    got = np.concatenate([r for _, r in rows])
    values = np.concatenate([v for v, _ in rows])
    order = np.lexsort((whole.T[::-1]))
    assert np.array_equal(np.sort(values), np.sort(labels[ys, xs]))
    assert np.array_equal(got[np.lexsort(got.T[::-1])], whole[order])
