"""Objects and tracks of the 120 s fly video, against SLEAP's keypoints of both flies.

Run: ``python benchmarks/bench_tracks.py [--stop N] [--model PATH] [--configs NAME ...]``. Writes
benchmarks/results/tracks.json, docs/objects_tracks.png, and prints a table.
``--cli-frames N --model PATH [PATH ...]`` instead times the whole pipeline as a user
runs it, for each model, ``msclassify predict MODEL VIDEO --frames 0:N --table T.csv --tracks --min-size 500
--split intensity`` (no frames written), in-process and with ``--workers 2``,
interleaved, with the load average at each start (results/tracks_cli.json).

The pixel model is the default `PixelClassifier(random_state=0)` trained on the
scribbles of ``fly_masks_dev`` (10 frames of this video; ``--model`` reuses a
saved one). Every frame of ``fly_sleap/20190128_113421.120s.mp4`` (3000,
1024x1024) is read, predicted once (labels, and the probabilities only if a
configuration needs them, as ``msclassify predict --table`` does), and its objects
made by each configuration of `msclassify.objects.ObjectPipeline`:

``components``
    connected components of the fly class of at least 20 px, no splitting
    (what a user gets from the mask and regionprops alone);
``size + split``
    components of at least 500 px (a fly at this magnification covers 2000 to
    4000 px: a quarter of the smallest is the cut), split where they touch by a
    watershed of the frame's brightness (`ObjectSplitter("intensity")`: the flies'
    bodies are bright, their wings dim; depth 0.2, pieces of at least 500 px);
``classifier + split``
    components of at least 20 px, split the same way, classified fly vs debris
    by an `ObjectClassifier` learnt from the objects found in the 10 test frames
    of fly_masks_dev (an object touching a fly of its masks is a fly, any other
    is debris: no SLEAP data); only flies are tracked;
``size + classifier + split``
    the components of ``size + split`` (at least 500 px), split the same way and
    classified by the same `ObjectClassifier` (only flies are tracked): every step of
    segment, measure, classify and track.

Each is tracked by `ObjectTracker(search_range=100, memory=25)` (half the last
velocity, `velocity_weight=0.5`, on the intensity-weighted centroids). The size and
split settings were not chosen by looking at the SLEAP reference; the tracker's half
velocity and weighted centroids were chosen after finding, against it, where a track
broke (docs/objects.md, *Axis, identity and speed*).

Reference: SLEAP's ``predictions.analysis.h5`` (head, thorax, abdomen of two
tracked flies in every frame). The body centre is the mean of the three; the
body axis runs from abdomen to head. A frame lacking one of a fly's three
keypoints is left out of the centroid, axis and identity measures.

Measures (per configuration, over the fly objects of each frame):

* ``right count``: fraction of frames with exactly 2 flies;
* ``centroid error``: objects matched to SLEAP's flies (Hungarian, on distance);
  distance from the object's centroid to the body centre, median and p90 (px);
  ``weighted centroid``: the same for ``centroid_weighted`` (intensity-weighted:
  the bright body counts more than the dim wings, which SLEAP's centre leaves out);
* ``axis error``: angle between the object's major axis (``orientation``) and the
  abdomen -> head line, modulo 180 degrees, median and p90; ``weighted axis``: the
  same for ``orientation_weighted`` (of the intensity-weighted moments); ``body axis``:
  for ``orientation_body`` (of the object's bright part, above Otsu's threshold of its
  own intensities);
* ``identity``: each SLEAP fly's matched track id, frame by frame: a *switch* is a
  frame where the two flies' track ids are exchanged or one takes an id the other
  had; ``tracks`` counts the distinct track ids the two flies ever had (2 is perfect);
* ``frames/s``: the whole run's frames / wall time, read, predicted and measured as
  ``msclassify predict --table`` does (`msclassify.pixel.predict_to_writer`: one
  thread reads ahead, one predicts, one measures the frame before), all cores, with
  every configuration asked for (``--configs``, default all four) measured on each
  frame; ``CPU ms/frame``: the process CPU time of the same, split into read (reader
  thread), objects (per configuration, writer thread) and predict (the rest: the
  predicting thread and Numba's). ``--configs "classifier + split"`` gives the frames/s
  of that configuration alone, as a user runs it.
"""

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

from _common import REPO, SHARED_DATA, cpu_model, print_table, write_results

VIDEO = SHARED_DATA / "fly_sleap" / "20190128_113421.120s.mp4"
SLEAP = SHARED_DATA / "fly_sleap" / "predictions.analysis.h5"
PLOT = REPO / "docs" / "objects_tracks.png"
FLY = 2
MIN_SMALL = 20
CONFIGS = ("components", "size + split", "classifier + split", "size + classifier + split")


