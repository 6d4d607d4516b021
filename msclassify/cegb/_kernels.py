"""Numba kernels of tree growth: binning, histograms, split search, partition.

Binned data is stored feature-major, ``Xb[m, i]`` (uint8), so each thread of a
``prange`` over features streams its own column. Bin 255 is reserved for
missing values; value bins are ``0 .. n_bins[m]-1`` where bin ``b`` holds
``edges[m, b-1] < x <= edges[m, b]``.

Histograms have shape ``(M, 256, 4)``: per bin the sums of gradient, hessian and
the number of labelled samples (``sample_weight > 0``), and a padding lane, so
that a bin is one 4-lane vector (`add_lanes`). Features are histogrammed three at a
time (`_histograms`).
"""

import types

import numpy as np
from numba import njit, prange

from ._lanes import LANES, add_lanes, prefetch

MISSING_BIN = 255
N_SLOTS = 256
# How far ahead a gather of rows' statistics prefetches (32 was faster than 16 and 64).
PREFETCH_ROWS = 32
# Rows per chunk of the partition (fixed, so that results do not depend on the thread count).
PARTITION_CHUNK = 4096


@njit(parallel=True, cache=True, nogil=True)
def bin_data(X, edges, n_bins, origin, scale, first, out):
    """Map raw values to bins: out[m, i] = first b with X[i, m] <= edges[m, b].

    A plain binary search over 255 edges cost ~50 ns a value (a mispredicted
    branch per step). Here the value's cell on a uniform grid over the
    feature's edges (`bin_lookup_tables`) gives the first bin of that cell, and
    the bin is found by stepping from there: down while the edge below is not
    below the value (rounding of the cell index), up while the value is above
    the edge. Both steps are usually taken zero times or once (a cell holds few
    edges), so the branches are predictable; the result is always the plain
    search's (the last edge is +inf, so the upward walk stops). On a 4-class
    photo's 11,152 training rows of 150 features this took 17 ms instead of the
    28 ms of a binary search within the cell and its neighbours (63 bins; 28 vs
    38 ms with 255).
    """
    n_rows, n_features = X.shape
    chunk = 4096
    n_chunks = (n_rows + chunk - 1) // chunk
    top = float(first.shape[1] - 1)
    for c in prange(n_chunks):
        start = c * chunk
        stop = min(start + chunk, n_rows)
        for m in range(n_features):
            e = edges[m]
            cells = first[m]
            o = origin[m]
            s = scale[m]
            for i in range(start, stop):
                x = X[i, m]
                if np.isnan(x):
                    out[m, i] = MISSING_BIN
                    continue
                b = cells[int(min(max((x - o) * s, 0.0), top))]
                while b > 0 and x <= e[b - 1]:
                    b -= 1
                while x > e[b]:
                    b += 1
                out[m, i] = b


# Radix sort of bin edge learning: 11-bit digits of 64-bit keys, a pass skipped when all keys
# share its digit (float32 data cast to float64 has its low 29 bits zero: 4 passes, not 6).
_RADIX_BITS = 11
_SIGN = np.uint64(1) << np.uint64(63)


@njit(cache=True, nogil=True)
def sort_floats(values, keys, spare):
    """Sort the float64 ``values`` (no NaN) in place: an LSD radix sort of their bits.

    Each value becomes an unsigned key that orders like the value (the sign bit
    set for positive numbers, all bits flipped for negative ones), the keys are
    sorted by 11-bit digits, least significant first, and turned back into
    values. -0.0 sorts just before +0.0 (they compare equal). ``keys`` and
    ``spare`` are uint64 work arrays of the same length. On the columns of a
    pixel training set it took a quarter of the time of `numpy.sort`.
    """
    n = values.shape[0]
    bits = values.view(np.uint64)
    for i in range(n):
        k = bits[i]
        keys[i] = ~k if k & _SIGN else k | _SIGN
    radix = 1 << _RADIX_BITS
    mask = np.uint64(radix - 1)
    count = np.empty(radix + 1, dtype=np.int64)
    src, dst = keys, spare
    for shift in range(0, 64, _RADIX_BITS):
        count[:] = 0
        s = np.uint64(shift)
        for i in range(n):
            count[((src[i] >> s) & mask) + 1] += 1
        if count.max() == n:       # one digit for all keys: this pass would not move any
            continue
        for d in range(radix):
            count[d + 1] += count[d]
        for i in range(n):
            d = (src[i] >> s) & mask
            dst[count[d]] = src[i]
            count[d] += 1
        src, dst = dst, src
    for i in range(n):
        k = src[i]
        bits[i] = k & ~_SIGN if k & _SIGN else ~k


