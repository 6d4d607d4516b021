"""The plugin's layer adds in the real napari window, and napari's own, turn by turn.

Each round is a fresh process (a fresh session) with the fly frames and their scribbles
shown, as in ``bench_napari.py``; it measures the window's longest stall (the longest gap of
a 10 ms timer on the GUI thread, ``napari_session``) and every gap over 25 ms (the turns) of:

* **dock** the Pixel classifier (it adds the image's segmentation layer in a later turn),
  until the first fit's kernels are loaded in the background;
* **napari: add a Labels layer** of np.zeros of the fly stack's shape (napari's own, the
  reference the issue compares with), and the same add with the window's repaint held to
  the next turn (``QWidget.setUpdatesEnabled``, what the plugin's `repaint_next_turn` does);
* **New scribbles** on the fly stack (one layer: the segmentation exists) and on a second
  image, a 512x384 RGB photo (two layers: scribbles, then its segmentation);
* **Volume New**: the Volume dock on a 40x256x256 volume (scribbles, then the segmentation);
* the **bare canvas repaint** (the floor of every stall on this machine).

Each action of ours that adds layers (dock, both News, Volume New; Export adds none) is paired
in the same session with **napari's own** public-API equivalent (``napari's own: <action>``):
the same Labels layers, each ``viewer.add_labels(np.zeros(shape, dtype), scale=...)`` of the
shape, dtype and scale ours added (checked against them: the session fails otherwise) with the
window's repaint held a turn, one per event-loop turn 20 ms apart as the plugin's ``in_turns``,
then the layer ours puts in paint mode put in paint mode; for the dock, an empty ``QWidget``
docked first (``add_dock_widget``). The order of each pair alternates (repeat by repeat; the
dock, once a session, session by session, each checkout's first session ours first).
A second table gives per action ours, napari's own, the median of the pairs' differences and
the floor.

``--compare DIR`` alternates the rounds with another checkout (e.g. ``/work/main``: before),
``PYTHONPATH=DIR:DIR/plugins``. Run::

    QT_API=pyqt6 xvfb-run -a python benchmarks/bench_napari_adds.py --rounds 3 --compare /work/main

Writes benchmarks/results/napari_adds.json and prints a table (medians over rounds and
repeats; ``of_napari_add``: each stall divided by napari's own add in the same process, so
that the box's load, which changes between processes, cancels; ``turns`` is the median of
each gap over 25 ms, in order, over the measures with the most common number of them;
``longest_turn_cpu_s``: the GUI thread's CPU time in the longest turn, ``max_turn_cpu_s``: in
its most CPU-costly turn, medians: on a busy machine the work itself, which the wall times
hide under the waits for a core).
"""

import argparse
import statistics
from pathlib import Path

from _common import (REPO, cpu_model, napari_checkouts, napari_child, print_table,
                     write_checkouts_results)

