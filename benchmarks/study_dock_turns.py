"""The dock and New on a second image, turn by turn, with a profile of every turn: what in
each event-loop turn is ours and what is napari's, Qt's and vispy's; and what of napari's own
Labels add depends on the data.

Run: ``QT_API=pyqt6 xvfb-run -a python benchmarks/study_dock_turns.py [--checkout DIR]
[--repeats 3]``. Prints tables; nothing is written.

The window is ``bench_napari_adds.py``'s (the 10 fly frames, 1024², and a scribble layer; the
plugin from ``--checkout``, default this one). Steps, each measured like there (a 10 ms
timer on the GUI thread, `napari_session.EventLoopMonitor`; every gap over 25 ms is a turn):

* **dock** the Pixel classifier (once per process: its turns include napari's first brush of
  the session; with ``--brush-first`` that brush is measured before, as napari's own paint
  mode on the scribble layer) and **New** on a second image, the 512x384 RGB photo
  (``--repeats`` times);
* **napari's own Labels add** with the repaint held a turn (what the plugin's adds do), of
  several data: ``np.zeros`` of the fly stack's shape and of the photo's, and the plugin's
  lazily allocated `FrameLabels` of 10 and of 1500 frames of 1024², uint8 and uint16
  (``--repeats`` times each).

For every turn a cProfile runs from one tick of the timer to the next (so each turn has its
own profile); the table gives, per turn, its wall time, the GUI thread's CPU time
(``time.thread_time``) and the seconds under marker functions (inclusive: a row's time
contains the rows indented under it), with, first, the plugin's own work in the turn (its
functions' own time and that of what they call directly outside napari, Qt and vispy; the
three largest plugin functions below it), and in the summary that in each step's longest turn.
cProfile slows Python code about 1.5-2x, Qt's and Mesa's C++ not at all: read the shares,
and the wall times of ``bench_napari_adds.py``.
"""

import argparse
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import REPO, cpu_model, print_table

# (row, file part, function, "ct" inclusive | "tt" own time); the rows shown per turn
MARKS = [
    ("ours: PixelClassifierWidget.__init__", "_widget.py", "__init__", "ct"),
    ("  ours: Qt widgets (_build_ui)", "_widget.py", "_build_ui", "ct"),
    ("  ours: layer choices, class table (_refresh_layer_choices)", "_widget.py",
     "_refresh_layer_choices", "ct"),
    ("ours: class colours and names into layers (_publish_classes)", "_widget.py",
     "_publish_classes", "ct"),
    ("ours: layers moved in order (_arrange_layers)", "_widget.py", "_arrange_layers", "ct"),
    ("ours: selection given back (_keep_selected)", "_widget.py", "_keep_selected", "ct"),
    ("ours: layer data (new_labels)", "_controller.py", "new_labels", "ct"),
    ("napari: add_dock_widget", "qt_main_window.py", "add_dock_widget", "ct"),
    ("  napari: settings file saved", "settings/_base.py", "save", "ct"),
    ("napari: Labels.__init__", "layers/labels/labels.py", "__init__", "ct"),
    ("napari: LayerList.insert", "components/layerlist.py", "insert", "ct"),
    ("  napari: vispy layer + overlays (QtViewer._add_layer)", "_qt/qt_viewer.py",
     "_add_layer", "ct"),
    ("    napari: Labels overlays (_update_layer_overlays)", "_vispy/canvas.py",
     "_update_layer_overlays", "ct"),
    ("  napari: Qt layer controls made (_add)", "qt_layer_controls_container.py", "_add", "ct"),
    ("  napari: selection switched (Selection.active)", "_selection.py", "active", "ct"),
    ("napari: layer controls switched (_populate)", "qt_layer_controls_container.py",
     "_populate", "ct"),
    ("napari: layers moved (move)", "_evented_list.py", "move", "ct"),
    ("napari: paint mode, the brush (Labels.mode)", "layers/labels/labels.py", "mode", "ct"),
    ("repaint: vispy draw (paintGL)", "backends/_qt.py", "paintGL", "ct"),
    ("  repaint: shaders built", "shaders/program.py", "_build", "ct"),
    ("  repaint: textures uploaded (glTexSubImage2D)", "_pyopengl2.py", "glTexSubImage2D",
     "ct"),
    ("repaint: Qt painting the window (C++)", "", "_QtMainWindow.event", "tt"),
]

