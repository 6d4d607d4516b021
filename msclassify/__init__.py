"""msclassify: pixel and tabular classifiers that are accurate and cheap to run.

Cost-Efficient Gradient Boosting (Peter et al., NIPS 2017) in Numba, with an
image-pyramid feature bank, a napari plugin and a batch CLI.
"""

from . import datasets, metrics
from .cegb import CEGBClassifier, CEGBRegressor, GreedyMiserClassifier, GreedyMiserRegressor
from .modelfile import ModelFileError, load_model
from .pixel import PixelClassifier

__version__ = "0.1.0"

__all__ = ["CEGBClassifier", "CEGBRegressor", "GreedyMiserClassifier", "GreedyMiserRegressor",
           "ModelFileError", "PixelClassifier", "datasets", "load_model", "metrics",
           "__version__"]
