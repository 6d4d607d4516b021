"""napari plugin of msclassify: the "Pixel classifier" and "Tabular (cost vs accuracy)" widgets,
a lazy reader for videos and TIFF stacks, and the synthetic fly sample data.

napari finds the contributions through ``napari.yaml`` (npe2); importing this
package imports neither Qt nor napari.
"""

import os

# Numba runs its parallel loops on OpenMP (libgomp), whose idle threads spin at full speed
# by default. In a napari session the GUI thread needs a core too (painting the stroke,
# ~0.1 s a repaint on software OpenGL), so on a 2-core machine a spinning thread steals it
# and a fit's many short parallel regions wait whole time slices at their barriers: the
# 4-class live fit took 9.9 s instead of 0.8 s single-threaded at load 10, and 0.81 s with
# passive waiting; in the window, 4-class Train 47 s -> 13 s and a live stroke 7.4 s -> 1.0 s
# (docs/napari.md, "OpenMP threads wait passively"). Passive waiting costs a futex wake-up
# per parallel region. Set before libgomp starts (Numba loads it at the
# first parallel loop); a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__all__ = []
