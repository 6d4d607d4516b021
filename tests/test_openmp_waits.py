"""Idle OpenMP threads spin only briefly between Numba's parallel kernels (msclassify/__init__.py).

Tree growth launches thousands of short parallel kernels. libgomp's default lets idle threads
spin for about 3 ms after each, which next to other OpenMP programs or napari's GUI thread took
the cores from the threads with work (docs/scribbles.md, section 12). Each case runs in a fresh
interpreter: libgomp reads the setting once, when Numba loads it.
"""

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, os, sys, time
import msclassify  # noqa: F401  (sets the spin count before Numba loads libgomp)
settings = {name: os.environ.get(name) for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
if sys.argv[1] == "0":
    print(json.dumps(settings))
    sys.exit()
import numpy as np
from numba import njit, prange

@njit(parallel=True)
def total(a):
    s = 0.0
    for i in prange(a.shape[0]):
        s += a[i]
    return s

a = np.ones(4096)
total(a)                                    # compiled and the thread pool started
cpu = time.process_time()
for _ in range(int(sys.argv[1])):
    total(a)
    time.sleep(0.001)                       # serial work between two kernels
print(json.dumps(dict(settings, idle_cpu_s=time.process_time() - cpu)))
"""


def _run(n_kernels=0, **env):
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    base.update(NUMBA_NUM_THREADS="2", NUMBA_THREADING_LAYER="omp", **env)
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(n_kernels)], env=base,
                         capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_msclassify_shortens_the_spin_unless_the_user_chose():
    assert _run() == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": "3000"}
    assert _run(OMP_WAIT_POLICY="active") == {"OMP_WAIT_POLICY": "active",
                                              "GOMP_SPINCOUNT": None}
    assert _run(GOMP_SPINCOUNT="1000")["GOMP_SPINCOUNT"] == "1000"


def test_idle_threads_burn_little_cpu_between_kernels():
    # 200 kernels 1 ms apart: with libgomp's default (GOMP_SPINCOUNT=300000) the worker spins
    # through every gap (1.41 and 1.52 s of CPU in two runs at load 11); the short spin gives
    # up after tens of microseconds
    spinning = _run(200, GOMP_SPINCOUNT="300000")["idle_cpu_s"]
    run = _run(200)
    assert run["GOMP_SPINCOUNT"] == "3000"
    assert run["idle_cpu_s"] < 0.08 < spinning, (run, spinning)
