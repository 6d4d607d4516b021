"""CEGB core vs LightGBM: training time, lazy-cost overhead, prediction throughput, accuracy.

Run: ``python benchmarks/bench_core.py [--quick] [--no-callgrind | --callgrind-only]``. Writes
benchmarks/results/core.json.
Everything compared is measured in the same run (the machine is shared and noisy):
ratios matter, absolute seconds less so. OMP_WAIT_POLICY=PASSIVE is set for both
libraries (they share the process and would otherwise spin against each other).

Scenarios
---------
speed
    Synthetic 200k x 50 binary, 100 trees x 31 leaves, ours and LightGBM at mu = 0
    and with lazy per-sample feature costs; one-tree fits at mu = 0, which split a
    training's time into set-up (binning, first tree) and time per further tree;
    prediction of 1M rows. Five rounds, the
    methods interleaved with the order rotating per round; a ratio is the median of
    the per-round ratios (on a 2-core box three back-to-back repeats per method gave
    training ratios from 0.87 to 1.07 for the same code).
instructions
    A stable measure beside wall time: instructions executed by fixed small runs
    (training 20k x 50, 10 trees x 31 leaves, 2 threads, binning included, at
    mu = 0 and with the lazy costs; predicting 100k rows with 100 trees), ours
    and LightGBM, counted by ``valgrind --tool=callgrind`` over all threads of a
    child process during the counted run only, so start-up, imports, the Numba
    warm-up and (for prediction) training are left out. Skipped when valgrind is
    not installed. Prediction's count is no proxy for its time (a branch-free
    walk executes more instructions and mispredicts none).

LightGBM's split gain has no 1/2 factor, ours does (docs/design.md), so the same
penalties need LightGBM's ``cegb_tradeoff = 2 * mu``; its ``cegb_penalty_split``
is multiplied by the rows in the leaf like our ``split_cost``.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

# Numba's and LightGBM's OpenMP runtimes share this process: spinning idle workers of one
# steal the cores of the other, so both are told to sleep when idle.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np

from _common import (REPO, SHARED_DATA, interleaved_times, machine, median_ratio,
                     print_table, write_results)
from shared_sets import load_covtype_20k, load_higgs_sample, load_miniboone_tiny

import lightgbm
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.model_selection import train_test_split

from msclassify.cegb import train

THREADS = 2


def synthetic(n_rows, n_features=50, seed=0):
    """Binary task with linear, interaction and non-linear signal; built in chunks so that
    generating it does not raise the process's peak memory above X itself."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=5)
    X = np.empty((n_rows, n_features))
    y = np.empty(n_rows)
    for start in range(0, n_rows, 100_000):
        block = X[start:start + 100_000]
        block[:] = rng.normal(size=block.shape)
        logit = block[:, :5] @ w + block[:, 5] * block[:, 6] + np.sin(block[:, 7])
        y[start:start + 100_000] = logit + rng.logistic(size=len(block)) > 0
    return X, y


# The lazy per-sample cost scenario: cost tradeoff and feature costs 1 .. 10.
LAZY_MU = 1e-3


def lazy_beta(n_features):
    """Per-sample costs of the lazy scenario, rising linearly from 1 to 10 over the features."""
    return np.linspace(1.0, 10.0, n_features)


def ours_params(mu=0.0, beta=None, alpha=0.0, n_trees=100):
    return dict(n_estimators=n_trees, learning_rate=0.1, max_leaves=31, min_samples_leaf=20,
                l2_regularization=1.0, max_bins=255, cost_tradeoff=mu, feature_costs=beta,
                split_cost=alpha)


def lgb_params(mu=0.0, beta=None, alpha=0.0):
    params = dict(objective="binary", num_leaves=31, learning_rate=0.1, min_data_in_leaf=20,
                  lambda_l2=1.0, min_sum_hessian_in_leaf=1e-3, max_bin=255, verbose=-1,
                  num_threads=THREADS, seed=0)
    if mu > 0:
        params.update(cegb_tradeoff=2 * mu, cegb_penalty_split=alpha)
        if beta is not None:
            params["cegb_penalty_feature_lazy"] = list(beta)
    return params