CHILD = r"""
import cProfile, json, os, sys, time
import msclassify, msclassify_napari      # the checkout's (PYTHONPATH), before the helpers
sys.path.insert(0, {benchmarks!r})
import numpy as np
from qtpy.QtWidgets import QApplication
from napari_session import (EventLoopMonitor, fly_stack_window, second_image, settle,
                            wait_until)
from bench_napari import larvae_photo
from study_dock_turns import breakdown

viewer, frames = fly_stack_window()
window = viewer.window._qt_window
app = QApplication.instance()
monitor = EventLoopMonitor()
settle(app, 30)
profiles = []


def swap():                              # a new profile at every tick: one per turn
    if profiles and profiles[-1][2] is not None:
        profiles[-1][2].disable()
        profiles[-1][1] = time.perf_counter()
        profile = cProfile.Profile()
        profiles.append([time.perf_counter(), None, profile])
        profile.enable()


monitor._timer.timeout.connect(swap)
out = {{}}


def measure(step, action, after=50):
    settle(app, 10)
    del profiles[:]
    profile = cProfile.Profile()
    profiles.append([time.perf_counter(), None, profile])
    monitor.mark()
    profile.enable()
    action()
    settle(app, after)
    profiles[-1][2].disable()
    profiles[-1][1] = time.perf_counter()
    profiles[-1][2] = None
    turns = monitor.turns()
    long = [p for p in profiles[:-1] if p[1] - p[0] > 0.025]
    rows = [{{"wall_s": wall, "cpu_s": cpu,
              "parts": breakdown(p[2]) if len(long) == len(turns) else {{}}}}
            for (wall, cpu), p in zip(turns, long)]
    out.setdefault(step, []).append(rows)


from msclassify_napari._widget import PixelClassifierWidget
from msclassify_napari._frame_labels import FrameLabels
widget = None


def dock():
    global widget
    widget = PixelClassifierWidget(viewer)
    viewer.window.add_dock_widget(widget, name="Pixel classifier")
    settle(app, 30)
    from msclassify_napari._preload import preloaded
    wait_until(lambda: preloaded() is not None, 300)


if {brush_first}:                         # napari's own first brush, before the dock
    def brush():
        viewer.layers["scribbles"].mode = "paint"
    measure("napari: the session's first paint mode (brush)", brush)
    viewer.layers["scribbles"].mode = "pan_zoom"
    settle(app, 20)
measure("dock the Pixel classifier", dock)
photo = larvae_photo()[0]
for repeat in range({repeats}):
    with second_image(viewer, widget, photo):
        measure("New, second image", widget.new_scribble_layer)


def held_add(make):
    def action():
        window.setUpdatesEnabled(False)
        from qtpy.QtCore import QTimer
        QTimer.singleShot(0, lambda: window.setUpdatesEnabled(True))
        viewer.add_labels(make(), name="plain")
    return action


datas = {{"np.zeros, 10x1024x1024 uint8": lambda: np.zeros(frames.shape, np.uint8),
          "FrameLabels, 10x1024x1024 uint8": lambda: FrameLabels(10, (1024, 1024)),
          "FrameLabels, 1500x1024x1024 uint8": lambda: FrameLabels(1500, (1024, 1024)),
          "FrameLabels, 1500x1024x1024 uint16": lambda: FrameLabels(1500, (1024, 1024),
                                                                    np.uint16),
          "np.zeros, 384x512 uint8 (the photo's)": lambda: np.zeros((384, 512), np.uint8)}}
for repeat in range({repeats}):
    for name, make in datas.items():
        measure("napari: add a Labels layer, held: " + name, held_add(make))
        viewer.layers.remove("plain")
        settle(app, 20)
        viewer.layers.selection.active = viewer.layers["scribbles"]
out["load"] = os.getloadavg()[0]
out["plugin"] = msclassify_napari.__file__
print("RESULT " + json.dumps(out))
"""


OURS = "ours: the plugin's own work (its functions and what they call outside napari, Qt)"
PLUGIN = "msclassify_napari"
# calls from the plugin into these are napari's (and Qt's, vispy's) work, not ours
NAPARI = ("napari", "vispy", "qtpy", "PyQt", "superqt", "app_model", "psygnal", "magicgui")


