"""The "Pixel classifier" dock widget: Qt controls wired to `_controller`.

Everything that computes runs in napari worker threads (`create_worker`); the
GUI thread only starts workers and puts their results into layers, so
painting, panning and the time slider stay responsive:

* the segmentation layer is created once, with the scribble layer, right above
  its image (the scribbles above it, so they stay visible), and then updated in
  place frame by frame; a movie's scribbles and segmentation store only the
  frames written to (`FrameLabels`);
* each image keeps its own model and results (`ImageModel`): choosing another
  image in the Image box shows that image's scribbles, model and result;
* probability, uncertainty, cost-map and "where to label next" layers exist
  only while their "Show" box is ticked, and only shown layers are updated;
* the scribbled frames of a long movie are found once in a worker thread and
  then followed through paint events (`ScribbledFrames`);
* the layer the user paints on stays selected whatever layers are added.
"""

import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
from napari.layers import Image, Labels
from napari.qt.threading import create_worker
from napari.utils.notifications import show_info
from napari.utils.colormaps import CyclicLabelColormap
from qtpy.QtCore import QSize, Qt, QTimer, Signal
from qtpy.QtGui import QColor, QDoubleValidator, QKeySequence
from qtpy.QtWidgets import (QButtonGroup, QCheckBox, QColorDialog, QComboBox, QDialog,
                            QDialogButtonBox,
                            QDoubleSpinBox, QFileDialog, QFormLayout, QFrame, QGroupBox,
                            QHBoxLayout, QHeaderView, QLabel, QLineEdit, QProgressBar,
                            QPushButton, QRadioButton, QScrollArea, QShortcut, QSpinBox,
                            QTableWidget, QTableWidgetItem, QToolButton, QVBoxLayout, QWidget)

from msclassify.features import PRESETS, FeatureCache
from msclassify.pixel import BACKGROUND_NICE, EXPORT_KINDS, FrameExport

from ._controller import (CLASS_COLORS_KEY, CLASS_NAMES_KEY, PREDICT, RETRAIN, TRAIN,
                          ClassifierSettings, CostSummary, FramePrediction, FrameStack,
                          ImageModel, LabelHints, LiveUpdateScheduler, ScribbledFrames,
                          TrainedModel, apply_to_frames, class_colors, class_names, color_rgb,
                          cost_map_spec, describe_model, eta_text, export_frames,
                          label_hints_spec, load_classifier, new_labels, probability_spec,
                          segmentation_spec, training_status, uncertainty_spec, update_job,
                          write_class_legend)
from ._layers import (in_turns, insert_unselected, make_layer, repaint_next_turn,
                      same_colormap, update_or_add_layer)
from ._notify import USER_ERRORS, notify_error
from ._preload import PRELOAD_DELAY_S, preload_in_background

__all__ = ["ExportDialog", "PixelClassifierWidget", "set_progress"]

# Quiet time after an edit or a frame change before the live job starts: none. napari emits a
# Labels layer's `paint` event once per finished stroke (on release), and whatever arrives while
# a job runs coalesces into one follow-up (`LiveUpdateScheduler`), so scrubbing the time slider
# segments at most one frame in between. (A 40 ms quiet time after a frame change waited for
# the window's repaint of the new frame first: 0.1-0.17 s under Xvfb, bench_napari.)
EDIT_DELAY_MS = 0
# Scribbled frames whose features are kept between retrains: 4 frames of 1024² with the
# "default" preset.
FEATURE_CACHE_BYTES = 512 * 2**20
# Metadata key marking the layers this widget made.
OUTPUT_KEY = "msclassify_output"
# Metadata key of a scribble layer: the name of the image it was made for.
IMAGE_KEY = "msclassify_image"
# Rows of the class table shown without scrolling.
CLASS_ROWS = 5
# "Segment this frame" from anywhere in the napari window.
SEGMENT_SHORTCUT = "Shift+S"
# Training progress is drawn at most this often: a progress bar repaints at once.
PROGRESS_INTERVAL_S = 0.1

# The optional output layers, in the order of the "Show" boxes.
SHOW = {
    "probability": ("Probability of", "Probability (0–1) of the class chosen next to it, for "
                                      "the frame shown, drawn in the class's colour"),
    "uncertainty": ("Uncertainty", "1 − the largest class probability: 0 where the model is "
                                   "sure, 0.5 (two classes) where it hesitates"),
    "cost": ("Cost map", "Where the model spent computation per pixel: modelled operations "
                         "of the tree decisions (bright = many decisions; pixels decided on "
                         "coarse blocks cost little)"),
    "hints": ("Where to label next", "Outlines the 5 regions of this frame where the model "
                                     "is least sure: scribble the right class there"),
}
_EXPLAIN = {
    "probability": "<b>Probability</b>: strong colour = the model is sure the pixel is that "
                   "class.",
    "uncertainty": "<b>Uncertainty</b>: bright = the model hesitates between classes.",
    "cost": "<b>Cost map</b>: bright where the model needs many decisions per pixel; dark "
            "where coarse blocks decide.",
    "hints": "<b>Where to label next</b>: yellow outlines mark where the model is least sure; "
             "a scribble there helps most.",
}
_HINT_COLORS = np.array([[0, 0, 0, 0], [1.0, 0.9, 0.0, 1.0]])


