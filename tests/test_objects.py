"""Objects: hand-checkable tables, splitting, the object classifier's costs, tracks that cross,
the CLI's --table with resume and its bad input."""

import contextlib

import numpy as np
import pandas as pd
import pytest
import tifffile

from msclassify.cli import main
from msclassify.objects import (ObjectClassifier, ObjectPipeline, ObjectSplitter,
                                ObjectTableWriter, ObjectTracker, TableJournal, find_objects,
                                measure_objects, object_features, read_table, remember_frames,
                                write_table)
from msclassify.pixel import PixelClassifier

# -- the table of one frame, by hand ------------------------------------------------------------


def test_a_square_and_a_bar_measure_as_computed_by_hand():
    labels = np.ones((20, 30), np.uint8)
    labels[2:6, 3:7] = 2                    # 4x4 square: centre (3.5, 4.5)
    labels[10:12, 10:20] = 2                # 2x10 bar along the columns: centre (10.5, 14.5)
    labels[14:19, 26] = 2                   # 5x1 bar along the rows: centre (16, 26)
    image = np.zeros((20, 30)); image[2:6, 3:7] = 7; image[10:12, 10:20] = 3
    table = measure_objects(find_objects(labels, 2), image, frame=4)
    assert table["frame"].tolist() == [4, 4, 4]
    assert table["object"].tolist() == [1, 2, 3]
    assert table["area"].tolist() == [16, 20, 5]
    assert table["centroid-0"].tolist() == [3.5, 10.5, 16]
    assert table["centroid-1"].tolist() == [4.5, 14.5, 26]
    assert table[["bbox-0", "bbox-1", "bbox-2", "bbox-3"]].values.tolist()[0] == [2, 3, 6, 7]
    # skimage's convention: angle between the row axis and the major axis
    assert abs(table["orientation"][1]) == pytest.approx(np.pi / 2)
    assert table["orientation"][2] == pytest.approx(0)
    assert table["intensity_mean"].tolist() == [7, 3, 0]
    assert table["axis_major_length"][1] > table["axis_minor_length"][1]


def test_a_diagonal_bar_has_orientation_of_45_degrees():
    objects = np.zeros((12, 12), int)
    for k in range(10):
        objects[1 + k, 1 + k] = objects[1 + k, min(2 + k, 11)] = 1
    angle = measure_objects(objects)["orientation"][0]
    # rows and columns grow together: 45 degrees from the row axis, sign by skimage's rule
    assert abs(angle) == pytest.approx(np.pi / 4, abs=0.05)


def test_the_weighted_orientation_follows_a_bright_body_not_its_dim_wings():
    # a cross: a bright 21x3 body along the rows, dim 5x21 wings along the columns; the mask's
    # major axis is the wings' (the wider bar), the intensity-weighted one the body's; both
    # exact, the cross being symmetric about both axes (no covariance)
    objects = np.zeros((25, 25), int); image = np.zeros((25, 25))
    objects[2:23, 11:14] = 1; image[2:23, 11:14] = 100          # body
    objects[10:15, 2:23] = 1; image[10:15, 2:23] = 1            # wings (the body's pixels stay 100)
    image[10:15, 11:14] = 100
    row = measure_objects(objects, image).iloc[0]
    assert abs(row["orientation"]) == pytest.approx(np.pi / 2)
    assert row["orientation_weighted"] == pytest.approx(0)
    # a dim square with a bright diagonal: weighted, rows and columns grow together, +45 degrees
    # in regionprops' convention (the tie of equal row and column spreads broken as it does)
    objects = np.ones((9, 9), int); image = np.ones((9, 9)); image[np.arange(9), np.arange(9)] = 50
    row = measure_objects(objects, image).iloc[0]
    assert row["orientation_weighted"] == pytest.approx(np.pi / 4)
    assert measure_objects(objects, image.T[::-1]).iloc[0]["orientation_weighted"] == \
        pytest.approx(-np.pi / 4)
    # black objects have no weights; without a frame there is no such column
    assert np.isnan(measure_objects(objects, np.zeros((9, 9))).iloc[0]["orientation_weighted"])
    assert "orientation_weighted" not in measure_objects(objects)


