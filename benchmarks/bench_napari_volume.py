"""The napari Volume dock: how long the window's thread is busy (stalls) for each action.

Run under a display (``xvfb-run -a python benchmarks/bench_napari_volume.py [--slices 64]``).
Opens a real napari viewer with an EM volume (512x512 slices of ``isbi2012_em``, spacing 50 x 4
x 4), puts the benchmark's scribbles (``em_scribbles`` on slices 0-4) into the dock's scribble layer, and times
on the GUI thread: New scribbles (the scribbles layer) and the segmentation layer it adds in
the next turn of the event loop, starting Train, showing the segmented plane, a live update
after each of ``--strokes`` brush strokes (the paint event starting the quick model's
training), starting Apply to volume and showing each finished chunk (median and largest). The
work itself runs on worker threads; its wall time is reported too.

The peer: napari's own ``viewer.add_labels`` of a zeros layer of the volume's shape, and of a
1x8x8 one, in the same window, interleaved (``--peer-rounds``) before the dock's actions:
what adding any labels layer costs the window's thread in this napari. Writes
benchmarks/results/napari_volume.json.
"""

import argparse
import os
import statistics
import time

import numpy as np

from _common import cpu_model, write_results
from bench_volumes import EM_SPACING, em_volume, load_em_volume


def _timed(record, name, function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            record.setdefault(name, []).append(time.perf_counter() - start)
    return wrapper


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=64)
    parser.add_argument("--n-estimators", type=int, default=30)
    parser.add_argument("--strokes", type=int, default=3, help="live updates timed")
    parser.add_argument("--peer-rounds", type=int, default=3)
    args = parser.parse_args()
    import napari
    from qtpy.QtWidgets import QApplication

    from msclassify_napari._controller import ClassifierSettings
    from msclassify_napari._volume import VolumeWidget

    volume = em_volume(args.slices)
    scribbles = np.zeros(volume.shape, np.uint8)
    train = load_em_volume()["labels"]                   # em_scribbles on slices 0-4
    scribbles[:train.shape[0]] = train
    viewer = napari.Viewer(show=True)
    viewer.add_image(volume, name="em", scale=EM_SPACING)
    dock = VolumeWidget(viewer)
    dock.settings = ClassifierSettings(n_estimators=args.n_estimators)
    viewer.window.add_dock_widget(dock)
    gui = {}
    for name in ("new_scribbles", "_add_segmentation", "train", "_show_plane", "_painted",
                 "apply", "_show_chunk"):
        setattr(dock, name, _timed(gui, name, getattr(dock, name)))

    def wait(condition):
        start = time.perf_counter()
        while not condition():
            QApplication.processEvents()
            time.sleep(0.005)
        return time.perf_counter() - start

    def settle(seconds=0.3):
        wait(lambda: True)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            QApplication.processEvents()
            time.sleep(0.01)

    settle()
    peer = {}
    for _ in range(args.peer_rounds):             # napari's own labels layers, interleaved
        for name, shape in (("napari add_labels (volume shape)", volume.shape),
                            ("napari add_labels (1x8x8)", (1, 8, 8))):
            _timed(peer, name, viewer.add_labels)(np.zeros(shape, np.uint8), name="peer",
                                                  scale=EM_SPACING)
            settle()
            viewer.layers.remove("peer")
            settle()
    load_start = os.getloadavg()
    layer = dock.new_scribbles()
    settle()                                      # the segmentation layer comes next turn
    layer.data = scribbles
    viewer.dims.set_current_step(0, 2)
    dock.train(live=False)
    train_wall = wait(lambda: dock.worker is None and "segmented" in dock.status.text())
    dock.live.setChecked(True)
    live_walls = []
    for stroke in range(args.strokes):            # a brush stroke on the plane on screen
        dock.status.setText("")
        start = time.perf_counter()
        layer.paint((2, 60 + 40 * stroke, 200), 1)
        wait(lambda: dock.worker is None and "segmented" in dock.status.text())
        live_walls.append(time.perf_counter() - start)
    dock.live.setChecked(False)
    dock.apply()
    apply_wall = wait(lambda: dock.worker is None and "done" in dock.status.text())
    viewer.close()
    summary = {name: {"median": statistics.median(times), "max": max(times), "n": len(times)}
               for name, times in {**peer, **gui}.items()}
    results = {"cpu": cpu_model(), "load at start": load_start, "load": os.getloadavg(),
               "shape": list(volume.shape), "n_estimators": args.n_estimators,
               "train + plane wall s": train_wall, "apply wall s": apply_wall,
               "live update wall s": live_walls, "GUI thread s": summary}
    for name, row in results["GUI thread s"].items():
        print(f"{name:34s} median {row['median'] * 1000:7.1f} ms  max {row['max'] * 1000:7.1f} ms"
              f"  ({row['n']}x)")
    print(f"train + plane {train_wall:.1f} s, live updates "
          f"{', '.join(f'{w:.1f}' for w in live_walls)} s, apply {apply_wall:.1f} s "
          f"(worker threads); "
          f"CPU {results['cpu']}, load {results['load']}; wrote "
          f"{write_results('napari_volume', results)}")


if __name__ == "__main__":
    main()