@njit(parallel=True, cache=True, nogil=True)
def column_edges(X, quantiles, edges, n_bins):
    """Upper bin edges of every column of ``X`` (`msclassify.cegb.BinMapper`'s rule).

    Per column, in parallel: its non-NaN values sorted (`sort_floats`); one bin per
    distinct value if there are at most ``len(quantiles) + 1`` of them, otherwise
    bins ending at the values at row positions ``floor((n - 1) * q)`` (NumPy's
    ``quantile(..., method="lower")``); each edge is the float64 midpoint between the
    last value of its bin and the next distinct value (`_midpoint`). Writes
    ``edges[m, :n_bins[m] - 1]`` and ``n_bins[m]`` (1 for a constant column).
    """
    n_rows, n_features = X.shape
    max_bins = quantiles.shape[0] + 1
    for m in prange(n_features):
        ordered = np.empty(n_rows)
        n = 0
        for i in range(n_rows):
            x = X[i, m]
            if not np.isnan(x):
                ordered[n] = x
                n += 1
        ordered = ordered[:n]
        sort_floats(ordered, np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64))
        # distinct values and, per row position, the index of its value among them
        values = np.empty(n)
        rank = np.empty(n, dtype=np.int64)
        n_values = 0
        for i in range(n):
            if i == 0 or ordered[i] != ordered[i - 1]:
                values[n_values] = ordered[i]
                n_values += 1
            rank[i] = n_values - 1
        n_cuts = 0
        if n_values > max_bins:
            last = -1
            for q in quantiles:
                r = rank[int(np.floor((n - 1) * q))]
                if r != last and r < n_values - 1:
                    edges[m, n_cuts] = _midpoint(values[r], values[r + 1])
                    n_cuts += 1
                    last = r
        elif n_values > 1:
            for r in range(n_values - 1):
                edges[m, r] = _midpoint(values[r], values[r + 1])
            n_cuts = n_values - 1
        n_bins[m] = n_cuts + 1


@njit(inline="always")
def _midpoint(low, high):
    """The edge halfway between ``low`` and ``high`` (float64), always in ``[low, high)``.

    Computed in float64 even for float32 data: the float32 midpoint of two adjacent
    float32 values can round up to ``high``, which would put both values in one bin
    (`tests/test_cegb_core.py`); ``0.5 * low + 0.5 * high`` cannot overflow.
    """
    mid = 0.5 * low + 0.5 * high
    return mid if mid < high else low


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


@njit(inline="always")
def _gather_loss(order, lo, hi, ghc, is_loss, loss_rows, sorted_ghc):
    """Copy the statistics of a leaf's labelled rows into leaf order, for sequential reading.

    Rows without loss weight add nothing to the histograms (pixel training has
    many), so they are left out. A leaf whose rows are consecutive and all
    labelled (the root without subsampling) is read in place: the returned
    ``first`` is its first row, else -1. Returns ``(first, n_loss)``.
    """
    first = order[lo] if hi > lo else -1
    if first >= 0 and order[hi - 1] - first == hi - lo - 1:
        for i in range(first, first + hi - lo):
            if not is_loss[i]:
                first = -1
                break
    else:
        first = -1
    if first >= 0:
        return first, hi - lo
    return first, _gather(order, lo, hi, ghc, is_loss, loss_rows, sorted_ghc, 0)


@njit(inline="always")
def _gather(rows, lo, hi, ghc, is_loss, loss_rows, sorted_ghc, at):
    """Copy the labelled rows of ``rows[lo:hi]`` and their statistics into ``loss_rows`` and
    ``sorted_ghc`` from position ``at`` on; returns the position after the last one."""
    for k in range(lo, hi):
        i = rows[k]
        if k + PREFETCH_ROWS < hi:
            prefetch(ghc, np.intp(rows[k + PREFETCH_ROWS]) * LANES)
        if is_loss[i]:
            loss_rows[at] = i
            for j in range(LANES):
                sorted_ghc[at, j] = ghc[i, j]
            at += 1
    return at