def test_the_body_orientation_is_the_bright_parts_alone():
    # a bright 15x3 body along the rows under dim, wide 9x21 wings: the mask's axis is the
    # wings' (columns, +-pi/2); the intensity-weighted one too, the wings having many more pixels;
    # the bright part alone (above Otsu's threshold of the object) lies along the rows: 0, exact
    objects = np.zeros((25, 25), int); image = np.zeros((25, 25))
    objects[5:20, 11:14] = 1; image[5:20, 11:14] = 100
    objects[8:17, 2:23] = 1; image[8:17, 2:23] = 20; image[8:17, 11:14] = 100
    row = measure_objects(objects, image).iloc[0]
    assert abs(row["orientation"]) == pytest.approx(np.pi / 2)
    assert abs(row["orientation_weighted"]) == pytest.approx(np.pi / 2)
    assert row["orientation_body"] == pytest.approx(0)
    # a bright speck away from the body (a reflection) is not part of it: the largest bright part
    image[8, 3] = 100
    assert measure_objects(objects, image).iloc[0]["orientation_body"] == pytest.approx(0)
    # a diagonal body: +pi/4 as regionprops' orientation of the same bar alone
    objects = np.ones((12, 12), int); image = np.full((12, 12), 10.0)
    bar = np.zeros((12, 12), int)
    for k in range(10):
        bar[1 + k, 1 + k] = bar[1 + k, 2 + k] = 1
    image[bar > 0] = 90
    assert measure_objects(objects, image).iloc[0]["orientation_body"] == \
        pytest.approx(measure_objects(bar).iloc[0]["orientation"])
    # all pixels alike: the whole object is its body; no frame, no column; not of the probability
    objects = np.zeros((9, 9), int); objects[2:5, 1:8] = 1
    assert abs(measure_objects(objects, np.full((9, 9), 7.0)).iloc[0]["orientation_body"]) == \
        pytest.approx(np.pi / 2)
    assert "orientation_body" not in measure_objects(objects)
    table = measure_objects(objects, np.full((9, 9), 7.0), np.full((9, 9), 0.5))
    assert [c for c in table if "body" in c] == ["orientation_body"]


def test_the_probability_adds_its_own_columns_and_an_empty_frame_gives_no_rows():
    objects = np.zeros((6, 6), int); objects[1:3, 1:3] = 1
    probability = np.where(objects > 0, 0.75, 0.0)
    table = measure_objects(objects, objects * 2.0, probability)
    assert table["probability_mean"].tolist() == [0.75]
    assert table["intensity_max"].tolist() == [2]
    empty = measure_objects(np.zeros((6, 6), int), np.zeros((6, 6)), frame=3)
    assert len(empty) == 0 and "centroid-0" in empty and "intensity_mean" in empty


def test_min_size_drops_small_objects():
    labels = np.ones((10, 10), np.uint8); labels[1:4, 1:4] = 2; labels[7, 7] = 2
    assert measure_objects(find_objects(labels, 2, min_size=2))["area"].tolist() == [9]



def test_size_filter_and_split_in_one_pass_equal_the_two_steps_apart():
    """find_objects hands the size filter's boxes to the splitter (one whole-frame pass fewer):
    the same objects as filtering, then splitting with boxes found again."""
    labels = np.ones((30, 80), np.uint8)
    labels[:, :50][_two_discs(16) > 0] = 2             # two touching discs: split
    labels[2, 70] = 2                                  # one pixel: dropped
    labels[20:26, 60:78] = 2                           # a bar after it: renumbered 2, not split
    splitter = ObjectSplitter("distance", depth=0.3, min_size=50)
    filtered = find_objects(labels, 2, min_size=20)
    assert np.unique(filtered).tolist() == [0, 1, 2]
    together = find_objects(labels, 2, min_size=20, split=splitter)
    assert np.array_equal(together, splitter.split(filtered))
    assert np.unique(together).tolist() == [0, 1, 2, 3]

# -- splitting ----------------------------------------------------------------------------------

def _two_discs(gap):
    yy, xx = np.mgrid[:30, :50]
    return (((yy - 15) ** 2 + (xx - 14) ** 2 < 81)
            | ((yy - 15) ** 2 + (xx - 14 - gap) ** 2 < 81)).astype(np.int32)


