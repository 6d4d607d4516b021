"""The napari side of volumes: the job without Qt (train with the spacing, one plane equal to
the whole prediction in any orientation, the whole volume chunk by chunk) and the dock in a
real viewer (scribbles on a slice, Train, live update, Apply to volume)."""

import numpy as np
import pytest

from msclassify_napari._controller import ClassifierSettings
from msclassify_napari._volume import SCRIBBLES, SEGMENTATION, VolumeJob


def _volume():
    rng = np.random.default_rng(0)
    volume = rng.normal(0.3, 0.05, (9, 40, 36)).astype(np.float32)
    zz, yy, xx = np.indices(volume.shape)
    volume[(zz - 4) ** 2 * 4 + (yy - 20) ** 2 + (xx - 17) ** 2 < 90] += 0.5
    scribbles = np.zeros(volume.shape, np.uint8)
    scribbles[4, :3] = 1
    scribbles[4, 18:22, 15:19] = 2
    return volume, scribbles


SETTINGS = ClassifierSettings(features="fast", n_estimators=6)


def test_job_segments_planes_and_the_volume_as_the_whole_prediction():
    volume, scribbles = _volume()
    job = VolumeJob(volume, (3, 1, 1), SETTINGS)
    model = job.train(scribbles)
    assert model.bank_.grid.spacing == (3.0, 1.0, 1.0)
    whole = model.predict(volume)
    assert set(np.unique(whole)) == {1, 2}
    for axis, index in ((0, 4), (0, 8), (1, 19), (2, 0)):
        assert np.array_equal(job.segment_plane(axis, index), np.take(whole, index, axis=axis))
    out = np.zeros(volume.shape, np.uint8)
    steps = list(job.segment_volume_steps(chunks=16))
    assert steps[-1][0] == steps[-1][1] == len(steps) > 1
    for _, _, chunk, labels in steps:
        out[chunk] = labels
    assert np.array_equal(out, whole)
    live = job.train(scribbles, live=True)
    assert live.n_estimators <= SETTINGS.n_estimators


def test_job_trains_while_the_scribbles_are_painted():
    """The dock hands the worker the scribble layer's own array (no copy on the window's
    thread); strokes painted into it while the job reads it never break the training (numpy's
    nonzero raises when the array changes under it: 30 of 30 reads of the bare array did)."""
    import threading
    rng = np.random.default_rng(0)
    volume = rng.normal(0.3, 0.05, (64, 128, 128)).astype(np.float32)
    volume[5:9, 40:60, 40:60] += 0.5
    scribbles = np.zeros(volume.shape, np.uint8)
    scribbles[6, :3] = 1
    scribbles[6, 45:55, 45:55] = 2
    stop = threading.Event()

    def paint():                           # the window's thread painting on slice 40
        k = 0
        while not stop.is_set():
            scribbles[40, 10:20, 10 + k % 50] ^= 1
            k += 1
    painter = threading.Thread(target=paint)
    painter.start()
    try:
        job = VolumeJob(volume, (3, 1, 1), SETTINGS)
        for _ in range(3):
            assert set(job.train(scribbles, live=True).classes_) == {1, 2}
    finally:
        stop.set()
        painter.join()


