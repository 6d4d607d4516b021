"""Volumes: accuracy and speed of 3D models on real stacks, and scaling with the voxel count.

Run: ``python benchmarks/bench_volumes.py [--repeats 2] [--sets isbi2012_em stardist_3d]
[--scaling 5 10 20 40]``. Writes benchmarks/results/volumes.json (``--quick``:
volumes_quick.json; one set only: volumes_<set>.json) and prints one table per set and
the scaling table.

Sets (``benchmarks/_real_data.py``)
-----------------------------------
isbi2012_em
    The 15 EM slices as a serial-section volume, 4 nm in x/y and 50 nm in z
    (spacing (50, 4, 4)). Trained on the volume of slices 0-4 with
    ``em_scribbles`` on each slice, tested on the volume of slices 5-14 (the test
    volume is never seen in training, not even unlabelled). Metrics as in
    bench_accuracy.py: membrane F1, pixel accuracy and SEG of the cells per slice
    (4-connected interior).
stardist_3d
    ``stardist_wheel/img3d.tif`` (31x61x57) with ``nuclei_scribbles`` on slices
    7, 15 and 23, treated as isotropic; 3D SEG of all 51 nuclei over the whole
    volume (6-connected components of the nucleus class, `label_instances`' default for
    volumes; SEG 26-conn: 26-connected).

Methods
-------
* ``ours 3D``: ``PixelClassifier(spacing=..., random_state=0)``, defaults otherwise;
  ``ours 3D mu=0`` the same with ``cost_tradeoff=0`` (plain boosting on the 3D bank),
  ``ours 3D auto`` with ``cost_tradeoff="auto"`` (held out by labelled slice).
* ``ours per-slice``: ``PixelClassifier(random_state=0)`` on the slices as 2D frames.
* ``skimage 3D + RF``: ``multiscale_basic_features`` on the volume (3D, isotropic
  sigma 1-16 in voxels: scikit-image has no spacing) + RandomForest(50, depth 10),
  scikit-image's recipe in 3D.
* ``skimage per-slice + RF``: the 2D recipe of bench_accuracy.py slice by slice.

``--spread 0 1 2 3 4`` (stardist_3d only; into volumes_spread.json) fits ``ours 3D``,
``ours 3D mu=0`` and ``skimage 3D + RF`` for each model seed (``random_state`` of ours and of
the forest) on the committed scribbles, and at the first seed with the three scribbled slices
shifted by each of ``--slice-shifts`` (default -2 -1 1 2), and prints the mean, sd, min and max
of each method's 3D SEG and of ours minus the recipe's: how much of a SEG difference on this
51-nucleus stack is the seed and the scribbles' placement.
``--grid`` fits every seed at every shift (the seeds are each placement's run-to-run noise;
μ = 0 left out) and prints, per placement, the mean and sd over the seeds of each method's SEG and
of its gap to the recipe; ``--variant teacher=forest`` (repeatable, ``K=V[,K=V]``) adds a model of
ours with those parameters (``features=default+up``: `upsampled_bank`; into
volumes_spread[_grid][_<variants>].json).

Timing: ``s/volume`` is the wall time of predicting the whole test volume,
features included, after one warm-up call; methods interleaved, the order
rotating per round; median over rounds. ``--scaling`` predicts EM volumes of
512x512 slices (the 15 slices repeated, mirrored) with the 3D model, each size
in a fresh process, and records time and the peak resident memory of the prediction
(``VmHWM`` reset before it) next to the memory held before it (``--sets`` with no
name: only the scaling run, into volumes_scaling.json).

``--train-memory`` (into volumes_train_memory.json) fits the default 3D model on crops of the
real volumes (``TRAIN_MEMORY_CASES``: the EM volume scribbled on slices 0-4, 8 or 16 slices of
256² or 512²; the nuclei stack as it is and mirror-tiled to 256² and 512² slices, scribbled on
slices 7, 15, 23), each in its own process, and records the fit's peak RSS above the memory
held before it, wall and CPU time, and the sha1 of the model file and of its prediction;
``--compare /work/main`` runs another checkout's package alternately on the same crops (the
hashes say whether the models are the same), ``--threads`` sets ``NUMBA_NUM_THREADS`` (1 by
default; others into volumes_train_memory_threads<N>.json). The slope of the peak over a
set's crops is the bytes per crop voxel.

``--chunked 40 160 320`` (with ``--sets`` and ``--scaling`` empty: into
volumes_chunked.json) writes such EM volumes as OME-Zarr (in a temporary folder) and
predicts each, in its own process under an address-space limit (``--memory-limit``
MiB, ``RLIMIT_AS``: what ``ulimit -v`` sets), twice: ``in memory`` (the volume read
whole, ``model.predict``; refused with a MemoryError when it cannot fit) and
``chunked`` (``predict_to_store`` into OME-Zarr labels, chunks of ``--chunk`` voxels a
side: what ``msclassify predict VOL.zarr --axes zyx --chunks C -o OUT.zarr`` runs, I/O
included), interleaved per size; the chunked labels are checked equal to the in-memory
ones where both ran.
"""

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from _common import REPO, cpu_model, print_table, write_results
from _real_data import (INTERIOR, MEMBRANE, NUCLEUS, em_classes, em_scribbles, EM_DIR, EM_TEST,
                        EM_TRAIN, _read_png, load_stardist_3d, nuclei_scribbles)

from msclassify.metrics import label_instances, seg_score
from msclassify.pixel import PixelClassifier

