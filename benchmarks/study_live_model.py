"""Which quick model should napari's live updates train? Accuracy and fit time on real flies.

Run: ``python benchmarks/study_live_model.py [--test-frames 3]``. Writes
benchmarks/results/live_model_study.json and prints a table.

A live update refits after every stroke on the frame being scribbled. This trains
on the scribbles of one fly_masks_dev frame (the first train frame) with the live
settings of the napari widget (20 trees, 4096 cost pixels) and scores SEG on the
first ``--test-frames`` test frames against their real masks, for:

* the library default (the "default" bank, distillation teacher on);
* the same with fewer teacher pixels (4096);
* the same without the teacher (the coarse levels then draw staircases);
* the "fine" bank (full resolution and 2x2 blocks) at cost_tradeoff 2e-4 without a
  teacher: what `ClassifierSettings.for_live_update` uses.

"fit s" is the time of a refit with the frame's features cached (what a live
update pays after the first one), median of ``--repeats``; "operations/px" the
modelled prediction cost (tree evaluation + features) per pixel.
"""

import argparse
import os
import statistics
import time

import numpy as np

from _common import cpu_model, print_table, write_results
from _real_data import load_fly_masks_dev

from msclassify import PixelClassifier
from msclassify.features import FeatureCache
from msclassify.metrics import label_instances, seg_score

LIVE = dict(n_estimators=20, n_cost_samples=4096, random_state=0)
VARIANTS = {
    "default (teacher)": {},
    "default, 4096 teacher pixels": dict(n_distill_pixels=4096),
    "default, no teacher": dict(distill_weight=0),
    "fine, mu=2e-4, no teacher (live)": dict(features="fine", cost_tradeoff=2e-4,
                                              distill_weight=0),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test-frames", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = load_fly_masks_dev(test_limit=args.test_frames)
    image, labels = data["train_images"][0], data["train_labels"][0]
    masks = np.stack(data["test_masks"])
    rows = []
    load_start = os.getloadavg()[0]
    for name, params in VARIANTS.items():
        cache = FeatureCache()
        clf = PixelClassifier(**LIVE, **params).fit(image, labels, feature_cache=cache)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            clf.fit(image, labels, feature_cache=cache)
            times.append(time.perf_counter() - start)
        prediction = np.stack([clf.predict(frame) for frame in data["test_images"]])
        cost = clf.prediction_cost(data["test_images"][0])
        rows.append({"model": name, "SEG": float(seg_score(masks, label_instances(prediction,
                                                                                  foreground=2))),
                     "fit s": statistics.median(times), "features": len(clf.features_used_),
                     "operations/px": (cost.evaluation + cost.features) / image.size})
        print(f"{name}: done", flush=True)
    results = {"cpu": cpu_model(), "load_average_start": load_start,
               "load_average_end": os.getloadavg()[0], "live_settings": LIVE,
               "test_frames": data["test_ids"], "rows": rows}
    print(f"\n{results['cpu']}, load {load_start:.1f} -> {results['load_average_end']:.1f}; "
          f"trained on fly_masks_dev frame {data['train_ids'][0]}, SEG on {data['test_ids']}")
    print_table(rows, ["model", "SEG", "fit s", "features", "operations/px"])
    print(f"wrote {write_results('live_model_study', results)}")


if __name__ == "__main__":
    main()
