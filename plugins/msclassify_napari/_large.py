"""Large images in napari: an OME-Zarr opened as a multiscale layer, the region on screen
segmented for fast feedback, and the whole image segmented in the background into an
OME-Zarr store, with progress and ETA, never holding the image in memory.

`LargeImageJob` holds the logic (no Qt; tested without a viewer); `LargeImageWidget` is
the thin dock around it. The reader (`get_zarr_reader`) gives napari every level of an
OME-Zarr (NGFF 0.4 / 0.5) image, so it shows the coarse level when zoomed out and reads
only the chunks on screen.
"""

import queue
import threading
import time
from pathlib import Path

import numpy as np

from msclassify.io import open_image

__all__ = ["LargeImageJob", "LargeImageWidget", "get_zarr_reader", "read_ome_zarr"]


def _multiscales(path):
    import zarr

    try:
        group = zarr.open_group(str(path), mode="r")
    except Exception:
        return None, None
    attrs = group.attrs.asdict()
    multiscales = attrs.get("ome", attrs).get("multiscales")
    return group, multiscales


def get_zarr_reader(path):
    """`read_ome_zarr` for an OME-Zarr image folder, None for anything else."""
    if isinstance(path, (list, tuple)) or not Path(path).is_dir():
        return None
    _, multiscales = _multiscales(path)
    return read_ome_zarr if multiscales else None


def read_ome_zarr(path):
    """Every level of the OME-Zarr image at ``path`` as one multiscale napari image layer.

    Channels (an NGFF ``c`` axis) become ``channel_axis``; the labels written by
    ``msclassify predict`` (its ``labels/`` group) come as a multiscale labels layer.
    """
    group, multiscales = _multiscales(path)
    first = multiscales[0]
    axes = [a["name"] if isinstance(a, dict) else a for a in first["axes"]]
    levels = [group[d["path"]] for d in first["datasets"]]
    kwargs = {"name": Path(path).stem, "multiscale": len(levels) > 1,
              "metadata": {"msclassify_path": str(path)}}
    if "c" in axes:
        kwargs["channel_axis"] = axes.index("c")
    layers = [(levels if len(levels) > 1 else levels[0], kwargs, "image")]
    if "labels" in group:
        for name in group["labels"].attrs.asdict().get("ome", {}).get("labels", []):
            found, label_scales = _multiscales(Path(path) / "labels" / name)
            if label_scales:
                data = [found[d["path"]] for d in label_scales[0]["datasets"]]
                layers.append((data if len(data) > 1 else data[0],
                               {"name": name, "multiscale": len(data) > 1}, "labels"))
    return layers


class _Stopped(Exception):
    """Raised from the progress callback to stop a whole-image run (finished chunks stay)."""


class LargeImageJob:
    """One large image and one model: segment a region now, or the whole image into a store.

    Parameters
    ----------
    model : PixelClassifier
    image : str or array_like
        A path `msclassify.io.open_image` opens (OME-Zarr, zarr, ``file.h5:/path``,
        TIFF) or an array (lazy or not), ``(H, W[, C])``.

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify import PixelClassifier
    >>> image = np.eye(64)
    >>> model = PixelClassifier("fast", n_estimators=2).fit(image, image.astype(int) + 1)
    >>> job = LargeImageJob(model, image)
    >>> job.visible_region([[-40, 10], [60, 500]])      # corners on screen, clipped
    (slice(0, 61, None), slice(10, 64, None))
    """

    def __init__(self, model, image):
        self.model = model
        self.image = open_image(image) if isinstance(image, (str, Path)) else image

    def visible_region(self, corner_pixels):
        """The image region napari shows: ``layer.corner_pixels`` (level 0 data
        coordinates of the top-left and bottom-right corners, last two axes y, x),
        clipped to the image."""
        corners = np.asarray(corner_pixels)[:, -2:]
        return tuple(slice(int(max(low, 0)), int(min(high + 1, size)))
                     for low, high, size in zip(corners[0], corners[1], self.image.shape[:2]))

    def segment_region(self, region):
        """``(labels, (top, left))`` of the region: what `predict_region` gives, and where."""
        from msclassify.pixel import predict_region
        labels = predict_region(self.model, self.image, region)
        return labels, (region[0].start, region[1].start)

    def segment_whole(self, output, chunks=1024, probabilities=False, on_progress=None,
                      should_stop=None):
        """Segment every chunk into the OME-Zarr store ``output`` (resumed if it holds this
        job); ``on_progress(done, total, eta_seconds)`` after each chunk; a true
        ``should_stop()`` stops after the current chunk (the finished ones stay).

        Returns
        -------
        bool
            True if the whole image is done, False if stopped.
        """
        from msclassify.io import ChunkedLabelWriter
        from msclassify.pixel import label_dtype, predict_to_store

        classes = np.asarray(self.model.classes_)
        size = (min(chunks, self.image.shape[0]), min(chunks, self.image.shape[1]))
        writer = ChunkedLabelWriter(output, self.image.shape[:2], size, classes,
                                    dtype=label_dtype(classes),
                                    n_classes=classes.size if probabilities else None)
        total = writer.grid[0] * writer.grid[1]
        done = len(writer.completed())
        start, first = time.perf_counter(), done

        def on_chunk(index):
            nonlocal done
            done += 1
            rate = (done - first) / max(time.perf_counter() - start, 1e-9)
            if on_progress is not None:
                on_progress(done, total, (total - done) / rate)
            if should_stop is not None and should_stop() and done < total:
                raise _Stopped

        try:
            predict_to_store(self.model, self.image, writer, probabilities=probabilities,
                             on_chunk=on_chunk)
        except _Stopped:
            return False
        return True

    def segment_whole_steps(self, output, chunks=1024, probabilities=False):
        """`segment_whole` as a generator of ``(done, total, eta_seconds)``, for napari's
        ``create_worker``: closing the generator (``worker.quit()``) stops the run after
        the current chunk. The last item is ``("finished", output)``."""
        updates = queue.Queue()
        stop = threading.Event()

        def run():
            try:
                finished = self.segment_whole(output, chunks, probabilities,
                                              lambda *p: updates.put(p), stop.is_set)
                updates.put(("finished" if finished else "stopped", str(output)))
            except BaseException as exc:       # re-raised in the generator's thread
                updates.put(("error", exc))

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            while True:
                item = updates.get()
                if item[0] == "error":
                    raise item[1]
                yield item
                if item[0] in ("finished", "stopped"):
                    return
        finally:
            stop.set()
            thread.join()