@pytest.mark.gui
def test_dock_scribbles_trains_updates_and_applies_in_a_viewer(make_napari_viewer, qtbot):
    from msclassify_napari._volume import VolumeWidget

    volume, scribbles = _volume()
    viewer = make_napari_viewer()
    viewer.add_image(volume, name="stack", scale=(3, 1, 1))
    dock = VolumeWidget(viewer)
    viewer.window.add_dock_widget(dock)
    layer = dock.new_scribbles()
    assert [box.value() for box in dock.spacing] == [3.0, 1.0, 1.0]
    qtbot.waitUntil(lambda: layer in viewer.layers and SEGMENTATION in viewer.layers,
                    timeout=10000)                         # napari's inserts, turns later
    assert layer.data.shape == volume.shape and viewer.dims.ndisplay == 2
    layer.data = scribbles                                 # what painting slice 4 leaves
    viewer.dims.set_current_step(0, 4)
    dock.settings = SETTINGS
    dock.train(live=False)
    qtbot.waitUntil(lambda: dock.worker is None and SEGMENTATION in viewer.layers, timeout=120000)
    model = dock.job.model
    whole = model.predict(volume)
    segmentation = viewer.layers[SEGMENTATION].data
    assert np.array_equal(segmentation[4], whole[4])       # the plane on screen, at once
    assert not segmentation[0].any()                       # ... and only that plane
    # a live update on the plane painted: retrains the quick model
    dock.live.setChecked(True)
    layer.events.paint()
    qtbot.waitUntil(lambda: dock.worker is None and dock.job.model is not model, timeout=120000)
    assert dock.job.model.n_estimators <= 6
    # an orthogonal plane: napari shows z and x with y on the slider after rolling the axes
    viewer.dims.order = (1, 0, 2)
    viewer.dims.set_current_step(1, 21)
    dock.train(live=False)
    qtbot.waitUntil(lambda: dock.worker is None and "along y" in dock.status.text(),
                    timeout=120000)
    assert np.array_equal(viewer.layers[SEGMENTATION].data[:, 21],
                          dock.job.model.predict(volume)[:, 21])
    dock.apply()
    qtbot.waitUntil(lambda: dock.worker is None and "done" in dock.status.text(), timeout=120000)
    assert np.array_equal(viewer.layers[SEGMENTATION].data, dock.job.model.predict(volume))
    assert SCRIBBLES in viewer.layers
    # another volume (the last one added is the dock's): its segmentation is the same layer,
    # emptied and reshaped in place (napari's remove + add would stall the window twice)
    before = viewer.layers[SEGMENTATION]
    before.opacity = 0.9                                   # the user's setting stays
    viewer.add_image(volume[:5, :20], name="small stack", scale=(2, 1, 1))
    old = layer
    layer = dock.new_scribbles()
    qtbot.waitUntil(lambda: viewer.layers[SEGMENTATION].data.shape == (5, 20, volume.shape[2]),
                    timeout=10000)
    after = viewer.layers[SEGMENTATION]
    assert after is before and not after.data.any() and after.opacity == 0.9
    assert tuple(after.scale) == (2, 1, 1)
    # ... and on top again, above the stack opened since (not hidden under it)
    assert viewer.layers.index(after) > viewer.layers.index(viewer.layers["small stack"])
    # the first volume's scribbles are kept, set aside by name; Train uses the new ones
    assert viewer.layers[SCRIBBLES] is layer and layer.data.shape == (5, 20, volume.shape[2])
    assert viewer.layers[f"{SCRIBBLES} (stack)"] is old and np.array_equal(old.data, scribbles)
    dock.live.setChecked(True)
    old.events.paint()                                     # strokes there: no update
    assert dock.worker is None
    dock.live.setChecked(False)
    layer.data = scribbles[:5, :20]
    # the plane on screen in the volume's own voxels: napari's slider is in world units
    # (z: 0, 2, 4, ... with spacings 3 and 2), world z 4 is the small stack's slice 2
    viewer.dims.order = (0, 1, 2)
    viewer.dims.set_point(0, 4.0)
    dock.train(live=False)
    qtbot.waitUntil(lambda: dock.worker is None and "segmented" in dock.status.text(),
                    timeout=120000)
    assert dock.job.volume.shape == (5, 20, volume.shape[2])
    assert "plane 2 along z" in dock.status.text()
    assert np.array_equal(viewer.layers[SEGMENTATION].data[2],
                          dock.job.model.predict(volume[:5, :20])[2])
    viewer.dims.set_point(0, 20.0)                         # beyond its 5 slices (world 0-8)
    dock.train(live=False)
    qtbot.waitUntil(lambda: dock.worker is None and "trained" in dock.status.text(),
                    timeout=120000)
    assert "outside the volume" in dock.status.text()
    # the scribbles' volume deleted: Train says so (another image of 3 dimensions is open)
    viewer.layers.remove("small stack")
    dock.train(live=False)
    assert dock.worker is None and "'small stack' of the scribbles is gone" in dock.status.text()