def lgb_train(X, y, params, n_trees=100):
    return lightgbm.train(params, lightgbm.Dataset(X, y, params={"max_bin": 255, "verbose": -1}),
                          n_trees)


def speed(n_rows, rounds):
    """Training and prediction times, the four trainings (and the two predictions)
    interleaved round by round; ratios are medians of the per-round ratios."""
    X, y = synthetic(n_rows)
    beta = lazy_beta(X.shape[1])
    mu = LAZY_MU
    train(X[:5000], y[:5000], "binary", ours_params(n_trees=2))  # compile outside the timing
    times, models = interleaved_times({
        "ours": lambda: train(X, y, "binary", ours_params()),
        "ours lazy": lambda: train(X, y, "binary", ours_params(mu, beta)),
        "lightgbm": lambda: lgb_train(X, y, lgb_params()),
        "lightgbm lazy": lambda: lgb_train(X, y, lgb_params(mu, beta)),
        # One-tree fits split a training's time into set-up (binning, first tree) and trees.
        "ours 1 tree": lambda: train(X, y, "binary", ours_params(n_trees=1)),
        "lightgbm 1 tree": lambda: lgb_train(X, y, lgb_params(), 1),
    }, rounds)
    per_tree_ms = {name: [1000 * (full - one) / 99 for full, one in
                          zip(times[name], times[f"{name} 1 tree"])]
                   for name in ("ours", "lightgbm")}
    model, peer = models["ours"], models["lightgbm"]
    Xp, _ = synthetic(1_000_000, seed=1)
    model.predict_raw(Xp[:1000])
    predict_times, _ = interleaved_times({
        "ours": lambda: model.predict_raw(Xp),
        "lightgbm": lambda: peer.predict(Xp, raw_score=True, num_threads=THREADS),
    }, rounds)
    median = {name: statistics.median(seconds) for name, seconds in times.items()}
    return {
        "rows": n_rows, "features": X.shape[1], "trees": 100, "leaves": 31, "rounds": rounds,
        "train_s_per_round": times, "predict_s_per_round": predict_times,
        "train_s_ours_mu0": median["ours"], "train_s_lightgbm_mu0": median["lightgbm"],
        "train_ratio_ours_over_lightgbm": median_ratio(times["ours"], times["lightgbm"]),
        "setup_s_ours": median["ours 1 tree"], "setup_s_lightgbm": median["lightgbm 1 tree"],
        "per_tree_ms_ours": statistics.median(per_tree_ms["ours"]),
        "per_tree_ms_lightgbm": statistics.median(per_tree_ms["lightgbm"]),
        "per_tree_ratio_ours_over_lightgbm": median_ratio(per_tree_ms["ours"],
                                                          per_tree_ms["lightgbm"]),
        "train_s_ours_lazy": median["ours lazy"], "train_s_lightgbm_lazy": median["lightgbm lazy"],
        "lazy_overhead_ours": median_ratio(times["ours lazy"], times["ours"]),
        "lazy_overhead_lightgbm": median_ratio(times["lightgbm lazy"], times["lightgbm"]),
        "lazy_features_used": len(models["ours lazy"].features_used()),
        "predict_rows": len(Xp),
        "predict_rows_per_s_ours": len(Xp) / statistics.median(predict_times["ours"]),
        "predict_rows_per_s_lightgbm": len(Xp) / statistics.median(predict_times["lightgbm"]),
        "predict_throughput_ratio_ours_over_lightgbm": median_ratio(predict_times["lightgbm"],
                                                                    predict_times["ours"]),
    }


