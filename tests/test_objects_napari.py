"""The object table dock in a real viewer: measure a segmentation, row -> object, object -> row,
the Tracks layer, saving the table; object classes labelled by real mouse clicks, trained,
shown in the table and as a layer, and the saved labels used by the CLI.

Run: ``xvfb-run -a python -m pytest tests/test_objects_napari.py``.
Set ``MSCLASSIFY_SCREENSHOT=1`` to also write ``docs/napari_objects.png``.
"""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tifffile

from msclassify.cli import main
from msclassify.objects import ObjectTracker, read_object_labels, read_table
from msclassify.pixel import PixelClassifier
from msclassify_napari._frame_labels import FrameLabels
from msclassify_napari._object_frames import (ClassFrames, ObjectFrames, ObjectLabels,
                                              frames_to_measure, measure_frames,
                                              object_pipeline, train_classifier)
from msclassify_napari._objects import ObjectTableWidget, tracks_data
from msclassify_napari._reader import LazyFrames

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "plugins" / "msclassify_napari" / "napari.yaml"
TIMEOUT = 120_000  # ms


def moving_squares(n_frames=5):
    """Two 4x4 squares of class 2 moving right by 3 px a frame; images 100 inside, 0 outside."""
    labels = np.ones((n_frames, 40, 60), np.uint8)
    for t in range(n_frames):
        labels[t, 5:9, 5 + 3 * t:9 + 3 * t] = 2
        labels[t, 25:29, 40 - 3 * t:44 - 3 * t] = 2
    return labels, np.where(labels == 2, 100, 0).astype(np.uint8)


def lazy_objects(labels, image, **options):
    return LazyFrames(ObjectFrames(labels, image, object_pipeline(2, **options)))


def test_the_table_of_a_stack_and_its_tracks_frame_by_frame():
    labels, image = moving_squares()
    objects = lazy_objects(labels, image)
    table = pd.concat([rows for _, rows in measure_frames(objects, range(5), ObjectTracker())],
                      ignore_index=True)
    assert len(table) == 10 and objects.shape == labels.shape
    assert set(table["area"]) == {16}
    data = tracks_data(table)
    assert data.shape == (10, 4)
    first = data[data[:, 0] == 0]
    assert first[:, 3].tolist() == [6.5 + 3 * t for t in range(5)]  # column of track 0


def test_only_written_frames_of_a_lazy_segmentation_are_measured():
    segmentation = FrameLabels(1000, (40, 60))
    labels, _ = moving_squares(1)
    segmentation[700] = labels[0]
    assert frames_to_measure(segmentation) == [700]
    objects = lazy_objects(segmentation, None)
    [(frame, table)] = list(measure_frames(objects, frames_to_measure(segmentation)))
    assert frame == 700 and table["area"].tolist() == [16, 16]
    assert segmentation.stored_frames() == [700]    # reading did not allocate frames


def test_object_labels_toggle_and_make_an_object_label_file(tmp_path):
    labels, image = moving_squares(3)
    objects = lazy_objects(labels, image)
    clicked = ObjectLabels()
    frame0 = np.asarray(objects.frame(0))
    assert clicked.toggle(frame0, 0, (6, 6), "fly") == "labelled"
    assert clicked.toggle(frame0, 0, (7, 7), "debris") == "relabelled"   # the same object
    assert clicked.toggle(frame0, 0, (26.4, 41.2), "fly") == "labelled"
    assert clicked.toggle(frame0, 0, (20, 20), "fly") == "no object"
    assert clicked.toggle(frame0, 0, (25, 42), "fly") == "unlabelled"
    assert clicked.table().values.tolist() == [[0, 7.0, 7.0, "debris"]]
    from msclassify.objects import write_object_labels
    write_object_labels(clicked.table(), tmp_path / "labels.csv")
    assert read_object_labels(tmp_path / "labels.csv")[["frame", "class"]].values.tolist() == [
        [0, "debris"]]
    with pytest.raises(ValueError, match="already exists"):
        write_object_labels(clicked.table(), tmp_path / "labels.csv")
    # objects found again with a size filter that drops them: the label names what is wrong
    with pytest.raises(ValueError, match="object label line 1: frame 0 at row 7, column 7 is on "
                                         "no object"):
        train_classifier(clicked, lazy_objects(labels, image, min_size=20))
    with pytest.raises(ValueError, match="no objects are labelled yet"):
        train_classifier(ObjectLabels(), objects)
    # labels made on a movie, trained on a single image: refused, not read from frame 0
    later = ObjectLabels()
    for t, place, name in ((2, (6, 12), "fly"), (2, (26, 35), "debris")):
        later.toggle(np.asarray(objects.frame(t)), t, place, name)
    with pytest.raises(ValueError, match="point at frame 2, but the segmentation has 1 frame"):
        train_classifier(later, lazy_objects(labels[2], image[2]))
    # intensity features without the image say so
    with pytest.raises(ValueError, match="need the image the objects were found on"):
        train_classifier(later, lazy_objects(labels, None))