@pytest.mark.gui
def test_new_scribbles_stay_selected_in_paint_mode_when_the_segmentation_comes(
        make_napari_viewer, qtbot, monkeypatch):
    """Volume New: the scribbles inserted, selected and in paint mode a turn later, the
    segmentation layer inserted a few turns later on top, its layer object made a turn before
    napari's insert; it leaves the scribbles selected (the brush must paint on them, not on
    the result)."""
    from msclassify_napari import _layers
    from msclassify_napari._volume import VolumeWidget

    volume, _ = _volume()
    viewer = make_napari_viewer(show=True)
    viewer.add_image(volume, name="stack", scale=(3, 1, 1))
    dock = VolumeWidget(viewer)
    viewer.window.add_dock_widget(dock)
    made, make_layer = [], _layers.make_layer
    monkeypatch.setattr(_layers, "make_layer", lambda *args, **kwargs:
                        made.append(make_layer(*args, **kwargs)) or made[-1])
    painting, start_painting = [], dock._start_painting
    monkeypatch.setattr(dock, "_start_painting", lambda scribbles: painting.append(
        (viewer.layers.selection.active.name, scribbles in viewer.layers))
        or start_painting(scribbles))
    layer = dock.new_scribbles()
    # New's own turn makes the layer object; napari inserts it in a turn of its own
    assert SEGMENTATION not in viewer.layers and layer not in viewer.layers
    qtbot.waitUntil(lambda: SEGMENTATION in viewer.layers, timeout=10000)
    # inserted with the volume left selected: the selection moves in a turn of its own
    assert painting == [("stack", True)]
    qtbot.wait(100)
    assert [layer.name for layer in made] == [SEGMENTATION]
    assert made[0] is viewer.layers[SEGMENTATION]
    assert [layer.name for layer in viewer.layers][-2:] == [SCRIBBLES, SEGMENTATION]
    assert viewer.layers.selection.active is layer and layer.mode == "paint"
    assert viewer.window._qt_window.updatesEnabled()
    # Train before painting: the worker's error said in the status line, not raised again
    # (pytest-qt fails a test on an exception in a Qt slot; a bare PyQt6 application aborted)
    dock.settings = SETTINGS
    dock.train(live=False)
    qtbot.waitUntil(lambda: dock.worker is None, timeout=120000)
    assert "hold no scribbles" in dock.status.text()


@pytest.mark.gui
def test_dock_saves_and_loads_a_volume_model(make_napari_viewer, qtbot, tmp_path):
    """Save model… / Load model…: a model saved from one dock segments the volume in another
    as it did; a 2D model, a missing file or no model yet are said in the status line."""
    from msclassify.pixel import PixelClassifier
    from msclassify_napari._volume import VolumeWidget

    volume, scribbles = _volume()
    viewer = make_napari_viewer()
    viewer.add_image(volume, name="stack", scale=(3, 1, 1))
    dock = VolumeWidget(viewer)
    assert not dock.save_model(tmp_path / "none.msc") and "train one first" in dock.status.text()
    dock.job = VolumeJob(volume, (3, 1, 1), SETTINGS)
    model = dock.job.train(scribbles)
    assert dock.save_model(tmp_path / "volume.msc")
    other = VolumeWidget(viewer)
    other.spacing[0].setValue(1.0)
    assert other.load_model(tmp_path / "volume.msc")
    assert [box.value() for box in other.spacing] == [3.0, 1.0, 1.0]
    other.apply()
    qtbot.waitUntil(lambda: other.worker is None and "done" in other.status.text(),
                    timeout=120000)
    assert np.array_equal(viewer.layers[SEGMENTATION].data, model.predict(volume))
    PixelClassifier(features="fast", n_estimators=2).fit(volume[4], scribbles[4]).save(
        tmp_path / "flat.msc")
    assert not other.load_model(tmp_path / "flat.msc")
    assert "2D (per-slice) model" in other.status.text()
    assert not other.load_model(tmp_path / "missing.msc") and other.status.text()
