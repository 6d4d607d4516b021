"""VoxelGrid: the 3D pyramid of a volume with a voxel spacing, its sigmas and costs.

A volume ``(Z, Y, X)`` has a physical voxel size per axis, ``spacing = (sz, sy,
sx)`` (any unit, the same for all three). Its pyramid has the same four levels
as an image's; every level halves y and x, and halves z too only while that
keeps the voxels roughly isotropic:

**Block rule.** Going from level L-1 to level L, z is averaged in pairs (a
2x2x2 block) when the z size of a level L-1 voxel is at most ``sqrt(2)`` times
its x size, else z is kept (a 1x2x2 block). ``sqrt(2)`` is where both choices are
equally far from isotropic: a ratio r becomes r (z pooled) or r / 2 (not), and
``|log r| <= |log(r / 2)|`` exactly when ``r <= sqrt(2)``. So isotropic voxels give
2x2x2 blocks (shares 8, 64, 512), serial-section EM (4 nm in x/y, 50 nm in z)
1x2x2 blocks on all three levels (shares 4, 16, 64; level 3 voxels 32 x 32 x 50
nm), and z twice as coarse as x 1x2x2 then 2x2x2 (shares 4, 32, 256).

**Sigma in physical units.** A feature's sigma is given, as in 2D, in x pixels
of its level: ``sigma * bx * sx`` in physical units, with ``bx`` the level's x
block. Each axis a is smoothed with ``sigma * bx * sx / (b_a * s_a)`` of its own
level voxels (the Weka / ilastik rule of rescaling sigma by the calibration),
so a feature measures the same physical neighbourhood whatever the spacing.
Finite differences are scaled the same way (``f_a = bx * sx / (b_a * s_a)`` per
axis), so gradients and curvatures are per x pixel of the level along every axis.

**Cost model** (operations per original voxel, the 2D rules with three axes):
a Gaussian costs ``2 r_a + 1`` taps per level voxel along every axis a whose
radius ``r_a = int(3 sigma_a + 0.5)`` is > 0 (an axis of radius 0 is not
filtered); stencils: gradient 6, Laplacian 7, Hessian 21 (3 x 3 + 3 x 4),
gradient products 6; one store per level voxel; the level's cost is scaled by
``1 / share``; building level L reads every voxel of the levels below it once:
``sum(1 / share_l for l < L)``.
"""

import math
from dataclasses import dataclass

import numpy as np

from ._specs import N_LEVELS, filter_taps, gaussian_radius

# z is pooled with x and y while a voxel is at most this much longer in z than in x.
ISOTROPY_RATIO = math.sqrt(2.0)


def check_spacing(spacing, name="spacing"):
    """``spacing`` as a tuple of 3 positive finite floats ``(z, y, x)``, or a one-line ValueError.

    Examples
    --------
    >>> check_spacing([50, 4, 4])
    (50.0, 4.0, 4.0)
    """
    try:
        values = tuple(float(v) for v in spacing)
    except (TypeError, ValueError):
        values = None
    if values is None or len(values) != 3 or isinstance(spacing, str) \
            or not all(math.isfinite(v) and v > 0 for v in values):
        raise ValueError(f"{name} must be three positive finite voxel sizes (z, y, x), e.g. "
                         f"(50, 4, 4) for 50 nm sections of 4 nm pixels; got {spacing!r}")
    return values


def _block_rule(spacing):
    """Whether each level step 1..3 pools z (the module's block rule)."""
    sz, _, sx = spacing
    pooled, bz, bxy = [], 1, 1
    for _ in range(N_LEVELS - 1):
        pool = sz * bz <= ISOTROPY_RATIO * sx * bxy
        pooled.append(pool)
        bz, bxy = bz * (2 if pool else 1), bxy * 2
    return tuple(pooled)


