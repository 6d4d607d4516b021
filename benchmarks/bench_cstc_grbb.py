"""The papers' synthetic experiments for CSTC and GRBB, over several seeds.

Run: ``python benchmarks/bench_cstc_grbb.py [--seeds 5]``. Writes
benchmarks/results/cstc_grbb.json and prints two tables (mean +- std over seeds).

CSTC (Xu et al. 2013, Sec. 5.1; data: `msclassify.datasets.make_cost_quadrants`,
1000 training / 4000 test inputs per seed, feature costs 1, 1, 10, 10, 10, 10)
    ``CSTC``: ``CSTCClassifier(max_depth=3, feature_map="identity",
    cost_tradeoff=0.003)`` (the setting of tests/test_cstc.py), and the same for
    ``CSTCRegressor`` with ``cost_tradeoff=0.01`` (the paper's regression task).
    ``single linear``: the paper's cost-sensitive single linear model (Eq. 4),
    i.e. the same estimator with ``max_depth=1`` (an L1-regularised linear model
    whose penalty weighs each feature by its cost), at cost_tradeoff 0, 3e-4,
    1e-3, 3e-3, 0.01, 0.1. "best single at <= CSTC cost" takes, per seed, the
    most accurate single model whose mean test cost does not exceed CSTC's.
    Cost = mean per-input feature cost on the test set (``prediction_cost``).
GRBB (Xu et al., Sec. 3-4; data: ``two_moons`` below, 600 training
points with one random labelled point per class, 2000 test points, noise 0.05)
    Test accuracy after 1, 5, 10, 50 (and 200) trees of ``GRBBClassifier()``
    (9 neighbours, lambda 1, learning rate 0.1), the same with lambda 0 (only the
    propagation of Eq. 5, no smoothing term in the labelled gradients),
    ``LaplacianBoostingClassifier()``
    (LapGBRT, same graph and parameters) and plain boosting on the two labelled
    points alone (``CEGBClassifier(min_samples_leaf=1)``, otherwise defaults).
    "Label more?": ``GRBBClassifier(n_estimators=20).prediction_variance_bound_``
    (Sec. 5) with 1, 5, 25, 100 random labelled points per class.
"""

import argparse
import time

import numpy as np

from _common import print_table, write_results

from sklearn.datasets import make_moons

from msclassify import CEGBClassifier
from msclassify.baselines import (CSTCClassifier, CSTCRegressor, GRBBClassifier,
                                  LaplacianBoostingClassifier)
from msclassify.datasets import QUADRANT_FEATURE_COSTS, make_cost_quadrants

SINGLE_TRADEOFFS = (0.0, 3e-4, 1e-3, 3e-3, 0.01, 0.1)
TREES = (1, 5, 10, 50, 200)


def two_moons(seed, n_train=600, n_test=2000, noise=0.05):
    """GRBB Fig. 1: two classes on two manifolds, one labelled point per class.

    Returns
    -------
    X, y (-1 = unlabelled), labelled (the two labelled row indices), truth, X_test, truth_test
    """
    X, truth = make_moons(n_train, noise=noise, random_state=seed)
    X_test, truth_test = make_moons(n_test, noise=noise, random_state=10_000 + seed)
    rng = np.random.default_rng(seed)
    labelled = np.sort([rng.choice(np.flatnonzero(truth == c)) for c in (0, 1)])
    y = np.full(n_train, -1)
    y[labelled] = truth[labelled]
    return X, y, labelled, truth, X_test, truth_test


def mean_std(values):
    values = np.asarray(values, dtype=float)
    return float(values.mean()), float(values.std())


def fmt(values, digits=3):
    mean, std = mean_std(values)
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def cstc_runs(seeds, kind):
    estimator, tradeoff = ((CSTCClassifier, 0.003) if kind == "classification"
                           else (CSTCRegressor, 0.01))

    def score(model, X, y):
        predicted = model.predict(X)
        return float(np.mean(predicted == y)) if kind == "classification" else \
            float(np.mean((predicted - y) ** 2))

    better = max if kind == "classification" else min
    runs = []
    for seed in seeds:
        X, y, _ = make_cost_quadrants(1000, seed, kind)
        X_test, y_test, _ = make_cost_quadrants(4000, 1000 + seed, kind)
        start = time.perf_counter()
        tree = estimator(max_depth=3, feature_map="identity", cost_tradeoff=tradeoff,
                         feature_costs=QUADRANT_FEATURE_COSTS).fit(X, y)
        run = {"seed": seed, "cstc_fit_s": time.perf_counter() - start,
               "cstc_cost": float(tree.prediction_cost(X_test).per_sample.mean()),
               "cstc_score": score(tree, X_test, y_test), "singles": []}
        for t in SINGLE_TRADEOFFS:
            single = estimator(max_depth=1, feature_map="identity", cost_tradeoff=t,
                               feature_costs=QUADRANT_FEATURE_COSTS).fit(X, y)
            run["singles"].append({"cost_tradeoff": t, "score": score(single, X_test, y_test),
                                   "cost": float(single.prediction_cost(X_test).per_sample.mean())})
        affordable = [s["score"] for s in run["singles"] if s["cost"] <= run["cstc_cost"] + 1e-9]
        run["best_single_at_cstc_cost"] = better(affordable) if affordable else None
        runs.append(run)
        print(f"[cstc {kind}] seed {seed}: CSTC {run['cstc_score']:.3f} at cost "
              f"{run['cstc_cost']:.2f}, best single at <= that cost "
              f"{run['best_single_at_cstc_cost']}", flush=True)
    return runs