@njit(inline="always")
def _clear_bins(h, n_bins):
    """Zero the bins a feature with ``n_bins`` value bins uses in its histogram ``h``
    (N_SLOTS, LANES): ``0 .. n_bins - 1`` and `MISSING_BIN`. Its other bins are never
    written nor read, so a leaf's histograms touch ``n_bins + 1`` of the N_SLOTS bins: with
    few bins (a small ``max_bins``) most of the histogram memory stays out of the caches."""
    for bin_ in range(n_bins):
        for j in range(LANES):
            h[bin_, j] = 0.0
    for j in range(LANES):
        h[MISSING_BIN, j] = 0.0


@njit(inline="always")
def _histograms(Xb, n_bins, hist, group, first, n_loss, loss_rows, ghc, sorted_ghc):
    """Histograms ``hist[m]`` (each (N_SLOTS, LANES)) of the features m of ``group`` (up to
    three, `_group`; -1 past the end) over a leaf gathered by `_gather_loss`; each row's
    statistics are loaded once for all of them. Only the bins a feature has are written
    (`_clear_bins`). Every bin sums its rows in leaf order, however many features share the
    pass. Three features a pass took 9 % less time than two on a 4-class photo's root (four:
    20 % more, their histograms filling the 32 KB L1 cache)."""
    a, b, c = group
    for m in group:
        if m >= 0:
            _clear_bins(hist[m], n_bins[m])
    col_a, col_b, col_c = Xb[a], Xb[max(b, 0)], Xb[max(c, 0)]
    at_a, at_b, at_c = a * N_SLOTS * LANES, b * N_SLOTS * LANES, c * N_SLOTS * LANES
    if c >= 0:
        if first >= 0:
            for k in range(first, first + n_loss):
                add_lanes(hist, (at_a + np.intp(col_a[k]) * LANES,
                                 at_b + np.intp(col_b[k]) * LANES,
                                 at_c + np.intp(col_c[k]) * LANES), ghc, k * LANES)
        else:
            for k in range(n_loss):
                i = loss_rows[k]
                add_lanes(hist, (at_a + np.intp(col_a[i]) * LANES,
                                 at_b + np.intp(col_b[i]) * LANES,
                                 at_c + np.intp(col_c[i]) * LANES), sorted_ghc, k * LANES)
    elif b >= 0:
        if first >= 0:
            for k in range(first, first + n_loss):
                add_lanes(hist, (at_a + np.intp(col_a[k]) * LANES,
                                 at_b + np.intp(col_b[k]) * LANES), ghc, k * LANES)
        else:
            for k in range(n_loss):
                i = loss_rows[k]
                add_lanes(hist, (at_a + np.intp(col_a[i]) * LANES,
                                 at_b + np.intp(col_b[i]) * LANES), sorted_ghc, k * LANES)
    elif first >= 0:
        for k in range(first, first + n_loss):
            add_lanes(hist, at_a + np.intp(col_a[k]) * LANES, ghc, k * LANES)
    else:
        for k in range(n_loss):
            add_lanes(hist, at_a + np.intp(col_a[loss_rows[k]]) * LANES, sorted_ghc, k * LANES)


# Features histogrammed in one pass over a leaf's rows (`_group` and `_histograms` take three).
GROUP = 3


@njit(inline="always")
def _group(features, p):
    """The p-th group of `GROUP` consecutive ``features`` (-1 past the end)."""
    n = features.shape[0]
    at = GROUP * p
    return (features[at], features[at + 1] if at + 1 < n else -1,
            features[at + 2] if at + 2 < n else -1)


