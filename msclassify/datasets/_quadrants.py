"""The synthetic data of the CSTC paper (Xu et al. 2013, Sec. 5.1).

Cheap features that tell the quadrant, expensive ones that each know the label
in one quadrant only.
"""

import numpy as np

__all__ = ["QUADRANT_FEATURE_COSTS", "make_cost_quadrants"]

# sign(x), sign(z) cost 1; each quadrant's expert feature costs 10 (CSTC paper, Sec. 5.1)
QUADRANT_FEATURE_COSTS = (1.0, 1.0, 10.0, 10.0, 10.0, 10.0)
_QUADRANT_MEANS = np.array([-10.0, -4.0, 4.0, 10.0])
_QUADRANT_PRIORS = np.array([0.05, 0.3, 0.7, 0.95])


def make_cost_quadrants(n, seed=0, kind="regression"):
    """The CSTC paper's synthetic data (Sec. 5.1): inputs in the four quadrants of [-1, 1]².

    Features: sign(x), sign(z) (cheap, `QUADRANT_FEATURE_COSTS`), and one
    expensive feature per quadrant that equals the exact label in its quadrant
    and is noise elsewhere. A cost-sensitive tree should buy, on each quadrant's
    branch, only that quadrant's expert (cost 1 + 1 + 10 per sample).

    Parameters
    ----------
    n : int
    seed : int
    kind : {"regression", "classification"}
        Regression (the paper): labels ~ N(quadrant mean, 1). Classification
        (an analogue): P(y = 1) depends on the quadrant, the expert holds the
        label as -1/+1.

    Returns
    -------
    X : ndarray of shape (n, 6)
    y : ndarray of shape (n,)
    quadrant : ndarray of shape (n,), int in 0..3
        ``2 [x > 0] + [z > 0]``; the quadrant's expert is column ``2 + quadrant``.

    Examples
    --------
    >>> X, y, quadrant = make_cost_quadrants(5, seed=0, kind="classification")
    >>> X.shape, bool(np.all(X[np.arange(5), 2 + quadrant] == 2 * y - 1))
    ((5, 6), True)
    """
    if kind not in ("regression", "classification"):
        raise ValueError(f"kind must be 'regression' or 'classification', got {kind!r}")
    rng = np.random.default_rng(seed)
    xz = rng.uniform(-1, 1, size=(n, 2))
    sign_x, sign_z = np.sign(xz[:, 0]), np.sign(xz[:, 1])
    quadrant = 2 * (sign_x > 0) + (sign_z > 0)
    if kind == "regression":
        y = rng.normal(_QUADRANT_MEANS[quadrant], 1.0)
        exact, noise = y, 10.0
    else:
        y = (rng.random(n) < _QUADRANT_PRIORS[quadrant]).astype(int)
        exact, noise = 2.0 * y - 1.0, 3.0
    experts = rng.normal(0.0, noise, size=(n, 4))
    experts[np.arange(n), quadrant] = exact
    return np.column_stack([sign_x, sign_z, experts]), y, quadrant
