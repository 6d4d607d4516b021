"""Data sets: the sample fly video and the papers' synthetic data.

`load_sample_flies`
    the synthetic fly-arena video of ``sample_data/flies/`` with exact masks and scribbles
`make_cost_quadrants`, `QUADRANT_FEATURE_COSTS`
    the CSTC paper's quadrant data (Xu et al. 2013, Sec. 5.1)
"""

from ._flies import SampleFlies, load_sample_flies
from ._quadrants import QUADRANT_FEATURE_COSTS, make_cost_quadrants

__all__ = ["QUADRANT_FEATURE_COSTS", "SampleFlies", "load_sample_flies", "make_cost_quadrants"]