EM_SPACING = (50.0, 4.0, 4.0)


# --------------------------------------------------------------------------------- methods

class Ours3D:
    def __init__(self, spacing, seed=0, **params):
        self.spacing, self.params, self.seed = spacing, params, seed
        self.name = "ours 3D" + "".join(f" mu={v:g}" if v != "auto" else " auto"
                                        for k, v in params.items() if k == "cost_tradeoff")

    def fit(self, volume, labels):
        self.model = PixelClassifier(random_state=self.seed, spacing=self.spacing,
                                     **self.params).fit(volume, labels)

    def predict(self, volume):
        return self.model.predict(volume)

    def predict_proba(self, volume):
        return self.model.predict_proba(volume)

    def describe(self, volume):
        cost = self.model.prediction_cost(volume)
        return {"node evals/voxel": cost.evaluation / self.model.split_cost / volume.size,
                "feature ops/voxel": cost.features / volume.size,
                "n features": len(self.model.features_used_),
                "features used": list(self.model.features_used_),
                "pyramid": self.model.bank_.grid.describe()}


class OursPerSlice:
    name = "ours per-slice"

    def fit(self, volume, labels):
        self.model = PixelClassifier(random_state=0).fit(volume, labels)

    def predict(self, volume):
        return np.stack([self.model.predict(plane) for plane in volume])

    def describe(self, volume):
        costs = [self.model.prediction_cost(plane) for plane in volume]
        return {"node evals/voxel": sum(c.evaluation for c in costs) / self.model.split_cost
                / volume.size,
                "feature ops/voxel": sum(c.features for c in costs) / volume.size,
                "n features": len(self.model.features_used_),
                "features used": list(self.model.features_used_)}


def _skimage_features(image):
    from skimage.feature import multiscale_basic_features
    return multiscale_basic_features(image, intensity=True, edges=False, texture=True,
                                     sigma_min=1, sigma_max=16)


class SkimageRF:
    """scikit-image's trainable-segmentation recipe, in 3D or slice by slice."""

    def __init__(self, per_slice, seed=0):
        self.per_slice, self.seed = per_slice, seed
        self.name = "skimage per-slice + RF" if per_slice else "skimage 3D + RF"

    def _features(self, volume):
        if self.per_slice:
            return np.stack([_skimage_features(plane) for plane in volume])
        return _skimage_features(volume)

    def fit(self, volume, labels):
        from sklearn.ensemble import RandomForestClassifier
        stack = self._features(volume)
        self.model = RandomForestClassifier(n_estimators=50, max_depth=10, n_jobs=-1,
                                            random_state=self.seed)
        self.model.fit(stack[labels > 0], labels[labels > 0])

    def predict(self, volume):
        stack = self._features(volume)
        return self.model.predict(stack.reshape(-1, stack.shape[-1])).reshape(volume.shape)

    def predict_proba(self, volume):
        stack = self._features(volume)
        return self.model.predict_proba(stack.reshape(-1, stack.shape[-1])).reshape(
            volume.shape + (-1,))

    def describe(self, volume):
        return {"n features": int(self.model.n_features_in_)}


# --------------------------------------------------------------------------------- sets

def load_em_volume():
    train = np.stack([_read_png(EM_DIR / f"image_{k}.png") for k in EM_TRAIN])
    scribbles = np.stack([em_scribbles(em_classes(_read_png(EM_DIR / f"label_{k}.png")), seed=k)
                          for k in EM_TRAIN])
    test = np.stack([_read_png(EM_DIR / f"image_{k}.png") for k in EM_TEST])
    truth = np.stack([em_classes(_read_png(EM_DIR / f"label_{k}.png")) for k in EM_TEST])
    return {"train": train, "labels": scribbles, "test": test, "truth": truth,
            "spacing": EM_SPACING}


def em_scores(prediction, truth):
    predicted_membrane, membrane = prediction == MEMBRANE, truth == MEMBRANE
    tp = float((predicted_membrane & membrane).sum())
    cells = label_instances(truth, foreground=INTERIOR, connectivity=1)
    return {"membrane F1": 2 * tp / (predicted_membrane.sum() + membrane.sum()),
            "pixel acc": float((prediction == truth).mean()),
            "SEG": float(seg_score(cells, label_instances(prediction, foreground=INTERIOR,
                                                          connectivity=1)))}


def load_stardist():
    data = load_stardist_3d()
    return {"train": data["image"], "labels": data["scribbles"], "test": data["image"],
            "truth": data["mask"], "spacing": data["spacing"], "slices": list(data["slices"])}


def nuclei_scores(prediction, mask):
    """3D SEG of the objects of the nucleus class (``SEG``: `label_instances`' default for
    volumes, 6-connected, so nuclei touching only along voxel edges or corners stay apart; ``SEG
    26-conn``: joined through edges and corners too, scikit-image's default) and the nucleus
    IoU. The same objects rule for every method."""
    nucleus = prediction == NUCLEUS
    return {"SEG": float(seg_score(mask, label_instances(prediction, foreground=NUCLEUS,
                                                         volume=True), volume=True)),
            "SEG 26-conn": float(seg_score(mask, label_instances(
                prediction, foreground=NUCLEUS, connectivity=3, volume=True), volume=True)),
            "nucleus IoU": float((nucleus & (mask > 0)).sum() / (nucleus | (mask > 0)).sum())}


