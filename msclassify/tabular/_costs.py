"""Feature-cost files: one non-negative cost per line, line i = feature i."""

import math

import numpy as np

from ._text import check_file, data_lines


def load_feature_costs(path, n_features=None):
    """Read a feature-cost file (the format of BudgetRF's ``-c`` option).

    One cost per line, in feature order; blank lines and text after ``#`` are
    ignored.

    Parameters
    ----------
    path : str or Path
    n_features : int, optional
        If given, the file must hold exactly this many costs.

    Returns
    -------
    ndarray of float64, shape (n_features,)

    Raises
    ------
    ValueError
        Naming file and line of a value that is not a number, negative or not
        finite, or saying how many costs were found versus expected.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "costs")
    >>> _ = open(path, "w").write("1\\n5.0\\n20\\n")
    >>> load_feature_costs(path, n_features=3)
    array([ 1.,  5., 20.])
    """
    path = check_file(path, "feature-cost file")
    costs = []
    for number, line in data_lines(path):
        tokens = line.split()
        if len(tokens) != 1:
            raise ValueError(f"feature-cost file {path}, line {number}: expected one cost per "
                             f"line, found {len(tokens)} values")
        try:
            cost = float(tokens[0])
        except ValueError:
            raise ValueError(f"feature-cost file {path}, line {number}: {tokens[0]!r} is not a "
                             "number") from None
        if not math.isfinite(cost) or cost < 0:
            raise ValueError(f"feature-cost file {path}, line {number}: cost {tokens[0]} must be "
                             "finite and >= 0")
        costs.append(cost)
    if not costs:
        raise ValueError(f"feature-cost file {path} holds no costs")
    if n_features is not None and len(costs) != n_features:
        raise ValueError(f"feature-cost file {path} holds {len(costs)} costs but the data has "
                         f"{n_features} features; give one cost per feature, in feature order")
    return np.array(costs, dtype=np.float64)
