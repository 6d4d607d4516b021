"""Why does our feature bank lose to scikit-image's features? Ablations with fixed learners.

Run: ``python benchmarks/study_features.py [--sets ...] [--variants ...] [--learners rf core]``.
Writes benchmarks/results/feature_study.json and prints one table per set.

Every variant is a function ``image -> (H, W, F)`` float32 feature stack at full
resolution. Two fixed learners are trained on the labelled pixels of the train
frames (``_real_data``) and predict every pixel of the test frames:

* ``rf``: ``RandomForestClassifier(50, max_depth=10, random_state=0)``, the
  skimage recipe's learner;
* ``core``: our CEGB core at mu = 0 (``CEGBClassifier``) with the tree settings
  of ``PixelClassifier`` (50 trees, 15 leaves, learning rate 0.2, 20 samples
  per leaf, random_state 0), i.e. plain gradient boosting.

The metrics are those of ``bench_accuracy.py``. Variants (see `VARIANTS`):
block-constant coarse maps vs the same coarse maps interpolated linearly to full
resolution, the levels and filters of our bank, and the scales skimage uses
(sigma 1, 2, 4, 8, 16 at full resolution) computed by our kernels.
"""

import argparse
import sys
import time

import numpy as np

from _common import print_table, write_results
from bench_accuracy import SETS, skimage_features

from msclassify.features import FeatureBank, FeatureSpec
from msclassify.features._specs import SIGMA_FILTERS

SKIMAGE_SIGMAS = (1.0, 2.0, 4.0, 8.0, 16.0)


def upsample_linear(plane, level, shape):
    """A level-``level`` plane interpolated linearly (block centres) to ``shape``."""
    if level == 0:
        return plane[:shape[0], :shape[1]]
    scale = 2 ** level
    out = plane
    for axis, size in enumerate(shape):
        u = (np.arange(size) + 0.5) / scale - 0.5
        low = np.clip(np.floor(u).astype(int), 0, plane.shape[axis] - 1)
        high = np.clip(low + 1, 0, plane.shape[axis] - 1)
        t = np.clip(u - np.floor(u), 0, 1).astype(np.float32)
        t[u < 0] = 0
        a, b = np.take(out, low, axis=axis), np.take(out, high, axis=axis)
        t = t[:, None] if axis == 0 else t[None, :]
        out = a + t * (b - a)
    return out


def bank_stack(specs, smooth=False):
    """Features of a bank at full resolution: block-constant, or coarse levels interpolated."""
    bank = FeatureBank(specs=specs)

    def compute(image):
        if not smooth:
            return bank.compute_full(image)
        levels = bank.compute_levels(image)
        out = np.empty(image.shape[:2] + (len(bank),), np.float32)
        for level, (array, columns) in enumerate(zip(levels.arrays, levels.columns)):
            for slot, column in enumerate(columns):
                out[:, :, column] = upsample_linear(array[:, :, slot], level, image.shape[:2])
        return out
    return compute


def specs(triples):
    return [FeatureSpec.make(level, f, s) for level, f, s in triples]


def preset(name, levels=range(4)):
    from msclassify.features import PRESETS
    return specs([t for t in PRESETS[name] if t[0] in levels])


def level0(sigmas, filters=SIGMA_FILTERS):
    return specs([(0, "intensity", None)] + [(0, f, s) for s in sigmas for f in filters])


def up(level, filters, sigmas):
    return [FeatureSpec.make(level, f, s, upsampled=True) for s in sigmas for f in filters]


CONTEXT_FILTERS = ("gauss", "hessian_max", "hessian_min")


def candidates():
    """Candidate banks (lists of specs): the fixes measured, also with our own pipeline."""
    default = preset("pyramid")
    l0_35 = [s for s in level0((3.5,)) if s.filter != "intensity"]
    l0 = level0((0.7, 1.6, 3.5))
    l1 = preset("pyramid", [1])
    return {
        "pyramid 92, the former default (block-constant coarse)": default,
        "pyramid + L0 s3.5 (100)": default + l0_35,
        "L0 s0.7-3.5 + L1 (50): the new default": l0 + l1,
        "L0 s0.7-3.5 (25)": l0,
        "L0 s0.7-3.5 + L1up (50)": l0 + [FeatureSpec.make(1, s.filter, s.sigma, upsampled=True)
                                         for s in l1],
        "L0 s0.7-3.5 + L1 + L2up/L3up gauss+hessian s1.6,3.5 (62)": l0 + l1 + up(
            2, CONTEXT_FILTERS, (1.6, 3.5)) + up(3, CONTEXT_FILTERS, (1.6, 3.5)),
        "pyramid + L0 s3.5 + L2up/L3up gauss+hessian s1.6,3.5 (112)": default + l0_35 + up(
            2, CONTEXT_FILTERS, (1.6, 3.5)) + up(3, CONTEXT_FILTERS, (1.6, 3.5)),
    }


