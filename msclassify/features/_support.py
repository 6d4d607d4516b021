"""How far a feature value reaches: the filter support that exact chunked computation needs.

A feature value at a level pixel depends on the level image within
``support_radius(spec)`` level pixels of it (every kernel reflects at the border
of what it is given, so anything within that distance of an artificial border is
wrong, anything farther is exact). In full-resolution pixels that is
``support_radius(spec) * 2**spec.source_level`` (`support_pixels`).
"""

from ._specs import DOG_RATIO, STRUCTURE_OUTER_RATIO, FeatureSpec, gaussian_radius

__all__ = ["support_pixels", "support_radius", "support_voxels"]

# Finite differences (gradient, Laplacian, Hessian) read one neighbour on each side.
_STENCIL = 1


def support_radius(spec):
    """Radius, in pixels of the level the filter runs on, of the input a feature value reads.

    intensity 0; gauss r(sigma); gradmag, log and the Hessian r(sigma) + 1; dog
    r(max(sigma, 0.66 sigma)); the structure tensor r(sigma) + 1 + r(0.5 sigma);
    plus 1 for an upsampled feature (the bilinear interpolation reads the next
    level pixel). ``r(s) = int(3 s + 0.5)`` is the Gaussian's radius.

    Examples
    --------
    >>> support_radius(FeatureSpec.from_id("L0:intensity:c0"))
    0
    >>> support_radius(FeatureSpec.from_id("L2:structure_max:s1.6:c0"))   # 5 + 1 + 2
    8
    >>> support_radius(FeatureSpec.from_id("L2up:gauss:s1.6:c0"))           # 5 + 1
    6
    """
    if isinstance(spec, str):
        spec = FeatureSpec.from_id(spec)
    if spec.filter == "intensity":
        radius = 0
    elif spec.filter == "gauss":
        radius = gaussian_radius(spec.sigma)
    elif spec.filter == "dog":
        radius = max(gaussian_radius(spec.sigma), gaussian_radius(DOG_RATIO * spec.sigma))
    elif spec.filter.startswith("structure"):
        radius = (gaussian_radius(spec.sigma) + _STENCIL
                  + gaussian_radius(STRUCTURE_OUTER_RATIO * spec.sigma))
    else:  # gradmag, log, hessian_*: finite differences of the smoothed level
        radius = gaussian_radius(spec.sigma) + _STENCIL
    return radius + (1 if spec.upsampled else 0)


def support_pixels(spec):
    """`support_radius` in full-resolution pixels: ``radius * 2**source_level``.

    Examples
    --------
    >>> support_pixels("L3:gauss:s1.0:c0")
    24
    """
    if isinstance(spec, str):
        spec = FeatureSpec.from_id(spec)
    return support_radius(spec) << spec.source_level


def support_voxels(spec, grid):
    """The reach of a volume feature on ``grid`` (a `VoxelGrid`): ``(z, y, x)`` original voxels.

    The rules of `support_radius` along each axis, with that axis's sigma in its
    level voxels (`VoxelGrid.sigmas`); a finite difference reads one level voxel
    along every axis, also one whose Gaussian has radius 0. Times the level's block.

    Examples
    --------
    >>> from msclassify.features import VoxelGrid
    >>> support_voxels("L0:gauss:s2.0:c0", VoxelGrid((50, 4, 4)))     # sigma_z 0.16: radius 0
    (0, 6, 6)
    >>> support_voxels("L1:gradmag:s1.0:c0", VoxelGrid((1, 1, 1)))    # (3 + 1) * 2
    (8, 8, 8)
    >>> support_voxels("L1up:gauss:s1.0:c0", VoxelGrid((50, 4, 4)))   # z kept: no reach in z
    (0, 8, 8)
    """
    if isinstance(spec, str):
        spec = FeatureSpec.from_id(spec)
    level = spec.source_level

    def radii(sigma):
        return [gaussian_radius(s) for s in grid.sigmas(level, sigma)]

    if spec.filter == "intensity":
        reach = [0, 0, 0]
    elif spec.filter == "gauss":
        reach = radii(spec.sigma)
    elif spec.filter == "dog":
        reach = [max(a, b) for a, b in zip(radii(spec.sigma), radii(DOG_RATIO * spec.sigma))]
    elif spec.filter.startswith("structure"):
        reach = [a + _STENCIL + b for a, b in zip(radii(spec.sigma),
                                                  radii(STRUCTURE_OUTER_RATIO * spec.sigma))]
    else:
        reach = [a + _STENCIL for a in radii(spec.sigma)]
    # an upsampled feature's interpolation reads the next level voxel along every pooled axis
    return tuple((r + (spec.upsampled and b > 1)) * b for r, b in zip(reach, grid.blocks[level]))
