"""The "Pixel classifier" dock widget: Qt controls wired to `_controller`.

Everything that computes runs in napari worker threads (`create_worker`); the
GUI thread only snapshots the scribbles, starts workers and puts their results
into layers, so painting, panning and the time slider stay responsive.
"""

import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
from napari.layers import Image, Labels
from napari.qt.threading import create_worker
from napari.utils.colormaps import DirectLabelColormap
from napari.utils.notifications import notification_manager, show_error
from qtpy.QtCore import Qt, QTimer, Signal
from qtpy.QtGui import QColor, QDoubleValidator
from qtpy.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout,
                            QGroupBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                            QPlainTextEdit, QProgressBar, QPushButton, QSpinBox, QTableWidget,
                            QTableWidgetItem, QVBoxLayout, QWidget)

from msclassify.features import PRESETS, FeatureCache

from ._controller import (CLASS_NAMES_KEY, PREDICT, RETRAIN, TRAIN, ClassifierSettings,
                          CostSummary, FramePrediction, FrameStack, LiveUpdateScheduler,
                          TrainedModel, apply_to_frames, class_names, cost_map_layer,
                          export_masks, load_classifier, prediction_layers, segmentation_spec,
                          snapshot_scribbles, update_job)

__all__ = ["PixelClassifierWidget", "notify_error"]

# Errors that mean "bad input": shown as a one-line message. Anything else is a bug and
# goes to napari's notification with its traceback.
USER_ERRORS = (ValueError, TypeError, OSError)
# Quiet time after the time slider stops before the new frame is segmented: enough to
# skip frames while scrubbing, short because predicting one frame is cheap.
FRAME_CHANGE_DELAY_MS = 40
# Scribbled frames whose features are kept between retrains: 4 frames of 1024² with the
# "default" preset.
FEATURE_CACHE_BYTES = 512 * 2**20
# Metadata key marking the layers this widget made.
OUTPUT_KEY = "msclassify_output"


def notify_error(exc, status_label=None):
    """Tell the user what went wrong: the message in ``status_label`` and a napari notification."""
    message = str(exc) or type(exc).__name__
    if status_label is not None:
        status_label.setText(f"⚠ {message}")
    if isinstance(exc, USER_ERRORS):
        show_error(message)
    else:
        notification_manager.receive_error(type(exc), exc, exc.__traceback__)


