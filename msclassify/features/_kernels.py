"""Numba kernels of the feature pipeline: normalise+pad, 2x2 block means, separable
Gaussian smoothing and the finite-difference filters applied to a smoothed plane.

Every kernel works on one 2-D float32 plane (one channel of one pyramid level)
and treats the border as half-sample symmetric (``d c b a | a b c d | d c b a``:
numpy's ``mode="symmetric"``, scipy.ndimage's ``mode="reflect"``), the same rule
the pyramid uses to pad the image to a multiple of 8.

Why not ``scipy.ndimage.gaussian_filter``: it filters in float64 line buffers
and takes about 20 ms of CPU for one 1024x1024 plane, which alone would eat the
frame budget; the float32 kernel below gives the same result (tested against
scipy) about 10x faster (``benchmarks/bench_features.py``).

Why serial kernels (``nogil``) and no ``prange``: the bank runs independent
features on a thread pool instead (see ``FeatureBank.compute_levels``). On a
busy 2-core machine a ``prange`` region waits at its barrier for a descheduled
worker: measured 8-16 ms per call even on a 128x128 plane, against 0.02-1 ms
serially, while a pool of serial tasks keeps both cores busy and degrades
gracefully.
"""

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _reflect(i, n):
    """Index ``i`` folded into ``0..n-1`` by half-sample symmetric reflection."""
    period = 2 * n
    i = i % period
    if i >= n:
        i = period - 1 - i
    return i


@njit(cache=True, nogil=True)
def normalize_pad(image, channel, scale, out_h, out_w):
    """Channel ``channel`` of ``image`` (H, W, C) times ``scale``, as float32, padded
    symmetrically at the bottom/right to (out_h, out_w)."""
    h, w = image.shape[0], image.shape[1]
    out = np.empty((out_h, out_w), dtype=np.float32)
    for y in range(out_h):
        sy = _reflect(y, h)
        for x in range(w):
            out[y, x] = np.float32(image[sy, x, channel] * scale)
        for x in range(w, out_w):
            out[y, x] = np.float32(image[sy, _reflect(x, w), channel] * scale)
    return out


@njit(cache=True, nogil=True)
def block_mean_2x2(plane):
    """Means of non-overlapping 2x2 blocks; both sides of ``plane`` must be even."""
    h, w = plane.shape[0] // 2, plane.shape[1] // 2
    out = np.empty((h, w), dtype=np.float32)
    for y in range(h):
        top = plane[2 * y]
        bottom = plane[2 * y + 1]
        for x in range(w):
            out[y, x] = np.float32(0.25) * ((top[2 * x] + top[2 * x + 1])
                                            + (bottom[2 * x] + bottom[2 * x + 1]))
    return out


@njit(cache=True, nogil=True)
def _smooth_separable(plane, weights):
    """Correlate ``plane`` with the symmetric odd-length ``weights`` along both axes.

    Row by row: the vertical pass of one output row goes into a buffer, which is
    reflected at its ends and then correlated horizontally. No intermediate plane
    is written, and symmetric taps are paired to halve the multiplications.
    """
    h, w = plane.shape
    radius = weights.shape[0] // 2
    out = np.empty((h, w), dtype=np.float32)
    padded = np.empty(w + 2 * radius, dtype=np.float32)
    centre = weights[radius]
    for y in range(h):
        source = plane[y]
        for x in range(w):
            padded[radius + x] = centre * source[x]
        for k in range(radius):
            wk = weights[k]
            above = plane[_reflect(y - radius + k, h)]
            below = plane[_reflect(y + radius - k, h)]
            for x in range(w):
                padded[radius + x] += wk * (above[x] + below[x])
        for j in range(radius):
            padded[j] = padded[radius + _reflect(j - radius, w)]
            padded[radius + w + j] = padded[radius + _reflect(w + j, w)]
        row = out[y]
        middle = padded[radius:radius + w]
        for x in range(w):
            row[x] = centre * middle[x]
        for k in range(radius):
            wk = weights[k]
            # shifted views keep the index a bare loop variable: with ``x + 2r - k``
            # numba's negative-index check stops the loop from vectorising (2.6x slower)
            left = padded[k:k + w]
            right = padded[2 * radius - k:2 * radius - k + w]
            for x in range(w):
                row[x] += wk * (left[x] + right[x])
    return out