def upsampled_bank():
    """The default bank's ids and, on levels 1-3 at sigma 0.7 and 1.6, gauss, gradmag, log and
    the Hessian's eigenvalues upsampled to full resolution (``L<n>up``, trilinear in 3D): the
    ``features=default+up`` variant."""
    from msclassify.features import FeatureBank
    return [s.id for s in FeatureBank("default").specs] + [
        f"L{level}up:{name}:s{sigma}:c0" for level in (1, 2, 3) for sigma in (0.7, 1.6)
        for name in ("gauss", "gradmag", "log", "hessian_max", "hessian_min")]


def _parse_variant(text):
    """``"teacher=forest,class_weight=balanced"`` -> ``{"teacher": "forest", ...}`` (numbers
    and None parsed; ``features=default+up``: `upsampled_bank`)."""
    params = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        for kind in (int, float):
            try:
                value = kind(value)
                break
            except ValueError:
                pass
        params[key.strip()] = None if value == "None" else value
    if params.get("features") == "default+up":
        params["features"] = upsampled_bank()
    return params


def run_spread(seeds, shifts, grid=False, variants=()):
    """stardist_3d: SEG of the default model, μ = 0 and the scikit-image recipe over model
    seeds (``random_state`` of ours and of the forest; scribbles on slices Z/4, Z/2, 3Z/4)
    and over the scribbled slices (all three shifted by each of ``shifts``, seed 0; with
    ``grid``, every seed at every shift, and μ = 0 left out). ``variants``: parameter dicts of
    further models of ours, fit on every configuration beside the default."""
    data = load_stardist()
    image, mask = data["train"], data["truth"]
    shifts = [0] + [d for d in shifts if d != 0]
    configs = ([(seed, d) for d in shifts for seed in seeds] if grid else
               [(seed, 0) for seed in seeds] + [(seeds[0], d) for d in shifts[1:]])
    rows = []
    for seed, shift in configs:
        slices = [z + shift for z in data["slices"]]
        labels = nuclei_scribbles(mask, slices)
        methods = [Ours3D(data["spacing"], seed)]
        if not grid:
            methods.append(Ours3D(data["spacing"], seed, cost_tradeoff=0.0))
        for params in variants:
            method = Ours3D(data["spacing"], seed, **params)
            method.name = "ours 3D " + ",".join(
                f"{k}={'default+up' if k == 'features' else v}" for k, v in params.items())
            methods.append(method)
        methods.append(SkimageRF(per_slice=False, seed=seed))
        for method in methods:
            start = time.perf_counter()
            method.fit(image, labels)
            rows.append({"method": method.name, "seed": seed, "slices": slices,
                         **nuclei_scores(method.predict(image), mask),
                         "fit+predict s": time.perf_counter() - start})
            print(f"[spread] {rows[-1]}", flush=True)
    names = list(dict.fromkeys(r["method"] for r in rows))
    recipe = {(r["seed"], tuple(r["slices"])): r["SEG"] for r in rows
              if r["method"] == "skimage 3D + RF"}
    summary, placements = [], []
    for name in names:
        for metric in ("SEG", "SEG 26-conn", "nucleus IoU"):
            values = [r[metric] for r in rows if r["method"] == name]
            summary.append({"method": name, "metric": metric, "mean": float(np.mean(values)),
                            "sd": float(np.std(values)), "min": min(values),
                            "max": max(values), "n": len(values)})
        if name == "skimage 3D + RF":
            continue
        gaps = [r["SEG"] - recipe[(r["seed"], tuple(r["slices"]))] for r in rows
                if r["method"] == name]
        summary.append({"method": f"{name} - skimage 3D + RF", "metric": "SEG",
                        "mean": float(np.mean(gaps)), "sd": float(np.std(gaps)),
                        "min": min(gaps), "max": max(gaps), "n": len(gaps)})
    # per placement of the scribbles: mean and sd over the seeds, and of the gap to the recipe
    for shift in shifts:
        slices = [z + shift for z in data["slices"]]
        for name in names:
            own = [r for r in rows if r["method"] == name and r["slices"] == slices]
            if len(own) < 2:
                continue
            seg = [r["SEG"] for r in own]
            gaps = [r["SEG"] - recipe[(r["seed"], tuple(slices))] for r in own]
            placements.append({"slices": " ".join(map(str, slices)), "method": name,
                               "SEG mean": float(np.mean(seg)), "SEG sd": float(np.std(seg)),
                               "gap mean": float(np.mean(gaps)), "gap sd": float(np.std(gaps)),
                               "gap min": min(gaps), "n": len(own)})
    print_table(summary, ["method", "metric", "mean", "sd", "min", "max", "n"])
    if placements:
        print_table(placements, ["slices", "method", "SEG mean", "SEG sd", "gap mean", "gap sd",
                                 "gap min", "n"])
    return {"configs": [{"seed": s, "slice shift": d} for s, d in configs], "rows": rows,
            "summary": summary, "placements": placements}


SETS = {"isbi2012_em": (load_em_volume, em_scores, ["SEG", "membrane F1", "pixel acc"]),
        "stardist_3d": (load_stardist, nuclei_scores, ["SEG", "SEG 26-conn", "nucleus IoU"])}


