"""Does napari's asynchronous slicing shorten the stall of a frame change? Real window, fly stack.

Run (needs a display; Xvfb is enough), alternating the setting between processes::

    QT_API=pyqt6 NAPARI_ASYNC=0 xvfb-run -a python benchmarks/study_frame_change.py
    QT_API=pyqt6 NAPARI_ASYNC=1 xvfb-run -a python benchmarks/study_frame_change.py

``NAPARI_ASYNC=1`` is napari's public switch for Preferences > Experimental > "Render Layers
Asynchronously" (``napari.settings.get_settings().experimental.async_``), here for this process
only, so the user's saved settings are not touched. Appends one JSON line per run to
benchmarks/results/frame_change_study.jsonl and prints a table.

The window holds the 10 fly frames (1024x1024, fly_masks_dev) with their scribbles and the
Pixel classifier docked (its segmentation layer shown, live update off), as in
``bench_napari.py``. The time slider is moved one frame at a time; for each move the stall is
the longest gap of a 10 ms timer on the GUI thread (`napari_session.EventLoopMonitor`) from
the move until the window has been idle for 0.5 s (so a slice finished in a thread and drawn
later is counted), next to the bare canvas repaint (the floor) measured between moves.

``--video`` instead opens the 1500-frame fly video (fly_sleap/clip.mp4, 1024², key frames every
250th) with the plugin's reader in a fresh napari session per checkout (napari's default
synchronous slicing: the frame is decoded on the GUI thread), alternating this checkout and
``--compare DIR`` (before) round by round::

    QT_API=pyqt6 xvfb-run -a python benchmarks/study_frame_change.py --video --rounds 3 \
        --compare /work/main

Each session moves the time slider: far jumps (frames 230-249 after their key frame, forwards
and backwards), one-frame steps back and one-frame steps forward; for each move the stall (as
above) and the time the reader took (``FrameSource.read``, on the GUI thread). Then, in the same
window, the same moves on an in-memory image of the video's shape (napari's own floor of a frame
change: slicing and repainting, no decoding) and the bare canvas repaint. Writes
benchmarks/results/frame_change_video.json and prints a table (medians). ``--decode`` makes the
same moves with the reader alone (no napari; then the first 250 frames in order), in fresh
processes alternated the same way (benchmarks/results/frame_change_decode.json)::

    python benchmarks/study_frame_change.py --decode --rounds 5 --compare /work/main
"""

import argparse
import json
import os
import statistics
import time

from _common import (REPO, RESULTS, SHARED_DATA, cpu_model, napari_checkouts, napari_child,
                     print_table, write_checkouts_results)


def _settle(app, seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        app.processEvents()
        time.sleep(0.01)


# the moves of a --video session: (kind, frame); the slider starts at frame 0
FAR_JUMPS = [1240, 480, 1490, 740, 245, 990]           # 230-249 frames after their key frame
VIDEO_MOVES = ([("far jump " + ("back" if frame < before else "forward"), frame)
                for before, frame in zip([0] + FAR_JUMPS, FAR_JUMPS)]
               + [("step back", frame) for frame in range(989, 979, -1)]
               + [("step forward", frame) for frame in range(981, 991)])

_VIDEO_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, ARGS["benchmarks"])
import numpy as np
import napari
from qtpy.QtWidgets import QApplication
from napari_session import (EventLoopMonitor, bare_repaint_stall, cpu_slowdown, settle,
                            wait_until)

viewer = napari.Viewer(show=True)
viewer.window._qt_window.resize(1500, 1050)
app = QApplication.instance()
monitor = EventLoopMonitor()
[clip] = viewer.open(ARGS["video"], plugin="msclassify")
source = clip.data.source
reads = []
read = source.read


def timed_read(index):
    begin = time.perf_counter()
    frame = read(index)
    reads.append(time.perf_counter() - begin)
    return frame


source.read = timed_read
from msclassify_napari._preload import preloaded     # opening the video started it, in a thread
wait_until(lambda: preloaded() is not None, 600)     # (it holds the GIL while importing)
settle(app, 100)


