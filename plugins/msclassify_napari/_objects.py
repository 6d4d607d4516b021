"""The object table dock: a table per object per frame, click a row to see the object, click an
object to see its row, and the tracks as a napari Tracks layer.

The logic (`measure_layers`, `tracks_data`, `row_of`, `object_at`) knows no Qt
and is tested without a viewer; `ObjectTableWidget` only wires it to napari.
Objects come from a segmentation Labels layer (class values, e.g. the pixel
classifier widget's "... segmentation") and its image: every frame that holds
the chosen class is measured with `msclassify.objects.ObjectPipeline`.
"""

import numpy as np
import pandas as pd

from msclassify.objects import (ObjectPipeline, ObjectSplitter, ObjectTracker, SPLIT_LANDSCAPES,
                                find_objects, measure_objects, write_table)

__all__ = ["ObjectTableWidget", "measure_layers", "object_at", "row_of", "tracks_data"]

# columns shown in the dock (all are in the table written by "Save table")
SHOWN = ("frame", "object", "track", "class", "area", "centroid-0", "centroid-1", "orientation",
         "axis_major_length", "eccentricity", "intensity_mean")


def measure_layers(labels, image, target, *, min_size=0, split=None, tracks=False):
    """Object table and object label images of a segmentation stack.

    Parameters
    ----------
    labels : ndarray (T, H, W) or (H, W)
        Class values per frame (0 = not predicted).
    image : ndarray, same frames
        The frames (intensity columns; the intensity splitter).
    target : int
        The class whose objects are measured.
    min_size : int
    split : str or None
        A landscape of `SPLIT_LANDSCAPES` other than ``probability`` (napari keeps
        no probabilities of every frame), or None.
    tracks : bool
        Link the objects over frames (column ``track``).

    Returns
    -------
    table : pandas.DataFrame
    objects : ndarray of int32 like ``labels``
        The object numbers of every frame (column ``object`` of the table).

    Examples
    --------
    >>> labels = np.ones((2, 8, 8), np.uint8); labels[0, 1:3, 1:3] = 2; labels[1, 2:4, 1:3] = 2
    >>> table, objects = measure_layers(labels, labels * 10, 2, tracks=True)
    >>> table[["frame", "track", "centroid-0"]].values.tolist()
    [[0.0, 0.0, 1.5], [1.0, 0.0, 2.5]]
    """
    labels = np.asarray(labels)
    image = np.asarray(image)
    single = labels.ndim == 2
    if single:
        labels, image = labels[None], image[None]
    if split == "probability":
        raise ValueError("the dock splits on the distance or the intensity; the probability "
                         "of every frame is not kept in napari")
    pipeline = ObjectPipeline(int(target), min_size=int(min_size),
                              splitter=None if split is None else ObjectSplitter(split),
                              tracker=ObjectTracker() if tracks else None)
    objects = np.zeros(labels.shape, dtype=np.int32)
    rows = []
    for frame in range(labels.shape[0]):
        objects[frame] = find_objects(labels[frame], pipeline.target, min_size=pipeline.min_size,
                                      split=pipeline.splitter, image=image[frame])
        table = measure_objects(objects[frame], image[frame], frame=frame)
        if pipeline.tracker is not None:
            table.insert(2, "track", pipeline.tracker.link(
                frame, table[["centroid-0", "centroid-1"]].to_numpy()))
        rows.append(table)
    table = pd.concat(rows, ignore_index=True)
    return table, objects[0] if single else objects


def tracks_data(table):
    """napari Tracks layer data: rows ``[track, frame, row, column]`` sorted by track and frame.

    Examples
    --------
    >>> table = pd.DataFrame({"frame": [0, 1, 0], "track": [0, 0, 1], "centroid-0": [1., 2., 5.],
    ...                       "centroid-1": [3., 4., 6.]})
    >>> tracks_data(table).tolist()
    [[0.0, 0.0, 1.0, 3.0], [0.0, 1.0, 2.0, 4.0], [1.0, 0.0, 5.0, 6.0]]
    """
    tracked = table[table["track"] >= 0].sort_values(["track", "frame"])
    return tracked[["track", "frame", "centroid-0", "centroid-1"]].to_numpy(dtype=np.float64)