def test_class_frames_colour_each_object_by_its_class():
    labels, image = moving_squares(2)
    objects = lazy_objects(labels, image)
    classes = ClassFrames(objects, ["fly", "debris"])
    assert not classes.read(1).any()                       # not classified yet
    classes.set_classes(1, ["debris", "fly"])
    frame = classes.read(1)
    assert frame[5, 8] == 2 and frame[25, 37] == 1 and frame[0, 0] == 0
    assert classes.names == ["fly", "debris"]


# -- the dock in a real window ---------------------------------------------------------------

def flies_and_debris(n_frames=40, height=96, width=128):
    """Two bright bars 5x17 ("flies") moving, two dimmer 4x4 squares ("debris") standing
    still, on a dark noisy floor; class 2 inside them, 1 outside."""
    labels = np.ones((n_frames, height, width), np.uint8)
    frames = np.full(labels.shape, 30, np.uint8)
    for t in range(n_frames):
        for rows, cols, value in ((slice(15, 20), slice(5 + t, 22 + t), 200),
                                  (slice(60, 65), slice(100 - t, 117 - t), 200),
                                  (slice(40, 44), slice(60, 64), 120),
                                  (slice(80, 84), slice(20, 24), 120)):
            labels[t, rows, cols] = 2
            frames[t, rows, cols] = value
    frames += np.random.default_rng(0).integers(0, 10, labels.shape, dtype=np.uint8)
    return labels, frames


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """The frames as a TIFF stack and a pixel model that segments them."""
    folder = tmp_path_factory.mktemp("objects_napari")
    labels, frames = flies_and_debris()
    tifffile.imwrite(folder / "frames.tif", frames)
    model = PixelClassifier("fast", n_estimators=10, random_state=0).fit(frames[0], labels[0])
    model.save(folder / "model.msc")
    return folder, model, labels


@pytest.fixture
def plugin():
    from npe2 import PluginManager, PluginManifest
    manager = PluginManager.instance()
    if "msclassify" not in manager:
        manager.register(PluginManifest.from_file(MANIFEST))
    return manager


def click(viewer, qtbot, point):
    """A real left click (Qt press and release on the canvas) at data point (row, column)."""
    from benchmarks.napari_session import canvas_position, canvas_widget, press, release
    widget, position = canvas_widget(viewer), canvas_position(viewer, point)
    press(widget, position)
    qtbot.wait(20)
    release(widget, position)
    qtbot.wait(20)