@njit(inline="always")
def _popcount(word):
    """Number of set bits of a uint64 (LLVM turns this idiom into one ``popcnt``)."""
    word = word - ((word >> np.uint64(1)) & np.uint64(0x5555555555555555))
    word = (word & np.uint64(0x3333333333333333)) + ((word >> np.uint64(2))
                                                    & np.uint64(0x3333333333333333))
    word = (word + (word >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((word * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(inline="always")
def _unpaid(bits, cost_rows, sorted_cost, n_cost, unit_cost):
    """Cost weight of the gathered cost rows whose bit in ``bits`` is not set.

    With ``unit_cost`` (every cost weight is 0 or 1; cost rows have 1) the weight
    is a count: integer adds without a branch, the same number as the sum of ones.
    """
    if unit_cost:
        count = 0
        for k in range(n_cost):
            i = cost_rows[k]
            count += np.int64((bits[i >> 6] >> np.uint64(i & 63)) & np.uint64(1))
        return float(n_cost - count)
    total = 0.0
    for k in range(n_cost):
        i = cost_rows[k]
        if (bits[i >> 6] >> np.uint64(i & 63)) & np.uint64(1) == 0:
            total += sorted_cost[k]
    return total


@njit(inline="always")
def _best_split(hm, n_bins, G, H, N, l2, min_samples, min_hessian):
    """Best threshold of one feature by the second-order gain (with the 1/2 factor).

    Returns ``(gain, bin, missing_left)``; the gain is ``-inf`` without a valid
    split. The cost penalty does not depend on the threshold, so it is applied
    later when features and leaves are compared.

    A feature without missing values in the leaf (its missing bin is zero) takes a
    loop without the missing-left side: the same gains, as adding the bin's zeros
    changes no sum that enters one, in a quarter less time on a photo's features.
    """
    best = -np.inf
    best_bin = 0
    best_left = False
    if n_bins < 2:
        return best, best_bin, best_left
    parent = G * G / (H + l2)
    g_miss = hm[MISSING_BIN, 0]
    h_miss = hm[MISSING_BIN, 1]
    n_miss = hm[MISSING_BIN, 2]
    has_missing = n_miss > 0 or h_miss > 0
    gl = 0.0
    hl = 0.0
    nl = 0.0
    if not has_missing:
        for b in range(n_bins - 1):
            gl += hm[b, 0]
            hl += hm[b, 1]
            nl += hm[b, 2]
            gain = _split_gain(gl, hl, nl, G, H, N, l2, parent, min_samples, min_hessian)
            if gain > best:
                best = gain
                best_bin = b
        return best, best_bin, best_left
    for b in range(n_bins - 1):
        gl += hm[b, 0]
        hl += hm[b, 1]
        nl += hm[b, 2]
        for missing_left in range(2):
            gain = _split_gain(gl + g_miss * missing_left, hl + h_miss * missing_left,
                               nl + n_miss * missing_left, G, H, N, l2, parent, min_samples,
                               min_hessian)
            if gain > best:
                best = gain
                best_bin = b
                best_left = missing_left == 1
    return best, best_bin, best_left


@njit(inline="always")
def _split_gain(gl, hl, nl, G, H, N, l2, parent, min_samples, min_hessian):
    """The gain of sending the left sums ``(gl, hl, nl)`` of a leaf's ``(G, H, N)`` left
    (with the 1/2 factor); ``-inf`` when a side has too few samples or too little hessian."""
    gR = G - gl
    hR = H - hl
    nR = N - nl
    if nl < min_samples or nR < min_samples or hl < min_hessian or hR < min_hessian:
        return -np.inf
    return 0.5 * (gl * gl / (hl + l2) + gR * gR / (hR + l2) - parent)


@njit(inline="always")
def _unpaid_of_rows(bits, mask, cost_weight, unit_cost):
    """Cost weight of the rows set in ``mask`` whose bit in ``bits`` is not set, in row order,
    and whether none of those rows has its bit set.

    Word by word: a word of 64 rows that have all paid costs one test, so once
    most rows have paid a feature this is nearly free. With ``unit_cost`` (every
    cost weight is 0 or 1) a word's weight is its number of set bits.
    """
    total = 0.0
    count = 0
    none_paid = True
    for w in range(mask.shape[0]):
        todo = mask[w] & ~bits[w]
        none_paid &= todo == mask[w]
        if unit_cost:
            count += _popcount(todo)
            continue
        if todo == 0:
            continue
        base = w << 6
        for j in range(64):
            if (todo >> np.uint64(j)) & np.uint64(1):
                total += cost_weight[base + j]
    return (float(count) if unit_cost else total), none_paid


def _root_splits(Xb, order, n, ghc, is_loss, cost_weight, unit_cost, cost_mask, paid_bits,
                 count_unpaid, n_bins, features, G, H, N, splittable, l2, min_samples, min_hessian,
                 loss_rows, sorted_ghc, hist, gain, split_bin, default_left, unpaid, none_paid):
    """Histograms, unpaid cost weights and best splits of the root (rows ``order[:n]``, slot 0).

    ``cost_mask`` is a bitset of the root's rows that carry cost weight (read
    only for features with a per-sample cost; ``unit_cost``: every cost weight
    is 0 or 1); ``none_paid[0, m]`` says that
    none of them has paid feature m yet. The tree's ``features`` (increasing) run
    in groups of three, the groups in parallel (in the parallel twin): each one's histogram
    is built, searched and left in ``hist[0, m]``; other features get no split.
    """
    first, n_loss = _gather_loss(order, 0, n, ghc, is_loss, loss_rows, sorted_ghc)
    for m in range(Xb.shape[0]):
        gain[0, m] = -np.inf
        split_bin[0, m] = 0
        default_left[0, m] = False
        unpaid[0, m] = 0.0
        none_paid[0, m] = False
    for p in prange((features.shape[0] + GROUP - 1) // GROUP):
        group = _group(features, p)
        _histograms(Xb, n_bins, hist[0], group, first, n_loss, loss_rows, ghc, sorted_ghc)
        for m in group:
            if m < 0:
                continue
            if count_unpaid[m]:
                unpaid[0, m], none_paid[0, m] = _unpaid_of_rows(paid_bits[m], cost_mask,
                                                                  cost_weight, unit_cost)
            if splittable:
                gain[0, m], split_bin[0, m], default_left[0, m] = _best_split(
                    hist[0, m], n_bins[m], G, H, N, l2, min_samples, min_hessian)


def _split_leaf(Xb, rows, src, start, stop, feature, threshold_bin, missing_left, ghc, is_loss,
                cost_weight, unit_cost, weigh, paid_bits, count_unpaid, n_bins, active, features,
                G, H, N,
                children_may_split, l2, min_samples, min_hessian, chunk_counts, loss_rows,
                sorted_ghc, cost_rows, sorted_cost, hist, slot, new_slot, gain, split_bin,
                default_left, unpaid, none_paid):
    """Split the leaf in ``slot`` and prepare both children.

    The leaf's rows ``rows[src, start:stop]`` are partitioned into
    ``rows[1 - src, start:stop]``, left child first, both in their previous
    order; when ``feature`` has a per-sample cost, all of them are recorded as
    having paid it. The child with fewer rows gets ``new_slot``: its histograms
    are built; the other child's are the parent's minus those, in place in
    ``slot``. Then both children's best splits and unpaid cost weights, for the
    tree's ``features`` in groups of three (``active`` marks them). A feature that none
    of the leaf's cost rows has paid (``none_paid``, kept per slot) is unpaid by all rows
    of the smaller child: their cost weight, summed once, instead of a look-up of every
    row per feature (the same sum in the same order, so the same number).

    A child that may not split (``children_may_split`` False, or fewer than
    ``2 * min_samples`` labelled rows) is never ranked nor split, so it gets no
    split, and no histograms: the larger child's are not subtracted, and when
    neither child may split (the last split of a tree) the smaller child's are
    not built either.

    The parallel twin partitions in chunks of `PARTITION_CHUNK` rows (one
    parallel pass counts, one places each row and gathers the smaller child's
    statistics), then runs the features in parallel. The chunks do not depend on
    the number of threads, so neither does the result.

    Returns ``(n_left, w_left, G_left, H_left, N_left)``: the left child's row
    count, cost weight (0 unless ``weigh``) and gradient, hessian and labelled
    sums (taken from the parent's histogram, so they agree with the split search).
    """
    hm = hist[slot, feature]
    GL = 0.0
    HL = 0.0
    NL = 0.0
    for b in range(threshold_bin + 1):
        GL += hm[b, 0]
        HL += hm[b, 1]
        NL += hm[b, 2]
    if missing_left:
        GL += hm[MISSING_BIN, 0]
        HL += hm[MISSING_BIN, 1]
        NL += hm[MISSING_BIN, 2]
    GR = G - GL
    HR = H - HL
    NR = N - NL
    left_may_split = children_may_split and NL >= 2 * min_samples
    right_may_split = children_may_split and NR >= 2 * min_samples
    # A child that may not split is never ranked nor split: it needs no histograms, and
    # neither child does when neither may split (the tree's last split, say).
    need_small = left_may_split or right_may_split

    order = rows[src]
    dest = rows[1 - src]
    column = Xb[feature]
    want_cost = count_unpaid.any()
    n_chunks = (stop - start + PARTITION_CHUNK - 1) // PARTITION_CHUNK
    # Per chunk: rows going left, labelled rows left / right, cost rows left / right.
    counts = chunk_counts[:n_chunks]
    weights = np.zeros(n_chunks)
    for c in prange(n_chunks):
        lo = start + c * PARTITION_CHUNK
        hi = min(lo + PARTITION_CHUNK, stop)
        n_left = 0
        loss_left = 0
        loss_all = 0
        cost_left = 0
        cost_all = 0
        w = 0.0
        for k in range(lo, hi):
            i = order[k]
            b = column[i]
            goes_left = missing_left if b == MISSING_BIN else b <= threshold_bin
            n_left += goes_left
            loss_all += is_loss[i]
            loss_left += is_loss[i] & goes_left
            if weigh:
                w += cost_weight[i] * goes_left
            if want_cost:
                has_cost = cost_weight[i] != 0.0
                cost_all += has_cost
                cost_left += has_cost & goes_left
        counts[c, 0] = n_left
        counts[c, 1] = loss_left
        counts[c, 2] = loss_all - loss_left
        counts[c, 3] = cost_left
        counts[c, 4] = cost_all - cost_left
        weights[c] = w
    n_left = 0
    w_left = 0.0
    for c in range(n_chunks):
        n_left += counts[c, 0]
        w_left += weights[c]
    mid = start + n_left
    small_is_left = n_left <= stop - mid
    # Where each chunk's rows go: its first left and right position, and its first
    # labelled and cost row of the smaller child in the gathered arrays.
    left_at = start
    right_at = mid
    loss_at = 0
    cost_at = 0
    for c in range(n_chunks):
        n_chunk = min(PARTITION_CHUNK, stop - start - c * PARTITION_CHUNK)
        chunk_left, chunk_loss, chunk_cost = counts[c, 0], 0, 0
        if small_is_left:
            chunk_loss, chunk_cost = counts[c, 1], counts[c, 3]
        else:
            chunk_loss, chunk_cost = counts[c, 2], counts[c, 4]
        counts[c, 0], counts[c, 1], counts[c, 2], counts[c, 3] = left_at, right_at, loss_at, cost_at
        left_at += chunk_left
        right_at += n_chunk - chunk_left
        loss_at += chunk_loss
        cost_at += chunk_cost
    n_loss = loss_at
    n_cost = cost_at
    for c in prange(n_chunks):
        lo = start + c * PARTITION_CHUNK
        hi = min(lo + PARTITION_CHUNK, stop)
        left_start = counts[c, 0]
        right_start = counts[c, 1]
        at_left = left_start
        at_right = right_start
        for k in range(lo, hi):
            i = order[k]
            b = column[i]
            goes_left = missing_left if b == MISSING_BIN else b <= threshold_bin
            dest[at_left if goes_left else at_right] = i
            at_left += goes_left
            at_right += 1 - goes_left
        small_lo, small_hi = (left_start, at_left) if small_is_left else (right_start, at_right)
        if need_small:
            _gather(dest, small_lo, small_hi, ghc, is_loss, loss_rows, sorted_ghc, counts[c, 2])
        if want_cost and need_small:
            at = counts[c, 3]
            for k in range(small_lo, small_hi):
                i = dest[k]
                if cost_weight[i] != 0.0:
                    cost_rows[at] = i
                    sorted_cost[at] = cost_weight[i]
                    at += 1
    if count_unpaid[feature] and unpaid[slot, feature] > 0.0:
        # (Rows of a leaf without unpaid cost weight have paid or carry no cost.)
        bits = paid_bits[feature]
        for k in range(start, stop):
            i = dest[k]
            bits[i >> 6] |= np.uint64(1) << np.uint64(i & 63)

    if small_is_left:
        small_may_split, large_may_split = left_may_split, right_may_split
        Gs, Hs, Ns, Gl, Hl, Nl = GL, HL, NL, GR, HR, NR
    else:
        small_may_split, large_may_split = right_may_split, left_may_split
        Gs, Hs, Ns, Gl, Hl, Nl = GR, HR, NR, GL, HL, NL
    for m in range(Xb.shape[0]):
        if not (active[m] and need_small):
            _clear_split(m, slot, new_slot, gain, split_bin, default_left, unpaid, none_paid)
    if not need_small:
        return n_left, w_left, GL, HL, NL
    small_cost = 0.0
    for k in range(n_cost):
        small_cost += sorted_cost[k]
    for p in prange((features.shape[0] + GROUP - 1) // GROUP):
        group = _group(features, p)
        _histograms(Xb, n_bins, hist[new_slot], group, -1, n_loss, loss_rows, ghc, sorted_ghc)
        for m in group:
            if m < 0:
                continue
            parent_unpaid = unpaid[slot, m]
            parent_none_paid = none_paid[slot, m]
            _clear_split(m, slot, new_slot, gain, split_bin, default_left, unpaid, none_paid)
            small = hist[new_slot, m]
            large = hist[slot, m]
            if large_may_split:
                for bin_ in range(n_bins[m]):
                    for j in range(LANES):
                        large[bin_, j] -= small[bin_, j]
                for j in range(LANES):
                    large[MISSING_BIN, j] -= small[MISSING_BIN, j]
            if count_unpaid[m] and parent_unpaid > 0.0 and m != feature:
                # A child of a leaf whose rows have all paid m has nothing left to pay, nor
                # has one of a leaf split on m.
                if parent_none_paid:
                    small_unpaid = small_cost
                    none_paid[new_slot, m] = True
                    none_paid[slot, m] = True
                else:
                    small_unpaid = _unpaid(paid_bits[m], cost_rows, sorted_cost, n_cost,
                                           unit_cost)
                unpaid[new_slot, m] = small_unpaid
                unpaid[slot, m] = max(parent_unpaid - small_unpaid, 0.0)
            if small_may_split:
                gain[new_slot, m], split_bin[new_slot, m], default_left[new_slot, m] = \
                    _best_split(small, n_bins[m], Gs, Hs, Ns, l2, min_samples, min_hessian)
            if large_may_split:
                gain[slot, m], split_bin[slot, m], default_left[slot, m] = _best_split(
                    large, n_bins[m], Gl, Hl, Nl, l2, min_samples, min_hessian)
    return n_left, w_left, GL, HL, NL


@njit(inline="always")
def _clear_split(m, slot, new_slot, gain, split_bin, default_left, unpaid, none_paid):
    """Feature m of the leaves in ``slot`` and ``new_slot``: no split, nothing unpaid."""
    for s in (slot, new_slot):
        gain[s, m] = -np.inf
        split_bin[s, m] = 0
        default_left[s, m] = False
        unpaid[s, m] = 0.0
        none_paid[s, m] = False


# A parallel region costs tens of microseconds when cores are free and milliseconds when
# they are busy (a GUI, other processes): leaves with less work than this (rows x features
# histogrammed) run serially.
PARALLEL_LEAF_WORK = 1 << 18


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


root_splits_parallel = njit(parallel=True, cache=True, nogil=True)(_root_splits)
root_splits_serial = njit(cache=True, nogil=True)(_renamed(_root_splits, "_serial"))
split_leaf_parallel = njit(parallel=True, cache=True, nogil=True)(_split_leaf)
split_leaf_serial = njit(cache=True, nogil=True)(_renamed(_split_leaf, "_serial"))


@njit(parallel=True, cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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
