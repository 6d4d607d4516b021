"""Does bisecting the ``cost_tradeoff="auto"`` path choose what walking it down chose?

For every draw of a scribble style on a real set of ``bench_accuracy.py`` (or a
case of ``bench_training.py``: ``fly-4``, ``photo-4``, ``larvae-4``), fits
``PixelClassifier(cost_tradeoff="auto")`` with every value of `AUTO_PATH` fitted
and scored (the path models do not depend on the order they are fitted in: same
rows, binning and seed), then replays on that table

* ``walk``: the search before the ninth round: 0, then from 1e-3 down, stopping at
  the first value within ``tolerance`` of the best score so far;
* ``bisect``: `msclassify.pixel._tradeoff.search_path` (0, then a bisection);
* ``whole``: `choose` on the whole path;

and prints the value each chooses and how many path models each fits. The refit
is the fit of the chosen value on all scribbles (a fixed fit of that value), so
the same value means the same model and the same test scores. Where ``walk`` and
``bisect`` differ, both values are fitted as fixed fits and scored on the set's
test images (its ``TARGET_METRIC``). Writes ``benchmarks/results/<--out>.json``.

    python benchmarks/study_auto_search.py --set isbi2012_em --style thin --draws 4
    python benchmarks/study_auto_search.py --set photo-4
    python benchmarks/study_auto_search.py --set isbi2012_em --style thin --draws 4 \
        --values 0 0.001 0.003 --out mu_rule_auto_em_thin

``--values`` fits and scores those values instead of `AUTO_PATH` (the held-out score of
a larger μ than the path's; docs/scribbles.md, section 23).
"""

import argparse
import functools
import json
import time

import numpy as np
from _common import write_results
from bench_accuracy import SETS, TARGET_METRIC

import msclassify.pixel._tradeoff as tradeoff
from msclassify.pixel import PixelClassifier

TRAINING_CASES = ("fly-4", "photo-4", "larvae-4")
search_path = tradeoff.search_path          # the rule of this checkout, before main() patches it


class _WholePath(Exception):
    def __init__(self, path):
        super().__init__("whole path fitted")
        self.path = path


def _fit_whole_path(fit_and_score, tolerance, values=tradeoff.AUTO_PATH):
    raise _WholePath([fit_and_score(value) for value in values])


def walk(path, tolerance):
    """Values fitted by the search of rounds six to eight (0, then from the largest down)."""
    fitted, best = [0], path[0]["score"]
    for index in range(len(path) - 1, 0, -1):
        fitted.append(index)
        best = max(best, path[index]["score"])
        if path[index]["score"] >= best - tolerance:
            break
    return sorted(fitted)


def bisect(path, tolerance):
    """Values fitted by `search_path`, replayed on the whole path's scores."""
    fitted = []

    def lookup(value):
        index = [p["cost_tradeoff"] for p in path].index(value)
        fitted.append(index)
        return path[index]
    search_path(lookup, tolerance)
    return sorted(fitted)


def chosen(path, fitted, tolerance):
    sub = [path[i] for i in fitted]
    return sub[tradeoff.choose(sub, tolerance)[0]]["cost_tradeoff"]


def load(name, style, draw):
    """``(train images, train labels, score(model) -> float)`` of a set/style/draw or a case."""
    if name in TRAINING_CASES:
        from bench_training import case_accuracy, case_data
        image, labels, truth = case_data(name, truth=True, draw=draw)
        return [image], [labels], lambda model: case_accuracy(model, image, labels, truth)
    spec, metric = SETS[name], TARGET_METRIC[name]
    data = spec["load"](style, None, draw=draw)
    return data["train_images"], data["train_labels"], lambda model: spec["score"](
        [model.predict(im) for im in data["test_images"]], data[spec["truth"]])[metric]


