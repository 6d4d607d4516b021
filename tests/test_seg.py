"""SEG (Cell Tracking Challenge) and label_instances: hand-checked cases, a brute-force
reference, and cross-checks against py-ctcmetrics on real CTC and StarDist label images."""

import zipfile

import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi

from msclassify.metrics import SegResult, label_instances, seg_score

# --------------------------------------------------------------------------- hand-made cases

def test_exactly_half_covered_does_not_match():
    reference = np.array([[1, 1, 1, 1]])
    assert seg_score(reference, np.array([[2, 2, 0, 0]])) == 0.0
    # one pixel more than half: matched, J = 3 / (4 + 3 - 3)
    assert seg_score(reference, np.array([[2, 2, 2, 0]])) == 0.75


def test_oversegmented_object_jaccard():
    # |R| = 2 inside |S| = 4: R is fully covered, J = 2 / 4
    assert seg_score(np.array([[1, 1, 0, 0]]), np.array([[3, 3, 3, 3]])) == 0.5


def test_only_the_majority_piece_matches():
    reference = np.array([[1, 1, 1, 1, 1, 1, 0]])
    segmentation = np.array([[4, 4, 4, 4, 8, 8, 8]])
    # S=4 covers 4 of 6 (> 3): J = 4 / (6 + 4 - 4); S=8 covers 2 of 6: ignored
    assert seg_score(reference, segmentation) == pytest.approx(4 / 6)


def test_split_in_halves_scores_zero():
    assert seg_score(np.array([[1, 1, 1, 1]]), np.array([[5, 5, 6, 6]])) == 0.0


def test_merged_objects_each_match_the_merge():
    reference = np.array([[1, 1, 0, 2, 2, 2]])
    segmentation = np.full((1, 6), 9)
    # both reference objects lie inside S=9 (|S| = 6): J = 2/6 and 3/6
    result = seg_score(reference, segmentation, per_frame=True)
    np.testing.assert_allclose(result.jaccard[0], [2 / 6, 3 / 6])
    assert result.score == pytest.approx((2 / 6 + 3 / 6) / 2)


def test_segmentation_background_never_matches():
    assert seg_score(np.array([[0, 3, 3]]), np.zeros((1, 3), np.uint8)) == 0.0


def test_label_values_and_dtypes_do_not_matter():
    reference = np.array([[0, 7, 7, 0, 200, 200]], np.uint8)
    segmentation = np.array([[0, 4_000_000_000, 4_000_000_000, 0, 1, 1]], np.uint32)
    assert seg_score(reference, segmentation) == 1.0
    assert seg_score(reference.astype(np.int64), segmentation.astype(np.uint64)) == 1.0


def test_mean_is_over_objects_of_all_frames_and_empty_frames_are_excluded():
    reference = np.zeros((3, 4, 4), np.uint16)
    reference[0, 0, :2] = 1                       # frame 0: one object, found exactly
    reference[1, 0, 0] = 1                        # frame 1: three objects, all missed
    reference[1, 2, 0] = 2
    reference[1, 3, 3] = 3
    segmentation = np.zeros_like(reference)
    segmentation[0] = reference[0]
    segmentation[2, 1:3, 1:3] = 5                 # frame 2: no reference objects
    result = seg_score(reference, segmentation, per_frame=True)
    assert isinstance(result, SegResult)
    assert result.score == 0.25                   # 1 of 4 objects; the mean of frames is 0.5
    np.testing.assert_array_equal(result.per_frame, [1.0, 0.0, np.nan])
    np.testing.assert_array_equal(result.n_objects, [1, 3, 0])
    assert seg_score(reference, segmentation) == 0.25


def test_no_reference_objects_at_all_is_nan():
    result = seg_score(np.zeros((2, 3, 3), int), np.ones((2, 3, 3), int), per_frame=True)
    assert np.isnan(result.score)
    assert np.isnan(result.per_frame).all()


