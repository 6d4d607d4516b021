"""Which teacher would win on a few clicks: feature set x learner, scored alone at full resolution.

The distillation teacher of `PixelClassifier` is plain boosting on the bank's
full-resolution features (sigma <= 3.5), and on clicks the model copies it
(docs/scribbles.md section 11). For every draw of a scribble style on one real
set of ``bench_accuracy.py``, this fits each learner on each feature stack of
the labelled pixels (as scikit-image's ``fit_segmenter`` does), predicts every
pixel of the test frames and prints the set's target score, with the recipe
(``skimage`` features + ``RF``) as the reference: mean margin to it and its
standard error over the draws. Nothing here is a `PixelClassifier`; it tells
which features and which learner a teacher would need.

Feature stacks (all at full resolution):

- ``L0``: the default bank's level-0 features, what the teacher sees now;
- ``L0+wide``: those and gauss / hessian_max / hessian_min / gradmag at sigma 8 and 16;
- ``L0+up``: those and the same four filters at sigma 3.5 on levels 1 and 2 (about sigma
  7 and 14 of the frame), interpolated to full resolution (``upsampled=True``: cheap);
- ``skimage``: the recipe's ``multiscale_basic_features`` (sigma 1-16).

Learners: ``boost`` (`msclassify.cegb.train` with the teacher's settings:
50 trees, 15 leaves, learning rate 0.2, cost 0), ``RF`` (the recipe's
``RandomForestClassifier(50, max_depth=10)``), ``ET`` (extra trees, same size).
One thread. Writes ``benchmarks/results/<--out>.json``.

    python benchmarks/study_teacher.py --set isbi2012_em --draws 8
"""

import json

import numpy as np
from _common import print_table, write_results
from bench_accuracy import SETS, TARGET_METRIC, skimage_features
from study_clicks import draw_parser

from msclassify.cegb import most_probable_class, train
from msclassify.features import FeatureBank, FeatureSpec

TEACHER = {"n_estimators": 50, "learning_rate": 0.2, "max_leaves": 15, "min_samples_leaf": 20,
           "l2_regularization": 1.0, "max_bins": 255, "cost_tradeoff": 0.0, "random_state": 0}
WIDE = [(kind, sigma) for sigma in (8.0, 16.0)
        for kind in ("gauss", "hessian_max", "hessian_min", "gradmag")]


def stacks(n_channels):
    """Feature stack name -> ``image -> (H, W, F)`` float32."""
    bank = FeatureBank("default", n_channels=n_channels)
    level0 = [bank.specs[i] for i in np.flatnonzero(bank.shares() == 1)]
    wide = [FeatureSpec.make(0, kind, sigma, channel=c) for kind, sigma in WIDE
            for c in range(n_channels)]
    up = [FeatureSpec.make(level, kind, 3.5, channel=c, upsampled=True)
          for level in (1, 2) for kind in ("gauss", "hessian_max", "hessian_min", "gradmag")
          for c in range(n_channels)]
    banks = {"L0": FeatureBank(specs=level0, n_channels=n_channels),
             "L0+wide": FeatureBank(specs=level0 + wide, n_channels=n_channels),
             "L0+up": FeatureBank(specs=level0 + up, n_channels=n_channels)}
    out = {name: (lambda image, b=b: b.compute_full(np.asarray(image, np.float32), n_threads=1))
           for name, b in banks.items()}
    out["skimage"] = lambda image: skimage_features(image).astype(np.float32)
    return out


class Boost:
    def fit(self, X, y):
        self.classes = np.unique(y)
        self.booster = train(X, (y == self.classes[1]).astype(np.float64), "binary", TEACHER) \
            if self.classes.size == 2 else \
            train(X, np.searchsorted(self.classes, y).astype(np.float64), "multiclass", TEACHER,
                  n_classes=self.classes.size)
        return self

    def predict(self, X):
        return self.classes[most_probable_class(self.booster.predict_raw(X))]


def learners():
    from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
    return {"boost": Boost,
            "RF": lambda: RandomForestClassifier(50, max_depth=10, n_jobs=1, random_state=0),
            "ET": lambda: ExtraTreesClassifier(50, max_depth=10, n_jobs=1, random_state=0)}


def main():
    parser = draw_parser(__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="results name (default teacher_<set>)")
    args = parser.parse_args()
    spec, metric = SETS[args.set], TARGET_METRIC[args.set]
    rows, cache = [], {}
    for draw in range(args.first_draw, args.first_draw + args.draws):
        data = spec["load"](args.style, None, draw=draw)
        images, labels = data["train_images"], data["train_labels"]
        n_channels = 1 if np.ndim(images[0]) == 2 else np.shape(images[0])[-1]
        row = {"draw": draw, "labelled px": int(sum(np.count_nonzero(lab) for lab in labels))}
        for sname, features in stacks(n_channels).items():
            # the frames are the same in every draw (only the scribbles change): compute once
            train_f = cache.setdefault((sname, "train"), [features(im) for im in images])
            test_f = cache.setdefault((sname, "test"),
                                      [features(im) for im in data["test_images"]])
            X = np.concatenate([f[lab > 0] for f, lab in zip(train_f, labels)])
            y = np.concatenate([lab[lab > 0] for lab in labels])
            for lname, make in learners().items():
                model = make().fit(X, y)
                predictions = [model.predict(f.reshape(-1, f.shape[-1])).reshape(f.shape[:2])
                               for f in test_f]
                row[f"{sname} {lname}"] = spec["score"](predictions, data[spec["truth"]])[metric]
        rows.append(row)
        print(json.dumps(row), flush=True)
    reference = "skimage RF"
    summary = []
    for name in [k for k in rows[0] if k not in ("draw", "labelled px")]:
        diff = np.array([r[name] - r[reference] for r in rows])
        summary.append({"teacher": name, f"mean {metric}": float(np.mean([r[name] for r in rows])),
                        "mean - recipe": float(diff.mean()),
                        "std error": float(diff.std(ddof=1) / np.sqrt(diff.size))
                        if diff.size > 1 else float("nan")})
    print(f"\n{args.set}/{args.style}, {len(rows)} draws")
    print_table(summary, list(summary[0]))
    record = {"set": args.set, "style": args.style, "metric": metric, "draws": rows,
              "summary": summary}
    print(f"wrote {write_results(args.out or f'teacher_{args.set}', record)}")


if __name__ == "__main__":
    main()
