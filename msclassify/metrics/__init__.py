"""Evaluation metrics.

Segmentation (instance label images, single frames or videos)
    `seg_score`        Cell Tracking Challenge SEG: mean Jaccard index of the reference objects
    `SegResult`        per-frame and per-object detail (``seg_score(..., per_frame=True)``)
    `label_instances`  turn a semantic (fly / background) mask into instance labels for `seg_score`

Classification, ranking and cost-accuracy curves
    `accuracy`, `roc_auc`
    `precision_at_k`   Nan et al. (2015)'s precision@k for learning to rank (Yahoo! LTR)
    `ndcg_at_k`        normalised discounted cumulative gain per query
    `cost_accuracy_curve`, `cost_accuracy_auc`, `CostAccuracyCurve`
                       Pareto frontier of (mean prediction cost, score) and its normalised area
"""

from ._cost_accuracy import CostAccuracyCurve, cost_accuracy_auc, cost_accuracy_curve
from ._ranking import accuracy, ndcg_at_k, precision_at_k, roc_auc
from ._segmentation import SegResult, label_instances, seg_score

__all__ = ["CostAccuracyCurve", "SegResult", "accuracy", "cost_accuracy_auc",
           "cost_accuracy_curve", "label_instances", "ndcg_at_k", "precision_at_k", "roc_auc",
           "seg_score"]