class PixelClassifierWidget(QWidget):
    """Scribble, train, see the result live, apply to all frames, save the model.

    Signals
    -------
    job_started(int)
        A train / live-update / predict job starts (its kind: PREDICT, RETRAIN, TRAIN).
    segmentation_updated(int)
        A frame's segmentation was written to the segmentation layer (frame index).
    job_done()
        That job ended (finished, failed or cancelled).
    batch_done()
        "Apply to all frames" or "Export masks" ended (finished, failed or cancelled).
    """

    job_started = Signal(int)
    segmentation_updated = Signal(int)
    job_done = Signal()
    batch_done = Signal()
    _training_progress = Signal(int, int)

    def __init__(self, napari_viewer, parent=None):
        super().__init__(parent)
        self.viewer = napari_viewer
        self.classifier = None
        self.last_model = None            # TrainedModel of the last training
        self.last_prediction = None       # FramePrediction shown last
        self.predicted_frames = set()     # frames of the segmentation layer holding a prediction
        self._scribble_layer = None       # the Labels layer whose events we follow
        self._worker = None
        self._cancel = threading.Event()
        self._batch_worker = None
        self._last_frame = None
        self._costs = {}                  # "model" / "baseline" -> CostSummary
        self._job_started = 0.0

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self.scheduler = LiveUpdateScheduler(self._start_job, self._timer)
        # features of the scribbled frames, kept between retrains while the user paints
        self.feature_cache = FeatureCache(max_bytes=FEATURE_CACHE_BYTES)
        self._timer.timeout.connect(self.scheduler.timer_fired)
        self._training_progress.connect(self._show_training_progress)

        self._build_ui()
        self._connect_viewer()
        self._refresh_layer_choices()

    # -- construction ----------------------------------------------------------------------------
    def _build_ui(self):
        layout = QVBoxLayout(self)

        data = QGroupBox("Data")
        form = QFormLayout(data)
        self.image_combo = QComboBox()
        self.image_combo.setToolTip("Image to segment: a 2-D frame, an RGB frame or a time stack")
        form.addRow("Image", self.image_combo)
        row = QHBoxLayout()
        self.scribble_combo = QComboBox()
        self.scribble_combo.setToolTip("Labels layer with the scribbles (0 = unlabelled)")
        self.new_scribbles_button = QPushButton("New")
        self.new_scribbles_button.setToolTip("Create an empty scribble layer for the image")
        row.addWidget(self.scribble_combo, 1)
        row.addWidget(self.new_scribbles_button)
        form.addRow("Scribbles", row)
        self.class_table = QTableWidget(0, 2)
        self.class_table.setHorizontalHeaderLabels(["label", "class name"])
        self.class_table.verticalHeader().setVisible(False)
        self.class_table.horizontalHeader().setSectionResizeMode(1, QHeaderView.Stretch)
        self.class_table.setMaximumHeight(110)
        self.class_table.setToolTip("Double-click a name to edit it; select a row to paint "
                                    "with that label")
        self.add_class_button = QPushButton("Add class")
        form.addRow(self.class_table)
        form.addRow(self.add_class_button)
        layout.addWidget(data)

        model = QGroupBox("Model")
        form = QFormLayout(model)
        tips = ClassifierSettings.TOOLTIPS
        defaults = ClassifierSettings()
        self.features_combo = QComboBox()
        self.features_combo.addItems(list(PRESETS))
        self.features_combo.setCurrentText(defaults.features)
        self.features_combo.setToolTip(tips["features"])
        form.addRow("Features", self.features_combo)
        self.mu_edit = QLineEdit(f"{defaults.cost_tradeoff:g}")
        validator = QDoubleValidator(0.0, 1e9, 12)
        validator.setNotation(QDoubleValidator.ScientificNotation)
        self.mu_edit.setValidator(validator)
        self.mu_edit.setToolTip(tips["cost_tradeoff"])
        form.addRow("Cost tradeoff μ", self.mu_edit)
        self.alpha_spin = QDoubleSpinBox()
        self.alpha_spin.setRange(0.0, 1e4)
        self.alpha_spin.setDecimals(2)
        self.alpha_spin.setValue(defaults.split_cost)
        self.alpha_spin.setToolTip(tips["split_cost"])
        form.addRow("Split cost α", self.alpha_spin)
        self.trees_spin = QSpinBox()
        self.trees_spin.setRange(1, 5000)
        self.trees_spin.setValue(defaults.n_estimators)
        self.trees_spin.setToolTip(tips["n_estimators"])
        form.addRow("Trees", self.trees_spin)
        self.leaves_spin = QSpinBox()
        self.leaves_spin.setRange(2, 1024)
        self.leaves_spin.setValue(defaults.max_leaves)
        self.leaves_spin.setToolTip(tips["max_leaves"])
        form.addRow("Leaves per tree", self.leaves_spin)
        self.semi_check = QCheckBox("Semi-supervised (few scribbles)")
        self.semi_check.setChecked(defaults.semi_supervised)
        self.semi_check.setToolTip(tips["semi_supervised"])
        form.addRow(self.semi_check)
        row = QHBoxLayout()
        self.train_button = QPushButton("Train")
        self.train_button.setToolTip("Train on the scribbles, segment the current frame and "
                                     "compare the cost with the μ = 0 model")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.live_check = QCheckBox("Live update")
        self.live_check.setToolTip("Retrain after each paint stroke (debounced) and segment the "
                                   "frame under the time slider")
        row.addWidget(self.train_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.live_check)
        form.addRow(row)
        self.train_progress = QProgressBar()
        self.train_progress.setTextVisible(False)
        self.train_progress.setMaximumHeight(8)
        form.addRow(self.train_progress)
        layout.addWidget(model)

        results = QGroupBox("Result")
        form = QFormLayout(results)
        self.status_label = QLabel("Scribble at least two classes, then Train.")
        self.status_label.setWordWrap(True)
        form.addRow(self.status_label)
        self.time_label = QLabel("–")
        form.addRow("Training time", self.time_label)
        self.evaluation_label = QLabel("–")
        self.evaluation_label.setToolTip("Mean tree-evaluation cost per pixel (split cost x "
                                         "node evaluations / pixels sharing each)")
        form.addRow("Evaluation cost / px", self.evaluation_label)
        self.feature_cost_label = QLabel("–")
        self.feature_cost_label.setToolTip("Modelled operations per pixel to compute the "
                                           "features the model uses")
        form.addRow("Feature cost / px", self.feature_cost_label)
        self.features_text = QPlainTextEdit()
        self.features_text.setReadOnly(True)
        self.features_text.setMaximumHeight(80)
        form.addRow("Features used", self.features_text)
        layout.addWidget(results)

        frames = QGroupBox("Frames and files")
        form = QFormLayout(frames)
        row = QHBoxLayout()
        self.apply_button = QPushButton("Apply to all frames")
        self.apply_cancel_button = QPushButton("Cancel")
        self.apply_cancel_button.setEnabled(False)
        row.addWidget(self.apply_button)
        row.addWidget(self.apply_cancel_button)
        form.addRow(row)
        self.apply_progress = QProgressBar()
        form.addRow(self.apply_progress)
        row = QHBoxLayout()
        self.save_button = QPushButton("Save model…")
        self.load_button = QPushButton("Load model…")
        self.export_button = QPushButton("Export masks…")
        for button in (self.save_button, self.load_button, self.export_button):
            row.addWidget(button)
        form.addRow(row)
        layout.addWidget(frames)
        layout.addStretch(1)

        self.new_scribbles_button.clicked.connect(self.new_scribble_layer)
        self.scribble_combo.currentIndexChanged.connect(self._on_scribble_layer_changed)
        self.image_combo.currentIndexChanged.connect(self._on_image_changed)
        self.class_table.itemChanged.connect(self._on_class_name_edited)
        self.class_table.currentCellChanged.connect(self._on_class_selected)
        self.add_class_button.clicked.connect(self._add_class)
        self.train_button.clicked.connect(self.train)
        self.cancel_button.clicked.connect(self.cancel)
        self.live_check.toggled.connect(self.set_live_update)
        self.apply_button.clicked.connect(self.apply_to_all_frames)
        self.apply_cancel_button.clicked.connect(self.cancel_batch)
        self.save_button.clicked.connect(self._ask_save_model)
        self.load_button.clicked.connect(self._ask_load_model)
        self.export_button.clicked.connect(self._ask_export_masks)
        for signal in (self.features_combo.currentIndexChanged, self.mu_edit.editingFinished,
                       self.alpha_spin.valueChanged, self.trees_spin.valueChanged,
                       self.leaves_spin.valueChanged, self.semi_check.toggled):
            signal.connect(self._on_settings_changed)

    def _connect_viewer(self):
        # napari drops these connections itself once the widget is deleted
        layers = self.viewer.layers
        layers.events.inserted.connect(self._refresh_layer_choices)
        layers.events.removed.connect(self._refresh_layer_choices)
        layers.events.reordered.connect(self._refresh_layer_choices)
        self.viewer.dims.events.current_step.connect(self._on_frame_changed)

    # -- layers ----------------------------------------------------------------------------------
    @property
    def image_layer(self):
        return self._layer_named(self.image_combo.currentText(), Image)

    @property
    def scribble_layer(self):
        return self._layer_named(self.scribble_combo.currentText(), Labels)

    def _layer_named(self, name, kind):
        layer = self.viewer.layers[name] if name in self.viewer.layers else None
        return layer if isinstance(layer, kind) else None

    def _refresh_layer_choices(self, *_):
        for combo, kind in ((self.image_combo, Image), (self.scribble_combo, Labels)):
            current = combo.currentText()
            # the widget's own output layers are not inputs
            names = [layer.name for layer in self.viewer.layers
                     if isinstance(layer, kind) and not layer.metadata.get(OUTPUT_KEY)]
            combo.blockSignals(True)
            combo.clear()
            combo.addItems(names)
            if current in names:
                combo.setCurrentText(current)
            elif kind is Labels:
                preferred = [n for n in names if "scribble" in n.lower()]
                if preferred:
                    combo.setCurrentText(preferred[0])
            combo.blockSignals(False)
        self._on_scribble_layer_changed()

    def _stack(self):
        image = self.image_layer
        if image is None:
            raise ValueError("add or open an image first")
        return FrameStack(image.data, rgb=image.rgb)

    def new_scribble_layer(self):
        """Add an empty scribble Labels layer matching the image, ready to paint label 1."""
        try:
            stack = self._stack()
        except ValueError as exc:
            self._report_error(exc)
            return None
        image = self.image_layer
        layer = self.viewer.add_labels(
            np.zeros(stack.labels_shape, dtype=np.uint8), name=f"{image.name} scribbles",
            scale=image.scale, translate=image.translate,
            metadata={CLASS_NAMES_KEY: {1: "background", 2: "foreground"}})
        layer.brush_size = 5
        layer.selected_label = 1
        layer.mode = "paint"
        self.scribble_combo.setCurrentText(layer.name)
        return layer

    def _on_image_changed(self, *_):
        self.predicted_frames.clear()
        self._last_frame = None

    def _on_scribble_layer_changed(self, *_):
        self._follow_scribbles(self.scribble_layer)
        self._fill_class_table()

    def _follow_scribbles(self, layer):
        if layer is self._scribble_layer:
            return
        if self._scribble_layer is not None:
            self._scribble_layer.events.paint.disconnect(self._on_scribbles_edited)
            self._scribble_layer.events.data.disconnect(self._on_scribbles_edited)
        self._scribble_layer = layer
        if layer is not None:
            layer.events.paint.connect(self._on_scribbles_edited)
            layer.events.data.connect(self._on_scribbles_edited)

    # -- classes ---------------------------------------------------------------------------------
    def _class_values(self, layer):
        names = layer.metadata.get(CLASS_NAMES_KEY, {})
        named = [int(value) for value in names]
        return list(range(1, max([2, *named]) + 1))

    def _fill_class_table(self):
        layer = self.scribble_layer
        self.class_table.blockSignals(True)
        self.class_table.setRowCount(0)
        if layer is not None:
            values = self._class_values(layer)
            for row, (value, name) in enumerate(zip(values, class_names(layer.metadata, values))):
                self.class_table.insertRow(row)
                label_item = QTableWidgetItem(str(value))
                label_item.setFlags(label_item.flags() & ~Qt.ItemIsEditable)
                label_item.setBackground(_qcolor(layer.get_color(value)))
                self.class_table.setItem(row, 0, label_item)
                self.class_table.setItem(row, 1, QTableWidgetItem(name))
            self._publish_class_names(layer)
        self.class_table.blockSignals(False)

    def _publish_class_names(self, layer):
        """Name the classes in napari's status bar; colour the segmentation like the scribbles.

        In the segmentation, classes named "background" are transparent so the
        objects stand out over the image.
        """
        values = self._class_values(layer)
        names = class_names(layer.metadata, values)
        table = pd.DataFrame({"index": [0, *values], "class": ["unlabelled", *names]})
        layer.features = table
        segmentation = self._segmentation_layer()
        if segmentation is not None:
            segmentation.features = table
            transparent = np.zeros(4)
            colors = {None: transparent, 0: transparent}
            for value, name in zip(values, names):
                colors[value] = transparent if "background" in name.lower() \
                    else np.array(layer.get_color(value), dtype=np.float32)
            segmentation.colormap = DirectLabelColormap(color_dict=colors)

    def _on_class_name_edited(self, item):
        layer = self.scribble_layer
        if layer is None or item.column() != 1:
            return
        value = int(self.class_table.item(item.row(), 0).text())
        names = {int(k): v for k, v in layer.metadata.get(CLASS_NAMES_KEY, {}).items()}
        names[value] = item.text().strip() or f"class {value}"
        layer.metadata[CLASS_NAMES_KEY] = names
        self._publish_class_names(layer)

    def _on_class_selected(self, row, *_):
        layer = self.scribble_layer
        if layer is not None and row >= 0 and self.class_table.item(row, 0) is not None:
            layer.selected_label = int(self.class_table.item(row, 0).text())

    def _add_class(self):
        layer = self.scribble_layer
        if layer is None:
            return
        value = len(self._class_values(layer)) + 1
        names = {int(k): v for k, v in layer.metadata.get(CLASS_NAMES_KEY, {}).items()}
        names[value] = f"class {value}"
        layer.metadata[CLASS_NAMES_KEY] = names
        self._fill_class_table()

    # -- settings --------------------------------------------------------------------------------
    def settings(self):
        """The `ClassifierSettings` shown in the widget."""
        text = self.mu_edit.text().strip().replace(",", ".")
        try:
            mu = float(text)
        except ValueError:
            raise ValueError(f"cost tradeoff μ must be a number >= 0 (e.g. 2e-4), got "
                             f"{text!r}") from None
        if not np.isfinite(mu) or mu < 0:
            raise ValueError(f"cost tradeoff μ must be a finite number >= 0, got {text!r}")
        return ClassifierSettings(features=self.features_combo.currentText(), cost_tradeoff=mu,
                                  split_cost=self.alpha_spin.value(),
                                  n_estimators=self.trees_spin.value(),
                                  max_leaves=self.leaves_spin.value(),
                                  semi_supervised=self.semi_check.isChecked())

    def _on_settings_changed(self, *_):
        self.scheduler.request(RETRAIN)

    # -- train / live update ---------------------------------------------------------------------
    def train(self):
        """Train on the scribbles now, segment the current frame, compare with μ = 0."""
        self.scheduler.run_now(TRAIN)

    def set_live_update(self, enabled):
        """Switch live update on (retrain right away and after every stroke) or off."""
        if self.live_check.isChecked() != bool(enabled):
            self.live_check.setChecked(bool(enabled))   # re-enters through `toggled`
            return
        self.scheduler.enabled = bool(enabled)
        if enabled:
            self.scheduler.request(RETRAIN)
        else:
            self.scheduler.cancel_pending()

    def cancel(self):
        """Stop the running training (the model shown so far is kept)."""
        self._cancel.set()
        self.scheduler.cancel_pending()
        if self._worker is not None:
            self._worker.quit()

    def _on_scribbles_edited(self, *_):
        self.scheduler.request(RETRAIN)

    def current_frame(self):
        """Index of the image frame under the viewer's time slider (0 for a single frame)."""
        image = self.image_layer
        stack = self._stack()
        if not stack.is_stack:
            return 0
        axis = self.viewer.dims.ndim - len(stack.labels_shape)
        position = self.viewer.dims.point[axis]
        index = int(round((position - image.translate[0]) / image.scale[0]))
        return int(np.clip(index, 0, stack.n_frames - 1))

    def _on_frame_changed(self, *_):
        if self.classifier is None or self.image_layer is None:
            return
        try:
            frame = self.current_frame()
        except ValueError:
            return
        if frame != self._last_frame:
            self.scheduler.request(PREDICT, FRAME_CHANGE_DELAY_MS)

    def _start_job(self, kind):
        """Called by the scheduler: snapshot the inputs here, compute in a worker thread."""
        self.job_started.emit(kind)
        try:
            stack = self._stack()
            frame_index = self.current_frame()
            settings = self.settings()
            scribbles = None
            if kind >= RETRAIN:
                layer = self.scribble_layer
                if layer is None:
                    raise ValueError("choose or create a scribble layer (button 'New') and paint "
                                     "at least two classes")
                scribbles = snapshot_scribbles(layer.data, stack)
            elif self.classifier is None:
                raise ValueError("nothing to predict with: train or load a model first")
        except (ValueError, TypeError) as exc:
            self._report_error(exc, popup=kind == TRAIN)
            self.scheduler.job_finished()
            self.job_done.emit()
            return
        self._cancel = threading.Event()
        self._job_started = time.perf_counter()
        self._last_frame = frame_index
        self.status_label.setText({PREDICT: f"Segmenting frame {frame_index}…",
                                   RETRAIN: "Training…",
                                   TRAIN: "Training (then the μ = 0 model to compare)…"}[kind])
        self.train_progress.setValue(0)
        self.cancel_button.setEnabled(True)
        worker = create_worker(update_job, kind, settings, stack, frame_index,
                               scribbles=scribbles, classifier=self.classifier,
                               cancel=self._cancel, on_progress=self._training_progress.emit,
                               feature_cache=self.feature_cache, _ignore_errors=True)
        worker.yielded.connect(self._on_job_result)
        worker.errored.connect(self._report_error)
        worker.finished.connect(self._on_job_finished)
        self._worker = worker
        worker.start()

    def _on_job_finished(self):
        self._worker = None
        self.cancel_button.setEnabled(False)
        if self._cancel.is_set():
            self.status_label.setText("Cancelled.")
        self.scheduler.job_finished()
        self.job_done.emit()

    def _show_training_progress(self, iteration, n_iterations):
        self.train_progress.setMaximum(n_iterations)
        self.train_progress.setValue(iteration)

    def _on_job_result(self, result):
        if isinstance(result, TrainedModel):
            self._show_model(result)
        elif isinstance(result, FramePrediction):
            self._show_prediction(result)
        elif isinstance(result, CostSummary):
            self._show_cost(result)

    def _show_model(self, model):
        self.classifier = model.classifier
        self.last_model = model
        self._costs.pop("model", None)
        frames = len(model.frame_indices)
        self.time_label.setText(f"{model.seconds:.2f} s ({model.n_labelled} labelled pixels, "
                                f"{frames} frame{'s' if frames != 1 else ''})")
        used = model.features_used
        self.features_text.setPlainText(f"{len(used)} of {len(model.classifier.bank_)}:\n"
                                        + "\n".join(used))

    def _show_prediction(self, prediction):
        image, stack = self.image_layer, self._stack()
        segmentation = self._ensure_segmentation_layer(stack)
        if stack.is_stack:
            segmentation.data[prediction.frame_index] = prediction.labels
        else:
            segmentation.data[...] = prediction.labels
        segmentation.refresh()
        self.predicted_frames.add(prediction.frame_index)
        self.last_prediction = prediction
        self.segmentation_updated.emit(prediction.frame_index)
        names = class_names(self.scribble_layer.metadata if self.scribble_layer else {},
                            self.classifier.classes_)
        for spec in prediction_layers(image.name, stack, prediction, names, image.scale,
                                      image.translate):
            self._add_layer(spec)
        latency = time.perf_counter() - self._job_started
        self.status_label.setText(f"Frame {prediction.frame_index} segmented in "
                                  f"{prediction.seconds:.2f} s ({latency:.2f} s since the job "
                                  "started).")

    def _show_cost(self, summary):
        self._costs["baseline" if summary.baseline else "model"] = summary
        if not summary.baseline:
            image = self.image_layer
            self._add_layer(cost_map_layer(image.name, self._stack(), summary, image.scale,
                                           image.translate))
        model, baseline = self._costs.get("model"), self._costs.get("baseline")
        if model is None:
            return
        suffix = ""
        if baseline is not None and baseline.frame_index == model.frame_index:
            suffix = " (μ = 0: {:.3g}, {:.0%})"
            self.evaluation_label.setText(
                f"{model.evaluation:.3g}" + suffix.format(
                    baseline.evaluation, _ratio(model.evaluation, baseline.evaluation)))
            self.feature_cost_label.setText(
                f"{model.features:.3g}" + suffix.format(
                    baseline.features, _ratio(model.features, baseline.features)))
            self.features_text.appendPlainText(f"(μ = 0 model: {len(baseline.features_used)} "
                                               "features)")
        else:
            self.evaluation_label.setText(f"{model.evaluation:.3g} (μ = 0: press Train)")
            self.feature_cost_label.setText(f"{model.features:.3g}")

    def _ensure_segmentation_layer(self, stack):
        """The segmentation layer of the image, (re)created if missing or of the wrong shape."""
        segmentation = self._segmentation_layer()
        classes = self.classifier.classes_
        if segmentation is not None and segmentation.data.shape == stack.labels_shape \
                and np.iinfo(segmentation.data.dtype).max >= int(classes.max()):
            return segmentation
        if segmentation is not None:
            self.viewer.layers.remove(segmentation)
        image = self.image_layer
        segmentation = self._add_layer(segmentation_spec(image.name, stack, classes, image.scale,
                                                         image.translate))
        segmentation.opacity = 0.6
        self.predicted_frames.clear()
        if self.scribble_layer is not None:
            self._publish_class_names(self.scribble_layer)
        return segmentation

    def _segmentation_layer(self):
        image = self.image_layer
        return None if image is None else self._layer_named(f"{image.name} segmentation", Labels)

    def _add_layer(self, spec):
        """Update the layer called ``spec.name`` in place, or add it."""
        layers = self.viewer.layers
        kwargs = dict(spec.kwargs)
        if spec.name in layers:
            layer = layers[spec.name]
            kind = {"image": Image, "labels": Labels}[spec.layer_type]
            if isinstance(layer, kind) and layer.data.shape == spec.data.shape:
                visible = layer.visible
                layer.data = spec.data
                for key in ("scale", "translate", "contrast_limits"):
                    if key in kwargs:
                        setattr(layer, key, kwargs[key])
                layer.visible = visible
                return layer
            layers.remove(layer)
        kwargs["metadata"] = {OUTPUT_KEY: True}
        return getattr(self.viewer, f"add_{spec.layer_type}")(spec.data, name=spec.name,
                                                               **kwargs)

    # -- all frames, files -----------------------------------------------------------------------
    def apply_to_all_frames(self):
        """Segment every frame in a worker thread, with progress bar and cancel."""
        if self.classifier is None:
            self._report_error(ValueError("train or load a model first"), popup=True)
            return None
        try:
            stack = self._stack()
        except ValueError as exc:
            self._report_error(exc, popup=True)
            return None
        self._ensure_segmentation_layer(stack)
        worker = create_worker(apply_to_frames, self.classifier, stack, _ignore_errors=True)
        worker.yielded.connect(self._on_frame_segmented)
        return self._run_batch(worker, stack.n_frames, "Segmenting frames")

    def _on_frame_segmented(self, item):
        index, labels = item
        segmentation = self._segmentation_layer()
        if segmentation is None:
            return
        if segmentation.data.ndim == 3:
            segmentation.data[index] = labels
        else:
            segmentation.data[...] = labels
        self.predicted_frames.add(index)
        if index == self.current_frame():
            segmentation.refresh()
        self.apply_progress.setValue(self.apply_progress.value() + 1)
        self.segmentation_updated.emit(index)

    def _run_batch(self, worker, n_steps, what):
        self.apply_progress.setMaximum(n_steps)
        self.apply_progress.setValue(0)
        self.apply_progress.setFormat(f"{what}: %v / %m")
        self._set_batch_running(True)
        worker.errored.connect(self._report_error)
        worker.aborted.connect(lambda: self.status_label.setText(f"{what}: cancelled."))
        worker.finished.connect(self._on_batch_finished)
        self._batch_worker = worker
        worker.start()
        return worker

    def _on_batch_finished(self):
        self._batch_worker = None
        self._set_batch_running(False)
        segmentation = self._segmentation_layer()
        if segmentation is not None:
            segmentation.refresh()
        self.batch_done.emit()

    def _set_batch_running(self, running):
        for button in (self.apply_button, self.export_button, self.train_button,
                       self.load_button):
            button.setEnabled(not running)
        self.apply_cancel_button.setEnabled(running)
        self.scheduler.enabled = self.live_check.isChecked() and not running

    def cancel_batch(self):
        """Stop applying to frames / exporting after the current frame."""
        if self._batch_worker is not None:
            self._batch_worker.quit()

    def save_model(self, path):
        """Save the current classifier (a `.msc` model file)."""
        if self.classifier is None:
            raise ValueError("there is no model to save yet: train one first")
        self.classifier.save(path)
        self.status_label.setText(f"Model saved to {path}")

    def load_model(self, path):
        """Load a pixel classifier and segment the current frame with it."""
        stack = self._stack() if self.image_layer is not None else None
        self.classifier = load_classifier(path, stack)
        self.last_model = None
        self._costs.clear()
        used = self.classifier.features_used_
        self.features_text.setPlainText(f"{len(used)} of {len(self.classifier.bank_)}:\n"
                                        + "\n".join(used))
        self.time_label.setText(f"(loaded from {Path(path).name})")
        self.status_label.setText(f"Model loaded from {path}")
        if stack is not None:
            self.scheduler.run_now(PREDICT)

    def export(self, folder, file_format="tiff"):
        """Write the predicted frames of the segmentation layer to ``folder`` (worker thread)."""
        segmentation = self._segmentation_layer()
        if segmentation is None or not self.predicted_frames:
            raise ValueError("nothing to export yet: train and segment (or Apply to all frames) "
                             "first")
        frames = sorted(self.predicted_frames)
        worker = create_worker(export_masks, segmentation.data, frames, folder,
                               file_format=file_format, _ignore_errors=True)
        worker.yielded.connect(lambda _: self.apply_progress.setValue(
            self.apply_progress.value() + 1))
        missing = (segmentation.data.shape[0] if segmentation.data.ndim == 3 else 1) - len(frames)
        note = f" ({missing} frames not predicted yet: Apply to all frames)" if missing else ""
        worker.returned.connect(lambda _: self.status_label.setText(
            f"Exported {len(frames)} masks to {folder}{note}"))
        return self._run_batch(worker, len(frames), "Exporting")

    def _ask_save_model(self):
        path, _ = QFileDialog.getSaveFileName(self, "Save model", "pixel_classifier.msc",
                                              "msclassify model (*.msc)")
        if path:
            self._guarded(self.save_model, path)

    def _ask_load_model(self):
        path, _ = QFileDialog.getOpenFileName(self, "Load model", "", "msclassify model (*.msc)")
        if path:
            self._guarded(self.load_model, path)

    def _ask_export_masks(self):
        parent = QFileDialog.getExistingDirectory(self, "Export masks into a new folder in…")
        if parent and self.image_layer is not None:
            self._guarded(self.export, Path(parent) / f"{self.image_layer.name}_masks")

    def _guarded(self, action, *args):
        try:
            return action(*args)
        except USER_ERRORS as exc:
            self._report_error(exc)
            return None

    def _report_error(self, exc, popup=True):
        if popup:
            notify_error(exc, self.status_label)
        else:   # live updates: no pop-up for every stroke, only the status line
            self.status_label.setText(f"⚠ {exc}")


def _ratio(value, reference):
    return value / reference if reference > 0 else float("nan")


def _qcolor(rgba):
    r, g, b, a = (int(round(255 * float(c))) for c in np.asarray(rgba).ravel()[:4])
    return QColor(r, g, b, a)

