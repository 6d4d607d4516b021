"""Which quick model should napari's live updates train? Accuracy and fit time on real flies.

Run: ``python benchmarks/study_live_model.py [--test-frames 3] [--multiclass]``. Writes
benchmarks/results/live_model_study.json (``--multiclass``: live_model_multiclass.json) and
prints a table.

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

``--multiclass``: the 4-class photo of `bench_napari` (fly_larvae_dev img_1.png, top-left
512 x 384; generated scribbles of tray, larva, feed and rim). The napari widget's live model
for 2 classes' settings (20 trees per class) and for 4 classes
(`ClassifierSettings.for_live_update` with ``n_classes=4``: 10 trees, half the features per
tree), and a variant with fewer trees only, against the full Train (the widget's default
settings): CPU seconds of a refit with the features cached (``time.process_time``: all
threads; run with ``NUMBA_NUM_THREADS=1`` on a busy machine), how many pixels agree with the
full model's segmentation (the preview's faithfulness) and larva pixel F1 against the real
mask.
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


def multiclass(repeats):
    """The live model's settings on the 4-class photo against the full Train (see above)."""
    import sys
    from _common import REPO
    from bench_napari import larvae_photo
    sys.path.insert(0, str(REPO / "plugins"))
    from msclassify_napari._controller import ClassifierSettings
    photo, larvae, scribbles = larvae_photo()
    train = ClassifierSettings()
    start = time.process_time()
    full = train.make_classifier().fit(photo, scribbles)
    full_cpu = time.process_time() - start
    reference = full.predict(photo)
    variants = {"live, 2-class settings (20 trees/class)": train.for_live_update(2),
                "live, 10 trees/class, all features": train.for_live_update(2).replace(
                    n_estimators=10),
                "live, 4-class settings (used)": train.for_live_update(4)}
    rows = []
    for name, settings in variants.items():
        cache = FeatureCache()
        settings.make_classifier().fit(photo, scribbles, feature_cache=cache)
        times = []
        for _ in range(repeats):
            start = time.process_time()
            clf = settings.make_classifier().fit(photo, scribbles, feature_cache=cache)
            times.append(time.process_time() - start)
        found = clf.predict(photo)
        rows.append({"model": name, "trees/class": settings.n_estimators,
                     "colsample": settings.colsample, "fit cpu s": statistics.median(times),
                     "agrees with Train": float(np.mean(found == reference)),
                     "larva F1": _f1(found == 2, larvae)})
        print(f"{name}: done", flush=True)
    rows.append({"model": "Train (full model)", "trees/class": train.n_estimators,
                 "colsample": train.colsample, "fit cpu s": full_cpu, "agrees with Train": 1.0,
                 "larva F1": _f1(reference == 2, larvae)})
    return rows


def _f1(found, truth):
    return float(2 * np.sum(found & truth) / max(np.sum(found) + np.sum(truth), 1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test-frames", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--multiclass", action="store_true",
                        help="the 4-class photo: live settings against the full Train")
    args = parser.parse_args()
    if args.multiclass:
        load_start = os.getloadavg()[0]
        rows = multiclass(args.repeats)
        results = {"cpu": cpu_model(), "load_average_start": load_start,
                   "load_average_end": os.getloadavg()[0],
                   "numba_threads": os.environ.get("NUMBA_NUM_THREADS"), "rows": rows}
        print(f"\n{results['cpu']}, load {load_start:.1f} -> {results['load_average_end']:.1f}, "
              f"NUMBA_NUM_THREADS={results['numba_threads']}; 4-class photo (bench_napari)")
        print_table(rows, ["model", "trees/class", "colsample", "fit cpu s",
                           "agrees with Train", "larva F1"])
        print(f"wrote {write_results('live_model_multiclass', results)}")
        return
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