@pytest.mark.gui
def test_dock_measures_labels_by_clicks_trains_and_shows_classes(make_napari_viewer, plugin,
                                                                 qtbot, scene, tmp_path,
                                                                 monkeypatch):
    from benchmarks.napari_session import EventLoopMonitor, bare_repaint_stall, cpu_slowdown

    folder, model, truth = scene
    viewer = make_napari_viewer(show=True)
    [image] = viewer.open(str(folder / "frames.tif"), plugin="msclassify")
    assert isinstance(image.data, LazyFrames)
    segmentation = FrameLabels(*image.data.shape[:1], image.data.shape[1:])
    for t in range(image.data.shape[0]):
        segmentation[t] = model.predict(image.data[t])
    assert np.array_equal(segmentation[:], truth)
    viewer.add_labels(segmentation, name="frames segmentation")

    # the dock never turns a stack into one array: it works frame by frame
    def whole_stack(self, *args, **kwargs):
        raise AssertionError("the whole stack was turned into an array")
    monkeypatch.setattr(FrameLabels, "__array__", whole_stack)
    monkeypatch.setattr(LazyFrames, "__array__", whole_stack)

    _, dock = viewer.window.add_plugin_dock_widget("msclassify", "Object table and tracks")
    dock = dock.widget                 # (the module is imported: built at once, `_dock`)
    assert isinstance(dock, ObjectTableWidget)
    dock.labels_choice.setCurrentText("frames segmentation")
    dock.image_choice.setCurrentText("frames")
    with qtbot.waitSignal(dock.measured, timeout=TIMEOUT):
        dock.measure()
    n_frames = truth.shape[0]
    assert dock.model.rowCount() == 4 * n_frames
    assert viewer.layers["frames segmentation tracks"].data.shape[0] == 4 * n_frames

    # row -> object: the 8th row is frame 1's last object
    dock.view.selectRow(7)
    assert viewer.dims.current_step[0] == 1
    assert dock.objects_layer.selected_label == int(dock.table["object"].iloc[7])

    # label by real clicks on frame 0: two flies, one debris, a click on the floor
    viewer.dims.set_current_step(0, 0)
    viewer.reset_view()
    qtbot.wait(50)
    dock.label_check.setChecked(True)
    assert viewer.layers.selection.active.name == dock.objects_layer.name
    dock.class_choice.setCurrentText("fly")
    click(viewer, qtbot, (17, 13))
    click(viewer, qtbot, (62, 108))
    # object -> row: the click selected the row of the object clicked
    [selected] = dock.view.selectionModel().selectedRows()
    assert dock.table["frame"].iloc[selected.row()] == 0
    assert dock.table["centroid-0"].iloc[selected.row()] == pytest.approx(62)
    dock.class_choice.setCurrentText("debris")
    click(viewer, qtbot, (41, 61))
    click(viewer, qtbot, (30, 40))
    assert "on no object" in dock.status.text()
    assert dock.labels.table()["class"].tolist() == ["fly", "fly", "debris"]
    markers = viewer.layers["frames segmentation object labels"]
    assert len(markers.data) == 3
    assert not np.allclose(markers.border_color[0], markers.border_color[2])   # class colours

    # one debris is too few: a clear message, no traceback
    dock.train()
    qtbot.waitUntil(lambda: dock.train_button.isEnabled(), timeout=TIMEOUT)
    assert "'debris' (1) have fewer than 2 labelled objects" in dock.status.text()

    # a click on a labelled object with its class unlabels it; a second click labels it again
    click(viewer, qtbot, (41, 61))
    assert len(dock.labels) == 2 and "unlabelled" in dock.status.text()
    click(viewer, qtbot, (41, 61))
    click(viewer, qtbot, (81, 21))
    assert dock.labels.table()["class"].tolist() == ["fly", "fly", "debris", "debris"]

    monitor = EventLoopMonitor()
    try:
        floor = bare_repaint_stall(viewer, monitor)
        monitor.mark()
        with qtbot.waitSignal(dock.classified, timeout=TIMEOUT):
            dock.train()
        qtbot.wait(30)
        stall = monitor.longest_gap()[0]
    finally:
        monitor.stop()
    table = dock.table
    assert set(table["class"][table["area"] > 50]) == {"fly"}
    assert set(table["class"][table["area"] <= 16]) == {"debris"}
    assert "class" in dock.model.columns
    assert dock.model.data(dock.model.index(0, dock.model.columns.index("class"))) in ("fly",
                                                                                      "debris")
    layer = viewer.layers["frames segmentation object classes"]
    fly, debris = (dock.class_names().index(name) + 1 for name in ("fly", "debris"))
    for frame in (0, n_frames - 1):     # every frame has its classes, the last one too
        classes = np.asarray(layer.data[frame])
        assert classes[17, 13 + frame] == fly and classes[41, 61] == debris
        assert classes[30, 40] == 0
    # the table and the window stayed responsive while training and classifying
    slowdown = cpu_slowdown()
    assert stall < floor + 0.1 * max(1.0, slowdown), (stall, floor, slowdown)

    # the labels are an object-label file the CLI reads: the same classes
    dock.save_labels(str(tmp_path / "labels.csv"))
    assert len(read_object_labels(tmp_path / "labels.csv")) == 4
    assert main(["predict", str(folder / "model.msc"), str(folder / "frames.tif"), "--quiet",
                 "--table", str(tmp_path / "cli.csv"), "--object-labels",
                 str(tmp_path / "labels.csv")]) == 0
    cli = read_table(tmp_path / "cli.csv")
    assert cli["class"].tolist() == table["class"].tolist()
    dock.save(str(tmp_path / "objects.csv"))
    assert read_table(tmp_path / "objects.csv")["class"].tolist() == table["class"].tolist()

    # loading the file gives the same labels back
    dock.labels = ObjectLabels()
    dock.load_labels(str(tmp_path / "labels.csv"))
    assert len(dock.labels) == 4 and len(markers.data) == 4

    if os.environ.get("MSCLASSIFY_SCREENSHOT"):
        import imageio.v3 as iio
        qtbot.wait(200)
        iio.imwrite(REPO / "docs" / "napari_objects_synthetic.png",
                    viewer.screenshot(canvas_only=False, flash=False))


