"""Numba kernels of tree growth: binning, histograms, split search, partition.

Binned data is stored feature-major, ``Xb[m, i]`` (uint8), so each thread of a
``prange`` over features streams its own column. Bin 255 is reserved for
missing values; value bins are ``0 .. n_bins[m]-1`` where bin ``b`` holds
``edges[m, b-1] < x <= edges[m, b]``.

Histograms have shape ``(M, 256, 3)``: per bin the sums of gradient, hessian and
the number of labelled samples (``sample_weight > 0``).
"""

import types

import numpy as np
from numba import njit, prange

MISSING_BIN = 255
N_SLOTS = 256


@njit(parallel=True, cache=True)
def bin_data(X, edges, n_bins, origin, scale, first, out):
    """Map raw values to bins: out[m, i] = first b with X[i, m] <= edges[m, b].

    A plain binary search over 255 edges cost ~50 ns a value (a mispredicted
    branch per step). Here the value's cell on a uniform grid over the
    feature's edges (`bin_lookup_tables`) narrows the search to the few edges of
    that cell and its neighbours; a check of the range's end edges falls back
    to the whole range when rounding put the value outside, so the result is
    always the plain search's.
    """
    n_rows, n_features = X.shape
    chunk = 4096
    n_chunks = (n_rows + chunk - 1) // chunk
    top = float(first.shape[1] - 2)
    for c in prange(n_chunks):
        start = c * chunk
        stop = min(start + chunk, n_rows)
        for m in range(n_features):
            e = edges[m]
            cells = first[m]
            last = n_bins[m] - 1
            o = origin[m]
            s = scale[m]
            for i in range(start, stop):
                x = X[i, m]
                if np.isnan(x):
                    out[m, i] = MISSING_BIN
                    continue
                lo = 0
                hi = last
                if s > 0.0:
                    t = (x - o) * s
                    if t >= 1.0:
                        lo = cells[int(min(t, top)) - 1]
                    if t < top - 1.0:
                        hi = min(cells[int(max(t, 0.0)) + 2], last)
                    if (lo > 0 and x <= e[lo - 1]) or x > e[hi]:
                        lo = 0
                        hi = last
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if x <= e[mid]:
                        hi = mid
                    else:
                        lo = mid + 1
                out[m, i] = lo


def bin_lookup_tables(edges, n_bins, n_cells=1024):
    """Grid of `bin_data`: per feature an origin, a scale and the first bin of every cell.

    Cell ``c`` of feature m starts at ``origin + c / scale``; ``first[m, c]`` is
    the first bin whose edge is >= that start. Features with fewer than two
    finite edges get scale 0 (searched whole).
    """
    n_features = edges.shape[0]
    origin = np.zeros(n_features)
    scale = np.zeros(n_features)
    first = np.zeros((n_features, n_cells + 1), dtype=np.int32)
    for m in range(n_features):
        last = int(n_bins[m]) - 1
        if last < 2:
            continue
        low, high = edges[m, 0], edges[m, last - 1]
        if not high > low:
            continue
        origin[m], scale[m] = low, n_cells / (high - low)
        starts = low + np.arange(n_cells + 1) / scale[m]
        first[m] = np.searchsorted(edges[m, :last], starts, side="left")
    return origin, scale, first


@njit(cache=True)
def gather_rows(rows, grad, hess, labelled, cost_weight, loss_rows, g_out, h_out, cost_rows,
                c_out):
    """Copy per-row statistics into leaf order so histogram loops read them sequentially.

    Rows without loss weight add nothing to the histograms and rows without cost
    weight nothing to the unpaid sums (pixel training has many of both kinds),
    so each loop gets only its own rows. Returns ``(n_loss, n_cost)``: the
    outputs are filled up to these counts.
    """
    n_loss = 0
    n_cost = 0
    for k in range(rows.shape[0]):
        i = rows[k]
        if labelled[i] != 0.0:
            loss_rows[n_loss] = i
            g_out[n_loss] = grad[i]
            h_out[n_loss] = hess[i]
            n_loss += 1
        if cost_weight[i] != 0.0:
            cost_rows[n_cost] = i
            c_out[n_cost] = cost_weight[i]
            n_cost += 1
    return n_loss, n_cost


def _build_histograms(Xb, loss_rows, g, h, cost_rows, c, active, paid_bits, count_unpaid,
                      hist, unpaid):
    """Histograms of one leaf, and per feature the cost weight of rows that have not paid it.

    ``g, h`` are in the order of ``loss_rows`` and ``c`` in that of
    ``cost_rows`` (see `gather_rows`). ``count_unpaid[m]`` says whether feature m
    carries a per-sample cost; only then is its bitset read.
    """
    n_features = Xb.shape[0]
    n_loss = loss_rows.shape[0]
    n_cost = cost_rows.shape[0]
    for m in prange(n_features):
        hm = hist[m]
        hm[:, :] = 0.0
        unpaid[m] = 0.0
        if not active[m]:
            continue
        col = Xb[m]
        for k in range(n_loss):
            b = col[loss_rows[k]]
            hm[b, 0] += g[k]
            hm[b, 1] += h[k]
            hm[b, 2] += 1.0
        if count_unpaid[m]:
            bits = paid_bits[m]
            total = 0.0
            for k in range(n_cost):
                i = cost_rows[k]
                if (bits[i >> 6] >> np.uint64(i & 63)) & np.uint64(1) == 0:
                    total += c[k]
            unpaid[m] = total


