"""Panning a large image in napari while the whole image is segmented in the background:
the GUI thread's stalls with the background run at normal and at lower CPU priority.

Run (needs a display; Xvfb is enough): ``QT_API=pyqt6 xvfb-run -a python
benchmarks/study_background_pan.py --tmp DIR [--rounds 3] [--seconds 8]``, where ``DIR``
holds ``mosaic_8192.ome.zarr`` and a model ``mosaic_8192.labels.msc`` (both left there by
``bench_napari_large.py --tmp DIR``). Prints one table; nothing is written but the scratch
stores in ``DIR``.

The window shows the mosaic as napari's multiscale layer (the plugin's reader). Each round
runs, in this order: camera moves with nothing in the background (napari's own cost of
reading and drawing the levels), then `LargeImageJob.segment_whole` into a fresh store in a
worker thread for ``--seconds`` at each priority (``nice`` 0, then the plugin's
`BACKGROUND_NICE`; ``--nice 0,5,10`` for others), with one camera move every 0.4 s (a new
centre and zoom, as in ``bench_napari_large.py``). Stall = the longest gap of a 10 ms timer
on the GUI thread during each move (`EventLoopMonitor`); chunks/s is the background run's
throughput.
"""

import argparse
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

from _common import REPO, cpu_model, print_table

sys.path.insert(0, str(REPO / "plugins"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--nice", default=None,
                        help="comma-separated nice values to compare (default: 0 and the "
                             "plugin's BACKGROUND_NICE)")
    args = parser.parse_args()
    import napari
    from qtpy.QtWidgets import QApplication

    from msclassify.models import load_model
    from msclassify.pixel import BACKGROUND_NICE
    from msclassify_napari._large import LargeImageJob
    from msclassify_napari._zarr_reader import read_ome_zarr
    from bench_napari_large import stall_while
    from napari_session import EventLoopMonitor, bare_repaint_stall, cpu_slowdown

    nices = [int(n) for n in args.nice.split(",")] if args.nice else [0, BACKGROUND_NICE]
    tmp = Path(args.tmp)
    source = tmp / f"mosaic_{args.size}.ome.zarr"
    model = load_model(tmp / f"mosaic_{args.size}.labels.msc")
    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(1500, 1050)
    app = QApplication.instance()
    for data, kwargs, kind in read_ome_zarr(source):
        viewer.add_image(data, **kwargs)
    job = LargeImageJob(model, str(source))
    monitor = EventLoopMonitor()
    fit_zoom = min(viewer.canvas.size) / args.size
    rng = np.random.default_rng(1)

    def camera_move():
        viewer.scene.camera.center = tuple(rng.uniform(0.1, 0.9, 2) * args.size)
        viewer.scene.camera.zoom = float(np.exp(rng.uniform(np.log(fit_zoom), np.log(2.0))))

    def pan(seconds):
        stalls = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            camera_move()
            stalls.append(stall_while(app, monitor, 0.4))
        return stalls

    rows = []
    for round_ in range(args.rounds):
        rows.append({"background": "none (napari's own)", "stalls": pan(args.seconds),
                     "chunks_per_s": float("nan"), "load": os.getloadavg()[0],
                     "slowdown": cpu_slowdown(), "floor": bare_repaint_stall(viewer, monitor)})
        for nice in nices:
            output = tmp / f"study_pan_{nice}.zarr"
            shutil.rmtree(output, ignore_errors=True)
            stop, done = threading.Event(), []

            def run():
                job.segment_whole(output, should_stop=stop.is_set, nice=nice,
                                  on_progress=lambda *_: done.append(time.perf_counter()))

            thread = threading.Thread(target=run)
            start = time.perf_counter()
            thread.start()
            stalls = pan(args.seconds)
            stop.set()
            while thread.is_alive():
                app.processEvents()
                time.sleep(0.01)
            chunks = [t for t in done if t <= start + args.seconds]
            rows.append({"background": f"whole image, nice {nice}", "stalls": stalls,
                         "chunks_per_s": len(chunks) / args.seconds,
                         "load": os.getloadavg()[0], "slowdown": cpu_slowdown(),
                         "floor": bare_repaint_stall(viewer, monitor)})
            shutil.rmtree(output, ignore_errors=True)
    monitor.stop()
    table = []
    for name in dict.fromkeys(row["background"] for row in rows):
        chosen = [row for row in rows if row["background"] == name]
        stalls = [s for row in chosen for s in row["stalls"]]
        table.append({"background": name, "moves": len(stalls),
                      "stall_median_ms": round(1000 * statistics.median(stalls)),
                      "stall_p90_ms": round(1000 * float(np.percentile(stalls, 90))),
                      "stall_max_ms": round(1000 * max(stalls)),
                      "chunks_per_s": round(statistics.median(r["chunks_per_s"]
                                                              for r in chosen), 2),
                      "floor_ms": round(1000 * statistics.median(r["floor"] for r in chosen)),
                      "load": round(statistics.median(r["load"] for r in chosen), 2),
                      "slowdown": round(statistics.median(r["slowdown"] for r in chosen), 2)})
    print(f"{cpu_model()}; {args.rounds} rounds of {args.seconds:.0f} s, interleaved")
    print_table(table, ["background", "moves", "stall_median_ms", "stall_p90_ms", "stall_max_ms",
                        "chunks_per_s", "floor_ms", "load", "slowdown"])
    viewer.close()


if __name__ == "__main__":
    main()
