"""Quantile binning of raw features into at most 255 value bins (+ a missing bin)."""

import numpy as np

from ._kernels import bin_data, bin_lookup_tables

_QUANTILE_SAMPLE = 200_000


class BinMapper:
    """Per-feature upper bin edges learned from the training data.

    A feature with few distinct values gets one bin per value (edges halfway
    between neighbours); otherwise edges are quantiles of (a sample of) the
    column. The last edge is ``+inf`` so every finite value has a bin; NaN goes
    to the missing bin.
    """

    def __init__(self, max_bins=255, random_state=None):
        self.max_bins = int(max_bins)
        self.random_state = random_state

    def fit(self, X):
        n_rows, n_features = X.shape
        rng = np.random.default_rng(self.random_state)
        if n_rows > _QUANTILE_SAMPLE:
            # Quantiles from a sample: the same edges up to sampling noise, at a fraction of
            # the sorting and without copying X.
            sample = X[np.sort(rng.choice(n_rows, _QUANTILE_SAMPLE, replace=False))]
        else:
            sample = X
        self.edges = np.full((n_features, self.max_bins), np.inf)
        self.n_bins = np.ones(n_features, dtype=np.int32)
        quantiles = np.linspace(0, 1, self.max_bins + 1)[1:-1]
        for m in range(n_features):
            column = sample[:, m]
            # one sort serves both the distinct values and the quantiles
            ordered = np.sort(column[~np.isnan(column)])
            values = ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if ordered.size else ordered
            if values.size <= 1:
                continue
            if values.size <= self.max_bins:
                cuts = (values[:-1] + values[1:]) / 2.0
            else:
                # np.quantile(..., method="lower") without sorting again
                lower = np.floor((ordered.size - 1) * quantiles).astype(np.intp)
                cuts = np.unique(ordered[lower])
                cuts = cuts[cuts < values[-1]]
            self.edges[m, :cuts.size] = cuts
            self.n_bins[m] = cuts.size + 1
        self.lookup = bin_lookup_tables(self.edges, self.n_bins)
        return self

    def transform(self, X):
        out = np.empty((X.shape[1], X.shape[0]), dtype=np.uint8)
        bin_data(X, self.edges, self.n_bins, *self.lookup, out)
        return out
