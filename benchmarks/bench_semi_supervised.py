"""Semi-supervised pixel training (GRBB): fly SEG from 1% of the scribbles, with and without it.

Run: ``python benchmarks/bench_semi_supervised.py [--seeds 3] [--no-tune]``. Writes
benchmarks/results/semi_supervised.json and prints tables.

Data: the synthetic sample flies and the real SLEAP clip exactly as in
``benchmarks/bench_flies.py`` (same training and test frames, same scribbles,
same reference masks; loaded with its ``load_datasets``).

Scribble budgets
----------------
``100%``: the benchmark's scribbles. ``1%``: in every training frame and for
every class, ``max(5, round(0.01 * n))`` of that class's ``n`` scribbled pixels,
drawn uniformly without replacement (``numpy.random.default_rng(seed)``, in
frame order, classes in increasing order), the other scribbles erased. On the
synthetic flies that leaves ~95 background and ~20 fly pixels per frame.

``scattered``: synthetic flies only, the situation of a few clicks far from
the edges: in each training frame 10 fly pixels 2 px inside the flies and 20
floor pixels more than 10 px away from them (single pixels, drawn per seed);
the benchmark's scribbles are not used.

Methods
-------
``supervised``: ``PixelClassifier(random_state=seed)`` (the defaults).
``semi-supervised``: the same with ``semi_supervised=True`` (its defaults:
4096 unlabelled pixels, 9 neighbours, ``laplacian_regularization=0``).
Each (budget, seed) pair trains both on the same scribbles; seed also seeds the
model. SEG is `msclassify.metrics.seg_score` of the fly class split into
connected components, over all test frames; "train s" is the wall time of
``fit`` (feature computation included; the machine has 2 shared cores).

Tuning (``--no-tune`` skips it): on the synthetic flies at 1% only, one
semi-supervised parameter at a time around the defaults (the defaults were
chosen from this table; the real clip is held out).
"""

import argparse
import os
import time

import numpy as np
from scipy import ndimage

from _common import print_table, write_results
from bench_flies import FLY, load_datasets

from msclassify.datasets import load_sample_flies
from msclassify.metrics import label_instances, seg_score
from msclassify.pixel import PixelClassifier

FRACTION = 0.01
MIN_PER_CLASS = 5
TUNING = [{"laplacian_regularization": 0.1}, {"laplacian_regularization": 1.0},
          {"n_neighbors": 5}, {"n_neighbors": 15}, {"n_unlabelled": 2048},
          {"n_unlabelled": 8192}, {"hessian": "unit"}]


def subsample_scribbles(scribbles, fraction, seed, min_per_class=MIN_PER_CLASS):
    """Keep ``max(min_per_class, round(fraction * n))`` random pixels of each class per frame."""
    rng = np.random.default_rng(seed)
    kept = np.zeros_like(scribbles)
    for frame, out in zip(scribbles, kept):
        for label in np.unique(frame[frame > 0]):
            where = np.flatnonzero(frame == label)
            n = min(where.size, max(min_per_class, int(round(fraction * where.size))))
            out.flat[rng.choice(where, n, replace=False)] = label
    return kept


def scattered_scribbles(masks, seed, n_fly=10, n_floor=20):
    """Single pixels per frame: ``n_fly`` inside the flies, ``n_floor`` > 10 px away from them."""
    rng = np.random.default_rng(seed)
    scribbles = np.zeros(masks.shape, np.uint8)
    for mask, out in zip(masks, scribbles):
        inner = np.argwhere(ndimage.binary_erosion(mask > 0, iterations=2))
        floor = np.argwhere(ndimage.distance_transform_edt(mask == 0) > 10)
        for label, points, n in ((1, floor, n_floor), (FLY, inner, n_fly)):
            chosen = points[rng.choice(len(points), n, replace=False)]
            out[chosen[:, 0], chosen[:, 1]] = label
    return scribbles


