"""How long does loading the classifier stall a napari session's GUI thread, and why?

The napari docks need the classifier's libraries (SciPy, scikit-learn, pandas, Numba) and,
for the first fit, Numba's kernels from the disk cache. Each way of loading them runs in a
fresh process that has imported napari and Qt first (a session's heap), while the main
thread ticks every 2 ms (``time.sleep``, as an event loop would); the longest gap between
two ticks is the GUI's stall, and where the loading thread was at the end of each long gap
tells what held the GIL:

* ``main``: ``import msclassify.pixel`` and a tiny fit on the main thread (docking did this);
* ``thread``: the same in a thread, the garbage collector as it is;
* ``thread, gc paused``: what the plugin does now (`msclassify_napari._preload`): the
  collector paused while loading, the loaded objects frozen (``gc.freeze``) after.

Run: ``python benchmarks/study_first_load.py [--rounds 3]`` (the ways alternate, one
subprocess each, so the machine's load hits them alike). Writes
benchmarks/results/first_load.json and prints a table (median of the rounds).
"""

import json
import os
import statistics
import subprocess
import sys

from _common import REPO, study_of_ways

WAYS = ("main", "thread", "thread, gc paused")

_CHILD = r"""
import gc, json, sys, threading, time, traceback
sys.path.insert(0, {plugins!r})
import napari, napari.layers, napari.qt.threading, qtpy.QtWidgets   # a session's heap
way = {way!r}

def load():
    import numpy as np
    from msclassify.pixel import PixelClassifier
    image = np.random.default_rng(0).random((40, 56)).astype(np.float32)
    labels = np.zeros(image.shape, np.uint8)
    labels[:8], labels[-8:] = 1, 2
    PixelClassifier(features="default", n_estimators=2, random_state=0).fit(
        image, labels).predict_proba(image)

if way == "main":
    begin = time.perf_counter()
    load()
    seconds = time.perf_counter() - begin
    print(json.dumps({{"stall_s": seconds, "seconds": seconds, "gaps_over_50ms": 1,
                      "where": "the main thread itself"}}))
    sys.exit()
if way == "thread, gc paused":
    from msclassify_napari._preload import preload_classifier as load
done = threading.Event()
def work():
    load()
    done.set()
worker = threading.Thread(target=work)
gaps = []
begin = last = time.perf_counter()
worker.start()
while not done.is_set():
    time.sleep(0.002)
    now = time.perf_counter()
    if now - last > 0.05:
        frame = sys._current_frames().get(worker.ident)
        module = None
        while frame is not None and module is None:
            if frame.f_code.co_name == "_load_unlocked":
                module = frame.f_locals["spec"].name
            frame = frame.f_back
        gaps.append((now - last, module or "not importing"))
    last = now
gaps.sort(reverse=True)
print(json.dumps({{"stall_s": gaps[0][0] if gaps else 0.0,
                  "seconds": time.perf_counter() - begin, "gaps_over_50ms": len(gaps),
                  "where": ", ".join(f"{{g:.2f}} s in {{m}}" for g, m in gaps[:3])}}))
"""


def run(way):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), str(REPO / "plugins"), os.environ.get("PYTHONPATH", "")])}
    code = _CHILD.format(plugins=str(REPO / "plugins"), way=way)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    study_of_ways("first_load", __doc__.splitlines()[0], WAYS, run, lambda way, results: {
        "way": way,
        "stall_s": statistics.median(r["stall_s"] for r in results),
        "stall_max_s": max(r["stall_s"] for r in results),
        "seconds": statistics.median(r["seconds"] for r in results),
        "gaps_over_50ms": statistics.median(r["gaps_over_50ms"] for r in results),
        "longest_where": max(results, key=lambda r: r["stall_s"])["where"]})


if __name__ == "__main__":
    main()