_COUNTED_RUN = r"""
import os, sys
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path[:0] = [{benchmarks!r}, {repo!r}]
import numpy as np
from bench_core import LAZY_MU, lazy_beta, synthetic, ours_params, lgb_params, lgb_train
library, what, n_rows, n_trees = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
X, y = synthetic(n_rows)
mu, beta = (LAZY_MU, lazy_beta(X.shape[1])) if what == "lazy" else (0.0, None)
if library == "ours":
    from msclassify.cegb import train
    fit = lambda trees: train(X, y, "binary", ours_params(mu, beta, n_trees=trees))
else:
    fit = lambda trees: lgb_train(X, y, lgb_params(mu, beta), trees)
if what == "predict":
    model = fit(n_trees)
    Xp, _ = synthetic(int(sys.argv[5]), seed=1)
    if library == "ours":
        run = lambda rows: model.predict_raw(rows)
    else:
        run = lambda rows: model.predict(rows, raw_score=True, num_threads={threads})
    run(Xp[:1000])  # warm-up
    print("ready", flush=True)
    sys.stdin.readline()  # the parent switches instrumentation on
    run(Xp)
else:
    fit(2)  # warm-up (Numba's cache, LightGBM's first call)
    print("ready", flush=True)
    sys.stdin.readline()  # the parent switches instrumentation on
    fit(n_trees)
print("done", flush=True)
sys.stdin.readline()  # ... and off again
"""


def _instructions(code, *args):
    """Instructions executed by all threads of one counted run under callgrind.

    The child runs with instrumentation off (valgrind only translates, several
    times faster than counting); ``callgrind_control -i on`` switches it on for
    the run alone, so imports, data, warm-up and (for prediction) training are
    not counted.
    """
    child = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                              "--callgrind-out-file=/dev/null", sys.executable, "-c", code,
                              *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONHASHSEED="0"))
    for switch, expected in (("on", "ready"), ("off", "done")):
        line = child.stdout.readline().strip()
        if line != expected:
            child.kill()
            raise RuntimeError(f"callgrind run {args}: expected {expected!r}, got {line!r}:\n"
                               f"{child.stderr.read()[-2000:]}")
        subprocess.run(["callgrind_control", "-i", switch, str(child.pid)], check=True,
                       capture_output=True)
        child.stdin.write("\n")
        child.stdin.flush()
    _, stderr = child.communicate()
    found = re.search(r"Collected\s*:\s*(\d+)", stderr)
    if child.returncode or not found:
        raise RuntimeError(f"callgrind run {args} failed:\n{stderr[-2000:]}")
    return int(found.group(1))


def instruction_counts(n_rows=20_000, n_trees=10, predict_rows=100_000, predict_trees=100):
    """Instructions of fixed small runs, ours and LightGBM's, counted by callgrind.

    Three runs per library: training at mu = 0, training with the lazy per-sample
    costs of `speed` (``n_rows`` x 50, ``n_trees`` x 31 leaves), and predicting
    ``predict_rows`` rows with a ``predict_trees``-tree model (trained on the same
    ``n_rows``, not counted). Each count covers all threads of the process,
    during the counted run only.
    """
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return {"skipped": "valgrind (with callgrind_control) is not installed"}
    code = _COUNTED_RUN.format(benchmarks=str(REPO / "benchmarks"), repo=str(REPO),
                               threads=THREADS)
    counts = {}
    for library in ("ours", "lightgbm"):
        for what in ("train", "lazy"):
            counts[library, what] = _instructions(code, library, what, str(n_rows), str(n_trees))
        counts[library, "predict"] = _instructions(code, library, "predict", str(n_rows),
                                                   str(predict_trees), str(predict_rows))
    result = {"rows": n_rows, "features": 50, "trees": n_trees, "leaves": 31, "threads": THREADS,
              "lazy_mu": LAZY_MU, "predict_rows": predict_rows, "predict_trees": predict_trees}
    for library in ("ours", "lightgbm"):
        result[f"instructions_{library}"] = counts[library, "train"]
        result[f"instructions_{library}_lazy"] = counts[library, "lazy"]
        result[f"instructions_{library}_predict"] = counts[library, "predict"]
        result[f"lazy_overhead_instructions_{library}"] = (counts[library, "lazy"]
                                                           / counts[library, "train"])
    for what, key in (("train", ""), ("lazy", "_lazy"), ("predict", "_predict")):
        result[f"instructions{key}_ratio_ours_over_lightgbm"] = (counts["ours", what]
                                                                 / counts["lightgbm", what])
    result["tool"] = ("valgrind --tool=callgrind --instr-atstart=no, all threads, instrumented "
                      "during the counted run only (callgrind_control -i on/off)")
    return result