@pytest.mark.parametrize("landscape", ["distance", "probability", "intensity"])
def test_two_touching_discs_are_split_and_an_ellipse_is_not(landscape):
    discs = _two_discs(16)
    assert discs.max() == 1  # one component
    splitter = ObjectSplitter(landscape, depth=0.3, min_size=50)
    split = splitter.split(discs, discs.astype(np.float32), discs * 200.0)
    assert np.unique(split).tolist() == [0, 1, 2]
    areas = np.bincount(split.ravel())[1:]
    assert abs(int(areas[0]) - int(areas[1])) <= 0.05 * areas.sum()  # halves, up to the seam
    yy, xx = np.mgrid[:30, :50]
    ellipse = (((yy - 15) / 8.0) ** 2 + ((xx - 25) / 20.0) ** 2 < 1).astype(np.int32)
    assert splitter.split(ellipse, ellipse.astype(np.float32), ellipse * 200.0).max() == 1


def test_a_bright_body_with_dim_wings_is_one_object_and_two_bodies_are_two():
    """The intensity landscape: each body is one bright peak, the wings a dim shelf."""
    yy, xx = np.mgrid[:40, :80]
    image = np.zeros((40, 80))
    for centre in (20, 52):
        image += 150 * np.exp(-((yy - 20) ** 2 + (xx - centre) ** 2) / 40)
    wings = (np.abs(yy - 20) < 12) & (xx > 5) & (xx < 75)
    image[wings & (image < 30)] = 30
    objects = wings.astype(np.int32)
    assert ObjectSplitter("intensity").split(objects, image=image).max() == 2
    one = image.copy(); one[:, 36:] = np.where(wings[:, 36:], 30, 0)
    assert ObjectSplitter("intensity").split(objects, image=one).max() == 1


# -- object classes and their costs -------------------------------------------------------------

