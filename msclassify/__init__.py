"""msclassify: pixel and tabular classifiers that are accurate and cheap to run.

Cost-Efficient Gradient Boosting (Peter et al., NIPS 2017) in Numba, with an
image-pyramid feature bank, a napari plugin and a batch CLI.

The names below are imported on first use, so that ``import msclassify.io``
(the napari reader, the command line) does not pay for Numba, scikit-learn
and SciPy's statistics before it needs them.
"""

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "CEGBClassifier": ".cegb", "CEGBRegressor": ".cegb", "GreedyMiserClassifier": ".cegb",
    "GreedyMiserRegressor": ".cegb", "ModelFileError": ".modelfile", "load_model": ".modelfile",
    "PixelClassifier": ".pixel", "datasets": None, "metrics": None,
}

__all__ = ["CEGBClassifier", "CEGBRegressor", "GreedyMiserClassifier", "GreedyMiserRegressor",
           "ModelFileError", "PixelClassifier", "datasets", "load_model", "metrics",
           "__version__"]


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _LAZY[name]
    value = importlib.import_module(f".{name}" if module is None else module, __name__)
    if module is not None:
        value = getattr(value, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
