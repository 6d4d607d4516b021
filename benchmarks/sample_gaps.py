"""Run a napari benchmark with a stack sampler on every thread; print what each thread was
doing during each long stall of the window.

Run: ``QT_API=pyqt6 GAP_S=0.1 xvfb-run -a python benchmarks/sample_gaps.py
benchmarks/bench_napari_large.py --size 8192 --tmp DIR --whole-limit 15`` (any script that
measures with `napari_session.EventLoopMonitor`, with its own arguments). The script runs as
usual; each stall it measures that is longer than ``GAP_S`` seconds (default 0.1) is printed
to stderr with, per thread, its most frequent stacks (innermost frame first) among the
samples taken inside the stall (the main thread always; other threads unless they only
waited).

A Python thread takes the samples (``sys._current_frames``, every 2 ms), so it needs the GIL:
"max sampler gap" says how long it waited for it at most. A thread shown in one place for the
whole stall while the sampler ran was in C code there (NumPy, Numba, Qt, OpenGL, a lock),
with or without the GIL; for native frames use ``study_stall_stacks.py`` (py-spy).
"""

import collections
import os
import runpy
import sys
import threading
import time
import traceback
from pathlib import Path

GAP_S = float(os.environ.get("GAP_S", "0.1"))
IDLE = ("wait", "select", "_worker", "sleep")
samples = collections.deque(maxlen=200_000)


def _sample():
    me = threading.get_ident()
    while True:
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        snapshot = [(names.get(ident, str(ident)),
                     [f"{Path(s.filename).name}:{s.lineno}:{s.name}"
                      for s in traceback.extract_stack(frame)[-8:]])
                    for ident, frame in sys._current_frames().items() if ident != me]
        samples.append((time.perf_counter(), snapshot))
        time.sleep(0.002)


def _report(gap, end):
    window = [(t, snapshot) for t, snapshot in list(samples) if end - gap <= t <= end]
    times = [t for t, _ in window]
    waited = max((b - a for a, b in zip(times, times[1:])), default=0.0)
    print(f"\n=== stall {gap:.3f} s: {len(window)} samples, max sampler gap {waited:.3f} s",
          file=sys.stderr)
    per_thread = collections.defaultdict(collections.Counter)
    for _, snapshot in window:
        for name, stack in snapshot:
            per_thread[name][" < ".join(reversed(stack[-5:]))] += 1
    for name, stacks in per_thread.items():
        top = stacks.most_common(3)
        if name != "MainThread" and all(any(word in stack.split(" < ")[0] for word in IDLE)
                                        for stack, _ in top):
            continue                                     # a worker waiting all along
        print(f"  [{name}]", file=sys.stderr)
        for stack, count in top:
            print(f"    {count:4d} {stack[:300]}", file=sys.stderr)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: sample_gaps.py SCRIPT [ARGS...]")
    script = sys.argv[1]
    sys.path.insert(0, str(Path(script).resolve().parent))
    import napari_session

    measured = napari_session.EventLoopMonitor.longest_gap

    def longest_gap(self):
        gap, end = measured(self)
        if gap == gap and gap > GAP_S:
            _report(gap, end)
        return gap, end

    napari_session.EventLoopMonitor.longest_gap = longest_gap
    threading.Thread(target=_sample, daemon=True, name="sampler").start()
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
