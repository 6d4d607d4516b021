"""Cost-accuracy curves of budgeted learners on the shared real data sets (issue 6).

Run: ``python benchmarks/bench_budgeted.py [--quick]``. Writes
benchmarks/results/budgeted.json and docs/budgeted_<data>.png, prints a table of
the normalised area under each cost-accuracy frontier (higher is better) over a
common cost range, per data set.

Cost = mean per-sample feature-acquisition cost on the test set (each feature
paid once per sample across all trees), measured for every method by the same
code: `Booster.prediction_cost` (LightGBM models are converted to a Booster),
BudgetRF's and CSTC's own `prediction_cost`, which use the same definition.
Split evaluation is not priced here (BudgetRF prices features only; for CSTC
only the feature part of its cost is plotted).
Costs: uniform (1 per feature) for MiniBooNE, Covertype and HIGGS; for the Yahoo
LTR sample, costs drawn with a fixed seed from the real Yahoo cost vector
(yahoo_cs_cost) because the mapping of those costs to the sample's feature ids is
unknown (PROVENANCE.md). Score: accuracy, or precision@5 on Yahoo (relevance >= 1).

Also reproduces the trend of BudgetRF's Table 1 (Nan et al. 2015) on MiniBooNE:
the percentage of features a test sample needs after 1, 10, 20, 40 trees, BudgetRF
against a standard random forest (scikit-learn, Gini, sqrt features).
"""

import argparse
import time

import lightgbm
import matplotlib
import numpy as np

from _common import REPO, SHARED_DATA, print_table, write_results
from _lightgbm_convert import booster_from_lightgbm

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from msclassify import CEGBClassifier, GreedyMiserClassifier  # noqa: E402
from msclassify.metrics import cost_accuracy_curve, precision_at_k  # noqa: E402
from msclassify.baselines import BudgetRFClassifier, CSTCClassifier  # noqa: E402
from scipy.special import expit  # noqa: E402
from shared_sets import (load_covtype_20k, load_higgs_sample, load_miniboone_tiny,  # noqa: E402
                         load_yahoo_feature_costs, load_yahoo_ltr_sample)
from sklearn.ensemble import RandomForestClassifier  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402


