"""Feature pipeline speed on a 1024x1024 frame: whole banks vs the few features a model uses.

Run: ``python benchmarks/bench_features.py [--repeats N]``. Writes
benchmarks/results/features.json and prints a table.

The frame is frame 0 of the SLEAP fly clip (1024x1024, gray) from the shared
data; without it a random uint8 frame of the same size is used (and recorded).
Times are medians of ``--repeats`` runs after a warm-up (numba compiled and
cached): wall time, and the process CPU time (all threads) which is less
sensitive to other programs competing for the 2 cores. The machine is shared,
so compare rows of one run; the load average at the start is recorded.
"modelled ops/px" is the sum of the features' ``batch_cost`` (the documented
cost model) for comparison with the times.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np
from numba import get_num_threads
from scipy import ndimage as ndi

from _common import SHARED_DATA, print_table, write_results

from msclassify.features import FeatureBank
from msclassify.features import _kernels

# A model that uses a handful of mostly coarse features, as CEGB with a split
# cost tends to learn: two full-resolution, the rest on 2x2..8x8 blocks.
TYPICAL_10 = ["L0:intensity:c0", "L0:gauss:s0.7:c0", "L1:gauss:s1.6:c0", "L1:gradmag:s0.7:c0",
              "L2:intensity:c0", "L2:log:s1.6:c0", "L2:hessian_max:s1.6:c0", "L3:gauss:s0.7:c0",
              "L3:dog:s3.5:c0", "L3:structure_max:s1.6:c0"]
# Large-scale context at every pixel: smoothed/Hessian maps of 4x4 and 8x8 block means
# interpolated to full resolution, vs the same scales (sigma x 2**level) computed there.
UPSAMPLED_6 = ["L2up:gauss:s1.6:c0", "L2up:hessian_max:s1.6:c0", "L2up:hessian_min:s1.6:c0",
               "L3up:gauss:s1.6:c0", "L3up:hessian_max:s1.6:c0", "L3up:hessian_min:s1.6:c0"]
FULL_RES_6 = ["L0:gauss:s6.4:c0", "L0:hessian_max:s6.4:c0", "L0:hessian_min:s6.4:c0",
              "L0:gauss:s12.8:c0", "L0:hessian_max:s12.8:c0", "L0:hessian_min:s12.8:c0"]
COARSE_10 = ["L1:intensity:c0", "L1:gauss:s1.6:c0", "L1:gradmag:s0.7:c0", "L2:intensity:c0",
             "L2:log:s1.6:c0", "L2:hessian_max:s1.6:c0", "L2:hessian_min:s1.6:c0",
             "L3:gauss:s0.7:c0", "L3:dog:s3.5:c0", "L3:structure_max:s1.6:c0"]


def load_frame():
    path = SHARED_DATA / "fly_sleap" / "clip.mp4"
    if path.exists():
        import av
        with av.open(str(path)) as container:
            frame = next(container.decode(video=0))
            return frame.to_ndarray(format="gray"), f"{path.name} frame 0"
    print(f"note: {path} not found, using a random frame", file=sys.stderr)
    return np.random.default_rng(0).integers(0, 256, (1024, 1024), dtype=np.uint8), "random uint8"


def timed(function, repeats):
    """Median wall and CPU seconds of ``function()`` over ``repeats`` runs, and its result."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def row(case, n_features, wall, cpu, modelled=None):
    result = {"case": case, "features": n_features, "wall ms": 1e3 * wall, "cpu ms": 1e3 * cpu,
              "frames/s (wall)": 1.0 / wall}
    if modelled is not None:
        result["modelled ops/px"] = modelled
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    frame, source = load_frame()
    default = FeatureBank("default")
    pyramid = FeatureBank("pyramid")
    rng = np.random.default_rng(0)
    ys = rng.integers(0, frame.shape[0], 10_000)
    xs = rng.integers(0, frame.shape[1], 10_000)

    threads = get_num_threads()
    cases = [
        ("default bank (all)", default, None, None),
        ("default bank (all), 1 thread", default, None, 1),
        ("pyramid bank (all; the former default)", pyramid, None, None),
        ("fast bank (all)", FeatureBank("fast"), None, None),
        ("rich bank (all)", FeatureBank("rich"), None, None),
        ("typical 10 (2 at L0)", pyramid, TYPICAL_10, None),
        ("typical 10 (2 at L0), 1 thread", pyramid, TYPICAL_10, 1),
        ("coarse 10 (L1-L3 only)", pyramid, COARSE_10, None),
        ("one L3 feature", pyramid, ["L3:gauss:s1.6:c0"], None),
        ("6 upsampled L2/L3 context features", FeatureBank(specs=UPSAMPLED_6), None, None),
        ("the same 6 scales at full resolution", FeatureBank(specs=FULL_RES_6), None, None),
        ("one upsampled feature (L3up:gauss:s1.6)", FeatureBank(specs=UPSAMPLED_6),
         ["L3up:gauss:s1.6:c0"], None),
    ]
    load = os.getloadavg()[0]
    rows = []
    for label, bank, selection, n_threads in cases:
        def compute():
            return bank.compute_levels(frame, selection, n_threads=n_threads)
        compute()                                        # warm-up: compile / load numba cache
        wall, cpu, levels = timed(compute, args.repeats)
        chosen = levels.feature_indices
        rows.append(row(f"compute_levels: {label}", len(chosen), wall, cpu,
                        float(bank.batch_costs()[chosen].sum())))

    default.gather(frame, ys[:10], xs[:10])
    wall, cpu, _ = timed(lambda: default.gather(frame, ys, xs), args.repeats)
    rows.append(row("gather: default bank at 10k pixels", len(default), wall, cpu,
                    float(default.batch_costs().sum())))

    # why the Gaussian is a numba kernel and not scipy.ndimage.gaussian_filter
    plane = frame.astype(np.float32) / 255
    wall, cpu, _ = timed(lambda: ndi.gaussian_filter(plane, 1.6, mode="reflect", truncate=3.0),
                         args.repeats)
    rows.append(row("one plane: scipy.ndimage.gaussian_filter s1.6", 1, wall, cpu))
    wall, cpu, _ = timed(lambda: _kernels.gaussian_smooth(plane, 1.6, 3.0), args.repeats)
    rows.append(row("one plane: msclassify gaussian_smooth s1.6", 1, wall, cpu))

    columns = ["case", "features", "wall ms", "cpu ms", "frames/s (wall)", "modelled ops/px"]
    print(f"frame: {source}, shape {frame.shape}, dtype {frame.dtype}; threads "
          f"{threads}; median of {args.repeats}; load average at start {load:.2f}")
    print_table(rows, columns)
    path = write_results("features", {"frame": source, "shape": list(frame.shape),
                                      "threads": threads, "load_average": load,
                                      "repeats": args.repeats, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