def gaussian_weights(sigma, truncate):
    """Normalised 1-D Gaussian of radius ``int(truncate * sigma + 0.5)`` (scipy's rule)."""
    radius = int(truncate * float(sigma) + 0.5)
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    weights = np.exp(-0.5 * (x / sigma) ** 2)
    return (weights / weights.sum()).astype(np.float32)


def gaussian_smooth(plane, sigma, truncate):
    """Separable Gaussian smoothing of a float32 plane, float32 out.

    Equals ``scipy.ndimage.gaussian_filter(plane, sigma, mode="reflect",
    truncate=truncate)`` up to float32 rounding.
    """
    weights = gaussian_weights(sigma, truncate)
    if weights.shape[0] == 1:
        return plane.copy()
    return _smooth_separable(plane, weights)


@njit(cache=True, nogil=True)
def linear_taps(n_out, n_in, scale):
    """Lower source index and weight of every output position of a linear upsampling.

    Output position ``i`` sits at source coordinate ``u = (i + 0.5) / scale - 0.5``
    (block centres); it reads ``lower = floor(u)`` and ``lower + 1`` with weight
    ``u - floor(u)`` on the upper one, both clamped to ``0..n_in-1``, which is the
    half-sample symmetric border: the reflected neighbour equals the edge value.
    """
    lower = np.empty(n_out, dtype=np.int64)
    upper = np.empty(n_out, dtype=np.int64)
    weight = np.empty(n_out, dtype=np.float32)
    for i in range(n_out):
        u = (i + 0.5) / scale - 0.5
        low = int(np.floor(u))
        weight[i] = np.float32(u - low)
        lower[i] = min(max(low, 0), n_in - 1)
        upper[i] = min(max(low + 1, 0), n_in - 1)
    return lower, upper, weight


@njit(cache=True, nogil=True)
def upsample_linear(plane, level):
    """Bilinear interpolation of a level-``level`` plane to ``2**level`` times its size.

    A level pixel is the mean of a ``2**level`` square block, so its value sits at
    the block centre; output pixel (y, x) interpolates the four nearest centres.
    Separable: every source row is interpolated horizontally once, then each
    output row blends two of those rows. The weights are multiples of
    ``2**-level``, exact in float32.
    """
    h, w = plane.shape
    scale = 1 << level
    out_h, out_w = h * scale, w * scale
    left, right, across = linear_taps(out_w, w, scale)
    top, bottom, down = linear_taps(out_h, h, scale)
    rows = np.empty((h, out_w), dtype=np.float32)
    for y in range(h):
        source = plane[y]
        target = rows[y]
        for x in range(out_w):
            a = source[left[x]]
            target[x] = a + across[x] * (source[right[x]] - a)
    out = np.empty((out_h, out_w), dtype=np.float32)
    for y in range(out_h):
        upper_row = rows[top[y]]
        lower_row = rows[bottom[y]]
        t = down[y]
        target = out[y]
        for x in range(out_w):
            a = upper_row[x]
            target[x] = a + t * (lower_row[x] - a)
    return out


# The stencil kernels below take one output row at a time from the rows above,
# at and below it (clamped at the border, which for a 1-pixel reach is the
# symmetric reflection). Columns 1..w-2 run without clamping so the loop
# vectorises; the border columns 0 and w-1 (the same one if w == 1) clamp.


@njit(cache=True, inline="always")
def _gradient_at(up, row, down, xm, x, xp):
    return (np.float32(0.5) * (row[xp] - row[xm]), np.float32(0.5) * (down[x] - up[x]))


