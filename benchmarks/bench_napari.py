"""Live-update latency of the napari pixel classifier: paint stroke -> updated segmentation.

Run (needs a display; Xvfb is enough):
``xvfb-run -a python benchmarks/bench_napari.py [--repeats N] [--quick]``.
Writes benchmarks/results/napari.json and prints a table.

What is timed is the widget's own path, in a real (hidden) napari viewer: a
stroke is painted on the scribble layer of a 1024x1024 sample-fly frame
(``Labels.paint`` inside ``block_history``, so napari emits one ``paint`` event as
for a mouse stroke); the clock starts right before the stroke and stops when the
widget emits ``segmentation_updated`` for that frame, i.e. after the debounce
delay, the snapshot of the scribbles, retraining in the worker thread,
predicting the frame and writing it into the segmentation layer. Each row also
splits the latency into the debounce delay, training (features + boosting, as
``PixelClassifier.fit`` reports it) and prediction, the rest being thread
hand-offs and napari's layer update. "frame change" rows time the other live
path: moving the time slider to a frame, which predicts it with the current
model (no retraining; the widget waits 40 ms of slider quiet first).

The machine is shared and has 2 cores; the load average at the start is
recorded, and latencies scale with it. Numba is warmed up first (one training
and prediction outside the timing).
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

from _common import REPO, command_line, print_table, write_results

sys.path.insert(0, str(REPO / "plugins"))

TARGET_SECONDS = 0.3


def make_viewer():
    import napari
    from msclassify.datasets import load_sample_flies
    from msclassify_napari._widget import PixelClassifierWidget

    frames, masks, scribbles = load_sample_flies()
    viewer = napari.Viewer(show=False)
    viewer.add_image(frames, name="flies")
    # scribbles on frame 0 only: the benchmark is about one 1024 x 1024 frame
    one_frame = np.zeros_like(scribbles)
    one_frame[0] = scribbles[0]
    layer = viewer.add_labels(one_frame, name="scribbles")
    widget = PixelClassifierWidget(viewer)
    viewer.window.add_dock_widget(widget)
    viewer.dims.set_current_step(0, 0)
    return viewer, widget, layer, masks


def wait_for(app, condition, timeout=900.0):
    start = time.perf_counter()
    while not condition():
        app.processEvents()
        time.sleep(0.001)
        if time.perf_counter() - start > timeout:
            raise TimeoutError("the widget did not finish in time")


def stroke_points(masks, n, seed):
    """Background points far from the flies: a stroke that changes the scribbles."""
    from scipy import ndimage
    floor = np.argwhere(ndimage.distance_transform_edt(masks[0] == 0) > 15)
    return floor[np.random.default_rng(seed).choice(len(floor), n, replace=False)]


def measure_paint(app, widget, layer, points):
    updated = []
    connection = widget.segmentation_updated.connect(lambda index: updated.append(
        time.perf_counter()))
    start = time.perf_counter()
    with layer.block_history():
        for y, x in points:
            layer.paint((0, int(y), int(x)), 1, refresh=False)
    wait_for(app, lambda: bool(updated))
    wait_for(app, lambda: widget.scheduler.running is None)
    widget.segmentation_updated.disconnect(connection)
    return updated[0] - start


def measure_frame_change(app, viewer, widget, frame):
    updated = []
    connection = widget.segmentation_updated.connect(lambda index: updated.append(
        time.perf_counter()))
    start = time.perf_counter()
    viewer.dims.set_current_step(0, frame)
    wait_for(app, lambda: bool(updated))
    wait_for(app, lambda: widget.scheduler.running is None)
    widget.segmentation_updated.disconnect(connection)
    return updated[0] - start


def run_config(app, viewer, widget, layer, masks, name, settings, delay_ms, repeats, seed):
    from msclassify_napari._widget import FRAME_CHANGE_DELAY_MS
    widget.features_combo.setCurrentText(settings["features"])
    widget.trees_spin.setValue(settings["n_estimators"])
    widget.leaves_spin.setValue(settings["max_leaves"])
    widget.scheduler.delay_ms = delay_ms
    viewer.dims.set_current_step(0, 0)
    if not widget.live_check.isChecked():
        widget.live_check.setChecked(True)
    wait_for(app, lambda: widget.scheduler.running is None and widget.scheduler.pending is None)
    # warm-up: numba compilation and caches, outside the timing
    measure_paint(app, widget, layer, stroke_points(masks, 3, seed))
    latencies, train, predict = [], [], []
    for repeat in range(repeats):
        latencies.append(measure_paint(app, widget, layer,
                                       stroke_points(masks, 3, seed + 1 + repeat)))
        train.append(widget.last_model.seconds)
        predict.append(widget.last_prediction.seconds)
    row = {"config": name, **settings, "debounce_ms": delay_ms, "path": "paint stroke",
           "latency_s": statistics.median(latencies), "latency_min_s": min(latencies),
           "train_s": statistics.median(train), "predict_s": statistics.median(predict),
           "features_used": len(widget.classifier.features_used_),
           "labelled_pixels": widget.last_model.n_labelled, "all_latencies_s": latencies}
    frame_latencies = [measure_frame_change(app, viewer, widget, frame)
                       for frame in range(1, 1 + repeats)]
    frame_row = {"config": name, **settings, "debounce_ms": FRAME_CHANGE_DELAY_MS,
                 "path": "frame change",
                 "latency_s": statistics.median(frame_latencies),
                 "latency_min_s": min(frame_latencies), "train_s": 0.0,
                 "predict_s": widget.last_prediction.seconds,
                 "features_used": row["features_used"], "all_latencies_s": frame_latencies}
    return [row, frame_row]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="only the widget defaults and the smallest model, 3 repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats

    from qtpy.QtWidgets import QApplication
    from msclassify_napari._controller import ClassifierSettings

    load = os.getloadavg()[0]
    viewer, widget, layer, masks = make_viewer()
    app = QApplication.instance()
    defaults = ClassifierSettings()
    configs = [
        ("widget defaults", {"features": defaults.features, "n_estimators": defaults.n_estimators,
                             "max_leaves": defaults.max_leaves}, widget.scheduler.delay_ms),
        ("widget defaults, no debounce", {"features": defaults.features,
                                          "n_estimators": defaults.n_estimators,
                                          "max_leaves": defaults.max_leaves}, 0),
        ("library default, 50 trees", {"features": defaults.features, "n_estimators": 50,
                                       "max_leaves": defaults.max_leaves},
         widget.scheduler.delay_ms),
        ("fast preset, 10 trees", {"features": "fast", "n_estimators": 10, "max_leaves": 15}, 0),
    ]
    if args.quick:
        configs = [configs[0], configs[3]]
    rows = []
    for index, (name, settings, delay) in enumerate(configs):
        rows += run_config(app, viewer, widget, layer, masks, name, settings, delay, repeats,
                           seed=100 * index)
        print(f"done: {name}", file=sys.stderr)
    viewer.close()

    print(f"load average at start: {load:.2f} on {os.cpu_count()} CPUs; "
          f"target <= {TARGET_SECONDS} s")
    print_table(rows, ["config", "path", "debounce_ms", "latency_s", "latency_min_s", "train_s",
                       "predict_s", "features_used"])
    path = write_results("napari", {"frame_shape": [1024, 1024], "repeats": repeats,
                                    "load_average_at_start": load,
                                    "target_seconds": TARGET_SECONDS, "rows": rows},
                         command_line("xvfb-run -a python"))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