def moves(layer):
    rows = []
    viewer.dims.set_current_step(0, 0)
    settle(app, 50)
    for kind, frame in ARGS["moves"]:
        settle(app, 20)
        del reads[:]
        monitor.mark()
        viewer.dims.set_current_step(0, frame)
        settle(app, 50)
        assert viewer.dims.current_step[0] == frame
        rows.append({"kind": kind, "frame": frame, "stall_s": monitor.longest_gap()[0],
                     "read_s": sum(reads), "load": os.getloadavg()[0]})
    return rows


out = {"video": moves(clip), "floor_s": [bare_repaint_stall(viewer, monitor) for _ in range(3)]}
frame = np.asarray(clip.data[0])
viewer.layers.remove(clip)
memory = viewer.add_image(np.broadcast_to(frame, clip.data.shape), name="in memory",
                          contrast_limits=(0, 255))
settle(app, 50)
out["in memory"] = moves(memory)
out["floor_s"] += [bare_repaint_stall(viewer, monitor) for _ in range(3)]
out.update({"slowdown": cpu_slowdown(), "load": os.getloadavg()[0],
            "reader": sys.modules["msclassify"].__file__})
print("RESULT " + json.dumps(out))
monitor.stop()
viewer.close()
"""


_DECODE_CHILD = r"""
import json, os, time
from msclassify.io import open_frames
source = open_frames(ARGS["video"], as_gray="auto")
source.read(0)
rows = []
for kind, frame in ARGS["moves"]:
    begin = time.perf_counter()
    source.read(frame)
    rows.append({"kind": kind, "frame": frame, "read_s": time.perf_counter() - begin})
begin = time.perf_counter()
for _ in source.iter_frames(0, 250):
    pass
