"""Training time of PixelClassifier.fit per stage: 2 and 4 classes, a 1024² fly frame and an RGB photo.

Run: ``python benchmarks/bench_training.py [--rounds 3] [--cases fly-2 fly-4 larvae-2 larvae-4]
[--variants default auto] [--threads N] [--ref PATH [--ref-variants default auto]]
[--out NAME]``. Writes
benchmarks/results/training.json (or NAME.json) and prints one table.

Frames and scribbles (real images, ``benchmarks/_real_data.py``)
-----------------------------------------------------------------
``fly-2``
    fly_masks_dev frame 0 (1024x1024 uint8) with the user's scribbles (2 classes).
``fly-4``
    fly_masks_dev test frame 150 (1024x1024) with `balanced_scribbles` drawn from a
    4-class map of its mask: background far from the flies, background within 10 px
    of a fly, the outer 3 px of each fly, the rest of the fly.
``larvae-2``
    fly_larvae_dev img_1 (1380x925 RGB) with `balanced_scribbles` (larva / background).
``larvae-4``
    the same photo, 4 classes: dark tray, feed (brighter than the tray), the outer
    3 px of each larva, the rest of the larva.
``photo-4``
    the 4-class photo of ``bench_napari.py`` (top-left 512x384 of img_1, tray / larva / feed /
    rim scribbles, `bench_napari.larvae_photo`): what its "4 classes: Train" row fits in the
    real window.

The 4-class maps are made for timing (the classes are drawn on real frames, but
only the 2-class ones are what a lab would segment).

Variants: ``default`` = ``PixelClassifier(random_state=0)``; ``auto`` = the same
with ``cost_tradeoff="auto"``; ``no-distill`` = ``distill_weight=0``;
``no-balance`` = ``class_weight=None``; ``balanced`` = ``class_weight="balanced"``;
``teacher-stride-1`` = ``teacher_stride=1`` (the teacher predicts every pixel of the frame for
its class map, the default before its coarse-to-fine map); ``all-features`` = ``colsample=1.0``
(every tree draws from all features; the default before ``colsample=None``, which draws half of
them per tree with more than two classes); ``teacher-boost`` / ``teacher-mean`` = the boosted
teacher alone / the mean of the boosted and the extra-trees teacher (``teacher="mean"``);
``teacher-all-rounds`` = ``teacher_estimators=50`` (the boosted teacher grows as many rounds
as the model whatever the classes, as before ``teacher_estimators=None`` gave it
``round(2 * 50 / K)`` with K > 2 classes); ``teacher-context`` = ``teacher_context=True`` (the
teacher also reads the bank's level-1/2 filters bilinearly; docs/scribbles.md section 19);
``teacher-snap-mean`` = ``teacher_context="snap", teacher="mean"`` (the context teacher's
regions with the plain teacher's outlines, both mean teachers; section 22);
``teacher-blend`` = ``teacher="blend"`` (the boosted teacher near the scribbles, the extra-trees
teacher far from them; section 24);
``omp-spin`` = the default with
``GOMP_SPINCOUNT=300000`` (libgomp's own default: idle OpenMP threads spin about 3 ms after
each parallel kernel, as before msclassify set ``GOMP_SPINCOUNT=3000``); ``live-4`` = the
napari widget's live-update model for 4 classes (``features="fine"``, ``cost_tradeoff=2e-4``, 10
rounds, 4,096 cost pixels, no teacher, half the features per tree): its ``model`` stage is what
a live retrain costs once the frame's features are cached. ``--ref PATH`` runs the variants
(those of ``--ref-variants``, else every one) with the checkout at PATH too (``ref VARIANT``).

``accuracy`` (4-class cases) is, on the pixels not scribbled and after the timing, the
pixel accuracy of the fitted model's prediction against the 4-class map (fly-4,
larvae-4) or its larva pixel F1 against the real larva mask of the crop (photo-4, photo-4-clicks).

What is measured
----------------
Each fit runs in a fresh process (so peak RSS is its own and no feature cache is
shared) after a tiny warm-up fit (Numba kernels loaded, as in a running session); the
stage times come from ``fit(progress=...)`` (the elapsed time at
each stage change): features, teacher, distillation (teacher labelling pixels),
model (or the fits of the μ path: up to 4 and the refit), as process CPU time per stage (the
table) and wall time (the JSON; the table too for the teacher and the model unless
``--threads 1``). ``wall s`` is the whole fit, ``cpu s`` its process CPU time
(all threads): on a shared box the wall time mostly measures the other users, and
with ``--threads 1`` the CPU time is what the fit takes on one idle core. Rounds interleave cases and variants. The CPU
model and load average are recorded: the box has 2 cores and is shared, so
compare variants within a round (ratios), not across runs.
"""

