"""How long does training / predicting in a worker thread hold Python's GIL?

The napari plugin trains and predicts in worker threads; the window still freezes
whenever that work holds the GIL for long (a Numba kernel compiled without
``nogil=True`` keeps it for its whole run, so does a long pure-Python loop). This
study reproduces that without Qt: `PixelClassifier().fit` on a real 1024x1024 fly
frame with its user scribbles (fly_masks_dev), then ``predict`` on the same frame,
runs in a worker thread while the main thread ticks every ``--tick`` ms
(``time.sleep``), as an event loop would. A gap between two ticks much longer
than the tick is time the main thread could not run: the GUI's stall.

Per stage (the ``progress=`` reports of fit: features, teacher, distillation,
model; then predict) it records the longest gap and the 99th percentile of the
gaps, attributed to the stage running when the gap began. A warm-up fit and
predict on a crop run first so compilation is not measured.

Usage::

    python benchmarks/study_gil.py --label before     # writes benchmarks/results/gil.json
    python benchmarks/study_gil.py --label after      # adds/overwrites its label there

Each label keeps its own machine record (CPU model, load average).
"""

import argparse
import json
import os
import threading
import time

import numpy as np

from _common import RESULTS, command_line, machine, print_table, write_results
from _real_data import load_fly_masks_dev

from msclassify import PixelClassifier


def gaps_while(work, tick_s):
    """Run ``work(set_stage)`` in a worker thread while this thread ticks every ``tick_s``.

    Returns ``{stage: [gap seconds, ...]}`` (the time between consecutive ticks,
    attributed to the stage current when the gap began) and the work's wall time.
    """
    stage = ["start"]
    done = threading.Event()
    failure = []

    def run():
        try:
            work(lambda name: stage.__setitem__(0, name))
        except BaseException as error:      # re-raised in the main thread below
            failure.append(error)
        finally:
            done.set()

    gaps = {}
    worker = threading.Thread(target=run, daemon=True)
    start = last = time.perf_counter()
    worker.start()
    while not done.is_set():
        current = stage[0]
        time.sleep(tick_s)
        now = time.perf_counter()
        gaps.setdefault(current, []).append(now - last)
        last = now
    worker.join()
    if failure:
        raise failure[0]
    return gaps, time.perf_counter() - start


def fit_and_predict(image, labels, n_estimators):
    """The work of one study run: fit (stages from its progress reports), then predict."""
    def work(set_stage):
        model = PixelClassifier(n_estimators=n_estimators, random_state=0)
        model.fit(image, labels, progress=lambda report: set_stage(report.stage))
        set_stage("predict")
        model.predict(image)
        set_stage("done")
    return work


def summarise(gaps, tick_s):
    rows = []
    for stage, values in gaps.items():
        if stage == "done" or not values:
            continue
        values = np.asarray(values)
        rows.append({"stage": stage, "ticks": int(values.size),
                     "seconds": round(float(values.sum()), 3),
                     "max_gap_ms": round(1e3 * float(values.max()), 1),
                     "p99_gap_ms": round(1e3 * float(np.percentile(values, 99)), 1),
                     "stall_share": round(float(np.clip(values - tick_s, 0, None).sum()
                                                / values.sum()), 3)})
    everything = np.concatenate([np.asarray(v) for v in gaps.values()])
    rows.append({"stage": "all", "ticks": int(everything.size),
                 "seconds": round(float(everything.sum()), 3),
                 "max_gap_ms": round(1e3 * float(everything.max()), 1),
                 "p99_gap_ms": round(1e3 * float(np.percentile(everything, 99)), 1),
                 "stall_share": round(float(np.clip(everything - tick_s, 0, None).sum()
                                            / everything.sum()), 3)})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="current",
                        help="name of this run in gil.json (e.g. before / after)")
    parser.add_argument("--tick", type=float, default=5.0, help="main-thread tick, ms")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs of fit+predict; per stage the worst max and p99 are kept")
    parser.add_argument("--n-estimators", type=int, default=50)
    args = parser.parse_args()
    tick_s = args.tick / 1e3

    data = load_fly_masks_dev(test_limit=0)
    image, labels = data["train_images"][0], data["train_labels"][0]
    # warm-up on a crop holding both classes: compiles (or loads) every kernel first
    PixelClassifier(n_estimators=3, random_state=0).fit(image, labels).predict(image[:256, :256])

    runs = []
    for _ in range(args.repeats):
        gaps, wall = gaps_while(fit_and_predict(image, labels, args.n_estimators), tick_s)
        runs.append({"wall_s": round(wall, 3), "stages": summarise(gaps, tick_s)})
        print(f"run {len(runs)}: {wall:.2f} s")
        print_table(runs[-1]["stages"],
                    ["stage", "ticks", "seconds", "max_gap_ms", "p99_gap_ms", "stall_share"])
    worst = {}
    for run in runs:
        for row in run["stages"]:
            kept = worst.setdefault(row["stage"], {"stage": row["stage"], "max_gap_ms": 0.0,
                                                   "p99_gap_ms": 0.0})
            kept["max_gap_ms"] = max(kept["max_gap_ms"], row["max_gap_ms"])
            kept["p99_gap_ms"] = max(kept["p99_gap_ms"], row["p99_gap_ms"])

    record = {"command": command_line(), "machine": machine(),
              "numba_num_threads": os.environ.get("NUMBA_NUM_THREADS"),
              "tick_ms": args.tick, "frame": int(data["train_ids"][0]),
              "image_shape": list(image.shape), "n_estimators": args.n_estimators,
              "worst": list(worst.values()), "runs": runs}
    path = RESULTS / "gil.json"
    labels_so_far = json.loads(path.read_text())["results"] if path.exists() else {}
    labels_so_far[args.label] = record
    write_results("gil", labels_so_far)
    print(f"\n{args.label}: worst over {args.repeats} runs "
          f"(tick {args.tick} ms, load {record['machine']['load_average']}, "
          f"{record['machine']['cpu']})")
    print_table(record["worst"], ["stage", "max_gap_ms", "p99_gap_ms"])
    compared = [name for name in ("before", "after") if name in labels_so_far]
    if len(compared) == 2:
        rows = {}
        for name in compared:
            for row in labels_so_far[name]["worst"]:
                entry = rows.setdefault(row["stage"], {"stage": row["stage"]})
                entry[f"{name}_max_ms"] = row["max_gap_ms"]
                entry[f"{name}_p99_ms"] = row["p99_gap_ms"]
        print("\nbefore vs after")
        print_table(list(rows.values()), ["stage", "before_max_ms", "after_max_ms",
                                          "before_p99_ms", "after_p99_ms"])


if __name__ == "__main__":
    main()
