"""Where the default (blend) teacher's training time goes.

Run: ``NUMBA_NUM_THREADS=1 python benchmarks/bench_blend_cost.py [--cases fly-2 fly-4 photo-4
photo-4-clicks] [--out NAME]``. Writes benchmarks/results/blend_cost.json (or
NAME.json) and prints a table. The cases are ``bench_training.py``'s (real frames).

``parts``: per case, one ``PixelClassifier(random_state=0)`` fit (the default, ``teacher="blend"``)
and one with ``teacher="boost"``, each after a warm-up fit (as ``bench_training.warm_up``), in
this process; the process CPU time of each stage of ``fit(progress=...)`` and, within the
distillation stage, of the blend's parts: ``BlendTeacher.frame_distance`` (the distance
transform and the far-share test), ``ForestTeacher.fit`` and ``predict_raw`` (and the rows it
is asked for), the boosted teacher's ``Booster.predict_raw`` (rows). The boost fit's
distillation is what the blend adds to (its class map asks fewer rows: the boosted teacher
alone is sure of more grid cells).
"""

import argparse
import os
import time

import msclassify  # noqa: F401  (before _common puts this checkout first)
from _common import cpu_model, print_table, write_results

CASES = ("fly-2", "fly-4", "photo-4", "photo-4-clicks")


def fit_parts(image, labels, teacher):
    """CPU seconds of the stages of one fit and of the blend's parts within it (dict)."""
    from msclassify.cegb import Booster
    from msclassify.pixel import PixelClassifier
    from msclassify.pixel._forest_teacher import BlendTeacher, ForestTeacher
    parts, originals = {}, []

    def timed(owner, name, key):
        method = getattr(owner, name)
        originals.append((owner, name, method))

        def wrapper(*args, **kwargs):
            start = time.process_time()
            out = method(*args, **kwargs)
            parts[key] = parts.get(key, 0.0) + time.process_time() - start
            if name == "predict_raw":
                parts[key + " rows"] = parts.get(key + " rows", 0) + len(args[1])
            return out
        setattr(owner, name, wrapper)
    timed(BlendTeacher, "frame_distance", "distance transform")
    timed(ForestTeacher, "fit", "forest fit")
    timed(ForestTeacher, "predict_raw", "forest predict")
    timed(Booster, "predict_raw", "boosted predict")
    marks = []
    try:
        start = time.process_time()
        PixelClassifier(random_state=0, teacher=teacher).fit(
            image, labels, progress=lambda r: marks.append((r.stage, time.process_time())))
        total = time.process_time() - start
    finally:
        for owner, name, method in originals:
            setattr(owner, name, method)
    stages = {}
    for (stage, a), (_, b) in zip(marks, marks[1:]):
        stage = "model" if stage.startswith("μ path") else stage
        stages[stage] = stages.get(stage, 0.0) + b - a
    return {"total": total, **{f"{k} (stage)": v for k, v in stages.items()}, **parts}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--out", default="blend_cost")
    args = parser.parse_args()
    from bench_training import case_data, warm_up
    load_start = os.getloadavg()
    parts = []
    for case in args.cases:
        image, labels = case_data(case)
        warm_up(image, labels, {})
        for teacher in ("blend", "boost"):
            parts.append({"case": case, "teacher": teacher, "load": os.getloadavg()[0],
                          **fit_parts(image, labels, teacher)})
        print(parts[-2], parts[-1], sep="\n", flush=True)
    columns = list(dict.fromkeys(k for row in parts for k in row))
    print_table(parts, columns)
    results = {"cpu": cpu_model(), "threads": os.environ.get("NUMBA_NUM_THREADS"),
               "load_average_start": load_start, "load_average_end": os.getloadavg(),
               "parts": parts}
    path = write_results(args.out, results)
    print(f"CPU {results['cpu']}; load {load_start[0]:.2f} at start, "
          f"{results['load_average_end'][0]:.2f} at end; wrote {path}")


if __name__ == "__main__":
    main()