import argparse
import inspect
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import msclassify  # noqa: F401  (before _common puts this checkout first: --ref runs another)
from _common import REPO, cpu_model, print_table, write_results

CASES = ("fly-2", "fly-4", "larvae-2", "larvae-4", "photo-4", "photo-4-clicks")
VARIANTS = {"default": {}, "auto": {"cost_tradeoff": "auto"},
            "no-distill": {"distill_weight": 0.0}, "no-balance": {"class_weight": None},
            "balanced": {"class_weight": "balanced"}, "teacher-stride-1": {"teacher_stride": 1},
            "all-features": {"colsample": 1.0}, "omp-spin": {},
            "teacher-boost": {"teacher": "boost"}, "teacher-mean": {"teacher": "mean"},
            # the teacher's rounds before they depended on the classes (section 18)
            "teacher-all-rounds": {"teacher_estimators": 50},
            "teacher-context": {"teacher_context": True},
            "teacher-snap-mean": {"teacher_context": "snap", "teacher": "mean"},
            "teacher-blend": {"teacher": "blend"},
            # the napari widget's live-update model with 4 classes
            # (ClassifierSettings().for_live_update(4) of plugins/msclassify_napari/_controller.py)
            "live-4": {"features": "fine", "cost_tradeoff": 2e-4, "n_estimators": 10,
                       "n_cost_samples": 4096, "distill_weight": 0.0, "colsample": 0.5}}
# Variants that differ from the default in the fit's environment only.
VARIANT_ENV = {"omp-spin": {"GOMP_SPINCOUNT": "300000"}}


def four_classes(object_mask, far):
    """Class map: 1 = ``far`` background, 2 = other background, 3 = object rim (3 px), 4 = core."""
    from scipy import ndimage as ndi
    core = ndi.binary_erosion(object_mask, iterations=3)
    out = np.where(far, 1, 2).astype(np.uint8)
    out[object_mask] = 3
    out[core] = 4
    return out


def case_data(case, truth=False, draw=0):
    """``(image, labels)`` of a case (see the module docstring); with ``truth``
    ``(image, labels, truth)``: the class map of fly-4 and larvae-4, the larva mask of
    photo-4, None for the 2-class cases. ``draw`` > 0 draws other scribbles on fly-4 and
    larvae-4 (seed + 1000 x draw; the other cases have one set of scribbles)."""
    from scipy import ndimage as ndi
    from _real_data import (balanced_scribbles, load_fly_larvae_dev, load_fly_masks_dev,
                            larvae_instances, LARVAE_DIR, _read_png)
    if case == "fly-2":
        data = load_fly_masks_dev(test_limit=1)
        return (data["train_images"][0], data["train_labels"][0]) + ((None,) if truth else ())
    if case == "fly-4":
        data = load_fly_masks_dev(test_limit=1)
        flies = data["test_masks"][0] > 0
        far = ~ndi.binary_dilation(flies, iterations=10)
        classes = four_classes(flies, far)
        return (data["test_images"][0], balanced_scribbles(classes, seed=1000 * draw)) + (
            (classes,) if truth else ())
    if case in ("photo-4", "photo-4-clicks"):
        from bench_napari import larvae_photo
        photo, larvae, scribbles = larvae_photo(
            style="clicks" if case == "photo-4-clicks" else "strokes")
        return (photo, scribbles) + ((larvae,) if truth else ())
    data = load_fly_larvae_dev("balanced")
    image = data["train_images"][0]
    if case == "larvae-2":
        return (image, data["train_labels"][0]) + ((None,) if truth else ())
    larvae = larvae_instances(_read_png(LARVAE_DIR / "img_1_mask.png")) > 0
    grey = image.mean(axis=2)
    far = grey < np.percentile(grey[~larvae], 50)          # the darker half: tray
    classes = four_classes(larvae, far)
    return (image, balanced_scribbles(classes, seed=1 + 1000 * draw)) + (
        (classes,) if truth else ())


