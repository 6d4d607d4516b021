"""Volumes in napari: scribble on slices of a z-stack, train a 3D model with the voxel spacing,
see the painted slice segmented at once, apply the model to the whole volume in the background.

`VolumeJob` holds the logic (no Qt; tested without a viewer); `VolumeWidget` is the thin dock
around it. The scribbles are a labels layer of the volume's shape: paint on any slice in
napari's 2D view, including the orthogonal planes napari shows after "Transpose" or after
rolling the dimensions (its axes order) - every scribbled voxel counts, whatever plane it was
painted in. A live update retrains the quick model of the pixel-classifier dock
(`ClassifierSettings.for_live_update`) and segments only the plane on screen, exactly as the
whole volume would be (`msclassify.pixel.predict_region`); "Apply to volume" segments the
volume chunk by chunk (`msclassify.pixel.predict_chunk`), each chunk shown as it is done, so
a large volume never stalls the window and a stop keeps what is done.
"""

import numpy as np

from ._controller import ClassifierSettings

__all__ = ["VolumeJob", "VolumeWidget"]

SCRIBBLES = "volume scribbles"
SEGMENTATION = "volume segmentation"
# Chunk side of "Apply to volume": a chunk's labels reach the screen as soon as it is done.
APPLY_CHUNK = 64
# Scribbled slices this far apart train on separate crops (`VolumeJob.train`).
TRAIN_SLICES = 64


class VolumeJob:
    """One volume, its scribbles and a 3D model: train, segment a plane, segment it all.

    Parameters
    ----------
    volume : array_like
        ``(Z, Y, X)`` or ``(Z, Y, X, C)``.
    spacing : tuple of 3 float
        Voxel size ``(z, y, x)`` (napari: the image layer's ``scale``).
    settings : ClassifierSettings, optional

    Examples
    --------
    >>> volume = np.zeros((6, 24, 24)); volume[:, 8:16, 8:16] = 1
    >>> scribbles = np.zeros(volume.shape, np.uint8)
    >>> scribbles[3, :2], scribbles[3, 10:14, 10:14] = 1, 2
    >>> job = VolumeJob(volume, (2, 1, 1), ClassifierSettings(features="fast", n_estimators=5))
    >>> model = job.train(scribbles, live=True)
    >>> int(job.segment_plane(0, 3)[12, 12]), int(job.segment_plane(2, 20)[3, 0])  # z 3, x 20
    (2, 1)
    """

    def __init__(self, volume, spacing, settings=None):
        self.volume = volume
        self.spacing = tuple(float(s) for s in spacing)
        self.settings = ClassifierSettings() if settings is None else settings
        self.model = None

    def train(self, scribbles, live=False):
        """Fit a volume model on the scribbles (0 = unlabelled), the quick one if ``live``.

        It trains on the slices around the scribbled ones (`msclassify.pixel.training_windows`:
        the scribbled voxels' features are those of the whole volume), so a stroke on one
        slice of a deep stack costs the features of a few slices, not of the stack.
        """
        from msclassify.pixel import training_windows
        settings = self.settings.for_live_update() if live else self.settings
        shape = np.shape(self.volume)[:3]
        frames, label_frames = training_windows(self.volume, _CopyOnRead(scribbles),
                                                settings.features,
                                                chunks=(TRAIN_SLICES,) + shape[1:],
                                                spacing=self.spacing)
        model = settings.make_classifier().set_params(spacing=self.spacing)
        self.model = model.fit(frames, label_frames)
        return self.model

    def segment_plane(self, axis, index):
        """The labels of one plane (``index`` along spatial ``axis`` 0 = z, 1 = y, 2 = x),
        equal to that plane of the whole volume's prediction."""
        from msclassify.pixel import predict_region
        region = [slice(None)] * 3
        region[axis] = slice(int(index), int(index) + 1)
        labels = predict_region(self.model, self.volume, tuple(region))
        return np.take(labels, 0, axis=axis)

    def segment_volume_steps(self, chunks=APPLY_CHUNK):
        """Segment the whole volume chunk by chunk: yields ``(done, total, chunk, labels)``
        (``chunk`` the chunk's slices); closing the generator stops after a chunk."""
        from msclassify.pixel import feature_halos, model_halo, model_plan, predict_chunk
        shape = np.shape(self.volume)[:3]
        halo = model_halo(self.model)
        plan = model_plan(self.model, shape, tuple(max(chunks, min(h, n))
                                                   for h, n in zip(halo, shape)))
        groups = feature_halos(self.model)
        for done, index in enumerate(plan, start=1):
            (labels,) = predict_chunk(self.model, self.volume, plan, index, groups=groups)
            yield done, len(plan), plan.chunk(index), labels


