"""Shared plumbing of the benchmark scripts: data location, timing, JSON and tables."""

import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
SHARED_DATA = Path(os.environ.get("MSCLASSIFY_SHARED_DATA", REPO.parent / "shared" / "data"))

sys.path.insert(0, str(REPO))


def interleaved_times(functions, rounds=5):
    """Wall times of every function in ``functions`` (a dict), run once per round
    with the order rotating between rounds, so that a change in the machine's
    load hits every function alike; returns ``{name: [seconds per round]}`` and
    ``{name: last result}``."""
    names = list(functions)
    times, results = {name: [] for name in names}, {}
    for round_ in range(rounds):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            start = time.perf_counter()
            results[name] = functions[name]()
            times[name].append(time.perf_counter() - start)
    return times, results


def study_of_ways(name, description, ways, run, row):
    """A study's command line (``--rounds``, default 3): ``run(way)`` for every way in ``ways``,
    the ways alternating round after round (so the machine's load hits them alike), each
    result printed; then ``row(way, results)`` of each way printed as a table and written with
    the results to ``results/<name>.json`` (CPU, rounds, load averages, date)."""
    import argparse
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    runs = {way: [] for way in ways}
    loads = [os.getloadavg()[0]]
    for _ in range(rounds):
        for way in ways:
            runs[way].append(run(way))
            loads.append(os.getloadavg()[0])
            print(way, runs[way][-1], flush=True)
    rows = [row(way, runs[way]) for way in ways]
    print_table(rows, list(rows[0]))
    path = write_results(name, {"cpu": cpu_model(), "rounds": rounds,
                                "load_average": [min(loads), max(loads)],
                                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                "rows": rows, "runs": runs})
    print(f"wrote {path}; load average {min(loads):.1f}-{max(loads):.1f}; {command_line()}")


def checkouts_parser(description, frames, rounds):
    """Arguments of a study that times this checkout against others on fly frames:
    --model, --frames, --rounds and --compare (for `alternated_checkouts`)."""
    import argparse
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", help="a saved pixel model (default: train bench_tracks')")
    parser.add_argument("--frames", type=int, default=frames)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--compare", nargs="*", default=[],
                        help="other checkouts (their root folders) to run alternately")
    return parser


def alternated_checkouts(child, compare, rounds, *arguments):
    """Run the script ``child`` (``python -c``) as ``child CHECKOUT *arguments`` for this
    checkout and those in ``compare`` (root folders), in fresh processes with 1 Numba thread,
    the checkouts alternated round by round; the child puts CHECKOUT first on ``sys.path``
    and prints a JSON dict (last line) with ``package``, the ``msclassify`` it imported.
    Returns that dict per run, with ``checkout``, ``round`` and the ``load at start``."""
    import subprocess
    checkouts = [str(REPO)] + [str(Path(p).resolve()) for p in compare]
    runs = []
    for round_ in range(rounds):
        for checkout in checkouts:
            load = os.getloadavg()[0]
            done = subprocess.run([sys.executable, "-c", child, checkout, *arguments],
                                  check=True, capture_output=True, text=True,
                                  env=dict(os.environ, NUMBA_NUM_THREADS="1"))
            result = json.loads(done.stdout.strip().splitlines()[-1])
            if not result["package"].startswith(checkout):
                sys.exit(f"{checkout} ran the package at {result['package']}")
            runs.append({"checkout": checkout, "round": round_, "load at start": load,
                         **result})
    return runs


def napari_checkouts(compare, rounds, run):
    """``{label: [run(checkout) per round]}`` for this checkout ("this checkout") and, if
    ``compare`` (a root folder) is given, that one ("before"), alternated round by round: the
    napari benchmarks' ``--compare``. Prints each run's label as it ends."""
    checkouts = {"this checkout": REPO}
    if compare:
        checkouts = {"before": Path(compare).resolve(), **checkouts}
    runs = {label: [] for label in checkouts}
    for _ in range(rounds):
        for label, checkout in checkouts.items():
            runs[label].append(run(checkout))
            print(label, runs[label][-1], flush=True)
    return checkouts, runs


def write_checkouts_results(name, settings, checkouts, rows, runs):
    """`write_results` of a `napari_checkouts` benchmark: the CPU, ``settings`` (a dict), the
    date, the checkouts, the table's ``rows`` and every run; prints where it wrote."""
    path = write_results(name, {
        "cpu": cpu_model(), **settings, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "checkouts": {label: str(path) for label, path in checkouts.items()},
        "rows": rows, "runs": runs})
    print(f"wrote {path}; {command_line()}")


def napari_child(code, checkout, timeout=1800):
    """Run ``code`` (``python -c``, a napari session) with ``PYTHONPATH=checkout:checkout/plugins``
    in ``checkout``; returns the JSON it printed last on a line starting ``RESULT ``."""
    import subprocess
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(checkout / "plugins")])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=timeout, cwd=checkout)      # (-c puts the working folder first)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"the session in {checkout} failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def median_ratio(numerators, denominators):
    """Median over rounds of the per-round ratio of two `interleaved_times` lists."""
    return statistics.median(a / b for a, b in zip(numerators, denominators))


def cpu_model():
    """The CPU's model name (Linux: /proc/cpuinfo), recorded with every timing."""
    if platform.system() == "Linux":
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine():
    """What ran a benchmark, and when: Python, cores, CPU model, platform, UTC date and time,
    and the load average (1, 5, 15 min) when the results were written."""
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "cpu": cpu_model(),
            "platform": platform.platform(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "load_average": [round(load, 2) for load in os.getloadavg()]}


def command_line(runner="python"):
    """The command that runs this benchmark as it was started, e.g. ``python benchmarks/x.py -q``."""
    return " ".join([runner, f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])


def write_results(name, results, command=None):
    """Write ``benchmarks/results/<name>.json`` with the command that produced it.

    ``command`` defaults to `command_line`.
    """
    command = command_line() if command is None else command
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"command": command, "machine": machine(), "results": results}
    path.write_text(json.dumps(payload, indent=2))
    return path


def print_table(rows, columns):
    """Print ``rows`` (dicts) as a Markdown table with the given column keys."""
    def fmt(value):
        if isinstance(value, float):
            return f"{value:.4g}"
        return str(value)
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(fmt(row.get(c, "")) for c in columns) + " |")