@pytest.mark.gui
def test_dock_on_a_single_image(make_napari_viewer, plugin, qtbot, tmp_path):
    labels, frames = flies_and_debris(1)
    viewer = make_napari_viewer()
    viewer.add_image(frames[0], name="photo")
    viewer.add_labels(labels[0], name="photo segmentation")
    viewer.add_image(frames[0, :50], name="crop")
    dock = ObjectTableWidget(viewer)
    dock.labels_choice.setCurrentText("photo segmentation")
    dock.image_choice.setCurrentText("crop")
    dock.measure()
    assert dock.status.text() == ("the image 'crop' is 50x128 but the segmentation 'photo "
                                  "segmentation' is 96x128: choose the image it was made from")
    dock.image_choice.setCurrentText("photo")
    with qtbot.waitSignal(dock.measured, timeout=TIMEOUT):
        dock.measure()
    assert dock.model.rowCount() == 4 and dock.objects_layer.data.ndim == 2
    # nothing to link on a single image: no Tracks layer giving the viewer a time axis
    assert "photo segmentation tracks" not in viewer.layers and viewer.dims.ndim == 2
    dock.label_check.setChecked(True)
    for name, points in (("fly", [(17, 13), (62, 108)]), ("debris", [(41, 61), (81, 21)])):
        dock.class_choice.setCurrentText(name)
        for point in points:
            dock.click(point)
    assert viewer.layers["photo segmentation object labels"].data.shape == (4, 2)
    with qtbot.waitSignal(dock.classified, timeout=TIMEOUT):
        dock.train()
    classes = viewer.layers["photo segmentation object classes"].data
    assert classes.ndim == 2 and classes[17, 13] == dock.class_names().index("fly") + 1
    assert dock.table.sort_values("area")["class"].tolist() == ["debris"] * 2 + ["fly"] * 2


# -- defects found in review (each test failed before its fix) ------------------------------

def _measured_dock(viewer, qtbot, n_frames=12, **options):
    """A dock that measured `flies_and_debris` (a FrameLabels segmentation, as the pixel
    classifier widget makes for a movie)."""
    labels, frames = flies_and_debris(n_frames)
    viewer.add_image(frames, name="frames")
    segmentation = FrameLabels(n_frames, labels.shape[1:])
    for t in range(n_frames):
        segmentation[t] = labels[t]
    layer = viewer.add_labels(segmentation, name="frames segmentation")
    dock = ObjectTableWidget(viewer)
    dock.labels_choice.setCurrentText("frames segmentation")
    dock.image_choice.setCurrentText("frames")
    dock.min_size.setValue(options.get("min_size", 0))
    with qtbot.waitSignal(dock.measured, timeout=TIMEOUT):
        dock.measure()
    return dock, layer


def _label_two_of_each(dock):
    dock.label_check.setChecked(True)
    for name, points in (("fly", [(17, 13), (62, 108)]), ("debris", [(41, 61), (81, 21)])):
        dock.class_choice.setCurrentText(name)
        for point in points:
            dock.click((0,) + point)
    assert len(dock.labels) == 4


