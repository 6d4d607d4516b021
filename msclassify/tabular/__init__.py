"""Tabular data: svmlight/LETOR (with qid or .query files), MiniBooNE text, CSV, feature costs.

Every loader returns a `TabularData` (dense float64 ``X``, labels ``y``, optional
query ids ``qid``, ``feature_names``) and raises ValueError naming the file and
line of anything malformed. ``load_*`` helpers for the shared real data sets take
the data folder as their first argument.
"""

from ._costs import load_feature_costs
from ._csv import load_csv
from ._data import TabularData
from ._miniboone import load_miniboone
from ._shared_sets import (load_covtype_20k, load_higgs_sample, load_miniboone_tiny,
                           load_yahoo_feature_costs, load_yahoo_ltr_sample)
from ._svmlight import load_svmlight, read_query_file

__all__ = ["TabularData", "load_covtype_20k", "load_csv", "load_feature_costs",
           "load_higgs_sample", "load_miniboone", "load_miniboone_tiny", "load_svmlight",
           "load_yahoo_feature_costs", "load_yahoo_ltr_sample", "read_query_file"]
