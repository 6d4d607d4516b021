"""Budgeted-learning baselines from the papers, with scikit-learn interfaces.

GreedyMiser is the special case of CEGB (Peter et al. 2017, supplement) and lives
with the core as a preset; it is re-exported here beside the other baselines, as
is `select_within_budget` (from `msclassify.budget`), which picks among them.
"""

from ..budget import select_within_budget
from ..cegb import GreedyMiserClassifier, GreedyMiserRegressor
from ._budgetrf import BudgetRFClassifier, threshold_pairs_impurity
from ._cstc import CSTCClassifier, CSTCRegressor
from ._grbb import GRBBClassifier, LaplacianBoostingClassifier

__all__ = ["BudgetRFClassifier", "CSTCClassifier", "CSTCRegressor", "GRBBClassifier",
           "GreedyMiserClassifier", "GreedyMiserRegressor", "LaplacianBoostingClassifier",
           "select_within_budget", "threshold_pairs_impurity"]