def run_set(name, data, repeats):
    _, score, metrics = SETS[name]
    methods = [Ours3D(data["spacing"]), Ours3D(data["spacing"], cost_tradeoff=0.0),
               Ours3D(data["spacing"], cost_tradeoff="auto"),
               OursPerSlice(), SkimageRF(per_slice=False), SkimageRF(per_slice=True)]
    rows = {}
    for method in methods:
        start = time.perf_counter()
        method.fit(data["train"], data["labels"])
        rows[method.name] = {"set": name, "method": method.name,
                             "train s": time.perf_counter() - start}
        print(f"[{name}] trained {method.name} in {rows[method.name]['train s']:.1f} s",
              flush=True)
    predictions, walls = {}, {m.name: [] for m in methods}
    for method in methods:
        predictions[method.name] = method.predict(data["test"])      # warm-up, and the result
    for r in range(repeats):
        for method in methods[r % len(methods):] + methods[:r % len(methods)]:
            start = time.perf_counter()
            labels = method.predict(data["test"])
            walls[method.name].append(time.perf_counter() - start)
            if not np.array_equal(labels, predictions[method.name]):
                raise AssertionError(f"{method.name} predicted differently in round {r}")
        print(f"[{name}] round {r + 1}/{repeats}: " + ", ".join(
            f"{k} {v[-1]:.2f} s" for k, v in walls.items()), flush=True)
    peer = walls["skimage 3D + RF"]
    for method in methods:
        row = rows[method.name]
        row.update(score(predictions[method.name], data["truth"]))
        row["s/volume"] = statistics.median(walls[method.name])
        row["s/volume rounds"] = walls[method.name]
        row["x faster than skimage 3D+RF"] = statistics.median(
            p / w for p, w in zip(peer, walls[method.name]))
        row.update(method.describe(data["test"]))
    print_table(rows.values(), ["method", *metrics, "s/volume", "x faster than skimage 3D+RF",
                                "node evals/voxel", "feature ops/voxel", "n features",
                                "train s"])
    return rows


# --------------------------------------------------------------------------------- scaling

def em_volume(n_slices, side=512, start=0):
    """Slices ``start`` to ``n_slices`` of the EM slices 0..14, then back (mirrored), repeated,
    ``side`` x ``side`` (tiled)."""
    cycle = list(range(15)) + list(range(14, 0, -1))
    planes = [_read_png(EM_DIR / f"image_{cycle[i % len(cycle)]}.png")
              for i in range(start, n_slices)]
    volume = np.stack(planes)
    reps = -(-side // volume.shape[1])
    return np.tile(volume, (1, reps, reps))[:, :side, :side]


def scaling_worker(model_path, n_slices, side):
    """One size in this process: predict once (warm), then time a second prediction."""
    from msclassify import load_model
    model = load_model(model_path)
    volume = em_volume(n_slices, side)
    model.predict(volume[:2])                                  # compile / warm caches
    before = _rss_mib("VmRSS")
    with open("/proc/self/clear_refs", "w") as file:           # peak RSS from here on
        file.write("5")
    start = time.perf_counter()
    model.predict(volume)
    wall = time.perf_counter() - start
    peak = _rss_mib("VmHWM")
    print(json.dumps({"slices": n_slices, "side": side, "voxels": int(volume.size),
                      "volume MiB": volume.nbytes / 2 ** 20, "s": wall,
                      "ns/voxel": 1e9 * wall / volume.size, "RSS before MiB": before,
                      "peak RSS MiB": peak, "predict peak - before MiB": peak - before,
                      "bytes/voxel": (peak - before) * 2 ** 20 / volume.size}))


def fit_memory_worker(n_slices, side):
    """In-memory ``PixelClassifier(spacing=EM_SPACING, random_state=0).fit`` on an EM volume
    of ``n_slices`` x ``side``² scribbled on slices 0-4, in this process: the peak RSS when
    each training stage starts (the features' and teacher's peak shows at "distillation",
    the distillation's at the model), fit time and a digest of the model file."""
    data = load_em_volume()
    volume = em_volume(n_slices, side)
    labels = np.zeros(volume.shape, np.uint8)
    scribbles = data["labels"][:, :side, :side]
    labels[:len(EM_TRAIN), :scribbles.shape[1], :scribbles.shape[2]] = scribbles
    stages = {}

    def progress(report):
        stages.setdefault(report.stage, _rss_mib("VmHWM"))
    before = _rss_mib("VmRSS")
    start = time.perf_counter()
    model = PixelClassifier(spacing=EM_SPACING, random_state=0).fit(volume, labels,
                                                                    progress=progress)
    wall = time.perf_counter() - start
    peak = _rss_mib("VmHWM")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "m.msc")
        model.save(path)
        digest = hashlib.sha1(open(path, "rb").read()).hexdigest()
    print(json.dumps({"slices": n_slices, "side": side, "voxels": int(volume.size),
                      "RSS before MiB": before, "peak RSS MiB": peak, "fit s": wall,
                      "peak at stage start MiB": stages, "model sha1": digest}))


def run_fit_memory(sizes, side):
    """`fit_memory_worker` for each size, each in its own process."""
    rows = []
    for n in sizes:
        out = subprocess.run([sys.executable, __file__, "--fit-memory-worker", str(n),
                              str(side)], capture_output=True, text=True, check=True,
                             cwd=REPO / "benchmarks")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"[fit memory] {rows[-1]}", flush=True)
    print_table(rows, ["slices", "voxels", "RSS before MiB", "peak RSS MiB", "fit s",
                       "model sha1"])
    return rows


# --------------------------------------------------------------------------------- training memory

