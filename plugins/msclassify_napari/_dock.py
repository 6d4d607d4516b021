"""The docks whose modules import the classifier (Pixel classifier, Volume, Object table), made
so that docking one as the plugin's very first action does not freeze the window.

napari builds a dock by calling the command named in ``napari.yaml`` on its GUI thread. When
that command is the widget class itself, napari first imports the widget's module, and with it
SciPy, scikit-learn, pandas and Numba: 1.8-2.7 s of the GUI thread
(``python -X importtime``), longer with the collector's full passes over all the new objects
(`_preload`). The commands here are light `LoadingDock` classes: when the module is imported
already they hold the widget at once; otherwise they say they are loading, import the module
in a worker thread (`_preload.import_quietly`: collector paused) and put the widget in
themselves when that is done (`benchmarks/bench_napari_first_dock.py --first dock`). The dock's
widget is ``dock.widget``.
"""

import sys
import threading

from qtpy.QtCore import Qt, QTimer
from qtpy.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from ._layers import repaint_next_turn
from ._preload import import_quietly

__all__ = ["LoadingDock", "ObjectTableDock", "PixelClassifierDock", "VolumeDock"]

POLL_MS = 50


class LoadingDock(QWidget):
    """A dock for ``getattr(module MODULE, NAME)(napari_viewer)`` (`widget`): built at once
    when MODULE is imported already, else after it has been imported in a worker thread (until
    then the dock says it is loading, and `widget` is None).

    `loaded` is a `threading.Event` set when the import has finished (or failed: the error is
    then shown in the dock, in one line)."""

    MODULE = NAME = None

    def __init__(self, napari_viewer, parent=None):
        super().__init__(parent)
        self.viewer = napari_viewer
        self.widget = None
        self.loaded = threading.Event()
        self._error = None
        # expanding: napari then adds no stretch under it, so the widget gets all the height
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Expanding)
        self.setLayout(QVBoxLayout())
        self.layout().setContentsMargins(0, 0, 0, 0)
        self.status = QLabel("Loading the classifier (a few seconds the first time)…")
        self.status.setWordWrap(True)
        self.status.setAlignment(Qt.AlignLeft | Qt.AlignTop)
        self.layout().addWidget(self.status)
        self._timer = QTimer(self, interval=POLL_MS)
        self._timer.timeout.connect(self._poll)
        if self.MODULE in sys.modules:                # nothing left to import
            self.loaded.set()
            self._poll()
            return
        # a plain thread: the dock may be closed first; the timer (a child) then stops too
        thread = threading.Thread(target=self._load, name=f"msclassify {self.NAME}",
                                  daemon=True)
        thread.start()
        self._timer.start()

    def _load(self):
        try:
            import_quietly(self.MODULE)
        except Exception as exc:          # shown in the dock: nothing else would see it
            self._error = exc
        self.loaded.set()

    def _poll(self):
        if not self.loaded.is_set():
            return
        self._timer.stop()
        if self._error is not None:
            self.status.setText(f"The classifier could not be loaded: {self._error} "
                                "(reinstall msclassify, then dock it again).")
            return
        # the widget built in this turn, the window's repaint in the next (`repaint_next_turn`)
        repaint_next_turn(self)
        self.widget = getattr(sys.modules[self.MODULE], self.NAME)(self.viewer)
        self.status.hide()
        self.layout().addWidget(self.widget, 1)


class PixelClassifierDock(LoadingDock):
    """The Pixel classifier dock (`_widget.PixelClassifierWidget`)."""
    MODULE, NAME = "msclassify_napari._widget", "PixelClassifierWidget"


class VolumeDock(LoadingDock):
    """The Volume dock (`_volume.VolumeWidget`)."""
    MODULE, NAME = "msclassify_napari._volume", "VolumeWidget"


class ObjectTableDock(LoadingDock):
    """The Object table and tracks dock (`_objects.ObjectTableWidget`)."""
    MODULE, NAME = "msclassify_napari._objects", "ObjectTableWidget"