def test_sequences_of_frames_with_different_shapes():
    reference = [np.array([[1, 1], [0, 0]]), np.array([[1, 1, 1, 1, 0]])]
    segmentation = (np.array([[1, 1], [1, 0]]), np.array([[2, 2, 2, 0, 0]]))
    # frame 0: J = 2/3; frame 1: J = 3/4
    result = seg_score(reference, segmentation, per_frame=True)
    np.testing.assert_allclose(result.per_frame, [2 / 3, 3 / 4])
    assert result.score == pytest.approx((2 / 3 + 3 / 4) / 2)


def _brute_force_seg(reference, segmentation):
    """SEG straight from the definition, with Python loops over objects."""
    scores = []
    for ref, seg in zip(reference, segmentation):
        for r in np.unique(ref[ref > 0]):
            obj = ref == r
            best = 0.0
            for s in np.unique(seg[obj]):
                if s == 0:
                    continue
                inter = np.sum(obj & (seg == s))
                if inter > 0.5 * obj.sum():
                    best = inter / np.sum(obj | (seg == s))
            scores.append(best)
    return np.mean(scores)


@pytest.mark.parametrize("seed", range(5))
def test_matches_brute_force_on_random_label_images(seed):
    rng = np.random.default_rng(seed)
    # blocky random labels so that objects overlap in all sorts of proportions
    reference = np.kron(rng.integers(0, 6, (4, 6, 6)), np.ones((1, 3, 3), int))
    segmentation = np.kron(rng.integers(0, 5, (4, 9, 9)), np.ones((1, 2, 2), int))
    assert seg_score(reference, segmentation) == pytest.approx(
        _brute_force_seg(reference, segmentation), abs=1e-12)


@pytest.mark.parametrize("bad, error, message", [
    (np.ones((3, 3), bool), TypeError, "label_instances"),
    (np.ones((3, 3), float), TypeError, "integer"),
    (-np.ones((3, 3), int), ValueError, "negative"),
    (np.ones((3, 4), int), ValueError, "shape"),
    (np.ones((2, 3, 3), int), ValueError, "frames"),
    (np.ones(9, int), ValueError, "2-D"),
    (np.ones((1, 1, 3, 3), int), ValueError, "2-D"),
    ([], ValueError, "empty"),
])
def test_bad_segmentation_is_refused_clearly(bad, error, message):
    with pytest.raises(error, match=message):
        seg_score(np.ones((3, 3), int), bad)


def test_bad_reference_is_refused_clearly():
    with pytest.raises(TypeError, match="reference frame 0 is a boolean"):
        seg_score(np.ones((3, 3), bool), np.ones((3, 3), int))


# --------------------------------------------------------------------------- label_instances

def test_label_instances_connectivity():
    mask = np.array([[1, 1, 0, 0],
                     [0, 0, 1, 0],
                     [0, 0, 0, 0],
                     [1, 0, 0, 0]], bool)
    assert label_instances(mask).max() == 2                  # diagonal joins by default
    assert label_instances(mask, connectivity=1).max() == 3
    with pytest.raises(ValueError, match="connectivity"):
        label_instances(mask, connectivity=3)


def test_label_instances_foreground_class_and_non_binary_error():
    prediction = np.array([[2, 2, 1, 2],
                           [1, 1, 1, 2]], np.uint8)
    np.testing.assert_array_equal(label_instances(prediction, foreground=2),
                                  [[1, 1, 0, 2], [0, 0, 0, 2]])
    with pytest.raises(ValueError, match="foreground="):
        label_instances(prediction)


def test_label_instances_labels_each_frame_on_its_own():
    stack = np.zeros((2, 3, 3), np.uint8)
    stack[:, 1, 1] = 1                     # same place in both frames: not joined over time
    labelled = label_instances(stack)
    assert labelled.shape == (2, 3, 3) and labelled.dtype == np.int32
    np.testing.assert_array_equal(labelled[:, 1, 1], [1, 1])
    as_list = label_instances([stack[0], stack[1]])
    assert isinstance(as_list, list) and len(as_list) == 2


