"""PyramidVolume: one volume ``(Z, Y, X[, C])``, normalised, padded, with its 3D pyramid.

The 3D counterpart of `PyramidImage` (same methods, same caching): intensities
are normalised by dtype, the volume is padded at the end of every axis by
half-sample symmetric reflection to a multiple of the coarsest level's block
(`VoxelGrid.pad_multiple`), and level L is the mean over the level's blocks
(1x2x2 or 2x2x2 steps, the block rule of `VoxelGrid`). The filters are those of
the 2D bank in three dimensions, with sigma and finite differences per axis in
physical units (`VoxelGrid.sigmas`, `VoxelGrid.axis_factors`):

=============== =============================================================
gauss           G: separable Gaussian, sigma_a per axis (radius int(3 sigma_a + 0.5))
gradmag         sqrt(sum_a (f_a g_a)^2), g_a the central difference along axis a
log             sum_a f_a^2 (G[a+1] + G[a-1] - 2 G)
dog             G_sigma - G_{0.66 sigma}
hessian_max/min largest / smallest eigenvalue of the finite-difference Hessian
                (H_aa as in log, H_ab = f_a f_b x the 4-tap cross difference / 4)
structure_*     largest / smallest eigenvalue of G_{0.5 sigma} * (grad G grad G^T),
                with the scaled gradient
=============== =============================================================

Borders are half-sample symmetric, as in 2D (a 1-voxel reach clamps). In the xy
plane the 2D Numba kernels run slice by slice; z is filtered with
``scipy.ndimage.correlate1d`` (the same truncated Gaussian weights).
"""

import threading

import numpy as np
from scipy import ndimage as ndi

from . import _kernels
from ._grid import VoxelGrid
from ._pyramid import PyramidImage, _channel_axis_index, _check_array, readable
from ._specs import GAUSSIAN_TRUNCATE, N_LEVELS, STRUCTURE_OUTER_RATIO, FeatureSpec

__all__ = ["PyramidVolume"]


def _as_volume(volume, channel_axis, scale):
    if isinstance(volume, PyramidImage):
        raise TypeError("volume is already a pyramid; pass it where a pyramid is accepted")
    volume = _check_array(volume, "volume")
    if volume.ndim == 3:
        volume = volume[..., np.newaxis]
    elif volume.ndim == 4:
        volume = np.moveaxis(volume, _channel_axis_index(channel_axis, 4, "volume"), -1)
    else:
        raise ValueError(f"a volume must be (Z, Y, X) or (Z, Y, X, C), got shape {volume.shape}; "
                         "split a time series of volumes into volumes first")
    if 0 in volume.shape:
        raise ValueError(f"volume is empty (shape {volume.shape[:3]} with {volume.shape[3]} "
                         "channels)")
    return readable(volume, scale)


def _shifted(padded, offsets):
    """View of the volume inside ``padded`` (edge-padded by 1) moved by ``offsets`` voxels."""
    return padded[tuple(slice(1 + o, n - 1 + o) for o, n in zip(offsets, padded.shape))]


def _unit(axis, step):
    offsets = [0, 0, 0]
    offsets[axis] = step
    return offsets


def _gradients(padded, factors):
    """Central differences along z, y, x, each times its axis factor, of the volume inside
    ``padded`` (edge-padded by 1)."""
    return [np.float32(0.5 * f) * (_shifted(padded, _unit(a, 1)) - _shifted(padded, _unit(a, -1)))
            for a, f in enumerate(factors)]


def _second_differences(s, padded, factors):
    return [np.float32(f * f) * ((_shifted(padded, _unit(a, 1)) + _shifted(padded, _unit(a, -1)))
                                 - np.float32(2.0) * s) for a, f in enumerate(factors)]


def _hessian_entries(s, padded, factors):
    """H_zz, H_zy, H_zx, H_yy, H_yx, H_xx of ``s`` (finite differences, scaled); ``padded`` is
    ``s`` edge-padded by 1 (or the slices of a larger padded volume around ``s``)."""
    diagonal = _second_differences(s, padded, factors)

    def cross(a, b):
        def at(sa, sb):
            offsets = [0, 0, 0]
            offsets[a], offsets[b] = sa, sb
            return _shifted(padded, offsets)
        return np.float32(0.25 * factors[a] * factors[b]) * (
            (at(1, 1) - at(1, -1)) - (at(-1, 1) - at(-1, -1)))

    return diagonal[0], cross(0, 1), cross(0, 2), diagonal[1], cross(1, 2), diagonal[2]


# The structure tensor's entries (axis pairs), in the order `_eigenvalues` takes them.
_PRODUCTS = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


# Voxels of the slab of whole slices whose Hessian or structure-tensor entries are held at once.
_SLAB_VOXELS = 1 << 20


