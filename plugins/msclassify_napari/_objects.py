"""The object table dock: a table per object per frame, click a row to see the object, click an
object to see its row, the tracks as a napari Tracks layer, and object classes learnt from
objects the user clicks.

The logic (`tracks_data`, `row_of`, `object_at` here, the frame-by-frame work in
`_object_frames`) knows no Qt and is tested without a viewer; `ObjectTableWidget`
only wires it to napari. Objects come from a segmentation Labels layer (class
values, e.g. the pixel classifier widget's "... segmentation") and its image.
Nothing turns a stack into an array: objects and classes are found per frame, in
a worker thread for the table and when napari shows a frame for the layers.
"""

import threading
import time

import numpy as np
import pandas as pd

from msclassify.objects import (SPLIT_LANDSCAPES, read_object_labels, write_object_labels,
                                write_table)

from ._object_frames import (MEASURE_AGAIN, ClassFrames, ObjectFrames, ObjectLabels,
                             SegmentationChanged, ShownObjects, classify_frames,
                             frames_text, frames_to_measure, measure_frames, object_pipeline,
                             train_classifier)
from ._reader import LazyFrames

__all__ = ["ObjectTableWidget", "object_at", "row_of", "tracks_data"]

SHOWN_MS = 150  # ms for the window to draw the class layer before classifying starts
BATCH_S = 0.5   # seconds of classifying between two updates of the table and the class layer
# class colours, in the order the classes are named (matplotlib's tab10 without grey)
PALETTE = ("#ff7f0e", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#bcbd22", "#17becf")

# columns shown in the dock (all are in the table written by "Save table")
SHOWN = ("frame", "object", "track", "class", "area", "centroid-0", "centroid-1", "orientation",
         "axis_major_length", "eccentricity", "intensity_mean")


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
    from qtpy.QtCore import QAbstractTableModel, Qt, QTimer, Signal
    from qtpy.QtWidgets import (QCheckBox, QComboBox, QFileDialog, QFormLayout, QHBoxLayout,
                                QLabel, QPushButton, QSpinBox, QTableView, QVBoxLayout, QWidget)
except ImportError:  # pragma: no cover
    QWidget = QAbstractTableModel = object


class _Failed:
    def __init__(self, message):
        self.message = message


def _rgba(colour):
    return [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)] + [1.0]


class TableModel(QAbstractTableModel):
    """The object table for a Qt view: cells are made when the view draws them, so a table of
    thousands of rows costs nothing to show or to update."""

    def __init__(self):
        super().__init__()
        self.table = pd.DataFrame()
        self.columns, self._positions = [], []

    def set_table(self, table):
        self.beginResetModel()
        self.table = table
        # a colour image's intensities are per channel: intensity_mean-0, -1, ...
        self.columns = [column for name in SHOWN for column in table
                        if column == name or column.startswith(f"{name}-")]
        self._positions = [table.columns.get_loc(name) for name in self.columns]
        self.endResetModel()

    def rowCount(self, parent=None):
        return 0 if parent is not None and parent.isValid() else len(self.table)

    def columnCount(self, parent=None):
        return 0 if parent is not None and parent.isValid() else len(self.columns)

    def data(self, index, role=Qt.DisplayRole):
        if role != Qt.DisplayRole or not index.isValid():
            return None
        value = self.table.iat[index.row(), self._positions[index.column()]]
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if role != Qt.DisplayRole:
            return None
        return self.columns[section] if orientation == Qt.Horizontal else str(section)

    def rows_changed(self, first, last):
        """Rows ``first`` to ``last`` (inclusive) were updated in place."""
        self.dataChanged.emit(self.index(first, 0), self.index(last, len(self.columns) - 1))