def _ours(path):
    return PLUGIN in path


def _napari(path):
    return not _ours(path) and any(part in path for part in NAPARI)


def breakdown(profile):
    """Seconds under each of `MARKS` in a cProfile ``profile``, and `OURS`: the plugin's
    functions' own time and that of what they call directly outside napari, Qt and vispy
    (its three largest plugin functions too; rows under 0.5 ms left out)."""
    stats = pstats.Stats(profile).stats
    parts = {}
    for row, where, name, field in MARKS:
        total = 0.0
        for (path, _, function), (_, _, own, inclusive, _) in stats.items():
            if (function == name and where in path) or (not where and name in function):
                total += inclusive if field == "ct" else own
        if total > 0.0005:
            parts[row] = total
    # the plugin's functions' own time, and what they call directly outside the plugin
    # that is not napari's, Qt's or vispy's (NumPy, Python), per plugin function
    own = {}
    for (path, _, function), (_, _, tt, _, callers) in stats.items():
        if _ours(path):
            key = f"  ours: {Path(path).name}:{function}"
            own[key] = own.get(key, 0.0) + tt
        elif not _napari(f"{path} {function}"):       # (Qt's methods: path "~")
            for (caller, _, name), edge in callers.items():
                if _ours(caller):
                    key = f"  ours: {Path(caller).name}:{name}"
                    own[key] = own.get(key, 0.0) + edge[3]
    if sum(own.values()) > 0.0005:
        parts[OURS] = sum(own.values())
        # the three longest, each its own row
        parts.update(sorted(own.items(), key=lambda entry: -entry[1])[:3])
    return parts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=REPO,
                        help="the checkout whose plugin runs (default: this one)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--brush-first", action="store_true",
                        help="put the scribble layer in paint mode (napari's first brush of "
                             "the session) before docking, as a step of its own")
    args = parser.parse_args()
    import json
    checkout = args.checkout.resolve()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(checkout), str(checkout / "plugins"), str(REPO / "benchmarks")])}
    code = CHILD.format(benchmarks=str(REPO / "benchmarks"), repeats=args.repeats,
                        brush_first=args.brush_first)
    start = os.getloadavg()[0]
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=checkout, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        sys.exit(f"the session failed:\n{done.stderr[-3000:]}")
    out = json.loads(lines[-1][len("RESULT "):])
    plugin = out.pop("plugin")
    if not Path(plugin).resolve().is_relative_to(checkout):
        sys.exit(f"the session ran the plugin at {plugin}, not {checkout}'s")
    print(f"{cpu_model()}; plugin from {checkout}; load {start:.1f} at the start, "
          f"{out.pop('load'):.1f} at the end; {time.strftime('%H:%M UTC', time.gmtime())}")
    summary = []
    for step, measures in out.items():
        longest = [max(turns, key=lambda turn: turn["wall_s"]) for turns in measures if turns]
        summary.append({"step": step, "n": len(longest),
                        "turns_ms": " · ".join(
                            f"{1000 * turn['wall_s']:.0f}" for turn in measures[0]),
                        "longest_turn_ms": round(1000 * statistics.median(
                            turn["wall_s"] for turn in longest)),
                        "its_cpu_ms": round(1000 * statistics.median(
                            turn["cpu_s"] for turn in longest)),
                        "ours_in_it_ms": round(1000 * statistics.median(
                            turn["parts"].get(OURS, 0.0) for turn in longest), 1)})
    print_table(summary, list(summary[0]))
    for step, measures in out.items():
        if step.startswith("napari"):
            continue
        turns = measures[0]
        print(f"\n{step} (first measure): each turn's wall / CPU ms, and what ran in it (ms)")
        rows = []
        entries = sorted({part for turn in turns for part in turn["parts"]
                          if part.startswith("  ours: ")})
        for row in [OURS] + entries + [row for row, *_ in MARKS]:
            values = [turn["parts"].get(row) for turn in turns]
            if any(values):
                rows.append({"part": row, **{
                    f"{index}: {1000 * turn['wall_s']:.0f}/{1000 * turn['cpu_s']:.0f}":
                    "" if value is None else f"{1000 * value:.0f}"
                    for index, (turn, value) in enumerate(zip(turns, values), 1)}})
        print_table(rows, list(rows[0]))


if __name__ == "__main__":
    main()
