"""The napari side of large images: the OME-Zarr reader, the job without Qt (visible region,
whole image with progress, stop and resume) and the dock in a viewer."""

import numpy as np
import pytest
import zarr

from msclassify import PixelClassifier
from msclassify_napari._large import LargeImageJob, get_zarr_reader, read_ome_zarr


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
    assert [p[:2] for p in seen] == [(1, 25), (2, 25), (3, 25)] and seen[-1][2] > 0
    steps = list(job.segment_whole_steps(tmp_path / "out.zarr", chunks=64))
    assert steps[0][0] == 4 and steps[-1] == ("finished", str(tmp_path / "out.zarr"))
    written = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")["labels/classes/0"][:]
    assert np.array_equal(written, model.predict(image))


@pytest.mark.gui
def test_dock_segments_the_visible_region_in_a_viewer(make_napari_viewer, qtbot, tmp_path,
                                                      model_and_image):
    from msclassify_napari._large import LargeImageWidget

    model, image = model_and_image
    model.save(tmp_path / "m.msc")
    viewer = make_napari_viewer()
    for data, kwargs, _ in read_ome_zarr(_ome(tmp_path / "image.zarr", image)):
        viewer.add_image(data, **kwargs)
    dock = LargeImageWidget(viewer)
    dock.model_path.setText(str(tmp_path / "m.msc"))
    dock.segment_visible()
    qtbot.waitUntil(lambda: "visible region" in viewer.layers, timeout=60000)
    layer = viewer.layers["visible region"]
    top, left = (int(v) for v in layer.translate)
    h, w = layer.data.shape
    assert np.array_equal(layer.data, model.predict(image)[top:top + h, left:left + w])
