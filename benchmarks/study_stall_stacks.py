"""What the GUI thread runs during napari's own stalls: a native stack sampler (py-spy) on a
real napari window while it adds Labels layers, changes frames or takes new layer data.

Run (needs a display, Xvfb is enough, and ``py-spy`` on the PATH: ``pip install py-spy``):
``QT_API=pyqt6 xvfb-run -a python benchmarks/study_stall_stacks.py [--action add|frame|data]
[--repeats 8] [--rate 200] [--keep FILE]``. Prints the stalls and a table; nothing is written
(``--keep`` keeps py-spy's raw stacks).

The window holds the 10 fly frames (1024x1024) and a scribble layer, as in
``study_layer_add.py``. The action, ``--repeats`` times, each in a quiet window:

* ``add``: napari's ``add_labels`` of a 10x1024x1024 zeros layer (it is removed afterwards,
  outside the sampled part);
* ``frame``: the time slider moved one frame (image + scribbles shown);
* ``data``: the scribble layer's data replaced by a new array of the same shape (what a
  result layer's update costs napari).

py-spy samples the whole process with native frames (``--native``: C/C++ frames of Qt, Mesa
and Python itself); the samples of the main thread taken while it was busy inside the action
and the window's settling after it are put in the first matching part, in the table's
order: OpenGL shader compiling and linking, texture uploads, the canvas's draw (vispy
``paintGL``: the GL commands and Mesa's software rasteriser), Qt composing the window
(``rhiFlush``), napari's parts of a layer add (the Labels overlays, the layer's own visual,
the Qt layer controls, the switch of the controls to the selected layer, the ``Labels``
object), napari's slicing and data refresh, the rest of Qt's widget painting, and the rest.
py-spy stops the process for each sample, so the stalls printed are longer than without it;
the shares are what to read.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

import numpy as np

from _common import REPO, cpu_model, print_table

sys.path.insert(0, str(REPO / "plugins"))

# (part, what in a stack marks it); the first that matches, in this order
PARTS = [
    ("OpenGL: shader compile/link", ("glCompileShader", "glLinkProgram")),
    ("OpenGL: texture upload", ("glTexImage", "glTexSubImage")),
    ("canvas draw (vispy paintGL, Mesa)", ("CanvasBackendDesktop.paintGL",)),
    ("Qt: compose the window (rhiFlush)", ("rhiFlush",)),
    ("napari: Labels overlays (brush, polygon)", ("create_vispy_overlay",)),
    ("napari: the layer's vispy visual", ("create_vispy_layer",)),
    ("napari: Qt layer controls, created", ("QtLayerControlsContainer._add",)),
    ("napari: layer controls, switched", ("QtLayerControlsContainer._populate",)),
    ("napari: the Labels object", ("labels/labels.py:", "Labels.__init__")),
    ("napari: slicing, data refresh", ("_LayerSlicer", "_slice_dims", "_refresh_sync",
                                       "_on_data_change")),
    ("Qt: other widget painting", ("paintAndFlush",)),
]
IDLE = ("sleep", "poll", "select", "pthread_cond_wait")


def parts_of(raw):
    """Busy main-thread samples of py-spy's raw output, counted per part."""
    counts = Counter()
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if "<module>" not in stack:          # the main thread's stack starts at the script
            continue
        if "_not_sampled" in stack or any(word in frames[-1] for word in IDLE) \
                or "time.sleep" in ";".join(frames[-3:]):
            continue
        part = next((name for name, marks in PARTS
                     if any(mark in stack for mark in marks)), "other (napari, Qt, Python)")
        counts[part] += int(n)
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--action", choices=["add", "frame", "data"], default="add")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--keep", metavar="FILE", help="keep py-spy's raw stacks here")
    args = parser.parse_args()
    if shutil.which("py-spy") is None:
        sys.exit("error: py-spy is not on the PATH; install it with: pip install py-spy")
    import napari
    from qtpy.QtWidgets import QApplication
    from _real_data import load_fly_masks_dev
    from napari_session import EventLoopMonitor, bare_repaint_stall

    load = os.getloadavg()[0]
    frames = np.stack(load_fly_masks_dev(test_limit=1)["train_images"])
    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(1500, 1050)
    app = QApplication.instance()
    viewer.add_image(frames, name="flies")
    scribbles = viewer.add_labels(np.zeros(frames.shape, np.uint8), name="scribbles")

    def settle(n=30):
        for _ in range(n):
            app.processEvents()
            time.sleep(0.01)

    def _not_sampled(step):                  # the samples inside are left out
        step()
        settle(15)

    settle(50)
    viewer.add_labels(np.zeros(frames.shape, np.uint8), name="x")   # the session's first add
    settle()
    viewer.layers.remove("x")
    settle()
    monitor = EventLoopMonitor()
    position = [0]

    def action():
        if args.action == "add":
            viewer.add_labels(np.zeros(frames.shape, np.uint8), name="x")
        elif args.action == "frame":
            position[0] += 1
            viewer.dims.set_current_step(0, position[0] % frames.shape[0])
        else:
            scribbles.data = np.zeros(frames.shape, np.uint8)

    raw_file = args.keep or tempfile.mkstemp(suffix=".txt")[1]
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(os.getpid()), "--native",
                            "--rate", str(args.rate), "--format", "raw", "--output", raw_file,
                            "--threads"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2)                            # py-spy attached
    stalls, floors = [], []
    for _ in range(args.repeats):
        settle(10)
        monitor.mark()
        action()
        settle(15)
        stalls.append(monitor.longest_gap()[0])
        _not_sampled(lambda: viewer.layers.remove("x") if "x" in viewer.layers else None)
        floors.append([])
        _not_sampled(lambda: floors[-1].append(bare_repaint_stall(viewer, monitor)))
    spy.send_signal(2)
    spy.wait()
    monitor.stop()
    with open(raw_file) as file:
        counts = parts_of(file.read())
    if not args.keep:
        os.unlink(raw_file)
    total = sum(counts.values())
    print(f"{cpu_model()}; load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at "
          f"the end; action {args.action!r} x {args.repeats} under py-spy --native: stall "
          f"median {1000 * statistics.median(stalls):.0f} ms, bare repaint (floor) median "
          f"{1000 * statistics.median(f[0] for f in floors):.0f} ms")
    rows = [{"part": name, "samples": counts[name],
             "share_%": round(100 * counts[name] / max(total, 1), 1)}
            for name in [*(name for name, _ in PARTS), "other (napari, Qt, Python)"]]
    print_table(rows, ["part", "samples", "share_%"])
    viewer.close()


if __name__ == "__main__":
    main()
