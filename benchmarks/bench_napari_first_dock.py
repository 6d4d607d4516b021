"""A session's first use of the plugin, as a user meets it: open a video, then dock the Pixel
classifier from the Plugins menu; the longest stall of the window at each step.

Docking the first time imports the classifier's libraries (SciPy, scikit-learn, pandas,
Numba). ``bench_napari.py`` imports the widget before it measures the dock, so it does not see
that; this script does, each round in a fresh process (a fresh session):

1. **open** ``fly_sleap/clip.mp4`` with the plugin's reader (the plugin's first use: napari
   activates it, and the plugin starts loading the classifier in a background thread);
   (the JSON has the open's turns over 25 ms, the modules it imported and whether the
   background load had begun by its end);
2. **look at the video** for ``--wait`` seconds (events processed; the longest stall while
   the classifier loads in the background);
3. **dock** *Plugins > Pixel classifier* (``add_plugin_dock_widget``), until the first fit's
   kernels are loaded.

Stall = the longest gap of a 10 ms timer on the GUI thread (``napari_session``).
``--first dock`` makes docking the plugin's very first action (an image in the window, no
video); ``--dock NAME`` picks the dock (e.g. ``Volume``, ``Object table and tracks``).
``--compare DIR`` alternates the rounds with another checkout (e.g. ``/work/main``: before),
``PYTHONPATH=DIR:DIR/plugins``, the same machinery. Run::

    QT_API=pyqt6 xvfb-run -a python benchmarks/bench_napari_first_dock.py --compare /work/main

Writes benchmarks/results/napari_first_dock[_dock_NAME].json and prints a table (medians of the
rounds).
"""

import argparse
import statistics
from pathlib import Path

from _common import (REPO, SHARED_DATA, napari_checkouts, napari_child, print_table,
                     write_checkouts_results)

_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {benchmarks!r})
import napari
from qtpy.QtWidgets import QApplication
from napari_session import EventLoopMonitor, settle, wait_until



viewer = napari.Viewer(show=True)
viewer.window._qt_window.resize(1500, 1050)
app = QApplication.instance()
monitor = EventLoopMonitor()
settle(app, 30)
out = {{}}
if {open_first}:
    modules = set(sys.modules)
    monitor.mark()
    viewer.open({video!r}, plugin="msclassify")
    out["open_modules"] = len(set(sys.modules) - modules)
    out["loading_in_open"] = "msclassify.pixel" in sys.modules   # the background load began
    settle(app, 30)
    out["open"] = monitor.longest_gap()[0]
    gaps = [b - a for a, b in zip(monitor._marked_at + monitor.ticks[monitor._start:],
                                  monitor.ticks[monitor._start:])]
    out["open_turns"] = [round(g, 3) for g in gaps if g > 0.025]
    monitor.mark()
    end = time.perf_counter() + {wait}
    while time.perf_counter() < end:
        app.processEvents()
        time.sleep(0.005)
    out["wait"] = monitor.longest_gap()[0]
else:
    viewer.add_image(__import__("numpy").zeros((1024, 1024), "uint8"), name="an image")
    settle(app, 30)
monitor.mark()
begin = time.perf_counter()
_, widget = viewer.window.add_plugin_dock_widget("msclassify", {dock!r})
out["dock_call_s"] = time.perf_counter() - begin
settle(app, 30)
if hasattr(widget, "loaded"):            # a LoadingDock: until the real widget is in it
    wait_until(lambda: widget.widget is not None, 300)
    out["widget_after_s"] = time.perf_counter() - begin
try:
    from msclassify_napari._preload import preloaded
    if {dock!r} == "Pixel classifier":   # (the only dock that loads it in every checkout)
        wait_until(lambda: preloaded() is not None, 300)
except ImportError:                      # a checkout without it: nothing loads in the back
    pass
settle(app, 30)
out["dock"] = monitor.longest_gap()[0]
out["load"] = os.getloadavg()[0]
out["plugin"] = sys.modules["msclassify_napari"].__file__
out["msclassify"] = sys.modules["msclassify"].__file__
print("RESULT " + json.dumps(out))
"""


def run(checkout, wait, first, dock):
    code = _CHILD.format(benchmarks=str(REPO / "benchmarks"), wait=wait, dock=dock,
                         open_first=first == "video",
                         video=str(SHARED_DATA / "fly_sleap" / "clip.mp4"))
    return napari_child(code, checkout, timeout=900)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--wait", type=float, default=5.0,
                        help="seconds between opening the video and docking")
    parser.add_argument("--first", choices=["video", "dock"], default="video",
                        help="the plugin's first use: open the video (then dock), or dock")
    parser.add_argument("--dock", default="Pixel classifier",
                        help="which dock (its name in the Plugins menu)")
    parser.add_argument("--compare", metavar="DIR", type=Path,
                        help="another checkout to alternate with (before)")
    args = parser.parse_args()
    checkouts, runs = napari_checkouts(
        args.compare, args.rounds, lambda checkout: run(checkout, args.wait, args.first, args.dock))
    rows = []
    for label in checkouts:
        for step, name in (("open", "open the video (first use: the plugin activates)"),
                           ("wait", f"look at it for {args.wait:g} s"),
                           ("dock", f"dock {args.dock} from the Plugins menu"
                                    + (" (first use)" if args.first == "dock" else ""))):
            if step not in runs[label][0]:
                continue
            values = [r[step] for r in runs[label]]
            rows.append({"checkout": label, "step": name, "stall_s": statistics.median(values),
                         "stall_max_s": max(values),
                         "load": statistics.median(r["load"] for r in runs[label])})
    print_table(rows, list(rows[0]))
    name = "napari_first_dock" if (args.first, args.dock) == ("video", "Pixel classifier") \
        else f"napari_first_dock_{args.first}_{args.dock.split()[0].lower()}"
    write_checkouts_results(name, {"rounds": args.rounds, "wait_s": args.wait,
                                   "first": args.first, "dock": args.dock},
                            checkouts, rows, runs)


if __name__ == "__main__":
    main()
