"""The napari *Large image* dock as a user meets it on a big EM mosaic: stalls and latencies.

Run (needs a display; Xvfb is enough):
``xvfb-run -a python benchmarks/bench_napari_large.py [--size 8192] [--tmp DIR]
[--screenshot docs/napari_large.png] [--whole-limit SECONDS]``
(``QT_API=pyqt6`` picks Qt 6 when several bindings are installed).
Writes benchmarks/results/napari_large.json and prints a table.

The image is an OME-Zarr (NGFF 0.5, uint16, 1024² chunks) tiled from the 15 real
``isbi2012_em`` frames by `bench_large.build_mosaic`, with a pyramid added (every 2nd,
4th, ... pixel, down to <= 1024 a side) so napari shows it as a multiscale layer. It is
built in a temporary folder (``--tmp`` keeps it for the next run). A real napari window
(Xvfb) shows it; everything goes through Qt's event loop, with the machinery of
``bench_napari.py`` and ``napari_session.py``:

* **open**: the plugin's reader run through npe2 (as *File > Open Folder*: its module and
  zarr imported then) and the multiscale layer added; then the dock docked;
* **Scribble here** at zoom 1 over the middle of the mosaic (a Labels layer over the
  region on screen, painting into `TiledLabels`);
* **strokes**: left-button drags sent as Qt mouse events, class 1 (cell interior) along
  40 px inside the real mask's cells, class 2 (membrane) along 8 px of its membranes
  (the masks of the tiles, `isbi2012_em/label_*.png`); per stroke, the GUI time per mouse
  move (move event -> end of the paint that shows it) and the longest stall;
* **Train** (the button): crops around the scribbles only, in a worker thread;
  train latency = click -> the dock says it is trained;
* **Segment visible region**: click -> the result layer painted; its membrane F1 against
  the real masks of the region (demo, not an accuracy claim: few scribbles);
* **Segment whole image** into an OME-Zarr store, in a worker thread, while the view pans
  and zooms (one camera move every 0.4 s: a new centre, and a zoom from the whole image
  to 2x); the longest stall per move; stopped after ``--whole-limit`` s if set;
* **bare canvas repaint (floor)**: one repaint of the canvas with nothing else to do.

Stall = the longest gap of a 10 ms timer on the GUI thread (`EventLoopMonitor`) during the
step; target <= 0.1 s. The load average and `cpu_slowdown` are recorded with each row.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import REPO, SHARED_DATA, command_line, cpu_model, print_table, write_results
from bench_large import TILE, _tile, build_mosaic
from bench_napari import (TARGET_STALL_S, _close_toasts, _qt_api, _settle, cpu_slowdown_now,
                          measure_repaint_floor, mouse_move_times)

sys.path.insert(0, str(REPO / "plugins"))

CELL, MEMBRANE = 1, 2


def add_pyramid(path, min_side=1024):
    """Levels 1, 2, ... (every 2nd pixel of the level before) of the OME-Zarr image at
    ``path``, written block by block, down to ``min_side``; the multiscales metadata lists
    them."""
    import zarr
    root = zarr.open_group(str(path), mode="r+")
    attrs = root.attrs.asdict()
    datasets = attrs["ome"]["multiscales"][0]["datasets"][:1]
    level, previous = 0, root["0"]
    while min(previous.shape) > min_side:
        level += 1
        shape = tuple((n + 1) // 2 for n in previous.shape)
        array = root.create_array(str(level), shape=shape, chunks=previous.chunks,
                                  dtype=previous.dtype, overwrite=True)
        step = previous.chunks[0]
        for y in range(0, shape[0], step):
            for x in range(0, shape[1], step):
                array[y:y + step, x:x + step] = previous[2 * y:2 * (y + step):2,
                                                         2 * x:2 * (x + step):2]
        datasets.append({"path": str(level), "coordinateTransformations": [
            {"type": "scale", "scale": [2.0 ** level] * 2}]})
        previous = array
    attrs["ome"]["multiscales"][0]["datasets"] = datasets
    root.attrs.update(attrs)
    return level + 1


def mosaic_mask(region):
    """The real membrane mask (True on membranes) of ``region`` of the mosaic: the tiles'
    label images, flipped as `bench_large` flips their frames."""
    import imageio.v3 as iio
    masks = [iio.imread(SHARED_DATA / "isbi2012_em" / f"label_{i}.png") == 0 for i in range(15)]
    (y0, y1), (x0, x1) = ((r.start, r.stop) for r in region)
    out = np.zeros((y1 - y0, x1 - x0), bool)
    for row in range(y0 // TILE, (y1 - 1) // TILE + 1):
        for col in range(x0 // TILE, (x1 - 1) // TILE + 1):
            tile = _tile(masks, row, col)
            ty, tx = row * TILE, col * TILE
            ys = slice(max(y0, ty), min(y1, ty + TILE))
            xs = slice(max(x0, tx), min(x1, tx + TILE))
            out[ys.start - y0:ys.stop - y0, xs.start - x0:xs.stop - x0] = \
                tile[ys.start - ty:ys.stop - ty, xs.start - tx:xs.stop - tx]
    return out


def stroke_paths(membrane, origin, n, seed):
    """``n`` strokes per class inside the real mask of the region at ``origin``: class 1
    along 40 px of cell interior (>= 8 px from a membrane), class 2 along 8 px of a
    membrane's core (>= 2 px inside it); horizontal or vertical, level-0 image pixels."""
    from scipy import ndimage
    rng = np.random.default_rng(seed)
    paths = []
    for value, mask, depth, length in ((CELL, ~membrane, 8, 40), (MEMBRANE, membrane, 2, 8)):
        core = ndimage.distance_transform_edt(mask) >= depth
        found = []
        for y, x in rng.permutation(np.argwhere(core)):
            for dy, dx in ((0, 1), (1, 0)):
                ys, xs = y + dy * np.arange(0, length + 1, 2), x + dx * np.arange(0, length + 1, 2)
                if ys.max() < core.shape[0] and xs.max() < core.shape[1] and core[ys, xs].all():
                    found.append((value, [(origin[0] + a, origin[1] + b) for a, b in zip(ys, xs)]))
                    break
            if len(found) == n:
                break
        paths += found
    return paths


