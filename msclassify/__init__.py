"""msclassify: pixel and tabular classifiers that are accurate and cheap to run.

Cost-Efficient Gradient Boosting (Peter et al., NIPS 2017) in Numba, with an
image-pyramid feature bank, a napari plugin and a batch CLI.

The names below are imported when first used (PEP 562), so that ``import
msclassify.io`` (the napari reader, the command line) does not pay for Numba,
scikit-learn and SciPy's statistics before it needs them, and a Ctrl-C while a
command starts is handled by it.
"""

import importlib
import os

__version__ = "0.1.0"

# Numba's parallel kernels run on OpenMP (libgomp) threads. After each kernel libgomp's idle
# threads spin for about 3 ms by default (GOMP_SPINCOUNT=300000); tree growth launches
# thousands of short kernels, so next to other OpenMP programs or napari's GUI thread the
# spinning threads took the cores from the ones with work (a 4-class fit on 2 threads: 24-28 s
# of CPU instead of 5-6 s). A short spin (3000, tens of microseconds) keeps most of the
# spinning's speed on an idle machine and wastes no core when busy; sleeping at once
# (OMP_WAIT_POLICY=PASSIVE) was 12-20 % slower idle (docs/scribbles.md, section 12). A user's
# OMP_WAIT_POLICY or GOMP_SPINCOUNT wins; libgomp reads it when Numba first loads it.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "3000"

# name -> module that defines it
_EXPORTS = {
    "CEGBClassifier": ".cegb", "CEGBRegressor": ".cegb", "GreedyMiserClassifier": ".cegb",
    "GreedyMiserRegressor": ".cegb", "ModelFileError": ".modelfile", "load_model": ".models",
    "PixelClassifier": ".pixel", "datasets": ".datasets", "metrics": ".metrics",
}

__all__ = ["CEGBClassifier", "CEGBRegressor", "GreedyMiserClassifier", "GreedyMiserRegressor",
           "ModelFileError", "PixelClassifier", "datasets", "load_model", "metrics",
           "__version__"]


def __getattr__(name):
    if name in _EXPORTS:
        module = importlib.import_module(_EXPORTS[name], __name__)
        value = module if name in ("datasets", "metrics") else getattr(module, name)
        globals()[name] = value
        return value
    try:  # a submodule, e.g. msclassify.io
        return importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__():
    return sorted(set(globals()) | set(__all__))