def sleap_bodies():
    """(centres (T, 2 flies, 2 = row, col), axes (T, 2, 2) abdomen -> head), NaN where missing."""
    import h5py
    with h5py.File(SLEAP, "r") as f:
        tracks = f["tracks"][:]                          # (fly, xy, node, frame)
        nodes = [n.decode() for n in f["node_names"][:]]
    head, thorax, abdomen = (nodes.index(n) for n in ("head", "thorax", "abdomen"))
    xy = np.transpose(tracks, (3, 0, 2, 1))              # (frame, fly, node, xy)
    rc = xy[..., ::-1]                                   # (row, col)
    centres = rc[:, :, [head, thorax, abdomen]].mean(axis=2)
    axes = rc[:, :, head] - rc[:, :, abdomen]
    return centres, axes


def load_or_train_model(path):
    from msclassify.pixel import PixelClassifier, load_pixel_model
    if path is not None:
        return load_pixel_model(path)
    from _real_data import load_fly_masks_dev
    data = load_fly_masks_dev()
    model = PixelClassifier(random_state=0).fit(data["train_images"], data["train_labels"])
    return model


def debris_classifier(model, splitter):
    """Fly vs debris, from the objects of fly_masks_dev's test frames and their masks; returns
    the classifier, the count of labelled objects per class and what it learnt from
    (``(samples, labels)``, `ObjectClassifier.fit`'s arguments)."""
    from _real_data import load_fly_masks_dev
    from msclassify.objects import ObjectClassifier, find_objects
    from msclassify.pixel import predict_frame
    data = load_fly_masks_dev()
    samples, labels = [], []
    for image, mask in zip(data["test_images"], data["test_masks"]):
        prediction = predict_frame(model, image, probabilities=True)
        objects = find_objects(prediction.labels, FLY, min_size=MIN_SMALL, split=splitter,
                               image=image)
        fly = set(np.unique(objects[mask > 0]).tolist()) - {0}
        labels.append({int(k): "fly" if k in fly else "debris"
                       for k in np.unique(objects) if k})
        samples.append((objects, image))
    classifier = ObjectClassifier(random_state=0).fit(samples, labels)
    counts = {c: sum(list(y.values()).count(c) for y in labels) for c in ("fly", "debris")}
    return classifier, counts, (samples, labels)


def pipelines(model):
    from msclassify.objects import ObjectPipeline, ObjectSplitter, ObjectTracker
    classes = tuple(int(c) for c in model.classes_)
    splitter = ObjectSplitter("intensity", depth=0.2, min_size=500)
    classifier, counts, _ = debris_classifier(model, splitter)

    def tracker():
        return ObjectTracker(search_range=100, memory=25)
    return {
        "components": ObjectPipeline(FLY, classes, min_size=MIN_SMALL, tracker=tracker()),
        "size + split": ObjectPipeline(FLY, classes, min_size=500, splitter=splitter,
                                       tracker=tracker()),
        "classifier + split": ObjectPipeline(FLY, classes, min_size=MIN_SMALL,
                                             splitter=splitter,
                                             classifier=classifier, tracker=tracker(),
                                             track_classes=("fly",)),
        "size + classifier + split": ObjectPipeline(FLY, classes, min_size=500,
                                                    splitter=splitter, classifier=classifier,
                                                    tracker=tracker(), track_classes=("fly",)),
    }, {"labelled objects": counts, "groups used": classifier.groups_used_,
        "cost us/object": classifier.cost_per_object() * 1e6,
        "group costs us/object": {g: c * 1e6 for g, c in classifier.group_costs_.items()}}


