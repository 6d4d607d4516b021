"""Where the GUI thread's time goes when a layer is added to a real napari window.

Run (needs a display; Xvfb is enough): ``QT_API=pyqt6 xvfb-run -a python
benchmarks/study_layer_add.py [--repeats N]``. Prints one table; nothing is written.

The window holds the 10 fly frames (1024x1024) and their scribbles, as in
``bench_napari.py``. Each row is one way of putting a 10x1024x1024 Labels layer (or a
float32 image) in the window, measured with `napari_session.EventLoopMonitor` (the longest
gap of a 10 ms timer on the GUI thread: the stall) and cProfile (the time spent in each
part, summed over the whole action):

* ``construct``: napari building the layer object (``Labels.__init__``);
* ``vispy``: napari's canvas making the layer's visual and its overlays (the Labels brush
  and polygon overlays), ``VispyCanvas.add_layer_visual_mapping``;
* ``controls``: the Qt layer-controls widget (``QtLayerControlsContainer._add``);
* ``paint``: the canvas paints (``paintGL``: slicing already done, texture upload, drawing);
* ``plugin``: the Pixel classifier's own handlers of napari's events (rows "docked");
* ``remove``: napari removing a layer (it runs ``gc.collect()`` each time).

Ways: napari's ``add_labels`` in one call, before and after the Pixel classifier is docked;
the layer added hidden and shown one event-loop turn later (`_layers.in_turns`), the way the
plugin's docks add layers; and a removal.
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import napari
    from qtpy.QtWidgets import QApplication
    from _real_data import load_fly_masks_dev
    from msclassify_napari._layers import in_turns
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

    def hidden_then_shown(name):
        def action():
            added = []
            in_turns([lambda: added.append(viewer.add_labels(
                          np.zeros(frames.shape, np.uint8), name=name, visible=False)),
                      lambda: setattr(added[0], "visible", True)], viewer.window._qt_window)
            wait_until(lambda: added and added[0].visible)
        return action

    def run(label, make_action, repeats):
        for repeat in range(repeats):
            name = f"{label} {repeat}"
            rows.append({"way": label, **measure(app, monitor, make_action(name)),
                         "load": os.getloadavg()[0]})
            rows.append({"way": "remove a Labels layer", **measure(
                app, monitor, lambda: viewer.layers.remove(name)), "load": os.getloadavg()[0]})

    run("add_labels, first in the session", plain_add, 1)
    for _ in range(args.repeats):
        run("add_labels", plain_add, 1)
        run("hidden, shown next turn", hidden_then_shown, 1)
    widget = PixelClassifierWidget(viewer)
    viewer.window.add_dock_widget(widget, name="Pixel classifier")
    wait_until(lambda: preloaded() is not None, 300)
    _settle(app, 50)
    for _ in range(args.repeats):
        run("add_labels, docked", plain_add, 1)
        run("hidden, shown next turn, docked", hidden_then_shown, 1)
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


if __name__ == "__main__":
    main()
