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

Before/after in the same run: ``--compare DIR`` runs the study alternately on the
msclassify checkout in DIR ("before", e.g. a worktree of the integration branch,
warmed with ``python -m msclassify._warmup``) and on this checkout ("after"), one
subprocess per run, so the machine's load hits both alike::

    git -C /work/main worktree add --detach /work/wt-before int
    PYTHONPATH=/work/wt-before python -m msclassify._warmup
    python benchmarks/study_gil.py --compare /work/wt-before --rounds 3
    NUMBA_NUM_THREADS=1 python benchmarks/study_gil.py --compare /work/wt-before --rounds 3

Without ``--compare`` it measures this checkout only (``--label`` names the run).
Results go to benchmarks/results/gil.json under ``numba_threads_<N>`` (with the
CPU model and load average of the run).
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np

from _common import RESULTS, command_line, machine, print_table, write_results


def gaps_while(work, tick_s, long_s=None):
    """Run ``work(set_stage)`` in a worker thread while this thread ticks every ``tick_s``.

    Returns ``{stage: [gap seconds, ...]}`` (the time between consecutive ticks,
    attributed to the stage current when the gap began), the work's wall time and,
    for every gap longer than ``long_s``, where the other threads (the worker and the
    feature bank's pool) were in msclassify when the main thread woke up: at or just
    past the code that held the GIL, or that kept the cores busy.
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

    gaps, suspects, main = {}, [], threading.get_ident()
    worker = threading.Thread(target=run, daemon=True)
    start = last = time.perf_counter()
    worker.start()
    while not done.is_set():
        current = stage[0]
        time.sleep(tick_s)
        now = time.perf_counter()
        gaps.setdefault(current, []).append(now - last)
        if long_s is not None and now - last > long_s:
            suspects.append({"stage": current, "gap_ms": round(1e3 * (now - last), 1),
                             "worker_at": _where(sys._current_frames(), main)})
        last = now
    worker.join()
    if failure:
        raise failure[0]
    return gaps, time.perf_counter() - start, suspects


def _where(frames, main, depth=2):
    """Per other thread in msclassify code, its innermost ``depth`` msclassify frames
    (``file:line function``), innermost first; threads joined by `` | ``."""
    threads = []
    for ident, frame in frames.items():
        found = []
        while ident != main and frame is not None and len(found) < depth:
            code = frame.f_code
            if "msclassify" in code.co_filename:
                name = code.co_filename.split("msclassify", 1)[1].lstrip("/")
                found.append(f"{name}:{frame.f_lineno} {code.co_name}")
            frame = frame.f_back
        if found:
            threads.append(" <- ".join(found))
    return threads


def fit_and_predict(image, labels, n_estimators):
    """The work of one study run: fit (stages from its progress reports), then predict."""
    from msclassify import PixelClassifier

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


def measure(code, tick_s, n_estimators, repeats):
    """``repeats`` runs of fit + predict with msclassify imported from ``code``."""
    sys.path.insert(0, code)
    import msclassify
    from msclassify import PixelClassifier
    from _real_data import load_fly_masks_dev
    assert os.path.dirname(os.path.dirname(msclassify.__file__)) == os.path.abspath(code), \
        msclassify.__file__
    data = load_fly_masks_dev(test_limit=0)
    image, labels = data["train_images"][0], data["train_labels"][0]
    # warm-up: loads (or compiles) every kernel first
    PixelClassifier(n_estimators=3, random_state=0).fit(image, labels).predict(image[:256, :256])
    runs = []
    for _ in range(repeats):
        gaps, wall, suspects = gaps_while(fit_and_predict(image, labels, n_estimators), tick_s,
                                          long_s=tick_s + 0.006)
        runs.append({"wall_s": round(wall, 3), "stages": summarise(gaps, tick_s),
                     "long_gaps": suspects,
                     "load_average": [round(x, 2) for x in os.getloadavg()]})
    return {"code": os.path.abspath(code), "commit": _commit(code),
            "frame": int(data["train_ids"][0]), "image_shape": list(image.shape), "runs": runs}


def _commit(code):
    result = subprocess.run(["git", "-C", code, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True)
    return result.stdout.strip() or None


def worst_of(runs):
    """Per stage, the worst longest gap and the worst p99 over the runs."""
    worst = {}
    for run in runs:
        for row in run["stages"]:
            kept = worst.setdefault(row["stage"], {"stage": row["stage"], "max_gap_ms": 0.0,
                                                   "p99_gap_ms": 0.0, "runs": 0})
            kept["max_gap_ms"] = max(kept["max_gap_ms"], row["max_gap_ms"])
            kept["p99_gap_ms"] = max(kept["p99_gap_ms"], row["p99_gap_ms"])
            kept["runs"] += 1
    return list(worst.values())


def rounds(args, checkouts, child, records):
    """Alternate the checkouts' runs (order reversed every other round); print each run."""
    for round_ in range(args.rounds if args.compare else 1):
        for name, code in list(checkouts.items())[::1 if round_ % 2 == 0 else -1]:
            result = child(code)
            record = records.setdefault(name, dict(result, runs=[]))
            record["runs"] += result["runs"]
            for run in result["runs"]:
                print(f"{name} ({result['commit']}): {run['wall_s']:.2f} s, "
                      f"load {run['load_average']}")
                print_table(run["stages"], ["stage", "ticks", "seconds", "max_gap_ms",
                                            "p99_gap_ms", "stall_share"])
                for gap in run["long_gaps"]:
                    print(f"  gap {gap['gap_ms']} ms in {gap['stage']}, worker then at "
                          f"{' | '.join(gap['worker_at'])}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after",
                        help="name of this checkout's runs in gil.json (without --compare)")
    parser.add_argument("--compare", metavar="DIR",
                        help="msclassify checkout measured as 'before', alternating with this one")
    parser.add_argument("--rounds", type=int, default=3, help="before/after alternations")
    parser.add_argument("--tick", type=float, default=5.0, help="main-thread tick, ms")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of fit+predict per process")
    parser.add_argument("--n-estimators", type=int, default=50)
    parser.add_argument("--busy", type=int, default=0,
                        help="CPU-bound processes kept running meanwhile (a busy box)")
    parser.add_argument("--child", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    tick_s = args.tick / 1e3
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args.child:
        print(json.dumps(measure(args.child, tick_s, args.n_estimators, args.repeats)))
        return

    def child(code):
        out = subprocess.run([sys.executable, __file__, "--child", code, "--tick", str(args.tick),
                              "--repeats", str(args.repeats), "--n-estimators",
                              str(args.n_estimators)], capture_output=True, text=True, check=True)
        return json.loads(out.stdout.splitlines()[-1])

    checkouts = {args.label: here} if not args.compare else {"before": args.compare,
                                                             "after": here}
    records = {}
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(args.busy)]
    try:
        rounds(args, checkouts, child, records)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    threads = os.environ.get("NUMBA_NUM_THREADS", str(os.cpu_count()))
    key = f"numba_threads_{threads}_busy_{args.busy}"
    path = RESULTS / "gil.json"
    stored = json.loads(path.read_text())["results"] if path.exists() else {}
    stored[key] = {"command": command_line(), "machine": machine(), "tick_ms": args.tick,
                   "numba_threads": int(threads), "busy_processes": args.busy,
                   "n_estimators": args.n_estimators,
                   **{name: dict(record, worst=worst_of(record["runs"]))
                      for name, record in records.items()}}
    write_results("gil", stored, command="python benchmarks/study_gil.py (see each entry)")
    print(f"\nworst per stage over the runs (tick {args.tick} ms, NUMBA_NUM_THREADS {threads}, "
          f"{args.busy} busy processes, load {stored[key]['machine']['load_average']}, "
          f"{stored[key]['machine']['cpu']})")
    rows = {}
    for name in records:
        for row in stored[key][name]["worst"]:
            entry = rows.setdefault(row["stage"], {"stage": row["stage"]})
            entry[f"{name}_max_ms"] = row["max_gap_ms"]
            entry[f"{name}_p99_ms"] = row["p99_gap_ms"]
    print_table(list(rows.values()), ["stage"] + [f"{name}_{what}_ms" for what in ("max", "p99")
                                                  for name in records])


if __name__ == "__main__":
    main()
