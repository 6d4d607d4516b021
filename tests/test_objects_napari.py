"""The object table dock in a real viewer: measure a segmentation, row -> object, object -> row,
the Tracks layer, saving the table. Run: ``xvfb-run -a python -m pytest tests/test_objects_napari.py``.
"""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from msclassify.objects import read_table
from msclassify_napari._objects import ObjectTableWidget, measure_layers, tracks_data

pytestmark = pytest.mark.gui
MANIFEST = Path(__file__).resolve().parents[1] / "plugins" / "msclassify_napari" / "napari.yaml"


def moving_squares(n_frames=5):
    """Two 4x4 squares of class 2 moving right by 3 px a frame; images 100 inside, 0 outside."""
    labels = np.ones((n_frames, 40, 60), np.uint8)
    for t in range(n_frames):
        labels[t, 5:9, 5 + 3 * t:9 + 3 * t] = 2
        labels[t, 25:29, 40 - 3 * t:44 - 3 * t] = 2
    return labels, np.where(labels == 2, 100, 0).astype(np.uint8)


def test_the_table_of_a_stack_and_its_tracks_without_a_viewer():
    labels, image = moving_squares()
    table, objects = measure_layers(labels, image, 2, tracks=True)
    assert len(table) == 10 and objects.shape == labels.shape
    assert set(table["area"]) == {16}
    data = tracks_data(table)
    assert data.shape == (10, 4)
    first = data[data[:, 0] == 0]
    assert first[:, 3].tolist() == [6.5 + 3 * t for t in range(5)]  # column of track 0


def test_dock_row_selects_the_object_and_a_click_selects_the_row(make_napari_viewer, tmp_path):
    from npe2 import PluginManager, PluginManifest
    manager = PluginManager.instance()
    if "msclassify" not in manager:
        manager.register(PluginManifest.from_file(MANIFEST))
    viewer = make_napari_viewer()
    labels, image = moving_squares()
    viewer.add_image(image, name="frames")
    viewer.add_labels(labels, name="frames segmentation")
    _, dock = viewer.window.add_plugin_dock_widget("msclassify", "Object table and tracks")
    assert isinstance(dock, ObjectTableWidget)
    dock.labels_choice.setCurrentText("frames segmentation")
    dock.image_choice.setCurrentText("frames")
    dock.measure()
    assert dock.view.rowCount() == 10
    assert "frames segmentation objects" in viewer.layers
    assert viewer.layers["frames segmentation tracks"].data.shape == (10, 4)
    # row -> object: the 8th row is frame 3's second object
    dock.view.selectRow(7)
    assert viewer.dims.current_step[0] == 3
    assert dock.objects_layer.selected_label == int(dock.table["object"].iloc[7])
    assert np.allclose(viewer.camera.center[-2:], dock.table[["centroid-0", "centroid-1"]]
                       .iloc[7].to_numpy())
    # object -> row: a click inside frame 1's first object
    dock.view.clearSelection()
    event = SimpleNamespace(position=(1, 6, 9))
    dock._on_object_clicked(dock.objects_layer, event)
    selected = dock.view.selectionModel().selectedRows()
    assert [index.row() for index in selected] == [2]
    dock.save(str(tmp_path / "objects.csv"))
    assert len(read_table(tmp_path / "objects.csv")) == 10
