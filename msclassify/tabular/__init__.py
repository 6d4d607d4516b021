"""Tabular data and cost-accuracy sweeps.

Data: svmlight/LETOR (with qid or .query files), MiniBooNE text, CSV, feature
costs. Sweeps: CEGB at several cost tradeoffs against plain boosting.

Every loader returns a `TabularData` (dense float64 ``X``, labels ``y``, optional
query ids ``qid``, ``feature_names``) and raises ValueError naming the file and
line of anything malformed. `load_table` picks the format by name or content,
`load_train_test` adds a test set and feature costs, `load_table_for_model` loads data
to score a saved model on. `cost_sweep` trains plain
gradient boosting and CEGB for each cost tradeoff and scores them
(`score_model`: accuracy, or precision@5 and NDCG@5 for ranking data);
`plot_cost_sweep` draws the result.
"""

from ._costs import load_feature_costs
from ._csv import load_csv
from ._data import TabularData
from ._load import (FILE_FORMATS, load_table, load_table_for_model, load_train_test,
                    split_train_test)
from ._miniboone import load_miniboone
from ._svmlight import load_svmlight, read_query_file
from ._sweep import (DEFAULT_COST_TRADEOFFS, CostSweep, SweepPoint, check_trainable, cost_sweep,
                     parse_cost_tradeoffs, plot_cost_sweep, score_model, training_targets)

__all__ = ["DEFAULT_COST_TRADEOFFS", "FILE_FORMATS", "CostSweep", "SweepPoint", "TabularData",
           "check_trainable", "cost_sweep", "load_csv", "load_feature_costs", "load_miniboone",
           "load_svmlight", "load_table", "load_table_for_model", "load_train_test", "parse_cost_tradeoffs",
           "plot_cost_sweep", "read_query_file", "score_model", "split_train_test",
           "training_targets"]