@njit(cache=True, nogil=True)
def gradient_magnitude(s):
    """sqrt(gx^2 + gy^2) with central differences gx = (s[x+1] - s[x-1]) / 2."""
    h, w = s.shape
    out = np.empty((h, w), dtype=np.float32)
    for y in range(h):
        up, row, down = s[max(y - 1, 0)], s[y], s[min(y + 1, h - 1)]
        target = out[y]
        for x in range(1, w - 1):
            gx, gy = _gradient_at(up, row, down, x - 1, x, x + 1)
            target[x] = np.sqrt(gx * gx + gy * gy)
        for x in (0, w - 1):
            gx, gy = _gradient_at(up, row, down, max(x - 1, 0), x, min(x + 1, w - 1))
            target[x] = np.sqrt(gx * gx + gy * gy)
    return out


@njit(cache=True, inline="always")
def _laplacian_at(up, row, down, xm, x, xp):
    return (up[x] + down[x]) + (row[xm] + row[xp]) - np.float32(4.0) * row[x]


@njit(cache=True, nogil=True)
def laplacian(s):
    """Five-point Laplacian s[y-1] + s[y+1] + s[x-1] + s[x+1] - 4 s."""
    h, w = s.shape
    out = np.empty((h, w), dtype=np.float32)
    for y in range(h):
        up, row, down = s[max(y - 1, 0)], s[y], s[min(y + 1, h - 1)]
        target = out[y]
        for x in range(1, w - 1):
            target[x] = _laplacian_at(up, row, down, x - 1, x, x + 1)
        for x in (0, w - 1):
            target[x] = _laplacian_at(up, row, down, max(x - 1, 0), x, min(x + 1, w - 1))
    return out


@njit(cache=True, inline="always")
def _eigenvalues_2x2(a, b, c):
    """Eigenvalues (larger, smaller) of the symmetric matrix [[a, b], [b, c]]."""
    mean = np.float32(0.5) * (a + c)
    half_diff = np.float32(0.5) * (a - c)
    radius = np.sqrt(half_diff * half_diff + b * b)
    return mean + radius, mean - radius


@njit(cache=True, inline="always")
def _hessian_at(up, row, down, xm, x, xp):
    centre = np.float32(2.0) * row[x]
    hxx = row[xp] + row[xm] - centre
    hyy = down[x] + up[x] - centre
    hxy = np.float32(0.25) * ((down[xp] - down[xm]) - (up[xp] - up[xm]))
    return _eigenvalues_2x2(hxx, hxy, hyy)


@njit(cache=True, nogil=True)
def hessian_eigenvalues(s):
    """Eigenvalues (larger, smaller) of the finite-difference Hessian of ``s``.

    Hxx = s[x+1] - 2 s + s[x-1], Hyy likewise, Hxy = central difference of the
    central difference (4 taps / 4).
    """
    h, w = s.shape
    larger = np.empty((h, w), dtype=np.float32)
    smaller = np.empty((h, w), dtype=np.float32)
    for y in range(h):
        up, row, down = s[max(y - 1, 0)], s[y], s[min(y + 1, h - 1)]
        large, small = larger[y], smaller[y]
        for x in range(1, w - 1):
            large[x], small[x] = _hessian_at(up, row, down, x - 1, x, x + 1)
        for x in (0, w - 1):
            large[x], small[x] = _hessian_at(up, row, down, max(x - 1, 0), x, min(x + 1, w - 1))
    return larger, smaller


@njit(cache=True, nogil=True)
def gradient_products(s):
    """gx*gx, gx*gy, gy*gy of the central-difference gradient of ``s``."""
    h, w = s.shape
    xx = np.empty((h, w), dtype=np.float32)
    xy = np.empty((h, w), dtype=np.float32)
    yy = np.empty((h, w), dtype=np.float32)
    for y in range(h):
        up, row, down = s[max(y - 1, 0)], s[y], s[min(y + 1, h - 1)]
        xx_row, xy_row, yy_row = xx[y], xy[y], yy[y]
        for x in range(1, w - 1):
            gx, gy = _gradient_at(up, row, down, x - 1, x, x + 1)
            xx_row[x], xy_row[x], yy_row[x] = gx * gx, gx * gy, gy * gy
        for x in (0, w - 1):
            gx, gy = _gradient_at(up, row, down, max(x - 1, 0), x, min(x + 1, w - 1))
            xx_row[x], xy_row[x], yy_row[x] = gx * gx, gx * gy, gy * gy
    return xx, xy, yy