def row_of(table, frame, number):
    """Index of the table row of object ``number`` in ``frame``, or None."""
    found = table.index[(table["frame"] == frame) & (table["object"] == number)]
    return None if len(found) == 0 else int(found[0])


def object_at(objects, frame, position):
    """The object number at ``position`` (row, column) of ``frame`` of an object stack, 0 if none.

    Examples
    --------
    >>> objects = np.zeros((1, 4, 4), np.int32); objects[0, 1:3, 1:3] = 7
    >>> object_at(objects, 0, (1.4, 2.2)), object_at(objects, 0, (3, 3))
    (7, 0)
    """
    stack = objects if objects.ndim == 3 else objects[None]
    row, col = (int(round(value)) for value in position[-2:])
    if not (0 <= frame < stack.shape[0] and 0 <= row < stack.shape[1]
            and 0 <= col < stack.shape[2]):
        return 0
    return int(stack[frame, row, col])


try:  # the dock needs Qt; the functions above do not
    from qtpy.QtWidgets import (QCheckBox, QComboBox, QFileDialog, QFormLayout, QLabel,
                                QPushButton, QSpinBox, QTableWidget, QTableWidgetItem,
                                QVBoxLayout, QWidget)
except ImportError:  # pragma: no cover
    QWidget = object


class ObjectTableWidget(QWidget):
    """Dock: measure the objects of a segmentation, browse them in a table, show their tracks."""

    def __init__(self, napari_viewer, parent=None):
        super().__init__(parent)
        self.viewer = napari_viewer
        self.table = None
        self.objects_layer = None
        self._syncing = False
        layout = QVBoxLayout(self)
        form = QFormLayout()
        self.labels_choice, self.image_choice = QComboBox(), QComboBox()
        form.addRow("Segmentation", self.labels_choice)
        form.addRow("Image", self.image_choice)
        self.target = QSpinBox(minimum=1, maximum=65535, value=2)
        form.addRow("Class", self.target)
        self.min_size = QSpinBox(minimum=0, maximum=10**8, value=0)
        form.addRow("Min size (px)", self.min_size)
        self.split = QComboBox()
        self.split.addItems(["no splitting"] + [name for name in SPLIT_LANDSCAPES
                                                if name != "probability"])
        form.addRow("Split touching", self.split)
        self.tracks = QCheckBox("link over frames (Tracks layer)")
        self.tracks.setChecked(True)
        form.addRow("", self.tracks)
        layout.addLayout(form)
        self.measure_button = QPushButton("Measure objects")
        self.measure_button.clicked.connect(self.measure)
        self.save_button = QPushButton("Save table…")
        self.save_button.clicked.connect(self.save)
        layout.addWidget(self.measure_button)
        layout.addWidget(self.save_button)
        self.status = QLabel("")
        layout.addWidget(self.status)
        self.view = QTableWidget(0, 0)
        self.view.setSelectionBehavior(QTableWidget.SelectRows)
        self.view.itemSelectionChanged.connect(self._on_row_selected)
        layout.addWidget(self.view)
        self.viewer.layers.events.inserted.connect(self._refresh_choices)
        self.viewer.layers.events.removed.connect(self._refresh_choices)
        self._refresh_choices()

    def _refresh_choices(self, *_):
        from napari.layers import Image, Labels
        for box, kind in ((self.labels_choice, Labels), (self.image_choice, Image)):
            current = box.currentText()
            box.clear()
            box.addItems([layer.name for layer in self.viewer.layers if isinstance(layer, kind)
                          and layer is not self.objects_layer])
            if current:
                box.setCurrentText(current)

    def measure(self):
        """Measure the chosen segmentation: fill the table, add the objects and tracks layers."""
        try:
            labels = self.viewer.layers[self.labels_choice.currentText()]
            image = self.viewer.layers[self.image_choice.currentText()]
        except KeyError:
            self.status.setText("choose a segmentation (Labels) layer and its image")
            return
        split = None if self.split.currentIndex() == 0 else self.split.currentText()
        try:
            self.table, objects = measure_layers(np.asarray(labels.data), np.asarray(image.data),
                                                 self.target.value(),
                                                 min_size=self.min_size.value(), split=split,
                                                 tracks=self.tracks.isChecked())
        except ValueError as exc:
            self.status.setText(str(exc))
            return
        self._show_layers(objects, labels)
        self._fill_view()
        n_tracks = (int(self.table["track"].max()) + 1
                    if "track" in self.table and len(self.table) else 0)
        self.status.setText(f"{len(self.table)} objects in {objects.shape[0] if objects.ndim == 3 else 1}"
                            f" frame(s)" + (f", {n_tracks} tracks" if n_tracks else ""))

    def _show_layers(self, objects, labels):
        name = f"{labels.name} objects"
        if name in self.viewer.layers:
            self.viewer.layers.remove(name)
        self.objects_layer = self.viewer.add_labels(objects, name=name, scale=labels.scale,
                                                    translate=labels.translate, opacity=0.5)
        self.objects_layer.mouse_drag_callbacks.append(self._on_object_clicked)
        tracks_name = f"{labels.name} tracks"
        if tracks_name in self.viewer.layers:
            self.viewer.layers.remove(tracks_name)
        if "track" in self.table and (self.table["track"] >= 0).any():
            self.viewer.add_tracks(tracks_data(self.table), name=tracks_name, scale=labels.scale,
                                   translate=labels.translate)

    def _fill_view(self):
        columns = [name for name in SHOWN if name in self.table]
        self.view.setColumnCount(len(columns))
        self.view.setHorizontalHeaderLabels(columns)
        self.view.setRowCount(len(self.table))
        for row, values in enumerate(self.table[columns].itertuples(index=False)):
            for column, value in enumerate(values):
                text = f"{value:.4g}" if isinstance(value, float) else str(value)
                self.view.setItem(row, column, QTableWidgetItem(text))

    def _frame_of(self, row):
        return int(self.table["frame"].iloc[row])

    def _on_row_selected(self):
        """Row -> the object: go to its frame, centre on it, select its label."""
        rows = self.view.selectionModel().selectedRows()
        if self._syncing or not rows or self.table is None:
            return
        row = rows[0].row()
        frame = self._frame_of(row)
        if self.objects_layer.data.ndim == 3:
            self.viewer.dims.set_current_step(0, frame)
        centre = self.table[["centroid-0", "centroid-1"]].iloc[row].to_numpy()
        world = centre * np.asarray(self.objects_layer.scale[-2:]) + np.asarray(
            self.objects_layer.translate[-2:])
        self.viewer.camera.center = tuple(world)
        self.objects_layer.selected_label = int(self.table["object"].iloc[row])
        self.objects_layer.show_selected_label = True

    def _on_object_clicked(self, layer, event):
        """Object -> its row."""
        position = layer.world_to_data(event.position)
        frame = int(round(position[0])) if layer.data.ndim == 3 else 0
        number = object_at(layer.data, frame, position)
        row = None if number == 0 else row_of(self.table, frame, number)
        if row is None:
            return
        self._syncing = True
        try:
            self.view.selectRow(row)
            layer.selected_label = number
        finally:
            self._syncing = False

    def save(self, path=None):
        """Write the table (CSV or Parquet by the suffix) to ``path`` or a chosen file."""
        if self.table is None:
            self.status.setText("measure the objects first")
            return
        if not path:
            path, _ = QFileDialog.getSaveFileName(self, "Save object table", "objects.csv",
                                                  "Tables (*.csv *.parquet)")
            if not path:
                return
        try:
            write_table(self.table, path, overwrite=True)
        except (ValueError, OSError, ImportError) as exc:
            self.status.setText(str(exc))
            return
        self.status.setText(f"wrote {path}")
