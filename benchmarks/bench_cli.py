"""Throughput and memory of ``msclassify predict`` on a real fly video, in-process and on Dask.

Run: ``python benchmarks/bench_cli.py [--frames N] [--configs local,1,2]``. Writes
benchmarks/results/cli.json and prints a table.

The model is trained with ``msclassify train`` on the scribbles of the sample
fly frames (default parameters, ``--random-state 0``), then ``msclassify
predict`` runs as a separate process on the first N frames of
``shared/data/fly_sleap/20190128_113421.120s.mp4`` (3000 frames, 1024x1024),
writing one TIFF per frame, for each configuration: in-process (no Dask), a
LocalCluster of 1 worker process, and of 2 worker processes.

Reported per run:

* ``frames/s (steady)``: frames written per second between the 10th percentile
  frame and the last one, from the output files' modification times, so process
  start-up, cluster start-up and Numba cache loading are excluded;
* ``frames/s (end to end)``: N / wall time of the whole command;
* ``peak RSS total``: largest sum of the resident memory of the command and all
  its child processes (the Dask scheduler lives in the driver, the workers are
  children), sampled every 0.1 s with psutil;
* ``peak RSS driver``: the same for the driver process alone;
* ``CPU ms/frame``: user + system CPU time of the command and all its child
  processes (from ``getrusage(RUSAGE_CHILDREN)``; Dask workers are reaped by the
  driver) per frame, start-up included. Unlike frames/s it hardly depends on
  what else runs on the machine.

The machine is shared, so the load average at the start of every run is
recorded; compare rows of one run.
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from _common import REPO, SHARED_DATA, machine, print_table, write_results
from msclassify.datasets import sample_data_path

VIDEO = SHARED_DATA / "fly_sleap" / "20190128_113421.120s.mp4"
SAMPLE = sample_data_path("flies")
CONFIGS = {"local": [], "1": ["--workers", "1"], "2": ["--workers", "2"]}


def cli(*args):
    return [sys.executable, "-m", "msclassify.cli", *map(str, args)]


def environment():
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def train_model(folder):
    path = folder / "flies.msc"
    subprocess.run(cli("train", SAMPLE / "frames.tif", "--labels", SAMPLE / "scribbles.tif",
                       "-o", path, "--random-state", "0", "--quiet"),
                   env=environment(), check=True)
    return path


def tree_rss(process):
    """(RSS of the process, RSS of it and all its descendants), in bytes."""
    try:
        own = process.memory_info().rss
        children = process.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0, 0
    total = own
    for child in children:
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return own, total


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_predict(model, n_frames, extra, out):
    command = cli("predict", model, VIDEO, "-o", out, "--frames", f"0:{n_frames}", "--quiet",
                  *extra)
    load = os.getloadavg()[0]
    cpu_before = _children_cpu()
    start = time.perf_counter()
    process = psutil.Popen(command, env=environment(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    peak_driver = peak_total = 0
    while process.poll() is None:
        own, total = tree_rss(process)
        peak_driver, peak_total = max(peak_driver, own), max(peak_total, total)
        time.sleep(0.1)
    wall = time.perf_counter() - start
    stdout, stderr = process.communicate()
    cpu = _children_cpu() - cpu_before
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{stderr}")
    times = sorted(path.stat().st_mtime for path in Path(out).glob("frame_*.tif"))
    if len(times) != n_frames:
        raise RuntimeError(f"expected {n_frames} frames in {out}, found {len(times)}")
    first = n_frames // 10
    steady = (n_frames - 1 - first) / (times[-1] - times[first])
    return {"frames": n_frames, "frames/s (steady)": steady,
            "frames/s (end to end)": n_frames / wall, "wall s": wall,
            "CPU ms/frame": 1e3 * cpu / n_frames,
            "peak RSS total MB": peak_total / 2**20, "peak RSS driver MB": peak_driver / 2**20,
            "load average at start": load, "command": " ".join(map(str, command[1:]))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300,
                        help="predict the first N frames of the 3000 (default %(default)s)")
    parser.add_argument("--configs", default="local,1,2",
                        help="comma-separated: local (no Dask), 1, 2 (Dask workers)")
    args = parser.parse_args()
    if not VIDEO.exists():
        sys.exit(f"{VIDEO} not found; clone the repository next to shared/")
    configs = args.configs.split(",")
    unknown = [name for name in configs if name not in CONFIGS]
    if unknown:
        sys.exit(f"unknown configuration(s) {unknown}; choose from {list(CONFIGS)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_cli_") as folder:
        folder = Path(folder)
        model = train_model(folder)
        # the first process compiles or loads the Numba cache; keep that out of every row
        subprocess.run(cli("predict", model, VIDEO, "-o", folder / "warm", "--frames", "0:2",
                           "--quiet"), env=environment(), check=True)
        for name in configs:
            result = run_predict(model, args.frames, CONFIGS[name], folder / f"out_{name}")
            rows.append({"config": "in-process" if name == "local" else f"{name} Dask worker(s)",
                         **result})
    by_config = {row["config"]: row["frames/s (steady)"] for row in rows}
    scaling = None
    if "1 Dask worker(s)" in by_config and "2 Dask worker(s)" in by_config:
        scaling = by_config["2 Dask worker(s)"] / by_config["1 Dask worker(s)"]
    columns = ["config", "frames", "frames/s (steady)", "frames/s (end to end)", "wall s",
               "CPU ms/frame", "peak RSS total MB", "peak RSS driver MB",
               "load average at start"]
    print(f"video: {VIDEO.name}, first {args.frames} of 3000 frames (1024x1024); "
          f"{machine()['cpus']} cores")
    print_table(rows, columns)
    if scaling is not None:
        print(f"scaling 2 vs 1 worker (steady frames/s): {scaling:.2f}x")
    path = write_results("cli", {"video": str(VIDEO.relative_to(SHARED_DATA)),
                                 "frames": args.frames, "rows": rows,
                                 "scaling_2_vs_1_workers": scaling})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