class ExportDialog(QDialog):
    """What to export: class values, a 0/255 mask, objects or a probability; which frames; how.

    ``request()`` returns ``(FrameExport, frame_indices, file_format)``.
    """

    _KIND_TEXT = {"labels": "Class values (1, 2, …)",
                  "mask": "Mask of one class (0 / 255)",
                  "instances": "Objects of one class (numbered 1, 2, …)",
                  "probability": "Probability of one class (0–1, float32)"}

    def __init__(self, classes, names, n_frames, frame_range, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Export")
        form = QFormLayout(self)
        self.kind_combo = QComboBox()
        for kind, text in self._KIND_TEXT.items():
            self.kind_combo.addItem(text, kind)
            self.kind_combo.setItemData(self.kind_combo.count() - 1, EXPORT_KINDS[kind],
                                        Qt.ToolTipRole)
        self.kind_combo.setCurrentIndex(1)
        form.addRow("Export", self.kind_combo)
        self.class_combo = QComboBox()
        for value, name in zip(classes, names):
            self.class_combo.addItem(f"{name} ({value})", int(value))
        self.class_combo.setCurrentIndex(len(classes) - 1)
        form.addRow("Class", self.class_combo)
        self.min_size_spin = QSpinBox()
        self.min_size_spin.setRange(0, 10**7)
        self.min_size_spin.setValue(20)
        self.min_size_spin.setSuffix(" px")
        self.min_size_spin.setToolTip("Objects with fewer pixels are dropped (0 keeps all)")
        form.addRow("Smallest object", self.min_size_spin)
        row = QHBoxLayout()
        self.first_spin, self.last_spin = QSpinBox(), QSpinBox()
        for spin, value in zip((self.first_spin, self.last_spin), frame_range):
            spin.setRange(0, max(n_frames - 1, 0))
            spin.setValue(value)
            row.addWidget(spin)
        row.insertWidget(1, QLabel("to"))
        form.addRow("Frames", row)
        self.folder_radio = QRadioButton("Folder of TIFFs (one per frame)")
        self.stack_radio = QRadioButton("One TIFF stack")
        self.folder_radio.setChecked(True)
        group = QButtonGroup(self)
        group.addButton(self.folder_radio)
        group.addButton(self.stack_radio)
        form.addRow("Save as", self.folder_radio)
        form.addRow("", self.stack_radio)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.kind_combo.currentIndexChanged.connect(self._update_enabled)
        self._update_enabled()

    def _update_enabled(self, *_):
        kind = self.kind_combo.currentData()
        self.class_combo.setEnabled(kind != "labels")
        self.min_size_spin.setEnabled(kind == "instances")

    def request(self):
        kind = self.kind_combo.currentData()
        export = FrameExport(kind, None if kind == "labels" else self.class_combo.currentData(),
                             self.min_size_spin.value() if kind == "instances" else 0)
        first, last = sorted((self.first_spin.value(), self.last_spin.value()))
        return export, list(range(first, last + 1)), \
            "tiff-stack" if self.stack_radio.isChecked() else "tiff"


def _image_model_attribute(name, doc):
    """A widget attribute that is the chosen image's `ImageModel` field ``name``."""
    return property(lambda self: getattr(self._image_model(), name),
                    lambda self, value: setattr(self._image_model(), name, value), doc=doc)


class PixelClassifierWidget(QWidget):
    """Scribble, train, see the result live, apply to frames, save the model, export.

    Signals
    -------
    job_started(int)
        A train / live-update / predict job starts (its kind: PREDICT, RETRAIN, TRAIN).
    segmentation_updated(int)
        A frame's segmentation was written to the segmentation layer (frame index).
    job_done()
        That job ended (finished, failed or cancelled).
    batch_done()
        "Apply to frames" or "Export" ended (finished, failed or cancelled).
    """

    job_started = Signal(int)
    segmentation_updated = Signal(int)
    job_done = Signal()
    batch_done = Signal()
    _training_progress = Signal(object)        # msclassify.pixel.TrainingProgress

    classifier = _image_model_attribute("classifier", "The chosen image's model (or None).")
    last_model = _image_model_attribute("training", "`TrainedModel` of its last training.")
    last_prediction = _image_model_attribute("prediction", "`FramePrediction` shown last.")
    last_cost = _image_model_attribute("cost", "`CostSummary` of the last prediction.")
    last_hints = _image_model_attribute("hints", "`LabelHints` of the last prediction.")
    model_origin = _image_model_attribute("origin", "Where a loaded model came from.")
    predicted_frames = _image_model_attribute("predicted_frames",
                                              "Frames segmented by the current model.")

    def _image_model(self, name=None):
        """The `ImageModel` of image ``name`` (default: the one chosen in the Image box)."""
        name = self.image_combo.currentText() if name is None else name
        return self._models.setdefault(name, ImageModel())

    def __init__(self, napari_viewer, parent=None):
        super().__init__(parent)
        self.viewer = napari_viewer
        self._models = {}                 # image name -> ImageModel (see the properties below)
        self._job_image = None            # name of the image the running job works on
        self._batch_image = None          # ... and the running Apply / Export
        self.scribbled = ScribbledFrames()
        self._scribble_layer = None       # the Labels layer whose events we follow
        self._worker = None
        self._cancel = threading.Event()
        self._batch_worker = None
        self._last_frame = None           # the frame the last job worked on
        self._seen_frame = None           # the frame on screen at the last frame change
        self._progress_drawn = 0.0
        self._edited_at = None
        self._panel_stale = False
        # time.perf_counter() stamps of the last job's stages, for latency breakdowns
        # (benchmarks/bench_napari.py): edited (the stroke that asked for it), job_started,
        # fit_started, fit_done, predict_started, predict_done (worker thread), delivered (the
        # prediction reached the GUI thread), layer_updated, shown (Result panel too)
        self.timeline = {}
        self._preload_pending = True      # until the kernels' load is scheduled (`__init__`)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self.scheduler = LiveUpdateScheduler(self._start_job, self._timer, EDIT_DELAY_MS)
        # features of the scribbled frames, kept between retrains while the user paints
        self.feature_cache = FeatureCache(max_bytes=FEATURE_CACHE_BYTES)
        self._timer.timeout.connect(self.scheduler.timer_fired)
        self._training_progress.connect(self._show_training_progress)

        self._build_ui()
        self._connect_viewer()
        # the first fit's Numba kernels load in a thread with the garbage collector paused,
        # PRELOAD_DELAY_S after the dock's last step (`_on_scribble_layer_changed`: its turns
        # can take longer than that), or after the dock's build: at once, it shared the GIL
        # with the dock's layer adds (0.30-0.33 s stalls against 0.19-0.24 s without it, load
        # 3-4)
        self._refresh_layer_choices()
        if self._preload_pending:
            self._preload_pending = False
            preload_in_background(delay=PRELOAD_DELAY_S)

    # -- construction ----------------------------------------------------------------------------
    def _build_ui(self):
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self._data_box())
        layout.addWidget(self._model_box())
        layout.addWidget(self._result_box())
        layout.addWidget(self._frames_box())
        layout.addStretch(1)
        scroll = _VerticalScrollArea()
        scroll.setWidget(content)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        self.segment_shortcut = QShortcut(QKeySequence(SEGMENT_SHORTCUT), self)
        self.segment_shortcut.setContext(Qt.WindowShortcut)
        self.segment_shortcut.activated.connect(self.segment_current_frame)

    def _data_box(self):
        box = QGroupBox("Data")
        form = QFormLayout(box)
        self.image_combo = QComboBox()
        self.image_combo.setToolTip("Image to segment: a 2-D frame, an RGB frame or a time stack")
        form.addRow("Image", self.image_combo)
        row = QHBoxLayout()
        self.scribble_combo = QComboBox()
        self.scribble_combo.setToolTip("Labels layer with the scribbles (0 = unlabelled)")
        self.new_scribbles_button = QPushButton("New")
        self.new_scribbles_button.setToolTip("Create an empty scribble layer for the image "
                                             "(a movie's frames take memory once painted)")
        row.addWidget(self.scribble_combo, 1)
        row.addWidget(self.new_scribbles_button)
        form.addRow("Scribbles", row)
        self.class_table = QTableWidget(0, 2)
        self.class_table.setHorizontalHeaderLabels(["label", "class name"])
        self.class_table.verticalHeader().setVisible(False)
        self.class_table.horizontalHeader().setSectionResizeMode(1, QHeaderView.Stretch)
        self.class_table.verticalHeader().setDefaultSectionSize(22)
        self.class_table.setFixedHeight(self.class_table.horizontalHeader().sizeHint().height()
                                        + CLASS_ROWS * 22 + 4)
        self.class_table.setToolTip("Select a row to paint with that label; double-click a name "
                                    "to edit it, a label to choose its colour (scribbles, "
                                    "result and probability use it)")
        self.add_class_button = QPushButton("Add class")
        form.addRow(self.class_table)
        form.addRow(self.add_class_button)
        self.new_scribbles_button.clicked.connect(self.new_scribble_layer)
        self.scribble_combo.currentIndexChanged.connect(self._on_scribble_layer_changed)
        self.image_combo.currentIndexChanged.connect(self._on_image_changed)
        self.class_table.itemChanged.connect(self._on_class_name_edited)
        self.class_table.currentCellChanged.connect(self._on_class_selected)
        self.class_table.cellDoubleClicked.connect(self._on_class_double_clicked)
        self.add_class_button.clicked.connect(self._add_class)
        return box

    def _model_box(self):
        box = QGroupBox("Model")
        form = QFormLayout(box)
        tips = ClassifierSettings.TOOLTIPS
        defaults = ClassifierSettings()
        self.features_combo = QComboBox()
        self.features_combo.addItems(list(PRESETS))
        self.features_combo.setCurrentText(defaults.features)
        self.features_combo.setToolTip(tips["features"])
        form.addRow("Image features", self.features_combo)
        self.mu_edit = QLineEdit(f"{defaults.cost_tradeoff:g}")
        validator = QDoubleValidator(0.0, 1e9, 12)
        validator.setNotation(QDoubleValidator.ScientificNotation)
        self.mu_edit.setValidator(validator)
        self.mu_edit.setToolTip(tips["cost_tradeoff"])
        form.addRow("Speed over accuracy", self.mu_edit)
        self.trees_spin = QSpinBox()
        self.trees_spin.setRange(1, 5000)
        self.trees_spin.setValue(defaults.n_estimators)
        self.trees_spin.setToolTip(tips["n_estimators"])
        form.addRow("Trees", self.trees_spin)
        self.more_button = _section_button("More settings")
        form.addRow(self.more_button)
        self.advanced = QWidget()
        advanced = QFormLayout(self.advanced)
        advanced.setContentsMargins(0, 0, 0, 0)
        self.alpha_spin = QDoubleSpinBox()
        self.alpha_spin.setRange(0.0, 1e4)
        self.alpha_spin.setDecimals(2)
        self.alpha_spin.setValue(defaults.split_cost)
        self.alpha_spin.setToolTip(tips["split_cost"])
        advanced.addRow("Cost per decision", self.alpha_spin)
        self.leaves_spin = QSpinBox()
        self.leaves_spin.setRange(2, 1024)
        self.leaves_spin.setValue(defaults.max_leaves)
        self.leaves_spin.setToolTip(tips["max_leaves"])
        advanced.addRow("Leaves per tree", self.leaves_spin)
        self.semi_check = QCheckBox("Semi-supervised (few scribbles)")
        self.semi_check.setChecked(defaults.semi_supervised)
        self.semi_check.setToolTip(tips["semi_supervised"])
        advanced.addRow(self.semi_check)
        self.advanced.setVisible(False)
        form.addRow(self.advanced)
        row = QHBoxLayout()
        self.train_button = QPushButton("Train")
        self.train_button.setToolTip("Train the full model on all scribbles and segment the "
                                     "frame shown")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.live_check = QCheckBox("Live update")
        self.live_check.setToolTip("After each paint stroke, train a quick model and segment "
                                   "the frame shown; moving the time slider segments the new "
                                   "frame")
        row.addWidget(self.train_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.live_check)
        form.addRow(row)
        self.segment_button = QPushButton(f"Segment this frame ({SEGMENT_SHORTCUT})")
        self.segment_button.setToolTip("Segment the frame under the time slider with the current "
                                       f"model (keyboard: {SEGMENT_SHORTCUT})")
        form.addRow(self.segment_button)
        self.train_progress = QProgressBar()
        self.train_progress.setTextVisible(False)
        self.train_progress.setMaximumHeight(6)
        form.addRow(self.train_progress)

        self.more_button.toggled.connect(
            lambda shown: _show_section(self.more_button, self.advanced, shown))
        self.train_button.clicked.connect(self.train)
        self.cancel_button.clicked.connect(self.cancel)
        self.live_check.toggled.connect(self.set_live_update)
        self.segment_button.clicked.connect(self.segment_current_frame)
        for signal in (self.features_combo.currentIndexChanged, self.mu_edit.editingFinished,
                       self.alpha_spin.valueChanged, self.trees_spin.valueChanged,
                       self.leaves_spin.valueChanged, self.semi_check.toggled):
            signal.connect(self._on_settings_changed)
        return box

    def _result_box(self):
        box = QGroupBox("Result")
        form = QFormLayout(box)
        self.status_label = QLabel("Scribble at least two classes (select a row above to paint "
                                   "it), then Train or tick Live update.")
        self.status_label.setWordWrap(True)
        form.addRow(self.status_label)
        self.result_labels = {}
        # the model in one line; how fast and what it computes behind "Details" (keeps Save,
        # Load and Export in view on a 1000 px high window)
        self.details_button = _section_button("Details: speed, work, features")
        self.details = QWidget()
        details = QFormLayout(self.details)
        details.setContentsMargins(0, 0, 0, 0)
        for name in ("Model", "Speed", "Work", "Features"):
            label = QLabel("–")
            label.setWordWrap(True)
            (form if name == "Model" else details).addRow(name, label)
            if name == "Model":
                form.addRow(self.details_button)
            self.result_labels[name] = label
        self.details.setVisible(False)
        form.addRow(self.details)
        self.details_button.toggled.connect(
            lambda shown: _show_section(self.details_button, self.details, shown))
        row = QHBoxLayout()
        self.show_checks = {}
        for key, (text, tip) in SHOW.items():
            check = QCheckBox(text)
            check.setToolTip(tip)
            check.toggled.connect(lambda on, key=key: self._on_show_toggled(key, on))
            self.show_checks[key] = check
        self.probability_class_combo = QComboBox()
        self.probability_class_combo.setToolTip("The class whose probability is shown")
        self.probability_class_combo.currentIndexChanged.connect(self._on_probability_class)
        grid = QVBoxLayout()
        for keys in (("probability",), ("uncertainty", "cost"), ("hints",)):
            line = QHBoxLayout()
            for key in keys:
                line.addWidget(self.show_checks[key])
            if keys == ("probability",):
                line.addWidget(self.probability_class_combo, 1)
            grid.addLayout(line)
        row.addLayout(grid)
        form.addRow("Show", row)
        self.explain_label = QLabel("")
        self.explain_label.setWordWrap(True)
        self.explain_label.setVisible(False)
        form.addRow(self.explain_label)
        return box

    def _frames_box(self):
        box = QGroupBox("Frames and files")
        form = QFormLayout(box)
        row = QHBoxLayout()
        self.first_spin, self.last_spin = QSpinBox(), QSpinBox()
        for spin in (self.first_spin, self.last_spin):
            spin.setToolTip("Frame numbers as on the time slider")
        row.addWidget(self.first_spin)
        row.addWidget(QLabel("to"))
        row.addWidget(self.last_spin)
        form.addRow("Frames", row)
        row = QHBoxLayout()
        self.apply_button = QPushButton("Apply to frames")
        self.apply_button.setToolTip("Segment every frame of the range with the current model")
        self.apply_cancel_button = QPushButton("Cancel")
        self.apply_cancel_button.setEnabled(False)
        row.addWidget(self.apply_button)
        row.addWidget(self.apply_cancel_button)
        form.addRow(row)
        self.apply_progress = QProgressBar()
        self.apply_progress.setFormat("")
        form.addRow(self.apply_progress)
        row = QHBoxLayout()
        self.save_button = QPushButton("Save model…")
        self.load_button = QPushButton("Load model…")
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Write masks, objects or probabilities as TIFFs (Fiji)")
        for button in (self.save_button, self.load_button, self.export_button):
            row.addWidget(button)
        form.addRow(row)
        self.apply_button.clicked.connect(self.apply_to_all_frames)
        self.apply_cancel_button.clicked.connect(self.cancel_batch)
        self.save_button.clicked.connect(self._ask_save_model)
        self.load_button.clicked.connect(self._ask_load_model)
        self.export_button.clicked.connect(self._ask_export)
        return box

    def _connect_viewer(self):
        # napari drops these connections itself once the widget is deleted
        layers = self.viewer.layers
        layers.events.inserted.connect(self._refresh_layer_choices)
        layers.events.removed.connect(self._refresh_layer_choices)
        layers.events.removed.connect(self._on_layer_removed)
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
        image_before = self.image_combo.currentText()
        for combo, kind in ((self.image_combo, Image), (self.scribble_combo, Labels)):
            current = combo.currentText()
            # the widget's own output layers are not inputs
            names = [layer.name for layer in self.viewer.layers
                     if isinstance(layer, kind) and not layer.metadata.get(OUTPUT_KEY)]
            if names == [combo.itemText(i) for i in range(combo.count())]:
                continue
            combo.blockSignals(True)
            combo.clear()
            combo.addItems(names)
            if current in names:
                combo.setCurrentText(current)
            elif kind is Labels:
                self._choose_scribbles_for_image()
            combo.blockSignals(False)
        if self.image_combo.currentText() != image_before:
            self._on_image_changed()
        elif not _same_layer(self.scribble_layer, self._scribble_layer):
            self._on_scribble_layer_changed()

    def _choose_scribbles_for_image(self):
        """Select the scribble layer of the chosen image: the one made for it (New), else one
        named like it, else any Labels layer of its shape with "scribble" in its name; none
        if nothing fits (then New makes one)."""
        image = self.image_layer
        candidates = [layer for layer in self.viewer.layers
                      if isinstance(layer, Labels) and not layer.metadata.get(OUTPUT_KEY)]
        chosen = None
        if image is not None:
            stack = self._stack_or_none()
            fits = [layer for layer in candidates
                    if stack is not None and tuple(layer.data.shape) == stack.labels_shape]
            ranked = ([layer for layer in candidates if layer.metadata.get(IMAGE_KEY) == image.name]
                      + [layer for layer in fits if layer.name == f"{image.name} scribbles"]
                      + [layer for layer in fits if "scribble" in layer.name.lower()]
                      + fits)
            chosen = ranked[0] if ranked else None
        elif candidates:
            preferred = [layer for layer in candidates if "scribble" in layer.name.lower()]
            chosen = (preferred or [None])[0]
        if chosen is None:
            self.scribble_combo.setCurrentIndex(-1)
        else:
            self.scribble_combo.setCurrentText(chosen.name)

    def _stack(self):
        image = self.image_layer
        if image is None:
            raise ValueError("add or open an image first")
        return FrameStack(image.data, rgb=image.rgb)

    def new_scribble_layer(self):
        """Add an empty scribble Labels layer matching the image, ready to paint label 1
        (selected and in paint mode a turn of the event loop later, its segmentation layer
        after that: `_on_scribble_layer_changed`).

        A time stack gets a `FrameLabels`: a frame takes memory once painted on.
        """
        try:
            stack = self._stack()
        except ValueError as exc:
            self._report_error(exc)
            return None
        image = self.image_layer
        metadata = {CLASS_NAMES_KEY: {1: "background", 2: "foreground"}, IMAGE_KEY: image.name}
        features, colormap = _class_style(metadata)
        # made in the class colours and names, right above the image's layers: nothing of ours
        # to redo after napari's insert (`_publish_classes`, `_arrange_layers` find it done)
        layer = Labels(new_labels(stack), name=f"{image.name} scribbles", scale=image.scale,
                       translate=image.translate, opacity=1.0, metadata=metadata,
                       features=features, colormap=colormap)
        layer.brush_size = 5
        layer.selected_label = 1
        layers = self.viewer.layers
        repaint_next_turn(self)              # napari's add and the window's repaint: two turns
        # inserted with the selection left where it is: the selection moves to it, in paint
        # mode, in a turn of its own (`_on_scribble_layer_changed`, `_start_painting`)
        insert_unselected(layers, layers.index(self._arranged_layers(scribbles=False)[-1]) + 1,
                          layer)
        self.scribble_combo.setCurrentText(layer.name)
        self._arrange_layers()
        return layer

    def _on_image_changed(self, *_):
        if self._worker is not None or self._batch_worker is not None:
            self.cancel()                    # their results belong to the image before
            self.cancel_batch()
        self._last_frame = self._seen_frame = None
        self._update_frame_range()
        set_progress(self.apply_progress, 0, 1, "")     # the last run was another image's
        self.scribble_combo.blockSignals(True)
        self._choose_scribbles_for_image()
        self.scribble_combo.blockSignals(False)
        self._on_scribble_layer_changed()
        self._fill_probability_classes()
        self._describe()
        self._frame_status()

    def _update_frame_range(self):
        stack = self._stack_or_none() if self.image_layer is not None else None
        n_frames = 1 if stack is None else stack.n_frames
        for spin in (self.first_spin, self.last_spin):
            spin.setRange(0, max(n_frames - 1, 0))
        self.first_spin.setValue(0)
        self.last_spin.setValue(n_frames - 1)

    def _on_scribble_layer_changed(self, *_):
        layer = self.scribble_layer
        steps = []
        chosen = layer is not None and not _same_layer(layer, self._scribble_layer)
        if chosen:
            # each in a turn of its own, the window's repaint after it in the next
            # (`repaint_next_turn`): the class colours and names into the layer (napari
            # redraws it: a user's own scribble layer when the dock is built); the layer
            # selected and in paint mode (napari's first brush of a session, its cursor
            # overlay, costs as much as a layer)
            steps.append(lambda: self._publish_classes_of(layer.name))
            steps.append(lambda: self._start_painting(layer.name))
        self._follow_scribbles(layer)
        self._fill_class_table(publish=not chosen)
        self._frame_status()
        if layer is not None and self.image_layer is not None:
            # the segmentation layer comes with the scribbles, so no job waits for napari to
            # build a layer: the layer object made in one turn, napari's insert in the next
            # (adding a Labels layer takes 0.1-0.4 s of napari's)
            made = []
            steps.append(lambda: made.append(self._make_segmentation_layer()))
            steps.append(lambda: self._add_segmentation_layer(*made))
        if steps and self._preload_pending:          # (the dock's build: `__init__`)
            self._preload_pending = False
            steps.append(lambda: preload_in_background(delay=PRELOAD_DELAY_S))
        if steps:
            in_turns(steps, self, now=False)

    def _publish_classes_of(self, name):
        layer = self.scribble_layer          # (napari hands plugins proxies: compare names)
        if layer is not None and layer.name == name:
            self._publish_classes(layer, hold_repaint=True)

    def _start_painting(self, name):
        """Select scribble layer ``name`` and put it in paint mode (unless the user chose
        another mode); the window repaints in the next turn."""
        layer = self.scribble_layer          # (napari hands plugins proxies: compare names)
        if layer is None or layer.name != name:
            return
        repaint_next_turn(self)
        self._keep_selected(layer)
        if layer.mode == "pan_zoom":
            layer.mode = "paint"

    def _make_segmentation_layer(self):
        """The segmentation layer object for `_add_segmentation_layer` to insert in a later
        turn, if the chosen image needs one (else None)."""
        spec = self._segmentation_to_add() if self.scribble_layer is not None else None
        return None if spec is None else make_layer(spec.layer_type, spec.data, spec.name,
                                                    metadata={OUTPUT_KEY: True}, **spec.kwargs)

    def _add_segmentation_layer(self, made=None):
        if self.scribble_layer is None or self.image_layer is None:
            return
        try:
            self._ensure_segmentation_layer(self._stack(), made=made)
        except ValueError:
            pass                         # an image the classifier cannot take: said on Train

    def _follow_scribbles(self, layer):
        if _same_layer(layer, self._scribble_layer):
            return
        if self._scribble_layer is not None:
            self._scribble_layer.events.paint.disconnect(self._on_scribbles_painted)
            self._scribble_layer.events.data.disconnect(self._on_scribble_data_replaced)
        self._scribble_layer = layer
        if layer is not None:
            layer.events.paint.connect(self._on_scribbles_painted)
            layer.events.data.connect(self._on_scribble_data_replaced)
            self._rescan_scribbles(layer)

    def _rescan_scribbles(self, layer):
        """Find the scribbled frames of a stack in a worker thread (a movie is large; a
        `FrameLabels` knows them at once)."""
        self.scribbled.reset()
        if layer.data.ndim == 3:
            create_worker(self.scribbled.rescan, layer.data, _start_thread=True)

    def _add_layer(self, spec, restyle=False, above=None, made=None):
        """Update the layer called ``spec.name`` in place, or add it right above ``above``
        (default: the image's layers below the scribbles), the selected layer left selected
        (`insert_unselected`: the brush keeps painting on the scribbles). ``restyle``: a layer
        renamed for ``spec`` (another class's probability) takes its colormap and attributes
        too. ``made``: the new layer object, made beforehand from ``spec``
        (`update_or_add_layer`)."""
        if above is None:
            above = self._arranged_layers(scribbles=False)[-1]
        layer, added = update_or_add_layer(self.viewer, spec.layer_type, spec.data, spec.name,
                                           parent=self, above=above, keep_selection=True,
                                           made=made, metadata={OUTPUT_KEY: True},
                                           **spec.kwargs)
        if added or restyle:
            styles = {"colormap": spec.kwargs["colormap"]} \
                if restyle and "colormap" in spec.kwargs else {}
            for key, value in {**styles, **spec.attributes}.items():
                setattr(layer, key, value)
        if added:
            self._arrange_layers()
        return layer

    def _arranged_layers(self, scribbles=True):
        """The chosen image and its layers in drawing order: the image, segmentation,
        probability, uncertainty, cost map, where to label next, scribbles (those that exist;
        the scribbles only with ``scribbles``); ``[None]`` without an image."""
        image = self.image_layer
        if image is None:
            return [None]
        layers = self.viewer.layers
        ours = [self._segmentation_layer(), *self._output_layers("probability"),
                *self._output_layers("uncertainty"), *self._output_layers("cost"),
                *self._output_layers("hints"), self.scribble_layer if scribbles else None]
        return [image] + [layer for layer in ours if layer is not None and layer in layers]

    def _arrange_layers(self):
        """Put the chosen image's layers right above it, in drawing order (`_arranged_layers`).
        Another image added later (or moved up) never hides them; the scribbles stay on top
        of the result."""
        image, *ours = self._arranged_layers()
        if image is None:
            return
        layers = self.viewer.layers
        below = image
        for layer in ours:
            position = layers.index(below) + 1
            if layers.index(layer) != position:
                source = layers.index(layer)
                layers.move(source, position if source > position else position - 1)
                # napari moves to just before `dest` counted before the removal
            below = layer

    def _keep_selected(self, layer):
        """Give the selection back to ``layer`` (napari selects every new layer), so the brush
        keeps painting on the scribbles."""
        if layer is not None and layer in self.viewer.layers:
            self.viewer.layers.selection.active = layer

    def _segmentation_to_add(self, stack=None, classes=(1, 2)):
        """The `LayerSpec` of the chosen image's segmentation layer if it is missing or of the
        wrong shape (made in the class colours: nothing to publish after), else None (also
        without an image the classifier takes)."""
        try:
            stack = self._stack() if stack is None else stack
        except ValueError:
            return None
        segmentation = self._segmentation_layer()
        if segmentation is not None and segmentation.data.shape == stack.labels_shape \
                and np.iinfo(segmentation.data.dtype).max >= int(np.max(classes)):
            return None
        image, scribbles = self.image_layer, self.scribble_layer
        spec = segmentation_spec(image.name, stack, classes, image.scale, image.translate)
        if scribbles is not None:
            features, colormap = _class_style(scribbles.metadata, segmentation=True)
            spec.kwargs.update(features=features, colormap=colormap)
        return spec

    def _ensure_segmentation_layer(self, stack, classes=(1, 2), made=None):
        """The segmentation layer of the image, created (above the image, below the
        scribbles) if missing or of the wrong shape; ``made``: a layer object made for it
        beforehand (`_make_segmentation_layer`), used if it still fits (`made_from`)."""
        spec = self._segmentation_to_add(stack, classes)
        if spec is None:
            return self._segmentation_layer()
        segmentation = self._add_layer(spec, above=self.image_layer, made=made)
        self.predicted_frames.clear()
        return segmentation

    def _segmentation_layer(self):
        image = self.image_layer
        return None if image is None else self._layer_named(f"{image.name} segmentation", Labels)

    def _output_name(self, key):
        """Name prefix of the optional layer ``key`` (probability layers add the class)."""
        image = self.image_layer
        name = None if image is None else image.name
        return {"probability": f"{name} P(", "uncertainty": f"{name} uncertainty",
                "cost": f"{name} cost map", "hints": f"{name} where to label next"}[key]

    def _output_layers(self, key):
        prefix = self._output_name(key)
        return [layer for layer in self.viewer.layers
                if layer.metadata.get(OUTPUT_KEY) and layer.name.startswith(prefix)]

    def _on_layer_removed(self, event):
        layer = event.value
        for key, check in self.show_checks.items():
            if check.isChecked() and not self._output_layers(key) \
                    and layer.metadata.get(OUTPUT_KEY):
                check.blockSignals(True)
                check.setChecked(False)
                check.blockSignals(False)
        self._update_explanation()

    # -- classes ---------------------------------------------------------------------------------
    def _fill_class_table(self, publish=True):
        """The scribble layer's classes in the table (and, with ``publish``, in the layers:
        `_publish_classes`)."""
        layer = self.scribble_layer
        self.class_table.blockSignals(True)
        self.class_table.setRowCount(0)
        if layer is not None:
            values = _class_values(layer.metadata)
            names = class_names(layer.metadata, values)
            colors = class_colors(layer.metadata, values)
            for row, (value, name, color) in enumerate(zip(values, names, colors)):
                self.class_table.insertRow(row)
                label_item = QTableWidgetItem(str(value))
                label_item.setFlags(label_item.flags() & ~Qt.ItemIsEditable)
                label_item.setBackground(QColor(color))
                label_item.setForeground(QColor("black"))
                label_item.setToolTip("Double-click to choose this class's colour")
                self.class_table.setItem(row, 0, label_item)
                self.class_table.setItem(row, 1, QTableWidgetItem(name))
            if publish:
                self._publish_classes(layer)
        self.class_table.blockSignals(False)

    def _publish_classes(self, layer, hold_repaint=False):
        """Name the classes in napari's status bar; colour the scribbles and the segmentation
        with the class colours (`_class_style`; what is so already is left alone: napari
        redraws a layer whose features or colormap are set; with ``hold_repaint``, in the
        next turn of the event loop, `repaint_next_turn`)."""
        targets = [(layer, False), (self._segmentation_layer(), True)]
        for target, segmentation in targets:
            if target is None:
                continue
            features, colormap = _class_style(layer.metadata, segmentation)
            unchanged = same_colormap(target.colormap, colormap)
            if hold_repaint and not unchanged:
                repaint_next_turn(self)
            if not target.features.equals(features):
                target.features = features
            if not unchanged:
                target.colormap = colormap

    def _on_class_name_edited(self, item):
        layer = self.scribble_layer
        if layer is None or item.column() != 1:
            return
        value = int(self.class_table.item(item.row(), 0).text())
        names = {int(k): v for k, v in layer.metadata.get(CLASS_NAMES_KEY, {}).items()}
        names[value] = item.text().strip() or f"class {value}"
        layer.metadata[CLASS_NAMES_KEY] = names
        self._publish_classes(layer)
        self._fill_probability_classes()

    def _on_class_double_clicked(self, row, column):
        layer = self.scribble_layer
        if layer is None or column != 0:
            return
        value = int(self.class_table.item(row, 0).text())
        [current] = class_colors(layer.metadata, [value])
        color = QColorDialog.getColor(QColor(current), self, f"Colour of class {value}")
        if color.isValid():
            self.set_class_color(value, color.name())

    def set_class_color(self, value, color):
        """Colour class ``value`` with ``color`` (``"#rrggbb"``) in the scribbles, the
        segmentation and the probability layer."""
        layer = self.scribble_layer
        if layer is None:
            raise ValueError("choose or create a scribble layer first")
        colors = {int(k): v for k, v in layer.metadata.get(CLASS_COLORS_KEY, {}).items()}
        colors[int(value)] = QColor(color).name()
        layer.metadata[CLASS_COLORS_KEY] = colors
        self._fill_class_table()
        self._update_output("probability")

    def _on_class_selected(self, row, *_):
        layer = self.scribble_layer
        if layer is not None and row >= 0 and self.class_table.item(row, 0) is not None:
            layer.selected_label = int(self.class_table.item(row, 0).text())

    def _add_class(self):
        layer = self.scribble_layer
        if layer is None:
            return
        value = len(_class_values(layer.metadata)) + 1
        names = {int(k): v for k, v in layer.metadata.get(CLASS_NAMES_KEY, {}).items()}
        names[value] = f"class {value}"
        layer.metadata[CLASS_NAMES_KEY] = names
        self._fill_class_table()

    def _class_names_of_model(self):
        layer = self.scribble_layer
        return class_names(layer.metadata if layer is not None else {}, self.classifier.classes_)

    def _fill_probability_classes(self):
        """The classes of the chosen image's model in the "Probability of" box (the first one
        not named background chosen)."""
        combo = self.probability_class_combo
        before = combo.currentData()
        combo.blockSignals(True)
        combo.clear()
        if self.classifier is not None:
            names = self._class_names_of_model()
            for column, name in enumerate(names):
                combo.addItem(name, column)
            others = [column for column, name in enumerate(names)
                      if "background" not in name.lower()]
            combo.setCurrentIndex(before if before is not None and before < len(names)
                                  else (others or [0])[0])
        combo.blockSignals(False)

    def _on_probability_class(self, *_):
        self._update_output("probability")

    # -- settings --------------------------------------------------------------------------------
    def settings(self):
        """The `ClassifierSettings` shown in the widget (Train's; live updates derive theirs)."""
        text = self.mu_edit.text().strip().replace(",", ".")
        try:
            mu = float(text)
        except ValueError:
            raise ValueError(f"'Speed over accuracy' must be a number >= 0 (e.g. 2e-4), got "
                             f"{text!r}") from None
        if not np.isfinite(mu) or mu < 0:
            raise ValueError(f"'Speed over accuracy' must be a finite number >= 0, got "
                             f"{text!r}")
        return ClassifierSettings(features=self.features_combo.currentText(), cost_tradeoff=mu,
                                  split_cost=self.alpha_spin.value(),
                                  n_estimators=self.trees_spin.value(),
                                  max_leaves=self.leaves_spin.value(),
                                  semi_supervised=self.semi_check.isChecked())

    def _on_settings_changed(self, *_):
        self.scheduler.request(RETRAIN)

    # -- train / live update / segment -----------------------------------------------------------
    def train(self):
        """Train the full model on all scribbles now and segment the frame shown."""
        self.scheduler.run_now(TRAIN)

    def segment_current_frame(self):
        """Segment the frame under the time slider with the current model."""
        if self.classifier is None:
            self._report_error(ValueError("train or load a model first"))
            return
        self.scheduler.run_now(PREDICT)

    def set_live_update(self, enabled):
        """Switch live update on (retrain right away and after every stroke) or off."""
        if self.live_check.isChecked() != bool(enabled):
            self.live_check.setChecked(bool(enabled))   # re-enters through `toggled`
            return
        self.scheduler.enabled = bool(enabled) and self._batch_worker is None
        if enabled:
            model = self.last_model
            if model is not None and not model.live:
                live_trees = self.settings().for_live_update(
                    len(model.classifier.classes_)).n_estimators
                # a notification stays on screen while the status line moves on
                show_info(f"Live update: each stroke now trains a quick {live_trees}-tree "
                          f"model, which replaces the {model.classifier.n_estimators}-tree "
                          "model from Train (for saving and exporting too); press Train again "
                          "for the full model.")
            self.scheduler.request(RETRAIN)
        else:
            self.scheduler.cancel_pending()

    def cancel(self):
        """Stop the running training (the model shown so far is kept)."""
        self._cancel.set()
        self.scheduler.cancel_pending()
        if self._worker is not None:
            self._worker.quit()

    def _on_scribbles_painted(self, *_):
        self._edited_at = time.perf_counter()
        stack = self._stack_or_none()
        if stack is not None and stack.is_stack:
            self.scribbled.mark(self.current_frame())
        self.scheduler.request(RETRAIN)

    def _on_scribble_data_replaced(self, *_):
        self._rescan_scribbles(self._scribble_layer)
        self.scheduler.request(RETRAIN)

    def _stack_or_none(self):
        try:
            return self._stack()
        except ValueError:
            return None

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
        if frame == self._seen_frame:
            return
        self._seen_frame = frame
        if self.scheduler.enabled:
            if frame != self._last_frame:        # the frame the last job worked on: done
                self.scheduler.request(PREDICT)
        elif self._batch_worker is None and self._worker is None:
            # also back on the last job's frame: the status line is about the frame seen since
            self._frame_status()

    def _frame_status(self):
        """Say whether the frame on screen is segmented (never a message about another
        frame)."""
        if self.image_layer is None:
            return
        if self.classifier is None:
            self.status_label.setText(
                "Scribble at least two classes (select a row above to paint it), then Train or "
                "tick Live update." if self.scribble_layer is not None else
                "Press New to scribble on this image, or Load model.")
            return
        try:
            frame = self.current_frame()
        except ValueError:
            return
        if not self._stack().is_stack:       # one image: no frame number (none on screen)
            self.status_label.setText(
                "The image is segmented." if frame in self.predicted_frames else
                f"The image is not segmented yet: press 'Segment this frame' ({SEGMENT_SHORTCUT}) "
                "or tick Live update.")
        elif frame in self.predicted_frames:
            self.status_label.setText(f"Frame {frame} segmented.")
        else:
            self.status_label.setText(f"Frame {frame} is not segmented yet: press 'Segment this "
                                      f"frame' ({SEGMENT_SHORTCUT}), tick Live update, or Apply "
                                      "to frames.")

    def _start_job(self, kind):
        """Called by the scheduler: take the inputs here, compute in a worker thread."""
        self.timeline = {"job_started": time.perf_counter()}
        if kind == RETRAIN and self._edited_at is not None:
            self.timeline["edited"] = self._edited_at
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
                stack.check_labels(layer.data.shape)
                if kind == TRAIN:   # every scribble, scanned in the worker thread
                    data = layer.data
                    scribbles = lambda: self.scribbled.snapshot(data, stack)  # noqa: E731
                else:               # the frames known to hold scribbles, copied here
                    scribbles = self.scribbled.snapshot(layer.data, stack)
            elif self.classifier is None:
                raise ValueError("nothing to predict with: train or load a model first")
        except (ValueError, TypeError) as exc:
            self._report_error(exc, popup=kind != RETRAIN)
            self.scheduler.job_finished()
            self.job_done.emit()
            return
        self._cancel = threading.Event()
        self._last_frame = self._seen_frame = frame_index
        self._job_image = self.image_combo.currentText()
        worker = create_worker(update_job, kind, settings, stack, frame_index,
                               scribbles=scribbles, classifier=self.classifier,
                               cancel=self._cancel, on_stage=self._training_progress.emit,
                               feature_cache=self.feature_cache,
                               hints=self.show_checks["hints"].isChecked(),
                               cost=kind == TRAIN or self.show_checks["cost"].isChecked(),
                               _ignore_errors=True)
        worker.yielded.connect(self._on_job_result)
        worker.errored.connect(lambda exc: self._report_error(exc, popup=kind != RETRAIN))
        worker.finished.connect(self._on_job_finished)
        self._worker = worker
        worker.start()                 # first: what follows only draws
        self.status_label.setText({PREDICT: f"Segmenting frame {frame_index}…",
                                   RETRAIN: "Training a quick model…",
                                   TRAIN: "Training the full model…"}[kind])
        set_progress(self.train_progress, 0)
        self.cancel_button.setEnabled(True)

    def _on_job_finished(self):
        self._worker = None
        if self._panel_stale:            # no prediction followed the model (an error)
            self._describe()
        self.cancel_button.setEnabled(False)
        if self._cancel.is_set():
            self.status_label.setText("Cancelled.")
        self.scheduler.job_finished()
        self.job_done.emit()

    def _show_training_progress(self, report):
        """Stage, percent and ETA of the fit in the status line; the fraction on the bar."""
        now = time.perf_counter()
        if report.fraction < 1 and now - self._progress_drawn < PROGRESS_INTERVAL_S:
            return
        self._progress_drawn = now
        set_progress(self.train_progress, round(1000 * report.fraction), 1000)
        if report.stage != "done":
            self.status_label.setText(f"Training: {training_status(report)}")

    def _on_job_result(self, result):
        if self._job_image != self.image_combo.currentText():
            return       # another image was chosen meanwhile (the job was cancelled)
        if isinstance(result, TrainedModel):
            self.timeline.update(fit_started=result.finished_at - result.seconds,
                                 fit_done=result.finished_at)
            self._show_model(result)
        elif isinstance(result, FramePrediction):
            self.timeline.update(predict_started=result.finished_at - result.seconds,
                                 predict_done=result.finished_at,
                                 delivered=time.perf_counter())
            self._show_prediction(result)
            self.timeline["shown"] = time.perf_counter()
        elif isinstance(result, LabelHints):
            self.last_hints = result
            self._update_output("hints")
            if not result.regions.any():
                self.status_label.setText(f"Frame {result.frame_index}: the model is sure "
                                          "everywhere, no region to label next.")
        elif isinstance(result, CostSummary):
            self.last_cost = result
            self._update_output("cost")
            self._describe()

    def _show_model(self, model):
        self.classifier = model.classifier
        self.last_model = model
        self.model_origin = None
        self.last_cost = None
        self.predicted_frames.clear()
        self._fill_probability_classes()
        # the Result panel is redrawn once, with the prediction that follows (each redraw
        # composes the window on the GUI thread while the worker predicts)
        self._panel_stale = True

    def _describe(self):
        self._panel_stale = False
        rows = [] if self.classifier is None else describe_model(
            self.classifier, self.last_model, self.last_prediction, self.last_cost,
            self.model_origin)
        shown = {row.label for row in rows}
        for row in rows:
            self.result_labels[row.label].setText(row.text)
            self.result_labels[row.label].setToolTip(row.tooltip)
        for name, label in self.result_labels.items():
            if name not in shown:
                label.setText("–")
                label.setToolTip("")

    def _show_prediction(self, prediction):
        stack = self._stack()
        segmentation = self._ensure_segmentation_layer(stack, self.classifier.classes_)
        if stack.is_stack:
            segmentation.data[prediction.frame_index] = prediction.labels
        else:
            segmentation.data[...] = prediction.labels
        segmentation.refresh()
        self.timeline["layer_updated"] = time.perf_counter()
        self.predicted_frames.add(prediction.frame_index)
        self.last_prediction = prediction
        self.segmentation_updated.emit(prediction.frame_index)
        for key in ("probability", "uncertainty"):
            self._update_output(key)
        self._describe()
        self._frame_status()

    # -- optional output layers ------------------------------------------------------------------
    def _output_specs(self, key):
        """The layer specs of output ``key`` from the latest results (empty if none yet)."""
        image, stack = self.image_layer, self._stack_or_none()
        if image is None or stack is None:
            return []
        place = (image.scale, image.translate)
        prediction = self.last_prediction
        if key == "cost":
            return [] if self.last_cost is None else \
                [cost_map_spec(image.name, stack, self.last_cost, *place)]
        if key == "hints":
            return [] if self.last_hints is None else \
                [label_hints_spec(image.name, stack, self.last_hints, *place)]
        if prediction is None or self.classifier is None:
            return []
        if key == "uncertainty":
            return [uncertainty_spec(image.name, stack, prediction, *place)]
        column = self.probability_class_combo.currentData()
        if column is None or column >= prediction.probabilities.shape[2]:
            return []
        value = self.classifier.classes_[column]
        layer = self.scribble_layer
        [color] = class_colors(layer.metadata if layer is not None else {}, [value])
        return [probability_spec(image.name, stack, prediction, column,
                                 self.probability_class_combo.currentText(), color, *place)]

    def _update_output(self, key):
        """Bring output ``key``'s layers up to date, if its "Show" box is ticked."""
        if not self.show_checks[key].isChecked():
            return
        specs = self._output_specs(key)
        names = {spec.name for spec in specs}
        stale = [layer for layer in self._output_layers(key) if specs and layer.name not in names]
        restyled = set()
        for spec in specs:     # e.g. another class's probability: the same layer, renamed
            if stale and spec.name not in self.viewer.layers:    # (napari's remove + add
                stale.pop(0).name = spec.name                    # stall 2-4 repaints)
                restyled.add(spec.name)
        for layer in stale:
            self.viewer.layers.remove(layer)
        for spec in specs:
            layer = self._add_layer(spec, restyle=spec.name in restyled)
            if key == "hints":
                _set_colormap(layer, _HINT_COLORS)     # every region in one bright colour
            else:
                _show_colorbar(layer)

    def _on_show_toggled(self, key, shown):
        if shown:
            self._update_output(key)
            if key == "hints" and self.last_hints is None and self.classifier is not None:
                self.segment_current_frame()     # hints are computed with a prediction
        else:
            for layer in self._output_layers(key):
                self.viewer.layers.remove(layer)
        self._update_explanation()

    def _update_explanation(self):
        shown = [_EXPLAIN[key] for key, check in self.show_checks.items() if check.isChecked()]
        self.explain_label.setText("<br>".join(shown))
        self.explain_label.setVisible(bool(shown))

    # -- all frames, files -----------------------------------------------------------------------
    def frame_range(self):
        """Frames of the "Frames" range (first to last, inclusive)."""
        first, last = sorted((self.first_spin.value(), self.last_spin.value()))
        return list(range(first, last + 1))

    def apply_to_all_frames(self):
        """Segment the frames of the range in a worker thread, with progress, ETA and cancel."""
        if self.classifier is None:
            self._report_error(ValueError("train or load a model first"), popup=True)
            return None
        try:
            stack = self._stack()
        except ValueError as exc:
            self._report_error(exc, popup=True)
            return None
        frames = [index for index in self.frame_range() if index < stack.n_frames]
        self._ensure_segmentation_layer(stack, self.classifier.classes_)
        # Cancel's quit() ends the worker's loop but not the generator: the prediction thread
        # asks the worker (bound below, before the generator first runs) whether to stop
        worker = create_worker(apply_to_frames, self.classifier, stack, frames,
                               nice=BACKGROUND_NICE,
                               should_stop=lambda: worker.abort_requested,
                               _ignore_errors=True)
        worker.yielded.connect(self._on_frame_segmented)
        return self._run_batch(worker, len(frames),
                               f"Segmenting frames {frames[0]}–{frames[-1]}")

    def _on_frame_segmented(self, item):
        index, labels = item
        segmentation = self._segmentation_layer()
        if segmentation is None or self._batch_image != self.image_combo.currentText():
            return
        if segmentation.data.ndim == 3:
            segmentation.data[index] = labels
        else:
            segmentation.data[...] = labels
        self.predicted_frames.add(index)
        if index == self.current_frame():
            segmentation.refresh()
        self._batch_step()
        self.segmentation_updated.emit(index)

    def _run_batch(self, worker, n_steps, what):
        self._batch_what = what
        self._batch_image = self.image_combo.currentText()
        self._batch_started = time.perf_counter()
        set_progress(self.apply_progress, 0, n_steps, f"{what}: %v / %m, {eta_text(0, n_steps, 0)}")
        self._set_batch_running(True)
        self.status_label.setText(f"{what}…")
        worker.errored.connect(self._report_error)
        worker.finished.connect(self._on_batch_finished)
        self._batch_worker = worker
        worker.start()
        return worker

    def _batch_step(self):
        done = self.apply_progress.value() + 1
        total = self.apply_progress.maximum()
        now = time.perf_counter()
        eta = eta_text(done, total, now - self._batch_started)
        set_progress(self.apply_progress, done, text_format=f"{self._batch_what}: %v / %m, {eta}")

    def _on_batch_finished(self):
        # cancelled: Apply's frames may also end without the worker's `aborted` (its
        # prediction thread stops on abort_requested, and the generator then simply ends)
        cancelled = self._batch_worker is not None and self._batch_worker.abort_requested
        self._batch_worker = None
        self._set_batch_running(False)
        segmentation = self._segmentation_layer()
        if segmentation is not None:
            segmentation.refresh()
        seconds = time.perf_counter() - self._batch_started
        if cancelled and self.apply_progress.value() < self.apply_progress.maximum():
            self.status_label.setText(f"{self._batch_what}: cancelled.")
        elif self.apply_progress.value() == self.apply_progress.maximum():
            set_progress(self.apply_progress, self.apply_progress.value(),
                         text_format=f"{self._batch_what}: %v / %m, done in {seconds:.0f} s")
            if self.status_label.text() == f"{self._batch_what}…":   # nothing said since
                self.status_label.setText(f"{self._batch_what}: done in {seconds:.0f} s.")
        self.batch_done.emit()

    def _set_batch_running(self, running):
        for button in (self.apply_button, self.export_button, self.train_button,
                       self.load_button, self.segment_button):
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
        self.last_model = self.last_prediction = self.last_cost = self.last_hints = None
        self.model_origin = f"loaded from {Path(path).name}"
        self.predicted_frames.clear()
        self._fill_probability_classes()
        self._describe()
        self.status_label.setText(f"Model loaded from {path}")
        if stack is not None:
            self.scheduler.run_now(PREDICT)

    def export(self, path, export=None, frames=None, file_format="tiff"):
        """Write ``export`` (a `msclassify.pixel.FrameExport`; default: class values) of
        ``frames`` (default: the "Frames" range) to ``path`` in a worker thread.

        Frames the current model already segmented are written from the
        segmentation layer; the others (and every probability) are predicted.
        """
        if self.classifier is None:
            raise ValueError("nothing to export yet: train or load a model first")
        stack = self._stack()
        export = FrameExport() if export is None else export
        frames = self.frame_range() if frames is None else list(frames)
        segmentation = self._segmentation_layer()
        predicted = set(self.predicted_frames)

        def segmented(index):
            if segmentation is None or index not in predicted:
                return None
            return np.array(segmentation.data[index] if segmentation.data.ndim == 3
                            else segmentation.data)

        worker = create_worker(export_frames, self.classifier, stack, frames, path, export,
                               file_format, segmented, _ignore_errors=True)
        worker.yielded.connect(lambda _: self._batch_step())
        layer = self.scribble_layer
        metadata = layer.metadata if layer is not None else {}
        legend = (self.classifier.classes_, self._class_names_of_model(),
                  class_colors(metadata, self.classifier.classes_))

        def exported(_):
            written = write_class_legend(path, *legend)
            self.status_label.setText(f"Exported {len(frames)} frames to {path} (classes, "
                                      f"names and colours in {written.name})")

        worker.returned.connect(exported)
        return self._run_batch(worker, len(frames), f"Exporting frames {frames[0]}–{frames[-1]}")

    def _ask_save_model(self):
        path, _ = QFileDialog.getSaveFileName(self, "Save model", "pixel_classifier.msc",
                                              "msclassify model (*.msc)")
        if path:
            self._guarded(self.save_model, path)

    def _ask_load_model(self):
        path, _ = QFileDialog.getOpenFileName(self, "Load model", "", "msclassify model (*.msc)")
        if path:
            self._guarded(self.load_model, path)

    def export_dialog(self):
        """The Export dialog for the current model and image (None without a model)."""
        if self.classifier is None or self.image_layer is None:
            self._report_error(ValueError("nothing to export yet: train or load a model first"))
            return None
        frames = self.frame_range()
        return ExportDialog(self.classifier.classes_, self._class_names_of_model(),
                            self._stack().n_frames, (frames[0], frames[-1]), self)

    def _ask_export(self):
        dialog = self.export_dialog()
        if dialog is None or not dialog.exec():          # 1 = accepted (Qt5 and Qt6)
            return
        export, frames, file_format = dialog.request()
        name = f"{self.image_layer.name}_{export.kind}"
        if file_format == "tiff-stack":
            path, _ = QFileDialog.getSaveFileName(self, "Export to a TIFF stack", f"{name}.tif",
                                                  "TIFF (*.tif *.tiff)")
        else:
            parent = QFileDialog.getExistingDirectory(self, "Export into a new folder in…")
            path = str(Path(parent) / name) if parent else ""
        if path:
            self._guarded(self.export, path, export, frames, file_format)

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