def _find_best_splits(hist, n_bins, active, G, H, N, l2, min_samples, min_hessian,
                      gain_out, bin_out, default_left_out):
    """Best threshold per feature by the second-order gain (with the 1/2 factor).

    The cost penalty does not depend on the threshold, so it is applied later
    when features and leaves are compared. Features without a valid split get
    ``-inf``.
    """
    n_features = hist.shape[0]
    parent = G * G / (H + l2)
    for m in prange(n_features):
        best = -np.inf
        best_bin = 0
        best_left = False
        if active[m] and n_bins[m] >= 2:
            hm = hist[m]
            g_miss = hm[MISSING_BIN, 0]
            h_miss = hm[MISSING_BIN, 1]
            n_miss = hm[MISSING_BIN, 2]
            has_missing = n_miss > 0 or h_miss > 0
            gl = 0.0
            hl = 0.0
            nl = 0.0
            for b in range(n_bins[m] - 1):
                gl += hm[b, 0]
                hl += hm[b, 1]
                nl += hm[b, 2]
                for missing_left in range(2 if has_missing else 1):
                    gL = gl + g_miss * missing_left
                    hL = hl + h_miss * missing_left
                    nL = nl + n_miss * missing_left
                    gR = G - gL
                    hR = H - hL
                    nR = N - nL
                    if nL < min_samples or nR < min_samples or hL < min_hessian or hR < min_hessian:
                        continue
                    gain = 0.5 * (gL * gL / (hL + l2) + gR * gR / (hR + l2) - parent)
                    if gain > best:
                        best = gain
                        best_bin = b
                        best_left = missing_left == 1
        gain_out[m] = best
        bin_out[m] = best_bin
        default_left_out[m] = best_left


# A parallel region costs tens of microseconds when cores are free and milliseconds when
# they are busy (a GUI, other processes): small leaves and split searches run serially.
PARALLEL_HISTOGRAM_WORK = 1 << 18
PARALLEL_SPLIT_WORK = 1 << 16


def _renamed(function, suffix):
    """``function`` under another name, for a second compilation of it.

    Numba's on-disk cache names its files after the function and keys entries by
    bytecode and signature, not by compile options: the serial and parallel
    compilations of one function would share an entry, and whichever was cached
    first would serve both (a parallel kernel running serially).
    """
    twin = types.FunctionType(function.__code__, function.__globals__,
                              function.__name__ + suffix, function.__defaults__,
                              function.__closure__)
    twin.__qualname__ = function.__qualname__ + suffix
    twin.__doc__ = function.__doc__
    return twin


build_histograms_parallel = njit(parallel=True, cache=True)(_build_histograms)
build_histograms_serial = njit(cache=True)(_renamed(_build_histograms, "_serial"))
find_best_splits_parallel = njit(parallel=True, cache=True)(_find_best_splits)
find_best_splits_serial = njit(cache=True)(_renamed(_find_best_splits, "_serial"))


def build_histograms(Xb, loss_rows, g, h, cost_rows, *args):
    work = (loss_rows.shape[0] + cost_rows.shape[0]) * Xb.shape[0]
    kernel = build_histograms_parallel if work >= PARALLEL_HISTOGRAM_WORK else \
        build_histograms_serial
    kernel(Xb, loss_rows, g, h, cost_rows, *args)


def find_best_splits(hist, *args):
    kernel = (find_best_splits_parallel if hist.shape[0] * hist.shape[1] >= PARALLEL_SPLIT_WORK
              else find_best_splits_serial)
    kernel(hist, *args)


@njit(cache=True)
def partition(order, start, stop, column, threshold_bin, default_left, cost_weight,
              paid_bits, mark_paid, scratch):
    """Stable in-place partition of ``order[start:stop]`` by a split.

    Returns the number of rows going left and their cost weight. When
    ``mark_paid``, every row of the leaf is recorded as having paid the
    feature's per-sample cost (``paid_bits`` is that feature's bitset).
    """
    n_left = 0
    w_left = 0.0
    n_right = 0
    size = stop - start
    for k in range(start, stop):
        i = order[k]
        b = column[i]
        goes_left = default_left if b == MISSING_BIN else b <= threshold_bin
        if goes_left:
            order[start + n_left] = i
            n_left += 1
            w_left += cost_weight[i]
        else:
            scratch[n_right] = i
            n_right += 1
        if mark_paid:
            paid_bits[i >> 6] |= np.uint64(1) << np.uint64(i & 63)
    for k in range(n_right):
        order[start + n_left + k] = scratch[k]
    return n_left, w_left


@njit(parallel=True, cache=True)
def route_binned(Xb, rows, feature, threshold_bin, default_left, left, right, leaf_out):
    """Leaf reached by each of ``rows`` in one tree, on binned data."""
    for k in prange(rows.shape[0]):
        i = rows[k]
        node = 0
        while feature[node] >= 0:
            b = Xb[feature[node], i]
            if b == MISSING_BIN:
                go_left = default_left[node]
            else:
                go_left = b <= threshold_bin[node]
            node = left[node] if go_left else right[node]
        leaf_out[k] = node


@njit(cache=True)
def mark_paid_on_paths(Xb, feature, threshold_bin, default_left, left, right, rows, paid_bits):
    """Record, for rows that were not in the tree's training sample, the features on their path."""
    for k in range(rows.shape[0]):
        i = rows[k]
        node = 0
        while feature[node] >= 0:
            f = feature[node]
            paid_bits[f, i >> 6] |= np.uint64(1) << np.uint64(i & 63)
            b = Xb[f, i]
            go_left = default_left[node] if b == MISSING_BIN else b <= threshold_bin[node]
            node = left[node] if go_left else right[node]