def test_semantic_prediction_scored_after_labelling():
    reference = np.zeros((6, 6), np.uint16)
    reference[0:2, 0:2] = 3
    reference[4:6, 3:6] = 8
    prediction = np.where(reference > 0, 2, 1).astype(np.uint8)   # 1 background, 2 fly
    assert seg_score(reference, label_instances(prediction, foreground=2)) == 1.0
    with pytest.raises(TypeError, match="label_instances"):
        seg_score(reference, prediction == 2)


# --------------------------------------------------------------------------- py-ctcmetrics

def _ctc_seg(reference_frames, segmentation_frames, folder):
    """SEG as py-ctcmetrics computes it: match() on TIFF files, then seg()."""
    from ctc_metrics.metrics import seg
    from ctc_metrics.utils.representations import match

    folder.mkdir(parents=True, exist_ok=True)
    labels_ref, ious, per_object = [], [], []
    for t, (ref, comp) in enumerate(zip(reference_frames, segmentation_frames)):
        ref_path, comp_path = folder / f"ref{t:03d}.tif", folder / f"comp{t:03d}.tif"
        tifffile.imwrite(ref_path, ref.astype(np.uint16))
        tifffile.imwrite(comp_path, comp.astype(np.uint16))
        frame_ref, _, mapped_ref, _, iou = match(str(ref_path), str(comp_path))
        labels_ref.append(frame_ref)
        ious.append(iou)
        matched = dict(zip(mapped_ref, iou))
        per_object.append(np.array([matched.get(r, 0.0) for r in frame_ref]))
    return seg(labels_ref, ious), per_object


def _erode_objects(labels, objects, radius):
    out = labels.copy()
    for obj in objects:
        inside = labels == obj
        out[inside & ~ndi.binary_erosion(inside, iterations=radius)] = 0
    return out


def _touching_pairs(labels):
    """Pairs of distinct labels that are 4-neighbours somewhere."""
    pairs = set()
    for a, b in ((labels[:, :-1], labels[:, 1:]), (labels[:-1], labels[1:])):
        touch = (a != b) & (a > 0) & (b > 0)
        pairs |= {tuple(sorted(p)) for p in zip(a[touch].tolist(), b[touch].tolist())}
    return sorted(pairs)


def _split_objects(labels, objects, rng):
    """Cut objects by a random line through their centroid (new label for one side)."""
    out = labels.copy()
    rows, cols = np.indices(labels.shape)
    next_label = labels.max() + 1
    for obj in objects:
        inside = labels == obj
        r0, c0 = rows[inside].mean(), cols[inside].mean()
        angle = rng.uniform(0, np.pi)
        side = (rows - r0) * np.cos(angle) - (cols - c0) * np.sin(angle) + rng.normal(0, 1.5) > 0
        out[inside & side] = next_label
        next_label += 1
    return out


def _keep_half(labels):
    """Keep the first ceil(|R|/2) pixels (raster order) of every object: even-sized objects end
    up covered by exactly half, which must not match; odd-sized ones by just over half."""
    flat = labels.ravel()
    order = np.argsort(flat, kind="stable")
    starts = np.searchsorted(flat[order], flat[order], side="left")
    sizes = np.bincount(flat)[flat[order]]
    rank = np.arange(flat.size) - starts
    out = np.zeros_like(flat)
    keep = rank < (sizes + 1) // 2
    out[order[keep]] = flat[order[keep]]
    return out.reshape(labels.shape)


def _assert_agree(reference, perturbed, tmp_path):
    ours = seg_score(reference, perturbed, per_frame=True)
    theirs, their_objects = _ctc_seg(reference, perturbed, tmp_path)
    assert abs(ours.score - theirs) < 1e-9
    for mine, expected in zip(ours.jaccard, their_objects):
        np.testing.assert_allclose(mine, expected, rtol=0, atol=1e-9)
    return ours.score


