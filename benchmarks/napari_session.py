"""Driving and timing the napari window as a user meets it: real mouse strokes on the canvas,
repaints of the canvas, and the event loop's longest stall.

Shared by ``benchmarks/bench_napari.py`` (numbers) and ``tests/test_napari_plugin.py``
(bounds); needs a running QApplication with a napari viewer shown (Xvfb is enough).

* `EventLoopMonitor` ticks a 10 ms QTimer and reports the longest gap between
  ticks: how long the GUI thread was busy with something else (a stall).
* `stroke` sends Qt mouse press / move / release events along data points to the
  canvas, the way a brush stroke arrives from a real mouse.
* `CanvasPaints` records when the canvas widget's paints start and end.
* `bare_repaint_stall` is the stall of one repaint of the canvas alone: the floor of
  every stall on this machine.
* `cpu_slowdown` measures how much slower CPU work runs now than alone on a core.
* `settle` lets the event loop run for ``n`` rounds of 10 ms.
* `fly_stack_window` opens the window ``bench_napari_adds.py`` and ``study_dock_turns.py`` time;
  `second_image` shows a second image there, chosen in the Pixel classifier dock, for a New.
"""

import time
from contextlib import contextmanager

import numpy as np
from qtpy.QtCore import QEvent, QObject, QPoint, QPointF, Qt, QTimer
from qtpy.QtGui import QMouseEvent
from qtpy.QtWidgets import QApplication

__all__ = ["CanvasPaints", "EventLoopMonitor", "bare_repaint_stall", "canvas_position",
           "fly_stack_window",
           "canvas_widget", "cpu_slowdown", "move", "press", "release", "second_image", "settle",
           "stroke", "wait_until"]

TICK_MS = 10


class EventLoopMonitor:
    """A 10 ms timer on the GUI thread; `longest_gap` is the longest wait between its ticks.

    With nothing else to do the gaps are ~10 ms; anything the GUI thread does
    in between (layer updates, imports, slicing) lengthens one gap. A window opened by
    `mark` starts at the mark itself, not at the tick before it: what the test or
    benchmark did on the GUI thread just before (its own measurements, printing) is not
    the window's stall, while whatever the marked action runs at once is. `turns` also gives
    the GUI thread's CPU time in each long gap (``time.thread_time``): on a busy machine a
    gap's wall time is mostly waiting for a core, its CPU time is the work done in it.
    """

    def __init__(self):
        self.ticks = []
        self.cpu = []                     # time.thread_time() at each tick
        self._timer = QTimer()
        self._timer.setTimerType(Qt.PreciseTimer)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)
        self._start = 0
        self._marked_at = []
        self._marked_cpu = []
        self._timer.start()

    def _tick(self):
        self.ticks.append(time.perf_counter())
        self.cpu.append(time.thread_time())

    def mark(self):
        """Start a new measuring window, now."""
        self._start = len(self.ticks)
        self._marked_at = [time.perf_counter()]
        self._marked_cpu = [time.thread_time()]

    def turns(self, longer_than=0.025):
        """``(wall, cpu)`` seconds of each gap since `mark` longer than ``longer_than`` (wall),
        in order: the event loop's long turns and the GUI thread's CPU time in each."""
        n = len(self.ticks)
        wall = np.diff(self._marked_at + self.ticks[self._start:n])
        cpu = np.diff(self._marked_cpu + self.cpu[self._start:n])
        return [(float(w), float(c)) for w, c in zip(wall, cpu) if w > longer_than]

    def longest_gap(self):
        """Longest interval between ticks since `mark` (seconds; the first from the mark
        itself), and when it ended."""
        ticks = np.array(self._marked_at + self.ticks[self._start:])
        if ticks.size < 2:
            return float("nan"), float("nan")
        gaps = np.diff(ticks)
        worst = int(np.argmax(gaps))
        return float(gaps[worst]), float(ticks[worst + 1])

    def stop(self):
        self._timer.stop()


def settle(app, n=20):
    """Process ``app``'s events ``n`` times, 10 ms apart: the window draws what is pending."""
    for _ in range(n):
        app.processEvents()
        time.sleep(0.01)


def wait_until(condition, timeout=900.0):
    """Process events until ``condition()`` is true (the test/benchmark's own waiting loop)."""
    app = QApplication.instance()
    start = time.perf_counter()
    while not condition():
        app.processEvents()
        time.sleep(0.001)
        if time.perf_counter() - start > timeout:
            raise TimeoutError("the widget did not finish in time")


def canvas_widget(viewer):
    """The Qt widget of the viewer's canvas (where mouse events go)."""
    return viewer.window._qt_viewer.canvas.native


def canvas_position(viewer, point):
    """Canvas pixel (x, y) of data point ``(..., y, x)`` of a 2-D view at scale 1."""
    widget = canvas_widget(viewer)
    center = np.asarray(viewer.scene.camera.center)[-2:]
    zoom = viewer.scene.camera.zoom
    y, x = (np.asarray(point[-2:], float) - center) * zoom \
        + np.array([widget.height(), widget.width()]) / 2
    return QPoint(int(round(x)), int(round(y)))