def datasets():
    out = {}
    tr, tv, te = (load_miniboone_tiny(SHARED_DATA, s) for s in ("train", "validation", "test"))
    out["MiniBooNE"] = dict(train=(tr.X, tr.y), val=(tv.X, tv.y), test=(te.X, te.y), qid=None,
                            costs=np.ones(tr.X.shape[1]))
    cov = load_covtype_20k(SHARED_DATA, positive_class=2)
    Xa, Xte, ya, yte = train_test_split(cov.X, cov.y, test_size=0.25, random_state=0, stratify=cov.y)
    Xtr, Xv, ytr, yv = train_test_split(Xa, ya, test_size=0.2, random_state=0, stratify=ya)
    out["Covertype"] = dict(train=(Xtr, ytr), val=(Xv, yv), test=(Xte, yte), qid=None,
                            costs=np.ones(cov.X.shape[1]))
    tr, te = load_higgs_sample(SHARED_DATA, "train"), load_higgs_sample(SHARED_DATA, "test")
    Xtr, Xv, ytr, yv = train_test_split(tr.X, tr.y, test_size=0.2, random_state=0)
    out["HIGGS"] = dict(train=(Xtr, ytr), val=(Xv, yv), test=(te.X, te.y), qid=None,
                        costs=np.ones(tr.X.shape[1]))
    tr, te = load_yahoo_ltr_sample(SHARED_DATA, "train"), load_yahoo_ltr_sample(SHARED_DATA, "test")
    yahoo_costs = np.random.default_rng(0).choice(load_yahoo_feature_costs(SHARED_DATA),
                                                  tr.X.shape[1])
    ytr, yte = (tr.y >= 1).astype(int), (te.y >= 1).astype(int)
    queries = np.unique(tr.qid)
    val_queries = np.random.default_rng(0).choice(queries, len(queries) // 5, replace=False)
    is_val = np.isin(tr.qid, val_queries)
    out["Yahoo LTR"] = dict(train=(tr.X[~is_val], ytr[~is_val]), val=(tr.X[is_val], ytr[is_val]),
                            test=(te.X, yte), qid=te.qid, costs=yahoo_costs, grades=te.y)
    return out


def scorer(data):
    _, y = data["test"]
    if data["qid"] is None:
        return lambda proba: float(np.mean((proba > 0.5) == y))
    return lambda proba: precision_at_k(data["grades"], proba, data["qid"], k=5)


def staged_points(model, X, score, cost_curve):
    """(cost, score) after every iteration of a fitted staged model."""
    points = []
    for j, proba in enumerate(model.staged_predict_proba(X)):
        points.append((float(cost_curve[j]), score(proba[:, 1])))
    return points


def run_cegb(data, score, mus, n_trees, estimator=CEGBClassifier, **extra):
    """Staged (cost, score) points of ``estimator`` (a CEGB preset) at every tradeoff."""
    (Xtr, ytr), (Xte, _) = data["train"], data["test"]
    points = []
    for mu in mus:
        model = estimator(n_estimators=n_trees, cost_tradeoff=mu, feature_costs=data["costs"],
                          random_state=0, **extra).fit(Xtr, ytr)
        points += staged_points(model, Xte, score, model.cost_curve(Xte)["total"])
    return points


def run_lightgbm_cegb(data, score, mus, n_trees):
    (Xtr, ytr), (Xte, _) = data["train"], data["test"]
    points = []
    for mu in mus:
        params = dict(objective="binary", num_leaves=31, learning_rate=0.1, min_data_in_leaf=20,
                      lambda_l2=1.0, verbose=-1, num_threads=2, seed=0)
        if mu > 0:  # LightGBM's gain has no 1/2: its tradeoff is 2 * mu for the same model
            params.update(cegb_tradeoff=2 * mu, cegb_penalty_feature_lazy=list(data["costs"]))
        peer = lightgbm.train(params, lightgbm.Dataset(Xtr, ytr), n_trees)
        booster = booster_from_lightgbm(peer, data["costs"])
        raw = booster.predict_raw(Xte)
        if not np.allclose(raw, peer.predict(Xte, raw_score=True), atol=1e-9):
            raise RuntimeError("LightGBM model conversion changed its predictions")
        curve = booster.cost_curve(Xte)["total"]
        for j, staged in enumerate(booster.staged_predict_raw(Xte)):
            points.append((float(curve[j]), score(1 / (1 + np.exp(-staged)))))
    return points


def run_budgetrf(data, score, n_trees):
    (Xtr, ytr), (Xte, _) = data["train"], data["test"]
    points = []
    for threshold in (0.0, 0.05, 0.2):
        forest = BudgetRFClassifier(n_estimators=n_trees, feature_costs=data["costs"],
                                    impurity_threshold=threshold, random_state=0,
                                    n_jobs=2).fit(Xtr, ytr)
        points += staged_points(forest, Xte, score, forest.cost_curve(Xte)["total"])
    return points


def run_cstc(data, score, mus):
    """One CSTC tree per tradeoff, pruned on the validation set; feature cost only."""
    (Xtr, ytr), (Xv, yv), (Xte, _) = data["train"], data["val"], data["test"]
    points = []
    for mu in mus:
        tree = CSTCClassifier(cost_tradeoff=mu, feature_costs=data["costs"],
                              random_state=0).fit(Xtr, ytr, Xv, yv)
        points.append((float(tree.prediction_cost(Xte).feature.mean()),
                       score(expit(tree.decision_function(Xte)))))
    return points


def table1_feature_usage(data, tree_counts=(1, 10, 20, 40)):
    """Percent of the features a test sample needs after k trees: BudgetRF vs random forest."""
    (Xtr, ytr), (Xte, _) = data["train"], data["test"]
    n_trees = max(tree_counts)
    budget_rf = BudgetRFClassifier(n_estimators=n_trees, random_state=0, n_jobs=2).fit(Xtr, ytr)
    budget_pct = 100 * budget_rf.cost_curve(Xte)["n_features"] / Xte.shape[1]
    forest = RandomForestClassifier(n_estimators=n_trees, max_features="sqrt", random_state=0,
                                    n_jobs=2).fit(Xtr, ytr)
    used = np.zeros(Xte.shape, dtype=bool)
    forest_pct = []
    for tree in forest.estimators_:
        path = tree.decision_path(Xte).tocoo()
        feature = tree.tree_.feature[path.col]
        used[path.row[feature >= 0], feature[feature >= 0]] = True
        forest_pct.append(100 * used.sum(axis=1).mean() / Xte.shape[1])
    return [{"trees": k, "BudgetRF %": round(float(budget_pct[k - 1]), 1),
             "random forest %": round(float(forest_pct[k - 1]), 1)} for k in tree_counts]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer trees and knob values")
    args = parser.parse_args()
    n_trees = 40 if args.quick else 100
    mus = np.geomspace(1e-4, 3e-2, 4 if args.quick else 6)
    rows, results = [], {}
    datasets_loaded = datasets()
    for name, data in datasets_loaded.items():
        score = scorer(data)
        started = time.perf_counter()
        methods = {
            "CEGB (best-first)": run_cegb(data, score, mus, n_trees),
            "CEGB (breadth-first)": run_cegb(data, score, mus, n_trees, growth="breadth_first",
                                             max_depth=5),
            "GreedyMiser": run_cegb(data, score, mus, n_trees, GreedyMiserClassifier,
                                    split_cost=0.0),
            "plain GB (mu=0)": run_cegb(data, score, [0.0], n_trees),
            "LightGBM CEGB": run_lightgbm_cegb(data, score, mus, n_trees),
            "BudgetRF": run_budgetrf(data, score, 40 if args.quick else 100),
            # CSTC's tradeoff multiplies the raw costs: divided by their mean, one range
            # of tradeoffs serves both uniform and Yahoo costs
            "CSTC": run_cstc(data, score, np.geomspace(1e-5, 3e-2, 5 if args.quick else 10)
                             / data["costs"].mean()),
        }
        # Every method can predict the training prior for free: all frontiers start at cost 0,
        # and the common range ends at the cheapest of the methods' most expensive points.
        prior = np.full(len(data["test"][1]), data["train"][1].mean())
        free = (0.0, score(prior))
        frontiers = {m: cost_accuracy_curve(*zip(free, *pts)) for m, pts in methods.items()}
        upper = min(f.costs[-1] for f in frontiers.values())
        lower = 0.0
        row = {"data": name, "cost range": f"[{lower:.3g}, {upper:.3g}]"}
        for method, frontier in frontiers.items():
            row[method] = frontier.area((lower, upper))
        rows.append(row)
        results[name] = {"cost_range": [lower, upper], "seconds": time.perf_counter() - started,
                         "area": {m: row[m] for m in methods},
                         "frontier": {m: {"cost": f.costs.tolist(), "score": f.scores.tolist()}
                                      for m, f in frontiers.items()}}
        fig, ax = plt.subplots(figsize=(6, 4))
        for method, frontier in frontiers.items():
            ax.step(frontier.costs, frontier.scores, where="post", label=method)
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlabel("mean feature cost per test sample")
        ax.set_ylabel("precision@5" if data["qid"] is not None else "test accuracy")
        ax.set_title(f"{name}: cost-accuracy frontiers")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(REPO / "docs" / f"budgeted_{name.split()[0].lower()}.png", dpi=100)
        plt.close(fig)
        print(f"{name}: done in {results[name]['seconds']:.0f} s", flush=True)
    table1 = table1_feature_usage(datasets_loaded["MiniBooNE"])
    results["table1_miniboone"] = table1
    path = write_results("budgeted" + ("_quick" if args.quick else ""), results)
    print("\nNormalised area under the cost-accuracy frontier over the common cost range:")
    print_table(rows, ["data", "cost range", "CEGB (best-first)", "CEGB (breadth-first)",
                       "GreedyMiser", "plain GB (mu=0)", "LightGBM CEGB", "BudgetRF", "CSTC"])
    print("\nBudgetRF Table 1 trend on MiniBooNE: % of features a test sample needs")
    print_table(table1, ["trees", "BudgetRF %", "random forest %"])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
