"""Learner parity on real pixels: our CEGB core vs LightGBM, same features, same parameters.

Run: ``python benchmarks/bench_learner_parity.py [--repeats 3] [--features default]
[--sets fly_masks_dev isbi2012_em]`` (``--features`` takes a preset or comma-separated
feature ids). Writes benchmarks/results/learner_parity.json and
prints a table per set.

What is compared
----------------
Both learners get the same rows, the same targets and the same parameters: 100 trees
of at most 31 leaves, learning rate 0.1, no L2 (``l2_regularization=0`` /
``lambda_l2=0``), at least 20 samples and 1e-3 hessian per leaf, 255 bins, initial
score the log-odds of the training mean (LightGBM's ``boost_from_average``), no row or
feature sampling, ``cost_tradeoff=0`` (plain second-order boosting). LightGBM keeps
its own binning (``min_data_in_bin=3``, zero in a bin of its own) and predicts with
its own ``predict``. Features are ``FeatureBank(--features)``: ``gather`` at the
labelled pixels for training, ``compute_full`` (every pixel) for testing.

Not seed noise: with ``--repeats R``, run 0 trains on all labelled pixels and runs
1..R-1 each drop a random 1% of them (seeded, the same rows for both learners). SEG of
10 frames with ~2 flies each moves by several thousandths between such runs, so a
gap is only a gap if it holds in the mean and in most runs.

Data
----
fly_masks_dev
    Train on the scribbles of its 10 train frames (1 background, 2 fly), test on its
    10 test frames (``_real_data.load_fly_masks_dev``).
    SEG is ``seg_score(masks, label_instances(prediction, foreground=2))`` over the
    10 frames; pixel accuracy and log-loss are over every test pixel (fly = mask > 0).
isbi2012_em
    Train on the committed user-like scribbles of slices 0-4 (``_real_data.em_scribbles``,
    membrane vs cell interior), test on every pixel of slices 5-14: pixel accuracy,
    membrane F1, log-loss, and SEG of the cells (4-connected components of the
    interior, in the reference and the prediction alike).
"""

import argparse
import os
import statistics

import numpy as np

from _common import cpu_model, print_table, write_results
from _real_data import load_fly_masks_dev, load_isbi2012_em

from msclassify.cegb import train
from msclassify.features import FeatureBank
from msclassify.metrics import label_instances, seg_score

N_TREES = 100
OURS = dict(n_estimators=N_TREES, max_leaves=31, learning_rate=0.1, l2_regularization=0.0,
            min_samples_leaf=20, min_hessian_leaf=1e-3, max_bins=255, cost_tradeoff=0.0)
LIGHTGBM = dict(objective="binary", num_leaves=31, learning_rate=0.1, lambda_l2=0.0,
                min_data_in_leaf=20, min_sum_hessian_in_leaf=1e-3, max_bin=255,
                boost_from_average=True, verbose=-1, num_threads=os.cpu_count(), seed=0)


# ------------------------------------------------------------------------------------ data

def load(set_name, bank):
    """Training rows at the scribbled pixels, and the test frames with their references.

    The sets, scribbles and references are those of ``bench_accuracy.py``
    (``_real_data``): class 2 (fly / cell interior) is the positive class.
    """
    data = (load_fly_masks_dev() if set_name == "fly_masks_dev" else load_isbi2012_em())
    rows, targets = [], []
    for image, labels in zip(data["train_images"], data["train_labels"]):
        ys, xs = np.nonzero(labels)
        rows.append(bank.gather(image, ys, xs))
        targets.append((labels[ys, xs] == 2).astype(np.float64))
    references = data["test_masks"] if set_name == "fly_masks_dev" else data["test_labels"]
    return np.concatenate(rows), np.concatenate(targets), list(zip(data["test_images"], references))


# ------------------------------------------------------------------------------- learners

def train_both(X, y):
    """Both learners on the same rows: ``{learner: predict_raw}`` and ``{learner: small leaves}``.

    "Small leaves" counts the leaves holding fewer training rows than
    ``min_samples_leaf``: ours counts rows exactly; LightGBM's ``min_data_in_leaf``
    is estimated from hessian sums (its documentation says so), and with the
    confident predictions of later trees that lets splits isolate a few pixels.
    """
    import lightgbm
    ours = train(X, y, "binary", OURS)
    peer = lightgbm.train(LIGHTGBM, lightgbm.Dataset(X, y, params=LIGHTGBM), N_TREES)
    ours_counts = np.concatenate([t["count"][t["feature"] < 0] for t in ours.trees])
    peer_counts = []

    def leaves(node):
        if "leaf_value" in node:
            peer_counts.append(node["leaf_count"])
        else:
            leaves(node["left_child"])
            leaves(node["right_child"])

    for tree in peer.dump_model()["tree_info"]:
        leaves(tree["tree_structure"])
    limit = OURS["min_samples_leaf"]
    small = {"ours": f"{int(np.sum(ours_counts < limit))} / {ours_counts.size}",
             "LightGBM": f"{sum(c < limit for c in peer_counts)} / {len(peer_counts)}"}
    return {"ours": ours.predict_raw,
            "LightGBM": lambda F: peer.predict(F, raw_score=True)}, small


def runs(n_rows, repeats):
    """Row selections: all rows, then seeded draws of 99% of them."""
    yield "all rows", np.arange(n_rows)
    for seed in range(1, repeats):
        rng = np.random.default_rng(seed)
        yield f"drop 1% (seed {seed})", np.sort(rng.choice(n_rows, int(0.99 * n_rows),
                                                            replace=False))