def real_sets():
    sets = {}
    tr, te = load_miniboone_tiny(SHARED_DATA, "train"), load_miniboone_tiny(SHARED_DATA, "test")
    sets["MiniBooNE tiny"] = (tr.X, tr.y, te.X, te.y)
    cov = load_covtype_20k(SHARED_DATA, positive_class=2)
    sets["Covertype 20k (2 vs rest)"] = tuple(train_test_split(cov.X, cov.y, test_size=0.25,
                                                               random_state=0, stratify=cov.y))
    sets["Covertype 20k (2 vs rest)"] = tuple(sets["Covertype 20k (2 vs rest)"][i]
                                              for i in (0, 2, 1, 3))
    tr, te = load_higgs_sample(SHARED_DATA, "train"), load_higgs_sample(SHARED_DATA, "test")
    sets["HIGGS sample"] = (tr.X, tr.y, te.X, te.y)
    return sets


def accuracy():
    rows = []
    for name, (Xtr, ytr, Xte, yte) in real_sets().items():
        n_features = Xtr.shape[1]
        beta = np.ones(n_features)
        for mu, alpha in ((0.0, 0.0), (0.01, 0.01)):
            model = train(Xtr, ytr, "binary", ours_params(mu, beta, alpha))
            peer = lgb_train(Xtr, ytr, lgb_params(mu, beta, alpha))
            p_ours = 1 / (1 + np.exp(-model.predict_raw(Xte)))
            p_lgb = peer.predict(Xte)
            cost = model.prediction_cost(Xte)
            rows.append({
                "data": name, "mu": mu, "alpha": alpha,
                "auc_ours": roc_auc_score(yte, p_ours), "auc_lightgbm": roc_auc_score(yte, p_lgb),
                "acc_ours": accuracy_score(yte, p_ours > 0.5),
                "acc_lightgbm": accuracy_score(yte, p_lgb > 0.5),
                "features_ours": len(model.features_used()),
                "features_lightgbm": int(np.sum(peer.feature_importance("split") > 0)),
                "mean_cost_ours": float(cost.per_sample.mean()),
            })
    return rows


