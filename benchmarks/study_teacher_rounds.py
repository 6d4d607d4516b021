"""Many classes: the distillation teacher's rounds, accuracy and training CPU paired per draw.

For every draw of the 4-class cases of ``bench_training.py`` (fly-4 and larvae-4: 4-class
maps of real frames, scribbles redrawn per draw; photo-4: the napari benchmark's fixed
scribbles, one draw), fits ``PixelClassifier(random_state=0)`` with each variant
(``NAME=JSON`` of parameters; default: the teacher with all 50 rounds, as before
``teacher_estimators=None`` chose them by the classes, against the default) and records its
accuracy (`bench_training.case_accuracy`: pixel accuracy on the pixels not scribbled against
the 4-class map; photo-4: larva pixel F1) and its fit's process CPU time. Prints per case the
mean difference of each variant to the first one with its standard error over the draws.
Writes ``benchmarks/results/<--out>.json``. Run with ``NUMBA_NUM_THREADS=1`` for CPU times
that are those of one idle core.

    python benchmarks/study_teacher_rounds.py --cases fly-4 larvae-4 photo-4 --draws 4
    python benchmarks/study_teacher_rounds.py --cases fly-4 --draws 4 --first-draw 4
"""

import argparse
import json
import os
import time

import numpy as np
from _common import cpu_model, print_table, write_results
from bench_training import case_accuracy, case_data, warm_up
from study_clicks import parse_variant

from msclassify.pixel import PixelClassifier

VARIANTS = [("teacher 50 rounds", {"teacher_estimators": 50}), ("default", {})]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["fly-4", "larvae-4", "photo-4"],
                        choices=["fly-4", "larvae-4", "photo-4"])
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--first-draw", type=int, default=0)
    parser.add_argument("--variant", type=parse_variant, action="append", default=[],
                        metavar="NAME=JSON", help="replaces the default pair of variants")
    parser.add_argument("--out", default="teacher_rounds")
    args = parser.parse_args()
    variants = args.variant or VARIANTS
    rows = []
    for case in args.cases:
        first = 0 if case == "photo-4" else args.first_draw
        for draw in range(first, first + (1 if case == "photo-4" else args.draws)):
            image, labels, truth = case_data(case, truth=True, draw=draw)
            warm_up(image, labels, {})
            row = {"case": case, "draw": draw, "load": os.getloadavg()[0]}
            for name, params in variants:
                cpu = time.process_time()
                model = PixelClassifier(**dict({"random_state": 0}, **params)).fit(image, labels)
                row[f"{name} cpu s"] = time.process_time() - cpu
                row[name] = case_accuracy(model, image, labels, truth)
            rows.append(row)
            print(json.dumps(row), flush=True)
    base = variants[0][0]
    summary = []
    for case in args.cases:
        mine = [r for r in rows if r["case"] == case]
        for name, _ in variants:
            diff = np.array([r[name] - r[base] for r in mine])
            summary.append({"case": case, "variant": name, "draws": len(mine),
                            "accuracy": float(np.mean([r[name] for r in mine])),
                            f"- {base}": float(diff.mean()),
                            "std error": float(diff.std(ddof=1) / np.sqrt(diff.size))
                            if diff.size > 1 else float("nan"),
                            "cpu s": float(np.median([r[f"{name} cpu s"] for r in mine]))})
    print_table(summary, list(summary[0]))
    record = {"cpu": cpu_model(), "variants": dict(variants), "draws": rows, "summary": summary}
    print(f"wrote {write_results(args.out, record)}")


if __name__ == "__main__":
    main()
