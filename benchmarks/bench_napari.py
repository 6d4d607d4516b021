"""The napari pixel classifier as a user meets it, on real fly frames: stroke -> repainted, stalls.

Run (needs a display; Xvfb is enough):
``xvfb-run -a python benchmarks/bench_napari.py [--repeats N] [--profile] [--screenshot PNG]
[--multiclass-screenshot PNG] [--skip-video] [--multiclass-only] [--live-only]``
(``QT_API=pyqt6`` picks Qt 6 when several bindings are installed).
Writes benchmarks/results/napari.json (``--multiclass-only``: napari_multiclass_only.json,
``--live-only``: napari_live_only.json) and
prints two tables (actions; stages of a live update). ``import msclassify`` shortens how long
OpenMP's idle threads spin (``GOMP_SPINCOUNT=3000``); ``GOMP_SPINCOUNT=300000`` in the
environment measures libgomp's own default, ``OMP_WAIT_POLICY=PASSIVE`` sleeping threads.

The data are the 10 training frames of fly_masks_dev (1024x1024, decoded from
the real video by `_real_data.load_fly_masks_dev`) as one time stack, with the
set's own scribbles on frame 0 only. A real napari window is shown (Xvfb) with
the widget docked; everything below goes through Qt's event loop:

* **stroke -> repainted** (live update on): a left-button drag is sent to the
  canvas as Qt mouse events (`napari_session.stroke`), extending the background
  scribbles by a short stroke. The clock starts when the release event is sent
  and stops when the canvas has finished the first paint after the widget
  showed the new segmentation. The time in between is broken down into the
  `STAGES` (from `PixelClassifierWidget.timeline`): starting the job (copying the
  scribbles), training the live model and predicting the frame in the worker
  thread, handing the result to the GUI thread, updating the layer and the panel,
  waiting for the paint and painting.
* **frame change -> repainted** (live update on): the time slider moves to a
  new frame, which the current model segments; same stages without the fit.
* **stalls**: the longest gap between the ticks of a 10 ms timer on the GUI
  thread (`napari_session.EventLoopMonitor`) while the widget trains the full
  model (Train), segments the frame (Segment this frame), applies the model to
  all 10 frames and exports them (0/255 masks of the fly class to TIFFs), and
  during each live update above (there it includes napari drawing the stroke
  itself). Target: <= 0.1 s.
* **painting**: GUI time per mouse move (move event -> end of the canvas paint that shows
  it) on a plain Labels layer, on a plain Labels layer with the widget's result under it, and on
  the widget's scribble layer; interleaved, the order rotating (`measure_painting`).
* **a second image, 4 classes**: the top-left 512 x 384 of fly_larvae_dev/img_1.png added over
  the fly stack, chosen in the widget: New, 4 classes, Train, live strokes; checks that its
  result is drawn right above it; then Train on a user's few clicks instead (sparse: the
  default teacher fits its forest; `larvae_photo(style="clicks")`) (`multiclass_session`).
* **a long movie**: fly_sleap/clip.mp4 (1500 frames of 1024²) opened with the plugin's reader,
  New scribbles for it, frame changes far along it, against napari's own add of an in-memory
  image and of a Labels layer of the same shape (`video_session`; ``--skip-video``); and our
  reader alone, without napari: reading the packet index (the "stall" column), decoding the
  first frame ("seconds"), and decoding frames 700 and 1400 (PyAV decodes from the key frame
  before them: every 250th frame in this file).
* **napari's own layer adds** next to ours: after docking (the dock adds the segmentation
  layer) and before New on the photo, the stall of napari adding one Labels layer of np.zeros
  of that shape.
* **bare canvas repaint (floor)**: the stall of one repaint of the canvas with
  nothing else to do, measured between the actions. Any update the user can see
  costs at least this much of the GUI thread: under Xvfb, Qt composes the
  OpenGL canvas into the window in software (Mesa), which is what bounds the
  stalls above from below on this kind of machine.

The machine is shared (2 cores): the load average and `cpu_slowdown` (wall /
CPU time of a CPU-bound loop on the GUI thread: ~1 alone) are recorded with
each row. Numba is warmed up first (one Train outside the timing).
``--profile`` also prints what the GUI thread spent its time on (cProfile of the
main thread only; workers are not profiled).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import REPO, command_line, cpu_model, print_table, write_results

sys.path.insert(0, str(REPO / "plugins"))

TARGET_LATENCY_S = 0.3
TARGET_STALL_S = 0.1
TARGET_PAINT_OVERHEAD_MS = 10
BACKGROUND, FLY = 1, 2


def make_session():
    from qtpy.QtWidgets import QApplication
    from msclassify_napari._controller import CLASS_NAMES_KEY
    from msclassify_napari._widget import PixelClassifierWidget
    from napari_session import EventLoopMonitor, fly_stack_window

    viewer, frames = fly_stack_window({CLASS_NAMES_KEY: {BACKGROUND: "background", FLY: "fly"}})
    layer = viewer.layers["scribbles"]
    monitor = EventLoopMonitor()
    _settle(QApplication.instance(), 30)
    monitor.mark()
    widget = PixelClassifierWidget(viewer)
    viewer.window.add_dock_widget(widget, name="Pixel classifier")
    _settle(QApplication.instance(), 30)
    from msclassify_napari._preload import preloaded
    from napari_session import wait_until
    wait_until(lambda: preloaded() is not None, 300)   # the first fit's kernels, in a thread
    _settle(QApplication.instance(), 10)
    dock = [{"action": "dock the widget (first time; until the kernels are loaded in the "
                       "background)", "stall_s": monitor.longest_gap()[0],
             "slowdown": cpu_slowdown_now(), "load": os.getloadavg()[0]}]
    # what the dock adds to the window: the segmentation layer, one napari Labels layer
    monitor.mark()
    plain = viewer.add_labels(np.zeros(frames.shape, np.uint8), name="plain labels")
    _settle(QApplication.instance(), 30)
    dock.append({"action": "dock: add a Labels layer of np.zeros, fly stack (napari)",
                 "stall_s": monitor.longest_gap()[0], "slowdown": cpu_slowdown_now(),
                 "load": os.getloadavg()[0]})
    viewer.layers.remove(plain)
    viewer.layers.selection.active = layer
    viewer.dims.set_current_step(0, 0)
    viewer.reset_view()
    return viewer, widget, layer, monitor, dock


def stroke_paths(scribbles, n, seed, length=12):
    """``n`` short horizontal strokes through unlabelled pixels 3-8 px from the background
    scribbles and > 25 px from the fly scribbles: a user extending a background stroke."""
    from scipy import ndimage
    near_background = ndimage.distance_transform_edt(scribbles != BACKGROUND)
    far_from_fly = ndimage.distance_transform_edt(scribbles != FLY) > 25
    candidates = np.argwhere((near_background > 3) & (near_background <= 8) & far_from_fly
                             & (scribbles == 0))
    chosen = candidates[np.random.default_rng(seed).choice(len(candidates), n, replace=False)]
    return [[(y, min(x + step, scribbles.shape[1] - 1)) for step in range(0, length, 2)]
            for y, x in chosen]


def timed(app, widget, monitor, paints, start_action, done):
    """Run ``start_action`` (returns the start time) and wait until ``done()``; returns
    (start, longest stall)."""
    from napari_session import wait_until
    monitor.mark()
    start = start_action()
    wait_until(done)
    wait_until(lambda: widget.scheduler.running is None and widget.scheduler.pending is None)
    app.processEvents()
    time.sleep(0.03)
    app.processEvents()
    return start, monitor.longest_gap()[0]


# The stages of a live update, in order: (name, stamp it ends at). The stamps come from
# `PixelClassifierWidget.timeline` (GUI and worker thread) and the canvas paint.
STAGES = (("to_job", "job_started"),          # release / slider move -> job started
          ("to_fit", "fit_started"),          # scribbles copied, worker thread started
          ("fit", "fit_done"),                # live model trained (worker)
          ("to_predict", "predict_started"),
          ("predict", "predict_done"),        # frame segmented (worker)
          ("to_gui", "delivered"),            # result queued to the GUI thread
          ("layer", "layer_updated"),         # segmentation written into its layer, refreshed
          ("panel", "shown"),                 # Result panel and shown outputs updated
          ("to_paint", "paint_start"),        # until the canvas paint starts ...
          ("paint", "paint_end"))             # ... and ends: repainted


def breakdown(start, timeline, paint):
    """Seconds of each of `STAGES` that happened (a PREDICT job has no fit), from ``start``."""
    stamps = {**timeline, "paint_start": paint[0], "paint_end": paint[1]}
    row, previous = {}, start
    for name, stamp in STAGES:
        if stamp in stamps:
            row[f"{name}_s"] = stamps[stamp] - previous
            previous = stamps[stamp]
    return row


def measure_update(app, widget, monitor, paints, start_action):
    """Time a live update from ``start_action`` (returns its start time) to the canvas paint
    that shows it, with the stages in between."""
    def repainted():
        shown = widget.timeline.get("shown")
        return shown is not None and paints.first_after(shown) is not None

    widget.timeline = {}
    start, stall = timed(app, widget, monitor, paints, start_action, repainted)
    timeline = dict(widget.timeline)
    paint = paints.first_after(timeline["shown"])
    return {"latency_s": paint[1] - start, **breakdown(start, timeline, paint),
            "train_s": widget.last_model.seconds, "predict_s": widget.last_prediction.seconds,
            "stall_s": stall}


def measure_stroke(app, viewer, widget, layer, monitor, paints, path):
    from napari_session import stroke
    return measure_update(app, widget, monitor, paints, lambda: stroke(viewer, path))


def measure_frame_change(app, viewer, widget, monitor, paints, frame):
    def move():
        start = time.perf_counter()
        viewer.dims.set_current_step(0, frame)
        return start

    row = measure_update(app, widget, monitor, paints, move)
    del row["train_s"]
    return row


def measure_repaint_floor(app, viewer, monitor, paints):
    """The stall of one bare repaint of the canvas, and how long the paint itself took."""
    from napari_session import bare_repaint_stall
    begin = time.perf_counter()
    stall = bare_repaint_stall(viewer, monitor)
    paint = paints.first_after(begin)
    return {"stall_s": stall,
            "canvas_paint_s": float("nan") if paint is None else paint[1] - paint[0]}


def measure_action(app, widget, monitor, paints, action, signal):
    finished = []
    connection = signal.connect(lambda *_: finished.append(time.perf_counter()))

    def start():
        begin = time.perf_counter()
        action()
        return begin

    begin, stall = timed(app, widget, monitor, paints, start, lambda: bool(finished))
    signal.disconnect(connection)
    return {"seconds": finished[0] - begin, "stall_s": stall}


def save_screenshot(app, viewer, widget, path):
    """The window after Train, with "Where to label next" shown, as a PNG."""
    import imageio.v3 as iio
    from napari_session import wait_until
    from scipy import ndimage
    widget.show_checks["hints"].setChecked(True)        # segments the frame again
    wait_until(lambda: widget.scheduler.running is None and widget.scheduler.pending is None)
    flies, n = ndimage.label(viewer.layers["flies segmentation"].data[0] == FLY)
    largest = 1 + int(np.argmax(ndimage.sum_labels(flies > 0, flies, range(1, n + 1))))
    from napari_session import canvas_widget
    canvas = canvas_widget(viewer)
    viewer.scene.camera.center = ndimage.center_of_mass(flies == largest)   # close up on a fly
    viewer.scene.camera.zoom = min(canvas.width(), canvas.height()) / 320
    for _ in range(20):
        app.processEvents()
        time.sleep(0.01)
    _close_toasts(app, viewer)         # e.g. napari's PyQt5 deprecation notice
    _settle(app)
    iio.imwrite(path, viewer.screenshot(canvas_only=False, flash=False))
    widget.show_checks["hints"].setChecked(False)
    viewer.reset_view()



# -- painting: what a mouse move costs over a plain Labels layer ---------------------------------

def mouse_move_times(app, viewer, paints, layer, points):
    """Seconds from each mouse-move event of a left-button drag through ``points`` to the end
    of the canvas paint that shows it (the GUI thread is busy all that time)."""
    from napari_session import canvas_position, canvas_widget, press, move, release
    viewer.layers.selection.active = layer
    layer.mode = "paint"
    for _ in range(10):
        app.processEvents()
        time.sleep(0.005)
    widget = canvas_widget(viewer)
    positions = [canvas_position(viewer, point) for point in points]
    press(widget, positions[0])
    times = []
    for position in positions[1:]:
        sent = time.perf_counter()
        move(widget, position)
        while paints.first_after(sent) is None and time.perf_counter() - sent < 2:
            app.processEvents()
        painted = paints.first_after(sent)
        times.append((painted[1] if painted else time.perf_counter()) - sent)
    release(widget, positions[-1])
    for _ in range(10):
        app.processEvents()
        time.sleep(0.005)
    return times


def measure_painting(app, viewer, widget, layer, paints, repeats):
    """Per mouse move while painting: a plain Labels layer (NumPy, napari's colours) alone;
    the same with the widget's segmentation shown under it; the widget's scribble layer
    with the segmentation. Interleaved, the order rotating, on frame 0 of the fly stack."""
    frame = np.asarray(layer.data[0])
    plain = viewer.add_labels(np.zeros(layer.data.shape, np.uint8), name="plain labels")
    plain.brush_size = layer.brush_size = 5
    plain.selected_label = layer.selected_label = BACKGROUND
    segmentation = viewer.layers["flies segmentation"]
    conditions = {
        "plain Labels": (plain, False),
        "plain Labels + result shown": (plain, True),
        "ours (scribbles + result)": (layer, True)}
    # strokes through unlabelled floor, one row per stroke and condition
    rows_free = [y for y in range(200, 900, 7) if not frame[y, 150:450].any()]
    rows = []
    names = list(conditions)
    for repeat in range(repeats):
        for position, name in enumerate(names[repeat % 3:] + names[:repeat % 3]):
            target, result_shown = conditions[name]
            plain.visible = target is plain
            layer.visible = target is layer
            segmentation.visible = result_shown
            y = rows_free[(3 * repeat + position) % len(rows_free)]
            times = mouse_move_times(app, viewer, paints, target,
                                     [(y, x) for x in range(150, 450, 8)])
            rows.append({"action": f"paint: {name}", "repeat": repeat,
                         "per_move_s": statistics.median(times), "moves": len(times),
                         "slowdown": cpu_slowdown_now(), "load": os.getloadavg()[0]})
    layer.visible = segmentation.visible = True
    viewer.layers.remove(plain)
    # the strokes on the scribble layer are undone: the fly measurements stay comparable
    layer.data[0] = frame
    layer.refresh()
    return rows


def _qt_api():
    import qtpy
    return f"{qtpy.API_NAME} {qtpy.QT_VERSION}"


def cpu_slowdown_now():
    from napari_session import cpu_slowdown
    return cpu_slowdown()


# -- a second image: a 4-class RGB photo ---------------------------------------------------------

LARVAE_CLASSES = {1: "tray (background)", 2: "larva", 3: "feed", 4: "rim"}


def larvae_photo(seed=0, style="strokes"):
    """The top-left 512 x 384 of fly_larvae_dev/img_1.png (the tray's corner: its dark rim,
    the grey floor, larvae, feed) and scribbles of its four classes: larvae from the real mask
    (eroded), the rim as lines along its dark edge, feed (saturated, brown) and floor (grey)
    by colour away from the larvae. A stand-in for a user's strokes, for timings and the
    screenshot only; ``seed`` draws which larvae and pieces of feed are scribbled.
    ``style="clicks"``: a user's few clicks instead (`_real_data.click_scribbles` of the
    class map: floor away from larvae and feed, larvae, feed, rim lines; 3 clicks of 7 px
    a class, drawn with ``seed``), so sparse that the default teacher asks its forest."""
    import imageio.v3 as iio
    from scipy import ndimage
    from _common import SHARED_DATA
    folder = SHARED_DATA / "fly_larvae_dev"
    photo = iio.imread(folder / "img_1.png")[:384, :512, :3]
    larvae = iio.imread(folder / "img_1_mask.png")[:384, :512, 0] > 0
    rng = np.random.default_rng(seed)
    brightness = photo.max(axis=2).astype(int)
    saturation = brightness - photo.min(axis=2)
    inside = np.zeros(larvae.shape, bool)
    inside[30:, 20:] = True                              # the floor, inside the rim
    rim = np.zeros(larvae.shape, bool)
    rim[20:22, 40:500] = rim[40:370, 7:9] = True         # the rim's dark edge (measured rows)
    far_from_objects = ndimage.distance_transform_edt(~(larvae | (saturation > 35))) > 6
    floor = (saturation < 18) & (brightness > 85) & (brightness < 130) & far_from_objects
    feed_pixels = (saturation > 35) & ~ndimage.binary_dilation(larvae, iterations=3) & inside
    if style == "clicks":
        from _real_data import click_scribbles
        classes = np.zeros(larvae.shape, np.uint8)
        classes[floor & inside] = 1
        classes[larvae] = 2
        classes[feed_pixels] = 3
        classes[rim] = 4
        return photo, larvae, click_scribbles(classes, seed)
    grid = np.zeros(larvae.shape, bool)
    grid[::6, ::4] = True
    feed_regions, n_feed = ndimage.label(feed_pixels)
    pieces = np.flatnonzero(np.bincount(feed_regions.ravel())[1:] >= 15) + 1
    feed = np.isin(feed_regions, rng.choice(pieces, min(len(pieces), 40), replace=False))
    larva_regions, n_larvae = ndimage.label(ndimage.binary_erosion(larvae, iterations=2))
    larva = np.isin(larva_regions, rng.choice(np.arange(1, n_larvae + 1), min(n_larvae, 20),
                                              replace=False))
    scribbles = np.zeros(larvae.shape, np.uint8)
    scribbles[floor & grid & inside] = 1
    scribbles[larva] = 2
    scribbles[feed] = 3
    scribbles[rim] = 4
    return photo, larvae, scribbles


def multiclass_session(app, viewer, widget, monitor, paints, repeats, screenshot=None):
    """The photo as a second image over the fly stack: New scribbles, 4 classes, Train, live
    strokes, the larva probability; checks that its result is drawn above it."""
    from napari_session import wait_until
    from scipy import ndimage
    photo, larvae, painted = larvae_photo()
    rows = []
    viewer.add_image(photo, name="larvae", rgb=True)
    widget.live_check.setChecked(False)
    wait_until(lambda: widget.scheduler.running is None)
    widget.image_combo.setCurrentText("larvae")
    _settle(app)
    monitor.mark()
    plain = viewer.add_labels(np.zeros(photo.shape[:2], np.uint8), name="plain labels")
    _settle(app, 30)
    rows.append({"action": "4 classes: add a Labels layer of np.zeros, photo (napari)",
                 "stall_s": monitor.longest_gap()[0], "slowdown": cpu_slowdown_now(),
                 "load": os.getloadavg()[0]})
    viewer.layers.remove(plain)
    _settle(app)
    row = measure_action(app, widget, monitor, paints, widget.new_scribble_layer,
                         viewer.layers.events.inserted)
    rows.append({"action": "4 classes: New scribbles (+ segmentation layer)", **row,
                 "slowdown": cpu_slowdown_now(), "load": os.getloadavg()[0]})
    layer = widget.scribble_layer
    for _ in range(2):
        widget.add_class_button.click()
    for row_index, name in enumerate(LARVAE_CLASSES.values()):
        widget.class_table.item(row_index, 1).setText(name)
    layer.data[...] = painted
    layer.refresh()
    for repeat in range(repeats):
        row = measure_action(app, widget, monitor, paints, widget.train, widget.job_done)
        rows.append({"action": "4 classes: Train (full model)", "repeat": repeat, **row,
                     "slowdown": cpu_slowdown_now(), "load": os.getloadavg()[0]})
    names = [layer.name for layer in viewer.layers]
    assert names.index("larvae") + 1 == names.index("larvae segmentation") \
        < names.index("larvae scribbles"), names
    segmentation = viewer.layers["larvae segmentation"].data
    truth = larvae.ravel()
    found = segmentation.ravel() == 2
    f1 = 2 * np.sum(found & truth) / max(np.sum(found) + np.sum(truth), 1)
    # live strokes of the tray class through empty floor
    viewer.scene.camera.center, viewer.scene.camera.zoom = (192, 256), 2.0
    widget.live_check.setChecked(True)
    wait_until(lambda: widget.scheduler.running is None and widget.scheduler.pending is None)
    layer.selected_label = 1
    layer.brush_size = 3
    grey = photo.max(axis=2).astype(int) - photo.min(axis=2) < 18
    empty = ndimage.distance_transform_edt(grey) > 0
    empty &= ndimage.distance_transform_edt(~(larvae | ~grey)) > 8
    empty[:40], empty[:, :40], empty[:, -20:] = False, False, False
    starts = np.argwhere(empty & (painted == 0))
    chosen = starts[np.random.default_rng(1).choice(len(starts), repeats + 1, replace=False)]
    paths = [[(y, min(x + step, 511)) for step in range(0, 12, 2)] for y, x in chosen]
    measure_stroke(app, viewer, widget, layer, monitor, paints, paths[0])       # warm-up
    for repeat, path in enumerate(paths[1:]):
        row = measure_stroke(app, viewer, widget, layer, monitor, paints, path)
        rows.append({"action": "4 classes: stroke -> repainted", "repeat": repeat, **row,
                     "slowdown": cpu_slowdown_now(), "load": os.getloadavg()[0]})
    widget.live_check.setChecked(False)
    wait_until(lambda: widget.scheduler.running is None and widget.scheduler.pending is None)
    if screenshot:
        save_multiclass_screenshot(app, viewer, widget, screenshot)
    # a user's few clicks instead of the strokes: sparse, the default teacher fits its forest
    layer.data[...] = larvae_photo(style="clicks")[2]
    layer.refresh()
    for repeat in range(repeats):
        row = measure_action(app, widget, monitor, paints, widget.train, widget.job_done)
        rows.append({"action": "4 classes, clicks: Train (full model)", "repeat": repeat, **row,
                     "slowdown": cpu_slowdown_now(), "load": os.getloadavg()[0]})
    found = viewer.layers["larvae segmentation"].data.ravel() == 2
    f1_clicks = 2 * np.sum(found & truth) / max(np.sum(found) + np.sum(truth), 1)
    widget.image_combo.setCurrentText("flies")
    return rows, {"larva_pixel_f1_crop": float(f1),
                  "larva_pixel_f1_crop_clicks": float(f1_clicks)}


def _settle(app, n=20):
    for _ in range(n):
        app.processEvents()
        time.sleep(0.01)


def _close_toasts(app, viewer):
    from napari._qt.dialogs.qt_notification import NapariQtNotification
    for toast in app.topLevelWidgets() + viewer.window._qt_window.findChildren(
            NapariQtNotification):
        if isinstance(toast, NapariQtNotification):
            toast.close()


def save_multiclass_screenshot(app, viewer, widget, path):
    """The photo's 4-class result with the larva probability and its colour bar."""
    import imageio.v3 as iio
    from napari_session import wait_until
    widget.probability_class_combo.setCurrentText("larva")
    widget.show_checks["probability"].setChecked(True)
    wait_until(lambda: widget.scheduler.running is None)
    probability = viewer.layers["larvae P(larva) (0–1)"]
    probability.visible = False          # the result and scribbles first; the bar stays named
    viewer.scene.camera.center, viewer.scene.camera.zoom = (200, 260), 2.2
    _close_toasts(app, viewer)
    _settle(app)
    iio.imwrite(path, viewer.screenshot(canvas_only=False, flash=False))
    probability.visible = True
    stem = Path(path)
    _settle(app)
    iio.imwrite(stem.with_name(stem.stem + "_probability.png"),
                viewer.screenshot(canvas_only=False, flash=False))
    widget.show_checks["probability"].setChecked(False)


