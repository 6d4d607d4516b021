"""CPU per 1024² fly frame of the object stage alone, for this checkout and others, alternated.

Run: ``python benchmarks/study_objects.py [--model fly.msc] [--frames 200] [--rounds 3]
[--compare /path/to/other/checkout ...]``. Writes benchmarks/results/study_objects.json and
prints two tables (the stage's CPU per configuration, and per part of it).

The default pixel model (``--model``, else trained as `bench_tracks.py` trains it) predicts
the classes of ``--frames`` frames spread over the 120 s fly video, once, in this process.
Each checkout then runs in a fresh process (its own package first on ``sys.path``, 1 Numba
thread), the checkouts alternated round by round with the load at each start, and measures
the process CPU per frame of `ObjectPipeline.frame_table` (what ``predict --table`` does to
each frame after the prediction: objects found, split, measured, classified and tracked)
for three of `bench_tracks.py`'s configurations:

``size + classifier + split``
    components of at least 500 px split by ``ObjectSplitter("intensity", depth=0.2,
    min_size=500)``, classified fly vs debris by `bench_tracks.debris_classifier`'s
    `ObjectClassifier`, flies tracked (issue 23's whole pipeline);
``size + split``
    the same without the classifier;
``components``
    components of at least 20 px, no splitting, tracked.

The classifier is learnt in each process from the same objects of fly_masks_dev (found here
once) with the group costs measured here once (``group_costs``), so every checkout's
classifier is the same model. Each process also hashes every table it made
(``DataFrame.to_csv`` of each frame's rows, all digits of every float): the checkouts must
agree bit for bit (the ``identical`` column), so a speed-up that changes a row shows here.
The parts of ``size + classifier + split`` are timed in a further pass (``parts``): finding
the components (``components``: labelling and the size filter), splitting them (``split``),
measuring (``measure``: regionprops on the crops and the weighted and body orientations;
where a checkout's `measure_objects` makes the DataFrame, that is in it), classifying
(``classify``), linking (``track``) and the rest of `frame_table` (``table``: the columns
put together into the frame's DataFrame).
"""

import json
import tempfile
from pathlib import Path

import numpy as np

from _common import alternated_checkouts, checkouts_parser, cpu_model, print_table, write_results

CONFIGS = ("size + classifier + split", "size + split", "components")
PARTS = ("components", "split", "measure", "classify", "track", "table")

_CHILD = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import msclassify
import msclassify.objects._pipeline as pipeline_module
from msclassify.objects import ObjectClassifier, ObjectPipeline, ObjectSplitter, ObjectTracker

data = np.load(sys.argv[2])
frames, labels = data["frames"], data["labels"]
samples = json.loads(sys.argv[3])
classifier = ObjectClassifier(random_state=0, group_costs=samples["group_costs"]).fit(
    [(data[f"objects{i}"], data[f"image{i}"]) for i in range(len(samples["labels"]))],
    [{int(k): v for k, v in y.items()} for y in samples["labels"]])
splitter = ObjectSplitter("intensity", depth=0.2, min_size=500)
def pipelines():
    tracker = lambda: ObjectTracker(search_range=100, memory=25)
    return {"size + classifier + split": ObjectPipeline(
                2, (1, 2), min_size=500, splitter=splitter, classifier=classifier,
                tracker=tracker(), track_classes=("fly",)),
            "size + split": ObjectPipeline(2, (1, 2), min_size=500, tracker=tracker(),
                                           splitter=splitter),
            "components": ObjectPipeline(2, (1, 2), min_size=20, tracker=tracker())}
for pipeline in pipelines().values():                      # imports outside the timing
    pipeline.frame_table(labels[0], frames[0], None, 0)
result = {"ms/frame": {}, "digest": {}, "package": msclassify.__file__,
          "groups used": classifier.groups_used_}
for name, pipeline in pipelines().items():
    start = time.process_time()
    tables = [pipeline.frame_table(l, f, None, i) for i, (l, f) in enumerate(zip(labels, frames))]
    result["ms/frame"][name] = 1e3 * (time.process_time() - start) / len(frames)
    digest = hashlib.sha256()
    for table in tables:
        digest.update(table.to_csv(index=False, float_format="%.17g").encode())
    result["digest"][name] = digest.hexdigest()

# the parts of the whole pipeline, each wrapped by a CPU timer (split is inside components)
parts = dict.fromkeys(["components", "split", "measure", "classify", "track", "total"], 0.0)
def timed(part, function):
    def call(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            parts[part] += time.process_time() - start
    return call
pipeline = pipelines()["size + classifier + split"]
split = pipeline.splitter._split_in_place
object.__setattr__(pipeline.splitter, "_split_in_place", timed("split", split))
pipeline_module._find_objects = timed("components", pipeline_module._find_objects)
measure = "_measure_columns" if hasattr(pipeline_module, "_measure_columns") else "measure_objects"
setattr(pipeline_module, measure, timed("measure", getattr(pipeline_module, measure)))
pipeline.classifier.predict = timed("classify", pipeline.classifier.predict)
pipeline.tracker.link = timed("track", pipeline.tracker.link)
frame_table = timed("total", pipeline.frame_table)
for i, (l, f) in enumerate(zip(labels, frames)):
    frame_table(l, f, None, i)
parts["components"] -= parts["split"]
parts["table"] = parts.pop("total") - sum(parts.values())
result["parts ms/frame"] = {k: 1e3 * v / len(frames) for k, v in parts.items()}
print(json.dumps(result))
"""


def main():
    parser = checkouts_parser(__doc__.splitlines()[0], frames=200, rounds=3)
    args = parser.parse_args()
    from bench_tracks import debris_classifier, load_or_train_model
    from study_walk import video_frames

    from msclassify.objects import ObjectSplitter
    model = load_or_train_model(args.model)
    classifier, _, samples = debris_classifier(
        model, ObjectSplitter("intensity", depth=0.2, min_size=500))
    frames = video_frames(args.frames)
    with tempfile.TemporaryDirectory(prefix="study_objects_") as folder:
        data = str(Path(folder) / "frames.npz")
        np.savez(data, frames=frames, labels=np.stack([model.predict(f) for f in frames]),
                 **{f"objects{i}": objects for i, (objects, _) in enumerate(samples[0])},
                 **{f"image{i}": image for i, (_, image) in enumerate(samples[0])})
        del frames
        learnt = json.dumps({"group_costs": classifier.group_costs_, "labels": samples[1]})
        runs = alternated_checkouts(_CHILD, args.compare, args.rounds, data, learnt)
    rows = [{**{key: run[key] for key in ("checkout", "round", "load at start")},
             **run["ms/frame"], "digest": run["digest"], "groups used": run["groups used"]}
            for run in runs]
    parts = [{**{key: run[key] for key in ("checkout", "round")}, **run["parts ms/frame"]}
             for run in runs]
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
    print(f"parts of size + classifier + split, CPU ms per frame (classifier's groups: "
          f"{rows[0]['groups used']})")
    print_table(parts, ["checkout", "round", *PARTS])
    results = {"frames": args.frames, "rows": rows, "parts": parts,
               "group costs s/object": classifier.group_costs_}
    print(f"wrote {write_results('study_objects', results)}")


if __name__ == "__main__":
    main()