def stall_while(app, monitor, seconds):
    """Process events for ``seconds``, and until the timer ticked (a stall longer than
    ``seconds`` is measured, not NaN); the longest stall meanwhile."""
    monitor.mark()
    ticks, end = len(monitor.ticks), time.perf_counter() + seconds
    while time.perf_counter() < end or len(monitor.ticks) == ticks:
        app.processEvents()
        time.sleep(0.002)
    return monitor.longest_gap()[0]


def until_signal(app, monitor, dock, signal, action, timeout=3600):
    """Run ``action`` and process events until ``signal`` fires and ``dock``'s worker has
    finished; (seconds to the signal, longest stall)."""
    from napari_session import wait_until
    fired = []
    connection = signal.connect(lambda *_: fired.append(time.perf_counter()))
    monitor.mark()
    start = time.perf_counter()
    action()
    wait_until(lambda: bool(fired), timeout)
    _settle(app, 5)
    wait_until(lambda: dock.worker is None, 60)          # its buttons enabled again
    signal.disconnect(connection)
    return fired[0] - start, monitor.longest_gap()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192, help="side of the mosaic (>= 8192)")
    parser.add_argument("--tmp", help="folder for the mosaic and the store (kept; default a "
                                      "temporary folder)")
    parser.add_argument("--strokes", type=int, default=10, help="strokes per class")
    parser.add_argument("--whole-limit", type=float, default=None,
                        help="stop Segment whole image after this many seconds")
    parser.add_argument("--idle-moves", type=int, default=15,
                        help="camera moves with nothing running (napari's own stalls)")
    parser.add_argument("--screenshot", metavar="PNG", help="e.g. docs/napari_large.png")
    args = parser.parse_args()

    import napari
    import npe2
    from qtpy.QtWidgets import QApplication

    from napari_session import CanvasPaints, EventLoopMonitor, wait_until

    folder = Path(args.tmp or tempfile.mkdtemp(prefix="napari_large_"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"mosaic_{args.size}.ome.zarr"
    if not (path / "1").exists():
        print(f"building {path} ...", flush=True)
        build_mosaic(path, args.size)
        add_pyramid(path)
    output = folder / f"mosaic_{args.size}.labels.zarr"
    if output.exists():
        import shutil
        shutil.rmtree(output)
        Path(str(output).removesuffix(".zarr") + ".msc").unlink(missing_ok=True)

    rows = []

    def row(action, **values):
        rows.append({"action": action, **values, "load": round(os.getloadavg()[0], 2),
                     "slowdown": round(cpu_slowdown_now(), 2)})
        print(rows[-1], flush=True)

    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(1500, 1050)
    app = QApplication.instance()
    monitor = EventLoopMonitor()
    paints = CanvasPaints(viewer)
    _settle(app, 30)

    # opened as File > Open Folder does: the plugin's reader through npe2 (its module
    # imported then), its layer added; neither the dock's module nor zarr imported before
    # (zarr is when the mosaic was built in this run)
    zarr_before = "zarr" in sys.modules
    monitor.mark()
    for data, kwargs, kind in npe2.read([str(path)], stack=False, plugin_name="msclassify"):
        getattr(viewer, f"add_{kind}")(data, **kwargs)
    _settle(app, 30)
    row("open the mosaic (multiscale layer)", stall_s=monitor.longest_gap()[0],
        levels=len(viewer.layers[-1].data), zarr_imported_before=zarr_before)
    import zarr

    from msclassify_napari._large import REGION_SIDE, LargeImageWidget
    monitor.mark()
    begin = time.perf_counter()
    dock = LargeImageWidget(viewer)
    viewer.window.add_dock_widget(dock, name="Large image")
    _settle(app, 30)
    # the classifier loads in a worker after docking: the window stays live meanwhile
    wait_until(lambda: dock.features_combo.count() > 1, 300)
    _settle(app, 10)
    row("dock the Large image widget (until the classifier is loaded in the background)",
        stall_s=monitor.longest_gap()[0], seconds=time.perf_counter() - begin)
    row("bare canvas repaint (floor)", **measure_repaint_floor(app, viewer, monitor, paints))

    # zoom 1 over the middle of the mosaic, scribble there; napari's own add of a Labels layer
    # of that shape first (the session's first Labels layer: napari imports its modules)
    viewer.scene.camera.center = (args.size / 2 + 200, args.size / 2 + 300)
    viewer.scene.camera.zoom = 1.0
    _settle(app, 30)
    job = dock.job()
    shape = tuple(r.stop - r.start for r in job.visible_region(dock.view_corners(), REGION_SIDE))
    monitor.mark()
    peer = viewer.add_labels(np.zeros(shape, np.uint8), name="plain Labels")
    _settle(app, 30)
    row("napari's own: first Labels layer of the session (np.zeros, that shape)",
        stall_s=monitor.longest_gap()[0])
    monitor.mark()
    dock.scribble_here()
    _settle(app, 30)
    layer = viewer.layers[dock._scribble_name()]
    row("Scribble here (a Labels layer over the view)", stall_s=monitor.longest_gap()[0],
        region=f"{layer.data.shape[0]}x{layer.data.shape[1]}")
    peer.translate = layer.translate
    peer.visible = False
    origin = layer.data.origin
    region = tuple(slice(o, o + n) for o, n in zip(origin, layer.data.shape))
    membrane = mosaic_mask(region)
    # strokes are kept on the canvas (its middle 80 %)
    height, width = (np.asarray(viewer.canvas.size) * 0.8).astype(int)
    inner = (slice((membrane.shape[0] - height) // 2, (membrane.shape[0] + height) // 2),
             slice((membrane.shape[1] - width) // 2, (membrane.shape[1] + width) // 2))
    paths = stroke_paths(membrane[inner], (origin[0] + inner[0].start,
                                           origin[1] + inner[1].start), args.strokes, 0)
    moves, stroke_stalls = {"ours": [], "plain": []}, {"ours": [], "plain": []}
    # the same stroke on ours and on a plain Labels layer, which goes first alternating (the
    # session's first stroke pays napari's first-paint costs)
    for number, (value, points) in enumerate(paths):
        dock.class_spin.setValue(value)
        order = (("plain", peer), ("ours", layer))
        for kind, target in order if number % 2 == 0 else order[::-1]:
            target.visible, target.selected_label = True, value
            target.brush_size = 6 if value == CELL else 3
            (peer if kind == "ours" else layer).visible = False
            _settle(app, 3)
            monitor.mark()
            moves[kind] += mouse_move_times(app, viewer, paints, target, points)
            stroke_stalls[kind].append(monitor.longest_gap()[0])
    layer.visible = True
    viewer.layers.remove(peer)
    viewer.layers.selection.active = layer
    stored = dock.job().scribbles
    for kind, name in (("ours", "strokes on the scribble layer (real mouse events)"),
                       ("plain", "napari's own: the same strokes on a plain Labels layer")):
        row(name, strokes=len(paths), stall_s=max(stroke_stalls[kind]),
            stall_median_s=statistics.median(stroke_stalls[kind]),
            move_ms_median=1000 * statistics.median(moves[kind]),
            move_ms_max=1000 * max(moves[kind]))
    rows[-2].update(scribbled_px=int((stored[region] > 0).sum()),
                    stored_mb=stored.nbytes_stored / 1e6)

    seconds, stall = until_signal(app, monitor, dock, dock.trained, dock.train_button.click)
    model = dock.job().model
    row("Train (crops around the scribbles)", seconds=seconds, stall_s=stall,
        features_used=len(model.features_used_), trees=model.booster_.n_trees)

    viewer.layers.selection.active = viewer.layers[0]
    clicked = time.perf_counter()
    seconds, stall = until_signal(app, monitor, dock, dock.region_shown, dock.visible_button.click)
    shown = clicked + seconds
    wait_until(lambda: paints.first_after(shown) is not None, 30)
    result = viewer.layers["visible region"]
    top, left = (int(v) for v in result.translate)
    truth = mosaic_mask((slice(top, top + result.data.shape[0]),
                         slice(left, left + result.data.shape[1])))
    predicted = result.data == MEMBRANE
    f1 = 2 * (predicted & truth).sum() / max(predicted.sum() + truth.sum(), 1)
    row("Segment visible region (first: adds its layer)",
        seconds=paints.first_after(shown)[1] - clicked,
        stall_s=stall, region=f"{result.data.shape[0]}x{result.data.shape[1]}",
        membrane_f1=round(float(f1), 3))
    viewer.scene.camera.center = np.asarray(viewer.scene.camera.center) + 150
    _settle(app, 20)
    clicked = time.perf_counter()
    seconds, stall = until_signal(app, monitor, dock, dock.region_shown, dock.visible_button.click)
    wait_until(lambda: paints.first_after(clicked + seconds) is not None, 30)
    row("Segment visible region (again, after a pan)",
        seconds=paints.first_after(clicked + seconds)[1] - clicked, stall_s=stall)

    viewer.scene.camera.center = (args.size / 3, args.size / 4)      # scribble elsewhere
    _settle(app, 30)
    monitor.mark()
    dock.scribble_here()
    _settle(app, 30)
    row("Scribble here again, elsewhere (the layer moves)", stall_s=monitor.longest_gap()[0])

    # the whole image in the background, while the view pans and zooms; the same camera
    # moves with nothing running first (napari reading and drawing the levels: its own)
    fit_zoom = min(viewer.canvas.size) / args.size

    def camera_move(rng):
        viewer.scene.camera.center = tuple(rng.uniform(0.1, 0.9, 2) * args.size)
        viewer.scene.camera.zoom = float(np.exp(rng.uniform(np.log(fit_zoom), np.log(2.0))))

    rng = np.random.default_rng(1)
    idle_stalls = []
    for _ in range(args.idle_moves):
        camera_move(rng)
        idle_stalls.append(stall_while(app, monitor, 0.4))
    row("pan/zoom, nothing running (napari's own)", stall_s=max(idle_stalls),
        stall_median_s=statistics.median(idle_stalls), camera_moves=len(idle_stalls))
    dock.output_path.setText(str(output))
    finished = []
    dock.whole_finished.connect(lambda *_: finished.append(time.perf_counter()))
    start = time.perf_counter()
    monitor.mark()
    dock.whole_button.click()
    _settle(app, 5)
    start_stall = monitor.longest_gap()[0]
    pan_stalls = []
    finish_stall = float("nan")
    while dock.worker is not None:
        camera_move(rng)
        stall = stall_while(app, monitor, 0.4)
        if finished:        # this move saw the written labels opened as a multiscale layer
            finish_stall = stall
        else:
            pan_stalls.append(stall)
        if args.whole_limit and time.perf_counter() - start > args.whole_limit \
                and not dock._stop_requested:
            dock.stop_button.click()
    seconds = (finished[0] if finished else time.perf_counter()) - start
    done = int(zarr.open_group(str(output), mode="r")["msclassify_done"][:].sum())
    row("Segment whole image + pan/zoom", seconds=seconds, stall_s=max(pan_stalls + [start_stall]),
        stall_median_s=statistics.median(pan_stalls), start_stall_s=start_stall,
        finish_stall_s=finish_stall,
        camera_moves=len(pan_stalls), chunks_done=done, finished=bool(finished),
        mpixel_per_s=done * 1024 * 1024 / seconds / 1e6)
    row("bare canvas repaint (floor)", **measure_repaint_floor(app, viewer, monitor, paints))

    if args.screenshot:
        import imageio.v3 as iio
        viewer.layers["visible region"].visible = False
        viewer.scene.camera.center = (origin[0] + 500, origin[1] + 450)   # the first strokes
        viewer.scene.camera.zoom = 0.75
        _settle(app, 10)
        dock.scribble_here()
        _settle(app, 60)
        _close_toasts(app, viewer)
        _settle(app, 30)
        iio.imwrite(args.screenshot, viewer.screenshot(canvas_only=False, flash=False))

    columns = ["action", "seconds", "stall_s", "stall_median_s", "move_ms_median", "move_ms_max",
               "region", "membrane_f1", "chunks_done", "mpixel_per_s", "load", "slowdown"]
    print_table(rows, columns)
    path_json = write_results("napari_large", {
        "size": args.size, "cpu": cpu_model(), "qt": _qt_api(), "napari": napari.__version__,
        "target_stall_s": TARGET_STALL_S, "rows": rows},
        command=command_line("xvfb-run -a python"))
    print(f"wrote {path_json}")
    monitor.stop()
    paints.remove()
    viewer.close()


if __name__ == "__main__":
    main()