def compare_refits(args):
    """``--refit``: per draw, auto's model (warm refit) against a fresh fit of the value it
    chose (what a fresh refit returns: the fixed fit of that value), scored and timed."""
    rows = []
    for draw in range(args.first_draw, args.first_draw + args.draws):
        images, labels, score = load(args.set, args.style, draw)
        start = time.process_time()
        auto = PixelClassifier(cost_tradeoff="auto", random_state=0).fit(images, labels)
        auto_cpu = time.process_time() - start
        start = time.process_time()
        fresh = PixelClassifier(cost_tradeoff=auto.cost_tradeoff_, random_state=0)
        fresh.fit(images, labels)
        fresh_cpu = time.process_time() - start
        row = {"set": args.set, "style": args.style, "draw": draw, "μ": auto.cost_tradeoff_,
               "path fits": len(auto.tradeoff_path_), "warm refit": score(auto),
               "fresh refit": score(fresh), "auto cpu s": auto_cpu,
               "fixed fit of μ cpu s": fresh_cpu,
               "warm features": len(auto.features_used_),
               "fresh features": len(fresh.features_used_)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    diff = np.array([r["warm refit"] - r["fresh refit"] for r in rows])
    print(f"\n{args.set}/{args.style}: warm - fresh refit {diff.mean():+.4f} "
          f"(min {diff.min():+.4f}, max {diff.max():+.4f}) over {diff.size} draws")
    name = args.out or f"auto_refit_{args.set}"
    print(f"wrote {write_results(name, {'set': args.set, 'style': args.style, 'draws': rows})}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="isbi2012_em",
                        choices=sorted(SETS) + list(TRAINING_CASES))
    parser.add_argument("--style", default="balanced",
                        choices=["user", "balanced", "thin", "clicks"],
                        help="scribble style of a set (the cases have their own scribbles)")
    parser.add_argument("--draws", type=int, default=1)
    parser.add_argument("--first-draw", type=int, default=0)
    parser.add_argument("--out", default=None, help="results name (default auto_search_<set>)")
    parser.add_argument("--values", type=float, nargs="+", default=None, metavar="MU",
                        help="fit and score these values (from 0, increasing) instead of "
                             "AUTO_PATH; only 'whole' is replayed")
    parser.add_argument("--refit", action="store_true",
                        help="instead: fit auto (its refit continues the chosen path model's "
                             "trees) and the fixed fit of the value it chose (a fresh refit), "
                             "and score both")
    args = parser.parse_args()
    if args.refit:
        return compare_refits(args)
    rows = []
    values = tradeoff.AUTO_PATH if args.values is None else tuple(args.values)
    tradeoff.search_path = functools.partial(_fit_whole_path, values=values)
    for draw in range(args.first_draw, args.first_draw + args.draws):
        images, labels, score = load(args.set, args.style, draw)
        model = PixelClassifier(cost_tradeoff="auto", random_state=0)
        try:
            model.fit(images, labels)
        except _WholePath as whole:
            path = whole.path
        else:
            raise RuntimeError("nothing could be held out: no path to compare")
        tolerance = model.tolerance
        fits = {"whole": list(range(len(path)))}
        if values == tradeoff.AUTO_PATH:
            fits.update(walk=walk(path, tolerance), bisect=bisect(path, tolerance))
        row = {"set": args.set, "style": args.style, "draw": draw,
               "path": [(p["cost_tradeoff"], round(p["score"], 5), round(p["cost_per_pixel"], 2))
                        for p in path]}
        for rule, fitted in fits.items():
            row[f"{rule} μ"] = chosen(path, fitted, tolerance)
            row[f"{rule} fits"] = len(fitted)
        if "walk μ" in row and row["walk μ"] != row["bisect μ"]:
            for rule in ("walk", "bisect"):
                fixed = PixelClassifier(cost_tradeoff=row[f"{rule} μ"], random_state=0)
                row[f"{rule} score"] = score(fixed.fit(images, labels))
        rows.append(row)
        print(json.dumps(row), flush=True)
    name = args.out or f"auto_search_{args.set}"
    if args.values is not None:
        print(f"wrote {write_results(name, {'set': args.set, 'style': args.style, 'draws': rows})}")
        return
    same = sum(r["walk μ"] == r["bisect μ"] for r in rows)
    print(f"\n{args.set}/{args.style}: bisect chose walk's μ in {same} of {len(rows)} draws; "
          f"path models fitted: walk {np.mean([r['walk fits'] for r in rows]):.2f}, bisect "
          f"{np.mean([r['bisect fits'] for r in rows]):.2f} on average")
    print(f"wrote {write_results(name, {'set': args.set, 'style': args.style, 'draws': rows})}")


if __name__ == "__main__":
    main()
