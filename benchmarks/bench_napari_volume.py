"""The napari Volume dock: how long the window's thread is busy (stalls) for each action.

Run under a display (``xvfb-run -a python benchmarks/bench_napari_volume.py [--slices 64]``).
Opens a real napari viewer with an EM volume (512x512 slices of ``isbi2012_em``, spacing 50 x 4
x 4), puts the benchmark's scribbles (``em_scribbles`` on slices 0-4) into the dock's scribble layer, and times
on the GUI thread: New scribbles, starting Train (the scribbles' snapshot), showing the
segmented plane, starting Apply to volume and showing each finished chunk (median and
largest). The work itself runs on worker threads; its wall time is reported too. Writes
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
    for name in ("new_scribbles", "train", "_show_plane", "apply", "_show_chunk"):
        setattr(dock, name, _timed(gui, name, getattr(dock, name)))

    def wait(condition):
        start = time.perf_counter()
        while not condition():
            QApplication.processEvents()
            time.sleep(0.005)
        return time.perf_counter() - start

    layer = dock.new_scribbles()
    layer.data = scribbles
    viewer.dims.set_current_step(0, 2)
    dock.train(live=False)
    train_wall = wait(lambda: dock.worker is None and "segmented" in dock.status.text())
    dock.apply()
    apply_wall = wait(lambda: dock.worker is None and "done" in dock.status.text())
    viewer.close()
    results = {"cpu": cpu_model(), "load": os.getloadavg(), "shape": list(volume.shape),
               "n_estimators": args.n_estimators,
               "train + plane wall s": train_wall, "apply wall s": apply_wall,
               "GUI thread s": {name: {"median": statistics.median(times), "max": max(times),
                                       "n": len(times)} for name, times in gui.items()}}
    for name, row in results["GUI thread s"].items():
        print(f"{name:14s} median {row['median'] * 1000:7.1f} ms  max {row['max'] * 1000:7.1f} ms"
              f"  ({row['n']}x)")
    print(f"train + plane {train_wall:.1f} s, apply {apply_wall:.1f} s (worker threads); "
          f"CPU {results['cpu']}, load {results['load']}; wrote "
          f"{write_results('napari_volume', results)}")


if __name__ == "__main__":
    main()
