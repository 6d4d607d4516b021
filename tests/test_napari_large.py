"""The napari side of large images: the OME-Zarr reader, the scribble store, the job without Qt
(train around the scribbles, visible region, whole image with progress, stop and resume) and
the dock in a real window (xvfb-run): mouse strokes -> Train -> Segment visible region.

Run: ``xvfb-run -a python -m pytest tests/test_napari_large.py``.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from msclassify import PixelClassifier, load_model
from msclassify.pixel import BACKGROUND_NICE, predict_region, run_at_lower_priority, \
    training_windows
from msclassify_napari._large import LargeImageJob
from msclassify_napari._tiled_labels import TiledLabels
from msclassify_napari._zarr_reader import get_zarr_reader, read_ome_zarr


@pytest.fixture(scope="module")
def model_and_image():
    rng = np.random.default_rng(0)
    image = np.clip(rng.normal(70, 12, (300, 260)), 0, 255).astype(np.uint8)
    image[40:250, 30:200] += 100
    labels = np.zeros(image.shape, np.uint8)
    labels[3:8, 3:250] = 1
    labels[120:140, 80:110] = 2
    return PixelClassifier("fast", n_estimators=5, random_state=0).fit(image, labels), image


def _ome(path, image):
    root = zarr.open_group(str(path), mode="w")
    root.attrs["ome"] = {"version": "0.5", "multiscales": [{
        "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
        "datasets": [{"path": "0"}, {"path": "1"}]}]}
    for level, data in enumerate((image, image[::2, ::2])):
        array = root.create_array(str(level), shape=data.shape, chunks=(64, 64), dtype=data.dtype)
        array[:] = data
    return path


def test_reader_gives_every_level_and_written_labels(tmp_path, model_and_image):
    model, image = model_and_image
    path = _ome(tmp_path / "image.zarr", image)
    assert get_zarr_reader(str(path)) is read_ome_zarr
    assert get_zarr_reader(str(tmp_path)) is None
    [(levels, kwargs, kind)] = read_ome_zarr(path)
    assert kind == "image" and kwargs["multiscale"] and [a.shape for a in levels] == [
        (300, 260), (150, 130)]
    job = LargeImageJob(model, str(path))
    assert job.segment_whole(tmp_path / "out.zarr", chunks=128)
    layers = read_ome_zarr(tmp_path / "out.zarr" / "labels" / "classes")
    assert np.array_equal(np.asarray(layers[0][0]), model.predict(image))


def test_opening_an_ome_zarr_imports_only_zarr(tmp_path, model_and_image):
    """napari calls the reader on its GUI thread and adds its layers in the same call: the
    reader's module imported the whole classifier (scikit-learn, Numba kernels: 6-9 s of
    frozen window at load 10, `bench_napari_open.py`)."""
    import json
    import subprocess
    import sys

    path = _ome(tmp_path / "image.zarr", model_and_image[1])
    # (napari's own settings, which the plugin's activation reads, import Numba and Dask)
    heavy = ["sklearn", "msclassify.pixel", "msclassify.features", "msclassify.cegb",
             "msclassify_napari._large", "qtpy",
             # the video reader's (the plugin's activation needs only the extensions' list)
             "msclassify.io._open", "msclassify.io._video", "imageio"]
    code = ("import json, sys, npe2; npe2.PluginManager.instance().discover(); "
            f"layers = npe2.read([{str(path)!r}], stack=False, plugin_name='msclassify'); "
            f"print(json.dumps([len(layers[0][0]), [m for m in {heavy!r} if m in sys.modules]]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [2, []]


def test_job_segments_the_visible_region_and_stops_and_resumes(tmp_path, model_and_image):
    model, image = model_and_image
    job = LargeImageJob(model, image)
    region = job.visible_region(np.array([[0, 250, -20], [0, 400, 70]]))
    assert region == (slice(250, 300), slice(0, 71))
    labels, offset = job.segment_region(region)
    assert offset == (250, 0) and np.array_equal(labels, model.predict(image)[region])
    seen = []
    assert not job.segment_whole(tmp_path / "out.zarr", chunks=64,
                                 on_progress=lambda *p: seen.append(p),
                                 should_stop=lambda: len(seen) >= 3)
    assert seen == [(1, 25), (2, 25), (3, 25)]
    assert job.segment_whole(tmp_path / "out.zarr", chunks=64,
                             on_progress=lambda *p: seen.append(p))
    assert seen[3] == (4, 25) and seen[-1] == (25, 25) and len(seen) == 25   # resumed
    written = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")["labels/classes/0"][:]
    assert np.array_equal(written, model.predict(image))


def _own_nice():
    import os
    import threading
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_the_whole_image_runs_below_the_callers_priority_with_the_same_result(
        tmp_path, model_and_image):
    model, image = model_and_image
    job = LargeImageJob(model, image)
    mine, seen = _own_nice(), []
    assert not job.segment_whole(tmp_path / "out.zarr", chunks=64, nice=BACKGROUND_NICE,
                                 on_progress=lambda *p: seen.append(_own_nice()),
                                 should_stop=lambda: len(seen) >= 2)       # stops as before
    assert seen == [min(mine + BACKGROUND_NICE, 19)] * 2 and _own_nice() == mine
    assert job.segment_whole(tmp_path / "out.zarr", chunks=64, nice=BACKGROUND_NICE)
    written = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")["labels/classes/0"][:]
    assert np.array_equal(written, model.predict(image))
    with pytest.raises(ZeroDivisionError):                    # errors reach the caller
        run_at_lower_priority(lambda: 1 / 0)
    assert _own_nice() == mine


def test_a_store_made_by_another_model_is_not_resumed(tmp_path, model_and_image):
    model, image = model_and_image
    path = _ome(tmp_path / "image.zarr", image)
    model.save(tmp_path / "a.msc")
    job = LargeImageJob(model, str(path))
    assert not job.segment_whole(tmp_path / "out.zarr", chunks=64, model_file=tmp_path / "a.msc",
                                 should_stop=lambda: True)
    other = PixelClassifier("fast", n_estimators=3, random_state=1).fit(
        image, model.predict(image)[:, :] * (np.arange(260) % 7 == 0))
    other.save(tmp_path / "b.msc")
    with pytest.raises(OSError, match="made by something else"):
        LargeImageJob(other, str(path)).segment_whole(tmp_path / "out.zarr", chunks=64,
                                                      model_file=tmp_path / "b.msc")
    from msclassify.cli import main          # the command line resumes the dock's store
    assert main(["predict", str(tmp_path / "a.msc"), str(path), "-o", str(tmp_path / "out.zarr"),
                 "--chunks", "64", "-q"]) == 0
    written = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")["labels/classes/0"][:]
    assert np.array_equal(written, model.predict(image))


def test_tiled_labels_index_like_numpy_and_store_only_painted_tiles():
    rng = np.random.default_rng(1)
    reference = np.zeros((300, 230), np.uint8)
    labels = TiledLabels(reference.shape, tile=32)
    for _ in range(60):
        (y0, y1), (x0, x1) = np.sort(rng.integers(0, 300, 2)), np.sort(rng.integers(0, 230, 2))
        value = rng.integers(0, 4)
        reference[y0:y1, x0:x1] = value
        labels[y0:y1, x0:x1] = value
        ys, xs, values = rng.integers(-300, 300, 9), rng.integers(-230, 230, 9), \
            rng.integers(0, 4, 9)
        reference[ys, xs] = values
        labels[(ys, xs)] = values
        assert np.array_equal(labels[(ys, xs)], reference[ys, xs])
    assert np.array_equal(np.asarray(labels), reference)
    view = labels.window((slice(100, 260), slice(-100, None)))
    assert view.shape == (160, 100) and np.array_equal(np.asarray(view), reference[100:260, 130:])
    view[3, 4:9] = 5
    reference[103, 134:139] = 5
    assert view[3, 4] == 5 and np.array_equal(np.asarray(labels), reference)
    for key, value in (((7, np.array([3, 200, -1])), 6),            # an integer and an array
                       ((np.array([[5], [250]]), 40), 2),
                       (rng.random(reference.shape) < 0.01, 3)):   # a boolean mask
        reference[key] = value
        labels[key] = value
        assert np.array_equal(labels[key], reference[key])
    assert np.array_equal(np.asarray(labels), reference)
    snapshot = labels.copy()
    labels[0, 0] = 7
    assert snapshot[0, 0] == reference[0, 0]
    fresh = TiledLabels((40000, 40000))
    fresh[39990:39995, 100] = 2
    fresh[0:10, 0:10] = 0                         # erasing nothing stores nothing
    assert fresh.stored_tiles() == [(156, 0)] and fresh.nbytes_stored == 256 * 256
    for key in (np.s_[::2, :], np.s_[1:5, [1, 2]], np.zeros((3, 3), bool),
                np.s_[np.array([1.5]), 2]):
        with pytest.raises(IndexError):
            fresh[key]


def test_job_trains_around_the_scribbles_as_the_api_does(model_and_image):
    _, image = model_and_image
    job = LargeImageJob(None, image)
    job.scribbles[3:8, 3:250] = 1
    job.scribbles[120:140, 80:110] = 2
    trained = job.train("fast", n_estimators=5)
    frames, labels = training_windows(image, np.asarray(job.scribbles), "fast")
    api = PixelClassifier("fast", n_estimators=5, random_state=0).fit(frames, labels)
    region = (slice(100, 200), slice(50, 150))
    assert np.array_equal(job.segment_region(region)[0], predict_region(api, image, region))
    assert trained is job.model


def _dock_with_a_model_file(make_napari_viewer, tmp_path, model_and_image):
    """A viewer with the OME-Zarr "image" and a Large image dock given the model as a file."""
    from msclassify_napari._large import LargeImageWidget

    model, image = model_and_image
    model.save(tmp_path / "m.msc")
    viewer = make_napari_viewer()
    for data, kwargs, _ in read_ome_zarr(_ome(tmp_path / "image.zarr", image)):
        viewer.add_image(data, **kwargs)
    dock = LargeImageWidget(viewer)
    dock.model_path.setText(str(tmp_path / "m.msc"))
    return viewer, dock


@pytest.mark.gui
def test_dock_segments_the_visible_region_in_a_viewer(make_napari_viewer, qtbot, tmp_path,
                                                      model_and_image):
    model, image = model_and_image
    viewer, dock = _dock_with_a_model_file(make_napari_viewer, tmp_path, model_and_image)
    dock.segment_visible()
    qtbot.waitUntil(lambda: "visible region" in viewer.layers, timeout=60000)
    layer = viewer.layers["visible region"]
    top, left = (int(v) for v in layer.translate)
    h, w = layer.data.shape
    assert np.array_equal(layer.data, model.predict(image)[top:top + h, left:left + w])
    # zoomed in: a region of another shape, shown in the same layer (reshaped in place: napari's
    # remove + add would stall the window twice)
    viewer.camera.zoom *= 3
    with qtbot.waitSignal(dock.region_shown, timeout=60000):
        dock.segment_visible()
    again = viewer.layers["visible region"]
    assert again is layer and again.data.shape != (h, w)
    top, left = (int(v) for v in again.translate)
    h, w = again.data.shape
    assert np.array_equal(again.data, model.predict(image)[top:top + h, left:left + w])


def test_dock_gives_the_model_file_to_every_image_and_writes_beside_it(
        make_napari_viewer, qtbot, tmp_path, model_and_image):
    from msclassify_napari._large import LargeImageWidget

    model, image = model_and_image
    model.save(tmp_path / "m.msc")
    viewer = make_napari_viewer()
    folder = tmp_path / "my scans"                       # a folder name with a space
    folder.mkdir()
    for name in ("first", "second"):
        for data, kwargs, _ in read_ome_zarr(_ome(folder / f"{name}.zarr", image)):
            viewer.add_image(data, **kwargs)
    dock = LargeImageWidget(viewer)
    dock.model_path.setText(str(tmp_path / "m.msc"))
    models = []
    for name in ("first", "second"):
        viewer.layers.selection.active = viewer.layers[name]
        models.append(dock.job().model)
    assert models[0] is not None and models[1] is models[0]
    finished = []
    dock.whole_finished.connect(finished.append)
    dock.segment_whole()                                  # no output given: beside the image
    assert dock.stop_button.isEnabled()                   # only a whole-image run stops
    qtbot.waitUntil(lambda: bool(finished), timeout=60000)
    assert [Path(path) for path in finished] == [folder / "second.labels.zarr"]
    root = zarr.open_group(str(finished[0]), mode="r")
    assert np.array_equal(root["labels/classes/0"][:], model.predict(image))


def test_a_region_result_stays_on_its_image_or_is_dropped_with_it(make_napari_viewer, qtbot,
                                                                  tmp_path, model_and_image):
    from msclassify_napari._large import LargeImageWidget

    model, image = model_and_image
    model.save(tmp_path / "m.msc")
    viewer = make_napari_viewer()
    for name, scale in (("first", 1), ("second", 2)):
        for data, kwargs, _ in read_ome_zarr(_ome(tmp_path / f"{name}.zarr", image)):
            viewer.add_image(data, scale=(scale, scale), **kwargs)
    dock = LargeImageWidget(viewer)
    dock.model_path.setText(str(tmp_path / "m.msc"))
    viewer.layers.selection.active = viewer.layers["first"]
    dock.segment_visible()
    assert not dock.stop_button.isEnabled() and not dock.train_button.isEnabled()
    viewer.layers.selection.active = viewer.layers["second"]   # while the worker runs
    qtbot.waitUntil(lambda: "visible region" in viewer.layers, timeout=60000)
    assert tuple(viewer.layers["visible region"].scale) == (1, 1)       # on "first"
    viewer.layers.remove("visible region")
    dock.segment_visible()                                   # on "second", closed meanwhile
    viewer.layers.remove("second")
    qtbot.waitUntil(lambda: "was closed" in dock.status.text(), timeout=60000)
    assert "visible region" not in viewer.layers


def _shown_dock(make_napari_viewer, qtbot, tmp_path, image):
    """A shown viewer with ``image`` as an OME-Zarr ("image"), all of it on screen, and a
    Large image dock docked, its classifier loaded."""
    from msclassify_napari._large import LargeImageWidget

    viewer = make_napari_viewer(show=True)
    for data, kwargs, _ in read_ome_zarr(_ome(tmp_path / "image.zarr", image)):
        viewer.add_image(data, **kwargs)
    dock = LargeImageWidget(viewer)
    viewer.window.add_dock_widget(dock)
    # the classifier loads in a worker after docking; its presets then fill the box
    qtbot.waitUntil(lambda: dock.features_combo.isEnabled(), timeout=300000)
    viewer.reset_view()                                  # the whole image on screen
    qtbot.wait(50)
    return viewer, dock


@pytest.mark.gui
def test_scribble_train_and_segment_the_visible_region_in_a_real_window(
        make_napari_viewer, qtbot, tmp_path, model_and_image):
    """Mouse strokes on a multiscale OME-Zarr -> Train -> Segment visible region: the result
    layer is what the API gives from the same scribbles, on the region on screen."""
    from benchmarks.napari_session import stroke

    _, image = model_and_image
    viewer, dock = _shown_dock(make_napari_viewer, qtbot, tmp_path, image)
    dock.features_combo.setCurrentText("fast")
    assert dock.features_combo.currentText() == "fast"
    dock.scribble_here()         # the layer made, napari's insert, the brush: a turn each
    qtbot.waitUntil(lambda: "image scribbles" in viewer.layers)
    layer = viewer.layers["image scribbles"]
    qtbot.waitUntil(lambda: layer.mode == "paint")     # painting starts one turn after the add
    assert viewer.layers.selection.active is layer
    assert layer.data.origin == (0, 0) and layer.data.shape == image.shape   # all on screen
    layer.brush_size = 5
    for value, points in ((1, [(15, x) for x in range(20, 240, 10)]),
                          (2, [(150, x) for x in range(60, 170, 10)])):
        dock.class_spin.setValue(value)
        stroke(viewer, points)
        qtbot.wait(30)
        assert (dock.job().scribbles[tuple(np.array(points).T)] == value).all()
    assert len(dock.job().scribbles.stored_tiles()) <= 4          # only painted tiles
    with qtbot.waitSignal(dock.trained, timeout=300000):
        dock.train_button.click()
    qtbot.waitUntil(lambda: dock.worker is None)         # buttons enabled again
    viewer.scene.camera.zoom *= 2                        # a part of the image on screen
    qtbot.wait(50)
    with qtbot.waitSignal(dock.region_shown, timeout=300000):
        dock.visible_button.click()
    result = viewer.layers["visible region"]
    top, left = (int(v) for v in result.translate)
    h, w = result.data.shape
    assert 0 < h * w < image.size
    scribbles = np.asarray(dock.job().scribbles)
    api = PixelClassifier("fast", random_state=0).fit(*training_windows(image, scribbles, "fast"))
    region = (slice(top, top + h), slice(left, left + w))
    assert np.array_equal(result.data, predict_region(api, image, region))
    assert np.array_equal(result.data, api.predict(image)[region])
    assert viewer.layers.selection.active is layer              # painting goes on
    assert viewer.layers.index(result) < viewer.layers.index(layer)

    qtbot.waitUntil(lambda: dock.worker is None)
    dock.output_path.setText(str(tmp_path / "out.zarr"))         # the whole image, in the back
    with qtbot.waitSignal(dock.whole_finished, timeout=300000,
                          check_params_cb=lambda *_: True, raising=False) as blocker:
        dock.whole_button.click()
    assert blocker.signal_triggered, dock.status.text()
    whole = viewer.layers["out.zarr classes"]
    written = whole.data[0] if whole.multiscale else whole.data
    assert np.array_equal(np.asarray(written), api.predict(image))
    assert viewer.layers.index(whole) < viewer.layers.index(layer)
    assert (tmp_path / "out.msc").exists()                       # the model that made it
    assert dock.progress.value() == dock.progress.maximum() == 1     # one 1024² chunk

    dock.model_path.setText(str(tmp_path / "m.msc"))             # a model file replaces it
    api.save(tmp_path / "m.msc")
    assert np.array_equal(dock.job().model.predict(image), load_model(tmp_path / "m.msc")
                          .predict(image))


@pytest.mark.gui
def test_the_dock_closed_right_after_scribble_here_stops_its_steps(
        make_napari_viewer, qtbot, tmp_path, model_and_image):
    """Scribble here makes its layer, napari inserts it and its brush starts, a turn each
    (`_layers.in_turns`); the dock closed right after the press stops the steps left (as
    New's in `tests/test_napari_plugin.py::test_a_dock_closed_before_its_steps_ran_stops_them`):
    no layer of a closed dock's goes into the window."""
    viewer, dock = _shown_dock(make_napari_viewer, qtbot, tmp_path, model_and_image[1])
    dock.scribble_here()
    viewer.window.remove_dock_widget(dock)           # what the dock's X does
    qtbot.wait(300)
    assert "image scribbles" not in viewer.layers
    assert [layer.name for layer in viewer.layers] == ["image"]


@pytest.mark.gui
def test_whole_image_results_update_in_place_and_closing_the_dock_stops_a_run(
        make_napari_viewer, qtbot, tmp_path, model_and_image):
    _, image = model_and_image
    viewer, dock = _dock_with_a_model_file(make_napari_viewer, tmp_path, model_and_image)
    viewer.window.add_dock_widget(dock)
    dock.output_path.setText(str(tmp_path / "out.zarr"))
    shown = []
    for _ in range(2):                    # the second run resumes the finished store
        with qtbot.waitSignal(dock.whole_finished, timeout=60000):
            dock.segment_whole()
        qtbot.waitUntil(lambda: dock.worker is None, timeout=60000)
        shown.append([layer for layer in viewer.layers if layer.name.startswith("out.zarr")])
    assert [layer.name for layer in shown[1]] == ["out.zarr classes"]
    assert shown[1][0] is shown[0][0]           # updated in place, not removed and re-added

    # a run of many chunks, then the dock is closed: the run stops after its chunk
    big = np.tile(image, (8, 8))
    for data, kwargs, _ in read_ome_zarr(_ome(tmp_path / "big.zarr", big)):
        viewer.add_image(data, **kwargs)
    viewer.layers.selection.active = viewer.layers["big"]
    dock.output_path.setText(str(tmp_path / "big out.zarr"))
    worker = dock.segment_whole()
    with qtbot.waitSignal(worker.finished, timeout=300000):
        viewer.window.remove_dock_widget(dock)
    assert "big out.zarr classes" not in viewer.layers
    root = zarr.open_group(str(tmp_path / "big out.zarr"), mode="r")
    assert root["labels/classes/0"].nchunks_initialized < root["labels/classes/0"].nchunks
