"""Where the GUI thread's time goes when a layer is added to a real napari window.

Run (needs a display; Xvfb is enough): ``QT_API=pyqt6 xvfb-run -a python
benchmarks/study_layer_add.py [--repeats N]``. Prints one table; nothing is written.

The window holds the 10 fly frames (1024x1024) and their scribbles, as in
``bench_napari.py``. Two tables:

1. **Parts** (one cProfile pass per row, so times are inflated; read them as shares): the time
   spent in each part of napari's ``add_labels`` of a 10x1024x1024 Labels layer, summed over
   the call and the window's settling after it:

   * ``construct``: napari building the layer object (``Labels.__init__``);
   * ``vispy``: napari's canvas making the layer's visual and its overlays (the Labels brush
     and polygon overlays), ``VispyCanvas.add_layer_visual_mapping``;
   * ``controls``: the Qt layer-controls widget (``QtLayerControlsContainer._add``);
   * ``paint``: the canvas paints (``paintGL``: texture upload, drawing);
   * ``plugin``: the Pixel classifier's own handlers of napari's events (rows "docked");
   * ``remove``: napari removing a layer (``VispyCanvas._remove_layer``, which runs
     ``gc.collect()`` each time).

2. **Turns** (no profiler): ways of putting the same layer in the window, each step in an
   event-loop turn of its own, and the stall of each turn (medians): napari's ``add_labels``
   in one call; added hidden and shown one turn later; the layer object built in one turn,
   appended hidden in the next, shown in a third; a 1-pixel layer added, its data set next
   turn; an existing layer's data replaced by one of another shape (in place); a removal;
   and a bare canvas repaint (the floor). Then frame changes (the time slider moved one
   frame) with different layers shown, docked, live update off: the image alone, with the
   scribbles, with a plain napari Labels layer, with the widget's segmentation layer instead
   (and one profiled: the ``plugin`` column is the widget's handler of the frame change).
"""

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

import numpy as np

from _common import REPO, cpu_model, print_table

sys.path.insert(0, str(REPO / "plugins"))

PARTS = {
    "construct": ("napari/layers/labels/labels.py", "__init__"),
    "vispy": ("napari/_vispy/canvas.py", "add_layer_visual_mapping"),
    "controls": ("qt_layer_controls_container.py", "_add"),
    "paint": ("vispy/app/backends/_qt.py", "paintGL"),
    "remove": ("napari/_vispy/canvas.py", "_remove_layer"),
}


def _settle(app, n=30):
    for _ in range(n):
        app.processEvents()
        time.sleep(0.01)


def _parts(profile):
    stats = pstats.Stats(profile).stats
    out = {name: 0.0 for name in [*PARTS, "plugin"]}
    for (path, _, function), (_, _, _, cumulative, callers) in stats.items():
        for name, (suffix, wanted) in PARTS.items():
            if path.endswith(suffix) and function == wanted:
                out[name] += cumulative
        # our code called straight from outside the plugin (napari's events, Qt's slots)
        if "msclassify_napari" in path and not any("msclassify_napari" in caller[0]
                                                    for caller in callers):
            out["plugin"] += cumulative
    return out


def measure(app, monitor, action):
    """Stall (longest GUI-thread gap) and the parts' seconds while ``action`` runs and the
    window settles."""
    _settle(app, 10)
    monitor.mark()
    profile = cProfile.Profile()
    profile.enable()
    action()
    _settle(app)
    profile.disable()
    return {"stall_s": monitor.longest_gap()[0], **_parts(profile)}


