"""Opening an OME-Zarr mosaic or a video in napari: the plugin's reader against napari's own, split.

Each open is a fresh process (a fresh napari session, nothing of the plugin or of zarr imported
yet: what a user meets who starts napari and opens the mosaic), and it reads the mosaic the
way napari's *File > Open Folder* does: the reader through npe2 (`npe2.read`, which imports the
reader's module and runs it), then its layers added (``viewer.add_<kind>``), then the canvas
draws. Timed apart, on the GUI thread:

* **read**: import of the reader's module and what it imports (zarr, ...) and the metadata
  read (the modules it imported are counted);
* **add**: napari's add of the layer(s) (for a multiscale layer: its contrast limits from the
  coarsest level, the layer controls, the first slice);
* **first draw**: from the end of the add to the end of the canvas's first paint;
* **stall**: the longest gap of a 10 ms timer on the GUI thread (`napari_session`) from the
  read's start until 0.5 s after it, and every gap over 25 ms (the turns): napari reads and
  adds in one call (one turn), and draws in a later one.

Readers: ``msclassify`` (this checkout's plugin, and with ``--compare DIR`` that checkout's,
``PYTHONPATH=DIR:DIR/plugins``) and ``napari`` (napari's builtin reader: each array of the
group as a dask array, a multiscale layer); the three alternate process by process, the order
rotating each round. The mosaic is `bench_napari_large`'s (15 real ``isbi2012_em`` frames,
uint16, 1024² chunks, with its pyramid), built in ``--tmp`` if missing. Run::

    QT_API=pyqt6 xvfb-run -a python benchmarks/bench_napari_open.py --size 8192 --tmp DIR \\
        --rounds 3 --compare /work/main [--scribble]

With ``--scribble``, each session of the plugin's reader then docks *Large image*, zooms to 1
over the middle, adds napari's own Labels layer of the view's shape twice (np.zeros: the
session's first Labels add, then a second one) and presses *Scribble here*; the stall and the
turns of each (the brush, napari's first of the session, comes in Scribble here's turns).

**The video** (``--video PATH``, e.g. the shared ``fly_sleap/clip.mp4``): the same open, of
a video through the plugin's reader as a session's first layer, against napari's own first
add of an image of that shape (``add_image`` of ``np.broadcast_to`` of one zero frame, nothing
to decode: the floor a reader cannot move), each a fresh process. Also timed on the GUI
thread: **frames_in_add**, its time inside the reader's ``frame`` during napari's add (napari
slices frame 0, then moves the slider of a session's first layer to the middle frame), the
GUI thread's CPU time in the longest turn, and, in the same session after the open, napari's
own add of the in-memory image (its second add of the session). Run::

    QT_API=pyqt6 xvfb-run -a python benchmarks/bench_napari_open.py --tmp DIR \
        --video /work/shared/data/fly_sleap/clip.mp4 --rounds 4 --compare /work/main

Writes benchmarks/results/napari_open.json (``napari_open_video.json`` for ``--video``) and
prints a table (medians over rounds).
"""

import argparse
import os
import statistics
from pathlib import Path

from _common import REPO, cpu_model, napari_child, print_table, write_checkouts_results

_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {benchmarks!r})
import numpy as np
import napari
import npe2
from qtpy.QtWidgets import QApplication
from napari_session import (CanvasPaints, EventLoopMonitor, bare_repaint_stall, cpu_slowdown,
                            settle)



viewer = napari.Viewer(show=True)
viewer.window._qt_window.resize(1500, 1050)
app = QApplication.instance()
monitor = EventLoopMonitor()
paints = CanvasPaints(viewer)
settle(app, 50)
out = {{"zarr imported before": "zarr" in sys.modules,
       "plugin imported before": "msclassify_napari" in sys.modules}}
modules = set(sys.modules)
monitor.mark()
start = time.perf_counter()
layers = npe2.read([{path!r}], stack=False, plugin_name={plugin!r})
read = time.perf_counter()
for layer in layers:
    data, kwargs, kind = (tuple(layer) + ({{}}, "image"))[:3]
    getattr(viewer, "add_" + kind)(data, **kwargs)
added = time.perf_counter()
settle(app, 50)
gaps = np.diff(np.array(monitor._marked_at + monitor.ticks[monitor._start:]))
paint = paints.first_after(added)
new = set(sys.modules) - modules
out.update({{
    "read_s": read - start, "add_s": added - read,
    "first_draw_s": float("nan") if paint is None else paint[1] - added,
    "stall_s": float(gaps.max()), "turns_s": [float(g) for g in gaps if g > 0.025],
    "modules_imported": len(new),
    "packages_imported": sorted({{m.split(".")[0] for m in new}}),
    "levels": len(viewer.layers[0].data) if viewer.layers[0].multiscale else 1,
    "layer_data": type(viewer.layers[0].data[0]).__module__,
    "repaint_floor_s": bare_repaint_stall(viewer, monitor),
    "load": os.getloadavg()[0], "slowdown": cpu_slowdown(),
    "plugin": getattr(sys.modules.get("msclassify_napari"), "__file__", None)}})