def _send(widget, kind, position, buttons):
    button = Qt.LeftButton if kind != QEvent.MouseMove else Qt.NoButton
    event = QMouseEvent(kind, QPointF(position), button, buttons, Qt.NoModifier)
    QApplication.sendEvent(widget, event)


def press(widget, position):
    """Left button pressed at canvas pixel ``position`` (a QPoint)."""
    _send(widget, QEvent.MouseButtonPress, position, Qt.LeftButton)


def move(widget, position):
    """The mouse moved to ``position`` with the left button held."""
    _send(widget, QEvent.MouseMove, position, Qt.LeftButton)


def release(widget, position):
    _send(widget, QEvent.MouseButtonRelease, position, Qt.NoButton)


def stroke(viewer, points):
    """A left-button drag through data points ``[(y, x), ...]``: press, moves, release.

    Returns the time (perf_counter) right before the release event was sent (napari ends
    the stroke, and the widget starts its live update, while handling it).
    """
    app = QApplication.instance()
    widget = canvas_widget(viewer)
    positions = [canvas_position(viewer, point) for point in points]
    press(widget, positions[0])
    for position in positions[1:]:
        app.processEvents()                      # a hand moves between events
        move(widget, position)
    app.processEvents()
    released = time.perf_counter()
    release(widget, positions[-1])
    return released


class CanvasPaints(QObject):
    """Records the start and end time of every paint of the canvas widget (``spans``).

    The paint event is handled here, inside the event filter, so that its end is
    known; the canvas draws exactly as it would without the filter.
    """

    def __init__(self, viewer):
        super().__init__()
        self.spans = []
        self._widget = canvas_widget(viewer)
        self._widget.installEventFilter(self)

    def eventFilter(self, watched, event):
        if watched is not self._widget or event.type() != QEvent.Paint:
            return False
        start = time.perf_counter()
        watched.event(event)
        self.spans.append((start, time.perf_counter()))
        return True

    def first_after(self, moment):
        """``(start, end)`` of the first paint that started after ``moment``, or None."""
        return next((span for span in self.spans if span[0] > moment), None)

    def remove(self):
        self._widget.removeEventFilter(self)


def bare_repaint_stall(viewer, monitor):
    """The longest stall of `monitor` while the canvas repaints once with nothing else to do.

    Any update the user can see costs the GUI thread at least this much: Qt composes the
    OpenGL canvas into the window, under Xvfb in software (Mesa), which takes longer the
    busier the machine's cores are. It is the floor of the stalls measured around it.
    """
    app = QApplication.instance()
    for _ in range(10):
        app.processEvents()
        time.sleep(0.005)
    monitor.mark()
    canvas_widget(viewer).update()
    for _ in range(20):
        app.processEvents()
        time.sleep(0.005)
    return monitor.longest_gap()[0]


def cpu_slowdown(seconds=0.05):
    """Wall time / CPU time of a CPU-bound loop on this thread: ~1 alone, more when the
    machine's cores are shared with other work."""
    wall, cpu = time.perf_counter(), time.thread_time()
    total = 0
    while time.thread_time() - cpu < seconds:
        total += sum(range(1000))
    return (time.perf_counter() - wall) / (time.thread_time() - cpu)


def fly_stack_window(scribble_metadata=None):
    """A shown napari viewer (1500x1050) with 10 real fly frames of 1024² (``flies``) and their
    scribble layer (``scribbles``: frame 0's training labels, with ``scribble_metadata``);
    returns the viewer and the frames. Needs ``benchmarks/`` on ``sys.path`` and the shared
    data."""
    import napari
    from _real_data import load_fly_masks_dev

    data = load_fly_masks_dev(test_limit=1)
    frames = np.stack(data["train_images"])
    scribbles = np.zeros(frames.shape, np.uint8)
    scribbles[0] = data["train_labels"][0]
    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(1500, 1050)
    viewer.add_image(frames, name="flies")
    viewer.add_labels(scribbles, name="scribbles", metadata=scribble_metadata or {})
    return viewer, frames


@contextmanager
def second_image(viewer, widget, photo, name="larvae"):
    """In the block: RGB ``photo`` shown as layer ``name`` and chosen as the image of the Pixel
    classifier ``widget`` (the window settled), e.g. for a New. Afterwards that image is
    removed with the layers of its name New added (scribbles, segmentation), and the layer
    ``scribbles`` (`fly_stack_window`'s) is selected again."""
    app = QApplication.instance()
    viewer.add_image(photo, name=name, rgb=True)
    settle(app, 20)
    widget.image_combo.setCurrentText(name)
    settle(app, 20)
    yield
    for layer in (f"{name} scribbles", f"{name} segmentation", name):
        if layer in viewer.layers:
            viewer.layers.remove(layer)
    settle(app, 20)
    if "scribbles" in viewer.layers:
        viewer.layers.selection.active = viewer.layers["scribbles"]
