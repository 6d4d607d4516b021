"""The UCI MiniBooNE_PID.txt format: a count line, then signal rows, then background rows."""

import numpy as np

from ._data import TabularData
from ._text import check_file, read_numeric_table


def load_miniboone(path, missing_sentinel=None):
    """Load a file in the layout of UCI's ``MiniBooNE_PID.txt``.

    The first line holds two counts, ``n_signal n_background``; then follow
    ``n_signal + n_background`` whitespace-separated rows of features (any
    float notation, e.g. ``0.283624E+01``). The first ``n_signal`` rows are
    signal (label 1, electron neutrinos), the rest background (label 0).

    Parameters
    ----------
    path : str or Path
    missing_sentinel : float, optional
        Value meaning "missing" (UCI MiniBooNE uses -999.0), replaced by NaN.

    Returns
    -------
    TabularData
        ``y`` is int64 (1 = signal), ``qid`` None, features named ``"x1"`` ... .

    Raises
    ------
    ValueError
        Naming file and line of a bad count line, a ragged row or a token that
        is not a number, or when the row count differs from the counts.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "MiniBooNE_PID.txt")
    >>> _ = open(path, "w").write("  1  2\\n 0.1E+01 2.0\\n 3.0 -999.0\\n 5.0 6.0\\n")
    >>> data = load_miniboone(path, missing_sentinel=-999.0)
    >>> data.y, data.X[1]
    (array([1, 0, 0]), array([ 3., nan]))
    """
    path = check_file(path, "MiniBooNE file")
    with open(path, encoding="utf-8", errors="replace") as fh:
        header = fh.readline().split()
    if len(header) != 2 or not all(token.isdigit() for token in header):
        raise ValueError(f"MiniBooNE file {path}, line 1: expected two counts "
                         f"'n_signal n_background', found {' '.join(header)!r}")
    n_signal, n_background = (int(token) for token in header)
    X = read_numeric_table(path, skip_lines=1, comments=None, what="MiniBooNE file")
    if X.shape[0] != n_signal + n_background:
        raise ValueError(f"MiniBooNE file {path}: line 1 announces {n_signal} signal + "
                         f"{n_background} background = {n_signal + n_background} rows, but the "
                         f"file has {X.shape[0]}")
    if missing_sentinel is not None:
        X[X == missing_sentinel] = np.nan
    y = np.zeros(X.shape[0], dtype=np.int64)
    y[:n_signal] = 1
    names = tuple(f"x{column + 1}" for column in range(X.shape[1]))
    return TabularData(X, y, None, names)