@dataclass(frozen=True)
class VoxelGrid:
    """Spacing of a volume and the pyramid blocks it implies (module docstring).

    Parameters
    ----------
    spacing : tuple of 3 float
        Physical voxel size ``(z, y, x)``.

    Attributes
    ----------
    blocks : tuple of 4 tuples of 3 int
        Block ``(bz, by, bx)`` of each level, in original voxels.
    shares : tuple of 4 int
        Voxels sharing one value of a level's feature: ``bz * by * bx``.

    Examples
    --------
    >>> VoxelGrid((1, 1, 1)).blocks[1:]
    ((2, 2, 2), (4, 4, 4), (8, 8, 8))
    >>> VoxelGrid((50, 4, 4)).shares
    (1, 4, 16, 64)
    >>> VoxelGrid((2, 1, 1)).blocks[1:]
    ((1, 2, 2), (2, 4, 4), (4, 8, 8))
    """

    spacing: tuple

    def __post_init__(self):
        object.__setattr__(self, "spacing", check_spacing(self.spacing))

    @property
    def blocks(self):
        blocks, bz = [(1, 1, 1)], 1
        for level, pool in enumerate(_block_rule(self.spacing), start=1):
            bz *= 2 if pool else 1
            blocks.append((bz, 2 ** level, 2 ** level))
        return tuple(blocks)

    @property
    def shares(self):
        return tuple(int(np.prod(block)) for block in self.blocks)

    @property
    def pad_multiple(self):
        """``(z, y, x)`` multiples a volume is padded to: the coarsest level's block."""
        return self.blocks[-1]

    def axis_factors(self, level):
        """``f_a = bx * sx / (b_a * s_a)`` per axis: a level voxel's x size over its size along a."""
        block = self.blocks[level]
        x_size = block[2] * self.spacing[2]
        return tuple(x_size / (b * s) for b, s in zip(block, self.spacing))

    def sigmas(self, level, sigma):
        """Per-axis sigma ``(z, y, x)`` in level voxels of a level-``level`` sigma (in x pixels).

        Examples
        --------
        >>> VoxelGrid((50, 4, 4)).sigmas(0, 2.5)      # 10 nm: a fifth of a section
        (0.2, 2.5, 2.5)
        """
        return tuple(float(sigma) * f for f in self.axis_factors(level))

    def _gaussian_taps(self, level, sigma):
        return sum(2 * r + 1 for r in map(gaussian_radius, self.sigmas(level, sigma)) if r > 0)

    def _filter_taps(self, level, filter, sigma):
        return filter_taps(filter, sigma, lambda s: self._gaussian_taps(level, s), n_axes=3)

    def batch_cost(self, level, filter, sigma=None):
        """Modelled operations per original voxel to compute one feature on a whole volume.

        Examples
        --------
        >>> grid = VoxelGrid((1, 1, 1))
        >>> grid.batch_cost(0, "intensity"), grid.batch_cost(1, "intensity")   # 1/8 + 1
        (1.0, 1.125)
        """
        shares = self.shares
        pyramid = sum(1.0 / shares[l] for l in range(level))
        return (self._filter_taps(level, filter, sigma) + 1) / shares[level] + pyramid

    def upsample_cost(self, level):
        """Modelled operations per original voxel to interpolate a level-``level`` volume to
        full resolution (trilinear, separable: along x, then y, then z; 2 per value an axis
        with a block > 1 produces, 1 to store). With ``bz = 1`` it is the 2D cost
        ``2 * 2**-level + 3``.

        Examples
        --------
        >>> VoxelGrid((1, 1, 1)).upsample_cost(1)     # 2/4 + 2/2 + 2 + 1
        4.5
        >>> VoxelGrid((50, 4, 4)).upsample_cost(1)    # 2/2 + 2 + 1: z is kept
        4.0
        """
        bz, by, bx = self.blocks[level]
        produced = (1.0 / (bz * by), 1.0 / bz, 1.0)      # after the x, y and z passes
        return 1.0 + sum(2.0 * p for p, b in zip(produced, (bx, by, bz)) if b > 1)

    def describe(self):
        """One line: the spacing and the blocks of levels 1-3."""
        blocks = ", ".join("x".join(map(str, b)) for b in self.blocks[1:])
        spacing = " x ".join(f"{s:g}" for s in self.spacing)
        return f"3D, voxel spacing (z, y, x) {spacing}; pyramid blocks {blocks}"

    def to_dict(self):
        return {"spacing": list(self.spacing), "blocks": [list(b) for b in self.blocks]}

    @classmethod
    def from_dict(cls, data):
        """The grid of `to_dict` output; its recorded blocks must follow from the spacing."""
        if not isinstance(data, dict):
            raise ValueError("the voxel grid must be a JSON object with spacing and blocks")
        grid = cls(data.get("spacing"))
        if data.get("blocks") != [list(b) for b in grid.blocks]:
            raise ValueError(f"the recorded pyramid blocks {data.get('blocks')!r} do not follow "
                             f"from the spacing {list(grid.spacing)} ({grid.describe()})")
        return grid