class _VerticalScrollArea(QScrollArea):
    """Scrolls its widget vertically only, and is as wide as the widget needs."""

    def __init__(self):
        super().__init__()
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)

    def _width(self, widget_width):
        return widget_width + self.verticalScrollBar().sizeHint().width()

    def minimumSizeHint(self):
        hint = super().minimumSizeHint()
        return QSize(self._width(self.widget().minimumSizeHint().width()), hint.height())

    def sizeHint(self):
        hint = self.widget().sizeHint()
        return QSize(self._width(hint.width()), hint.height())


def set_progress(bar, value, maximum=None, text_format=None):
    """Set a progress bar's value (and maximum, format) and let the window draw it with its next
    update.

    `QProgressBar.setValue` repaints at once; in a napari window that composes the whole
    window with the OpenGL canvas, which under software OpenGL (Xvfb, remote desktops) takes
    30-100 ms of the GUI thread per call (measured with `benchmarks/bench_napari.py`).
    With updates disabled meanwhile, the bar is drawn once with the rest of the window.
    """
    bar.setUpdatesEnabled(False)
    try:
        if maximum is not None:
            bar.setMaximum(maximum)
        if text_format is not None:
            bar.setFormat(text_format)
        bar.setValue(value)
    finally:
        bar.setUpdatesEnabled(True)      # schedules one update


