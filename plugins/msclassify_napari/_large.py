"""Large images in napari: an OME-Zarr opened as a multiscale layer, scribbled on and trained
on around the scribbles only, the region on screen segmented for fast feedback, and the whole
image segmented in the background into an OME-Zarr store, with progress and ETA, never holding
the image in memory.

`LargeImageJob` holds the logic (no Qt; tested without a viewer); `LargeImageWidget` is
the thin dock around it. The reader (`_zarr_reader`) gives napari every level of an
OME-Zarr (NGFF 0.4 / 0.5) image, so it shows the coarse level when zoomed out and reads
only the chunks on screen. napari does not paint on multiscale layers, so the scribbles
live in a `TiledLabels` of the image's size (only painted tiles are stored) and napari
paints in a window of it over the region on screen ("Scribble here").
"""

import time
from pathlib import Path

import numpy as np
from qtpy.QtCore import QEvent, Signal

from msclassify.io import open_image
from msclassify.pixel import BACKGROUND_NICE, run_at_lower_priority

from ._layers import in_turns, make_layer, update_or_add_layer
from ._tiled_labels import TiledLabels
from ._zarr_reader import read_ome_zarr

__all__ = ["LargeImageJob", "LargeImageWidget"]

# The longest side of a region napari paints in or "Segment visible region" predicts: the
# centre of the view when more is on screen (a Labels layer of 2048² redraws in ~0.1 s).
REGION_SIDE = 2048


class _Stopped(Exception):
    """Raised from the progress callback to stop a whole-image run (finished chunks stay)."""


