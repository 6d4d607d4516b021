"""The classifier the napari docks import shortens OpenMP's idle spin (`import msclassify`,
tests/test_openmp_waits.py) before Numba starts libgomp: spinning threads stole the GUI thread's
core (the 4-class live fit was 10x slower under load, docs/napari.md). libgomp reads the
setting once, when it is loaded, so the probe runs in a fresh interpreter."""

import os
import subprocess
import sys

import pytest

PROBE = """
import os
from msclassify_napari import _controller   # the classifier, as the docks import it
maps = open("/proc/self/maps").read().splitlines()
# Numba's libgomp (scikit-learn's own copy, libgomp-<hash>.so, is another library)
loaded = [line for line in maps if line.rstrip().endswith("/libgomp.so.1.0.0")]
print(os.environ.get("GOMP_SPINCOUNT"), bool(loaded))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps")
def test_the_spin_count_is_set_before_numbas_libgomp_is_loaded():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         check=True, timeout=300)
    spin_count, libgomp_loaded = out.stdout.splitlines()[-1].split()  # the probe's line is last
    assert spin_count == "3000"
    assert libgomp_loaded == "False"     # so libgomp, loaded later, reads the setting
