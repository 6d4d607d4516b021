"""The napari Volume dock: the window's stalls for each action, against napari's own add.

Run under a display::

    QT_API=pyqt6 xvfb-run -a python benchmarks/bench_napari_volume.py [--slices 64] \
        [--rounds 2] [--compare DIR]

Each round is a fresh process (a fresh session): a real napari viewer with an EM volume
(512x512 slices of ``isbi2012_em``, spacing 50 x 4 x 4) and the Volume dock. In the same session
it measures, as the window's longest stall (the longest gap of a 10 ms timer on the GUI thread,
``napari_session.EventLoopMonitor``; every gap over 25 ms is a turn):

* **napari's own**: ``viewer.add_labels`` of zeros of the volume's shape, plain and with the
  window's repaint held a turn (what the plugin's `_layers.repaint_next_turn` does around each
  of its adds), and the **bare canvas repaint** (the floor of every stall on this machine),
  interleaved ``--repeats`` times (after one unrecorded add: a session's first Labels layer
  pays napari's lazy set-up);
* **the dock's actions**: New scribbles (until its segmentation layer is in and drawn), Train
  (from the click until the plane is shown: the worker shares the GIL), a live update after
  each of ``--strokes`` brush strokes, Apply to volume (until the last chunk is shown).

Each action's row gives ours, napari's own held add and the floor of the same sessions. It
also times the dock's own callbacks on the GUI thread (the old table: starting Train, showing
the plane, a stroke's paint event, starting Apply, showing a chunk). ``--compare DIR``
alternates the rounds with another checkout (``PYTHONPATH=DIR:DIR/plugins``; e.g. a ``git
archive`` copy of main). Writes benchmarks/results/napari_volume.json.
"""

import argparse
import statistics
import sys
from pathlib import Path

from _common import (REPO, cpu_model, napari_checkouts, napari_child, print_table,
                     write_checkouts_results)

_CHILD = r"""
import sys
# the checkout's plugin and core first (PYTHONPATH), before the benchmarks put this one's first
import msclassify, msclassify.pixel, msclassify_napari, msclassify_napari._volume
sys.path.insert(0, {benchmarks!r})
from bench_napari_volume import session
session({slices}, {n_estimators}, {strokes}, {repeats})
"""

NAPARI_HELD = "napari: add_labels, the volume's shape, repaint held a turn"
FLOOR = "bare canvas repaint (floor)"
ACTIONS = ("Volume New (scribbles + segmentation layer)", "Train (click to the plane shown)",
           "a stroke with Live update on (to the plane shown)",
           "Apply to volume (click to the last chunk shown)")


def session(slices, n_estimators, strokes, repeats):
    """One napari session (run in a child process by `main`); prints ``RESULT {json}``."""
    import json
    import os
    import time

    import napari
    import numpy as np
    from bench_volumes import EM_SPACING, em_volume, load_em_volume
    from napari_session import EventLoopMonitor, bare_repaint_stall, settle, wait_until
    from qtpy.QtCore import QTimer
    from qtpy.QtWidgets import QApplication

    from msclassify_napari._controller import ClassifierSettings
    from msclassify_napari._preload import preload_classifier
    from msclassify_napari._volume import SCRIBBLES, SEGMENTATION, VolumeWidget

    volume = em_volume(slices)
    scribbles = np.zeros(volume.shape, np.uint8)
    train = load_em_volume()["labels"]                   # em_scribbles on slices 0-4
    scribbles[:train.shape[0]] = train
    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(1400, 900)
    window = viewer.window._qt_window
    viewer.add_image(volume, name="em", scale=EM_SPACING)
    dock = VolumeWidget(viewer)
    dock.settings = ClassifierSettings(n_estimators=n_estimators)
    viewer.window.add_dock_widget(dock, name="Volume")
    # what docking it from the menu does in the background (`_dock.VolumeDock`): the classifier
    # imported, the kernels loaded, the collector paused (else the first Train's imports hold
    # the GIL, 0.6-0.8 s stalls)
    preload_classifier()
    app = QApplication.instance()
    monitor = EventLoopMonitor()
    settle(app, 30)
    out = {"load at start": os.getloadavg()[0], "shape": list(volume.shape)}
    gui = {}

    def timed(name, function):                 # the dock's own callbacks, GUI thread
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                gui.setdefault(name, []).append(time.perf_counter() - start)
        return wrapper

    for name in ("train", "_show_plane", "_painted", "apply", "_show_chunk"):
        setattr(dock, name, timed(name, getattr(dock, name)))

    def measure(step, action, done=lambda: True, after=40):
        settle(app, 10)
        monitor.mark()
        action()
        wait_until(done, 1800)
        settle(app, after)
        out.setdefault(step, []).append({
            "stall_s": monitor.longest_gap()[0],
            "turns_s": [wall for wall, _ in monitor.turns()]})

    def napari_add(held):
        def action():
            if held:
                window.setUpdatesEnabled(False)
                QTimer.singleShot(0, lambda: window.setUpdatesEnabled(True))
            viewer.add_labels(np.zeros(volume.shape, np.uint8), name="peer", scale=EM_SPACING)
        return action

    napari_add(False)()                         # the session's first Labels layer: unrecorded
    settle(app, 30)
    viewer.layers.remove("peer")
    for _ in range(repeats):                    # napari's own, interleaved
        for held in (False, True):
            measure("napari: add_labels, the volume's shape"
                    + (", repaint held a turn" if held else ""), napari_add(held))
            viewer.layers.remove("peer")
        out.setdefault(FLOOR, []).append({"stall_s": bare_repaint_stall(viewer, monitor),
                                          "turns_s": []})
    viewer.layers.selection.active = viewer.layers["em"]
    for repeat in range(repeats):
        measure(ACTIONS[0], dock.new_scribbles,
                lambda: SEGMENTATION in viewer.layers and SCRIBBLES in viewer.layers, after=60)
        if repeat < repeats - 1:
            for name in (SCRIBBLES, SEGMENTATION):
                viewer.layers.remove(name)
            viewer.layers.selection.active = viewer.layers["em"]
            settle(app, 20)
    layer = viewer.layers[SCRIBBLES]
    layer.data = scribbles
    viewer.dims.set_current_step(0, 2)
    settle(app, 20)
    start = time.perf_counter()
    measure(ACTIONS[1], lambda: dock.train(live=False),
            lambda: dock.worker is None and "segmented" in dock.status.text())
    out["train + plane wall s"] = time.perf_counter() - start
    dock.live.setChecked(True)
    out["live update wall s"] = []
    for stroke in range(strokes):               # a brush stroke on the plane on screen
        dock.status.setText("")
        start = time.perf_counter()
        measure(ACTIONS[2], lambda: layer.paint((2, 60 + 40 * stroke, 200), 1),
                lambda: dock.worker is None and "segmented" in dock.status.text())
        out["live update wall s"].append(time.perf_counter() - start)
    dock.live.setChecked(False)
    start = time.perf_counter()
    measure(ACTIONS[3], dock.apply, lambda: dock.worker is None and "done" in dock.status.text())
    out["apply wall s"] = time.perf_counter() - start
    out["GUI thread s"] = gui
    out["load"] = os.getloadavg()[0]
    out["plugin"] = sys.modules["msclassify_napari"].__file__
    viewer.close()
    print("RESULT " + json.dumps(out))


