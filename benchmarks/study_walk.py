"""CPU per 1024² fly frame of each prediction stage, for this checkout and others, alternated.

Run: ``python benchmarks/study_walk.py [--model fly.msc] [--frames 15] [--rounds 2]
[--compare /path/to/other/checkout ...]``. Writes benchmarks/results/study_walk.json and
prints a table.

The default pixel model (``--model``, else trained as `bench_tracks.py` trains it, on
fly_masks_dev's scribbles) predicts ``--frames`` frames spread over the 120 s fly video. Each
checkout runs in a fresh process with 1 Numba thread (its own package first on
``sys.path``), the checkouts alternated round by round with the load at each start, and
measures the process CPU per frame of:

``labels``
    ``model.predict(frame)``: features, tree walk and classes (what ``predict --table``
    and ``bench_accuracy.py`` time);
``labels + probabilities``
    ``predict_frame(model, frame, probabilities=True)`` (what ``predict --probabilities``
    and the napari widget run);
``objects``
    ``bench_tracks.py``'s *size + split* `ObjectPipeline` on those labels and frames (after
    one untimed frame: the first imports trackpy).

Each process also hashes its labels, probabilities and object table: the checkouts must agree
bit for bit (the ``identical`` column), so a speed-up that changes a prediction shows here.
"""

import hashlib
import tempfile
from pathlib import Path

import numpy as np

from _common import alternated_checkouts, checkouts_parser, cpu_model, print_table, write_results

_CHILD = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from msclassify.objects import ObjectPipeline, ObjectSplitter, ObjectTracker
from msclassify.pixel import load_pixel_model, predict_frame

model = load_pixel_model(sys.argv[2])
frames = np.load(sys.argv[3])
model.predict(frames[0]); predict_frame(model, frames[0], probabilities=True)   # compiled
digest = hashlib.sha256()
times = {}
start = time.process_time()
labels = [model.predict(frame) for frame in frames]
times["labels"] = time.process_time() - start
start = time.process_time()
both = [predict_frame(model, frame, probabilities=True) for frame in frames]
times["labels + probabilities"] = time.process_time() - start
def size_and_split():
    return ObjectPipeline(2, tuple(int(c) for c in model.classes_), min_size=500,
                          splitter=ObjectSplitter("intensity", depth=0.2, min_size=500),
                          tracker=ObjectTracker(search_range=100, memory=25))
size_and_split().frame_table(labels[0], frames[0], None, 0)   # trackpy imported outside
pipeline = size_and_split()
start = time.process_time()
tables = [pipeline.frame_table(l, f, None, i) for i, (l, f) in enumerate(zip(labels, frames))]
times["objects"] = time.process_time() - start
for l, p in zip(labels, both):
    digest.update(l.tobytes()); digest.update(p.labels.tobytes())
    digest.update(p.probabilities.tobytes()); digest.update(p.uncertainty.tobytes())
for t in tables:
    digest.update(t.to_csv(index=False).encode())
import msclassify
print(json.dumps({"ms/frame": {k: 1e3 * v / len(frames) for k, v in times.items()},
                  "digest": digest.hexdigest(), "package": msclassify.__file__}))
"""


def video_frames(count):
    """``count`` grey frames spread evenly over the fly video."""
    from bench_tracks import VIDEO
    from msclassify.io import open_frames
    with open_frames(str(VIDEO), as_gray=True) as source:
        picks = np.linspace(0, len(source) - 1, count).astype(int)
        return np.stack([np.asarray(source.read(int(i))) for i in picks])


def main():
    parser = checkouts_parser(__doc__.splitlines()[0], frames=15, rounds=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="study_walk_") as folder:
        model = args.model
        if model is None:
            from bench_tracks import load_or_train_model
            model = str(Path(folder) / "fly.msc")
            load_or_train_model(None).save(model)
        frames = str(Path(folder) / "frames.npy")
        np.save(frames, video_frames(args.frames))
        rows = [{**{key: run[key] for key in ("checkout", "round", "load at start")},
                 **run["ms/frame"], "digest": run["digest"]}
                for run in alternated_checkouts(_CHILD, args.compare, args.rounds, model, frames)]
    digests = {row["digest"] for row in rows}
    for row in rows:
        row["identical"] = len(digests) == 1
        row["digest"] = hashlib.sha256(row["digest"].encode()).hexdigest()[:12]
    print(f"CPU {cpu_model()}; CPU ms per 1024² frame, 1 Numba thread, {args.frames} frames")
    print_table(rows, ["checkout", "round", "load at start", "labels", "labels + probabilities",
                       "objects", "identical"])
    print(f"wrote {write_results('study_walk', {'frames': args.frames, 'rows': rows})}")


if __name__ == "__main__":
    main()