def _qt_widget_base():
    from qtpy.QtWidgets import QWidget
    return QWidget


class LargeImageWidget(_qt_widget_base()):
    """Dock: segment the region on screen, or the whole image into an OME-Zarr store.

    Pick the model file and the image layer (opened from an OME-Zarr, zarr, HDF5 or TIFF
    path); "Segment visible region" shows the result as a labels layer over the view,
    "Segment whole image" runs in the background with progress and ETA and opens the
    written labels as a multiscale layer when done.
    """

    def __init__(self, napari_viewer):
        from qtpy.QtWidgets import QLabel, QLineEdit, QPushButton, QVBoxLayout

        super().__init__()
        self.viewer = napari_viewer
        self.model_path = QLineEdit(placeholderText="model file (*.msc)")
        self.output_path = QLineEdit(placeholderText="output store (*.zarr)")
        self.visible_button = QPushButton("Segment visible region")
        self.whole_button = QPushButton("Segment whole image")
        self.stop_button = QPushButton("Stop")
        self.status = QLabel("")
        layout = QVBoxLayout(self)
        for widget in (self.model_path, self.visible_button, self.output_path, self.whole_button,
                       self.stop_button, self.status):
            layout.addWidget(widget)
        self.visible_button.clicked.connect(self.segment_visible)
        self.whole_button.clicked.connect(self.segment_whole)
        self.stop_button.clicked.connect(self.stop)
        self.worker = None
        self._job = None

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
        """The `LargeImageJob` of the image layer and the model file (loaded once)."""
        from msclassify.pixel import load_pixel_model

        layer = self._image_layer()
        path = layer.metadata.get("msclassify_path") or layer.source.path
        key = (self.model_path.text(), path)
        if self._job is None or self._job[0] != key:
            self._job = (key, LargeImageJob(load_pixel_model(key[0]), path))
        return self._job[1]

    def _start(self, function, *args, returned=None, yielded=None):
        """Run ``function(*args)`` on a napari worker thread; errors go to the status line."""
        from napari.qt.threading import create_worker
        worker = create_worker(function, *args)
        for signal, slot in ((worker.returned, returned), (getattr(worker, "yielded", None),
                                                           yielded)):
            if slot is not None:
                signal.connect(slot)
        worker.errored.connect(lambda exc: self.status.setText(str(exc)))
        worker.start()
        self.worker = worker

    def _job_or_say(self):
        try:
            return self.job()
        except (ValueError, OSError) as exc:
            self.status.setText(str(exc))
            return None

    def segment_visible(self):
        job = self._job_or_say()
        if job is not None:
            self.status.setText("segmenting the visible region...")
            region = job.visible_region(self._image_layer().corner_pixels)
            self._start(job.segment_region, region, returned=self._show_region)

    def _show_region(self, result):
        labels, offset = result
        if "visible region" in self.viewer.layers:
            layer = self.viewer.layers["visible region"]
            layer.data, layer.translate = labels, offset
        else:
            self.viewer.add_labels(labels, name="visible region", translate=offset)
        self.status.setText(f"segmented {labels.shape[0]}x{labels.shape[1]} pixels at {offset}")

    def segment_whole(self):
        job = self._job_or_say()
        if job is not None:
            output = self.output_path.text() or str(
                Path(job.image.description.split(" ")[0]).with_suffix(".labels.zarr"))
            self._start(job.segment_whole_steps, output, yielded=self._progress)

    def _progress(self, item):
        if item[0] == "finished":
            self.status.setText(f"done: {item[1]}")
            for data, kwargs, kind in read_ome_zarr(Path(item[1]) / "labels" / "classes"):
                self.viewer.add_labels(data, **{k: v for k, v in kwargs.items()
                                                if k in ("name", "multiscale")})
        elif item[0] == "stopped":
            self.status.setText(f"stopped; the finished chunks are in {item[1]} (resumes)")
        else:
            done, total, eta = item
            self.status.setText(f"{done} of {total} chunks, about {eta:.0f} s left")

    def stop(self):
        if self.worker is not None:
            self.worker.quit()