def _section_button(text):
    """A checkable arrow button that shows / hides a section (see `_show_section`)."""
    button = QToolButton()
    button.setText(text)
    button.setCheckable(True)
    button.setArrowType(Qt.RightArrow)
    button.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
    return button


def _show_section(button, section, shown):
    section.setVisible(shown)
    button.setArrowType(Qt.DownArrow if shown else Qt.RightArrow)


def _show_colorbar(layer):
    """The layer's colour bar with its name above it, in the top right corner (napari stacks
    the overlays sharing a corner, so the bars of several layers do not overlap)."""
    if not layer.colorbar.visible:
        layer.colorbar.size = (18, 90)
        layer.colorbar.box = True
        layer.colorbar.visible = True
    if not layer.name_overlay.visible:
        layer.name_overlay.position = layer.colorbar.position
        layer.name_overlay.box = True
        layer.name_overlay.visible = True


def _label_colormap(rgba):
    """Label v coloured ``rgba[v]`` (0: ``rgba[0]``; larger values cycle through ``rgba[1:]``).

    A cyclic colormap: napari maps it with a Numba kernel compiled once and cached on disk. A
    direct colormap's kernel was compiled again in every session (3-10 s of the GUI thread the
    first time the segmentation was coloured, e.g. on "New" scribbles; bench_napari.py)."""
    return CyclicLabelColormap(colors=np.asarray(rgba, np.float32), background_value=0)