if {scribble} and {plugin!r} == "msclassify":
    from napari_session import wait_until
    from msclassify_napari._large import REGION_SIDE, LargeImageWidget
    dock = LargeImageWidget(viewer)
    viewer.window.add_dock_widget(dock, name="Large image")
    wait_until(lambda: dock.features_combo.count() > 1, 900)
    settle(app, 50)
    viewer.scene.camera.center = ({size} / 2 + 200, {size} / 2 + 300)
    viewer.scene.camera.zoom = 1.0
    settle(app, 30)
    job = dock.job()
    shape = tuple(r.stop - r.start for r in job.visible_region(dock.view_corners(), REGION_SIDE))
    steps = [("napari: first Labels add of the session",
              lambda: viewer.add_labels(np.zeros(shape, np.uint8), name="plain 1")),
             ("napari: a second Labels add",
              lambda: viewer.add_labels(np.zeros(shape, np.uint8), name="plain 2")),
             ("Scribble here", dock.scribble_here)]
    for step, action in steps:
        settle(app, 20)
        monitor.mark()
        action()
        settle(app, 50)
        gaps = np.diff(np.array(monitor._marked_at + monitor.ticks[monitor._start:]))
        out[step] = {{"stall_s": float(gaps.max()),
                     "turns_s": [float(g) for g in gaps if g > 0.025]}}
        for name in ("plain 1", "plain 2"):
            if name in viewer.layers:
                viewer.layers[name].visible = False
    layer = viewer.layers[dock._scribble_name()]
    out["scribble layer"] = {{"shape": list(layer.data.shape), "mode": layer.mode,
                             "translate": [float(v) for v in layer.translate]}}
print("RESULT " + json.dumps(out))
monitor.stop()
paints.remove()
viewer.close()
"""

COLUMNS = ["read_s", "add_s", "first_draw_s", "stall_s", "repaint_floor_s"]

_VIDEO_CHILD = r"""
import json, os, sys, threading, time
sys.path.insert(0, {benchmarks!r})
import numpy as np
import napari
import npe2
from qtpy.QtWidgets import QApplication
from napari_session import EventLoopMonitor, bare_repaint_stall, cpu_slowdown, settle

viewer = napari.Viewer(show=True)
viewer.window._qt_window.resize(1500, 1050)
app = QApplication.instance()
monitor = EventLoopMonitor()
settle(app, 50)
out = {{"plugin imported before": "msclassify_napari" in sys.modules}}
gui = threading.get_ident()
frames = []
monitor.mark()
start = time.perf_counter()
if {plugin!r} == "msclassify":
    [(data, kwargs, kind)] = npe2.read([{path!r}], stack=False, plugin_name="msclassify")
    frame = data.frame

    def timed_frame(index):
        begin = time.perf_counter()
        result = frame(index)
        frames.append((int(index), time.perf_counter() - begin, threading.get_ident() == gui))
        return result

    data.frame = timed_frame
else:
    shape = {shape!r}
    data, kwargs = np.broadcast_to(np.uint8(0), shape), {{"contrast_limits": (0, 255)}}
read = time.perf_counter()
layer = viewer.add_image(data, **kwargs)
added = time.perf_counter()
settle(app, 50)
turns = monitor.turns()
longest = max(turns) if turns else (float("nan"), float("nan"))
out.update({{
    "read_s": read - start, "add_s": added - read,
    "frames_in_add_s": sum(s for _, s, on_gui in frames if on_gui),
    "frames": frames, "stall_s": longest[0], "stall_cpu_s": longest[1],
    "turns_s": [w for w, _ in turns], "shape": list(layer.data.shape),
    "step": [int(v) for v in viewer.dims.current_step],
    "repaint_floor_s": bare_repaint_stall(viewer, monitor)}})
if {plugin!r} == "msclassify":
    settle(app, 20)
    monitor.mark()
    viewer.add_image(np.broadcast_to(np.uint8(0), layer.data.shape), contrast_limits=(0, 255))
    settle(app, 30)
    out["second_add_stall_s"] = monitor.longest_gap()[0]
out.update({{"load": os.getloadavg()[0], "slowdown": cpu_slowdown(),
            "plugin": getattr(sys.modules.get("msclassify_napari"), "__file__", None)}})