def evaluate(data, scribbles, seed, **params):
    model = PixelClassifier(random_state=seed, **params)
    start = time.perf_counter()
    model.fit(data["train_images"], scribbles)
    train_s = time.perf_counter() - start
    predicted = np.stack([model.predict(image) for image in data["test_images"]])
    masks = data["test_masks"]
    fly, truth = predicted == FLY, masks > 0
    image = data["test_images"][0]
    return {"SEG": float(seg_score(masks, label_instances(predicted, foreground=FLY))),
            "fly IoU": float((fly & truth).sum() / (fly | truth).sum()),
            "train s": train_s, "n features": len(model.features_used_),
            "eval/px": model.prediction_cost(image).evaluation / image.size}


def summarise(runs, keys=("SEG", "fly IoU", "train s", "n features", "eval/px")):
    row = {}
    for key in keys:
        values = [r[key] for r in runs]
        row[key] = float(np.mean(values))
        row[key + " std"] = float(np.std(values))
    row["SEG per seed"] = " ".join(f"{r['SEG']:.3f}" for r in runs)
    return row


def run(name, data, seeds):
    rows = []
    budgets = {"100%": lambda seed: data["train_scribbles"],
               "1%": lambda seed: subsample_scribbles(data["train_scribbles"], FRACTION, seed)}
    if "train_masks" in data:
        budgets["scattered"] = lambda seed: scattered_scribbles(data["train_masks"], seed)
    for budget, make_scribbles in budgets.items():
        for method, params in (("supervised", {}), ("semi-supervised", {"semi_supervised": True})):
            runs = []
            for seed in seeds:
                scribbles = make_scribbles(seed)
                runs.append(evaluate(data, scribbles, seed, **params))
                runs[-1]["scribbled px"] = [int((scribbles == c).sum()) for c in (1, FLY)]
                print(f"[{name}] {budget} {method} seed {seed}: SEG {runs[-1]['SEG']:.3f}, "
                      f"fit {runs[-1]['train s']:.1f} s", flush=True)
            rows.append({"dataset": name, "scribbles": budget, "method": method,
                         "scribbled px (bg, fly)": runs[0]["scribbled px"], **summarise(runs),
                         "runs": runs})
    return rows


def tune(data, seeds):
    rows = []
    for change in [{}] + TUNING:
        runs = [evaluate(data, subsample_scribbles(data["train_scribbles"], FRACTION, seed),
                         seed, semi_supervised=True, **change) for seed in seeds]
        label = ", ".join(f"{k}={v}" for k, v in change.items()) or "defaults"
        rows.append({"change": label, **summarise(runs), "runs": runs})
        print(f"[tune] {label}: SEG {rows[-1]['SEG']:.3f}", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--no-tune", action="store_true", help="skip the tuning table")
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    datasets = load_datasets(quick=False)
    datasets["synthetic"]["train_masks"] = load_sample_flies().masks[:2]
    results = {"load_average_start": os.getloadavg()[0], "seeds": seeds, "fraction": FRACTION,
               "min_per_class": MIN_PER_CLASS, "datasets": {}}
    columns = ["dataset", "scribbles", "method", "scribbled px (bg, fly)", "SEG", "SEG std",
               "SEG per seed", "fly IoU", "train s", "n features", "eval/px"]
    all_rows = []
    for name in ("synthetic", "clip"):
        if name not in datasets:
            continue
        data = datasets[name]
        rows = run(name, data, seeds)
        all_rows += rows
        results["datasets"][name] = {"train_frames": data["train_frames"],
                                     "test_frames": data["test_frames"],
                                     "reference": data["reference"], "rows": rows}
    if not args.no_tune:
        results["tuning_synthetic_1pct"] = tune(datasets["synthetic"], seeds)
    results["load_average_end"] = os.getloadavg()[0]
    print()
    print_table(all_rows, columns)
    if not args.no_tune:
        print("\nTuning (synthetic flies, 1% scribbles, semi-supervised, one change at a time):")
        print_table(results["tuning_synthetic_1pct"],
                    ["change", "SEG", "SEG std", "SEG per seed", "fly IoU", "train s"])
    path = write_results("semi_supervised", results)
    print(f"\nload average {results['load_average_start']:.1f} at start, "
          f"{results['load_average_end']:.1f} at end; wrote {path}")


if __name__ == "__main__":
    main()
