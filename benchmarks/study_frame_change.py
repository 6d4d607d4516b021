"""Does napari's asynchronous slicing shorten the stall of a frame change? Real window, fly stack.

Run (needs a display; Xvfb is enough), alternating the setting between processes::

    QT_API=pyqt6 NAPARI_ASYNC=0 xvfb-run -a python benchmarks/study_frame_change.py
    QT_API=pyqt6 NAPARI_ASYNC=1 xvfb-run -a python benchmarks/study_frame_change.py

``NAPARI_ASYNC=1`` is napari's public switch for Preferences > Experimental > "Render Layers
Asynchronously" (``napari.settings.get_settings().experimental.async_``), here for this process
only, so the user's saved settings are not touched. Appends one JSON line per run to
benchmarks/results/frame_change_study.jsonl and prints a table.

The window holds the 10 fly frames (1024x1024, fly_masks_dev) with their scribbles and the
Pixel classifier docked (its segmentation layer shown, live update off), as in
``bench_napari.py``. The time slider is moved one frame at a time; for each move the stall is
the longest gap of a 10 ms timer on the GUI thread (`napari_session.EventLoopMonitor`) from
the move until the window has been idle for 0.5 s (so a slice finished in a thread and drawn
later is counted), next to the bare canvas repaint (the floor) measured between moves.
"""

import argparse
import json
import os
import statistics
import time

from _common import RESULTS, cpu_model, print_table


def _settle(app, seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        app.processEvents()
        time.sleep(0.01)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    import napari
    from napari.settings import get_settings
    from qtpy.QtWidgets import QApplication
    from bench_napari import make_session
    from napari_session import bare_repaint_stall, cpu_slowdown

    load = os.getloadavg()[0]
    viewer, widget, layer, monitor, _ = make_session()     # flies, scribbles, the widget docked
    app = QApplication.instance()
    n_frames = layer.data.shape[0]
    _settle(app, 1.0)
    rows = []
    for repeat in range(args.repeats):
        _settle(app, 0.2)
        floor = bare_repaint_stall(viewer, monitor)
        _settle(app, 0.2)
        monitor.mark()
        viewer.dims.set_current_step(0, (repeat + 1) % n_frames)
        _settle(app, 0.5)
        rows.append({"stall_s": monitor.longest_gap()[0], "floor_s": floor,
                     "slowdown": cpu_slowdown(), "load": os.getloadavg()[0]})
    monitor.stop()
    asynchronous = bool(get_settings().experimental.async_)
    result = {"napari": napari.__version__, "async_slicing": asynchronous, "cpu": cpu_model(),
              "load_average_at_start": load, "rows": rows,
              "stall_median_s": statistics.median(r["stall_s"] for r in rows),
              "floor_median_s": statistics.median(r["floor_s"] for r in rows)}
    with open(RESULTS / "frame_change_study.jsonl", "a") as fh:
        fh.write(json.dumps(result) + "\n")
    print(f"{result['cpu']}; napari {napari.__version__}; asynchronous slicing: {asynchronous}; "
          f"load at start {load:.2f}")
    print_table([{"frame change": "fly stack + scribbles + our segmentation",
                  "n": len(rows), "stall_median_ms": round(1000 * result["stall_median_s"]),
                  "stall_max_ms": round(1000 * max(r["stall_s"] for r in rows)),
                  "floor_median_ms": round(1000 * result["floor_median_s"]),
                  "slowdown": round(statistics.median(r["slowdown"] for r in rows), 2),
                  "load": round(statistics.median(r["load"] for r in rows), 2)}],
                ["frame change", "n", "stall_median_ms", "stall_max_ms", "floor_median_ms",
                 "slowdown", "load"])


if __name__ == "__main__":
    main()
