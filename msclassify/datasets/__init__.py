"""Data sets: the sample data that ships with msclassify, and the papers' synthetic data.

`load_sample_flies`, `make_sample_flies`
    the synthetic fly-arena video (8 frames with exact masks and scribbles),
    shipped as package data, and its deterministic generator
`sample_data_path`
    the folder of the shipped sample data (``flies/``, and ``tabular/``: small
    synthetic tables in the svmlight/LETOR, MiniBooNE and CSV formats with
    feature-cost files)
`make_cost_quadrants`, `QUADRANT_FEATURE_COSTS`
    the CSTC paper's quadrant data (Xu et al., "Cost-Sensitive Tree of
    Classifiers", ICML 2013, Sec. 5.1)
"""

from ._flies import SampleFlies, load_sample_flies, make_sample_flies
from ._quadrants import QUADRANT_FEATURE_COSTS, make_cost_quadrants
from ._sample_data import sample_data_path

__all__ = ["QUADRANT_FEATURE_COSTS", "SampleFlies", "load_sample_flies", "make_cost_quadrants",
           "make_sample_flies", "sample_data_path"]