def cstc_rows(runs, kind):
    metric = "accuracy" if kind == "classification" else "MSE"
    rows = [{"task": kind, "model": "CSTC (depth 3)", metric: fmt([r["cstc_score"] for r in runs]),
             "test cost": fmt([r["cstc_cost"] for r in runs], 2)}]
    affordable = [r["best_single_at_cstc_cost"] for r in runs
                  if r["best_single_at_cstc_cost"] is not None]
    rows.append({"task": kind, "model": "best single linear at <= CSTC cost",
                 metric: fmt(affordable) if affordable else "none affordable",
                 "test cost": f"<= CSTC ({len(affordable)}/{len(runs)} seeds)"})
    for i, t in enumerate(SINGLE_TRADEOFFS):
        rows.append({"task": kind, "model": f"single linear, cost_tradeoff={t:g}",
                     metric: fmt([r["singles"][i]["score"] for r in runs]),
                     "test cost": fmt([r["singles"][i]["cost"] for r in runs], 2)})
    return rows


def grbb_runs(seeds):
    n_trees = max(TREES)
    runs = []
    for seed in seeds:
        X, y, labelled, truth, X_test, truth_test = two_moons(seed)
        run = {"seed": seed}
        models = {
            "GRBB": lambda: GRBBClassifier(n_estimators=n_trees, random_state=seed).fit(X, y),
            "GRBB lambda=0": lambda: GRBBClassifier(n_estimators=n_trees,
                                                    laplacian_regularization=0.0,
                                                    random_state=seed).fit(X, y),
            "LapGBRT": lambda: LaplacianBoostingClassifier(n_estimators=n_trees,
                                                           random_state=seed).fit(X, y),
            "plain boosting (2 labels)": lambda: CEGBClassifier(
                n_estimators=n_trees, min_samples_leaf=1, random_state=seed).fit(
                X[labelled], truth[labelled]),
        }
        for name, fit in models.items():
            start = time.perf_counter()
            model = fit()
            accuracy = [float(np.mean(p == truth_test)) for p in model.staged_predict(X_test)]
            run[name] = {"fit_s": time.perf_counter() - start,
                         "accuracy": {t: accuracy[t - 1] for t in TREES}}
        runs.append(run)
        print(f"[grbb] seed {seed}: " + ", ".join(
            f"{name} {run[name]['accuracy'][1]:.3f}/{run[name]['accuracy'][50]:.3f}"
            for name in models) + " (after 1/50 trees)", flush=True)
    return runs


def grbb_rows(runs):
    rows = []
    for name in ("GRBB", "GRBB lambda=0", "LapGBRT", "plain boosting (2 labels)"):
        row = {"model": name}
        for t in TREES:
            row[f"{t} trees"] = fmt([r[name]["accuracy"][t] for r in runs])
        row["fit s"] = fmt([r[name]["fit_s"] for r in runs], 2)
        rows.append(row)
    return rows


LABELS_PER_CLASS = (1, 5, 25, 100)


def variance_bound_rows(seeds):
    """GRBB's "label more?" bound (Sec. 5) on two moons as labels are added (20 trees)."""
    rows = []
    for per_class in LABELS_PER_CLASS:
        bounds, accuracies = [], []
        for seed in seeds:
            X, _, _, truth, X_test, truth_test = two_moons(seed)
            rng = np.random.default_rng(seed)
            y = np.full(truth.shape, -1)
            for c in (0, 1):
                chosen = rng.choice(np.flatnonzero(truth == c), per_class, replace=False)
                y[chosen] = c
            model = GRBBClassifier(n_estimators=20, random_state=seed).fit(X, y)
            bounds.append(model.prediction_variance_bound_)
            accuracies.append(np.mean(model.predict(X_test) == truth_test))
        rows.append({"labels": 2 * per_class, "variance bound": fmt(bounds, 4),
                     "test accuracy": fmt(accuracies), "bounds": bounds})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    results = {"seeds": seeds}
    cstc_table = []
    for kind in ("classification", "regression"):
        runs = cstc_runs(seeds, kind)
        rows = cstc_rows(runs, kind)
        results[f"cstc_{kind}"] = {"runs": runs, "table": rows}
        cstc_table += rows
    runs = grbb_runs(seeds)
    results["grbb_two_moons"] = {"runs": runs, "table": grbb_rows(runs)}
    results["grbb_variance_bound"] = variance_bound_rows(seeds)
    print("\nCSTC on the quadrant data (mean ± std over seeds; cost = mean feature cost per "
          "test input):")
    print_table(cstc_table, ["task", "model", "accuracy", "MSE", "test cost"])
    print("\nGRBB on two moons with 2 labelled points (test accuracy, mean ± std over seeds):")
    print_table(results["grbb_two_moons"]["table"],
                ["model"] + [f"{t} trees" for t in TREES] + ["fit s"])
    print("\nGRBB's prediction-variance lower bound (lambda 1, 20 trees) as labels are added:")
    print_table(results["grbb_variance_bound"], ["labels", "variance bound", "test accuracy"])
    path = write_results("cstc_grbb", results)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
