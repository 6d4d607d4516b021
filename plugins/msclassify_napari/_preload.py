"""Load the classifier's libraries and kernels in a worker thread, with the garbage collector
paused, so that docking a widget or the first Train does not freeze the window.

Importing the classifier (SciPy, scikit-learn, pandas, Numba) takes 1-5 s and the first fit
loads its Numba kernels from the disk cache. Both hold Python's GIL in long pieces, which
stalls napari's GUI thread even from a worker thread. Most of the longest pieces are not the
imports themselves but the cyclic garbage collector: the imports create hundreds of thousands
of objects, and each full collection walks all of them (0.1-0.6 s each, GIL held, on a busy
2-core machine). `preload_classifier` therefore pauses the collector while it imports and fits,
then freezes what it loaded (`gc.freeze`: those long-lived objects are left out of later
collections, so napari's own collections get shorter too) and turns the collector back on.

Measured with a 2 ms timer on the main thread while a thread imported ``msclassify.pixel``
and fit a tiny model (load 8, 2 cores): longest gap 0.57-0.65 s with the collector on,
0.05-0.08 s with it paused.
"""

import contextlib
import gc
import importlib
import sys
import threading

__all__ = ["import_quietly", "preload_classifier", "preload_in_background", "preloaded"]

# The longest the collector stays paused (a warm load takes 1-5 s).
GC_PAUSE_LIMIT_S = 30.0
# Seconds from a dock's build (or its last layer step), or from the end of an open's turn, to
# the start of the load: it shares the GIL and the cores with the GUI thread's work.
PRELOAD_DELAY_S = 1.0

_lock = threading.Lock()
_loaded = []


def preload_in_background(delay=0.0, after_this_turn=False):
    """Start `preload_classifier` in a daemon thread after ``delay`` seconds (a plain thread:
    no Qt object can be deleted under it when the window closes first); nothing when it has
    run already. A delay lets the GUI thread finish what it is doing first (the thread shares
    the GIL and the cores with it).

    ``after_this_turn``: called on the GUI thread of a running Qt application, the delay counts
    from the end of the event loop's current turn (a 0 ms `QTimer`), not from now. napari
    calls a reader and adds its layers in one turn, which lasts seconds on a busy machine:
    a delay counted from the reader's start let the load begin inside that turn.
    """
    if _loaded:
        return
    if after_this_turn and _on_the_gui_thread():
        from qtpy.QtCore import QTimer
        QTimer.singleShot(0, lambda: preload_in_background(delay))
        return
    timer = threading.Timer(delay, preload_classifier)
    timer.name, timer.daemon = "msclassify preload", True
    timer.start()


def _on_the_gui_thread():
    """True when called on the thread of a running Qt application (qtpy imported already:
    napari's window; nothing here imports Qt)."""
    widgets = sys.modules.get("qtpy.QtWidgets")
    app = widgets.QApplication.instance() if widgets is not None else None
    if app is None:
        return False
    from qtpy.QtCore import QThread
    return app.thread() is QThread.currentThread()


def preloaded():
    """The feature presets' names once `preload_classifier` has run, else None."""
    return _loaded[0] if _loaded else None


def preload_classifier():
    """Import the classifier and load the kernels a first fit and prediction use, once per
    process (later calls return at once; a call while another thread loads waits for it).

    Call it in a worker thread. Returns the names of the feature presets.

    Examples
    --------
    >>> presets = preload_classifier()
    >>> "default" in presets
    True
    """
    with _lock:
        if not _loaded:
            with _collector_paused():
                _fit_tiny()
            from msclassify.features import PRESETS
            _loaded.append(list(PRESETS))
        return _loaded[0]


def import_quietly(name):
    """`preload_classifier`, then import module ``name`` the same way (collector paused, what
    it loaded frozen); returns the module. Call it in a worker thread (`_dock`: a dock's own
    module, e.g. the object dock's, imports more than the classifier).

    Examples
    --------
    >>> import_quietly("msclassify_napari._controller").__name__
    'msclassify_napari._controller'
    """
    preload_classifier()
    with _lock, _collector_paused():
        return importlib.import_module(name)


@contextlib.contextmanager
def _collector_paused():
    """The cyclic collector off (for GC_PAUSE_LIMIT_S at most: a cold Numba cache compiles for
    minutes, and memory in cycles must not pile up that long), then what was loaded frozen."""
    enabled = gc.isenabled()
    gc.disable()
    if enabled:
        watchdog = threading.Timer(GC_PAUSE_LIMIT_S, gc.enable)
        watchdog.daemon = True
        watchdog.start()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            watchdog.cancel()
            gc.enable()


def _fit_tiny():
    """A 2-tree model on a tiny synthetic image: loads the feature, training and prediction
    kernels from Numba's cache (`python -m msclassify._warmup` writes it)."""
    import numpy as np

    from msclassify.pixel import PixelClassifier

    image = np.random.default_rng(0).random((96, 96)).astype(np.float32)
    labels = np.zeros(image.shape, np.uint8)
    # two dots far apart: scribbled sparsely, so the default teacher's forest (scikit-learn's,
    # `teacher="blend"`) is imported and fitted here too, not in the first Train's worker
    # (an import holds the GIL: the window stalled 0.11-0.18 s in the Volume dock's Train)
    labels[2:6, 2:6], labels[-6:-2, -6:-2] = 1, 2
    model = PixelClassifier(features="default", n_estimators=2, random_state=0)
    model.fit(image, labels).predict_proba(image)
    # the widgets' modules that the GUI thread imports when the first progress comes
    from . import _controller, _widget  # noqa: F401
