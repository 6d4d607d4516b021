"""The napari plugin in a real viewer (Xvfb in CI): manifest, sample data, reader, the
pixel-classifier widget (train, live update, apply to all frames, files) and the tabular widget.

Run: ``xvfb-run -a python -m pytest tests/test_napari_plugin.py``.
Set ``MSCLASSIFY_SCREENSHOT=1`` to also write ``docs/napari_widget.png``.
"""

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
import tifffile
from qtpy import sip
from scipy import ndimage

from benchmarks.napari_session import (CanvasPaints, EventLoopMonitor, bare_repaint_stall,
                                       cpu_slowdown, stroke)
from msclassify import load_model
from msclassify.datasets import load_sample_flies, sample_data_path
from msclassify.metrics import label_instances, seg_score
from msclassify.pixel import FrameExport
from msclassify_napari._controller import (CLASS_NAMES_KEY, PREDICT, RETRAIN, TRAIN,
                                          class_colors, color_rgb)
from msclassify_napari._reader import LazyFrames
from msclassify_napari._tabular_widget import TabularWidget
from msclassify_napari._widget import PixelClassifierWidget

pytestmark = pytest.mark.gui

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "plugins" / "msclassify_napari" / "napari.yaml"
TABULAR = sample_data_path("tabular")
JOB_TIMEOUT = 300_000   # ms; numba compilation and a loaded CI machine make the first job slow
FLY, BACKGROUND = 2, 1
# Measured with 30 trees: SEG 0.845 from the sample scribbles (100 trees: 0.845; mu = 0: 0.857),
# 0.85-0.86 from the points `fly_and_floor_points` paints.
MIN_SEG = 0.75


@pytest.fixture
def plugin():
    """The npe2 plugin manager with msclassify registered (installed or not)."""
    from npe2 import PluginManager, PluginManifest
    manager = PluginManager.instance()
    if "msclassify" not in manager:
        manager.register(PluginManifest.from_file(MANIFEST))
    return manager


@pytest.fixture
def flies():
    return load_sample_flies()


def pixel_widget(viewer):
    _, dock = viewer.window.add_plugin_dock_widget("msclassify", "Pixel classifier")
    widget = dock.widget               # (the module is imported: built at once, `_dock`)
    assert isinstance(widget, PixelClassifierWidget)
    widget.trees_spin.setValue(30)
    return widget


def run_job(qtbot, widget, action):
    with qtbot.waitSignal(widget.job_done, timeout=JOB_TIMEOUT):
        action()


def seg_of(segmentation, masks):
    return seg_score(masks, label_instances(segmentation, foreground=FLY))


# -- manifest, sample data, reader ---------------------------------------------------------------