# (set, slices, side): the crops `train_memory_worker` fits. isbi2012_em: the EM volume
# (`em_volume`) with `em_scribbles` on slices 0-4 (what `training_windows` reads around
# them: the scribbled slices and the candidates' z halo); stardist_3d: the nuclei stack
# mirror-tiled in y and x to ``side`` (``side`` 0: as it is), `nuclei_scribbles` on slices
# 7, 15, 23 of the tiled mask.
TRAIN_MEMORY_CASES = (("isbi2012_em", 8, 256), ("isbi2012_em", 8, 512),
                      ("isbi2012_em", 16, 512), ("stardist_3d", 31, 0),
                      ("stardist_3d", 31, 256), ("stardist_3d", 31, 512))


def _tiled(array, side, instances=False):
    """``array`` (Z, Y, X) mirror-tiled in y and x to ``side`` x ``side``; ``instances``:
    an instance mask whose copies get new labels (each copy of a nucleus its own)."""
    for axis in (1, 2):
        while array.shape[axis] < side:
            copy = np.flip(array, axis)
            if instances:
                copy = np.where(copy > 0, copy + array.max(), 0)
            array = np.concatenate([array, copy], axis=axis)
        array = array[(slice(None),) * axis + (slice(0, side),)]
    return array


def train_memory_crop(name, n_slices, side):
    """The crop, its scribbles and the spacing of one `TRAIN_MEMORY_CASES` entry."""
    if name == "isbi2012_em":
        data = load_em_volume()
        volume = em_volume(n_slices, side)
        labels = np.zeros(volume.shape, np.uint8)
        reps = -(-side // data["labels"].shape[1])              # tiled as em_volume tiles
        scribbles = np.tile(data["labels"], (1, reps, reps))[:, :side, :side]
        labels[:len(EM_TRAIN)] = scribbles
        return volume, labels, EM_SPACING
    data = load_stardist()
    image, mask = data["train"][:n_slices], data["truth"][:n_slices]
    if side:
        image, mask = _tiled(image, side), _tiled(mask, side, instances=True)
    return image, nuclei_scribbles(mask, data["slices"]), data["spacing"]


def train_memory_worker(name, n_slices, side):
    """One in-memory fit of a `TRAIN_MEMORY_CASES` crop in this process (after a small
    fit that compiles): peak RSS of the fit above the memory held before it (``VmHWM``
    reset before the fit), the peak when each training stage starts, fit time, and the
    sha1 of the model file and of its prediction of the crop (bit-identity across versions)."""
    import msclassify
    volume, labels, spacing = train_memory_crop(name, n_slices, side)
    tiny = np.random.default_rng(0).random((8, 32, 32)).astype(np.float32)   # compiles
    tiny_labels = np.zeros(tiny.shape, np.uint8)
    tiny_labels[2, 4:8, 4:28], tiny_labels[5, 20:24, 4:28] = 1, 2
    PixelClassifier(spacing=spacing, random_state=0, n_estimators=2).fit(tiny, tiny_labels)
    stages = {}

    def progress(report):
        stages.setdefault(report.stage, _rss_mib("VmHWM"))
    before = _rss_mib("VmRSS")
    with open("/proc/self/clear_refs", "w") as file:           # peak RSS from here on
        file.write("5")
    start, cpu = time.perf_counter(), time.process_time()
    model = PixelClassifier(spacing=spacing, random_state=0).fit(volume, labels,
                                                                 progress=progress)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = _rss_mib("VmHWM")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "m.msc")
        model.save(path)
        digest = hashlib.sha1(open(path, "rb").read()).hexdigest()
    predicted = hashlib.sha1(np.ascontiguousarray(model.predict(volume)).tobytes()).hexdigest()
    print(json.dumps({"set": name, "crop": "x".join(map(str, volume.shape)),
                      "voxels": int(volume.size), "scribbled": int(np.count_nonzero(labels)),
                      "RSS before MiB": before, "peak RSS MiB": peak,
                      "fit peak - before MiB": peak - before,
                      "bytes/crop voxel": (peak - before) * 2 ** 20 / volume.size,
                      "fit s": wall, "fit CPU s": cpu, "peak at stage start MiB": {
                          k: v - before for k, v in stages.items()},
                      "model sha1": digest, "prediction sha1": predicted,
                      "package": os.path.dirname(msclassify.__file__),
                      "threads": os.environ.get("NUMBA_NUM_THREADS", "default")}))


def _slope(rows):
    """Least-squares bytes per voxel and intercept (MiB) of the fit peak over the crops."""
    voxels = np.array([r["voxels"] for r in rows], float)
    peaks = np.array([r["fit peak - before MiB"] for r in rows], float)
    if voxels.size < 2:
        return None, None
    slope, intercept = np.polyfit(voxels, peaks * 2 ** 20, 1)
    return float(slope), float(intercept / 2 ** 20)


