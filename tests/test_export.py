"""Exports of predicted frames (`msclassify.pixel.FrameExport`, `open_export`,
`msclassify.io.TiffStackWriter`) on hand-checkable frames."""

import numpy as np
import pytest
import tifffile

from msclassify.io import FrameWriteError, TiffStackWriter, open_writer, read_label_stack
from msclassify.pixel import FrameExport, open_export

LABELS = np.array([[2, 2, 1, 1, 2],
                   [1, 1, 1, 1, 2],
                   [3, 1, 2, 1, 1],
                   [3, 1, 1, 2, 1]], np.uint8)
CLASSES = [1, 2, 3]


def probabilities():
    """Probabilities whose column k is (class k + 1) / 10 everywhere, plus a pixel index."""
    proba = np.zeros(LABELS.shape + (3,), np.float32)
    for column in range(3):
        proba[..., column] = (column + 1) / 10 + np.arange(LABELS.size).reshape(LABELS.shape) / 1e3
    return proba


def test_labels_pass_through_in_the_classes_dtype():
    out = FrameExport().convert(LABELS, None, CLASSES)
    np.testing.assert_array_equal(out, LABELS)
    assert out.dtype == np.uint8
    assert FrameExport().dtype([1, 300]) == np.uint16


def test_mask_is_0_or_255_for_one_class():
    out = FrameExport("mask", target=3).convert(LABELS, None, CLASSES)
    assert out.dtype == np.uint8
    assert out.tolist() == [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [255, 0, 0, 0, 0],
                            [255, 0, 0, 0, 0]]


def test_instances_are_8_connected_objects_of_one_class_numbered_in_scan_order():
    out = FrameExport("instances", target=2).convert(LABELS, None, CLASSES)
    assert out.dtype == np.uint16
    # (0,0)-(0,1) one object; (0,4)-(1,4) one; (2,2) and (3,3) touch diagonally: one
    assert out.tolist() == [[1, 1, 0, 0, 2], [0, 0, 0, 0, 2], [0, 0, 3, 0, 0],
                            [0, 0, 0, 3, 0]]
    small = FrameExport("instances", target=2, min_size=3).convert(LABELS, None, CLASSES)
    assert small.max() == 0                       # every object has 2 pixels
    kept = FrameExport("instances", target=2, min_size=2).convert(LABELS, None, CLASSES)
    np.testing.assert_array_equal(kept, out)


def test_probability_picks_the_column_of_the_class():
    out = FrameExport("probability", target=3).convert(LABELS, probabilities(), CLASSES)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, probabilities()[..., 2])
    with pytest.raises(ValueError, match="needs the class probabilities"):
        FrameExport("probability", target=3).convert(LABELS, None, CLASSES)
    assert FrameExport("probability", target=3).needs_probabilities
    assert not FrameExport("mask", target=3).needs_probabilities


def test_too_many_objects_for_uint16_is_a_clear_error():
    dots = np.zeros((512, 512), np.uint8)
    dots[::2, ::2] = 2                            # 65536 single-pixel objects
    with pytest.raises(ValueError, match="65536 objects of class 2.*raise the minimum"):
        FrameExport("instances", target=2).convert(dots, None, [1, 2])


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "outline"}, "export kind must be one of labels, mask, instances, probability"),
    ({"kind": "mask"}, "needs the class to export"),
    ({"kind": "instances", "target": 2, "min_size": -1}, "min_size must be an integer >= 0"),
    ({"kind": "mask", "target": True}, "needs the class to export"),
])
def test_bad_exports(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FrameExport(**kwargs)
    with pytest.raises(ValueError, match=r"class 4 is not one the model predicts \(1, 2, 3\)"):
        FrameExport("mask", target=4).check_classes(CLASSES)


def test_open_export_writes_a_resumable_folder_of_float_probabilities(tmp_path):
    export = FrameExport("probability", target=2)
    with open_export(tmp_path / "p", 2, LABELS.shape, export, CLASSES,
                     names=["a", "b"]) as writer:
        assert writer.needs_probabilities and writer.dtype == np.uint8
        writer.write(1, LABELS, probabilities())
    assert open_export(tmp_path / "p", 2, LABELS.shape, export, CLASSES,
                       names=["a", "b"]).completed() == [1]
    np.testing.assert_allclose(tifffile.imread(tmp_path / "p" / "b.tif"),
                               probabilities()[..., 1])


def test_open_export_to_zarr_and_class_values_with_all_probabilities(tmp_path):
    with open_export(tmp_path / "m.zarr", 1, LABELS.shape, FrameExport("mask", target=2),
                     CLASSES, format="zarr") as writer:
        writer.write(0, LABELS)
    np.testing.assert_array_equal(read_label_stack(tmp_path / "m.zarr").read(0),
                                  np.where(LABELS == 2, 255, 0))
    with open_export(tmp_path / "all", 1, LABELS.shape, FrameExport(), CLASSES,
                     n_classes=3) as writer:
        assert writer.needs_probabilities
        writer.write(0, LABELS, probabilities())
    stored = tifffile.imread(tmp_path / "all" / "probabilities" / "frame_000000.tif")
    np.testing.assert_allclose(stored, probabilities())
    with pytest.raises(ValueError, match="stored only next to class labels"):
        open_export(tmp_path / "x", 1, LABELS.shape, FrameExport("mask", target=2), CLASSES,
                    n_classes=3)
    with pytest.raises(ValueError, match="format must be one of"):
        open_export(tmp_path / "x", 1, LABELS.shape, FrameExport(), CLASSES, format="png")


def test_float_writer_accepts_floats_and_integer_writers_still_refuse_them(tmp_path):
    writer = open_writer(tmp_path / "f", 1, (2, 2), dtype=np.float32)
    writer.write(0, np.full((2, 2), 0.25))
    assert writer.completed() == [0]
    with pytest.raises(TypeError, match="label dtype must be an integer type"):
        open_writer(tmp_path / "g", 1, (2, 2), dtype=np.float64)
    with pytest.raises(TypeError, match="labels must be integers"):
        open_writer(tmp_path / "h", 1, (2, 2)).write(0, np.zeros((2, 2), np.float32))


def test_tiff_stack_appears_only_when_complete(tmp_path):
    path = tmp_path / "masks.tif"
    writer = TiffStackWriter(path, 3, (2, 3), np.uint16)
    writer.write(0, np.zeros((2, 3), np.uint16))
    with pytest.raises(ValueError, match="in frame order: expected frame 1, got 2"):
        writer.write(2, np.zeros((2, 3), np.uint16))
    with pytest.raises(ValueError, match="shape"):
        writer.write(1, np.zeros((3, 3), np.uint16))
    writer.write(1, np.ones((2, 3), np.uint16))
    assert not path.exists() and writer.completed() == []
    writer.close()                                  # cancelled before the last frame
    assert list(tmp_path.iterdir()) == []
    with TiffStackWriter(path, 2, (2, 3), np.uint16) as writer:
        for index in range(2):
            writer.write(index, np.full((2, 3), index + 7))
    stack = tifffile.imread(path)
    assert stack.dtype == np.uint16 and stack[:, 0, 0].tolist() == [7, 8]
    assert [p.name for p in tmp_path.iterdir()] == ["masks.tif"]
    with pytest.raises(FrameWriteError, match="already exists"):
        TiffStackWriter(path, 2, (2, 3), np.uint8)