def log_loss_sum(raw, positive):
    return float(np.sum(np.where(positive, np.logaddexp(0, -raw), np.logaddexp(0, raw))))


def evaluate(set_name, models, test, bank):
    """Predict every test pixel with every model (features computed once a frame)."""
    totals = {key: {"loss": 0.0, "right": 0, "pred": [], "tp": 0, "pos": 0} for key in models}
    truths, n_pixels = [], 0
    for image, reference in test:
        features = bank.compute_full(image)
        flat = features.reshape(-1, features.shape[-1])
        positive = (reference > (1 if set_name == "isbi2012_em" else 0)).reshape(-1)
        truths.append(reference)
        n_pixels += positive.size
        for key, predict in models.items():
            raw = np.asarray(predict(flat), dtype=np.float64).reshape(-1)
            t = totals[key]
            t["loss"] += log_loss_sum(raw, positive)
            t["right"] += int(np.sum((raw > 0) == positive))
            t["pred"].append((raw > 0).reshape(reference.shape))
            t["tp"] += int(np.sum((raw <= 0) & ~positive))       # membrane (EM) true positives
            t["pos"] += int(np.sum(raw <= 0) + np.sum(~positive))
    out = {}
    for key, t in totals.items():
        row = {"pixel accuracy": t["right"] / n_pixels,
               "pixel error %": 100.0 * (1.0 - t["right"] / n_pixels),
               "log-loss": t["loss"] / n_pixels}
        if set_name == "fly_masks_dev":
            prediction = np.stack([np.where(p, 2, 1) for p in t["pred"]])
            row["SEG"] = float(seg_score(np.stack(truths), label_instances(prediction, foreground=2)))
        else:
            from scipy import ndimage as ndi
            four = ndi.generate_binary_structure(2, 1)
            cells = lambda masks: np.stack([ndi.label(m, four)[0] for m in masks])
            row["SEG"] = float(seg_score(cells([r == 2 for r in truths]), cells(t["pred"])))
            row["membrane F1"] = 2 * t["tp"] / t["pos"]
        out[key] = row
    return out


def run_set(set_name, bank, repeats):
    X, y, test = load(set_name, bank)
    print(f"[{set_name}] {X.shape[0]} training rows x {X.shape[1]} features, "
          f"{len(test)} test frames", flush=True)
    models, meta = {}, []
    for name, rows in runs(X.shape[0], repeats):
        fitted, small = train_both(np.ascontiguousarray(X[rows]), y[rows])
        for learner, predict in fitted.items():
            models[(name, learner)] = predict
            meta.append({"run": name, "learner": learner, "leaves < 20 rows": small[learner]})
    scores = evaluate(set_name, models, test, bank)
    rows = [dict(m, **scores[(m["run"], m["learner"])]) for m in meta]
    metrics = ["SEG", "pixel error %", "log-loss"] + (["membrane F1"] if set_name ==
                                                      "isbi2012_em" else [])
    summary = []
    for learner in ("ours", "LightGBM"):
        mine = [r for r in rows if r["learner"] == learner]
        entry = {"run": f"mean of {len(mine)}", "learner": learner}
        for metric in metrics:
            values = [r[metric] for r in mine]
            entry[metric] = statistics.mean(values)
            entry[metric + " sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
        summary.append(entry)
    pairs = list(zip(rows[0::2], rows[1::2]))             # (ours, LightGBM) of each run
    lower_is_better = ("log-loss", "pixel error %")
    wins = {metric: sum(a[metric] < b[metric] if metric in lower_is_better else
                        a[metric] > b[metric] for a, b in pairs)
            for metric in metrics}
    return {"training rows": int(X.shape[0]), "features": X.shape[1], "runs": rows,
            "summary": summary, "ours better in runs": wins, "metrics": metrics}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per learner: all rows, then drop-1%% runs (default 3)")
    parser.add_argument("--features", default="default",
                        help="FeatureBank preset, or comma-separated feature ids")
    parser.add_argument("--sets", nargs="+", default=["fly_masks_dev", "isbi2012_em"],
                        choices=["fly_masks_dev", "isbi2012_em"])
    args = parser.parse_args()
    bank = (FeatureBank.from_ids(args.features.split(",")) if ":" in args.features
            else FeatureBank(args.features))
    results = {"cpu": cpu_model(), "load_average_start": os.getloadavg()[0],
               "features": args.features, "n_features": len(bank), "ours": OURS,
               "lightgbm": {k: v for k, v in LIGHTGBM.items() if k != "num_threads"}}
    for set_name in args.sets:
        results[set_name] = result = run_set(set_name, bank, args.repeats)
        print(f"\n{set_name}: {result['training rows']} rows x {result['features']} features "
              f"('{args.features}' bank), 100 trees x 31 leaves, lr 0.1, no L2")
        columns = ["run", "learner"] + result["metrics"] + ["leaves < 20 rows"]
        print_table(result["runs"] + result["summary"], columns)
        print("runs where ours is better: " + ", ".join(
            f"{k} {v}/{args.repeats}" for k, v in result["ours better in runs"].items()))
    results["load_average_end"] = os.getloadavg()[0]
    print(f"\nwrote {write_results('learner_parity', results)} "
          f"({results['cpu']}, load {results['load_average_start']:.1f} -> "
          f"{results['load_average_end']:.1f})")


if __name__ == "__main__":
    main()