def run_train_memory(cases, compare, threads, rounds):
    """`train_memory_worker` for every case in its own process, for this checkout and each
    in ``compare`` (root folders: its ``msclassify`` is imported instead), alternated per
    case and round; a table per checkout and the bytes per crop voxel (slope over the
    crops of a set)."""
    checkouts = [str(REPO)] + [str(os.path.abspath(p)) for p in compare]
    rows = []
    for round_ in range(rounds):
        for name, n_slices, side in cases:
            order = checkouts if round_ % 2 == 0 else checkouts[::-1]
            for checkout in order:
                env = dict(os.environ)
                if threads:
                    env["NUMBA_NUM_THREADS"] = str(threads)
                # the checkout's package first on the path, after _common put this one there
                child = (f"import sys; import _common; sys.path.insert(0, {checkout!r}); "
                         f"import bench_volumes; bench_volumes.train_memory_worker("
                         f"{name!r}, {n_slices}, {side})")
                load = os.getloadavg()[0]
                out = subprocess.run([sys.executable, "-c", child], capture_output=True,
                                     text=True, check=True, cwd=REPO / "benchmarks", env=env)
                row = json.loads(out.stdout.strip().splitlines()[-1])
                if not row["package"].startswith(checkout):
                    raise RuntimeError(f"{checkout} ran the package at {row['package']}")
                row.update(checkout=checkout, round=round_, load=load)
                rows.append(row)
                print(f"[train memory] {row}", flush=True)
    columns = ["checkout", "set", "crop", "voxels", "fit s", "fit CPU s",
               "fit peak - before MiB", "bytes/crop voxel", "model sha1", "prediction sha1",
               "load"]
    print_table(rows, columns)
    slopes = []
    for checkout in checkouts:
        for name in dict.fromkeys(c[0] for c in cases):
            own = [r for r in rows if r["checkout"] == checkout and r["set"] == name]
            slope, intercept = _slope(own)
            slopes.append({"checkout": checkout, "set": name, "bytes/crop voxel (slope)": slope,
                           "intercept MiB": intercept, "fits": len(own)})
    print_table(slopes, ["checkout", "set", "bytes/crop voxel (slope)", "intercept MiB", "fits"])
    same = {}
    for row in rows:
        same.setdefault((row["set"], row["crop"]), set()).add((row["model sha1"],
                                                                row["prediction sha1"]))
    identical = {f"{k[0]} {k[1]}": len(v) == 1 for k, v in same.items()}
    print("model files and predictions identical across checkouts:", identical)
    return {"threads": threads, "rows": rows, "slopes": slopes, "identical": identical}


def _rss_mib(field):
    """``VmRSS`` / ``VmHWM`` of this process in MiB (Linux; ru_maxrss would include the
    parent's peak, which a child inherits)."""
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _save_em_model(folder):
    """The default 3D EM model (trained on the volume of slices 0-4), saved in ``folder``."""
    data = load_em_volume()
    model = PixelClassifier(random_state=0, spacing=EM_SPACING).fit(data["train"], data["labels"])
    path = os.path.join(folder, "em3d.msc")
    model.save(path)
    return path


def run_scaling(sizes, side):
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        path = _save_em_model(folder)
        for n in sizes:
            out = subprocess.run([sys.executable, __file__, "--scaling-worker", path, str(n),
                                  str(side)], capture_output=True, text=True, check=True,
                                 cwd=REPO / "benchmarks")
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"[scaling] {rows[-1]}", flush=True)
    print_table(rows, ["slices", "side", "voxels", "volume MiB", "s", "ns/voxel",
                       "RSS before MiB", "peak RSS MiB", "bytes/voxel"])
    return rows


def chunked_worker(model_path, store, mode, chunk, out, limit_mib):
    """One volume, one path, in this process under ``limit_mib`` of address space."""
    import resource
    if limit_mib:
        limit = int(limit_mib) * 2 ** 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from msclassify import load_model
    from msclassify.io import ChunkedLabelWriter, open_volume
    from msclassify.pixel import label_dtype, predict_to_store
    model = load_model(model_path)
    volume = open_volume(store, "zyx")
    model.predict(volume[:2, :256, :256])                      # compile / warm caches
    before = _rss_mib("VmRSS")
    with open("/proc/self/clear_refs", "w") as file:           # peak RSS from here on
        file.write("5")
    start, status = time.perf_counter(), "ok"
    try:
        if mode == "in memory":
            labels = model.predict(volume[:, :, :])
            np.save(out, labels)
        else:
            chunks = tuple(min(chunk, n) for n in volume.shape)
            writer = ChunkedLabelWriter(out, volume.shape, chunks, model.classes_,
                                        dtype=label_dtype(model.classes_),
                                        spacing=model.bank_.grid.spacing)
            predict_to_store(model, volume, writer)
    except MemoryError as exc:
        status = f"MemoryError: {exc}"
    wall = time.perf_counter() - start
    peak = _rss_mib("VmHWM")
    voxels = int(np.prod(volume.shape))
    print(json.dumps({"path": mode, "slices": volume.shape[0], "voxels": voxels,
                      "volume MiB": voxels / 2 ** 20, "limit MiB": limit_mib, "status": status,
                      "s": wall if status == "ok" else None,
                      "ns/voxel": 1e9 * wall / voxels if status == "ok" else None,
                      "RSS before MiB": before, "peak RSS MiB": peak,
                      "bytes/voxel": (peak - before) * 2 ** 20 / voxels}))


def _write_em_store(store, n_slices, side):
    """An OME-Zarr EM volume of ``n_slices`` (`em_volume`), spacing ``EM_SPACING``, written slab
    by slab; returns ``store``."""
    import zarr
    root = zarr.open_group(store, mode="w", zarr_format=3)
    root.attrs["ome"] = {"version": "0.5", "multiscales": [{
        "axes": [{"name": a, "type": "space"} for a in "zyx"],
        "datasets": [{"path": "0", "coordinateTransformations": [
            {"type": "scale", "scale": list(EM_SPACING)}]}]}]}
    array = root.create_array("0", shape=(n_slices, side, side), chunks=(16, 256, 256),
                              dtype=np.uint8)
    for z in range(0, n_slices, 16):
        array[z:z + 16] = em_volume(min(n_slices, z + 16), side, start=z)
    return store