def test_ctc_java_test_data_matches_py_ctcmetrics(tmp_path, shared_data):
    with zipfile.ZipFile(shared_data("ctc_java_test_data/test_data.zip")) as archive:
        archive.extractall(tmp_path / "ctc")
    ctc = tmp_path / "ctc"
    reference = np.stack([tifffile.imread(p)
                          for p in sorted((ctc / "GT/SEG").glob("man_seg*.tif"))])
    result = np.stack([tifffile.imread(p) for p in sorted((ctc / "res").glob("mask*.tif"))])
    assert reference.shape == result.shape == (6, 279, 189)
    # the result equals the ground truth up to label values, so SEG is exactly 1
    assert seg_score(reference, result) == 1.0
    assert _ctc_seg(reference, result, tmp_path / "as_is")[0] == 1.0

    frame_labels = np.unique(result[0])[1:]
    perturbed = result.copy()
    perturbed[0] = _erode_objects(result[0], frame_labels[:2], radius=2)
    perturbed[1][perturbed[1] == frame_labels[0]] = 0                        # drop one
    perturbed[2][perturbed[2] == frame_labels[1]] = frame_labels[2]          # merge two
    perturbed[3] = ndi.grey_dilation(result[3], size=5)                       # grow all
    perturbed[4] = np.roll(result[4], (4, -3), axis=(0, 1))                   # shift
    perturbed[5] = _erode_objects(result[5], frame_labels, radius=6)          # shrink hard
    score = _assert_agree(reference, perturbed, tmp_path / "perturbed")
    assert 0.3 < score < 0.95


@pytest.mark.parametrize("seed", [0, 1])
def test_stardist_nuclei_perturbations_match_py_ctcmetrics(tmp_path, seed, shared_data):
    reference = tifffile.imread(shared_data("stardist_wheel/mask2d.tif"))
    rng = np.random.default_rng(seed)
    objects = np.unique(reference)[1:]
    pick = lambda n: rng.choice(objects, n, replace=False)  # noqa: E731
    relabelled = np.concatenate([[0], rng.permutation(objects)])[
        np.searchsorted(np.r_[0, objects], reference)]
    dropped = reference.copy()
    dropped[np.isin(dropped, pick(15))] = 0
    merged = reference.copy()
    pairs = _touching_pairs(reference)
    for i in rng.choice(len(pairs), min(10, len(pairs)), replace=False):
        merged[merged == pairs[i][1]] = pairs[i][0]
    frames = [
        _erode_objects(reference, pick(40), radius=int(rng.integers(1, 4))),
        ndi.grey_dilation(reference, size=3),
        dropped,
        merged,
        _split_objects(reference, pick(40), rng),      # many objects near the 0.5 boundary
        _keep_half(reference),                         # objects exactly at the 0.5 boundary
        np.roll(reference, (3, 2), axis=(0, 1)),
        relabelled,
    ]
    perturbed = np.stack(frames).astype(np.uint16)
    score = _assert_agree(np.stack([reference] * len(frames)), perturbed, tmp_path)
    assert 0.3 < score < 1.0


def test_label_instances_of_volumes_connect_through_faces_by_default():
    # two 2x2x2 cubes meeting along an edge, a third meeting the second at a corner
    volume = np.zeros((6, 6, 6), np.uint8)
    volume[:2, :2, :2] = volume[2:4, 2:4, :2] = volume[4:, 4:, 2:4] = 1
    assert label_instances(volume, volume=True).max() == 3          # 6 neighbours
    assert label_instances(volume, volume=True, connectivity=1).max() == 3
    assert label_instances(volume, volume=True, connectivity=2).max() == 2  # edges join
    assert label_instances(volume, volume=True, connectivity=3).max() == 1  # corners too
    with pytest.raises(ValueError, match="connectivity"):
        label_instances(volume, volume=True, connectivity=4)
