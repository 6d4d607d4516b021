"""The distillation teacher's class map coarse to fine (`teacher_classes`) against every pixel.

For real training frames (``bench_training.py``'s cases and an EM slice with thin strokes):
fit the default model, keep its teacher, and predict the teacher's class map of the frame
with ``stride`` 1 (every pixel) and coarse to fine from strides 2 and 4 with refinement
margins 0, 2 and 4. Reports CPU seconds (one thread), the share of the frame's pixels the
teacher predicted and how many pixels differ from the full map. Writes
``benchmarks/results/teacher_map.json``.

    NUMBA_NUM_THREADS=1 python benchmarks/study_teacher_map.py [--cases fly-2 em-thin ...]
"""

import argparse
import os
import time

from _common import cpu_model, print_table, write_results
from bench_training import case_data

import msclassify.pixel._classifier as classifier_module
from msclassify.pixel import PixelClassifier
from msclassify.pixel._distill import teacher_classes

CASES = ("fly-2", "fly-4", "em-thin", "larvae-2")


class Counting:
    """The teacher, counting the rows it predicts."""

    def __init__(self, booster):
        self.booster, self.rows = booster, 0

    def predict_raw(self, X):
        self.rows += X.shape[0]
        return self.booster.predict_raw(X)


def frame_and_teacher(case):
    """A case's frame levels, teacher and its feature slots (from a default fit)."""
    if case == "em-thin":
        from _real_data import load_em_style
        data = load_em_style("thin")
        image, labels = data["train_images"][0], data["train_labels"][0]
    else:
        image, labels = case_data(case)
    kept = {}
    original = classifier_module.teacher_pixels

    def keep(compute_levels, pairs, teacher, feature_indices, *args, **kwargs):
        kept.update(levels=compute_levels(pairs[0][0]), teacher=teacher, columns=feature_indices)
        return original(compute_levels, pairs, teacher, feature_indices, *args, **kwargs)

    classifier_module.teacher_pixels = keep
    try:
        PixelClassifier(random_state=0).fit(image, labels)
    finally:
        classifier_module.teacher_pixels = original
    levels = kept["levels"]
    return levels, kept["teacher"], levels.slot[kept["columns"]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    args = parser.parse_args()
    load_start, rows = os.getloadavg()[0], []
    for case in args.cases:
        levels, teacher, slots = frame_and_teacher(case)
        full = None
        for stride, margin in [(1, 0.0)] + [(s, m) for s in (2, 4) for m in (0.0, 2.0, 4.0)]:
            counting = Counting(teacher)
            start = time.process_time()
            classes = teacher_classes(levels.arrays[0], slots, counting, levels.shape, stride,
                                      margin)
            seconds = time.process_time() - start
            full = classes if full is None else full
            rows.append({"case": case, "shape": "x".join(map(str, levels.shape)),
                         "stride": stride, "margin": margin, "cpu s": round(seconds, 3),
                         "predicted share": round(counting.rows / classes.size, 3),
                         "pixels differing": int((classes != full).sum())})
            print(rows[-1], flush=True)
    print_table(rows, list(rows[0]))
    load_end = os.getloadavg()[0]
    path = write_results("teacher_map", {"cpu": cpu_model(), "load_average_start": load_start,
                                         "load_average_end": load_end, "rows": rows})
    print(f"CPU {cpu_model()}; load {load_start:.2f} at start, {load_end:.2f} at end; wrote {path}")


if __name__ == "__main__":
    main()
