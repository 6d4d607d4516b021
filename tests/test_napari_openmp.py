"""The plugin makes OpenMP's idle threads wait passively (they spun and stole the GUI thread's
core: the 4-class live fit was 10x slower under load), before Numba starts libgomp, and leaves
a value the user set alone. Each case runs in a fresh interpreter: libgomp reads the setting
once, when it is loaded."""

import os
import subprocess
import sys

import pytest

PROBE = """
import os, sys
import msclassify_napari
if sys.argv[1] == "classifier":
    from msclassify_napari import _controller   # the classifier, as the dock imports it
maps = open("/proc/self/maps").read().splitlines() if os.path.exists("/proc/self/maps") else []
loaded = [line for line in maps if line.rstrip().endswith("/libgomp.so.1.0.0")]
print(os.environ.get("OMP_WAIT_POLICY"), bool(loaded))
"""


def _probe(policy, imports="classifier"):
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    out = subprocess.run([sys.executable, "-c", PROBE, imports], env=env, capture_output=True,
                         text=True, check=True, timeout=300)
    return out.stdout.splitlines()[-1].split()     # the probe's own line comes last


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_passive_is_set_before_numbas_libgomp_is_loaded():
    policy, libgomp_loaded = _probe(None)
    assert policy == "PASSIVE"
    assert libgomp_loaded == "False"     # so libgomp, loaded later, reads the setting


def test_a_value_the_user_set_wins():
    assert _probe("ACTIVE", imports="plugin")[0] == "ACTIVE"