@njit(cache=True, nogil=True)
def symmetric_eigenvalues(a, b, c):
    """Per-pixel eigenvalues (larger, smaller) of [[a, b], [b, c]]."""
    h, w = a.shape
    larger = np.empty((h, w), dtype=np.float32)
    smaller = np.empty((h, w), dtype=np.float32)
    for y in range(h):
        for x in range(w):
            larger[y, x], smaller[y, x] = _eigenvalues_2x2(a[y, x], b[y, x], c[y, x])
    return larger, smaller


@njit(cache=True, nogil=True)
def interleave(planes, columns, out, row_start, row_stop):
    """out[y, x, columns[k]] = planes[k][y, x] for rows ``row_start:row_stop``.

    ``planes`` is a typed list of equally shaped planes. Writing ``out`` row by
    row in one pass is 3-4x faster than filling one strided slot per feature,
    which re-reads and re-writes the whole array every time.
    """
    w = out.shape[1]
    for y in range(row_start, row_stop):
        target = out[y]
        for k in range(len(planes)):
            source = planes[k][y]
            column = columns[k]
            for x in range(w):
                target[x, column] = source[x]


@njit(cache=True, nogil=True)
def gather_level(array, ys, xs, level, columns, out):
    """``out[r, columns] = array[ys[r] >> level, xs[r] >> level]`` for every pixel r.

    One pass over the pixels reading each stored row once; numpy's fancy
    indexing plus a column scatter took 5x longer on training-set sizes.
    """
    n_columns = columns.shape[0]
    for r in range(ys.shape[0]):
        values = array[ys[r] >> level, xs[r] >> level]
        for j in range(n_columns):
            out[r, columns[j]] = values[j]


@njit(cache=True, nogil=True)
def symmetric_eigenvalues_3x3(a, b, c, d, e, f):
    """Per-voxel eigenvalues (largest, smallest) of [[a, b, c], [b, d, e], [c, e, f]].

    Flat float32 arrays in, float32 out. Closed form (Smith 1961), in float64:
    with ``q = trace / 3`` and ``p = sqrt(|A - qI|_F^2 / 6)``, the eigenvalues are
    ``q + 2 p cos(phi + 2 pi k / 3)`` where ``phi = acos(det((A - qI) / p) / 2) / 3``.
    """
    n = a.shape[0]
    larger = np.empty(n, dtype=np.float32)
    smaller = np.empty(n, dtype=np.float32)
    for i in range(n):
        a11, a12, a13 = np.float64(a[i]), np.float64(b[i]), np.float64(c[i])
        a22, a23, a33 = np.float64(d[i]), np.float64(e[i]), np.float64(f[i])
        q = (a11 + a22 + a33) / 3.0
        off = a12 * a12 + a13 * a13 + a23 * a23
        p2 = (a11 - q) ** 2 + (a22 - q) ** 2 + (a33 - q) ** 2 + 2.0 * off
        if p2 <= 0.0:
            larger[i] = smaller[i] = np.float32(q)
            continue
        p = np.sqrt(p2 / 6.0)
        b11, b22, b33 = (a11 - q) / p, (a22 - q) / p, (a33 - q) / p
        b12, b13, b23 = a12 / p, a13 / p, a23 / p
        r = 0.5 * (b11 * (b22 * b33 - b23 * b23) - b12 * (b12 * b33 - b23 * b13)
                   + b13 * (b12 * b23 - b22 * b13))
        r = min(max(r, -1.0), 1.0)
        phi = np.arccos(r) / 3.0
        larger[i] = np.float32(q + 2.0 * p * np.cos(phi))
        smaller[i] = np.float32(q + 2.0 * p * np.cos(phi + 2.0 * np.pi / 3.0))
    return larger, smaller