@pytest.mark.gui
def test_painting_the_segmentation_after_measure_asks_to_measure_again(make_napari_viewer,
                                                                       qtbot):
    viewer = make_napari_viewer()
    dock, layer = _measured_dock(viewer, qtbot)
    _label_two_of_each(dock)
    # the user paints a new blob of class 2 on frame 8 (not on screen) with the brush
    layer.brush_size = 6
    layer.paint((8, 88, 100), 2)
    assert "changed since Measure" in dock.status.text()
    dock.train()
    qtbot.waitUntil(lambda: dock.train_button.isEnabled(), timeout=TIMEOUT)
    assert "changed since Measure" in dock.status.text()
    assert "measure again" in dock.status.text().lower()
    assert "class" not in dock.table or (dock.table["class"] == "").all()
    # a click on the painted frame says so too (no exception in the mouse callback)
    dock.click((8, 88, 100))
    assert "changed since Measure" in dock.status.text()

    # measured again: classes for all, the new blob a row of the table
    with qtbot.waitSignal(dock.measured, timeout=TIMEOUT):
        dock.measure()
    assert (dock.table["frame"] == 8).sum() == 5
    with qtbot.waitSignal(dock.classified, timeout=TIMEOUT):
        dock.train()
    assert (dock.table["class"] != "").all()

    # changed without a paint event (a script, another dock writing the frames): the objects
    # are found again when classifying, and differ: said, and no partial class column
    blob = np.asarray(layer.data[9]).copy()
    blob[85:92, 40:50] = 2
    layer.data[9] = blob
    with qtbot.waitSignal(dock.classified, timeout=TIMEOUT, raising=False):
        dock.train()
    qtbot.waitUntil(lambda: dock.train_button.isEnabled(), timeout=TIMEOUT)
    assert "frame 9" in dock.status.text() and "measure again" in dock.status.text().lower()
    assert (dock.table["class"] == "").all()


@pytest.mark.gui
def test_a_click_during_a_second_measure_uses_the_table_on_screen(make_napari_viewer, qtbot,
                                                                   monkeypatch):
    import threading

    import msclassify_napari._objects as objects_module

    viewer = make_napari_viewer()
    dock, _ = _measured_dock(viewer, qtbot)
    assert dock.model.rowCount() == 4 * 12
    go = threading.Event()

    def held(*args, **kwargs):
        go.wait(TIMEOUT / 1000)
        yield from measure_frames(*args, **kwargs)
    monkeypatch.setattr(objects_module, "measure_frames", held)
    dock.min_size.setValue(20)             # the debris goes: the flies are renumbered 1, 2
    with qtbot.waitSignal(dock.measured, timeout=TIMEOUT):
        dock.measure()
        dock.click((0, 62, 108))           # the second fly, while measuring
        [selected] = dock.view.selectionModel().selectedRows()
        assert dock.table["centroid-0"].iloc[selected.row()] == pytest.approx(62)
        assert dock.objects_layer.selected_label == dock.table["object"].iloc[selected.row()]
        go.set()
    assert dock.model.rowCount() == 2 * 12
    dock.click((0, 62, 108))
    [selected] = dock.view.selectionModel().selectedRows()
    assert dock.table["centroid-0"].iloc[selected.row()] == pytest.approx(62)


@pytest.mark.gui
def test_frames_are_the_segmentations_first_axis_in_a_viewer_of_more_dimensions(
        make_napari_viewer, qtbot):
    viewer = make_napari_viewer()
    viewer.add_image(np.zeros((3, 12, 96, 128), np.uint8), name="4d")   # viewer axes: 4
    dock, _ = _measured_dock(viewer, qtbot)
    other = viewer.dims.current_step[0]
    dock.view.selectRow(4 * 5)                      # frame 5's first object
    assert viewer.dims.current_step[1] == 5 and viewer.dims.current_step[0] == other
    assert dock._current_frame() == 5
    assert dock.objects_layer.show_selected_label          # the row's object alone
    dock.click((5, 30, 40))                                 # beside the objects: all again
    assert not dock.objects_layer.show_selected_label
    assert not dock.view.selectionModel().selectedRows()


def test_the_table_view_shows_a_colour_images_intensity_per_channel():
    from msclassify_napari._objects import TableModel
    model = TableModel()
    model.set_table(pd.DataFrame({"frame": [0], "object": [1], "intensity_mean-0": [1.0],
                                  "intensity_mean-1": [2.0], "intensity_max-0": [3.0]}))
    assert model.columns == ["frame", "object", "intensity_mean-0", "intensity_mean-1"]


@pytest.mark.gui
def test_multiscale_labels_are_not_offered_to_the_object_dock(make_napari_viewer):
    viewer = make_napari_viewer()
    labels, frames = flies_and_debris(1)
    viewer.add_image(frames[0], name="photo")
    viewer.add_labels([labels[0], labels[0, ::2, ::2]], name="pyramid", multiscale=True)
    viewer.add_labels(labels[0], name="photo segmentation")
    dock = ObjectTableWidget(viewer)
    offered = [dock.labels_choice.itemText(i) for i in range(dock.labels_choice.count())]
    assert offered == ["photo segmentation"]