_CHILD = r"""
import json, os, sys, time
# the checkout's plugin and core first (PYTHONPATH): the helpers below put this benchmark's own
# checkout first on sys.path, and without this both arms of --compare ran this one's plugin
import msclassify, msclassify_napari
sys.path.insert(0, {benchmarks!r})
import numpy as np
from qtpy.QtCore import QTimer
from qtpy.QtWidgets import QApplication, QWidget
from napari_session import (EventLoopMonitor, bare_repaint_stall, fly_stack_window,
                            second_image, settle, wait_until)
from bench_napari import larvae_photo

OWN_FIRST = {own_first}               # napari's own equivalent before ours (odd rounds)
viewer, frames = fly_stack_window()
window = viewer.window._qt_window
app = QApplication.instance()
monitor = EventLoopMonitor()
settle(app, 30)
out = {{}}
docked = []                           # napari's own dock (an empty QWidget), until removed


def measure(step, action, after=50):
    settle(app, 10)
    monitor.mark()
    action()
    settle(app, after)
    ticks = np.array(monitor._marked_at + monitor.ticks[monitor._start:])
    gaps = np.diff(ticks)
    turns = monitor.turns()
    out.setdefault(step, []).append({{"stall_s": float(gaps.max()),
                                     "turns_s": [wall for wall, _ in turns],
                                     "longest_cpu_s": max(turns)[1] if turns else 0.0,
                                     "max_cpu_s": max((cpu for _, cpu in turns), default=0.0)}})


def held(action):
    # the window's repaint held to the next turn, as the plugin's `repaint_next_turn` does
    def run():
        window.setUpdatesEnabled(False)
        QTimer.singleShot(0, lambda: window.setUpdatesEnabled(True))
        action()
    return run


def turns(steps, delay_ms=20):
    # one step per turn, each delay_ms after the loop came back: the plugin's `in_turns`
    steps[0]()
    if steps[1:]:
        QTimer.singleShot(0, lambda: QTimer.singleShot(delay_ms,
                                                       lambda: turns(steps[1:], delay_ms)))


def own(labels, paint=None, dock=False):
    # napari's own public-API equivalent of an action of ours: (an empty QWidget docked,)
    # each Labels layer ours adds, as viewer.add_labels of np.zeros of its shape, dtype and
    # scale held a turn, (the layer `paint` in paint mode,) one per turn
    def action():
        steps = []
        if dock:
            steps.append(lambda: docked.append(viewer.window.add_dock_widget(QWidget(),
                                                                             name="own dock")))
        for name, shape, dtype, scale in labels:
            steps.append(held(lambda name=name, shape=shape, dtype=dtype, scale=scale:
                              viewer.add_labels(np.zeros(shape, dtype), name="own " + name,
                                                scale=scale)))
        if paint is not None:
            steps.append(held(lambda: setattr(viewer.layers[paint], "mode", "paint")))
        turns(steps)
    return action


def added_labels(before):
    return [(layer.name, tuple(layer.data.shape), str(layer.data.dtype),
             tuple(float(v) for v in layer.scale))
            for layer in viewer.layers if layer.name not in before
            and type(layer).__name__ == "Labels"]


def pair(step, ours, labels, paint=None, dock=False, own_first=False):
    # ours and napari's own equivalent (same labels), in the order given; returns ours' layers
    before = {{layer.name for layer in viewer.layers}}
    mine = []
    def run_ours():
        measure(step, ours)
        mine.extend(added_labels(before))
    def run_own():
        measure("napari's own: " + step, own(labels, paint and ("own " + paint
                                                               if paint != "scribbles"
                                                               else paint), dock))
        for name, *_ in labels:
            viewer.layers.remove("own " + name)
        while docked:
            viewer.window.remove_dock_widget(docked.pop())
        if paint == "scribbles":
            viewer.layers["scribbles"].mode = "pan_zoom"
        settle(app, 20)
    for run in ((run_own, run_ours) if own_first else (run_ours, run_own)):
        run()
    expected = [(name, tuple(shape), dtype, tuple(scale)) for name, shape, dtype, scale in labels]
    if sorted(mine) != sorted(expected):           # the equivalent must be one
        raise RuntimeError(f"ours added {{mine}}, napari's own {{expected}}")


from msclassify_napari._widget import PixelClassifierWidget   # (as bench_napari: imported first)


def dock():
    widget = PixelClassifierWidget(viewer)
    viewer.window.add_dock_widget(widget, name="Pixel classifier")
    out["widget"] = widget


def dock_and_load():
    dock()
    settle(app, 30)
    from msclassify_napari._preload import preloaded
    wait_until(lambda: preloaded() is not None, 300)


scale = tuple(float(v) for v in viewer.layers["flies"].scale)
pair("dock the Pixel classifier (+ segmentation layer)", dock_and_load,
     [("flies segmentation", frames.shape, "uint8", scale)], paint="scribbles", dock=True,
     own_first=OWN_FIRST)
viewer.layers["scribbles"].mode = "pan_zoom"
widget = out.pop("widget")


def plain(held=False):
    def action():
        if held:
            window.setUpdatesEnabled(False)
            QTimer.singleShot(0, lambda: window.setUpdatesEnabled(True))
        viewer.add_labels(np.zeros(frames.shape, np.uint8), name="plain labels")
    return action


for _ in range({repeats}):
    for held_ in (False, True):
        measure("napari: add a Labels layer" + (", repaint held a turn" if held_ else ""),
                plain(held_))
        viewer.layers.remove("plain labels")
        viewer.layers.selection.active = viewer.layers["scribbles"]
for repeat in range({repeats}):
    widget.image_combo.setCurrentText("flies")
    pair("New scribbles, fly stack", widget.new_scribble_layer,
         [("flies scribbles", frames.shape, "uint8", scale)], paint="flies scribbles",
         own_first=(repeat + OWN_FIRST) % 2 == 1)
    viewer.layers.remove("flies scribbles")
    settle(app, 20)
    viewer.layers.selection.active = viewer.layers["scribbles"]
photo = larvae_photo()[0]
for repeat in range({repeats}):
    with second_image(viewer, widget, photo):
        pair("New scribbles, second image (+ segmentation layer)", widget.new_scribble_layer,
             [("larvae scribbles", photo.shape[:2], "uint8", (1.0, 1.0)),
              ("larvae segmentation", photo.shape[:2], "uint8", (1.0, 1.0))],
             paint="larvae scribbles", own_first=(repeat + OWN_FIRST) % 2 == 1)
from msclassify_napari._volume import VolumeWidget, SCRIBBLES, SEGMENTATION
volume_dock = VolumeWidget(viewer)
viewer.window.add_dock_widget(volume_dock, name="Volume")
rng = np.random.default_rng(0)
for repeat in range({repeats}):
    viewer.add_image(rng.integers(0, 255, (40, 256, 256), dtype=np.uint8), name="volume")
    settle(app, 30)
    # (ours until napari has inserted both layers: New's steps come in turns of their own)
    pair("Volume New (scribbles + segmentation layer)",
         lambda: (volume_dock.new_scribbles(),
                  wait_until(lambda: SEGMENTATION in viewer.layers, 60)),
         [(SCRIBBLES, (40, 256, 256), "uint8", (1.0, 1.0, 1.0)),
          (SEGMENTATION, (40, 256, 256), "uint8", (1.0, 1.0, 1.0))], paint=SCRIBBLES,
         own_first=(repeat + OWN_FIRST) % 2 == 1)
    for name in (SCRIBBLES, SEGMENTATION, "volume"):
        if name in viewer.layers:
            viewer.layers.remove(name)
    settle(app, 20)
for _ in range({repeats}):
    out.setdefault("bare canvas repaint (floor)", []).append(
        {{"stall_s": bare_repaint_stall(viewer, monitor), "turns_s": [],
          "longest_cpu_s": 0.0, "max_cpu_s": 0.0}})
out["load"] = os.getloadavg()[0]
out["plugin"] = sys.modules["msclassify_napari"].__file__
print("RESULT " + json.dumps(out))
"""