def warm_up(image, labels, params):
    """One tiny fit like the measured one (channels, classes, variant): loads the Numba
    kernels from their cache, so the timing is that of a Train in a running session."""
    from msclassify.pixel import PixelClassifier
    classes = np.unique(labels[labels > 0])
    small = np.ascontiguousarray(image[:96, :96])
    stripes = np.zeros((96, 96), np.uint8)
    for k, value in enumerate(classes):
        stripes[4 + 20 * k:10 + 20 * k, 4:92] = value
    PixelClassifier(**dict(params, random_state=0, n_estimators=2)).fit(small, stripes)


def case_accuracy(model, image, labels, truth):
    """Over the pixels not scribbled: pixel accuracy against the 4-class map, or (photo-4)
    larva pixel F1 against the real mask (larva is class 2); None without ``truth``."""
    if truth is None:
        return None
    predicted, unlabelled = model.predict(image), labels == 0
    if truth.dtype == bool:
        hit = predicted == 2
        return float(2 * np.sum(hit & truth & unlabelled)
                     / (np.sum(hit & unlabelled) + np.sum(truth & unlabelled)))
    return float(np.mean(predicted[unlabelled] == truth[unlabelled]))


def run_one(case, variant):
    """Fit once (in this process) and return the measurements as a dict."""
    from msclassify.pixel import PixelClassifier
    image, labels, truth = case_data(case, truth=True)
    warm_up(image, labels, VARIANTS[variant])
    reports = []
    model = PixelClassifier(random_state=0, **VARIANTS[variant])
    cpu, wall = time.process_time(), time.perf_counter()
    cpu_marks = []

    def record(report):
        reports.append(report)
        cpu_marks.append((report.stage, time.process_time()))
    if "progress" in inspect.signature(model.fit).parameters:
        model.fit(image, labels, progress=record)
    else:                                                   # --ref: code without stages
        model.fit(image, labels)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stages, starts = {}, {}
    for report in reports:
        name = "model" if report.stage.startswith("μ path") else report.stage
        key = report.stage
        starts.setdefault(key, report.elapsed_s)
        stages[name] = stages.get(name, 0.0)
    order = [r.stage for r in reports]
    keys = list(dict.fromkeys(order))
    for key, following in zip(keys, keys[1:] + [None]):
        end = starts[following] if following else wall
        name = "model" if key.startswith("μ path") else key
        if key != "done":
            stages[name] = stages.get(name, 0.0) + end - starts[key]
    stages.pop("done", None)
    stages_cpu = {}
    for (stage, start), (_, end) in zip(cpu_marks, cpu_marks[1:]):
        name = "model" if stage.startswith("μ path") else stage
        stages_cpu[name] = stages_cpu.get(name, 0.0) + end - start
    counts = np.bincount(labels.ravel())[1:]
    accuracy = case_accuracy(model, image, labels, truth)    # after the timing
    return {"accuracy": accuracy, "case": case, "variant": variant, "wall s": wall, "cpu s": cpu,
            "peak RSS MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "stages": stages, "stages cpu": stages_cpu, "classes": int((counts > 0).sum()),
            "labelled px": int(counts.sum()), "shape": list(image.shape),
            "cost_tradeoff": model.cost_tradeoff_, "n features": len(model.features_used_)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--variants", nargs="+", default=["default", "auto"],
                        choices=list(VARIANTS))
    parser.add_argument("--threads", type=int, default=None,
                        help="NUMBA_NUM_THREADS of the fits (default: as set, else all cores)")
    parser.add_argument("--ref", metavar="PATH", default=None,
                        help="also time variants with the msclassify checkout at PATH "
                             "(e.g. a worktree of main), as variants 'ref VARIANT'")
    parser.add_argument("--ref-variants", nargs="+", choices=list(VARIANTS),
                        help="the variants to time at --ref (default: those of --variants)")
    parser.add_argument("--out", default="training",
                        help="results file name in benchmarks/results (without .json)")
    parser.add_argument("--one", nargs=2, metavar=("CASE", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(*args.one)))
        return
    env = dict(os.environ)
    if args.threads:
        env["NUMBA_NUM_THREADS"] = str(args.threads)
    load_start = os.getloadavg()
    runs = []
    variants = args.variants + ([f"ref {v}" for v in args.ref_variants or args.variants]
                                if args.ref else [])
    pairs = [(c, v) for c in args.cases for v in variants]
    for r in range(args.rounds):
        for case, variant in pairs[r % len(pairs):] + pairs[:r % len(pairs)]:
            run_env = dict(env)
            if variant.startswith("ref "):
                run_env["PYTHONPATH"] = str(Path(args.ref).resolve())
            run_env.update(VARIANT_ENV.get(variant.replace("ref ", ""), {}))
            out = subprocess.run([sys.executable, __file__, "--one", case,
                                  variant.replace("ref ", "")], env=run_env,
                                 capture_output=True, text=True, cwd=REPO / "benchmarks")
            if out.returncode:
                raise RuntimeError(f"{case} {variant} failed:\n{out.stderr}")
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row["round"], row["load"], row["variant"] = r, os.getloadavg()[0], variant
            runs.append(row)
            print(f"round {r + 1}: {case} {variant}: {row['wall s']:.2f} s wall, "
                  f"{row['cpu s']:.2f} s cpu, accuracy {row.get('accuracy')}, stages " + ", ".join(
                      f"{k} {v:.2f}" for k, v in row["stages"].items()), flush=True)
    table = []
    for case, variant in pairs:
        mine = [row for row in runs if row["case"] == case and row["variant"] == variant]
        stage_names = list(dict.fromkeys(k for row in mine for k in row["stages"]))
        entry = {"case": case, "variant": variant, "classes": mine[0]["classes"],
                 "wall s": statistics.median(row["wall s"] for row in mine),
                 "cpu s": statistics.median(row["cpu s"] for row in mine),
                 "peak RSS MB": max(row["peak RSS MB"] for row in mine),
                 "accuracy": statistics.median(row["accuracy"] for row in mine)
                 if mine[0].get("accuracy") is not None else None,
                 "cost_tradeoff": " ".join(sorted({f"{row['cost_tradeoff']:g}" for row in mine}))}
        for stage in stage_names:
            entry[f"{stage} cpu s"] = statistics.median(row.get("stages cpu", {}).get(stage, 0.0)
                                                        for row in mine)
            entry[f"{stage} wall s"] = statistics.median(row["stages"].get(stage, 0.0)
                                                         for row in mine)
        base_variant = "ref default" if variant.startswith("ref ") else "default"
        if variant != base_variant and base_variant in variants:
            base = [row for row in runs if row["case"] == case and row["variant"] == base_variant]
            entry["x default (wall, per round)"] = statistics.median(
                a["wall s"] / b["wall s"] for a, b in zip(mine, base))
            entry["x default (cpu, per round)"] = statistics.median(
                a["cpu s"] / b["cpu s"] for a, b in zip(mine, base))
        table.append(entry)
    columns = ["case", "variant", "classes", "accuracy", "wall s", "cpu s", "features cpu s",
               "teacher cpu s", "distillation cpu s", "model cpu s", "x default (wall, per round)",
               "x default (cpu, per round)", "cost_tradeoff", "peak RSS MB"]
    if env.get("NUMBA_NUM_THREADS") != "1":     # threads: where the wall time goes too
        columns[10:10] = ["teacher wall s", "model wall s"]
    print_table(table, columns)
    results = {"cpu": cpu_model(), "load_average_start": load_start,
               "load_average_end": os.getloadavg(), "threads": env.get("NUMBA_NUM_THREADS"),
               "rounds": args.rounds, "table": table, "runs": runs}
    path = write_results(args.out, results)
    print(f"CPU {results['cpu']}; load {load_start[0]:.2f} at start, "
          f"{results['load_average_end'][0]:.2f} at end; wrote {path}")


if __name__ == "__main__":
    main()