def variants():
    default = preset("pyramid")
    return {
        "skimage 15 (gauss+hessian, s1-16, full res)": skimage_features,
        "pyramid 92, the former default (block-constant coarse)": bank_stack(default),
        "pyramid 92, coarse maps interpolated": bank_stack(default, smooth=True),
        "pyramid L0 only (17)": bank_stack(preset("pyramid", [0])),
        "pyramid L0+L1 (42)": bank_stack(preset("pyramid", [0, 1])),
        "ours L0, all filters, s1-16 (41)": bank_stack(level0(SKIMAGE_SIGMAS)),
        "ours L0, gauss+hessian, s1-16 (16)": bank_stack(level0(
            SKIMAGE_SIGMAS, ("gauss", "hessian_max", "hessian_min"))),
        "ours L0, gauss only, s1-16 (6)": bank_stack(level0(SKIMAGE_SIGMAS, ("gauss",))),
        "ours L0, gradmag+log+dog+structure, s1-16 (26)": bank_stack(level0(
            SKIMAGE_SIGMAS, ("gradmag", "log", "dog", "structure_max", "structure_min"))),
        "ours L0, all filters, s0.7-3.5 (25)": bank_stack(level0((0.7, 1.6, 3.5))),
        "pyramid + L0 gauss+hessian s4,8,16 (101)": bank_stack(default + specs(
            [(0, f, s) for s in (4.0, 8.0, 16.0) for f in ("gauss", "hessian_max",
                                                            "hessian_min")])),
    }


class Learner:
    """A fixed learner on the labelled pixels' feature rows (``rf`` or ``core``)."""

    def __init__(self, kind):
        self.kind = kind

    def fit(self, X, y):
        if self.kind == "rf":
            from sklearn.ensemble import RandomForestClassifier
            self.model = RandomForestClassifier(n_estimators=50, max_depth=10, n_jobs=-1,
                                                random_state=0)
        else:
            from msclassify import CEGBClassifier
            self.model = CEGBClassifier(n_estimators=50, learning_rate=0.2, max_leaves=15,
                                        min_samples_leaf=20, cost_tradeoff=0.0, random_state=0)
        self.model.fit(X, y)
        return self

    def predict(self, X):
        return self.model.predict(X)


def evaluate(set_name, data, compute, learners):
    X, y = [], []
    start = time.perf_counter()
    for image, labels in zip(data["train_images"], data["train_labels"]):
        stack = compute(image)
        X.append(stack[labels > 0])
        y.append(labels[labels > 0])
    X, y = np.concatenate(X).astype(np.float32), np.concatenate(y)
    fitted = {kind: Learner(kind).fit(X, y) for kind in learners}
    predictions = {kind: [] for kind in learners}
    for image in data["test_images"]:
        stack = compute(image)
        flat = stack.reshape(-1, stack.shape[-1])
        for kind, model in fitted.items():
            predictions[kind].append(model.predict(flat).reshape(image.shape[:2]))
    spec = SETS[set_name]
    scores = {kind: spec["score"](predictions[kind], data[spec["truth"]]) for kind in learners}
    return X.shape[1], scores, time.perf_counter() - start


def evaluate_ours(set_name, data, specs_list, cost_tradeoff):
    """PixelClassifier on a candidate bank: scores and the model's cost per pixel."""
    from msclassify.pixel import PixelClassifier
    model = PixelClassifier([s.id for s in specs_list], cost_tradeoff=cost_tradeoff,
                            random_state=0).fit(data["train_images"], data["train_labels"])
    images = data["test_images"]
    predictions = [model.predict(image) for image in images]
    costs = [model.prediction_cost(image) for image in images]
    pixels = sum(image.size for image in images)
    spec = SETS[set_name]
    row = dict(spec["score"](predictions, data[spec["truth"]]))
    row["node evals/px"] = sum(c.evaluation for c in costs) / model.split_cost / pixels
    row["feature ops/px"] = sum(c.features for c in costs) / pixels
    row["n used"] = len(model.features_used_)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--variants", nargs="+", default=None,
                        help="substrings selecting variants (default: all)")
    parser.add_argument("--learners", nargs="+", default=["rf", "core"], choices=["rf", "core"])
    parser.add_argument("--candidates", action="store_true",
                        help="the candidate banks, with rf, core and PixelClassifier (mu 2e-4)")
    parser.add_argument("--test-limit", type=int, default=None)
    parser.add_argument("--name", default="feature_study")
    args = parser.parse_args()
    pool = candidates() if args.candidates else variants()
    chosen = {name: compute for name, compute in pool.items()
              if args.variants is None or any(v in name for v in args.variants)}
    results = {}
    for set_name in args.sets:
        data = SETS[set_name]["load"](args.test_limit)
        rows = []
        for name, compute in chosen.items():
            specs_list = compute if isinstance(compute, list) else None
            if specs_list is not None:
                compute = bank_stack(specs_list)
            n_features, scores, seconds = evaluate(set_name, data, compute, args.learners)
            row = {"variant": name, "features": n_features, "s": seconds}
            for kind, values in scores.items():
                row.update({f"{kind} {metric}": value for metric, value in values.items()})
            if specs_list is not None:
                ours = evaluate_ours(set_name, data, specs_list, 2e-4)
                row.update({f"ours {metric}": value for metric, value in ours.items()})
            rows.append(row)
            print(f"[{set_name}] {name}: " + ", ".join(
                f"{k} {v:.4f}" for k, v in row.items() if isinstance(v, (int, float))),
                flush=True)
        results[set_name] = rows
        command = "python benchmarks/study_features.py " + " ".join(sys.argv[1:])
        write_results(args.name, results, command.strip())         # after every set
        metrics = SETS[set_name]["metrics"]
        learners = args.learners + (["ours"] if args.candidates else [])
        extra = ["ours node evals/px", "ours feature ops/px", "ours n used"] \
            if args.candidates else []
        print_table(rows, ["variant", "features"] + [f"{k} {m}" for k in learners
                                                     for m in metrics] + extra)


if __name__ == "__main__":
    main()