def run_chunked(sizes, side, chunk, limit_mib):
    import zarr
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        path = _save_em_model(folder)
        for n in sizes:
            store = _write_em_store(os.path.join(folder, f"em_{n}.zarr"), n, side)
            outputs = {}
            for mode in ("in memory", "chunked"):
                outputs[mode] = os.path.join(folder, f"out_{n}_{mode[0]}" + (
                    ".npy" if mode == "in memory" else ".zarr"))
                out = subprocess.run([sys.executable, __file__, "--chunked-worker", path, store,
                                      mode, str(chunk), outputs[mode], str(limit_mib)],
                                     capture_output=True, text=True, check=True,
                                     cwd=REPO / "benchmarks")
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"[chunked] {rows[-1]}", flush=True)
            if all(r["status"] == "ok" for r in rows[-2:]):
                chunked = zarr.open_group(outputs["chunked"], mode="r")["labels"]["classes"]["0"]
                rows[-1]["equal to in memory"] = bool(np.array_equal(
                    chunked[:], np.load(outputs["in memory"])))
            shutil.rmtree(store)
    print_table(rows, ["path", "slices", "voxels", "limit MiB", "status", "s", "ns/voxel",
                       "RSS before MiB", "peak RSS MiB", "bytes/voxel", "equal to in memory"])
    return {"chunk": chunk, "side": side, "memory limit MiB": limit_mib, "rows": rows}


def _run_measured(command, limit_mib):
    """Run ``command`` in a child process limited to ``limit_mib`` of address space; its wall
    time, peak resident memory (the child's own ``ru_maxrss``, from ``wait4``), exit code and
    last output line."""
    import resource

    def limit():
        if limit_mib:
            size = int(limit_mib) * 2 ** 20
            resource.setrlimit(resource.RLIMIT_AS, (size, size))

    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             preexec_fn=limit, cwd=REPO / "benchmarks")
    output = child.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return {"s": time.perf_counter() - start, "peak RSS MiB": usage.ru_maxrss / 1024,
            "exit": child.returncode, "last line": lines[-1] if lines else ""}