def evaluate(table, centres, axes, n_frames, centroid="centroid", orientation="orientation"):
    """The measures of the module docstring for one configuration's table."""
    flies = table[table["track"] >= 0] if "track" in table else table
    counts = np.bincount(flies["frame"].to_numpy(), minlength=n_frames)[:n_frames]
    by_frame = {frame: rows for frame, rows in flies.groupby("frame")}
    distances, angles, switches, ids = [], [], 0, set()
    previous = None
    for frame in range(n_frames):
        if frame not in by_frame or np.isnan(centres[frame]).any() or np.isnan(axes[frame]).any():
            continue
        rows = by_frame[frame]
        found = rows[[f"{centroid}-0", f"{centroid}-1"]].to_numpy()
        cost = np.linalg.norm(found[:, None] - centres[frame][None], axis=2)
        objects, sleap = linear_sum_assignment(cost)
        distances += cost[objects, sleap].tolist()
        theta = rows[orientation].to_numpy()[objects]
        major = np.stack([np.cos(theta), np.sin(theta)], axis=1)
        axis = axes[frame][sleap] / np.linalg.norm(axes[frame][sleap], axis=1, keepdims=True)
        angles += np.degrees(np.arccos(np.clip(np.abs((major * axis).sum(1)), 0, 1))).tolist()
        owner = {int(s): int(t) for s, t in zip(sleap, rows["track"].to_numpy()[objects])}
        ids |= set(owner.values())
        if previous is not None and len(owner) == 2 and len(previous) == 2:
            swapped = owner[0] == previous[1] or owner[1] == previous[0]
            switches += int(swapped)
        if len(owner) == 2:
            previous = owner
    distances, angles = np.array(distances), np.array(angles)
    return {"right count %": 100 * float(np.mean(counts == 2)),
            "frames with 1 / 3+ flies": [int((counts < 2).sum()), int((counts > 2).sum())],
            "centroid median px": float(np.median(distances)),
            "centroid p90 px": float(np.percentile(distances, 90)),
            "axis median deg": float(np.median(angles)),
            "axis p90 deg": float(np.percentile(angles, 90)),
            "switches": switches, "tracks": len(ids)}


