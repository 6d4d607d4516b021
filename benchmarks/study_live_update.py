"""CPU of napari's live update (refit + segment the frame) outside the window, checkouts alternated.

Run: ``python benchmarks/study_live_update.py [--strokes 5] [--rounds 3]
[--compare /path/to/other/checkout ...]``. Writes benchmarks/results/study_live_update.json
and prints a table.

What the widget's worker thread does after a stroke with *Live update* on
(`msclassify_napari._controller.update_job` with ``RETRAIN``: the quick model of
`ClassifierSettings.for_live_update`, the frame's features cached from the first update, then
the frame segmented with probabilities), on the two images of `bench_napari.py`: the 4-class
photo (`bench_napari.larvae_photo`, strokes of the tray class through empty floor as its
session draws them) and the first fly frame (fly_masks_dev, strokes extending the background
scribbles, `bench_napari.stroke_paths`). Each checkout runs in a fresh process (its package
first on ``sys.path``, 1 Numba thread), alternated round by round; ``--strokes`` updates after
one warm-up update, each adding one stroke, the CPU seconds (``time.process_time``) of the
fit and of the prediction per update (median over the strokes). The window adds the hand-over
to the GUI thread and the paint (``bench_napari.py``'s stages).
"""

import argparse
import statistics

from _common import REPO, alternated_checkouts, cpu_model, print_table, write_results

_CHILD = r"""
import json, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/plugins", sys.argv[2]]
import numpy as np
import msclassify
from msclassify.features import FeatureCache
from msclassify_napari._controller import (RETRAIN, ClassifierSettings, FramePrediction,
                                           FrameStack, Scribbles, TrainedModel, update_job)
from bench_napari import BACKGROUND, larvae_photo, stroke_paths
from _real_data import load_fly_masks_dev
from scipy import ndimage

def cases():
    photo, larvae, painted = larvae_photo()
    grey = photo.max(axis=2).astype(int) - photo.min(axis=2) < 18
    empty = ndimage.distance_transform_edt(grey) > 0
    empty &= ndimage.distance_transform_edt(~(larvae | ~grey)) > 8
    empty[:40], empty[:, :40], empty[:, -20:] = False, False, False
    starts = np.argwhere(empty & (painted == 0))
    n = int(sys.argv[3]) + 1
    chosen = starts[np.random.default_rng(1).choice(len(starts), n, replace=False)]
    yield "4 classes (photo)", FrameStack(photo, rgb=True), painted, 1, 3, [
        [(y, min(x + step, 511)) for step in range(0, 12, 2)] for y, x in chosen]
    data = load_fly_masks_dev(test_limit=1)
    labels = data["train_labels"][0].copy()
    yield "2 classes (fly)", FrameStack(data["train_images"][0]), labels, BACKGROUND, 5, \
        stroke_paths(labels, n, seed=0)

result = {"package": msclassify.__file__, "cases": {}}
for name, stack, labels, value, radius, paths in cases():
    labels = labels.copy()
    cache, fits, predicts = FeatureCache(), [], []
    for path in paths:
        for y, x in path:
            labels[max(y - radius // 2, 0):y + radius // 2 + 1,
                   max(x - radius // 2, 0):x + radius // 2 + 1] = value
        scribbles = Scribbles((0,), (labels.copy(),), np.unique(labels[labels > 0]))
        start = time.process_time()
        for item in update_job(RETRAIN, ClassifierSettings(), stack, 0, scribbles=scribbles,
                               feature_cache=cache, cost=False):
            now = time.process_time()
            if isinstance(item, TrainedModel):
                fits.append(now - start)
            elif isinstance(item, FramePrediction):
                predicts.append(now - start)
            start = time.process_time()
    result["cases"][name] = {"fit": fits[1:], "predict": predicts[1:]}
print(json.dumps(result))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strokes", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", nargs="*", default=[],
                        help="other checkouts (their root folders) to run alternately")
    args = parser.parse_args()
    runs = alternated_checkouts(_CHILD, args.compare, args.rounds, str(REPO / "benchmarks"),
                                str(args.strokes))
    rows = []
    for run in runs:
        for case, times in run["cases"].items():
            fit, predict = statistics.median(times["fit"]), statistics.median(times["predict"])
            rows.append({"checkout": run["checkout"], "round": run["round"],
                         "load at start": run["load at start"], "case": case,
                         "fit cpu s": fit, "predict cpu s": predict, "total cpu s": fit + predict})
    rows.sort(key=lambda row: (row["case"], row["round"]))
    print(f"CPU {cpu_model()}; live update (refit + segment), CPU s, median of {args.strokes} "
          "strokes, 1 Numba thread")
    print_table(rows, ["case", "checkout", "round", "load at start", "fit cpu s",
                       "predict cpu s", "total cpu s"])
    path = write_results("study_live_update", {"cpu": cpu_model(), "strokes": args.strokes,
                                               "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