def _blobs(rng, n, size, striped, noise=2.0):
    """``n`` square objects per frame, half their pixels 60 and half 140: in stripes one pixel
    wide (``striped``) or in two blocks (left half, right half)."""
    objects = np.zeros((40, 40 * n), np.int32)
    image = np.full(objects.shape, 20.0)
    for k in range(n):
        rows, cols = slice(10, 10 + size), slice(40 * k + 5, 40 * k + 5 + size)
        objects[rows, cols] = k + 1
        patch = np.full((size, size), 60.0)
        if striped[k]:
            patch[:, 1::2] = 140
        else:
            patch[:, size // 2:] = 140
        image[rows, cols] = patch + rng.normal(0, noise, (size, size))
    return objects, image


def test_a_cheap_feature_suffices_when_size_tells_the_classes_apart():
    rng = np.random.default_rng(0)
    big, small = _blobs(rng, 6, 20, [False] * 6), _blobs(rng, 6, 8, [False] * 6)
    y = [{k: "fly" for k in range(1, 7)}, {k: "debris" for k in range(1, 7)}]
    clf = ObjectClassifier(cost_tradeoff=0.05).fit([big, small], y)
    # measured per object: the co-occurrences cost most, and are not bought
    assert clf.group_costs_["texture"] > max(clf.group_costs_["shape"],
                                             clf.group_costs_["intensity"])
    assert clf.groups_used_ and "texture" not in clf.groups_used_
    assert clf.cost_per_object() < clf.group_costs_["texture"]
    assert clf.predict(*_blobs(rng, 3, 20, [False] * 3)).tolist() == ["fly"] * 3
    assert clf.predict(*_blobs(rng, 3, 9, [False] * 3)).tolist() == ["debris"] * 3


def test_the_dear_texture_is_bought_when_only_it_tells_the_classes_apart():
    rng = np.random.default_rng(1)
    samples = [_blobs(rng, 6, 16, [k % 2 == 0 for k in range(6)], noise=0) for _ in range(2)]
    y = [{k: "striped" if (k - 1) % 2 == 0 else "flat" for k in range(1, 7)}] * 2
    costs = {"shape": 1.0, "intensity": 3.0, "texture": 30.0}
    clf = ObjectClassifier(cost_tradeoff=0.001, group_costs=costs).fit(samples, y)
    assert "texture" in clf.groups_used_
    test = _blobs(rng, 4, 16, [True, False, True, False], noise=0)
    assert clf.predict(*test).tolist() == ["striped", "flat", "striped", "flat"]
    # the same histogram: neither shape nor intensity statistics could have done it
    features = object_features(*test, ["intensity"])
    assert np.ptp(features["intensity:intensity_mean"]) < 3
    assert np.ptp(features["intensity:intensity_std"]) < 3


def test_a_pipeline_classifies_before_it_tracks_and_tracks_only_the_track_classes():
    rng = np.random.default_rng(3)
    big, small = _blobs(rng, 6, 20, [False] * 6), _blobs(rng, 6, 8, [False] * 6)
    y = [{k: "fly" for k in range(1, 7)}, {k: "debris" for k in range(1, 7)}]
    clf = ObjectClassifier(cost_tradeoff=0.05).fit([big, small], y)
    (flies, fly_image), (debris, debris_image) = _blobs(rng, 2, 20, [False] * 2), \
        _blobs(rng, 2, 8, [False] * 2)
    labels = np.where(np.hstack([flies, debris]) > 0, 2, 1)
    pipeline = ObjectPipeline(target=2, classifier=clf, tracker=ObjectTracker(search_range=5),
                              track_classes=("fly",))
    table = pipeline.frame_table(labels, np.hstack([fly_image, debris_image]), None, frame=0)
    assert list(table.columns[:4]) == ["frame", "object", "track", "class"]
    assert table["class"].tolist() == ["fly", "fly", "debris", "debris"]
    assert table["track"].tolist()[2:] == [-1, -1]          # debris is not tracked
    assert sorted(table["track"].tolist()[:2]) == [0, 1]


def test_classes_need_two_examples_and_labels_must_name_objects():
    objects, image = _blobs(np.random.default_rng(2), 3, 10, [False] * 3)
    with pytest.raises(ValueError, match=r"'debris' \(1\) have fewer than 2 labelled objects"):
        ObjectClassifier().fit([(objects, image)], [{1: "fly", 2: "fly", 3: "debris"}])
    with pytest.raises(ValueError, match=r"object\(s\) \[9\] are not in its label image"):
        ObjectClassifier().fit([(objects, image)], [{1: "fly", 9: "debris"}])


# -- tracks -------------------------------------------------------------------------------------

def _crossing(frame):
    """Two objects that cross at frame 10 (2 px apart): one moves along the columns, one down
    the rows."""
    a, b = (80.0, 10.0 + 7 * frame), (10.0 + 7 * frame, 82.0)
    return [a] if frame == 10 else [a, b]  # merged into one object where they meet


def test_two_objects_that_cross_keep_their_tracks():
    tracker = ObjectTracker(search_range=20, memory=3)
    ids = [tracker.link(frame, _crossing(frame)).tolist() for frame in range(21)]
    assert all(pair == [0, 1] for pair in ids[:10] + ids[11:])
    # the nearest-position rule alone swaps them after the crossing
    still = ObjectTracker(search_range=20, memory=3, motion="none")
    assert [still.link(frame, _crossing(frame)).tolist() for frame in range(21)][-1] == [1, 0]


def test_a_track_that_stops_after_a_jump_keeps_its_id_against_a_fragment():
    # an animal jumps 20 px a frame, stops at column 48; in the frame it lands, a fragment of
    # it (column 28) starts a track of its own. Expected with the whole last velocity, the
    # animal would be at 70: 22 px from where it stopped, 20 from the fragment's track, which
    # takes it. With half the velocity (the default) it is expected at 60: 12 px, it keeps it.
    frames = [[[50, 10]], [[50, 30]], [[50, 50], [50, 28]], [[50, 48]]]
    for weight, expected in ((0.5, [0]), (1.0, [1])):
        tracker = ObjectTracker(search_range=30, memory=2, velocity_weight=weight)
        ids = [tracker.link(frame, points).tolist() for frame, points in enumerate(frames)]
        assert ids[2] == [0, 1] and ids[3] == expected
    with pytest.raises(ValueError, match="velocity_weight must be between 0 and 1"):
        ObjectTracker(velocity_weight=2)


def test_tracks_link_the_weighted_centroids_of_a_grey_frame():
    # a bright body (columns 15-19) whose dim wing flips from its right to its left: the
    # centroid jumps 15 px, beyond the search range (a new track), the weighted one does not
    def frame(wing):
        labels = np.ones((20, 40), np.uint8); labels[5:10, 15:20] = labels[5:10, wing] = 2
        image = np.zeros((20, 40)); image[5:10, wing] = 1; image[5:10, 15:20] = 200
        return labels, image
    pipeline = ObjectPipeline(target=2, tracker=ObjectTracker(search_range=5))
    tables = [pipeline.frame_table(*frame(wing), None, t)
              for t, wing in enumerate((slice(20, 35), slice(0, 15)))]
    assert tables[1]["centroid-1"][0] - tables[0]["centroid-1"][0] == pytest.approx(-15)
    assert [table["track"].tolist() for table in tables] == [[0], [0]]
    no_frame = ObjectPipeline(target=2, tracker=ObjectTracker(search_range=5))
    assert [no_frame.frame_table(frame(wing)[0], None, None, t)["track"].tolist()
            for t, wing in enumerate((slice(20, 35), slice(0, 15)))] == [[0], [1]]


def test_a_replayed_tracker_continues_as_one_that_never_stopped():
    whole = ObjectTracker(20, 3)
    expected = [whole.link(frame, _crossing(frame)).tolist() for frame in range(21)]
    resumed = ObjectTracker(20, 3)
    resumed.replay(range(12), [_crossing(frame) for frame in range(12)])
    assert [resumed.link(f, _crossing(f)).tolist() for f in range(12, 21)] == expected[12:]


def test_frames_are_linked_in_order():
    tracker = ObjectTracker()
    tracker.link(3, [[1, 1]])
    with pytest.raises(ValueError, match="increasing order: frame 2 after frame 3"):
        tracker.link(2, [[1, 1]])


# -- tables on disk and the streaming writer ----------------------------------------------------

def test_tables_round_trip_as_csv_and_parquet_and_an_existing_table_is_refused(tmp_path):
    table = pd.DataFrame({"frame": [0, 1], "centroid-0": [1.5, 2.5], "class": ["fly", "debris"]})
    for name in ("objects.csv", "objects.parquet"):
        write_table(table, tmp_path / name)
        pd.testing.assert_frame_equal(read_table(tmp_path / name), table)
        with pytest.raises(FileExistsError, match="already exists; choose another file name"):
            write_table(table, tmp_path / name)
    with pytest.raises(ValueError, match=r"unknown format '\.xlsx'"):
        write_table(table, tmp_path / "objects.xlsx")


class _Frames:
    def __init__(self, frames):
        self.frames = frames

    def read(self, index):
        return self.frames[index]


def _crossing_labels(frame, size=160):
    """A 5x5 and a 7x7 square at the points of `_crossing`: apart in every frame but the 10th."""
    labels = np.ones((size, size), np.uint8)
    for (row, col), half in zip(_crossing(frame), (2, 3)):
        labels[int(row) - half:int(row) + half + 1, int(col) - half:int(col) + half + 1] = 2
    return labels


def _stream(path, frames, positions, *, stop_after=None):
    """Stream ``positions`` through an `ObjectTableWriter` (no frame writer), as the batch does."""
    pipeline = ObjectPipeline(target=2, tracker=ObjectTracker(20, 3))
    remembered = remember_frames(_Frames(frames))
    writer = ObjectTableWriter(None, path, pipeline, remembered, range(len(frames)),
                               {"input": "crossing"})
    done = writer.completed()
    for n, position in enumerate(p for p in positions if p not in done):
        if stop_after is not None and n == stop_after:
            return None
        labels = _crossing_labels(position)
        remembered.read(position)
        writer.write(position, labels)
    return writer.finish()


def test_an_interrupted_table_resumes_to_the_table_of_an_uninterrupted_run(tmp_path):
    frames = [np.full((160, 160), 9.0) for _ in range(21)]
    expected = _stream(tmp_path / "whole.csv", frames, range(21))
    assert _stream(tmp_path / "objects.csv", frames, range(21), stop_after=13) is None
    assert not (tmp_path / "objects.csv").exists()
    journal = tmp_path / ".objects.csv.journal"
    with open(journal, "a") as file:
        file.write('{"position": 13, "rows": {"fr')  # torn by a kill mid-write
    resumed = _stream(tmp_path / "objects.csv", frames, range(21))
    pd.testing.assert_frame_equal(resumed, expected)
    assert not journal.exists()
    columns = sorted(expected.groupby("track")["centroid-1"].apply(list).tolist(), key=len)
    assert np.allclose(columns[0], 82) and len(columns[0]) == 20  # no swap
    assert columns[1] == [10.0 + 7 * f for f in range(21)]        # it had the merger


def test_a_journal_of_another_run_is_refused_and_kept(tmp_path):
    TableJournal(tmp_path / "objects.csv", {"input": {"n_frames": 3000}})
    with pytest.raises(ValueError, match=r"input n_frames: 3000 there, 2999 now"):
        TableJournal(tmp_path / "objects.csv", {"input": {"n_frames": 2999}})
    assert (tmp_path / ".objects.csv.journal").exists()


# -- the command line ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def crossing_run(tmp_path_factory):
    """A 21-frame TIFF stack of two crossing squares and a pixel model trained on frame 0."""
    folder = tmp_path_factory.mktemp("objects_cli")
    rng = np.random.default_rng(0)
    labels = np.stack([_crossing_labels(f) for f in range(21)])
    frames = np.where(labels == 2, 200, 30).astype(np.uint8) + rng.integers(0, 10, labels.shape,
                                                                            dtype=np.uint8)
    frames[:, 130:132, 130:132] = 200  # a speck of debris in every frame (4 px)
    tifffile.imwrite(folder / "frames.tif", frames)
    scribbles = labels[0].copy()       # frame 0 labelled whole, but for the speck
    scribbles[120:, 120:] = 0
    model = PixelClassifier(n_estimators=10, random_state=0).fit(frames[0], scribbles)
    model.save(folder / "model.msc")
    return folder


@contextlib.contextmanager
def _interrupted_after(n_frames, monkeypatch):
    """Ctrl-C once ``n_frames`` frames are in the table (as a user's, between two frames)."""
    write, calls = ObjectTableWriter.write, []

    def interrupted(self, position, labels, probabilities=None):
        if len(calls) == n_frames:
            raise KeyboardInterrupt
        calls.append(position)
        write(self, position, labels, probabilities)

    monkeypatch.setattr(ObjectTableWriter, "write", interrupted)
    yield
    monkeypatch.setattr(ObjectTableWriter, "write", write)


def _predict(folder, *extra):
    return main(["predict", str(folder / "model.msc"), str(folder / "frames.tif"), "--quiet",
                 *map(str, extra)])


def test_cli_writes_the_table_with_tracks_and_min_size(crossing_run, tmp_path):
    assert _predict(crossing_run, "--table", tmp_path / "objects.csv", "--tracks",
                    "--search-range", 20, "--memory", 3, "--min-size", 10) == 0
    table = read_table(tmp_path / "objects.csv")
    assert sorted(table["frame"].unique()) == list(range(21))
    assert table.groupby("frame").size().tolist() == [2] * 10 + [1] + [2] * 10  # no debris
    assert sorted(table["area"].drop(table.index[table["frame"] == 10]).unique()) == [25, 49]
    assert sorted(table["track"].unique()) == [0, 1]
    # no swap: one track stays on row 80, the other moves down the rows (merged in frame 10)
    assert sorted(table.groupby("track")["centroid-0"].nunique()) == [1, 20]


def test_cli_resumes_an_interrupted_table(crossing_run, tmp_path, monkeypatch):
    args = ("--table", tmp_path / "objects.parquet", "--tracks", "--search-range", 20,
            "--memory", 3, "--min-size", 10, "-o", tmp_path / "masks")
    assert _predict(crossing_run, *args) == 0
    expected = read_table(tmp_path / "objects.parquet")
    (tmp_path / "objects.parquet").unlink()
    with _interrupted_after(12, monkeypatch):
        assert _predict(crossing_run, *args, "--overwrite") == 130
    assert not (tmp_path / "objects.parquet").exists()
    assert _predict(crossing_run, *args) == 0
    pd.testing.assert_frame_equal(read_table(tmp_path / "objects.parquet"), expected)


def test_cli_classifies_objects_from_an_object_label_file(crossing_run, tmp_path):
    labels = tmp_path / "labels.csv"
    pd.DataFrame({"frame": [0, 0, 5, 5, 2, 3], "centroid-0": [80, 10, 80, 45, 130, 131],
                  "centroid-1": [10, 80, 45, 80, 130, 131],
                  "class": ["fly", "fly", "fly", "fly", "debris", "debris"]}).to_csv(labels,
                                                                                    index=False)
    assert _predict(crossing_run, "--table", tmp_path / "objects.csv", "--object-labels", labels,
                    "--tracks", "--track-class", "fly", "--search-range", 20) == 0
    table = read_table(tmp_path / "objects.csv")
    assert set(table["class"][table["area"] == 4]) == {"debris"}
    assert set(table["class"][table["area"] >= 25]) == {"fly"}
    assert (table["track"][table["class"] == "debris"] == -1).all()
    assert sorted(table["track"][table["class"] == "fly"].unique()) == [0, 1]


@pytest.mark.parametrize("rows, message", [
    ("frame,centroid-0,centroid-1,class\n0,80,10,fly\n0,30,30,debris\n",
     "line 3: frame 0 at row 30, column 30 is on no object"),
    ("frame,centroid-0,centroid-1,class\n0,80,10,fly\n0,10,80,fly\n2,130,130,debris\n",
     r"class\(es\) 'debris' \(1\) have fewer than 2 labelled objects"),
    ("frame,row,col,class\n0,80,10,fly\n", "lacks column\\(s\\) centroid-0, centroid-1"),
    ("frame,centroid-0,centroid-1,class\n99,80,10,fly\n", "line 2: frame 99 is not in"),
])
def test_cli_refuses_bad_object_labels_in_one_line(crossing_run, tmp_path, capsys, rows, message):
    (tmp_path / "labels.csv").write_text(rows)
    assert _predict(crossing_run, "--table", tmp_path / "objects.csv", "--object-labels",
                    tmp_path / "labels.csv") == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert pytest.importorskip("re").search(message, err), err
    assert not (tmp_path / "objects.csv").exists()


def test_cli_refuses_an_existing_table_and_a_changed_input_on_resume(crossing_run, tmp_path,
                                                                      capsys, monkeypatch):
    (tmp_path / "objects.csv").write_text("mine\n")
    assert _predict(crossing_run, "--table", tmp_path / "objects.csv") == 1
    assert "objects.csv already exists" in capsys.readouterr().err
    assert (tmp_path / "objects.csv").read_text() == "mine\n"      # nothing lost
    # a run on 21 frames is interrupted; then the input has 20 frames
    frames = tifffile.imread(crossing_run / "frames.tif")
    tifffile.imwrite(tmp_path / "frames.tif", frames)
    command = ["predict", str(crossing_run / "model.msc"), str(tmp_path / "frames.tif"),
               "--quiet", "--table", str(tmp_path / "t.csv")]
    with _interrupted_after(5, monkeypatch):
        assert main(command) == 130
    journal = tmp_path / ".t.csv.journal"
    lines = journal.read_text()
    tifffile.imwrite(tmp_path / "frames.tif", frames[:20])
    capsys.readouterr()
    assert main(command) == 1
    err = capsys.readouterr().err
    assert "input n_frames: 21 there, 20 now" in err and "Traceback" not in err
    assert journal.read_text() == lines      # the 5 frames done are kept


def test_cli_never_writes_the_table_over_an_input_even_with_overwrite(crossing_run, tmp_path,
                                                                      capsys):
    labels = tmp_path / "labels.csv"
    labels.write_text("frame,centroid-0,centroid-1,class\n0,80,10,fly\n")
    for table in (labels, crossing_run / "model.msc"):
        before = table.read_bytes()
        assert _predict(crossing_run, "--table", table, "--object-labels", labels,
                        "--overwrite") == 1
        err = capsys.readouterr().err
        assert "would destroy it" in err and "Traceback" not in err
        assert table.read_bytes() == before


def test_cli_object_options_need_a_table(crossing_run, capsys):
    assert _predict(crossing_run, "--tracks", "-o", "x") == 1
    assert "--tracks need --table PATH" in capsys.readouterr().err