rows.append({"kind": "sequential, per frame", "read_s": (time.perf_counter() - begin) / 250})
print("RESULT " + json.dumps({"video": rows, "load": os.getloadavg()[0]}))
"""


def decode_session(checkout):
    """The reader alone (no napari), in a fresh process of ``checkout``: `VIDEO_MOVES`, then
    the first 250 frames in order."""
    arguments = {"moves": VIDEO_MOVES, "video": str(SHARED_DATA / "fly_sleap" / "clip.mp4")}
    return napari_child(f"ARGS = {arguments!r}\n" + _DECODE_CHILD, checkout)


def decode_study(args):
    checkouts, runs = napari_checkouts(args.compare, args.rounds, decode_session)
    rows = []
    for kind in dict.fromkeys(row["kind"] for row in next(iter(runs.values()))[0]["video"]):
        for label, results in runs.items():
            reads = [row["read_s"] for result in results for row in result["video"]
                     if row["kind"] == kind]
            rows.append({"move": kind, "checkout": label, "n": len(reads),
                         "read_median_ms": 1000 * statistics.median(reads),
                         "read_max_ms": 1000 * max(reads),
                         "load": statistics.median(result["load"] for result in results)})
    print(f"{cpu_model()}; the reader alone; medians over {args.rounds} processes per "
          f"checkout; load now {os.getloadavg()[0]:.2f}")
    print_table(rows, ["move", "checkout", "n", "read_median_ms", "read_max_ms", "load"])
    write_checkouts_results("frame_change_decode", {"rounds": args.rounds,
                                                    "moves": VIDEO_MOVES}, checkouts, rows, runs)


def video_session(checkout):
    """One fresh napari session of ``checkout`` moving along the fly video (`_VIDEO_CHILD`)."""
    arguments = {"benchmarks": str(REPO / "benchmarks"), "moves": VIDEO_MOVES,
                 "video": str(SHARED_DATA / "fly_sleap" / "clip.mp4")}
    return napari_child(f"ARGS = {arguments!r}\n" + _VIDEO_CHILD, checkout)


def video_study(args):
    checkouts, runs = napari_checkouts(args.compare, args.rounds, video_session)
    rows = []
    for kind in dict.fromkeys(kind for kind, _ in VIDEO_MOVES):
        for label, results in runs.items():
            for layer in ("video", "in memory"):
                moved = [row for result in results for row in result[layer]
                         if row["kind"] == kind]
                rows.append({
                    "move": kind, "checkout": label,
                    "layer": "fly video (our reader)" if layer == "video" else
                             "in-memory image, same shape (napari)",
                    "n": len(moved),
                    "stall_median_ms": 1000 * statistics.median(r["stall_s"] for r in moved),
                    "stall_max_ms": 1000 * max(r["stall_s"] for r in moved),
                    "read_median_ms": 1000 * statistics.median(r["read_s"] for r in moved)
                    if layer == "video" else None,
                    "load": statistics.median(r["load"] for r in moved)})
    for label, results in runs.items():
        floors = [floor for result in results for floor in result["floor_s"]]
        rows.append({"move": "bare canvas repaint (floor)", "checkout": label, "n": len(floors),
                     "stall_median_ms": 1000 * statistics.median(floors),
                     "stall_max_ms": 1000 * max(floors)})
    print(f"{cpu_model()}; synchronous slicing; medians over {args.rounds} sessions per "
          f"checkout; load now {os.getloadavg()[0]:.2f}")
    print_table(rows, ["move", "checkout", "layer", "n", "stall_median_ms", "stall_max_ms",
                       "read_median_ms", "load"])
    write_checkouts_results("frame_change_video", {"rounds": args.rounds, "moves": VIDEO_MOVES},
                            checkouts, rows, runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--video", action="store_true",
                        help="the fly video instead of the fly stack, fresh sessions per checkout")
    parser.add_argument("--decode", action="store_true",
                        help="the --video moves by the reader alone (no napari), fresh processes "
                             "per checkout")
    parser.add_argument("--rounds", type=int, default=3,
                        help="--video/--decode: sessions per checkout")
    parser.add_argument("--compare", metavar="DIR", help="--video/--decode: another checkout "
                                                         "(before), alternated round by round")
    args = parser.parse_args()
    if args.video or args.decode:
        (video_study if args.video else decode_study)(args)
        return
    import napari
    from napari.settings import get_settings
    from qtpy.QtWidgets import QApplication
    from bench_napari import make_session
    from napari_session import bare_repaint_stall, cpu_slowdown

    load = os.getloadavg()[0]
    viewer, widget, layer, monitor, _ = make_session()     # flies, scribbles, the widget docked
    app = QApplication.instance()
    n_frames = layer.data.shape[0]
    _settle(app, 1.0)
    rows = []
    for repeat in range(args.repeats):
        _settle(app, 0.2)
        floor = bare_repaint_stall(viewer, monitor)
        _settle(app, 0.2)
        monitor.mark()
        viewer.dims.set_current_step(0, (repeat + 1) % n_frames)
        _settle(app, 0.5)
        rows.append({"stall_s": monitor.longest_gap()[0], "floor_s": floor,
                     "slowdown": cpu_slowdown(), "load": os.getloadavg()[0]})
    monitor.stop()
    asynchronous = bool(get_settings().experimental.async_)
    result = {"napari": napari.__version__, "async_slicing": asynchronous, "cpu": cpu_model(),
              "load_average_at_start": load, "rows": rows,
              "stall_median_s": statistics.median(r["stall_s"] for r in rows),
              "floor_median_s": statistics.median(r["floor_s"] for r in rows)}
    with open(RESULTS / "frame_change_study.jsonl", "a") as fh:
        fh.write(json.dumps(result) + "\n")
    print(f"{result['cpu']}; napari {napari.__version__}; asynchronous slicing: {asynchronous}; "
          f"load at start {load:.2f}")
    print_table([{"frame change": "fly stack + scribbles + our segmentation",
                  "n": len(rows), "stall_median_ms": round(1000 * result["stall_median_s"]),
                  "stall_max_ms": round(1000 * max(r["stall_s"] for r in rows)),
                  "floor_median_ms": round(1000 * result["floor_median_s"]),
                  "slowdown": round(statistics.median(r["slowdown"] for r in rows), 2),
                  "load": round(statistics.median(r["load"] for r in rows), 2)}],
                ["frame change", "n", "stall_median_ms", "stall_max_ms", "floor_median_ms",
                 "slowdown", "load"])


if __name__ == "__main__":
    main()