def run_cli_scaling(sizes, side, chunk, limit_mib):
    """``msclassify train VOL.zarr --labels L.zarr --axes zyx --chunks C`` and ``msclassify
    predict MODEL VOL.zarr --axes zyx --chunks C -o OUT.zarr`` on OME-Zarr EM volumes of
    ``sizes`` slices (scribbles on slices 0-4, the same at every size), each command in its
    own process (predict under ``limit_mib`` of address space, the volume's size in memory
    being more than that at the largest sizes; train reads only the crops around the
    scribbles, the same at every size): wall time (start-up, I/O included) and the process's
    peak resident memory."""
    import zarr
    data = load_em_volume()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in sizes:
            store = _write_em_store(os.path.join(folder, f"em_{n}.zarr"), n, side)
            labels = os.path.join(folder, f"lab_{n}.zarr")
            scribbles = zarr.open_array(labels, mode="w", shape=(n, side, side),
                                        chunks=(16, 256, 256), dtype=np.uint8, zarr_format=3)
            scribbles[:len(EM_TRAIN), :data["labels"].shape[1], :data["labels"].shape[2]] = \
                data["labels"][:, :side, :side]
            model, out = os.path.join(folder, f"m_{n}.msc"), os.path.join(folder, f"o_{n}.zarr")
            cli = [sys.executable, "-m", "msclassify.cli"]
            for step, command in (
                    ("train", cli + ["train", store, "--labels", labels, "--axes", "zyx",
                                     "--chunks", str(chunk), "--random-state", "0", "-o", model]),
                    ("predict", cli + ["predict", model, store, "--axes", "zyx", "--chunks",
                                       str(chunk), "-o", out, "--quiet"])):
                limit = limit_mib if step == "predict" else 0
                row = {"step": step, "slices": n, "voxels": n * side * side,
                       "volume MiB": n * side * side / 2 ** 20, "limit MiB": limit,
                       **_run_measured(command, limit)}
                row["us/voxel"] = 1e6 * row["s"] / row["voxels"]
                rows.append(row)
                print(f"[cli] {row}", flush=True)
                if row["exit"] != 0:
                    raise RuntimeError(f"{step} failed: {row['last line']}")
            for path in (store, labels, out):
                shutil.rmtree(path)
    print_table(rows, ["step", "slices", "voxels", "volume MiB", "limit MiB", "s", "us/voxel",
                       "peak RSS MiB"])
    return {"chunk": chunk, "side": side, "memory limit MiB": limit_mib, "rows": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sets", nargs="*", default=list(SETS), choices=list(SETS))
    parser.add_argument("--scaling", nargs="*", type=int, default=[5, 10, 20, 40],
                        help="slice counts of the scaling run (none: skip it)")
    parser.add_argument("--side", type=int, default=512, help="slice side of the scaling run")
    parser.add_argument("--quick", action="store_true", help="1 round, no scaling")
    parser.add_argument("--chunked", nargs="*", type=int, default=[],
                        help="slice counts of the chunked run (larger than memory)")
    parser.add_argument("--chunk", type=int, default=128, help="chunk side of the chunked run")
    parser.add_argument("--memory-limit", type=int, default=2560,
                        help="address-space limit (MiB) of each chunked-run process")
    parser.add_argument("--cli", nargs="*", type=int, default=[],
                        help="slice counts of the CLI run: train and predict --chunks on "
                             "OME-Zarr volumes, peak RSS and time of each process")
    parser.add_argument("--spread", nargs="*", type=int, metavar="SEED",
                        help="stardist_3d only: SEG over these model seeds, and over shifted "
                             "scribbled slices (--slice-shifts), into volumes_spread.json")
    parser.add_argument("--slice-shifts", nargs="*", type=int, default=[-2, -1, 1, 2])
    parser.add_argument("--grid", action="store_true",
                        help="with --spread: every seed at every slice shift (no mu=0 model); "
                             "into volumes_spread_grid.json")
    parser.add_argument("--variant", action="append", default=[], metavar="K=V[,K=V]",
                        help="with --spread: one more model of ours with these parameters "
                             "(e.g. teacher=forest); repeatable")
    parser.add_argument("--stardist-spacing", type=float, nargs=3, metavar=("Z", "Y", "X"),
                        help="stardist_3d's voxel spacing for our models (default 1 1 1: not "
                             "recorded; its nuclei span 7 x 15 x 14 voxels, median, which "
                             "StarDist's extents rule reads as 2.1 x 1 x 1.07); into "
                             "volumes_stardist_3d_spacing_Z_Y_X.json")
    parser.add_argument("--fit-memory", nargs="*", type=int, default=[],
                        help="slice counts of in-memory fits on EM volumes (peak RSS per "
                             "training stage, model digest; each in its own process)")
    parser.add_argument("--fit-memory-worker", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--train-memory", action="store_true",
                        help="peak RSS and time of in-memory fits on crops of the real volumes "
                             "(TRAIN_MEMORY_CASES), each in its own process, into "
                             "volumes_train_memory.json")
    parser.add_argument("--train-cases", nargs="*", metavar="SET:SLICES:SIDE",
                        help="with --train-memory: these crops instead (e.g. isbi2012_em:8:512)")
    parser.add_argument("--compare", nargs="*", default=[],
                        help="with --train-memory: other checkouts (root folders) run "
                             "alternately with this one")
    parser.add_argument("--threads", type=int, default=1,
                        help="with --train-memory: NUMBA_NUM_THREADS of the fits (0: as set)")

    parser.add_argument("--scaling-worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--chunked-worker", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scaling_worker:
        path, n, side = args.scaling_worker
        scaling_worker(path, int(n), int(side))
        return
    if args.train_memory:
        cases = TRAIN_MEMORY_CASES if not args.train_cases else [
            (c.split(":")[0], int(c.split(":")[1]), int(c.split(":")[2]))
            for c in args.train_cases]
        results = {"cpu": cpu_model(), "load at start": os.getloadavg(),
                   "train memory": run_train_memory(cases, args.compare, args.threads,
                                                    args.repeats),
                   "load at end": os.getloadavg()}
        path = write_results("volumes_train_memory" + (
            f"_threads{args.threads}" if args.threads != 1 else ""), results)
        print(f"CPU {results['cpu']}; load {results['load at start']} -> "
              f"{results['load at end']}; wrote {path}")
        return
    if args.fit_memory_worker:
        fit_memory_worker(*map(int, args.fit_memory_worker))
        return
    if args.chunked_worker:
        path, store, mode, chunk, out, limit = args.chunked_worker
        chunked_worker(path, store, mode, int(chunk), out, int(limit))
        return
    if args.spread:
        results = {"cpu": cpu_model(), "load at start": os.getloadavg(),
                   "spread": run_spread(args.spread, args.slice_shifts, args.grid,
                                        [_parse_variant(v) for v in args.variant]),
                   "load at end": os.getloadavg()}
        name = "volumes_spread" + ("_grid" if args.grid else "") + \
            "".join("_" + v.replace("=", "-").replace(",", "_") for v in args.variant)
        print(f"CPU {results['cpu']}; load {results['load at start']} -> "
              f"{results['load at end']}; wrote {write_results(name, results)}")
        return
    results = {"cpu": cpu_model(), "load at start": os.getloadavg(), "sets": {}}
    for name in args.sets:
        data = SETS[name][0]()
        if name == "stardist_3d" and args.stardist_spacing:
            data["spacing"] = tuple(args.stardist_spacing)
        results["sets"][name] = run_set(name, data, 1 if args.quick else args.repeats)
    if args.scaling and not args.quick:
        results["scaling"] = run_scaling(args.scaling, args.side)
    if args.chunked:
        results["chunked"] = run_chunked(args.chunked, args.side, args.chunk, args.memory_limit)
    if args.fit_memory:
        results["fit memory"] = run_fit_memory(args.fit_memory, args.side)
    if args.cli:
        results["cli"] = run_cli_scaling(args.cli, args.side, args.chunk, args.memory_limit)
    results["load at end"] = os.getloadavg()
    name = ("volumes_quick" if args.quick else
            "volumes" if set(args.sets) == set(SETS) else
            "volumes_" + "_".join(args.sets) if args.sets else
            "volumes_scaling" if args.scaling else
            "volumes_chunked" if args.chunked else
            "volumes_fit_memory" if args.fit_memory else "volumes_cli")
    if args.stardist_spacing and "stardist_3d" in args.sets:
        name += "_spacing_" + "_".join(f"{v:g}" for v in args.stardist_spacing)
    path = write_results(name, results)
    print(f"CPU {results['cpu']}; load {results['load at start']} -> {results['load at end']}; "
          f"wrote {path}")


if __name__ == "__main__":
    main()