def peak_memory(n_rows):
    """Peak RSS of a child process that builds X (float64) and trains 10 trees on it."""
    code = (
        "import resource, sys, numpy as np; sys.path.insert(0, %r)\n"
        "from bench_core import synthetic, ours_params\n"
        "from msclassify.cegb import train\n"
        "X, y = synthetic(2000); train(X, y, 'binary', ours_params(n_trees=2))\n"
        "X, y = synthetic(%d)\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "train(X, y, 'binary', ours_params(n_trees=10))\n"
        "print(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    ) % (str(__file__.rsplit("/", 1)[0]), n_rows)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    base_kb, peak_kb = map(int, out.stdout.split()[-2:])
    data_mb = n_rows * 50 * 8 / 2**20
    return {"rows": n_rows, "features": 50, "X_float64_mb": data_mb,
            "peak_rss_mb": peak_kb / 1024, "rss_before_training_mb": base_kb / 1024,
            "training_overhead_mb": (peak_kb - base_kb) / 1024}


def _print_instructions(ic):
    if "skipped" in ic:
        print(f"instruction counts skipped: {ic['skipped']}")
        return
    print(f"instructions (callgrind), training {ic['rows']}x{ic['features']}, {ic['trees']} trees; "
          f"predicting {ic['predict_rows']} rows with {ic['predict_trees']} trees:")
    print_table([{"run": run, "ours": ic[f"instructions_ours{key}"],
                  "LightGBM": ic[f"instructions_lightgbm{key}"],
                  "ratio": ic[f"instructions{key}_ratio_ours_over_lightgbm"]}
                 for run, key in (("train mu=0", ""), ("train lazy costs", "_lazy"),
                                  ("predict", "_predict"))], ["run", "ours", "LightGBM", "ratio"])
    print(f"lazy overhead in instructions: ours {ic['lazy_overhead_instructions_ours']:.2f}x, "
          f"LightGBM {ic['lazy_overhead_instructions_lightgbm']:.2f}x\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller data, one round")
    parser.add_argument("--no-callgrind", action="store_true",
                        help="skip the instruction counts (six processes under valgrind, about "
                             "15 minutes on an AMD EPYC)")
    parser.add_argument("--callgrind-only", action="store_true",
                        help="only the instruction counts (the load-independent measure), into "
                             "benchmarks/results/core_instructions.json")
    args = parser.parse_args()
    if args.callgrind_only:
        results = {"load_average_start": os.getloadavg()[0], "instructions": instruction_counts()}
        _print_instructions(results["instructions"])
        print(f"wrote {write_results('core_instructions', results)}")
        return
    n_rows, rounds = (50_000, 1) if args.quick else (200_000, 5)
    results = {"threads": THREADS, "load_average_start": os.getloadavg()[0]}
    start = time.perf_counter()
    results["speed"] = speed(n_rows, rounds)
    results["load_average_after_timings"] = os.getloadavg()[0]
    results["timings_wall_s"] = time.perf_counter() - start
    if not args.no_callgrind:
        results["instructions"] = instruction_counts()
    results["accuracy"] = accuracy()
    results["memory"] = peak_memory(200_000 if args.quick else 2_000_000)
    path = write_results("core" + ("_quick" if args.quick else ""), results)
    s = results["speed"]
    print(f"\n{machine()['cpu']}, {THREADS} threads, load average "
          f"{results['load_average_start']:.2f} at the start, "
          f"{results['load_average_after_timings']:.2f} after the timings")
    print(f"Training {s['rows']}x{s['features']}, 100 trees x 31 leaves (median of {rounds} "
          "interleaved rounds; ratios: median of the per-round ratios):")
    print_table([
        {"model": "ours mu=0", "train s": s["train_s_ours_mu0"]},
        {"model": "LightGBM mu=0", "train s": s["train_s_lightgbm_mu0"]},
        {"model": "ours lazy costs", "train s": s["train_s_ours_lazy"]},
        {"model": "LightGBM lazy costs", "train s": s["train_s_lightgbm_lazy"]},
    ], ["model", "train s"])
    print(f"ratio ours/LightGBM (mu=0): {s['train_ratio_ours_over_lightgbm']:.2f}; lazy overhead "
          f"ours {s['lazy_overhead_ours']:.2f}x, LightGBM {s['lazy_overhead_lightgbm']:.2f}x")
    print(f"set-up (binning or Dataset, and the first tree): ours {s['setup_s_ours']:.2f} s, "
          f"LightGBM {s['setup_s_lightgbm']:.2f} s; then per tree: ours "
          f"{s['per_tree_ms_ours']:.1f} ms, LightGBM {s['per_tree_ms_lightgbm']:.1f} ms "
          f"(ratio {s['per_tree_ratio_ours_over_lightgbm']:.2f})")
    print(f"predict {s['predict_rows']} rows: ours {s['predict_rows_per_s_ours']:.3g} rows/s, "
          f"LightGBM {s['predict_rows_per_s_lightgbm']:.3g} rows/s "
          f"(ratio {s['predict_throughput_ratio_ours_over_lightgbm']:.2f})\n")
    if "instructions" in results:
        _print_instructions(results["instructions"])
    print_table(results["accuracy"], ["data", "mu", "alpha", "auc_ours", "auc_lightgbm", "acc_ours",
                                      "acc_lightgbm", "features_ours", "features_lightgbm"])
    m = results["memory"]
    print(f"\npeak RSS training {m['rows']}x50: {m['peak_rss_mb']:.0f} MB "
          f"(X itself {m['X_float64_mb']:.0f} MB; training adds {m['training_overhead_mb']:.0f} MB)")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