def _eigenvalues(entries, shape):
    larger, smaller = _kernels.symmetric_eigenvalues_3x3(*(np.ascontiguousarray(e).ravel()
                                                           for e in entries))
    return larger.reshape(shape), smaller.reshape(shape)


def _slab_eigenvalues(shape, halo, entries):
    """Largest and smallest eigenvalues of a symmetric 3x3 field, slab of slices by slab:
    ``entries(z0, z1)`` gives the six entries of slices ``z0:z1`` (`_eigenvalues`' order).

    A voxel's eigenvalues depend on its own entries only, so the result equals the whole
    volume's bit for bit, while only one slab's entries are held (a slab about
    `_SLAB_VOXELS` voxels, and at least ``8 * halo`` slices when the entries of a slab are
    computed from ``halo`` more slices on each side: at most a quarter more slices).

    Examples
    --------
    >>> identity = lambda z0, z1: [np.full((z1 - z0, 2, 2), v, np.float32)
    ...                             for v in (1, 0, 0, 1, 0, 1)]
    >>> [a.shape for a in _slab_eigenvalues((5, 2, 2), 0, identity)]
    [(5, 2, 2), (5, 2, 2)]
    """
    larger, smaller = np.empty(shape, np.float32), np.empty(shape, np.float32)
    depth = shape[0]
    thick = max(1, _SLAB_VOXELS // max(1, shape[1] * shape[2]), 8 * halo)
    for z0 in range(0, depth, thick):
        z1 = min(z0 + thick, depth)
        larger[z0:z1], smaller[z0:z1] = _eigenvalues(entries(z0, z1), (z1 - z0,) + shape[1:])
    return larger, smaller


def upsample_volume(volume, block):
    """Trilinear interpolation of a level volume of ``block`` = ``(bz, by, bx)`` voxels per value
    to full resolution: each slice bilinearly as in 2D (`PyramidImage`'s ``L<n>up``), then, if
    ``bz > 1``, between slices the same way (a level voxel's value sits at its block's centre;
    half-sample symmetric border).

    Examples
    --------
    >>> level = np.array([[[0.0]], [[4.0]]], np.float32)      # 2 x 1 x 1, blocks 2x2x2
    >>> upsample_volume(level, (2, 2, 2))[:, 0, 0]
    array([0., 1., 3., 4.], dtype=float32)
    """
    bz, by, bx = block
    if by != bx or by & (by - 1):
        raise ValueError(f"the block's y and x sides must be one power of two, got {block!r}")
    level = by.bit_length() - 1
    planes = np.stack([_kernels.upsample_linear(np.ascontiguousarray(p), level) for p in volume])
    if bz == 1:
        return planes
    lower, upper, weight = _kernels.linear_taps(volume.shape[0] * bz, volume.shape[0], bz)
    low = planes[lower]
    return low + weight[:, None, None] * (planes[upper] - low)


def smooth_volume(volume, sigmas):
    """Separable Gaussian of ``sigmas`` (z, y, x) voxels, float32, half-sample symmetric border.

    Equals ``scipy.ndimage.gaussian_filter(volume, sigmas, mode="reflect",
    truncate=3)`` up to float32 rounding; an axis of radius 0 is left as it is.
    """
    sz, sy, sx = sigmas
    if sy == sx:
        out = np.empty(volume.shape, np.float32)        # plane by plane: no list of planes
        for z, plane in enumerate(volume):
            out[z] = _kernels.gaussian_smooth(plane, sx, GAUSSIAN_TRUNCATE)
    else:
        out = volume
        for axis, sigma in ((1, sy), (2, sx)):
            out = ndi.correlate1d(out, _kernels.gaussian_weights(sigma, GAUSSIAN_TRUNCATE),
                                  axis=axis, mode="reflect", output=np.float32)
    weights = _kernels.gaussian_weights(sz, GAUSSIAN_TRUNCATE)
    if weights.shape[0] > 1:
        out = ndi.correlate1d(out, weights, axis=0, mode="reflect", output=np.float32)
    return out


class PyramidVolume(PyramidImage):
    """One volume, normalised, padded, with lazily built 3D levels (module docstring).

    Parameters
    ----------
    volume : array_like
        ``(Z, Y, X)`` or ``(Z, Y, X, C)``.
    grid : VoxelGrid or tuple of 3 float
        The voxel spacing (z, y, x) and the pyramid blocks it implies.
    channel_axis : int, optional
        Axis of a 4-D volume that holds channels (default last).
    intensity_scale : float, optional
        As in `PyramidImage`.

    Attributes
    ----------
    shape, padded_shape : tuple of 3 int
    n_channels : int
    grid : VoxelGrid

    Examples
    --------
    >>> volume = PyramidVolume(np.ones((3, 4, 4), np.float32), (1, 1, 1))
    >>> volume.padded_shape, volume.level_shape(1)
    ((8, 8, 8), (4, 4, 4))
    """

    def __init__(self, volume, grid, channel_axis=-1, intensity_scale=None):
        self._image, self._scale = _as_volume(volume, channel_axis, intensity_scale)
        self.grid = grid if isinstance(grid, VoxelGrid) else VoxelGrid(grid)
        *shape, self.n_channels = self._image.shape
        self.shape = tuple(shape)
        self.padded_shape = tuple(-(-n // m) * m for n, m in zip(shape, self.grid.pad_multiple))
        self._cache = {}
        self._lock = threading.Lock()

    def level_shape(self, level):
        """``(d, h, w)`` of level ``level``: the padded shape divided by its block."""
        return tuple(n // b for n, b in zip(self.padded_shape, self.grid.blocks[level]))

    def level(self, level, channel=0):
        """Level ``level`` of one channel: float32 ``(d, h, w)`` block means (normalised)."""
        if not 0 <= level < N_LEVELS:
            raise ValueError(f"level must be in 0..{N_LEVELS - 1}, got {level}")
        self._check_channel(channel)
        return self._cached(("level", level, channel), lambda: self._build_level(level, channel))

    def _build_level(self, level, channel):
        if level == 0:
            depth = self.shape[0]
            out = np.empty(self.padded_shape, dtype=np.float32)
            for z in range(depth):
                out[z] = _kernels.normalize_pad(self._image[z], channel, self._scale,
                                                *self.padded_shape[1:])
            for z in range(depth, self.padded_shape[0]):
                out[z] = out[_kernels._reflect(z, depth)]
            return out
        below = self.level(level - 1, channel)
        out = np.stack([_kernels.block_mean_2x2(plane) for plane in below])
        if self.grid.blocks[level][0] != self.grid.blocks[level - 1][0]:
            out = np.float32(0.5) * (out[0::2] + out[1::2])
        return out

    def smoothed(self, level, channel, sigma):
        """The level smoothed by a Gaussian of ``sigma`` x pixels of the level, per axis in
        physical units (`VoxelGrid.sigmas`)."""
        sigma = float(sigma)
        return self._cached(("gauss", level, channel, sigma), lambda: smooth_volume(
            self.level(level, channel), self.grid.sigmas(level, sigma)))

    def feature(self, spec):
        """One feature on its level's grid: float32 ``(d_L, h_L, w_L)`` (see `PyramidImage.feature`);
        an upsampled one (``L<n>up``) at full (padded) resolution (`upsample_volume`)."""
        if isinstance(spec, str):
            spec = FeatureSpec.from_id(spec)
        self._check_channel(spec.channel)
        plane = self._filtered(spec.source_level, spec.channel, spec.filter, spec.sigma)
        if spec.upsampled:
            return upsample_volume(plane, self.grid.blocks[spec.source_level])
        return plane

    def _hessian(self, level, channel, sigma):
        def compute():                     # slab by slab (`_slab_eigenvalues`)
            s = self.smoothed(level, channel, sigma)
            padded = np.pad(s, 1, mode="edge")
            factors = self.grid.axis_factors(level)
            return _slab_eigenvalues(s.shape, 0, lambda z0, z1: _hessian_entries(
                s[z0:z1], padded[z0:z1 + 2], factors))
        return self._cached(("hessian", level, channel, sigma), compute)

    def _structure(self, level, channel, sigma):
        def compute():
            s = self.smoothed(level, channel, sigma)
            padded = np.pad(s, 1, mode="edge")
            factors = self.grid.axis_factors(level)
            outer = self.grid.sigmas(level, STRUCTURE_OUTER_RATIO * sigma)
            halo = _kernels.gaussian_weights(outer[0], GAUSSIAN_TRUNCATE).shape[0] // 2
            depth = s.shape[0]

            def entries(z0, z1):
                # the slab's entries from the slices within the outer Gaussian's z reach;
                # where that reach is clipped it is the volume's own edge, reflected alike
                lo, hi = max(0, z0 - halo), min(depth, z1 + halo)
                g = _gradients(padded[lo:hi + 2], factors)
                slab = []
                for number, (a, b) in enumerate(_PRODUCTS):
                    slab.append(smooth_volume(g[a] * g[b], outer)[z0 - lo:z1 - lo])
                    for axis in {a, b}:        # its last product: drop the gradient
                        if all(axis not in later for later in _PRODUCTS[number + 1:]):
                            g[axis] = None
                return slab
            return _slab_eigenvalues(s.shape, halo, entries)
        return self._cached(("structure", level, channel, sigma), compute)

    def _gradient_magnitude(self, smoothed, level):
        g = _gradients(np.pad(smoothed, 1, mode="edge"), self.grid.axis_factors(level))
        return np.sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2])

    def _laplacian(self, smoothed, level):
        zz, yy, xx = _second_differences(smoothed, np.pad(smoothed, 1, mode="edge"),
                                         self.grid.axis_factors(level))
        return zz + yy + xx