class ObjectTableWidget(QWidget):
    """Dock: measure the objects of a segmentation, browse them in a table, show their tracks,
    label a few objects per class by clicking them and classify all of them.

    Signals
    -------
    measured : the table is complete.
    classified : every measured object has its class.
    """

    measured = Signal()
    classified = Signal()

    def __init__(self, napari_viewer, parent=None):
        super().__init__(parent)
        self.viewer = napari_viewer
        self.table = None
        self.objects = None            # LazyFrames of ObjectFrames
        self.objects_layer = self.class_layer = self.markers_layer = None
        self.segmentation = None       # the Labels layer measured
        self.changed = None            # why the objects are no longer the segmentation's
        self.labels = ObjectLabels()
        self.classifier = self.class_frames = None
        self.worker = None
        self._rows_of_frame = {}
        self._shown = threading.Event()
        self._pending, self._started = [], 0.0
        self._syncing = self._classifying = False
        layout = QVBoxLayout(self)
        form = QFormLayout()
        self.labels_choice, self.image_choice = QComboBox(), QComboBox()
        form.addRow("Segmentation", self.labels_choice)
        form.addRow("Image", self.image_choice)
        self.target = QSpinBox(minimum=1, maximum=65535, value=2)
        self.target.setToolTip("The objects are the connected regions of this class of the "
                               "segmentation (2: the second class scribbled, e.g. the flies)")
        form.addRow("Objects of class", self.target)
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
        self.save_button.clicked.connect(lambda: self.save())
        row = QHBoxLayout()
        row.addWidget(self.measure_button)
        row.addWidget(self.save_button)
        layout.addLayout(row)

        classes = QFormLayout()
        self.label_check = QCheckBox("Click objects to label them")
        self.label_check.setToolTip("A click on an object gives it the class chosen below; a "
                                    "second click with the same class takes the label away.")
        self.label_check.toggled.connect(self._labelling_toggled)
        classes.addRow(self.label_check)
        self.class_choice = QComboBox()
        self.class_choice.setEditable(True)
        self.class_choice.addItems(["fly", "debris"])
        self.class_choice.setToolTip("The class a click gives; type a new name and press Enter "
                                     "to add a class.")
        classes.addRow("Label as", self.class_choice)
        layout.addLayout(classes)
        self.train_button = QPushButton("Train object classes")
        self.train_button.setToolTip("Learn the classes from the labelled objects (CEGB on "
                                     "shape, intensity and texture features, each with its "
                                     "cost) and classify every measured object.")
        self.train_button.clicked.connect(self.train)
        self.save_labels_button = QPushButton("Save labels…")
        self.save_labels_button.setToolTip("An object-label file for msclassify predict "
                                           "--object-labels")
        self.save_labels_button.clicked.connect(lambda: self.save_labels())
        self.load_labels_button = QPushButton("Load labels…")
        self.load_labels_button.clicked.connect(lambda: self.load_labels())
        row = QHBoxLayout()
        for button in (self.train_button, self.save_labels_button, self.load_labels_button):
            row.addWidget(button)
        layout.addLayout(row)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self.model = TableModel()
        self.view = QTableView()
        self.view.setModel(self.model)
        self.view.setSelectionBehavior(QTableView.SelectRows)
        self.view.horizontalHeader().setDefaultSectionSize(64)
        self.view.selectionModel().selectionChanged.connect(self._on_row_selected)
        layout.addWidget(self.view)
        self.viewer.layers.events.inserted.connect(self._refresh_choices)
        self.viewer.layers.events.removed.connect(self._refresh_choices)
        self.viewer.mouse_drag_callbacks.append(self._on_mouse)
        self._refresh_choices()

    # -- layers ----------------------------------------------------------------------------------

    def _own_layers(self):
        return [layer for layer in (self.objects_layer, self.class_layer, self.markers_layer)
                if layer is not None]

    def _refresh_choices(self, *_):
        from napari.layers import Image, Labels
        own = {layer.name for layer in self._own_layers()}
        for box, kind in ((self.labels_choice, Labels), (self.image_choice, Image)):
            current = box.currentText()
            box.clear()
            # not multiscale layers (a large image's): their objects are not measured here
            box.addItems([layer.name for layer in self.viewer.layers if isinstance(layer, kind)
                          and not layer.multiscale and layer.name not in own])
            if current:
                box.setCurrentText(current)

    def _replace_layer(self, name, add):
        if name in self.viewer.layers:
            self.viewer.layers.remove(name)
        return add(name)

    def _place(self, layer):
        return {"scale": self.segmentation.scale, "translate": self.segmentation.translate,
                "name": layer}

    def _single(self):
        return self.segmentation.data.ndim == 2

    def _frame_axis(self):
        """The viewer's axis of the segmentation's frames (its first axis): napari lines a
        layer up with the viewer's last axes."""
        return self.viewer.dims.ndim - self.segmentation.data.ndim

    def _current_frame(self):
        return 0 if self._single() else int(self.viewer.dims.current_step[self._frame_axis()])

    def _segmentation_changed(self, *_):
        """The measured segmentation was painted on or replaced: the table is kept, but
        classes and clicks wait for a new Measure."""
        self.changed = (f"the segmentation {self.segmentation.name!r} changed since Measure "
                        "objects: " + MEASURE_AGAIN)
        self.status.setText(self.changed)

    def _watch(self, segmentation):
        """Follow the paints and data changes of ``segmentation`` (only)."""
        for layer, connect in ((self.segmentation, False), (segmentation, True)):
            if layer is None:
                continue
            for event in (layer.events.paint, layer.events.data):
                (event.connect if connect else event.disconnect)(self._segmentation_changed)

    # -- measuring -------------------------------------------------------------------------------

    def measure(self):
        """Measure the chosen segmentation in a worker thread; when done, fill the table and add
        the objects and tracks layers (`measured` is emitted)."""
        try:
            labels = self.viewer.layers[self.labels_choice.currentText()]
        except KeyError:
            self.status.setText("choose a segmentation (Labels) layer and its image")
            return
        image = self.viewer.layers[self.image_choice.currentText()].data \
            if self.image_choice.currentText() in self.viewer.layers else None
        if image is not None and tuple(image.shape[:labels.data.ndim]) != tuple(labels.data.shape):
            self.status.setText(
                f"the image {self.image_choice.currentText()!r} is "
                f"{'x'.join(map(str, image.shape))} but the segmentation {labels.name!r} is "
                f"{'x'.join(map(str, labels.data.shape))}: choose the image it was made from")
            return
        split = None if self.split.currentIndex() == 0 else self.split.currentText()
        try:
            # a single image has nothing to link (its Tracks layer gave the viewer a time axis)
            pipeline = object_pipeline(self.target.value(), min_size=self.min_size.value(),
                                       split=split,
                                       tracks=self.tracks.isChecked() and labels.data.ndim > 2)
        except ValueError as exc:
            self.status.setText(str(exc))
            return
        # the table, objects and layers on screen stay those of the last Measure until this
        # one is done (a click meanwhile selects a row of the table shown)
        objects = LazyFrames(ObjectFrames(labels.data, image, pipeline,
                                          name=f"the segmentation {labels.name!r}"))
        frames = frames_to_measure(labels.data)
        self._pending, self._started = [], time.perf_counter()
        self._set_busy(True)
        self.status.setText(f"measuring {len(frames)} frame(s)…")
        self._start(measure_frames, objects, frames, pipeline.tracker,
                    yielded=lambda item: self._measured_frame(item, len(frames)),
                    returned=lambda _: self._measure_done(labels, objects))

    def _measured_frame(self, item, total):
        self._pending.append(item[1])
        if time.perf_counter() - self._started > 0.25:
            self._started = time.perf_counter()
            self.status.setText(f"measuring: {len(self._pending)} of {total} frames")

    def _measure_done(self, segmentation, objects):
        old = self.segmentation
        self._watch(segmentation)
        self.segmentation, self.objects, self.changed = segmentation, objects, None
        tables = [table for table in self._pending if len(table)]
        self._pending = []
        self.table = (pd.concat(tables, ignore_index=True) if tables else
                      pd.DataFrame({"frame": pd.Series(dtype=np.int64),
                                    "object": pd.Series(dtype=np.int64)}))
        frames = self.table["frame"].to_numpy()
        starts = np.flatnonzero(np.r_[True, frames[1:] != frames[:-1]]) if len(frames) else []
        stops = list(starts[1:]) + [len(frames)]
        self._rows_of_frame = {int(frames[a]): (int(a), int(b)) for a, b in zip(starts, stops)}
        self.classifier = self.class_frames = None
        self.model.set_table(self.table)
        n_tracks = (int(self.table["track"].max()) + 1
                    if "track" in self.table and len(self.table) else 0)
        measured = "" if self._single() else f" ({frames_text(self._rows_of_frame)})"
        self.status.setText(f"{len(self.table)} objects in {len(self._rows_of_frame)} frame(s)"
                            + measured + (f", {n_tracks} tracks" if n_tracks else ""))
        for name in [layer.name for layer in self._own_layers()] + [
                f"{layer.name} tracks" for layer in {old, segmentation} if layer is not None]:
            if name in self.viewer.layers:
                self.viewer.layers.remove(name)
        self.objects_layer = self.class_layer = self.markers_layer = None
        from ._layers import in_turns
        in_turns([self._add_objects_layer, self._add_tracks_layer, self._add_class_layer,
                  self._update_markers, self._measure_shown], self)

    def _add_objects_layer(self):
        data = self.objects.frame(0) if self._single() else LazyFrames(ShownObjects(self.objects))
        self.objects_layer = self.viewer.add_labels(
            data, opacity=0.5, **self._place(f"{self.segmentation.name} objects"))

    def _add_tracks_layer(self):
        if "track" in self.table and (self.table["track"] >= 0).any():
            self.viewer.add_tracks(tracks_data(self.table),
                                   **self._place(f"{self.segmentation.name} tracks"))

    def _measure_shown(self):
        self.viewer.layers.selection.active = self.objects_layer
        self._set_busy(False)
        self.measured.emit()

    # -- table <-> viewer ------------------------------------------------------------------------

    def _on_row_selected(self, *_):
        """Row -> the object: go to its frame, centre on it, select its label."""
        rows = self.view.selectionModel().selectedRows()
        if self._syncing or not rows or self.table is None:
            return
        row = rows[0].row()
        frame = int(self.table["frame"].iloc[row])
        if not self._single():
            self.viewer.dims.set_current_step(self._frame_axis(), frame)
        centre = self.table[["centroid-0", "centroid-1"]].iloc[row].to_numpy()
        world = centre * np.asarray(self.objects_layer.scale[-2:]) + np.asarray(
            self.objects_layer.translate[-2:])
        self.viewer.camera.center = tuple(world)
        self.objects_layer.selected_label = int(self.table["object"].iloc[row])
        self.objects_layer.show_selected_label = True

    def _on_mouse(self, viewer, event):
        """A click (press and release without dragging the view) on one of the dock's layers:
        select the object's row, and label it when labelling is on."""
        active = viewer.layers.selection.active
        # by name: the dock holds the layers through napari's public proxy, not themselves
        if self.objects_layer is None or active is None or active.name not in {
                layer.name for layer in self._own_layers()}:
            return
        press = np.asarray(event.pos, float)
        position = np.asarray(event.position, float)
        dragged = False
        yield
        while event.type == "mouse_move":
            dragged = dragged or np.hypot(*(np.asarray(event.pos, float) - press)) > 4
            yield
        if not dragged:
            self.click(self.objects_layer.world_to_data(position))

    def click(self, position):
        """What a click at data ``position`` ((frame,) row, column) of the objects layer does."""
        frame = 0 if self._single() else int(round(position[0]))
        point = tuple(float(value) for value in position[-2:])
        if not 0 <= frame < len(self.objects):
            return
        if self.changed:
            self.status.setText(self.changed)
            return
        try:
            objects = np.asarray(self.objects.frame(frame))
        except SegmentationChanged as exc:
            self.status.setText(str(exc))
            return
        number = object_at(objects[None], 0, point)
        if self.label_check.isChecked():
            self._label(objects, frame, point, number)
        if number == 0 and not self.label_check.isChecked():
            # a click beside the objects shows them all again (a row showed only its own)
            self.objects_layer.show_selected_label = False
            self.view.clearSelection()
            return
        row = None if number == 0 else row_of(self.table, frame, number)
        if row is None:
            return
        self._syncing = True
        try:
            self.view.selectRow(row)
            self.objects_layer.selected_label = number
        finally:
            self._syncing = False

    # -- object classes --------------------------------------------------------------------------

    def _labelling_toggled(self, on):
        if on and self.objects_layer is not None:
            self.viewer.layers.selection.active = self.objects_layer
            self.objects_layer.mode = "pan_zoom"

    def class_names(self):
        return [self.class_choice.itemText(i) for i in range(self.class_choice.count())]

    def _colour(self, name):
        names = self.class_names()
        if name not in names:
            self.class_choice.addItem(name)
            names.append(name)
        return PALETTE[names.index(name) % len(PALETTE)]

    def _label(self, objects, frame, point, number):
        name = self.class_choice.currentText().strip()
        row, col = (int(round(value)) for value in point)
        if not name:
            self.status.setText("type a class name in 'Label as' first")
            return
        result = self.labels.toggle(objects, frame, point, name)
        if result == "no object":
            self.status.setText(f"frame {frame}, row {row}, column {col} is on no object: click "
                                f"inside one of the objects of '{self.objects_layer.name}'")
            return
        if self.class_choice.findText(name) < 0:
            self.class_choice.addItem(name)
        counts = self.labels.points["class"].value_counts()
        self.status.setText(f"{result} object {number} of frame {frame}"
                            + (f" as '{name}'" if result != "unlabelled" else "") + "; labelled: "
                            + (", ".join(f"{c} {n}" for c, n in counts.items()) or "none"))
        self._update_markers()

    def _update_markers(self):
        """A ring of the class's colour around every click that labelled an object (the "…
        object labels" layer): the object stays visible inside it."""
        if self.segmentation is None:
            return
        points = self.labels.table()
        columns = ["centroid-0", "centroid-1"] if self._single() else \
            ["frame", "centroid-0", "centroid-1"]
        coordinates = points[columns].to_numpy(dtype=np.float64)
        colours = [_rgba(self._colour(name)) for name in points["class"]]
        name = f"{self.segmentation.name} object labels"
        if self.markers_layer is None or name not in self.viewer.layers:
            active = self.viewer.layers.selection.active
            self.markers_layer = self._replace_layer(name, lambda name: self.viewer.add_points(
                coordinates, ndim=len(columns), border_width=0.25, face_color="transparent",
                size=max(8.0, max(self.segmentation.data.shape[-2:]) / 80),
                border_color=colours if colours else "white", **self._place(name)))
            if active is not None:
                self.viewer.layers.selection.active = active
            return
        self.markers_layer.data = coordinates
        if colours:
            self.markers_layer.face_color = "transparent"
            self.markers_layer.border_color = colours

    def train(self):
        """Learn the object classes from the labelled objects and classify every measured object,
        frame by frame, in a worker thread (`classified` is emitted)."""
        if self.table is None:
            self.status.setText("measure the objects first, then label a few of each class")
            return
        if self.changed:
            self.status.setText(self.changed)
            return
        labels = ObjectLabels(self.labels.table())
        frames = sorted(self._rows_of_frame)
        self._set_busy(True)
        self.status.setText(f"training on {len(labels)} labelled objects…")
        self._started = time.perf_counter()
        self._n_classified = 0
        self._start(self._train_and_classify, labels, frames,
                    yielded=lambda item: self._classified_frames(item, len(frames)),
                    returned=lambda _: self._classify_done(), failed=self._classify_failed)

    def _train_and_classify(self, labels, frames):
        classifier = train_classifier(labels, self.objects)
        self._shown.clear()
        yield "trained", classifier
        # classify once the window has drawn the new layer state: a paint while this thread
        # runs Python waits for the GIL at every call into Python (a 0.5 s freeze at load 17)
        self._shown.wait(timeout=5.0)
        # in batches of about BATCH_S: each batch repaints the table and the canvas, and a
        # repaint while the worker runs Python waits for the GIL at every call into Python
        batch, last = [], time.perf_counter()
        for item in classify_frames(classifier, self.objects, frames):
            batch.append(item)
            if time.perf_counter() - last > BATCH_S:
                yield "classes", batch
                batch, last = [], time.perf_counter()
        if batch:
            yield "classes", batch

    def _classified_frames(self, item, total):
        kind, value = item
        if kind == "trained":
            self._show_classes(value)
            return
        column = self.table.columns.get_loc("class")
        for frame, classes in value:
            start, stop = self._rows_of_frame[frame]
            self.table.iloc[start:stop, column] = classes
            self.class_frames.set_classes(frame, classes)
        frames = [frame for frame, _ in value]
        self.model.rows_changed(self._rows_of_frame[min(frames)][0],
                                self._rows_of_frame[max(frames)][1] - 1)
        self._n_classified += len(frames)
        if self._current_frame() in frames:
            self._refresh_class_layer()
        self.status.setText(f"classifying: {self._n_classified} of {total} frames")

    def _show_classes(self, classifier):
        """The classifier is trained: an empty "class" column and class layer, filled frame by
        frame as the objects are classified."""
        self.classifier, self._classifying = classifier, True
        if "class" in self.table:
            self.table["class"] = ""
        else:
            self.table.insert(min(3, self.table.shape[1]), "class", "")
        self.model.set_table(self.table)
        for name in classifier.classes_:
            self._colour(name)
        self.class_frames.clear(self.class_names())
        colormap = self._class_colormap()
        if len(colormap.colors) != len(self.class_layer.colormap.colors):
            self.class_layer.colormap = colormap
        self.objects_layer.visible = False
        self._refresh_class_layer()
        QTimer.singleShot(SHOWN_MS, self._shown.set)

    def _class_colormap(self):
        """Value k + 1 in the colour of the k-th class (`class_names`), 0 not drawn. A cyclic
        colormap: napari compiles its kernel once (see `_widget._set_colormap`)."""
        from napari.utils.colormaps import CyclicLabelColormap
        return CyclicLabelColormap(
            colors=np.array([[0, 0, 0, 0]] + [_rgba(PALETTE[i % len(PALETTE)])
                                               for i in range(len(self.class_names()))],
                            np.float32), background_value=0)

    def _add_class_layer(self):
        """The "… object classes" layer, empty until a classifier is trained (adding it then
        would stall the window for napari's add of a Labels layer)."""
        self.class_frames = ClassFrames(self.objects, self.class_names())
        data = self.class_frames.read(0) if self._single() else LazyFrames(self.class_frames, 0)
        self.class_layer = self._replace_layer(
            f"{self.segmentation.name} object classes",
            lambda name: self.viewer.add_labels(data, opacity=0.6,
                                                colormap=self._class_colormap(),
                                                **self._place(name)))

    def _refresh_class_layer(self):
        if self._single():
            self.class_layer.data = self.class_frames.read(0)
        else:
            self.class_layer.refresh()

    def _classify_failed(self):
        """No class column half filled: the classes found before the failure are dropped."""
        if not self._classifying:               # failed in training: the last classes stay
            return
        self._classifying = False
        self.classifier = None
        self.table["class"] = ""
        self.model.set_table(self.table)
        self.class_frames.clear(self.class_names())
        self._refresh_class_layer()

    def _classify_done(self):
        classifier, self._classifying = self.classifier, False
        self._refresh_class_layer()
        counts = self.table["class"].value_counts()
        self.status.setText(
            f"{len(self.table)} objects classified: "
            + ", ".join(f"{name} {n}" for name, n in counts.items())
            + f"; the classifier uses the {' and '.join(classifier.groups_used_) or 'no'} "
            f"features ({classifier.cost_per_object() * 1e6:.0f} us per object)"
            # painted on while classifying: the classes are the table's objects', not its
            + (f"; but {self.changed}" if self.changed else ""))
        self._set_busy(False)
        self.classified.emit()

    def save_labels(self, path=None):
        """Write the labelled objects as an object-label file (``--object-labels`` reads it)."""
        if len(self.labels) == 0:
            self.status.setText("no objects are labelled yet: tick 'Click objects to label "
                                "them' and click a few objects of each class")
            return
        path = self._save_as(path, ("Save object labels", "labels.csv",
                                    "Object-label files (*.csv)"),
                             lambda path: write_object_labels(self.labels.table(), path,
                                                              overwrite=True))
        if path is None:
            return
        self.status.setText(f"wrote {len(self.labels)} object labels to {path} (use it with "
                            "msclassify predict … --object-labels)")

    def load_labels(self, path=None):
        """Read an object-label file (e.g. one saved here) as the labelled objects."""
        if not path:
            path, _ = QFileDialog.getOpenFileName(self, "Load object labels", "",
                                                  "Object-label files (*.csv)")
            if not path:
                return
        try:
            points = read_object_labels(path)
        except ValueError as exc:
            self.status.setText(str(exc))
            return
        self.labels = ObjectLabels(points)
        for name in points["class"]:
            self._colour(name)
        self._update_markers()
        self.status.setText(f"read {len(points)} object labels from {path}")

    # -- jobs and files --------------------------------------------------------------------------

    def _set_busy(self, busy):
        for button in (self.measure_button, self.train_button):
            button.setEnabled(not busy)

    def _start(self, function, *args, yielded=None, returned=None, failed=None):
        """Run the generator ``function(*args)`` on a napari worker thread; its errors go to
        the status line (after ``failed()`` for bad input)."""
        from napari.qt.threading import create_worker

        def said(*args):
            """Bad input (one labelled class, a label on no object) is a status line."""
            try:
                yield from function(*args)
            except (ValueError, OSError) as exc:
                yield _Failed(str(exc))
                return False
            return True

        def passed(item):
            if isinstance(item, _Failed):
                if failed is not None:
                    failed()
                self.status.setText(item.message)
                self._set_busy(False)
            else:
                yielded(item)

        worker = create_worker(said, *args)
        worker.yielded.connect(passed)
        worker.returned.connect(lambda finished: returned(None) if finished else None)
        worker.errored.connect(lambda exc: self.status.setText(str(exc)))
        # the buttons come back when the result is shown (`returned`), or at once on failure
        worker.errored.connect(lambda _: self._set_busy(False))
        self.worker = worker
        worker.start()

    def save(self, path=None):
        """Write the table (CSV or Parquet by the suffix) to ``path`` or a chosen file."""
        if self.table is None:
            self.status.setText("measure the objects first")
            return
        path = self._save_as(path, ("Save object table", "objects.csv",
                                    "Tables (*.csv *.parquet)"),
                             lambda path: write_table(self.table, path, overwrite=True))
        if path is not None:
            self.status.setText(f"wrote {path}")

    def _save_as(self, path, dialog, write):
        """``write(path)``, ``path`` chosen in a save dialog (title, default name, filter) if
        not given; the path written, or None (cancelled, or the error is in the status)."""
        if not path:
            path, _ = QFileDialog.getSaveFileName(self, *dialog)
            if not path:
                return None
        try:
            write(path)
        except (ValueError, OSError, ImportError) as exc:
            self.status.setText(str(exc))
            return None
        return path
