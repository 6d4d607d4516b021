"""`TabularData`: what every tabular loader returns."""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class TabularData:
    """A loaded tabular data set.

    Attributes
    ----------
    X : ndarray of float64, shape (N, M)
        Dense features. NaN marks a missing value (only where the loader was
        asked to produce one, e.g. ``missing_sentinel=-999.0`` or ``absent=np.nan``).
    y : ndarray, shape (N,)
        Labels: int64 when every label is a whole number, float64 otherwise
        (strings for a CSV whose label column is not numeric).
    qid : ndarray of int64, shape (N,), or None
        Query id of each row for ranking data (rows of a query are contiguous);
        None for plain classification data.
    feature_names : tuple of str
        One name per column of ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> data = TabularData(np.zeros((3, 2)), np.array([0, 1, 1]), np.array([7, 7, 9]), ("a", "b"))
    >>> data.group_sizes
    array([2, 1])
    """

    X: np.ndarray
    y: np.ndarray
    qid: np.ndarray | None = None
    feature_names: tuple = ()

    def __post_init__(self):
        if self.X.ndim != 2 or self.y.shape != (self.X.shape[0],):
            raise ValueError(f"X must be (N, M) and y (N,); got X {self.X.shape}, y {self.y.shape}")
        if self.qid is not None and self.qid.shape != self.y.shape:
            raise ValueError(f"qid must have one entry per row ({self.y.shape[0]}), "
                             f"got shape {self.qid.shape}")
        if len(self.feature_names) != self.X.shape[1]:
            raise ValueError(f"{len(self.feature_names)} feature names for {self.X.shape[1]} "
                             "columns")

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_features(self):
        return self.X.shape[1]

    @property
    def group_sizes(self):
        """Lengths of the runs of equal ``qid`` (LightGBM's ``group``), or None without qid."""
        return None if self.qid is None else run_lengths(self.qid)


def run_lengths(values):
    """Lengths of the runs of equal consecutive values."""
    if values.size == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    return np.diff(np.r_[starts, values.size]).astype(np.int64)


def labels_as_numbers(values):
    """float64 labels as int64 when all are whole numbers (so classes print as 0/1, not 0./1.)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size and np.all(np.isfinite(values)) and np.all(values == np.round(values)) \
            and np.all(np.abs(values) < 2**53):
        return values.astype(np.int64)
    return values
