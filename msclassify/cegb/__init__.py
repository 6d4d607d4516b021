"""Cost-Efficient Gradient Boosting (Peter et al., NIPS 2017) in Numba.

The core knows nothing of images: it trains on a matrix ``X`` with per-feature
costs. See docs/design.md (*CEGB, exactly* and *Path-aware shares*) for the
exact penalties.
"""

from ._booster import Booster, PredictionCost
from ._losses import MIN_HESSIAN, class_probabilities, most_probable_class, output_probabilities
from ._params import CEGBParams
from ._sklearn import CEGBClassifier, CEGBRegressor, GreedyMiserClassifier, GreedyMiserRegressor
from ._train import train

__all__ = ["MIN_HESSIAN", "Booster", "CEGBClassifier", "CEGBParams", "CEGBRegressor",
           "GreedyMiserClassifier", "GreedyMiserRegressor", "PredictionCost",
           "class_probabilities", "most_probable_class", "output_probabilities", "train"]