def test_manifest_validates():
    result = subprocess.run([sys.executable, "-m", "npe2", "validate", str(MANIFEST)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    installed = [ep for ep in entry_points(group="napari.manifest") if ep.name == "msclassify"]
    if installed:   # `npe2 validate msclassify` as a user would run it
        result = subprocess.run([sys.executable, "-m", "npe2", "validate", "msclassify"],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


def test_sample_data_and_reader_in_the_viewer(make_napari_viewer, plugin, tmp_path):
    viewer = make_napari_viewer()
    viewer.open_sample("msclassify", "flies")
    assert [layer.name for layer in viewer.layers] == ["flies", "fly masks (reference)",
                                                       "scribbles"]
    assert viewer.layers["flies"].data.shape == (8, 1024, 1024)
    scribbles = viewer.layers["scribbles"].data
    first_scribbled = int(np.flatnonzero(scribbles.reshape(8, -1).any(axis=1))[0])
    assert viewer.dims.current_step[0] == first_scribbled != 4   # napari alone shows frame 4
    frames = np.random.default_rng(0).integers(0, 255, (6, 32, 40), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "movie.tif", frames, photometric="minisblack")
    [layer] = viewer.open(str(tmp_path / "movie.tif"), plugin="msclassify")
    assert layer.data.shape == (6, 32, 40) and isinstance(layer.data, LazyFrames)
    viewer.dims.set_current_step(0, 2)
    np.testing.assert_array_equal(np.asarray(layer.data[2]), frames[2])


def test_videos_open_with_this_reader_without_asking_once_the_plugin_was_used(
        make_napari_viewer, plugin, shared_data):
    """Item 7 of issue 25: napari's built-in reader claims videos too (and would decode every
    frame); opening an .mp4 asked which reader to use."""
    from napari.settings import get_settings
    video = str(shared_data("fly_sleap/clip.mp4"))
    viewer = make_napari_viewer()
    plugin.deactivate("msclassify")        # a fresh session: the plugin not used yet
    assert "*.mp4" not in get_settings().plugins.extension2reader
    viewer.window.add_plugin_dock_widget("msclassify", "Pixel classifier")   # first use
    assert get_settings().plugins.extension2reader["*.mp4"] == "msclassify"
    # what File > Open does (plugin=None: the preference, else a dialog when several readers
    # claim the file; viewer.open's default, plugin="napari", would force napari's own reader)
    [layer] = viewer.open(video, plugin=None)
    assert isinstance(layer.data, LazyFrames) and layer.data.shape[0] > 1000
    assert tuple(layer.contrast_limits) == (0, 255)


# -- pixel classifier ----------------------------------------------------------------------------

def read_tiffs(folder):
    return np.stack([tifffile.imread(path) for path in sorted(Path(folder).glob("*.tif"))])


def test_train_show_segment_apply_save_export(make_napari_viewer, plugin, flies, qtbot,
                                              tmp_path):
    frames, masks, _ = flies
    viewer = make_napari_viewer(show=True)
    viewer.open_sample("msclassify", "flies")
    widget = pixel_widget(viewer)
    scribbles = viewer.layers["scribbles"]
    assert widget.image_combo.currentText() == "flies"
    assert widget.scribble_combo.currentText() == "scribbles"
    assert [widget.class_table.item(r, 1).text() for r in range(2)] == ["background", "fly"]
    viewer.dims.set_current_step(0, 5)                 # a frame without scribbles

    started = []
    widget.job_started.connect(started.append)
    run_job(qtbot, widget, widget.train_button.click)
    assert started == [TRAIN]
    assert widget.classifier is not None, widget.status_label.text()
    # only the segmentation appears; the brush stays on the scribbles (item 1)
    # right above its image, under the scribbles
    assert [layer.name for layer in viewer.layers] == ["flies", "flies segmentation",
                                                       "scribbles", "fly masks (reference)"]
    assert viewer.layers.selection.active is scribbles and scribbles.mode == "paint"
    segmentation = viewer.layers["flies segmentation"]
    assert segmentation.data.shape == (8, 1024, 1024)
    assert widget.predicted_frames == {5}
    assert seg_of(segmentation.data[5], masks[5]) > MIN_SEG
    assert not segmentation.data[[0, 1, 2, 3, 4, 6, 7]].any()
    # the background class is transparent: the segmentation changes the picture only at the flies
    shown = viewer.screenshot(canvas_only=True, flash=False)
    segmentation.visible = False
    hidden = viewer.screenshot(canvas_only=True, flash=False)
    segmentation.visible = True
    changed = np.mean(np.any(shown != hidden, axis=-1))
    assert 0 < changed < 0.1, changed

    # the Result panel in plain words; the exact terms in tooltips (item 4)
    text = {name: label.text() for name, label in widget.result_labels.items()}
    assert "trained in" in text["Model"] and "2 frames" in text["Model"]
    assert "frames/s" in text["Speed"] and "1024×1024" in text["Speed"]
    assert "candidate image features" in text["Work"]
    assert "brightness" in text["Features"] or "edges" in text["Features"]
    assert not any(jargon in value for value in text.values() for jargon in ("μ", "α", "L0:"))
    assert "cost_tradeoff" in widget.result_labels["Model"].toolTip()
    assert all(feature in widget.result_labels["Features"].toolTip()
               for feature in widget.classifier.features_used_)

    # the optional layers, with colour bars and an explanation (item 5)
    for key in ("probability", "uncertainty", "cost"):
        widget.show_checks[key].setChecked(True)
    run_job(qtbot, widget, lambda: widget.show_checks["hints"].setChecked(True))  # predicts
    for name in ("flies P(fly) (0–1)", "flies uncertainty (0 = sure)",
                 "flies cost map (computation per pixel)", "flies where to label next"):
        layer = viewer.layers[name]
        assert layer.data.shape == (1, 1024, 1024) and layer.translate[0] == 5
        assert name.endswith("next") or layer.colorbar.visible
    assert "flies P(background) (0–1)" not in viewer.layers
    probability = viewer.layers["flies P(fly) (0–1)"].data[0]
    np.testing.assert_array_equal(segmentation.data[5] == FLY, probability > 0.5)
    hints_layer = viewer.layers["flies where to label next"]
    np.testing.assert_allclose(hints_layer.colormap.map(np.array([0, 1, 3])),
                               [[0, 0, 0, 0], [1, 0.9, 0, 1], [1, 0.9, 0, 1]])   # yellow
    hints = hints_layer.data[0]
    uncertainty = viewer.layers["flies uncertainty (0 = sure)"].data[0]
    if hints.any():    # each region outlines pixels where the model hesitates
        assert all(uncertainty[hints == region].max() >= 0.25 for region in np.unique(hints)[1:])
    else:
        assert uncertainty.max() < 0.25 or "sure everywhere" in widget.status_label.text()
    assert "decisions per pixel" in widget.explain_label.text()
    assert viewer.layers.selection.active is scribbles
    widget.show_checks["cost"].setChecked(False)
    assert "flies cost map (computation per pixel)" not in viewer.layers

    screenshot = viewer.screenshot(canvas_only=False, flash=False)
    assert screenshot.ndim == 3 and screenshot.std() > 10

    # live update off: another frame says how to segment it; the shortcut does (item 6)
    viewer.dims.set_current_step(0, 6)
    qtbot.wait(100)
    assert "Segment this frame" in widget.status_label.text()
    assert 6 not in widget.predicted_frames
    with qtbot.waitSignal(widget.segmentation_updated, timeout=JOB_TIMEOUT) as blocker:
        widget.segment_shortcut.activated.emit()
    assert blocker.args == [6] and started[-1] == PREDICT
    qtbot.waitUntil(lambda: widget.scheduler.running is None, timeout=JOB_TIMEOUT)

    # apply to a frame range: progress, ETA, only those frames (item 6)
    widget.first_spin.setValue(1)
    widget.last_spin.setValue(3)
    with qtbot.waitSignal(widget.batch_done, timeout=JOB_TIMEOUT):
        widget.apply_button.click()
    assert widget.predicted_frames == {1, 2, 3, 5, 6}
    assert widget.apply_progress.value() == widget.apply_progress.maximum() == 3
    assert "done in" in widget.apply_progress.text()
    assert widget.status_label.text().startswith("Segmenting frames 1–3: done in")
    assert not segmentation.data[[0, 4, 7]].any()
    assert seg_of(segmentation.data[1:4], masks[1:4]) > MIN_SEG

    # export what labs need, through the dialog (item 7)
    dialog = widget.export_dialog()
    assert [dialog.first_spin.value(), dialog.last_spin.value()] == [1, 3]
    assert dialog.class_combo.currentText() == "fly (2)" and dialog.kind_combo.currentData() \
        == "mask" and not dialog.min_size_spin.isEnabled()
    export, chosen, file_format = dialog.request()
    assert (export.kind, export.target, chosen, file_format) == ("mask", FLY, [1, 2, 3], "tiff")
    with qtbot.waitSignal(widget.batch_done, timeout=JOB_TIMEOUT):
        widget.export(tmp_path / "masks", export, [2, 3, 4], file_format)
    written = read_tiffs(tmp_path / "masks")
    assert written.dtype == np.uint8 and set(np.unique(written)) == {0, 255}
    # beside it, the classes with the colours of the scribbles and the result
    legend = (tmp_path / "masks_classes.csv").read_text().splitlines()
    background_colour, fly_colour = (widget.class_table.item(row, 0).background().color().name()
                                     for row in (0, 1))
    assert legend == ["value,name,color", f"1,background,{background_colour}",
                      f"2,fly,{fly_colour}"]
    np.testing.assert_allclose(segmentation.colormap.map(np.array([FLY]))[0, :3],
                               [int(fly_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)],
                               atol=1e-6)
    assert "masks_classes.csv" in widget.status_label.text()
    np.testing.assert_array_equal(written[:2], (segmentation.data[2:4] == FLY) * 255)
    np.testing.assert_array_equal(written[2], (widget.classifier.predict(frames[4]) == FLY) * 255)

    dialog.kind_combo.setCurrentIndex(dialog.kind_combo.findData("instances"))
    assert dialog.min_size_spin.isEnabled()
    dialog.min_size_spin.setValue(50)
    dialog.stack_radio.setChecked(True)
    export, chosen, file_format = dialog.request()
    with qtbot.waitSignal(widget.batch_done, timeout=JOB_TIMEOUT):
        widget.export(tmp_path / "objects.tif", export, chosen, file_format)
    objects = tifffile.imread(tmp_path / "objects.tif")
    assert objects.shape == (3, 1024, 1024) and objects.dtype == np.uint16
    for page, index in zip(objects, chosen):
        regions, _ = ndimage.label(segmentation.data[index] == FLY, np.ones((3, 3)))
        sizes = np.bincount(regions.ravel())[1:]
        assert page.max() == np.count_nonzero(sizes >= 50) > 0
        assert np.all(np.bincount(page.ravel())[1:] >= 50)

    with qtbot.waitSignal(widget.batch_done, timeout=JOB_TIMEOUT):
        widget.export(tmp_path / "p", FrameExport("probability", FLY), [5])
    [p_fly] = read_tiffs(tmp_path / "p")
    assert p_fly.dtype == np.float32
    np.testing.assert_allclose(p_fly, probability, atol=1e-6)

    # save, load into a fresh widget, same prediction
    widget.save_model(tmp_path / "flies.msc")
    other = PixelClassifierWidget(viewer)
    other.image_combo.setCurrentText("flies")
    viewer.dims.set_current_step(0, 5)
    expected = segmentation.data[5].copy()
    segmentation.data[5] = 0
    run_job(qtbot, other, lambda: other.load_model(tmp_path / "flies.msc"))
    np.testing.assert_array_equal(segmentation.data[5], expected)
    assert "loaded from flies.msc" in other.result_labels["Model"].text()
    other.deleteLater()

    if os.environ.get("MSCLASSIFY_SCREENSHOT"):
        import imageio.v3 as iio
        viewer.window._qt_window.resize(1500, 1050)
        qtbot.wait(200)
        iio.imwrite(REPO / "docs" / "napari_widget.png",
                    viewer.screenshot(canvas_only=False, flash=False))


def test_mouse_strokes_paint_after_train_and_the_event_loop_never_stalls(
        make_napari_viewer, plugin, flies, qtbot, tmp_path):
    """Real mouse events on the canvas (item 1) and the longest event-loop stall while the
    widget trains, segments, applies and exports (item 2)."""
    frames, masks, scribbles = flies
    viewer = make_napari_viewer(show=True)
    viewer.add_image(frames[:3], name="flies")
    layer = viewer.add_labels(scribbles[:3].copy(), name="scribbles")
    widget = pixel_widget(viewer)
    widget.trees_spin.setValue(10)
    viewer.dims.set_current_step(0, 0)
    run_job(qtbot, widget, widget.train)         # compiles and warms the caches
    active = viewer.layers.selection.active              # (napari hands plugins proxies)
    assert active.name == layer.name and active.mode == "paint"
    layer.selected_label = BACKGROUND
    layer.brush_size = 5
    center = tuple(viewer.scene.camera.center)
    floor = np.argwhere(ndimage.distance_transform_edt(masks[0] == 0) > 20)
    y, x = floor[len(floor) // 2]
    points = [(y, x + step) for step in range(0, 40, 4)]
    assert not (layer.data[0][tuple(np.array(points).T)] == BACKGROUND).all()
    stroke(viewer, points)
    qtbot.wait(50)
    assert (layer.data[0][tuple(np.array(points).T)] == BACKGROUND).all()
    assert tuple(viewer.scene.camera.center) == center          # painted, did not pan

    monitor = EventLoopMonitor()
    stalls, floor = {}, []
    try:
        for name, action, signal in (
                ("train", widget.train, widget.job_done),
                ("segment", widget.segment_current_frame, widget.job_done),
                ("apply", widget.apply_to_all_frames, widget.batch_done),
                ("export", lambda: widget.export(tmp_path / "masks"), widget.batch_done)):
            floor.append(bare_repaint_stall(viewer, monitor))
            qtbot.wait(50)
            monitor.mark()
            with qtbot.waitSignal(signal, timeout=JOB_TIMEOUT):
                action()
            qtbot.wait(30)
            stalls[name] = monitor.longest_gap()[0]
        floor.append(bare_repaint_stall(viewer, monitor))
    finally:
        monitor.stop()
    slowdown = cpu_slowdown()
    # The target is 0.1 s (benchmarks/bench_napari.py measures it on real frames). Under Xvfb
    # one repaint of the canvas alone (`bare_repaint_stall`, measured between the actions)
    # takes 0.03-0.25 s of the GUI thread, and any visible change needs one; on a loaded
    # 2-core machine all GUI work stretches by `slowdown`. So the bound is the slowest bare
    # repaint plus 0.15 s per unit of slowdown for what the widget adds: it catches work that
    # does not belong on the GUI thread (re-creating a layer per job took 1.25 s, first-time
    # imports seconds, napari's activity-bar progress 0.21 s at the first Apply). The widget's
    # own stalls are 0.03-0.08 s in the benchmark; 0.1 s was the target itself and failed once
    # in three clean CI runs on a 0.149 s Train stall (floor 0.039 s): the margin is the box's.
    assert max(stalls.values()) < max(floor) + 0.15 * max(1.0, slowdown), (stalls, floor,
                                                                              slowdown)


def paint_stroke(layer, points, label, brush=5):
    """Paint discs at ``points`` (t, y, x) as one undo step: one paint event, like a stroke."""
    layer.brush_size = brush
    with layer.block_history():
        for point in points:
            layer.paint(point, label, refresh=False)
    layer.refresh()


def fly_and_floor_points(mask, n_fly=80, n_floor=150, seed=0):
    """Random points 2 px inside the flies and > 10 px away from them."""
    rng = np.random.default_rng(seed)
    inner = np.argwhere(ndimage.binary_erosion(mask > 0, iterations=2))
    floor = np.argwhere(ndimage.distance_transform_edt(mask == 0) > 10)
    return (inner[rng.choice(len(inner), n_fly, replace=False)],
            floor[rng.choice(len(floor), n_floor, replace=False)])


def edge_points(mask, n, seed):
    """Random floor points 2-5 px outside the flies: where a user corrects a blocky result."""
    rng = np.random.default_rng(seed)
    distance = ndimage.distance_transform_edt(mask == 0)
    ring = np.argwhere((distance > 2) & (distance <= 5))
    return ring[rng.choice(len(ring), n, replace=False)]


def test_painted_scribbles_live_update_and_frame_change(make_napari_viewer, plugin, flies,
                                                        qtbot):
    frames, masks, _ = flies
    viewer = make_napari_viewer()
    viewer.add_image(frames, name="flies")
    widget = pixel_widget(viewer)
    layer = widget.new_scribble_layer()
    assert layer.data.shape == frames.shape and widget.scribble_combo.currentText() == layer.name
    viewer.dims.set_current_step(0, 0)

    fly_points, floor_points = fly_and_floor_points(masks[0])
    paint_stroke(layer, [(0, y, x) for y, x in floor_points], BACKGROUND, brush=9)
    paint_stroke(layer, [(0, y, x) for y, x in fly_points], FLY, brush=3)
    assert (layer.data[0] == FLY).any() and not (layer.data[0][masks[0] == 0] == FLY).any()

    # The "pyramid" preset (4x4 and 8x8 block features too): what a user corrects with
    # edge strokes. The default preset (full resolution and 2x2 blocks) already finds
    # these outlines (SEG 0.93 from the first strokes), leaving nothing to correct.
    widget.features_combo.setCurrentText("pyramid")
    started = []
    widget.job_started.connect(started.append)
    widget.scheduler.delay_ms = 300
    # switching live update on retrains right away (after the quiet period)
    run_job(qtbot, widget, lambda: widget.live_check.setChecked(True))
    assert started == [RETRAIN]
    # Scribbles far from the fly edges. Before distillation the cheapest model that separates
    # them worked on 8x8 blocks and the flies came out blocky (SEG 0.44); the distilled
    # default refines the outlines from these strokes already (measured SEG 0.93).
    first_seg = seg_of(viewer.layers["flies segmentation"].data[0], masks[0])
    first_model = widget.classifier

    # three strokes along the fly edges within the quiet period: one retrain, which keeps
    # the edges resolved (measured SEG 0.92)
    edges = edge_points(masks[0], 40, seed=1)
    with qtbot.waitSignal(widget.job_done, timeout=JOB_TIMEOUT):
        paint_stroke(layer, [(0, y, x) for y, x in edges[:15]], BACKGROUND, brush=3)
        qtbot.wait(50)
        paint_stroke(layer, [(0, y, x) for y, x in edges[15:]], BACKGROUND, brush=3)
        qtbot.wait(50)
        paint_stroke(layer, [(0, y, x) for y, x in fly_and_floor_points(masks[0], 10, 0,
                                                                        seed=1)[0]], FLY, brush=3)
    qtbot.wait(600)                                  # twice the quiet period: nothing else starts
    assert started == [RETRAIN, RETRAIN]
    assert widget.classifier is not first_model
    corrected_seg = seg_of(viewer.layers["flies segmentation"].data[0], masks[0])
    assert first_seg > MIN_SEG and corrected_seg > max(MIN_SEG, first_seg - 0.02)

    # strokes while a job runs coalesce into exactly one follow-up job
    _, new_floor = fly_and_floor_points(masks[0], 1, 4, seed=2)
    with qtbot.waitSignal(widget.job_started, timeout=JOB_TIMEOUT):
        paint_stroke(layer, [(0, *new_floor[0])], BACKGROUND)
    assert widget.scheduler.running == RETRAIN
    paint_stroke(layer, [(0, *new_floor[1])], BACKGROUND)
    paint_stroke(layer, [(0, *new_floor[2])], BACKGROUND)
    qtbot.waitUntil(lambda: len(started) == 4 and widget.scheduler.running is None,
                    timeout=JOB_TIMEOUT)
    qtbot.wait(600)
    assert started == [RETRAIN] * 4

    # moving the time slider segments the new frame with the current model (no retrain)
    with qtbot.waitSignal(widget.segmentation_updated, timeout=JOB_TIMEOUT) as blocker:
        viewer.dims.set_current_step(0, 6)
    assert blocker.args == [6] and started[-1] == PREDICT
    qtbot.waitUntil(lambda: widget.scheduler.running is None, timeout=JOB_TIMEOUT)
    segmentation = viewer.layers["flies segmentation"].data
    np.testing.assert_array_equal(segmentation[6], widget.classifier.predict(frames[6]))
    assert seg_of(segmentation[6], masks[6]) > MIN_SEG

    # live update off: painting does nothing
    widget.live_check.setChecked(False)
    paint_stroke(layer, [(0, *new_floor[3])], BACKGROUND)
    qtbot.wait(600)
    assert len(started) == 5


def test_cancel_training_and_apply_to_all_frames(make_napari_viewer, plugin, qtbot, flies):
    frames, _, scribbles = flies
    viewer = make_napari_viewer()
    viewer.add_image(frames, name="flies")
    viewer.add_labels(scribbles, name="scribbles")
    widget = pixel_widget(viewer)
    viewer.dims.set_current_step(0, 0)

    # cancelling a training at its first boosting round keeps no half-trained model
    def cancel_when_started(value):
        if value > 0:
            widget.cancel()

    widget.train_progress.valueChanged.connect(cancel_when_started)
    run_job(qtbot, widget, widget.train)
    assert widget.classifier is None and widget.status_label.text() == "Cancelled."
    widget.train_progress.valueChanged.disconnect(cancel_when_started)

    widget.trees_spin.setValue(5)
    run_job(qtbot, widget, widget.train)
    assert widget.classifier is not None
    widget.segmentation_updated.connect(lambda _: widget.cancel_batch())
    with qtbot.waitSignal(widget.batch_done, timeout=JOB_TIMEOUT):
        widget.apply_to_all_frames()
    assert 1 <= len(widget.predicted_frames) < 8
    assert "cancelled" in widget.status_label.text()
    assert widget.apply_button.isEnabled() and not widget.apply_cancel_button.isEnabled()


def test_the_status_line_is_about_the_frame_on_screen_also_back_on_the_trained_one(
        make_napari_viewer, plugin, qtbot, flies):
    """Trained on frame 0, the slider moved to 3 and back: the line says frame 0 is segmented
    (it kept "Frame 3 is not segmented yet" on frame 0). A single image has no frame number."""
    frames, _, scribbles = flies
    viewer = make_napari_viewer()
    viewer.add_image(frames, name="flies")
    viewer.add_labels(scribbles, name="scribbles")
    widget = pixel_widget(viewer)
    widget.trees_spin.setValue(5)
    viewer.dims.set_current_step(0, 0)
    run_job(qtbot, widget, widget.train)
    assert widget.status_label.text() == "Frame 0 segmented."
    viewer.dims.set_current_step(0, 3)
    assert widget.status_label.text().startswith("Frame 3 is not segmented yet")
    viewer.dims.set_current_step(0, 0)
    assert widget.status_label.text() == "Frame 0 segmented."

    viewer.add_image(frames[0], name="one frame")
    widget.image_combo.setCurrentText("one frame")
    widget.new_scribble_layer().data[...] = scribbles[0]
    run_job(qtbot, widget, widget.train)
    assert widget.status_label.text() == "The image is segmented."


def test_rgb_image(make_napari_viewer, plugin, qtbot):
    """A colour frame trains on its three channels; outputs are 2-D."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 60, (64, 80, 3), dtype=np.uint8)
    image[16:48, 20:60, 0] = 220                       # a red rectangle
    viewer = make_napari_viewer()
    viewer.add_image(image, name="rgb", rgb=True)
    widget = pixel_widget(viewer)
    widget.features_combo.setCurrentText("fast")
    widget.mu_edit.setText("0")
    layer = widget.new_scribble_layer()
    assert layer.data.shape == (64, 80)
    rectangle = np.zeros((64, 80), bool)
    rectangle[16:48, 20:60] = True
    layer.data[::3, ::3] = BACKGROUND
    layer.data[ndimage.binary_dilation(rectangle, iterations=3)] = 0
    layer.data[18:46:2, 22:58:2] = FLY
    run_job(qtbot, widget, widget.train)
    assert widget.classifier.n_channels_ == 3
    segmentation = viewer.layers["rgb segmentation"].data
    assert segmentation.shape == (64, 80)
    np.testing.assert_array_equal(segmentation == FLY, rectangle)
    widget.show_checks["cost"].setChecked(True)
    assert viewer.layers["rgb cost map (computation per pixel)"].data.shape == (64, 80)


def four_class_photo(size=(96, 128)):
    """A synthetic RGB photo of four classes (dark tray, pale larvae, brown feed, grey rim) and
    scribbles of each: 1 tray, 2 larva, 3 feed, 4 rim."""
    rng = np.random.default_rng(0)
    height, width = size
    classes = np.ones(size, np.uint8)
    classes[:, :8] = classes[:, -8:] = 4                      # rim
    classes[20:40, 20:60] = 2                                 # a larva
    classes[60:85, 70:110] = 3                                # feed
    colours = {1: (20, 20, 25), 2: (230, 220, 180), 3: (120, 80, 20), 4: (140, 140, 150)}
    photo = np.zeros((*size, 3), np.uint8)
    for value, colour in colours.items():
        photo[classes == value] = colour
    photo = np.clip(photo + rng.normal(0, 8, photo.shape), 0, 255).astype(np.uint8)
    scribbles = np.zeros(size, np.uint8)
    inner = {value: ndimage.binary_erosion(classes == value, iterations=3)
             for value in colours}
    for value, region in inner.items():
        ys, xs = np.nonzero(region)
        keep = rng.choice(len(ys), min(len(ys), 60), replace=False)
        scribbles[ys[keep], xs[keep]] = value
    return photo, classes, scribbles


def test_second_image_with_four_classes_shows_its_own_result_on_top(make_napari_viewer, plugin,
                                                                     flies, qtbot):
    """Item 1 and 2 of issue 25: a 4-class RGB photo opened next to the fly movie."""
    frames, _, scribbles = flies
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1500, 1000)
    viewer.add_image(frames, name="flies")
    viewer.add_labels(scribbles, name="scribbles",
                      metadata={CLASS_NAMES_KEY: {1: "background", 2: "fly"}})
    widget = pixel_widget(viewer)
    widget.trees_spin.setValue(10)
    viewer.dims.set_current_step(0, 0)
    run_job(qtbot, widget, widget.train)
    fly_model = widget.classifier
    fly_text = widget.result_labels["Model"].text()

    photo, classes, painted = four_class_photo()
    viewer.add_image(photo, name="photo", rgb=True)          # on top of the movie's layers
    widget.image_combo.setCurrentText("photo")
    # the Scribbles box follows the image (none fits yet); the Result panel is the photo's
    assert widget.scribble_combo.currentIndex() == -1 and widget.scribble_layer is None
    assert widget.classifier is None and widget.result_labels["Model"].text() == "–"
    assert "Press New" in widget.status_label.text()
    layer = widget.new_scribble_layer()
    assert widget.scribble_combo.currentText() == "photo scribbles"
    widget.add_class_button.click()
    widget.add_class_button.click()
    # four classes without scrolling
    assert widget.class_table.rowCount() == 4
    assert widget.class_table.verticalScrollBar().maximum() == 0
    for row, name in enumerate(["tray (background)", "larva", "feed", "rim"]):
        widget.class_table.item(row, 1).setText(name)
    widget.set_class_color(2, "#00ff00")                     # larvae green, as chosen
    layer.data[...] = painted
    run_job(qtbot, widget, widget.train)
    assert list(widget.classifier.classes_) == [1, 2, 3, 4]
    segmentation = viewer.layers["photo segmentation"]
    assert np.mean(segmentation.data == classes) > 0.9
    # the result sits right above its image and under its scribbles, whatever came before
    names = [layer.name for layer in viewer.layers]
    assert names.index("photo") + 1 == names.index("photo segmentation") \
        == names.index("photo scribbles") - 1
    assert names.index("flies") + 1 == names.index("flies segmentation")
    # and it is visible: the canvas changes where it is drawn
    viewer.scene.camera.center, viewer.scene.camera.zoom = (48, 64), 5       # the photo fills the canvas
    shown = viewer.screenshot(canvas_only=True, flash=False)
    segmentation.visible = False
    hidden = viewer.screenshot(canvas_only=True, flash=False)
    segmentation.visible = True
    assert np.mean(np.any(shown != hidden, axis=-1)) > 0.05
    # one colour per class, the same in scribbles and result (drawn fainter); the tray (named
    # background) not drawn in the result
    values = np.array([1, 2, 3, 4])
    scribble_colours = layer.colormap.map(values)
    np.testing.assert_allclose(scribble_colours[1], [0, 1, 0, 1])
    result_colours = segmentation.colormap.map(values)
    np.testing.assert_allclose(result_colours[1:, :3], scribble_colours[1:, :3])
    assert result_colours[0, 3] == 0 and segmentation.opacity < layer.opacity == 1
    assert widget.class_table.item(1, 0).background().color().name() == "#00ff00"

    # ticking Live update after Train says that the quick model replaces Train's
    from napari.utils.notifications import notification_manager
    said = []
    notification_manager.notification_ready.connect(lambda n: said.append(n.message))
    run_job(qtbot, widget, lambda: widget.live_check.setChecked(True))
    assert any("replaces the 10-tree model from Train" in message for message in said), said
    assert widget.last_model.live and "quick live-update model" in \
        widget.result_labels["Model"].text()
    # with four classes the quick model is the smaller one (a tree per class and round)
    assert widget.last_model.settings == widget.settings().for_live_update(4)
    assert widget.last_model.classifier.colsample < 1
    widget.live_check.setChecked(False)

    # one probability layer, of the class picked, in that class's colour, with its name
    assert widget.probability_class_combo.currentText() == "larva"
    widget.show_checks["probability"].setChecked(True)
    [probability] = [layer for layer in viewer.layers if " P(" in layer.name]
    assert probability.name == "photo P(larva) (0–1)"
    assert probability.colorbar.visible and probability.name_overlay.visible
    np.testing.assert_allclose(probability.colormap.colors[-1][:3], [0, 1, 0])
    probability.opacity = 0.6                      # the user's setting
    larva_layer = probability
    widget.probability_class_combo.setCurrentText("feed")
    [probability] = [layer for layer in viewer.layers if " P(" in layer.name]
    assert probability.name == "photo P(feed) (0–1)"
    # the same layer, renamed and recoloured (napari's remove + add would stall twice)
    assert probability is larva_layer and probability.opacity == 0.6
    [feed_color] = class_colors(widget.scribble_layer.metadata, [3])
    np.testing.assert_allclose(probability.colormap.colors[-1][:3], color_rgb(feed_color))
    np.testing.assert_array_equal(probability.data, widget.last_prediction.probabilities[..., 2])
    names = [layer.name for layer in viewer.layers]
    assert names.index("photo segmentation") < names.index("photo P(feed) (0–1)") \
        < names.index("photo scribbles")

    # back to the movie: its scribbles, its model, its words
    widget.image_combo.setCurrentText("flies")
    assert widget.scribble_combo.currentText() == "scribbles"
    assert widget.classifier is fly_model and widget.result_labels["Model"].text() == fly_text
    assert [widget.class_table.item(r, 1).text() for r in range(2)] == ["background", "fly"]

    # at 1000 px window height, Save / Load / Export are in view without scrolling
    qtbot.wait(100)
    from msclassify_napari._widget import _VerticalScrollArea
    area = widget.findChild(_VerticalScrollArea)
    for button in (widget.save_button, widget.load_button, widget.export_button):
        bottom = button.mapTo(area.viewport(), button.rect().bottomLeft()).y()
        assert bottom <= area.viewport().height(), (bottom, area.viewport().height())


def test_new_scribbles_on_a_long_movie_allocate_nothing(make_napari_viewer, plugin, qtbot):
    """Item 3: "New" on a 1500-frame 1024² movie (1.5 GB per label stack) is instant."""
    movie = np.broadcast_to(np.uint8(7), (1500, 1024, 1024))      # no memory behind it
    viewer = make_napari_viewer(show=True)
    viewer.add_image(movie, name="movie", contrast_limits=(0, 255))
    widget = pixel_widget(viewer)
    monitor = EventLoopMonitor()
    try:
        # what napari itself takes to add and draw a Labels layer of that shape (np.zeros
        # allocates lazily too)
        for _ in range(2):                       # the second one: without one-time costs
            monitor.mark()
            plain_layer = viewer.add_labels(np.zeros(movie.shape, np.uint8), name="plain")
            qtbot.wait(100)
            plain = monitor.longest_gap()[0]
            viewer.layers.remove(plain_layer)
            qtbot.wait(50)
        monitor.mark()
        layer = widget.new_scribble_layer()
        # (its second layer comes after the first's repaint, in a later turn)
        qtbot.waitUntil(lambda: "movie segmentation" in viewer.layers, timeout=10000)
        qtbot.wait(100)
        stall = monitor.longest_gap()[0]
    finally:
        monitor.stop()
    segmentation = viewer.layers["movie segmentation"]
    assert layer.data.shape == segmentation.data.shape == (1500, 1024, 1024)
    assert layer.data.nbytes_stored == segmentation.data.nbytes_stored == 0
    viewer.dims.set_current_step(0, 1200)
    stroke(viewer, [(500, 500 + step) for step in range(0, 30, 3)])
    qtbot.wait(50)
    assert layer.data.stored_frames() == [1200] and (layer.data[1200] == 1).sum() > 50
    # New adds two layers, one per turn of the event loop: no stall longer than napari's own
    # for one, plus 0.1 s per unit of CPU slowdown for ours
    assert stall < plain + 0.1 * max(1.0, cpu_slowdown()), (stall, plain)


def test_a_layer_add_and_the_window_repaint_come_in_two_turns(make_napari_viewer, plugin, qtbot):
    """Items 3 and issue 20's "never freezing": napari's insert of a layer and Qt's repaint of
    the window after it are two turns of the event loop, with timers (and input) handled in
    between (`repaint_next_turn`); a plain napari add paints in the turn right after its insert,
    before any timer (checked here too, so the test tells whether the split is ours). Every
    added layer is drawn, the scribbles stay selected and paintable."""
    import time

    from qtpy.QtCore import Qt, QTimer
    viewer = make_napari_viewer(show=True)
    viewer.add_image(np.full((96, 128), 40, np.uint8), name="frame")
    widget = pixel_widget(viewer)
    qtbot.wait(300)                                       # the dock's segmentation layer
    paints, inserted, ticks = CanvasPaints(viewer), [], []
    viewer.layers.events.inserted.connect(lambda event: inserted.append(time.perf_counter()))
    timer = QTimer()
    timer.setTimerType(Qt.PreciseTimer)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start(2)

    def ticks_before_the_paint(since):
        """Timer ticks after the insert at ``since`` and before the canvas's next paint."""
        qtbot.waitUntil(lambda: paints.first_after(since) is not None, timeout=5000)
        paint = paints.first_after(since)
        return sum(since < tick < paint[0] for tick in ticks)

    try:
        qtbot.wait(100)
        viewer.add_labels(np.zeros((96, 128), np.uint8), name="plain")
        plain = ticks_before_the_paint(inserted[-1])
        # (the widget takes "plain" as the image's scribbles: its segmentation comes in turns)
        qtbot.waitUntil(lambda: "frame segmentation" in viewer.layers, timeout=10000)
        qtbot.wait(100)
        count = len(inserted)
        layer = widget.new_scribble_layer()
        qtbot.waitUntil(lambda: "frame segmentation" in viewer.layers
                        and len(inserted) == count + 1 and paints.first_after(inserted[-1]),
                        timeout=5000)
        ours = ticks_before_the_paint(inserted[count])
        # selected and in paint mode in a later turn (its repaint held to the one after)
        qtbot.waitUntil(lambda: viewer.layers.selection.active.name == layer.name
                        and layer.mode == "paint", timeout=5000)
        qtbot.wait(100)
    finally:
        timer.stop()
        paints.remove()
    assert plain == 0                           # napari alone: insert and repaint in one go
    assert ours >= 1, (ours, plain)             # ours: the window answered in between
    assert widget.window().updatesEnabled()
    stroke(viewer, [(40, 40 + step) for step in range(0, 30, 3)])
    qtbot.wait(50)
    assert (layer.data == 1).sum() > 20


def test_new_layers_come_styled_and_placed_and_the_selection_never_leaves_the_scribbles(
        make_napari_viewer, plugin, flies, qtbot, monkeypatch):
    """Docking and New on a second image (issue 25, item 3): every layer the widget adds is
    inserted already in the class colours and names and at its place (nothing recoloured or
    moved after napari's insert); New's scribbles are inserted unselected and selected, in
    paint mode, a turn later; the segmentation layer is inserted with the scribbles left
    selected: napari's selection, its layer list and its layer controls never switch to it
    and back. A user's own scribble layer takes the class colours a turn after the dock's
    build, not in it."""
    from napari.utils.colormaps import CyclicLabelColormap

    from msclassify_napari import _widget as widget_module
    from msclassify_napari._layers import make_layer
    frames, _, scribbles = flies
    viewer = make_napari_viewer(show=True)
    viewer.add_image(frames, name="flies")
    user_layer = viewer.add_labels(scribbles, name="scribbles",
                                   metadata={CLASS_NAMES_KEY: {1: "floor", 2: "fly"}})
    napari_colours = user_layer.colormap.map(np.array([1, 2]))
    widget = pixel_widget(viewer)
    # the dock's build turn leaves the user's layer alone; the next turns colour it
    np.testing.assert_allclose(user_layer.colormap.map(np.array([1, 2])), napari_colours)
    qtbot.waitUntil(lambda: "flies segmentation" in viewer.layers, timeout=10000)
    classes = [color_rgb(c) for c in class_colors(user_layer.metadata, [1, 2])]
    np.testing.assert_allclose(user_layer.colormap.map(np.array([1, 2]))[:, :3], classes)
    assert list(user_layer.features["class"]) == ["unlabelled", "floor", "fly"]
    assert user_layer.mode == "paint" and viewer.layers.selection.active.name == "scribbles"

    photo = four_class_photo()[0]
    viewer.add_image(photo, name="photo", rgb=True)
    widget.image_combo.setCurrentText("photo")
    qtbot.wait(100)
    events, styles = [], {}
    selection = viewer.layers.selection
    for name in ("changed", "active", "_current"):      # (the layer selected at each event)
        getattr(selection.events, name).connect(lambda event, name=name: events.append(
            (name, getattr(selection.active, "name", None))))
    viewer.layers.events.moved.connect(lambda event: events.append(("moved", None)))
    made = []                       # layer objects made a turn before napari's insert
    monkeypatch.setattr(widget_module, "make_layer",
                        lambda *args, **kwargs: made.append(make_layer(*args, **kwargs))
                        or made[-1])

    def inserted(event):
        layer = event.value
        styles[layer.name] = (isinstance(layer.colormap, CyclicLabelColormap)
                              and layer.colormap.map(np.array([1]))[0, :3].tolist(),
                              list(layer.features.get("class", [])),
                              [other.name for other in viewer.layers])
    viewer.layers.events.inserted.connect(inserted)
    layer = widget.new_scribble_layer()
    selected_events = list(events)
    events.clear()
    qtbot.waitUntil(lambda: "photo segmentation" in viewer.layers, timeout=10000)
    qtbot.wait(100)
    # New's insert leaves the selection alone, and moves nothing; the selection then goes to
    # the scribbles (in a turn of its own, with paint mode) and nowhere else: the
    # segmentation's insert changes nothing of it
    assert selected_events == [], selected_events
    # (napari's setter of the active layer passes through None)
    assert events and {name for _, name in events} == {None, "photo scribbles"}, events
    assert "moved" not in [kind for kind, _ in events]
    assert [layer.name for layer in made] == ["photo segmentation"]
    assert made[0] is viewer.layers["photo segmentation"]
    assert selection.active.name == "photo scribbles" and layer.mode == "paint"
    view = viewer.window._qt_viewer.layers             # napari's layer list, as drawn
    rows = view.selectionModel().selectedRows()
    assert [view.model().data(row) for row in rows] == ["photo scribbles"]
    controls = viewer.window._qt_viewer.controls
    assert controls.currentWidget() is controls.widgets[selection.active]
    # both layers came in the class colours and names, already at their places
    [first] = [color_rgb(c) for c in class_colors(layer.metadata, [1])]
    for name, below in (("photo scribbles", "photo"), ("photo segmentation", "photo")):
        colour, names, order = styles[name]
        np.testing.assert_allclose(colour, first)
        assert names == ["unlabelled", "background", "foreground"]
        assert order.index(name) == order.index(below) + 1, order
    names = [layer.name for layer in viewer.layers]
    assert names.index("photo") + 1 == names.index("photo segmentation") \
        == names.index("photo scribbles") - 1
    # the brush paints on the scribbles
    layer.data[...] = 0
    viewer.scene.camera.center, viewer.scene.camera.zoom = (48, 64), 4
    stroke(viewer, [(40, 40 + step) for step in range(0, 30, 3)])
    qtbot.wait(50)
    assert (layer.data == 1).sum() > 10
    assert not viewer.layers["photo segmentation"].data.any()


def test_semi_supervised_checkbox_trains_a_grbb_model_from_few_scribbles(make_napari_viewer,
                                                                        plugin, qtbot, flies,
                                                                        tmp_path):
    frames, masks, _ = flies
    viewer = make_napari_viewer()
    viewer.add_image(frames[0], name="frame")
    widget = pixel_widget(viewer)
    layer = widget.new_scribble_layer()
    fly_points, floor_points = fly_and_floor_points(masks[0], n_fly=5, n_floor=10)
    layer.data[tuple(floor_points.T)] = BACKGROUND
    layer.data[tuple(fly_points.T)] = FLY
    widget.semi_check.setChecked(True)
    run_job(qtbot, widget, widget.train)
    # segmentation quality with few scribbles is measured in benchmarks/bench_semi_supervised.py
    assert widget.classifier.semi_supervised and widget.last_model.n_labelled == 15
    assert viewer.layers["frame segmentation"].data.shape == masks[0].shape
    saved = tmp_path / "semi.msc"
    widget.save_model(saved)
    assert load_model(saved).semi_supervised


def test_clear_messages_instead_of_tracebacks(make_napari_viewer, plugin, qtbot, tmp_path):
    viewer = make_napari_viewer()
    widget = pixel_widget(viewer)
    run_job(qtbot, widget, widget.train)
    assert "add or open an image" in widget.status_label.text()
    viewer.add_image(np.zeros((2, 3, 16, 16)), name="4d")
    viewer.add_image(np.zeros((32, 32), np.uint8), name="plain")
    widget.image_combo.setCurrentText("4d")
    assert widget.new_scribble_layer() is None
    assert "Split Stack" in widget.status_label.text()
    widget.image_combo.setCurrentText("plain")
    layer = widget.new_scribble_layer()
    layer.data[0, 0] = 1
    run_job(qtbot, widget, widget.train)
    assert "at least two classes" in widget.status_label.text()
    widget.mu_edit.setText("-1")
    run_job(qtbot, widget, widget.train)
    assert "'Speed over accuracy' must be" in widget.status_label.text()
    with pytest.raises(ValueError, match="no model to save"):
        widget.save_model(tmp_path / "m.msc")
    with pytest.raises(ValueError, match="nothing to export"):
        widget.export(tmp_path / "out")
    (tmp_path / "junk.msc").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="junk.msc is another kind of file, not an msclassify"):
        widget.load_model(tmp_path / "junk.msc")
    tifffile.imwrite(tmp_path / "frame.tif", np.zeros((8, 8), np.uint8))
    widget._guarded(widget.load_model, tmp_path / "frame.tif")     # what "Load model…" calls
    assert "frame.tif is a TIFF image, not an msclassify model file" in \
        widget.status_label.text()

    # a deleted widget stops listening: painting, adding layers, moving sliders still work
    widget.live_check.setChecked(True)
    widget.deleteLater()
    qtbot.waitUntil(lambda: sip.isdeleted(widget))
    layer.paint((5, 5), 2)
    viewer.add_image(np.zeros((3, 8, 8)), name="stack")
    viewer.dims.set_current_step(0, 2)
    qtbot.wait(300)


# -- tabular -------------------------------------------------------------------------------------

def test_tabular_widget_plots_cost_against_precision(make_napari_viewer, plugin, qtbot):
    viewer = make_napari_viewer()
    _, widget = viewer.window.add_plugin_dock_widget("msclassify", "Tabular (cost vs accuracy)")
    assert isinstance(widget, TabularWidget)
    assert widget.canvas is None                       # the plot comes with the first result
    from msclassify.tabular import DEFAULT_COST_TRADEOFFS
    qtbot.waitUntil(lambda: widget.mu_edit.text() != "", timeout=JOB_TIMEOUT)
    assert widget.mu_edit.text() == ", ".join(f"{mu:g}" for mu in DEFAULT_COST_TRADEOFFS)
    widget.set_files(TABULAR / "yahoo_style.train", TABULAR / "yahoo_style.test",
                     TABULAR / "yahoo_style.cost", file_format="svmlight")
    widget.mu_edit.setText("1e-3, 1e-2")
    widget.trees_spin.setValue(30)
    with qtbot.waitSignal(widget.sweep_done, timeout=JOB_TIMEOUT):
        widget.run_button.click()
    sweep = widget.sweep
    assert sweep is not None and sweep.completed, widget.status_label.text()
    assert sweep.metric == "precision@5" and len(sweep.points) == 3
    assert widget.progress.value() == widget.progress.maximum() == 90
    assert widget.axes.get_ylabel() == "precision@5"
    cegb_line, plain_marker = widget.axes.get_lines()
    np.testing.assert_allclose(cegb_line.get_xdata(), sweep.costs[1:])
    np.testing.assert_allclose(plain_marker.get_ydata(), sweep.scores()[:1])
    assert widget.table.rowCount() == 3
    assert widget.table.item(2, 4).text() == ", ".join(sweep.points[2].features_used)

    widget.set_files(TABULAR / "miniboone_style.txt", costs=TABULAR / "miniboone_style.cost")
    widget.mu_edit.setText("0.01")
    widget.trees_spin.setValue(10)
    with qtbot.waitSignal(widget.sweep_done, timeout=JOB_TIMEOUT):
        widget.run()
    assert widget.sweep.metric == "accuracy" and widget.axes.get_ylabel() == "accuracy"

    widget.mu_edit.setText("0, 1e-3")
    with qtbot.waitSignal(widget.sweep_done, timeout=JOB_TIMEOUT):
        widget.run()
    assert "must be > 0" in widget.status_label.text()
    widget.mu_edit.setText("1e-3")
    widget.set_files(TABULAR / "miniboone_style.txt", costs=TABULAR / "yahoo_style.cost")
    with qtbot.waitSignal(widget.sweep_done, timeout=JOB_TIMEOUT):
        widget.run()
    assert "holds 30 costs but" in widget.status_label.text()
    assert "has 12 features" in widget.status_label.text()


def test_docked_from_the_menu_the_widget_sets_its_scribbles_up_once(make_napari_viewer, plugin,
                                                                   qtbot):
    """napari hands a widget docked from its menu a proxy of the viewer, and a new proxy of a
    layer at each access: the widget must still know its scribble layer when other layers
    come, go or move, and not take it as newly chosen (which gave the selection back to it and
    put it in paint mode again, and made another segmentation layer object, each time)."""
    viewer = make_napari_viewer(show=True)
    viewer.add_image(np.full((96, 128), 40, np.uint8), name="frame")
    widget = pixel_widget(viewer)
    layer = widget.new_scribble_layer()
    qtbot.waitUntil(lambda: "frame segmentation" in viewer.layers and layer.mode == "paint",
                    timeout=10000)
    qtbot.wait(200)
    # the user pans on the scribbles, selects the image, moves and adds layers
    layer.mode = "pan_zoom"
    viewer.layers.selection.active = viewer.layers["frame"]
    viewer.layers.move(viewer.layers.index("frame segmentation"), 0)
    viewer.add_points(np.zeros((0, 2)), name="points")
    viewer.layers.selection.active = viewer.layers["frame"]
    viewer.layers.remove("points")
    qtbot.wait(300)
    assert layer.mode == "pan_zoom"
    assert viewer.layers.selection.active.name == "frame"
    assert widget.scribble_combo.currentText() == layer.name


def test_the_kernels_load_after_the_docks_layer_steps(make_napari_viewer, plugin, qtbot,
                                                      monkeypatch):
    """The first fit's kernels load in a thread that shares the GIL: it is scheduled after the
    dock's last layer step (the segmentation's insert), not from the dock's build, whose turns
    can take longer than its delay; without an image, from the build."""
    from msclassify_napari import _widget as widget_module
    calls = []
    monkeypatch.setattr(widget_module, "preload_in_background",
                        lambda delay: calls.append(("preload", delay)))
    pixel_widget(make_napari_viewer(show=True))         # nothing to segment: at once
    assert calls == [("preload", widget_module.PRELOAD_DELAY_S)]
    calls.clear()
    viewer = make_napari_viewer(show=True)
    viewer.add_image(np.full((96, 128), 40, np.uint8), name="frame")
    viewer.add_labels(np.zeros((96, 128), np.uint8), name="scribbles")
    viewer.layers.events.inserted.connect(lambda event: calls.append(("inserted",
                                                                      event.value.name)))
    pixel_widget(viewer)
    assert calls == []
    qtbot.waitUntil(lambda: len(calls) == 2, timeout=10000)
    qtbot.wait(200)
    assert calls == [("inserted", "frame segmentation"),
                     ("preload", widget_module.PRELOAD_DELAY_S)]


@pytest.mark.parametrize("dock_name", ["Pixel classifier", "Volume"])
def test_a_dock_closed_before_its_steps_ran_stops_them(make_napari_viewer, plugin, qtbot,
                                                       dock_name):
    """New queues its layer steps (`_layers.in_turns`); the dock closed right after (its X:
    napari takes the dock out of the window and frees it in a later garbage collection) stops
    the steps left. Before, they ran for the closed dock: the segmentation step replaced the
    user's own layer of its name, napari's removal collected the garbage, the dock with it,
    and the step went on with a deleted widget ("wrapped C/C++ object ... has been deleted",
    a traceback in the window)."""
    import msclassify_napari._volume  # noqa: F401  (imported: the dock is built at once)
    viewer = make_napari_viewer(show=True)
    pixel = dock_name == "Pixel classifier"
    shape = (96, 128) if pixel else (8, 32, 32)
    name = "frame" if pixel else "volume"
    viewer.add_image(np.full(shape, 40, np.uint8), name=name)
    dock_widget, dock = viewer.window.add_plugin_dock_widget("msclassify", dock_name)
    widget = dock.widget             # (the module is imported: built at once, `_dock`)
    qtbot.wait(300)                                  # the dock's own steps
    # the user's own layer of the segmentation's name, not a Labels layer of that shape
    viewer.add_image(np.zeros((4, 4)), name=f"{name} segmentation")
    (widget.new_scribble_layer if pixel else widget.new_scribbles)()
    scribbles = f"{name} scribbles"
    # the Pixel dock inserts its scribbles at once, the Volume dock a turn after making them
    assert (scribbles in viewer.layers) == pixel
    dock_widget.destroyOnClose()                     # what the dock's X does
    del dock, widget
    qtbot.wait(600)                                  # (pytest-qt fails on a step's exception)
    assert sorted(layer.name for layer in viewer.layers) == \
        sorted([name, f"{name} segmentation"] + [scribbles] * pixel)
    assert viewer.layers[f"{name} segmentation"].data.shape == (4, 4)    # left as it was
    if pixel:
        assert viewer.layers[scribbles].mode == "pan_zoom"      # nor put in paint mode