REFERENCE = "napari: add a Labels layer"
OWN = "napari's own: "
FLOOR = "bare canvas repaint (floor)"


def run(checkout, repeats, own_first=False):
    result = napari_child(_CHILD.format(benchmarks=str(REPO / "benchmarks"), repeats=repeats,
                                        own_first=own_first), checkout)
    if not Path(result["plugin"]).resolve().is_relative_to(Path(checkout).resolve()):
        raise RuntimeError(f"the session for {checkout} ran the plugin at {result['plugin']}")
    return result


def _turns(measures):
    """Median of each turn's gap over the measures with the most common number of turns."""
    counts = [len(m["turns_s"]) for m in measures]
    n = max(set(counts), key=counts.count)
    chosen = [m["turns_s"] for m in measures if len(m["turns_s"]) == n]
    return " | ".join(f"{1000 * statistics.median(t):.0f}" for t in zip(*chosen))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="fresh processes per checkout")
    parser.add_argument("--repeats", type=int, default=2, help="repeats of each add per round")
    parser.add_argument("--compare", metavar="DIR", type=Path,
                        help="another checkout to alternate with (before)")
    args = parser.parse_args()
    sessions = {}                 # per checkout: napari's own first in its odd sessions

    def session(checkout):
        sessions[checkout] = sessions.get(checkout, -1) + 1
        return run(checkout, args.repeats, own_first=sessions[checkout] % 2 == 1)

    checkouts, runs = napari_checkouts(args.compare, args.rounds, session)
    rows = []
    steps = [key for key in runs[next(iter(checkouts))][0] if key not in ("load", "plugin")]
    for step in steps:
        for label in checkouts:
            measures = [m for r in runs[label] for m in r[step]]
            stalls = [m["stall_s"] for m in measures]
            # each stall over napari's own add in the same process (the box's load cancels)
            ratios = [m["stall_s"] / statistics.median(p["stall_s"] for p in r[REFERENCE])
                      for r in runs[label] for m in r[step]]
            rows.append({"step": step, "checkout": label, "n": len(stalls),
                         "stall_median_s": statistics.median(stalls),
                         "stall_max_s": max(stalls),
                         "of_napari_add_median": statistics.median(ratios),
                         "of_napari_add_max": max(ratios),
                         "longest_turn_cpu_s": statistics.median(m["longest_cpu_s"]
                                                                 for m in measures),
                         "max_turn_cpu_s": statistics.median(m["max_cpu_s"] for m in measures),
                         "turns_ms": _turns(measures),
                         "load": statistics.median(r["load"] for r in runs[label])})
    print(f"{cpu_model()}; medians")
    print_table(rows, list(rows[0]))
    against = ours_against_napari(checkouts, runs, steps)
    print("\nours against napari's own public-API equivalent, in the same sessions "
          "(seconds; medians; difference: of the pairs)")
    print_table(against, list(against[0]))
    write_checkouts_results("napari_adds", {"rounds": args.rounds, "repeats": args.repeats,
                                            "ours_against_napari": against},
                            checkouts, rows, runs)


def ours_against_napari(checkouts, runs, steps):
    """Per action of ours that adds layers and checkout: ours' stall, napari's own
    equivalent's (`OWN` + the action), the median of their differences pair by pair (the
    same session and repeat, the order alternating) and the bare repaint's (the floor)."""
    rows = []
    for step in steps:
        if OWN + step not in steps:
            continue
        for label in checkouts:
            ours = [m["stall_s"] for r in runs[label] for m in r[step]]
            own = [m["stall_s"] for r in runs[label] for m in r[OWN + step]]
            floor = [m["stall_s"] for r in runs[label] for m in r[FLOOR]]
            rows.append({"action": step, "checkout": label, "pairs": len(ours),
                         "ours_s": statistics.median(ours),
                         "napari_own_s": statistics.median(own),
                         "difference_s": statistics.median(a - b for a, b in zip(ours, own)),
                         "floor_s": statistics.median(floor),
                         "ours_max_s": max(ours), "napari_own_max_s": max(own)})
    return rows


if __name__ == "__main__":
    main()