# -- a long movie: open, dock, New, frame change -------------------------------------------------

def video_session(app, viewer, widget, monitor):
    """In the same window: open the 1500-frame fly video with this plugin's reader, New
    scribbles for it, move far along the movie; against napari's own in-memory equivalents
    (an image layer of the same shape, a Labels layer of np.zeros), interleaved."""
    from _common import SHARED_DATA
    from napari_session import bare_repaint_stall, wait_until
    path = SHARED_DATA / "fly_sleap" / "clip.mp4"
    rows = []

    def stall_of(action, settle=30):
        _settle(app, 5)
        monitor.mark()
        begin = time.perf_counter()
        result = action()
        _settle(app, settle)
        return result, monitor.longest_gap()[0], time.perf_counter() - begin

    def add(name, stall, seconds=None):
        rows.append({"action": name, "stall_s": stall, "seconds": seconds,
                     "slowdown": cpu_slowdown_now(), "load": os.getloadavg()[0]})

    from msclassify.io import open_frames
    for repeat in range(2):
        begin = time.perf_counter()
        source = open_frames(path, as_gray="auto")
        opened = time.perf_counter()
        source.read(0)
        first = time.perf_counter()
        rows.append({"action": "video: our reader alone: packet index / first frame (no napari)",
                     "stall_s": opened - begin, "seconds": first - opened,
                     "slowdown": cpu_slowdown_now(), "load": os.getloadavg()[0]})
        for frame in (700, 1400):
            begin = time.perf_counter()
            source.read(frame)
            add(f"video: decode frame {frame} alone (PyAV from its key frame, no napari)",
                time.perf_counter() - begin)
        source.close()
    shape = None
    for repeat in range(2):
        [clip], stall, seconds = stall_of(lambda: viewer.open(str(path), plugin="msclassify"))
        add("video: open 1500 frames (our reader)", stall, seconds)
        shape = clip.data.shape
        reference, stall, _ = stall_of(lambda: viewer.add_image(
            np.broadcast_to(np.uint8(0), shape), name="in memory", contrast_limits=(0, 255)))
        add("video: add an in-memory image of that shape (napari)", stall)
        viewer.layers.remove(reference)
        if repeat == 0:
            viewer.layers.remove(clip)
    widget.image_combo.setCurrentText("clip")
    for repeat in range(2):
        plain, stall, _ = stall_of(lambda: viewer.add_labels(np.zeros(shape[:3], np.uint8),
                                                             name="plain labels"))
        add("video: add a Labels layer of np.zeros (napari)", stall)
        viewer.layers.remove(plain)
        layer, stall, _ = stall_of(widget.new_scribble_layer)
        add("video: New scribbles (+ segmentation layer)", stall)
        assert layer.data.nbytes_stored == 0
        for name in (layer.name, "clip segmentation"):
            viewer.layers.remove(name)
        rows.append({"action": "bare canvas repaint (floor), video window",
                     "stall_s": bare_repaint_stall(viewer, monitor),
                     "slowdown": cpu_slowdown_now(), "load": os.getloadavg()[0]})
    for frame in (700, 701, 1400):
        _, stall, _ = stall_of(lambda: viewer.dims.set_current_step(0, frame))
        add(f"video: frame change to {frame} (decoding on napari's GUI thread)", stall)
    # napari's asynchronous slicing (Preferences > Experimental > Render Layers
    # Asynchronously, or NAPARI_ASYNC=1) slices in a thread; switched on for this viewer only
    # (what the setting does to each viewer), not in the user's saved settings. The frames
    # lie as far from their key frames as 700 and 1400 (key frames every 250th).
    slicer = viewer._layer_slicer
    slicer._force_sync = False
    try:
        def jump(frame):
            viewer.dims.set_current_step(0, frame)
            wait_until(lambda: clip.loaded, 60)       # the frame is drawn

        for frame in (450, 451, 1150):
            _, stall, seconds = stall_of(lambda: jump(frame))
            add(f"video: frame change to {frame}, napari's asynchronous slicing", stall,
                seconds)
    finally:
        slicer._force_sync = True
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true",
                        help="print the GUI thread's cProfile (slows it down a little)")
    parser.add_argument("--screenshot", metavar="PNG",
                        help="after the first Train, also save a screenshot of the window "
                             "(the README's is docs/napari_widget.png)")
    parser.add_argument("--multiclass-screenshot", metavar="PNG",
                        help="also save the 4-class photo's window (docs/napari_multiclass.png; "
                             "and *_probability.png with the larva probability)")
    parser.add_argument("--multiclass-only", action="store_true",
                        help="after the warm-up Train, only the 4-class photo (a quick rerun of "
                             "its live strokes; implies --skip-video)")
    parser.add_argument("--live-only", action="store_true",
                        help="after the warm-up Train, only the live updates: fly strokes and "
                             "frame changes, then the 4-class photo (implies --skip-video)")
    parser.add_argument("--skip-video", action="store_true",
                        help="skip the 1500-frame video (open, dock, New, frame changes)")
    args = parser.parse_args()

    from qtpy.QtWidgets import QApplication
    from msclassify.pixel import FrameExport
    from napari_session import CanvasPaints, cpu_slowdown, wait_until

    load = os.getloadavg()[0]
    viewer, widget, layer, monitor, dock = make_session()
    app = QApplication.instance()
    wait_until(lambda: widget.scribbled.scanned)
    paints = CanvasPaints(viewer)
    if args.profile:
        import cProfile
        profile = cProfile.Profile()
        profile.enable()

    # warm-up: compilation, caches, the segmentation layer
    measure_action(app, widget, monitor, paints, widget.train, widget.job_done)
    if args.screenshot:
        save_screenshot(app, viewer, widget, args.screenshot)
    rows = []

    def floor_row(repeat):
        rows.append({"action": "bare canvas repaint (floor)", "repeat": repeat,
                     **measure_repaint_floor(app, viewer, monitor, paints),
                     "slowdown": cpu_slowdown(), "load": os.getloadavg()[0]})

    live, painting = [], []
    if not args.multiclass_only and not args.live_only:
        for repeat in range(args.repeats):
            floor_row(repeat)
            for name, action, signal in (
                    ("Train (full model)", widget.train, widget.job_done),
                    ("Segment this frame", widget.segment_current_frame, widget.job_done)):
                row = measure_action(app, widget, monitor, paints, action, signal)
                rows.append({"action": name, "repeat": repeat, **row,
                             "slowdown": cpu_slowdown(), "load": os.getloadavg()[0]})
        with tempfile.TemporaryDirectory() as folder:
            for repeat in range(args.repeats):
                row = measure_action(app, widget, monitor, paints, widget.apply_to_all_frames,
                                     widget.batch_done)
                rows.append({"action": "Apply to 10 frames", "repeat": repeat, **row,
                             "slowdown": cpu_slowdown(), "load": os.getloadavg()[0]})
                row = measure_action(app, widget, monitor, paints,
                                     lambda: widget.export(Path(folder) / f"masks{repeat}",
                                                           FrameExport("mask", FLY)),
                                     widget.batch_done)
                rows.append({"action": "Export 10 frames (0/255)", "repeat": repeat, **row,
                             "slowdown": cpu_slowdown(), "load": os.getloadavg()[0]})
    if not args.multiclass_only:
        viewer.dims.set_current_step(0, 0)
        widget.live_check.setChecked(True)
        wait_until(lambda: widget.scheduler.running is None and widget.scheduler.pending is None)
        layer.selected_label = BACKGROUND
        layer.brush_size = 5
        paths = stroke_paths(np.asarray(layer.data[0]), args.repeats + 1, seed=0)
        measure_stroke(app, viewer, widget, layer, monitor, paints, paths[0])   # warm-up
        live = []
        for repeat, path in enumerate(paths[1:]):
            before = int(np.count_nonzero(layer.data[0]))
            row = measure_stroke(app, viewer, widget, layer, monitor, paints, path)
            assert np.count_nonzero(layer.data[0]) > before, "the stroke painted nothing"
            live.append({"action": "stroke -> repainted", "repeat": repeat, **row,
                         "slowdown": cpu_slowdown(), "load": os.getloadavg()[0]})
        for repeat in range(args.repeats):
            row = measure_frame_change(app, viewer, widget, monitor, paints, 1 + repeat % 9)
            live.append({"action": "frame change -> repainted", "repeat": repeat, **row,
                         "slowdown": cpu_slowdown(), "load": os.getloadavg()[0]})
            floor_row(args.repeats + repeat)
        widget.live_check.setChecked(False)
        wait_until(lambda: widget.scheduler.running is None and widget.scheduler.pending is None)
        if not args.live_only:
            painting = measure_painting(app, viewer, widget, layer, paints, max(args.repeats, 3))
    multiclass, multiclass_info = multiclass_session(app, viewer, widget, monitor, paints,
                                                     args.repeats, args.multiclass_screenshot)
    live += multiclass
    if args.profile:
        import pstats
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
    paints.remove()
    live_trees = widget.settings().for_live_update().n_estimators
    train_trees = widget.settings().n_estimators
    video = [] if args.skip_video or args.multiclass_only or args.live_only else \
        video_session(app, viewer, widget, monitor)
    monitor.stop()
    rows.extend(dock)

    with open(Path(tempfile.gettempdir()) / "napari_rows.json", "w") as fh:   # if the summary fails
        json.dump(rows + live + video + painting, fh, default=str)
    summary = []
    for action in dict.fromkeys(row["action"] for row in rows + live + video):
        chosen = [row for row in rows + live + video if row["action"] == action]
        entry = {"action": action, "n": len(chosen),
                 "stall_max_s": max(row["stall_s"] for row in chosen),
                 "stall_median_s": statistics.median(row["stall_s"] for row in chosen),
                 "slowdown_median": statistics.median(row["slowdown"] for row in chosen)}
        for key in ("latency", "seconds", "train", "predict", "canvas_paint"):
            column = "seconds" if key == "seconds" else f"{key}_s"
            if chosen[0].get(column) is not None:
                values = [row[column] for row in chosen]
                entry[f"{key}_median_s"] = statistics.median(values)
                entry[f"{key}_min_s"] = min(values)
        stages = [f"{name}_s" for name, _ in STAGES if f"{name}_s" in chosen[0]]
        if stages:
            entry["stages_median_s"] = {stage[:-2]: statistics.median(row[stage] for row in chosen)
                                        for stage in stages}
        summary.append(entry)
    print(f"{cpu_model()}; Qt: {_qt_api()}; OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY')}; GOMP_SPINCOUNT="
          f"{os.environ.get('GOMP_SPINCOUNT')}; load average at start {load:.2f} on "
          f"{os.cpu_count()} CPUs; "
          f"targets: latency <= {TARGET_LATENCY_S} s, stall <= {TARGET_STALL_S} s")
    print_table(summary, ["action", "n", "latency_median_s", "latency_min_s", "seconds_median_s",
                          "train_median_s", "predict_median_s", "canvas_paint_median_s",
                          "stall_median_s", "stall_max_s", "slowdown_median"])
    print("\nWhere a live update's time goes (medians, ms; see STAGES in this script):")
    staged = [entry for entry in summary if "stages_median_s" in entry]
    print_table([{"action": entry["action"], **{stage: round(1000 * seconds, 1) for stage, seconds
                                                in entry["stages_median_s"].items()}}
                 for entry in staged], ["action", *[name for name, _ in STAGES]])
    paint_summary = []
    for action in dict.fromkeys(row["action"] for row in painting):
        chosen = [row for row in painting if row["action"] == action]
        paint_summary.append({
            "action": action, "strokes": len(chosen), "moves": sum(r["moves"] for r in chosen),
            "per_move_median_ms": 1000 * statistics.median(r["per_move_s"] for r in chosen),
            "per_move_min_ms": 1000 * min(r["per_move_s"] for r in chosen),
            "slowdown_median": statistics.median(r["slowdown"] for r in chosen),
            "load_median": statistics.median(r["load"] for r in chosen)})
    plain = paint_summary[0]["per_move_median_ms"] if paint_summary else 0.0
    for entry in paint_summary:
        entry["over_plain_ms"] = entry["per_move_median_ms"] - plain
    print(f"\nPainting: GUI time per mouse move, move event -> canvas painted (medians of each "
          f"stroke's median; interleaved; target: ours <= plain + {TARGET_PAINT_OVERHEAD_MS} ms)")
    print_table(paint_summary, ["action", "strokes", "moves", "per_move_median_ms",
                                "per_move_min_ms", "over_plain_ms", "slowdown_median",
                                "load_median"])
    print(f"\n4-class photo: larva pixel F1 on the crop (its real mask) "
          f"{multiclass_info['larva_pixel_f1_crop']:.3f} (strokes), "
          f"{multiclass_info['larva_pixel_f1_crop_clicks']:.3f} (clicks)")
    path = write_results("napari_multiclass_only" if args.multiclass_only else
                         "napari_live_only" if args.live_only else "napari", {
        "data": "fly_masks_dev train frames (10 x 1024 x 1024), scribbles of frame 0; "
                "fly_larvae_dev img_1.png top-left 512 x 384, 4 classes; fly_sleap clip.mp4",
        "qt_api": _qt_api(), "load_average_at_start": load,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),
        "target_latency_s": TARGET_LATENCY_S, "target_stall_s": TARGET_STALL_S,
        "target_paint_overhead_ms": TARGET_PAINT_OVERHEAD_MS, "live_n_estimators": live_trees,
        "train_n_estimators": train_trees, "multiclass": multiclass_info,
        "summary": summary, "painting": paint_summary, "rows": rows + live + video + painting},
        command_line("xvfb-run -a python"))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