def run(checkout, args):
    code = _CHILD.format(benchmarks=str(REPO / "benchmarks"), slices=args.slices,
                         n_estimators=args.n_estimators, strokes=args.strokes,
                         repeats=args.repeats)
    result = napari_child(code, checkout)
    if not Path(result["plugin"]).resolve().is_relative_to(Path(checkout).resolve()):
        raise RuntimeError(f"the session for {checkout} ran the plugin at {result['plugin']}")
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=64)
    parser.add_argument("--n-estimators", type=int, default=30)
    parser.add_argument("--strokes", type=int, default=3, help="live updates timed")
    parser.add_argument("--repeats", type=int, default=3,
                        help="napari's adds, the floor and New per session")
    parser.add_argument("--rounds", type=int, default=1, help="fresh sessions per checkout")
    parser.add_argument("--compare", metavar="DIR", type=Path,
                        help="another checkout to alternate with (before)")
    args = parser.parse_args()
    checkouts, runs = napari_checkouts(args.compare, args.rounds, lambda c: run(c, args))

    def stalls(label, step):
        return [m["stall_s"] for r in runs[label] for m in r[step]]

    rows, calls = [], []
    for label in checkouts:
        held, floor = statistics.median(stalls(label, NAPARI_HELD)), \
            statistics.median(stalls(label, FLOOR))
        for step in ("napari: add_labels, the volume's shape", NAPARI_HELD) + ACTIONS:
            ours = stalls(label, step)
            turns = [m["turns_s"] for r in runs[label] for m in r[step]]
            rows.append({"step": step, "checkout": label, "n": len(ours),
                         "stall_median_s": statistics.median(ours), "stall_max_s": max(ours),
                         "napari_held_median_s": held, "floor_median_s": floor,
                         "of_napari_held": statistics.median(ours) / held,
                         "turns_over_25ms": statistics.median(len(t) for t in turns),
                         "load": statistics.median(r["load"] for r in runs[label])})
        for name in runs[label][0]["GUI thread s"]:
            times = [t for r in runs[label] for t in r["GUI thread s"][name]]
            calls.append({"dock callback (GUI thread)": name, "checkout": label,
                          "n": len(times), "median_ms": 1000 * statistics.median(times),
                          "max_ms": 1000 * max(times)})
    print(f"{cpu_model()}; stalls in seconds, medians over sessions x repeats")
    print_table(rows, list(rows[0]))
    print_table(calls, list(calls[0]))
    for label in checkouts:
        for r in runs[label]:
            print(f"{label}: train + plane {r['train + plane wall s']:.1f} s, live updates "
                  f"{', '.join(f'{w:.1f}' for w in r['live update wall s'])} s, apply "
                  f"{r['apply wall s']:.1f} s (worker threads), load {r['load at start']:.1f}"
                  f" -> {r['load']:.1f}")
    write_checkouts_results("napari_volume", vars(args) | {"compare": str(args.compare)},
                            checkouts, rows + calls, runs)


if __name__ == "__main__":
    sys.exit(main())