print("RESULT " + json.dumps(out))
monitor.stop()
viewer.close()
"""

VIDEO_COLUMNS = ["read_s", "add_s", "frames_in_add_s", "stall_s", "stall_cpu_s",
                 "second_add_stall_s", "repaint_floor_s"]


STEPS = ["napari: first Labels add of the session", "napari: a second Labels add",
         "Scribble here"]


def open_once(checkout, path, plugin, size, scribble):
    return napari_child(_CHILD.format(benchmarks=str(REPO / "benchmarks"), path=str(path),
                                      plugin=plugin, size=size, scribble=scribble), checkout)


def rotated_runs(variants, rounds, run):
    """``{label: [run(label) per round]}``, the order of ``variants`` rotated round by round
    (each comes first in turn, so none always follows the same one)."""
    runs = {label: [] for label in variants}
    labels = list(variants)
    for round_ in range(rounds):
        first = round_ % len(labels)
        for label in labels[first:] + labels[:first]:
            runs[label].append(run(label))
    return runs


def open_video_once(checkout, path, plugin, shape):
    return napari_child(_VIDEO_CHILD.format(benchmarks=str(REPO / "benchmarks"), path=str(path),
                                            plugin=plugin, shape=shape), checkout)


def video_main(args):
    from msclassify.io import open_frames
    with open_frames(args.video, as_gray="auto") as source:
        shape = (len(source), *source.shape)
    variants = {"msclassify, this checkout": (REPO, "msclassify"),
                "napari: add_image of that shape": (REPO, "napari")}
    if args.compare:
        variants["msclassify, before"] = (args.compare.resolve(), "msclassify")

    def run(label):
        checkout, plugin = variants[label]
        result = open_video_once(checkout, args.video, plugin, shape)
        print(label, {k: round(result[k], 3) for k in VIDEO_COLUMNS if k in result},
              "frames", [(i, round(t, 3), gui) for i, t, gui in result["frames"]],
              "turns", [round(t, 3) for t in result["turns_s"]], "load",
              round(result["load"], 2), flush=True)
        return result
    runs = rotated_runs(variants, args.rounds, run)
    rows = []
    for label, results in runs.items():
        row = {"open": label, "n": len(results)}
        row.update({k: statistics.median(r[k] for r in results)
                    for k in VIDEO_COLUMNS if k in results[0]})
        row["stall_max_s"] = max(r["stall_s"] for r in results)
        row["load"] = statistics.median(r["load"] for r in results)
        rows.append(row)
    print(f"{cpu_model()}; medians of {args.rounds} fresh sessions; load now "
          f"{os.getloadavg()[0]:.2f}")
    print_table(rows, ["open", "n", *VIDEO_COLUMNS, "stall_max_s", "load"])
    write_checkouts_results("napari_open_video", {"video": str(args.video),
                                                  "rounds": args.rounds},
                            {label: str(checkout) for label, (checkout, _) in variants.items()},
                            rows, runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192, help="side of the mosaic")
    parser.add_argument("--tmp", help="folder of the mosaic (built if missing; not with --video)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per reader")
    parser.add_argument("--compare", metavar="DIR", type=Path,
                        help="another checkout whose plugin's reader alternates (before)")
    parser.add_argument("--scribble", action="store_true",
                        help="then (the plugin's sessions) dock the Large dock, add napari's "
                             "own Labels layers of the view's shape and press Scribble here")
    parser.add_argument("--video", type=Path,
                        help="open this video instead (a session's first layer), against "
                             "napari's own first add of an image of its shape")
    args = parser.parse_args()
    if args.video:
        return video_main(args)
    if not args.tmp:
        parser.error("--tmp DIR (the mosaic's folder) is needed without --video")

    path = Path(args.tmp) / f"mosaic_{args.size}.ome.zarr"
    if not (path / "1").exists():
        from bench_large import build_mosaic
        from bench_napari_large import add_pyramid
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"building {path} ...", flush=True)
        build_mosaic(path, args.size)
        add_pyramid(path)
    variants = {"msclassify, this checkout": (REPO, "msclassify"),
                "napari builtin reader": (REPO, "napari")}
    if args.compare:
        variants["msclassify, before"] = (args.compare.resolve(), "msclassify")

    def run(label):
        checkout, plugin = variants[label]
        result = open_once(checkout, path, plugin, args.size, args.scribble)
        print(label, {k: round(result[k], 3) for k in COLUMNS}, "turns",
              [round(t, 3) for t in result["turns_s"]], result["modules_imported"],
              "modules; load", round(result["load"], 2), flush=True)
        for step in STEPS:
            if step in result:
                print("   ", step, "turns", [round(t, 3) for t in result[step]["turns_s"]])
        return result
    runs = rotated_runs(variants, args.rounds, run)
    rows = []
    for label, results in runs.items():
        row = {"reader": label, "n": len(results)}
        row.update({k: statistics.median(r[k] for r in results) for k in COLUMNS})
        row["stall_max_s"] = max(r["stall_s"] for r in results)
        row["modules"] = statistics.median(r["modules_imported"] for r in results)
        row["load"] = statistics.median(r["load"] for r in results)
        rows.append(row)
    for step in STEPS:
        for label, results in runs.items():
            stalls = [r[step]["stall_s"] for r in results if step in r]
            if stalls:
                rows.append({"reader": f"{step} ({label})", "n": len(stalls),
                             "stall_s": statistics.median(stalls), "stall_max_s": max(stalls),
                             "load": statistics.median(r["load"] for r in results)})
    print(f"{cpu_model()}; medians of {args.rounds} fresh sessions; load now "
          f"{os.getloadavg()[0]:.2f}")
    print_table(rows, ["reader", "n", *COLUMNS, "stall_max_s", "modules", "load"])
    write_checkouts_results("napari_open", {"size": args.size, "rounds": args.rounds},
                            {label: str(checkout) for label, (checkout, _) in variants.items()},
                            rows, runs)


if __name__ == "__main__":
    main()
