"""CPU per 1024² fly frame of the object stage alone, for this checkout and others, alternated.

Run: ``python benchmarks/study_objects.py [--model fly.msc] [--frames 200] [--rounds 3]
[--compare /path/to/other/checkout ...]``. Writes benchmarks/results/study_objects.json and
prints a table.

The default pixel model (``--model``, else trained as `bench_tracks.py` trains it) predicts
the classes of ``--frames`` frames spread over the 120 s fly video, once, in this process.
Each checkout then runs in a fresh process (its own package first on ``sys.path``, 1 Numba
thread), the checkouts alternated round by round with the load at each start, and measures
the process CPU per frame of `ObjectPipeline.frame_table` (what ``predict --table`` does to
each frame after the prediction: objects found, split, measured and tracked) for two of
`bench_tracks.py`'s configurations:

``size + split``
    components of at least 500 px split by ``ObjectSplitter("intensity", depth=0.2,
    min_size=500)``, tracked (issue 23's pipeline);
``components``
    components of at least 20 px, no splitting, tracked.

Each process also hashes every table it made (``DataFrame.to_csv`` of each frame's rows,
all digits of every float): the checkouts must agree bit for bit (the ``identical``
column), so a speed-up that changes a row shows here.
"""

import tempfile
from pathlib import Path

import numpy as np

from _common import alternated_checkouts, checkouts_parser, cpu_model, print_table, write_results

CONFIGS = ("size + split", "components")

_CHILD = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import msclassify
from msclassify.objects import ObjectPipeline, ObjectSplitter, ObjectTracker

data = np.load(sys.argv[2])
frames, labels = data["frames"], data["labels"]
def pipelines():
    tracker = lambda: ObjectTracker(search_range=100, memory=25)
    return {"size + split": ObjectPipeline(
                2, (1, 2), min_size=500, tracker=tracker(),
                splitter=ObjectSplitter("intensity", depth=0.2, min_size=500)),
            "components": ObjectPipeline(2, (1, 2), min_size=20, tracker=tracker())}
for pipeline in pipelines().values():                      # imports outside the timing
    pipeline.frame_table(labels[0], frames[0], None, 0)
result = {"ms/frame": {}, "digest": {}, "package": msclassify.__file__}
for name, pipeline in pipelines().items():
    start = time.process_time()
    tables = [pipeline.frame_table(l, f, None, i) for i, (l, f) in enumerate(zip(labels, frames))]
    result["ms/frame"][name] = 1e3 * (time.process_time() - start) / len(frames)
    digest = hashlib.sha256()
    for table in tables:
        digest.update(table.to_csv(index=False, float_format="%.17g").encode())
    result["digest"][name] = digest.hexdigest()
print(json.dumps(result))
"""


def main():
    parser = checkouts_parser(__doc__.splitlines()[0], frames=200, rounds=3)
    args = parser.parse_args()
    from bench_tracks import load_or_train_model
    from study_walk import video_frames
    model = load_or_train_model(args.model)
    frames = video_frames(args.frames)
    with tempfile.TemporaryDirectory(prefix="study_objects_") as folder:
        data = str(Path(folder) / "frames.npz")
        np.savez(data, frames=frames, labels=np.stack([model.predict(f) for f in frames]))
        del frames
        rows = [{**{key: run[key] for key in ("checkout", "round", "load at start")},
                 **run["ms/frame"], "digest": run["digest"]}
                for run in alternated_checkouts(_CHILD, args.compare, args.rounds, data)]
    for name in CONFIGS:
        digests = {row["digest"][name] for row in rows}
        for row in rows:
            row[f"{name} identical"] = len(digests) == 1
    for row in rows:
        row["digest"] = {name: digest[:12] for name, digest in row["digest"].items()}
    print(f"CPU {cpu_model()}; object stage CPU ms per 1024² frame (frame_table), 1 Numba "
          f"thread, {args.frames} frames")
    print_table(rows, ["checkout", "round", "load at start", *CONFIGS,
                       *(f"{name} identical" for name in CONFIGS)])
    print(f"wrote {write_results('study_objects', {'frames': args.frames, 'rows': rows})}")


if __name__ == "__main__":
    main()
