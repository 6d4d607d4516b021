"""Binning of raw features into at most 255 value bins (+ a missing bin).

Edges always sit halfway between two adjacent distinct training values, so a
group of tied values is never split and a new value is sent to the side of the
training value it is closer to. A feature with at most ``max_bins`` distinct
values gets one bin per value. Otherwise `cut_positions` chooses the cuts:
bins of about equal row counts, where a value holding as many rows as a bin
(a heavy tie: the 0 of a dark background, a coarse pyramid level's block
value) gets a bin of its own and the bins it does not need go to the other
values.
"""

import numpy as np
from numba import njit

from ._kernels import bin_data, bin_lookup_tables

_QUANTILE_SAMPLE = 200_000


@njit(cache=True)
def cut_positions(ordered, max_bins):
    """Where to cut a sorted column (no NaN) into at most ``max_bins`` bins of similar counts.

    A cut never splits a group of tied values. With at most ``max_bins``
    distinct values every value gets a bin. Otherwise one sweep from the
    smallest value closes a bin after a group of tied values when the bin holds
    at least the target count (rows not yet binned / bins left), or when the
    next group alone holds that many, so a heavy tie starts a bin of its own.
    The target is recomputed after every bin: bins that heavy ties do not use go
    to the rest of the range. One pass over the rows, whatever their dtype.

    Parameters
    ----------
    ordered : ndarray, shape (N,)
        Sorted finite values.
    max_bins : int

    Returns
    -------
    ndarray of int64
        Increasing positions ``p`` with ``ordered[p] < ordered[p + 1]``: cut between
        the two; at most ``max_bins - 1`` of them.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.r_[0.0, 1, 2, 3, np.full(8, 4.0), 5, 6, 7, 8]    # 16 rows, 4 is a heavy tie
    >>> cut_positions(x, 4).tolist()                             # {0..3} | {4 x 8} | {5, 6} | {7, 8}
    [3, 11, 13]
    """
    n_rows = ordered.shape[0]
    n_values = 1 if n_rows else 0
    for i in range(1, n_rows):
        if ordered[i] != ordered[i - 1]:
            n_values += 1
    cuts = np.empty(max(0, min(n_values, max_bins) - 1), dtype=np.int64)
    n_cuts = 0
    if n_values <= max_bins:
        for i in range(1, n_rows):
            if ordered[i] != ordered[i - 1]:
                cuts[n_cuts] = i - 1
                n_cuts += 1
        return cuts
    rows_left = n_rows
    bins_left = max_bins
    bin_start = 0                  # first row of the open bin
    group_end = 1                  # the open bin holds rows [bin_start, group_end)
    while group_end < n_rows and ordered[group_end] == ordered[0]:
        group_end += 1
    while group_end < n_rows and n_cuts < cuts.shape[0]:
        next_end = group_end + 1   # the next group of ties is [group_end, next_end)
        while next_end < n_rows and ordered[next_end] == ordered[group_end]:
            next_end += 1
        in_bin = group_end - bin_start
        target = rows_left / bins_left
        if in_bin >= target or next_end - group_end >= target:
            cuts[n_cuts] = group_end - 1
            n_cuts += 1
            rows_left -= in_bin
            bins_left -= 1
            bin_start = group_end
        group_end = next_end
    return cuts[:n_cuts]


def midpoints(low, high):
    """Edges halfway between ``low`` and ``high`` (float64), always in ``[low, high)``.

    Computed in float64 even for float32 data: the float32 midpoint of two
    adjacent float32 values can round up to ``high``, which would put both values
    in one bin.
    """
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    mid = 0.5 * low + 0.5 * high   # no overflow for values near the float64 limits
    return np.where(mid < high, mid, low)


class BinMapper:
    """Per-feature upper bin edges learned from the training data.

    Edges lie halfway between adjacent distinct values of (a sample of) the
    column: one bin per value when there are at most ``max_bins`` values,
    otherwise bins of about equal counts with heavy ties on their own
    (`cut_positions`). The last edge is ``+inf`` so every finite value has a
    bin; NaN goes to the missing bin.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [0.0], [0.0], [1.0], [1.0], [3.0]])
    >>> binner = BinMapper(max_bins=255).fit(X)
    >>> binner.edges[0, :binner.n_bins[0] - 1].tolist()
    [0.5, 2.0]
    >>> binner.transform(X)[0].tolist()
    [0, 0, 0, 1, 1, 2]
    """

    def __init__(self, max_bins=255, random_state=None):
        self.max_bins = int(max_bins)
        self.random_state = random_state

    def fit(self, X):
        n_rows, n_features = X.shape
        rng = np.random.default_rng(self.random_state)
        if n_rows > _QUANTILE_SAMPLE:
            # Edges from a sample: the same up to sampling noise, at a fraction of the
            # sorting and without copying X.
            sample = X[np.sort(rng.choice(n_rows, _QUANTILE_SAMPLE, replace=False))]
        else:
            sample = X
        self.edges = np.full((n_features, self.max_bins), np.inf)
        self.n_bins = np.ones(n_features, dtype=np.int32)
        for m in range(n_features):
            column = sample[:, m]
            ordered = np.sort(column[~np.isnan(column)])
            at = cut_positions(ordered, self.max_bins)
            cuts = midpoints(ordered[at], ordered[at + 1])
            self.edges[m, :cuts.size] = cuts
            self.n_bins[m] = cuts.size + 1
        self.lookup = bin_lookup_tables(self.edges, self.n_bins)
        return self

    def transform(self, X):
        out = np.empty((X.shape[1], X.shape[0]), dtype=np.uint8)
        bin_data(X, self.edges, self.n_bins, *self.lookup, out)
        return out