def turns(app, monitor, steps):
    """The stall of each step of ``steps``, each run in an event-loop turn of its own."""
    stalls = []
    for step in steps:
        _settle(app, 10)
        monitor.mark()
        step()
        _settle(app, 15)
        stalls.append(monitor.longest_gap()[0])
    return stalls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import napari
    from qtpy.QtWidgets import QApplication
    from _real_data import load_fly_masks_dev
    from napari.layers import Labels
    from msclassify_napari._preload import preloaded
    from msclassify_napari._widget import PixelClassifierWidget
    from napari_session import EventLoopMonitor, wait_until

    load = os.getloadavg()[0]
    data = load_fly_masks_dev(test_limit=1)
    frames = np.stack(data["train_images"])
    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(1500, 1050)
    app = QApplication.instance()
    viewer.add_image(frames, name="flies")
    viewer.add_labels(np.zeros(frames.shape, np.uint8), name="scribbles")
    _settle(app, 50)
    monitor = EventLoopMonitor()
    rows = []

    def plain_add(name):
        def action():
            viewer.add_labels(np.zeros(frames.shape, np.uint8), name=name)
        return action

    def profiled(label):
        name = label
        rows.append({"way": label, **measure(app, monitor, plain_add(name)),
                     "load": os.getloadavg()[0]})
        rows.append({"way": "remove a Labels layer", **measure(
            app, monitor, lambda: viewer.layers.remove(name)), "load": os.getloadavg()[0]})

    def zeros():
        return np.zeros(frames.shape, np.uint8)

    def ways():
        made = {}
        yield "add_labels in one call", [
            lambda: made.update(layer=viewer.add_labels(zeros(), name="x"))]
        yield "remove a Labels layer", [lambda: viewer.layers.remove("x")]
        yield "added hidden | shown", [
            lambda: made.update(layer=viewer.add_labels(zeros(), name="x", visible=False)),
            lambda: setattr(made["layer"], "visible", True)]
        yield "data of another shape, in place", [
            lambda: setattr(made["layer"], "data", np.zeros((10, 512, 512), np.uint8))]
        viewer.layers.remove("x")
        yield "built | appended hidden | shown", [
            lambda: made.update(layer=Labels(zeros(), name="x", visible=False)),
            lambda: viewer.layers.append(made["layer"]),
            lambda: setattr(made["layer"], "visible", True)]
        viewer.layers.remove("x")
        yield "1-pixel layer | its data", [
            lambda: made.update(layer=viewer.add_labels(np.zeros((1, 1, 1), np.uint8),
                                                        name="x")),
            lambda: setattr(made["layer"], "data", zeros())]
        viewer.layers.remove("x")
        yield "bare canvas repaint (floor)", [
            lambda: viewer.window._qt_viewer.canvas.native.update()]

    timed = []

    def run_turns(suffix):
        for _ in range(args.repeats):
            for way, steps in ways():
                timed.append({"way": way + suffix, "turns": turns(app, monitor, steps),
                              "load": os.getloadavg()[0]})

    profiled("add_labels, first in the session")
    profiled("add_labels")
    run_turns("")
    widget = PixelClassifierWidget(viewer)
    viewer.window.add_dock_widget(widget, name="Pixel classifier")
    wait_until(lambda: preloaded() is not None, 300)
    _settle(app, 50)
    profiled("add_labels, docked")
    run_turns(", docked")

    # frame changes: which layers are shown, the same window, interleaved
    ours = viewer.layers["flies segmentation"]
    plain = viewer.add_labels(np.zeros(frames.shape, np.uint8), name="plain labels")
    labels = [viewer.layers["scribbles"], ours, plain]
    shown = {"image only": [], "image + scribbles": ["scribbles"],
             "image + scribbles + a plain Labels (napari)": ["scribbles", "plain labels"],
             "image + scribbles + our segmentation": ["scribbles", "flies segmentation"]}
    step = [0]

    def next_frame():
        step[0] += 1
        viewer.dims.set_current_step(0, step[0] % frames.shape[0])

    for _ in range(args.repeats):
        for way, names in shown.items():
            for layer in labels:
                layer.visible = layer.name in names
            for _ in range(2):
                timed.append({"way": "frame change: " + way,
                              "turns": turns(app, monitor, [next_frame]),
                              "load": os.getloadavg()[0]})
    rows.append({"way": "frame change, our segmentation shown", **measure(app, monitor,
                                                                          next_frame),
                 "load": os.getloadavg()[0]})
    monitor.stop()
    summary = []
    for way in dict.fromkeys(row["way"] for row in rows):
        chosen = [row for row in rows if row["way"] == way]
        summary.append({"way": way, "n": len(chosen),
                        **{f"{key}_ms": round(1000 * statistics.median(r[key] for r in chosen))
                           for key in ["stall_s", *PARTS, "plugin"]},
                        "load": round(statistics.median(r["load"] for r in chosen), 2)})
    print(f"{cpu_model()}; load average at start {load:.2f}; medians")
    print_table(summary, ["way", "n", "stall_s_ms", "construct_ms", "vispy_ms", "controls_ms",
                          "paint_ms", "plugin_ms", "remove_ms", "load"])
    turn_rows = []
    for way in dict.fromkeys(row["way"] for row in timed):
        chosen = [row for row in timed if row["way"] == way]
        medians = [1000 * statistics.median(t) for t in zip(*(row["turns"] for row in chosen))]
        turn_rows.append({"way": way, "n": len(chosen),
                          "turns_ms": " | ".join(f"{m:.0f}" for m in medians),
                          "longest_turn_ms": round(max(medians)),
                          "load": round(statistics.median(r["load"] for r in chosen), 2)})
    print("\nStall of each event-loop turn (medians, ms):")
    print_table(turn_rows, ["way", "n", "turns_ms", "longest_turn_ms", "load"])


if __name__ == "__main__":
    main()