class LargeImageJob:
    """One large image, its scribbles and its model: train around the scribbles, segment a
    region now, or the whole image into a store.

    Parameters
    ----------
    model : PixelClassifier or None
        None until one is trained (`train`) or given.
    image : str or array_like
        A path `msclassify.io.open_image` opens (OME-Zarr, zarr, ``file.h5:/path``,
        TIFF) or an array (lazy or not), ``(H, W[, C])``.

    Attributes
    ----------
    scribbles : TiledLabels
        The image's scribbles (0 unlabelled, 1, 2, ... classes), stored per painted tile.

    Examples
    --------
    >>> import numpy as np
    >>> image = np.eye(64)
    >>> job = LargeImageJob(None, image)
    >>> job.scribbles[0, :] = 1; job.scribbles[5:9, 5:9] = 2
    >>> model = job.train("fast", n_estimators=2)
    >>> job.visible_region([[-40, 10], [60, 500]])      # corners on screen, clipped
    (slice(0, 61, None), slice(10, 64, None))
    >>> job.visible_region([[9.7, 9.4], [20.7, 20.2]])  # the pixels whose centres are nearest
    (slice(10, 22, None), slice(9, 21, None))
    """

    def __init__(self, model, image):
        self.model = model
        self.image = open_image(image) if isinstance(image, (str, Path)) else image
        self.scribbles = TiledLabels(self.image.shape[:2])

    def visible_region(self, corners, max_side=None):
        """The image region between ``corners`` (level-0 data coordinates of the top-left and
        bottom-right pixels on screen, last two axes y, x), clipped to the image and, with
        ``max_side``, to that many pixels a side around the centre."""
        corners = np.asarray(corners, float)[:, -2:]
        region = []
        for low, high, size in zip(corners[0], corners[1], self.image.shape[:2]):
            # pixel i covers [i - 0.5, i + 0.5) in napari's data coordinates
            low, high = int(max(np.floor(low + 0.5), 0)), int(min(np.floor(high + 0.5) + 1, size))
            if max_side is not None and high - low > max_side:
                low = min(max((low + high - max_side) // 2, 0), size - max_side)
                high = low + max_side
            region.append(slice(low, max(high, low)))
        return tuple(region)

    def train(self, features="default", progress=None, **params):
        """Fit a `PixelClassifier` on crops around the scribbles (`training_windows`), make it
        this job's model and return it. ``params`` go to `PixelClassifier`
        (``random_state`` 0 unless given); ``progress`` to its ``fit``."""
        from msclassify import PixelClassifier
        from msclassify.pixel import training_windows

        frames, labels = training_windows(self.image, self.scribbles.copy(), features)
        model = PixelClassifier(features, **{"random_state": 0, **params})
        self.model = model.fit(frames, labels, progress=progress)
        return self.model

    def _model(self):
        if self.model is None:
            raise ValueError("there is no model yet: scribble and press Train, or load a "
                             "model file (*.msc)")
        return self.model

    def segment_region(self, region):
        """``(labels, (top, left))`` of the region: what `predict_region` gives, and where."""
        from msclassify.pixel import predict_region
        labels = predict_region(self._model(), self.image, region)
        return labels, (region[0].start, region[1].start)

    def segment_whole(self, output, chunks=1024, probabilities=False, model_file=None,
                      on_progress=None, should_stop=None, nice=0):
        """Segment every chunk into the OME-Zarr store ``output`` (resumed if it holds this
        job); ``on_progress(done, total)`` after each chunk; a true ``should_stop()`` stops
        after the current chunk (the finished ones stay). With ``model_file`` (the model
        saved) and a lazy image, the store records what made it and refuses to be resumed
        by another model or image. With ``nice`` > 0 the run and its threads run that many
        steps lower in CPU priority (`run_at_lower_priority`; the dock: `BACKGROUND_NICE`).

        Returns
        -------
        bool
            True if the whole image is done, False if stopped.
        """
        from msclassify.io import ChunkedLabelWriter
        from msclassify.pixel import label_dtype, large_provenance, predict_to_store

        model = self._model()
        classes = np.asarray(model.classes_)
        size = (min(chunks, self.image.shape[0]), min(chunks, self.image.shape[1]))
        provenance = None
        if model_file is not None and hasattr(self.image, "identity"):
            provenance = large_provenance(model_file, self.image, size, probabilities)
        writer = ChunkedLabelWriter(output, self.image.shape[:2], size, classes,
                                    dtype=label_dtype(classes),
                                    n_classes=classes.size if probabilities else None,
                                    provenance=provenance)
        total = writer.grid[0] * writer.grid[1]
        done = len(writer.completed())

        def on_chunk(index):
            nonlocal done
            done += 1
            if on_progress is not None:
                on_progress(done, total)
            if should_stop is not None and should_stop() and done < total:
                raise _Stopped

        def run():
            predict_to_store(model, self.image, writer, probabilities=probabilities,
                             on_chunk=on_chunk)

        try:
            run_at_lower_priority(run, nice) if nice > 0 else run()
        except _Stopped:
            return False
        return True


def _qt_widget_base():
    from qtpy.QtWidgets import QWidget
    return QWidget


def _train_loaded(job, features, progress):
    """`LargeImageJob.train` once the classifier is loaded (a worker's function)."""
    from ._preload import preload_classifier
    preload_classifier()
    return job.train(features, progress=progress)


class LargeImageWidget(_qt_widget_base()):
    """Dock: scribble on a large image, train around the scribbles, segment the region on
    screen, or the whole image into an OME-Zarr store.

    Choose the image layer (opened from an OME-Zarr, zarr, HDF5 or TIFF path), press
    "Scribble here" and paint (classes 1, 2, ...) in the region on screen, press Train
    (or give a model file); "Segment visible region" shows the result as a labels layer
    over the view, "Segment whole image" runs in the background with progress and ETA
    and opens the written labels as a multiscale layer when done. Everything that reads
    or computes runs in napari worker threads.
    """

    # emitted from worker threads, handled on the GUI thread (queued)
    chunk_done = Signal(int, int)
    training_progressed = Signal(object)
    # the GUI thread finished showing a result / a model / a whole-image run
    region_shown = Signal()
    trained = Signal()
    whole_finished = Signal(str)

    def __init__(self, napari_viewer):
        from qtpy.QtWidgets import (QComboBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit,
                                    QProgressBar, QPushButton, QSpinBox, QVBoxLayout)

        from qtpy.QtCore import QTimer

        from ._preload import PRELOAD_DELAY_S, preload_in_background

        super().__init__()
        self.viewer = napari_viewer
        self.scribble_button = QPushButton("Scribble here")
        self.scribble_button.setToolTip(
            "Paint scribbles over the region on screen (at most "
            f"{REGION_SIDE}x{REGION_SIDE} full-resolution pixels); press again after moving "
            "the view to scribble elsewhere. Every scribble is kept.")
        self.class_spin = QSpinBox(minimum=1, maximum=255, value=1)
        self.class_spin.setToolTip("The class the brush paints (1, 2, ...; 0 erases)")
        self.features_combo = QComboBox()
        self.features_combo.addItem("default")   # the other presets once the classifier is loaded
        self.features_combo.setEnabled(False)
        self.features_combo.setToolTip("loading the classifier…")
        self.train_button = QPushButton("Train")
        self.model_path = QLineEdit(placeholderText="or a model file (*.msc)")
        self.output_path = QLineEdit(placeholderText="output store (*.zarr)")
        self.visible_button = QPushButton("Segment visible region")
        self.whole_button = QPushButton("Segment whole image")
        self.stop_button = QPushButton("Stop", enabled=False)
        self.progress = QProgressBar(textVisible=True)
        self.status = QLabel("", wordWrap=True)
        layout = QVBoxLayout(self)
        form = QFormLayout()
        scribble_row = QHBoxLayout()
        scribble_row.addWidget(self.scribble_button)
        scribble_row.addWidget(QLabel("class"))
        scribble_row.addWidget(self.class_spin)
        form.addRow(scribble_row)
        train_row = QHBoxLayout()
        train_row.addWidget(self.train_button)
        train_row.addWidget(QLabel("features"))
        train_row.addWidget(self.features_combo)
        form.addRow(train_row)
        form.addRow("Model", self.model_path)
        layout.addLayout(form)
        for widget in (self.visible_button, self.output_path, self.whole_button,
                       self.stop_button, self.progress, self.status):
            layout.addWidget(widget)
        layout.addStretch(1)
        self.scribble_button.clicked.connect(self.scribble_here)
        self.class_spin.valueChanged.connect(self._select_class)
        self.train_button.clicked.connect(self.train)
        self.visible_button.clicked.connect(self.segment_visible)
        self.whole_button.clicked.connect(self.segment_whole)
        self.stop_button.clicked.connect(self.stop)
        self.chunk_done.connect(self._on_chunk)
        self.training_progressed.connect(self._on_training_progress)
        self.worker = None
        self._jobs = {}             # image path -> LargeImageJob
        self._file_given = {}       # image path -> the model file text its job was given
        self._model_file = None     # (path text, model) last loaded
        self._stop_requested = False
        self._started = self._progress_drawn = 0.0
        # the classifier's libraries and kernels load in a thread (`preload_classifier`), not
        # on docking: importing them on the GUI thread froze the window 1.25 s (quiet box);
        # and once napari has docked the widget: started at once, the load shared the GIL
        # with the dock's turn
        preload_in_background(delay=PRELOAD_DELAY_S, after_this_turn=True)
        self._presets_timer = QTimer(self, interval=100)
        self._presets_timer.timeout.connect(self._add_presets)
        self._presets_timer.start()

    def _add_presets(self):
        """Fill the features box once the classifier is loaded."""
        from ._preload import preloaded
        presets = preloaded()
        if presets is None:
            return
        self._presets_timer.stop()
        self.features_combo.addItems([name for name in presets if name != "default"])
        self.features_combo.setEnabled(True)
        self.features_combo.setToolTip("The image features the model may use")

    # -- the image, its job and its layers ------------------------------------------------------

    def _image_layer(self):
        from napari.layers import Image
        layer = self.viewer.layers.selection.active
        if isinstance(layer, Image):
            return layer
        images = [layer for layer in self.viewer.layers if isinstance(layer, Image)]
        if not images:
            raise ValueError("open a large image first (File > Open: an OME-Zarr folder)")
        return images[-1]

    def job(self):
        """The `LargeImageJob` of the image layer; its model is the one trained here, or the
        model file's when one is given (loaded once)."""
        path = self._image_path()
        job = self._jobs.get(path)
        if job is None:
            job = self._jobs[path] = LargeImageJob(None, path)
        model_text = self.model_path.text().strip()
        if model_text and self._file_given.get(path) != model_text:
            if self._model_file is None or self._model_file[0] != model_text:
                from msclassify.pixel import load_pixel_model
                self._model_file = (model_text, load_pixel_model(model_text))
            job.model = self._model_file[1]         # every image gets the file's model once
            self._file_given[path] = model_text
        return job

    def _image_path(self):
        """The file the selected large image was opened from."""
        layer = self._image_layer()
        path = layer.metadata.get("msclassify_path") or layer.source.path
        if path is None:
            raise ValueError(f"{layer.name} was not opened from a file: open the large image "
                             "with File > Open (an OME-Zarr folder, zarr, HDF5 or TIFF)")
        return path

    def _scribble_name(self, image=None):
        return f"{(self._image_layer() if image is None else image).name} scribbles"

    @staticmethod
    def _placement(offset, image):
        """The ``scale`` and ``translate`` that put a layer of level-0 pixels of ``image`` at
        ``offset`` over that image layer."""
        scale = np.asarray(image.scale)[-2:]
        return {"scale": scale,
                "translate": np.asarray(image.translate)[-2:] + np.asarray(offset) * scale}

    def view_corners(self):
        """Level-0 data coordinates of the top-left and bottom-right of the canvas."""
        image = self._image_layer()
        center = np.asarray(self.viewer.scene.camera.center)[-2:]
        half = np.asarray(self.viewer.canvas.size) / 2 / self.viewer.scene.camera.zoom
        corners = [center - half, center + half]
        return np.array([np.asarray(image.world_to_data(c))[-2:] for c in corners])

    def _region_or_say(self):
        job = self._job_or_say()
        if job is None:
            return None, None
        region = job.visible_region(self.view_corners(), REGION_SIDE)
        if any(r.stop <= r.start for r in region):
            self.status.setText("the image is not on screen: move the view over it")
            return None, None
        return job, region

    def scribble_here(self):
        """A Labels layer over the region on screen that paints into the image's scribbles."""
        job, region = self._region_or_say()
        if job is None:
            return
        window = job.scribbles.window(region)
        image = self._image_layer()
        name = self._scribble_name(image)
        placement = self._placement(window.origin, image)     # placed as it is made
        if name in self.viewer.layers:
            layer, _ = update_or_add_layer(self.viewer, "labels", window, name, **placement)
            layer.selected_label = self.class_spin.value()
            self._paint_on(name)
        else:
            # the layer object, napari's insert, its first brush (cursor, overlays): a turn
            # each, the window drawn in between
            made = []
            in_turns([lambda: made.append(make_layer("labels", window, name, **placement)),
                      lambda: self._add_scribbles(window, name, placement, made[0]),
                      lambda: self._paint_on(name)], self)
        self.status.setText(f"scribble on rows {region[0].start}–{region[0].stop}, columns "
                            f"{region[1].start}–{region[1].stop}; class "
                            f"{self.class_spin.value()} (change it above)")

    def _add_scribbles(self, window, name, placement, made):
        layer, _ = update_or_add_layer(self.viewer, "labels", window, name, parent=self,
                                       made=made, **placement)
        layer.brush_size = 8
        layer.selected_label = self.class_spin.value()

    def _paint_on(self, name):
        if name in self.viewer.layers:
            layer = self.viewer.layers[name]
            # (the window's repaint is not held to the next turn here: that repaint of the
            # whole window cost more than this turn's own, bench_napari_open --scribble)
            self.viewer.layers.selection.active = layer
            layer.mode = "paint"

    def _select_class(self, value):
        if self._scribble_name() in self.viewer.layers:
            self.viewer.layers[self._scribble_name()].selected_label = value

    # -- workers: the plugin's shared machinery -------------------------------------------------

    def _start(self, function, *args, returned=None, stoppable=False, **kwargs):
        """Run ``function(*args, **kwargs)`` on a napari worker thread; errors are told with
        `notify_error`. Stop is enabled only for a ``stoppable`` run (the whole image)."""
        from napari.qt.threading import create_worker

        from ._notify import notify_error

        worker = create_worker(function, *args, **kwargs, _ignore_errors=True)
        if returned is not None:
            worker.returned.connect(returned)
        worker.errored.connect(lambda exc: notify_error(exc, self.status))
        worker.finished.connect(self._on_finished)
        self._set_running(True, stoppable)
        self._started = time.perf_counter()
        self.worker = worker
        worker.start()
        return worker

    def _set_running(self, running, stoppable=False):
        for button in (self.train_button, self.visible_button, self.whole_button):
            button.setEnabled(not running)
        self.stop_button.setEnabled(running and stoppable)

    def _on_finished(self):
        self.worker = None
        self._set_running(False)

    def _job_or_say(self):
        from ._notify import USER_ERRORS, notify_error
        try:
            return self.job()
        except USER_ERRORS as exc:
            notify_error(exc, self.status)
            return None

    # -- train ------------------------------------------------------------------------------------

    def train(self):
        """Fit a model on the scribbles (crops around them only) in a worker thread."""
        from ._notify import notify_error
        job = self._job_or_say()
        if job is None:
            return None
        if not job.scribbles.stored_tiles():
            notify_error(ValueError("there are no scribbles yet: press 'Scribble here' and "
                                    "paint classes 1 and 2"), self.status)
            return None
        self.model_path.clear()                  # the trained model replaces a file's
        self._model_file = None
        self._file_given.pop(self._image_path(), None)
        self.status.setText("training on the scribbled regions…")
        return self._start(_train_loaded, job, self.features_combo.currentText(),
                           progress=self.training_progressed.emit, returned=self._on_trained)

    def _on_training_progress(self, report):
        from ._controller import training_status
        from ._widget import PROGRESS_INTERVAL_S, set_progress
        now = time.perf_counter()       # at most every PROGRESS_INTERVAL_S: a repaint each
        if report.fraction < 1 and now - self._progress_drawn < PROGRESS_INTERVAL_S:
            return
        self._progress_drawn = now
        set_progress(self.progress, round(1000 * report.fraction), 1000,
                     f"training: {report.fraction:.0%}")
        if report.stage != "done":
            self.status.setText(f"training: {training_status(report)}")

    def _on_trained(self, model):
        seconds = time.perf_counter() - self._started
        self.status.setText(f"trained in {seconds:.1f} s: {model.booster_.n_trees} trees, "
                            f"{len(model.features_used_)} features; press Segment visible "
                            "region")
        self.trained.emit()

    # -- segment ----------------------------------------------------------------------------------

    def segment_visible(self):
        job, region = self._region_or_say()
        if job is not None:
            self.status.setText("segmenting the visible region…")
            image = self._image_layer()          # the image computed on, whatever is selected later
            return self._start(job.segment_region, region,
                               returned=lambda result: self._show_region(result, image))
        return None

    def _gone(self, image):
        """True (and says so) if ``image`` was closed while a job ran on it."""
        if image in self.viewer.layers:
            return False
        self.status.setText(f"{image.name} was closed while it was segmented: nothing to show")
        return True

    def _show_region(self, result, image):
        if self._gone(image):
            return
        labels, offset = result

        def shown():
            self.status.setText(f"segmented {labels.shape[0]}x{labels.shape[1]} pixels at "
                                f"{offset} in {time.perf_counter() - self._started:.1f} s")
            self.region_shown.emit()

        self._show_under_scribbles(labels, "visible region", image, offset, shown)

    def _show_under_scribbles(self, data, name, image, offset, then, **kwargs):
        """Show labels ``data`` (level-0 pixels of ``image`` from ``offset``; a multiscale
        list with ``multiscale=True``) in the layer ``name``, in place if there is one; else
        in a new layer right under the image's scribbles, which stay selected so that
        painting goes on: the layer object made in this turn, napari's insert in the next
        (a single-scale layer; a turn each, the window drawn in between). Then ``then()``."""
        placement = self._placement(offset, image)
        kwargs = {"opacity": 0.5, **placement, **kwargs}
        if name in self.viewer.layers:
            update_or_add_layer(self.viewer, "labels", data, name, **kwargs)
            then()
            return
        made = []

        def insert():
            if self._gone(image):
                return
            layers = self.viewer.layers
            scribbles = self._scribble_name(image)
            below = layers[layers.index(scribbles) - 1] if scribbles in layers else image
            update_or_add_layer(self.viewer, "labels", data, name, parent=self, above=below,
                                keep_selection=True, made=made[0] if made else None, **kwargs)
            then()

        steps = [insert]
        if not kwargs.get("multiscale"):
            steps.insert(0, lambda: made.append(make_layer("labels", data, name, **kwargs)))
        in_turns(steps, self)

    def segment_whole(self):
        """Segment every chunk into the output store in a worker thread (resumes a store of
        the same model and image); the model is saved beside the store when it was trained
        here."""
        from ._notify import USER_ERRORS, notify_error
        from ._widget import set_progress
        job = self._job_or_say()
        if job is None:
            return None
        image = self._image_layer()
        try:
            model = job._model()
            output = Path(self.output_path.text()
                          or Path(self._image_path()).with_suffix(".labels.zarr"))
            from_file = self._model_file is not None and model is self._model_file[1]
            model_file = self._model_file[0] if from_file else \
                output.with_name(output.name.removesuffix(".zarr") + ".msc")
            if not from_file:      # trained here: saved beside the store (same model, same file)
                model.save(model_file)
        except USER_ERRORS as exc:
            notify_error(exc, self.status)
            return None
        self._stop_requested = False
        self._whole_first = None
        set_progress(self.progress, 0, 1, "segmenting the whole image: %v / %m chunks")
        self.status.setText(f"segmenting the whole image into {output}…")
        return self._start(job.segment_whole, output, model_file=model_file,
                           on_progress=self.chunk_done.emit, nice=BACKGROUND_NICE,
                           should_stop=lambda: self._stop_requested, stoppable=True,
                           returned=lambda done: self._whole_done(done, str(output), image))

    def _on_chunk(self, done, total):
        from ._controller import eta_text
        from ._widget import set_progress
        if self._whole_first is None:            # chunks of an earlier run: not in the ETA
            self._whole_first = done - 1
        first = self._whole_first
        eta = eta_text(done - first, total - first, time.perf_counter() - self._started)
        set_progress(self.progress, done, total, f"%v / %m chunks, {eta}")

    def _whole_done(self, finished, output, image):
        if not finished:
            self.status.setText(f"stopped; the finished chunks are in {output} (Segment "
                                "whole image resumes)")
            return
        self.status.setText(f"done: {output}")
        if self._gone(image):
            return
        for data, kwargs, _ in read_ome_zarr(Path(output) / "labels" / "classes"):
            # an earlier run's layer (resumed) is updated in place, not removed and re-added
            self._show_under_scribbles(data, f"{Path(output).name} classes", image, (0, 0),
                                       lambda: self.whole_finished.emit(output),
                                       multiscale=kwargs["multiscale"])

    def stop(self):
        """Stop the whole-image run after the current chunk (the finished chunks stay)."""
        self._stop_requested = True

    def event(self, event):
        """Closing the dock (napari takes it out of its window) stops a whole-image run: its
        progress and Stop button are gone with it. Docking it again and pressing Segment
        whole image resumes."""
        if event.type() == QEvent.Type.ParentChange and self.parent() is None \
                and self.worker is not None:
            self.stop()
        return super().event(event)
