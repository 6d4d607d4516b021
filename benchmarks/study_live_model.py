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

``--multiclass [--draws D] [--seeds S]``: the 4-class photo of `bench_napari`
(fly_larvae_dev img_1.png, top-left 512 x 384; generated scribbles of tray, larva, feed and
rim, ``D`` draws of which larvae and feed are scribbled). The napari widget's live model for 2
classes' settings (20 trees per class) and for 4 classes (`ClassifierSettings.for_live_update`
with ``n_classes=4``: 10 trees, half the features per tree, 63 bins), and the same with 255
bins (before `LIVE_MAX_BINS`), each with ``S`` random states, against the full Train (the
widget's default settings) of each draw: CPU seconds of a refit with the features cached
(``time.process_time``: all threads; run with ``NUMBA_NUM_THREADS=1`` on a busy machine;
median), how many pixels agree with the full model's segmentation (the preview's
faithfulness) and larva pixel F1 against the real mask (means and standard errors over the
draws x seeds).
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


def multiclass(repeats, draws=1, seeds=1):
    """The live model's settings on the 4-class photo against the full Train (see above), over
    ``draws`` scribble draws (`bench_napari.larvae_photo`'s seed) x ``seeds`` random states of
    the live model: one row per variant, means and standard errors over the draws x seeds."""
    import sys
    from _common import REPO
    from bench_napari import larvae_photo
    sys.path.insert(0, str(REPO / "plugins"))
    from msclassify_napari._controller import ClassifierSettings
    train = ClassifierSettings()
    variants = {"live, 2-class settings (20 trees/class)": train.for_live_update(2),
                "live, 4-class settings, 255 bins (before)": train.for_live_update(4).replace(
                    max_bins=train.max_bins),
                "live, 4-class settings (used)": train.for_live_update(4)}
    found_rows = {name: [] for name in [*variants, "Train (full model)"]}
    for draw in range(draws):
        photo, larvae, scribbles = larvae_photo(draw)
        start = time.process_time()
        reference = train.make_classifier().fit(photo, scribbles).predict(photo)
        found_rows["Train (full model)"].append((time.process_time() - start, 1.0,
                                                 _f1(reference == 2, larvae)))
        for name, settings in variants.items():
            for seed in range(seeds):
                seeded = settings.replace(random_state=seed)
                cache = FeatureCache()
                seeded.make_classifier().fit(photo, scribbles, feature_cache=cache)
                times = []
                for _ in range(repeats):
                    start = time.process_time()
                    clf = seeded.make_classifier().fit(photo, scribbles, feature_cache=cache)
                    times.append(time.process_time() - start)
                found = clf.predict(photo)
                found_rows[name].append((statistics.median(times),
                                         float(np.mean(found == reference)),
                                         _f1(found == 2, larvae)))
        print(f"scribble draw {draw}: done", flush=True)
    rows = []
    for name, runs in found_rows.items():
        settings = variants.get(name, train)
        fit, agree, f1 = np.array(runs).T
        rows.append({"model": name, "trees/class": settings.n_estimators,
                     "colsample": settings.colsample, "max_bins": settings.max_bins,
                     "runs": len(runs), "fit cpu s": float(np.median(fit)),
                     "agrees with Train": float(agree.mean()), "agree se": _se(agree),
                     "larva F1": float(f1.mean()), "F1 se": _se(f1)})
    return rows


def _se(values):
    return float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else 0.0


def _f1(found, truth):
    return float(2 * np.sum(found & truth) / max(np.sum(found) + np.sum(truth), 1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test-frames", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--multiclass", action="store_true",
                        help="the 4-class photo: live settings against the full Train")
    parser.add_argument("--draws", type=int, default=1,
                        help="--multiclass: scribble draws of the photo (seeds 0, 1, ...)")
    parser.add_argument("--seeds", type=int, default=1,
                        help="--multiclass: random states of the live models (0, 1, ...)")
    args = parser.parse_args()
    if args.multiclass:
        load_start = os.getloadavg()[0]
        rows = multiclass(args.repeats, args.draws, args.seeds)
        results = {"cpu": cpu_model(), "load_average_start": load_start,
                   "load_average_end": os.getloadavg()[0], "draws": args.draws,
                   "seeds": args.seeds,
                   "numba_threads": os.environ.get("NUMBA_NUM_THREADS"), "rows": rows}
        print(f"\n{results['cpu']}, load {load_start:.1f} -> {results['load_average_end']:.1f}, "
              f"NUMBA_NUM_THREADS={results['numba_threads']}; 4-class photo (bench_napari)")
        print_table(rows, ["model", "trees/class", "colsample", "max_bins", "runs", "fit cpu s",
                           "agrees with Train", "agree se", "larva F1", "F1 se"])
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
