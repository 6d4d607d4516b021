"""Object classes in napari on real fly frames: click-label, train, classify; times, freezes
and accuracy, and the screenshot docs/napari_objects.png.

Run: ``xvfb-run -a python benchmarks/bench_napari_objects.py [--model PATH] [--screenshot
docs/napari_objects.png]``. Writes benchmarks/results/napari_objects.json.

The 10 test frames of fly_masks_dev are segmented by the pixel model (``--model``, else the
default model trained on fly_masks_dev's scribbles, as bench_tracks.py does) into a
`FrameLabels` segmentation, outside the timings. In a real napari window (Xvfb), the *Object
table and tracks* dock measures the objects of at least 20 px, split on the brightness, as
``bench_object_classes.py`` does; then two flies and two debris objects of the first frames that
have them are labelled by **real mouse clicks** on the canvas (Qt press and release events), and
*Train object classes* learns the classes and classifies every object. Each object's true class
comes from the frames' masks (an object touching a fly of the masks is a fly, any other debris);
the score is the balanced accuracy over all objects (the 4 clicked ones included). Timed: the
wall time of Measure and of Train (to the last frame classified) and the longest stall of the
GUI thread in each (`napari_session.EventLoopMonitor`), next to one bare repaint of the canvas.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from _common import REPO, cpu_model, print_table, write_results

sys.path.insert(0, str(REPO / "plugins"))


def _settle(app, n=20):
    for _ in range(n):
        app.processEvents()
        time.sleep(0.01)


def inner_point(objects, number):
    """The pixel of object ``number`` farthest from its edge (a click lands inside it)."""
    from scipy import ndimage
    distance = ndimage.distance_transform_edt(objects == number)
    return np.unravel_index(int(np.argmax(distance)), objects.shape)


def click(app, viewer, point):
    from napari_session import canvas_position, canvas_widget, press, release
    widget, position = canvas_widget(viewer), canvas_position(viewer, point)
    press(widget, position)
    _settle(app, 2)
    release(widget, position)
    _settle(app, 2)


def timed(app, monitor, start, done):
    from napari_session import wait_until
    flag = []
    done.connect(lambda: flag.append(time.perf_counter()))
    monitor.mark()
    began = time.perf_counter()
    start()
    wait_until(lambda: flag)
    _settle(app, 5)
    return flag[0] - began, monitor.longest_gap()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a saved pixel model instead of training one")
    parser.add_argument("--screenshot", help="write the window to this PNG")
    args = parser.parse_args()
    import napari
    from qtpy.QtWidgets import QApplication

    from _real_data import load_fly_masks_dev
    from bench_tracks import load_or_train_model
    from napari_session import EventLoopMonitor, bare_repaint_stall, cpu_slowdown
    from msclassify_napari._frame_labels import FrameLabels
    from msclassify_napari._objects import ObjectTableWidget

    model = load_or_train_model(args.model)
    data = load_fly_masks_dev()
    frames = np.stack(data["test_images"])
    masks = np.stack(data["test_masks"])
    segmentation = FrameLabels(len(frames), frames.shape[1:])
    for t, frame in enumerate(frames):
        segmentation[t] = model.predict(frame)

    app = QApplication.instance() or QApplication([])
    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(1500, 1000)
    viewer.add_image(frames, name="flies")
    viewer.add_labels(segmentation, name="flies segmentation", opacity=0.0)
    dock = ObjectTableWidget(viewer)
    viewer.window.add_dock_widget(dock, name="Object table and tracks")
    dock.labels_choice.setCurrentText("flies segmentation")
    dock.image_choice.setCurrentText("flies")
    dock.min_size.setValue(20)
    dock.split.setCurrentText("intensity")
    dock.tracks.setChecked(False)   # 10 frames far apart in the video: nothing to link
    _settle(app, 30)
    monitor = EventLoopMonitor()
    floor = bare_repaint_stall(viewer, monitor)
    measure_s, measure_stall = timed(app, monitor, dock.measure, dock.measured)

    # the truth of every measured object, from the masks
    truth = []
    for frame, rows in dock.table.groupby("frame", sort=True):
        objects = np.asarray(dock.objects.frame(int(frame)))
        flies = set(np.unique(objects[masks[frame] > 0]).tolist()) - {0}
        truth += ["fly" if int(k) in flies else "debris" for k in rows["object"]]
    truth = np.array(truth)

    # click two flies and two debris objects, on the first frames that have them
    viewer.reset_view()
    dock.label_check.setChecked(True)
    clicked = {"fly": [], "debris": []}
    for row in range(len(dock.table)):
        name = truth[row]
        if len(clicked[name]) < 2:
            clicked[name].append(row)
    for name, rows in clicked.items():
        dock.class_choice.setCurrentText(name)
        for row in rows:
            frame = int(dock.table["frame"].iloc[row])
            viewer.dims.set_current_step(0, frame)
            _settle(app, 5)
            objects = np.asarray(dock.objects.frame(frame))
            click(app, viewer, inner_point(objects, int(dock.table["object"].iloc[row])))
    labelled = dock.labels.table()["class"].tolist()
    train_s, train_stall = timed(app, monitor, dock.train, dock.classified)
    found = dock.table["class"].to_numpy()
    accuracy = float(np.mean([np.mean(found[truth == c] == c) for c in np.unique(truth)]))
    slowdown = cpu_slowdown()
    results = {
        "frames": len(frames), "frame_shape": list(frames.shape[1:]), "objects": len(truth),
        "flies": int((truth == "fly").sum()), "debris": int((truth == "debris").sum()),
        "clicked": labelled, "measure_s": measure_s, "measure_stall_s": measure_stall,
        "train_and_classify_s": train_s, "train_stall_s": train_stall,
        "bare_repaint_stall_s": floor, "balanced_accuracy": accuracy,
        "groups_used": dock.classifier.groups_used_,
        "cost_per_object_us": dock.classifier.cost_per_object() * 1e6,
        "cpu_slowdown": slowdown, "cpu": cpu_model(), "load_average": list(os.getloadavg())}
    write_results("napari_objects", results)
    print(f"CPU {cpu_model()}, load {os.getloadavg()[0]:.1f}, slowdown {slowdown:.2f}")
    print_table([{"action": "measure", "seconds": measure_s, "stall_s": measure_stall},
                 {"action": "train + classify", "seconds": train_s, "stall_s": train_stall},
                 {"action": "bare repaint", "seconds": "", "stall_s": floor}],
                ["action", "seconds", "stall_s"])
    print(f"{len(truth)} objects ({results['flies']} flies, {results['debris']} debris), "
          f"clicked {labelled}: balanced accuracy {accuracy:.3f}, groups "
          f"{results['groups_used']}, {results['cost_per_object_us']:.0f} us per object")

    if args.screenshot:
        import imageio.v3 as iio
        from bench_napari import _close_toasts
        # the frame of the first debris clicked, zoomed on it and the fly nearest to it; its
        # row selected in the table
        debris_row = clicked["debris"][0]
        frame = int(dock.table["frame"].iloc[debris_row])
        dock.view.selectRow(debris_row)
        rows = np.flatnonzero((dock.table["frame"].to_numpy() == frame) & (truth == "fly"))
        centres = dock.table[["centroid-0", "centroid-1"]].to_numpy()
        fly_row = rows[np.argmin(np.hypot(*(centres[rows] - centres[debris_row]).T))]
        top, left = np.minimum(centres[debris_row], centres[fly_row]) - 90
        bottom, right = np.maximum(centres[debris_row], centres[fly_row]) + 90
        from napari_session import canvas_widget
        canvas = canvas_widget(viewer)
        viewer.scene.camera.center = ((top + bottom) / 2, (left + right) / 2)
        viewer.scene.camera.zoom = min(canvas.height() / (bottom - top),
                                       canvas.width() / (right - left))
        _close_toasts(app, viewer)
        _settle(app, 40)
        iio.imwrite(Path(args.screenshot), viewer.screenshot(canvas_only=False, flash=False))
        print(f"wrote {args.screenshot}")
    viewer.close()


if __name__ == "__main__":
    main()
