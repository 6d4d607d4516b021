"""Why the default model loses to scikit-image's recipe on a few clicks: teacher, student, variants.

For every draw of a scribble style (default: ``clicks``) on one real set of
``bench_accuracy.py``, fits the recipe (``skimage + RF``), the default model, a
stand-in for its distillation teacher and any ``--variant`` (``NAME=JSON`` of
`PixelClassifier` parameters), and prints the set's target score per draw, the
mean difference to the recipe and its standard error over the draws (a margin
smaller than about two standard errors is not told apart from draw noise).

The teacher stand-in is the teacher's model without the student: plain boosting
(``cost_tradeoff=0``, no distillation, no class weights; ``"auto"`` leaves the
clicks' weights unchanged) on the bank's full-resolution features, which are
the features the teacher may use. Each model's score is recorded, and its fit
time (``<name> train s``, wall seconds: on a loaded box comparable only within
one run). Writes ``benchmarks/results/<--out>.json``.

    python benchmarks/study_clicks.py --set isbi2012_em --draws 8
    python benchmarks/study_clicks.py --set isbi2012_em --draws 8 \
        --variant 'l2=20={"l2_regularization": 20}' --out clicks_l2
"""

import argparse
import json
import time

import numpy as np
from _common import print_table, write_results
from bench_accuracy import SETS, TARGET_METRIC, make_methods

from msclassify.features import FeatureBank
from msclassify.pixel import PixelClassifier


def teacher_stand_in(n_channels):
    """`PixelClassifier` parameters of the distillation teacher alone (see module docstring)."""
    bank = FeatureBank("default", n_channels=n_channels)
    level0 = [bank.ids[i] for i in np.flatnonzero(bank.shares() == 1)]
    return {"features": level0, "cost_tradeoff": 0.0, "distill_weight": 0.0,
            "class_weight": None}


def parse_variant(text):
    """``NAME=JSON`` -> (NAME, dict); the name may hold "=" (the JSON starts at the first "{")."""
    name, brace, params = text.partition("={")
    try:
        return name, json.loads(brace[1:] + params)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"--variant {text!r}: write NAME=JSON, e.g. "
                                         f"'l2=20={{\"l2_regularization\": 20}}' ({error})")


def draw_parser(description):
    """Arguments of a study over scribble draws: --set, --style, --draws, --first-draw."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--set", default="isbi2012_em", choices=sorted(SETS))
    parser.add_argument("--style", default="clicks", choices=["balanced", "thin", "clicks"])
    parser.add_argument("--draws", type=int, default=8)
    parser.add_argument("--first-draw", type=int, default=0)
    return parser


def main():
    parser = draw_parser(__doc__.splitlines()[0])
    parser.add_argument("--variant", type=parse_variant, action="append", default=[],
                        metavar="NAME=JSON")
    parser.add_argument("--no-stand-in", action="store_true",
                        help="skip the teacher stand-in (fits only the recipe, the default "
                             "and the variants)")
    parser.add_argument("--out", default=None, help="results name (default clicks_<set>)")
    args = parser.parse_args()
    spec, metric = SETS[args.set], TARGET_METRIC[args.set]
    recipe = next(m for m in make_methods(()) if m.name == "skimage + RF")
    rows = []
    for draw in range(args.first_draw, args.first_draw + args.draws):
        data = spec["load"](args.style, None, draw=draw)
        images, labels = data["train_images"], data["train_labels"]
        n_channels = 1 if np.ndim(images[0]) == 2 else np.shape(images[0])[-1]
        stand_in = {} if args.no_stand_in else {"teacher alone": teacher_stand_in(n_channels)}
        models = {"default": {}, **stand_in, **dict(args.variant)}
        row = {"draw": draw, "labelled px": int(sum(np.count_nonzero(lab) for lab in labels))}
        recipe.fit(images, labels)
        row["skimage + RF"] = spec["score"]([recipe.predict(im) for im in data["test_images"]],
                                            data[spec["truth"]])[metric]
        for name, params in models.items():
            start = time.perf_counter()
            model = PixelClassifier(**dict({"random_state": 0}, **params)).fit(images, labels)
            row[f"{name} train s"] = time.perf_counter() - start
            row[name] = spec["score"]([model.predict(im) for im in data["test_images"]],
                                      data[spec["truth"]])[metric]
            row[f"{name} features"] = len(model.features_used_)
        rows.append(row)
        print(json.dumps(row), flush=True)
    names = ["default"] + ([] if args.no_stand_in else ["teacher alone"]) + \
        [name for name, _ in args.variant]
    summary = []
    for name in names:
        diff = np.array([r[name] - r["skimage + RF"] for r in rows])
        summary.append({"model": name, f"mean {metric}": float(np.mean([r[name] for r in rows])),
                        "mean - recipe": float(diff.mean()),
                        "std error": float(diff.std(ddof=1) / np.sqrt(diff.size))
                        if diff.size > 1 else float("nan"),
                        "min - recipe": float(diff.min()), "max - recipe": float(diff.max())})
    print(f"\n{args.set}/{args.style}, {len(rows)} draws, recipe mean "
          f"{np.mean([r['skimage + RF'] for r in rows]):.4f}")
    print_table(summary, list(summary[0]))
    name = args.out or f"clicks_{args.set}"
    record = {'set': args.set, 'style': args.style, 'metric': metric, 'draws': rows,
              'summary': summary}
    print(f"wrote {write_results(name, record)}")


if __name__ == "__main__":
    main()
