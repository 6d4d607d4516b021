"""What does a napari session's first layer cost, whatever reader made it?

Opening the fly video as the plugin's first use stalls the window 0.7-0.8 s, an OME-Zarr
mosaic about as long. Each round here runs two fresh napari sessions (a shown window, no
plugin) that add a 64x64 uint8 image twice with napari's own ``add_image``:

* ``cold``: as a session is: napari's first layer initialises, on the GUI thread, what it
  imports lazily (pint's unit registry for the layer's units, ``scipy.ndimage`` for the
  thumbnail);
* ``warm``: the same two initialisations done first (their time is the ``warm_s`` column).

Stall = the wall time of ``add_image`` and the events it leaves (``processEvents``).

Run: ``QT_API=pyqt6 xvfb-run -a python benchmarks/study_first_layer.py [--rounds 3]``
(the ways alternate, one process each). Writes benchmarks/results/first_layer.json and prints
a table (medians of the rounds).
"""

import json
import statistics
import subprocess
import sys

from _common import REPO, study_of_ways

WAYS = ("cold", "warm")

_CHILD = r"""
import json, sys, time
sys.path.insert(0, {benchmarks!r})
import napari
import numpy as np
from qtpy.QtWidgets import QApplication
from napari_session import settle

viewer = napari.Viewer(show=True)
app = QApplication.instance()
settle(app, 30)
begin = time.perf_counter()
if {way!r} == "warm":
    import scipy.ndimage  # noqa: F401
    from napari.layers.utils.layer_utils import coerce_affine
    coerce_affine(np.eye(3), ndim=2, name="affine")     # pint's unit registry
warm = time.perf_counter() - begin
adds = []
for _ in range(2):
    begin = time.perf_counter()
    viewer.add_image(np.zeros((64, 64), "uint8"), contrast_limits=(0, 255))
    app.processEvents()
    adds.append(time.perf_counter() - begin)
print("RESULT " + json.dumps({{"warm_s": warm, "first_add_s": adds[0], "second_add_s": adds[1]}}))
"""


def run(way):
    code = _CHILD.format(benchmarks=str(REPO / "benchmarks"), way=way)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=600).stdout
    line = [line for line in out.splitlines() if line.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def main():
    study_of_ways("first_layer", __doc__.splitlines()[0], WAYS, run, lambda way, results: {
        "session": way, **{key: statistics.median(r[key] for r in results)
                           for key in ("warm_s", "first_add_s", "second_add_s")}})


if __name__ == "__main__":
    main()