def _set_colormap(layer, rgba):
    """Colour ``layer`` with `_label_colormap` ``(rgba)``, unless it already is."""
    colormap = _label_colormap(rgba)
    if not same_colormap(layer.colormap, colormap):
        layer.colormap = colormap


def _same_layer(first, second):
    """Whether napari layers ``first`` and ``second`` (or None) are the same layer. A widget
    docked from napari's menu gets a proxy of the viewer that hands out a new proxy of a layer
    at each access: equal to the layer, but not it (with ``is``, every layer inserted anywhere
    made the widget take its scribble layer as newly chosen and set it up again)."""
    return first is second or (first is not None and second is not None and first == second)


def _class_values(metadata):
    """The class values of a scribble layer with ``metadata``: 1, 2 and every one named or
    coloured."""
    named = [int(value) for key in (CLASS_NAMES_KEY, CLASS_COLORS_KEY)
             for value in metadata.get(key, {})]
    return list(range(1, max([2, *named]) + 1))


def _class_style(metadata, segmentation=False):
    """``(features, colormap)`` of a scribble layer with ``metadata``: the class names for
    napari's status bar (a table of label value and class) and the class colours, 0 not
    drawn; with ``segmentation``, of its segmentation, where the classes named "background"
    are not drawn either, so the objects stand out over the image."""
    values = _class_values(metadata)
    names = class_names(metadata, values)
    colors = class_colors(metadata, values)
    features = pd.DataFrame({"index": [0, *values], "class": ["unlabelled", *names]})
    hidden = ["background" in name.lower() if segmentation else False for name in names]
    return features, _label_colormap([[0, 0, 0, 0]] + [
        [*color_rgb(color), 0.0 if off else 1.0] for color, off in zip(colors, hidden)])