class _CopyOnRead:
    """``array`` read window by window as copies: the scribble layer's array, which the window's
    thread may paint into while a worker reads it (a stroke then never changes a window the
    worker is scanning; numpy refuses to count nonzero elements that change meanwhile)."""

    def __init__(self, array):
        self.array, self.shape = array, np.shape(array)

    def __getitem__(self, window):
        return np.array(self.array[window])


def _qt_widget_base():
    from qtpy.QtWidgets import QWidget
    return QWidget


class VolumeWidget(_qt_widget_base()):
    """Dock: scribble on slices of a volume, train a 3D model, segment (module docstring).

    New scribbles makes them for the last image layer of 3 or more dimensions (its last three
    axes z, y, x; a colour or channel axis last is taken as channels when the layer is
    ``rgb``; the spacing fields start at the layer's ``scale``); Train, the live update and
    Apply then work on that volume, whatever is opened after it.
    """

    def __init__(self, napari_viewer):
        from qtpy.QtWidgets import (QCheckBox, QDoubleSpinBox, QHBoxLayout, QLabel, QPushButton,
                                    QVBoxLayout)

        super().__init__()
        self.viewer = napari_viewer
        self.spacing = [QDoubleSpinBox(decimals=4, minimum=1e-4, maximum=1e6, value=1.0)
                        for _ in range(3)]
        self.new_button = QPushButton("New scribbles")
        self.train_button = QPushButton("Train")
        self.live = QCheckBox("Live update (the plane on screen)")
        self.apply_button = QPushButton("Apply to volume")
        self.stop_button = QPushButton("Stop")
        self.save_button = QPushButton("Save model…")
        self.load_button = QPushButton("Load model…")
        self.status = QLabel("")
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("voxel spacing z, y, x (from the image layer's scale)"))
        row = QHBoxLayout()
        for box in self.spacing:
            row.addWidget(box)
        layout.addLayout(row)
        for widget in (self.new_button, self.train_button, self.live, self.apply_button,
                       self.stop_button):
            layout.addWidget(widget)
        row = QHBoxLayout()
        row.addWidget(self.save_button)
        row.addWidget(self.load_button)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addStretch(1)                  # packed at the top, whatever the dock's height
        self.new_button.clicked.connect(self.new_scribbles)
        self.train_button.clicked.connect(lambda: self.train(live=False))
        self.apply_button.clicked.connect(self.apply)
        self.stop_button.clicked.connect(self.stop)
        self.save_button.clicked.connect(self._ask_save_model)
        self.load_button.clicked.connect(self._ask_load_model)
        self.settings = ClassifierSettings()     # the pixel-classifier dock's defaults
        self.job, self.worker, self._pending = None, None, False
        self._made = None                 # a segmentation layer object not inserted yet
        self._scribbled_layer = None      # the image layer New made the scribbles for

    # -- layers ------------------------------------------------------------------------------
    def _volume_layer(self):
        from napari.layers import Image
        images = [layer for layer in self.viewer.layers
                  if isinstance(layer, Image) and layer.ndim >= 3]
        if not images:
            raise ValueError("open a volume first (an image layer of 3 dimensions: z, y, x)")
        return images[-1]

    def _volume(self, layer=None):
        """``(volume, its image layer)``: ``layer``'s (by default the last one of 3 or more
        dimensions, `_volume_layer`), its first three-dimensional block."""
        layer = self._volume_layer() if layer is None else layer
        data = layer.data
        return data if layer.ndim == 3 else data[(0,) * (layer.ndim - 3)], layer

    def _scribbled(self):
        """``(volume, its image layer)`` of the scribbles: the volume New made them for."""
        if self._scribbled_layer is None or self._scribbled_layer not in self.viewer.layers:
            name = getattr(self._scribbled_layer, "name", None)
            raise ValueError("open a volume and press New scribbles" if name is None else
                             f"the volume '{name}' of the scribbles is gone: open it again, or "
                             "press New scribbles on another one")
        return self._volume(self._scribbled_layer)

    def new_scribbles(self):
        """A labels layer of the volume's shape to paint on (class 1, 2, ...; 0 = unlabelled),
        for the last volume opened (`_volume_layer`): made now, inserted by napari in the next
        turn of the event loop. The dock's scribbles before (another volume's, or this one's)
        stay, renamed ``volume scribbles (<their volume>)``; Train uses the new ones."""
        try:
            volume, layer = self._volume()
        except ValueError as exc:
            self.status.setText(str(exc))
            return None
        for box, value in zip(self.spacing, layer.scale[-3:]):
            box.setValue(float(value))
        from napari.layers import Labels

        from ._layers import in_turns
        self._set_aside()
        self._scribbled_layer = layer
        self.status.setText(f"paint classes 1, 2, ... on slices of '{layer.name}', then Train")
        # The layer object in this turn (np.zeros and napari's Labels.__init__: 10-40 ms), then
        # each in a turn of the event loop of its own, the window answering in between:
        # napari's insert, on top as `add_labels` puts it with the selection left where it is
        # (napari's switch of its layer list and controls to the new layer out of the insert's
        # turn; the window's repaint in the next turn); the scribbles selected, in paint mode
        # (its repaint in the next turn; the session's first paint mode costs napari as much
        # as a layer); the result layer, soon, not when the first plane is done (adding a
        # layer is napari's slowest step, docs/volumes.md, better now than in a live update):
        # its layer object made, then napari's insert, with the scribbles left selected.
        scribbles = Labels(np.zeros(volume.shape[:3], np.uint8), name=SCRIBBLES,
                           scale=layer.scale[-3:], metadata={"volume": layer.name})
        scribbles.events.paint.connect(self._painted)
        in_turns([lambda: self._insert_scribbles(scribbles),
                  lambda: self._start_painting(scribbles), self._make_segmentation,
                  self._add_segmentation], self, now=False)
        return scribbles

    def _set_aside(self):
        """The dock's scribbles, if any, renamed ``volume scribbles (<their volume>)``: kept,
        out of the way of new ones (their strokes no longer start live updates)."""
        layers = self.viewer.layers
        if SCRIBBLES in layers:
            volume = layers[SCRIBBLES].metadata.get("volume", "before")
            layers[SCRIBBLES].name = f"{SCRIBBLES} ({volume})"

    def _insert_scribbles(self, scribbles):
        from ._layers import insert_unselected, repaint_next_turn
        self._set_aside()                    # (New pressed twice before the first insert)
        layers = self.viewer.layers
        repaint_next_turn(self)              # napari's insert and the window's repaint: 2 turns
        insert_unselected(layers, len(layers), scribbles)

    def _start_painting(self, scribbles):
        from ._layers import repaint_next_turn
        if scribbles in self.viewer.layers:
            repaint_next_turn(self)
            self.viewer.layers.selection.active = scribbles
            if scribbles.mode == "pan_zoom":
                scribbles.mode = "paint"

    def _segmentation_kwargs(self, shape, dtype):
        """The segmentation layer's ``update_or_add_layer`` arguments (data to name)."""
        return {"layer_type": "labels", "data": np.zeros(shape, dtype), "name": SEGMENTATION,
                "scale": tuple(self._scribbled()[1].scale[-3:]), "opacity": 0.5}

    def _make_segmentation(self):
        """The segmentation layer object the next turn's `_add_segmentation` inserts, if the
        volume needs one."""
        from ._layers import make_layer
        self._made = None
        try:
            volume, _ = self._scribbled()
        except ValueError:
            return
        layers = self.viewer.layers
        if SEGMENTATION not in layers:
            self._made = make_layer(**self._segmentation_kwargs(volume.shape[:3], np.uint8))

    def _add_segmentation(self):
        made, self._made = self._made, None
        try:
            volume, _ = self._scribbled()
        except ValueError:              # the volume is gone: the layer comes with a result
            return
        self._segmentation(volume.shape[:3], np.uint8, made)

    def _segmentation(self, shape, dtype, made=None):
        """The segmentation layer, added (with ``made``, a layer object made for it before, if
        it still fits: `update_or_add_layer`) or emptied and reshaped for a volume of
        ``shape``; the selected layer (the scribbles) stays selected."""
        layers = self.viewer.layers
        # none yet, or another volume's (not written into: emptied, reshaped in place)
        if SEGMENTATION not in layers or layers[SEGMENTATION].data.shape != tuple(shape):
            from ._layers import update_or_add_layer
            layer, added = update_or_add_layer(self.viewer, parent=self, keep_selection=True,
                                               made=made, **self._segmentation_kwargs(shape,
                                                                                      dtype))
            volume = self._scribbled_layer
            if not added and volume in layers and layers.index(layer) < layers.index(volume):
                # another volume's, below the one opened since: on top again, as if added
                layers.move(layers.index(layer), len(layers))
        return self.viewer.layers[SEGMENTATION]

    def _plane_on_screen(self, layer):
        """``(axis, index)`` of the plane of image layer ``layer``'s volume that the 2D view
        shows (``axis`` the last of its three axes not displayed, z in a 3D view; ``index`` in
        the layer's own voxels: napari's slider is in world units, shared by all layers), or
        None if the view is outside the volume or the layer is gone."""
        dims = self.viewer.dims
        first = dims.ndim - 3                        # the volume: the viewer's last three axes
        axes = [a - first for a in range(first, dims.ndim) if a not in dims.displayed]
        axis = axes[-1] if axes else 0
        if layer not in self.viewer.layers:
            return None
        index = int(np.round(layer.world_to_data(dims.point)[axis - 3]))
        return (axis, index) if 0 <= index < layer.data.shape[axis - 3] else None

    # -- actions -----------------------------------------------------------------------------
    def _start(self, function, *args, returned=None, yielded=None):
        from napari.qt.threading import create_worker
        # its errors (no scribbles, one class, ...) said in the dock's status line, not raised
        # again on the window's thread (a traceback; a bare PyQt6 application aborts)
        worker = create_worker(function, *args, _ignore_errors=True)
        if returned is not None:
            worker.returned.connect(returned)
        if yielded is not None:
            worker.yielded.connect(yielded)
        worker.errored.connect(lambda exc: self.status.setText(str(exc)))
        worker.finished.connect(self._finished)
        self.worker = worker
        worker.start()

    def _finished(self):
        self.worker = None
        if self._pending:                 # paint events that came meanwhile: one more update
            self._pending = False
            self.train(live=True)

    def _painted(self, event=None):
        source = getattr(event, "source", None)       # (set-aside scribbles: not trained on)
        if not self.live.isChecked() or getattr(source, "name", SCRIBBLES) != SCRIBBLES:
            return
        if self.worker is not None:
            self._pending = True
            return
        self.train(live=True)

    def _busy(self):
        """True (and says so) while a job runs: one job at a time on this dock's model."""
        if self.worker is not None:
            self.status.setText("busy: wait for the running job, or press Stop")
        return self.worker is not None

    def train(self, live=False):
        """Train (the quick model if ``live``) on a worker thread, then segment the plane on
        screen."""
        if self._busy():
            return
        if SCRIBBLES not in self.viewer.layers:
            self.status.setText("make scribbles first (New scribbles) and paint two classes")
            return
        try:
            volume, _ = self._scribbled()
        except ValueError as exc:
            self.status.setText(str(exc))
            return
        # No copy here: the worker copies the layer's array window by window (TRAIN_SLICES
        # slices) and keeps the crops around the scribbled voxels (`VolumeJob.train`); a stroke
        # painted meanwhile queues one more update.
        scribbles = self.viewer.layers[SCRIBBLES].data
        if np.shape(scribbles) != np.shape(volume)[:3]:
            self.status.setText(f"the scribbles ({'x'.join(map(str, np.shape(scribbles)))}) "
                                f"do not fit the volume ({'x'.join(map(str, volume.shape[:3]))})"
                                ": press New scribbles")
            return
        spacing = tuple(box.value() for box in self.spacing)
        if self.job is None or self.job.volume is not volume or self.job.spacing != spacing:
            self.job = VolumeJob(volume, spacing, self.settings)
        plane = self._plane_on_screen(self._scribbled_layer)
        self.status.setText("training..." if not live else "updating...")

        def run():
            self.job.train(scribbles, live=live)
            return plane, None if plane is None else self.job.segment_plane(*plane)

        self._start(run, returned=self._show_plane)

    def _show_plane(self, result):
        plane, labels = result
        if plane is None:
            self.status.setText("trained; the view is outside the volume: show one of its "
                                "slices and paint, or Apply to volume")
            return
        axis, index = plane
        layer = self._segmentation(np.shape(self.job.volume)[:3], labels.dtype)
        key = [slice(None)] * 3
        key[axis] = index
        layer.data[tuple(key)] = labels
        layer.refresh()
        self.status.setText(f"segmented plane {index} along {'zyx'[axis]}; "
                            f"{len(self.job.model.features_used_)} features")

    def apply(self):
        """Segment the whole volume in the background, chunk by chunk."""
        if self._busy():
            return
        if self.job is None or self.job.model is None:
            self.status.setText("train first")
            return
        self._segmentation(np.shape(self.job.volume)[:3], self.job.model.classes_.dtype)
        self._start(self.job.segment_volume_steps, yielded=self._show_chunk)

    def _show_chunk(self, item):
        done, total, chunk, labels = item
        if SEGMENTATION not in self.viewer.layers:     # deleted or renamed meanwhile
            self.stop()
            self.status.setText(f"stopped: the '{SEGMENTATION}' layer is gone")
            return
        layer = self.viewer.layers[SEGMENTATION]
        layer.data[chunk] = labels
        plane = self._plane_on_screen(self._scribbled_layer)
        if done == total or plane is not None and chunk[plane[0]].start <= plane[1] < \
                chunk[plane[0]].stop:
            layer.refresh()             # only a chunk on screen changes what is shown
        self.status.setText(f"{done} of {total} chunks" + (" - done" if done == total else ""))

    def stop(self):
        if self.worker is not None:
            self.worker.quit()

    # -- the model's file --------------------------------------------------------------------
    def save_model(self, path):
        """Save the dock's volume model (``.msc``: its spacing and pyramid are in the file;
        ``msclassify predict MODEL stack.tif --axes zyx`` applies it outside napari)."""
        if self.job is None or self.job.model is None:
            self.status.setText("there is no model to save yet: train one first")
            return False
        try:
            self.job.model.save(path)
        except OSError as exc:
            self.status.setText(f"could not save the model: {exc}")
            return False
        self.status.setText(f"model saved to {path}")
        return True

    def load_model(self, path):
        """Load a volume model saved by this dock (or ``msclassify train --axes zyx``) for the
        scribbles' volume (or the last volume opened): Apply to volume segments it with the
        model, Train trains a new one on the scribbles. The spacing fields take its spacing."""
        from ._controller import load_classifier
        try:
            volume, layer = self._scribbled() if SCRIBBLES in self.viewer.layers \
                else self._volume()
            model = load_classifier(path)
        except (OSError, ValueError) as exc:          # ModelFileError is a ValueError
            self.status.setText(str(exc))
            return False
        if model.spacing is None:
            self.status.setText(f"{path} holds a 2D (per-slice) model: the Volume dock needs a "
                                "volume model (trained with a voxel spacing)")
            return False
        if self._busy():
            return False
        spacing = tuple(float(v) for v in model.spacing)
        for box, value in zip(self.spacing, spacing):
            box.setValue(value)
        self._scribbled_layer = layer
        self.job = VolumeJob(volume, spacing, self.settings)
        self.job.model = model
        scale = tuple(float(v) for v in layer.scale[-3:])
        self.status.setText(f"model loaded from {path}: Apply to volume" + (
            "" if np.allclose(scale, spacing) else f" (trained with voxel spacing {spacing}; "
            f"'{layer.name}' has scale {scale})"))
        return True

    def _ask_save_model(self):
        from qtpy.QtWidgets import QFileDialog
        path, _ = QFileDialog.getSaveFileName(self, "Save model", "volume_classifier.msc",
                                              "msclassify model (*.msc)")
        if path:
            self.save_model(path)

    def _ask_load_model(self):
        from qtpy.QtWidgets import QFileDialog
        path, _ = QFileDialog.getOpenFileName(self, "Load model", "", "msclassify model (*.msc)")
        if path:
            self.load_model(path)