def plot_tracks(table, centres, background, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 7), dpi=110)
    ax.imshow(background, cmap="gray", vmin=0, vmax=255)
    for fly in range(2):
        ax.plot(centres[:, fly, 1], centres[:, fly, 0], color="white", lw=3, alpha=0.35,
                label="SLEAP body centres" if fly == 0 else None)
    colours = plt.cm.tab10.colors
    for track, rows in table[table["track"] >= 0].groupby("track"):
        ax.plot(rows["centroid-1"], rows["centroid-0"], lw=0.8, color=colours[track % 10],
                label=f"track {track} ({len(rows)} frames)")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="lower right", fontsize=7)
    ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def cli_throughput(models, n_frames, rounds=1):
    """Wall time, CPU time and load of the ``predict --table`` command of each model, in-process
    and on 2 Dask workers, ``rounds`` times each, interleaved."""
    import subprocess
    rows = []
    for round_ in range(rounds):
        for model in models:
            for extra in ([], ["--workers", "2"]):
                with tempfile.TemporaryDirectory(prefix="bench_tracks_") as folder:
                    command = [sys.executable, "-m", "msclassify.cli", "predict", str(model),
                               str(VIDEO), "--frames", f"0:{n_frames}", "--table",
                               str(Path(folder) / "objects.csv"), "--tracks", "--min-size",
                               "500", "--split", "intensity", "--quiet", *extra]
                    load = os.getloadavg()[0]
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    start = time.perf_counter()
                    subprocess.run(command, check=True,
                                   env=dict(os.environ, PYTHONPATH=str(REPO)))
                    wall = time.perf_counter() - start
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
                rows.append({"model": Path(model).name,
                             "config": "in-process" if not extra else "2 Dask workers",
                             "round": round_, "frames": n_frames, "frames/s": n_frames / wall,
                             "CPU ms/frame": 1e3 * cpu / n_frames, "load at start": load,
                             "command": " ".join(command[1:])})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop", type=int, default=3000, help="frames 0..STOP-1 (default all)")
    parser.add_argument("--model", nargs="+",
                        help="a saved pixel model instead of training one (with --cli-frames: "
                             "one or more, timed interleaved)")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS),
                        help="the object configurations to run (default all four, at once; "
                             "one gives the frames/s of that configuration)")
    parser.add_argument("--cli-frames", type=int,
                        help="time the predict --table command on this many frames instead")
    args = parser.parse_args()
    if args.cli_frames:
        if not args.model:
            sys.exit("--cli-frames needs --model (a saved pixel model)")
        rows = cli_throughput(args.model, args.cli_frames)
        print(f"CPU {cpu_model()}; whole pipeline (segment + measure + split + track), start-up "
              "included")
        print_table(rows, ["model", "config", "round", "frames", "frames/s", "CPU ms/frame",
                           "load at start"])
        print(f"wrote {write_results('tracks_cli', {'rows': rows})}")
        return
    if not VIDEO.exists() or not SLEAP.exists():
        sys.exit(f"{VIDEO} or {SLEAP} not found; clone the repository next to shared/")
    import pandas as pd

    from msclassify.io import open_frames
    from msclassify.objects import remember_frames
    from msclassify.pixel import label_dtype, predict_frame
    from msclassify.pixel.batch import predict_to_writer

    load_start = os.getloadavg()
    model = load_or_train_model(args.model[0] if args.model else None)
    configs, classifier_info = pipelines(model)
    configs = {name: configs[name] for name in args.configs}
    centres, axes = sleap_bodies()
    cpu = {name: 0.0 for name in ("read", *configs)}
    rows = {name: [] for name in configs}
    background = []

    class Timed:
        """The video, with the CPU time of its reads (in the reader thread)."""

        def __init__(self, source):
            self.source = source

        def read(self, index):
            start = time.thread_time()
            frame = self.source.read(index)
            cpu["read"] += time.thread_time() - start
            return frame

    class Tables:
        """The batch's frame writer: each configuration's objects of the frame (in the
        writer thread, as ``predict --table`` measures its objects)."""

        def __init__(self, frames, dtype):
            self.frames, self.dtype = frames, dtype

        def write(self, position, labels, probabilities=None):
            image = self.frames.take(position)
            if not background:
                background.append(image)
            for name, pipeline in configs.items():
                start = time.thread_time()
                rows[name].append(pipeline.frame_table(labels, image, probabilities, position))
                cpu[name] += time.thread_time() - start
            if position % 250 == 0:
                print(f"frame {position}: load {os.getloadavg()[0]:.1f}", flush=True)

    with open_frames(str(VIDEO), as_gray=True) as source:
        n_frames = min(args.stop, len(source))
        # the probabilities only when a configuration needs them, as `predict --table` asks
        probabilities = any(pipeline.needs_probabilities for pipeline in configs.values())
        predict_frame(model, source.read(0), probabilities)  # compiled outside the timing
        frames = remember_frames(Timed(source))
        wall, process = time.perf_counter(), time.process_time()
        # The loop of `msclassify predict`: one thread reads ahead, this one predicts, one
        # measures the frame before.
        predict_to_writer(model, frames, Tables(frames, label_dtype(model.classes_)),
                          range(n_frames), probabilities=probabilities)
        wall, process = time.perf_counter() - wall, time.process_time() - process
    background = background[0]
    load_end = os.getloadavg()
    results = []
    tables = {name: pd.concat(parts, ignore_index=True) for name, parts in rows.items()}
    # predict: the process CPU time outside the reader and object threads (Numba's threads)
    cpu["predict"] = process - sum(cpu.values())
    for name, table in tables.items():
        weighted = evaluate(table, centres, axes, n_frames, "centroid_weighted",
                            "orientation_weighted")
        body = evaluate(table, centres, axes, n_frames, "centroid_weighted", "orientation_body")
        results.append({"config": name, **evaluate(table, centres, axes, n_frames),
                        "weighted centroid median px": weighted["centroid median px"],
                        "weighted centroid p90 px": weighted["centroid p90 px"],
                        "weighted axis median deg": weighted["axis median deg"],
                        "weighted axis p90 deg": weighted["axis p90 deg"],
                        "body axis median deg": body["axis median deg"],
                        "body axis p90 deg": body["axis p90 deg"],
                        "objects CPU ms/frame": 1e3 * cpu[name] / n_frames})
    best = "classifier + split" if "classifier + split" in tables else next(iter(tables))
    plot_tracks(tables[best], centres[:n_frames], background, PLOT,
                f"{best}: tracks over frames 0..{n_frames - 1} (white: SLEAP)")
    columns = ["config", "right count %", "frames with 1 / 3+ flies", "centroid median px",
               "centroid p90 px", "weighted centroid median px", "weighted centroid p90 px",
               "axis median deg", "axis p90 deg", "weighted axis median deg",
               "weighted axis p90 deg", "body axis median deg", "body axis p90 deg",
               "switches", "tracks", "objects CPU ms/frame"]
    print(f"{n_frames} frames; CPU {cpu_model()}; load {load_start[0]:.1f} at start, "
          f"{load_end[0]:.1f} at end")
    print_table(results, columns)
    print(f"whole pipeline ({' and '.join(configs)} at once): {n_frames / wall:.1f} frames/s, "
          f"{1e3 * process / n_frames:.1f} CPU ms/frame (read "
          f"{1e3 * cpu['read'] / n_frames:.1f}, predict {1e3 * cpu['predict'] / n_frames:.1f})")
    path = write_results("tracks", {
        "video": str(VIDEO.relative_to(SHARED_DATA)), "frames": n_frames,
        "load average (1 min) at start and end": [load_start[0], load_end[0]],
        "configs run at once": list(configs), "probabilities predicted": probabilities,
        "frames/s": n_frames / wall, "CPU ms/frame": 1e3 * process / n_frames,
        "stage CPU ms/frame": {k: 1e3 * v / n_frames for k, v in cpu.items()},
        "peak RSS MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "object classifier": classifier_info, "rows": results})
    print(f"wrote {path} and {PLOT}")


if __name__ == "__main__":
    main()
