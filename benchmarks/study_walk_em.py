"""CPU per 512² EM slice of `PixelClassifier.predict`, for this checkout and others, alternated.

Run: ``python benchmarks/study_walk_em.py [--styles balanced thin clicks] [--draws 1]
[--models a.msc ...] [--rounds 2] [--compare /path/to/other/checkout ...]``. Writes
benchmarks/results/study_walk_em.json and prints a table.

The models are the default `PixelClassifier` of ``bench_accuracy.py``'s isbi2012_em rows,
trained (by this checkout) on each scribble style and draw and saved (or ``--models``, saved
ones), then loaded by every checkout. Each checkout runs in a fresh process with 1 Numba
thread (its own package first on ``sys.path``), the checkouts alternated round by round with
the load at each start, and measures the process CPU per test slice of
``model.predict(slice)`` (features, tree walk and classes: what ``bench_accuracy.py`` times
for "ours"), best and median of 5 passes over the 10 test slices. Each process hashes its
labels of every slice and ``predict_proba`` of three: the checkouts must agree bit for bit
(the ``identical`` column).
"""

import argparse
import hashlib
import tempfile
from pathlib import Path

import numpy as np

from _common import alternated_checkouts, cpu_model, print_table, write_results

_CHILD = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from msclassify.pixel import load_pixel_model

slices = np.load(sys.argv[2])
result = {}
digest = hashlib.sha256()
for path in sys.argv[3:]:
    model = load_pixel_model(path)
    model.predict(slices[0])                                  # compiled
    passes = []
    for _ in range(5):
        start = time.process_time()
        labels = [model.predict(s) for s in slices]
        passes.append(1e3 * (time.process_time() - start) / len(slices))
    for l in labels:
        digest.update(l.tobytes())
    for s in slices[:3]:
        digest.update(model.predict_proba(s).tobytes())
    result[path] = sorted(passes)
import msclassify
print(json.dumps({"ms/slice": result, "digest": digest.hexdigest(),
                  "package": msclassify.__file__}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--styles", nargs="+", default=["balanced", "thin", "clicks"])
    parser.add_argument("--draws", type=int, default=1)
    parser.add_argument("--models", nargs="*", default=[],
                        help="saved EM pixel models to time instead of training them")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compare", nargs="*", default=[],
                        help="other checkouts (their root folders) to run alternately")
    args = parser.parse_args()
    from _real_data import load_em_style
    from msclassify.pixel import PixelClassifier
    with tempfile.TemporaryDirectory(prefix="study_walk_em_") as folder:
        models = {str(Path(path).resolve()): Path(path).stem for path in args.models}
        for draw in range(0 if models else args.draws):
            for style in args.styles:
                data = load_em_style(style, draw=draw)
                path = str(Path(folder) / f"{style}_{draw}.msc")
                PixelClassifier(random_state=0).fit(data["train_images"],
                                                    data["train_labels"]).save(path)
                models[path] = f"{style} {draw}"
        slices = str(Path(folder) / "slices.npy")
        np.save(slices, np.stack(load_em_style("balanced")["test_images"]))
        runs = alternated_checkouts(_CHILD, args.compare, args.rounds, slices, *models)
    digests = {run["digest"] for run in runs}
    rows = []
    for run in runs:
        row = {key: run[key] for key in ("checkout", "round", "load at start")}
        for path, name in models.items():
            times = run["ms/slice"][path]
            row[f"{name} best"] = times[0]
            row[f"{name} median"] = times[len(times) // 2]
        row["identical"] = len(digests) == 1
        row["digest"] = hashlib.sha256(run["digest"].encode()).hexdigest()[:12]
        rows.append(row)
    print(f"CPU {cpu_model()}; CPU ms per 512² EM slice (predict: features, walk, classes), "
          f"1 Numba thread, best / median of 5 passes over the test slices")
    print_table(rows, ["checkout", "round", "load at start"]
                + [f"{name} {kind}" for name in models.values() for kind in ("best", "median")]
                + ["identical"])
    print(f"wrote {write_results('study_walk_em', {'draws': args.draws, 'rows': rows})}")


if __name__ == "__main__":
    main()
