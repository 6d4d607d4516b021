"""Image -> features: a block-mean pyramid, ilastik's filter bank and feature costs.

A frame is normalised by dtype (uint8 / 255, uint16 / 65535, floats as they
are), padded at the bottom/right to a multiple of 8 by symmetric reflection, and
averaged over non-overlapping 2x2, 4x4 and 8x8 blocks (pyramid levels 1-3;
level 0 is full resolution). Filters run on each level: intensity, Gaussian
smoothing, gradient magnitude, Laplacian of Gaussian, difference of Gaussians,
Hessian and structure-tensor eigenvalues. A level-L feature is constant on
``2**L x 2**L`` blocks, so ``2**(2L)`` pixels share it (``share``, s_m of CEGB),
and it is computed and stored on the level's grid only.

Every feature has a stable id (``"L2:gauss:s1.6:c0"``: level, filter, sigma,
channel), a name, a level and share, and a modelled whole-image cost
``batch_cost`` (gamma_m) in operations per original pixel (see `FeatureSpec`,
`modelled_batch_cost`; the filters' exact definitions are in ``_specs.py``).
Time stacks are split into frames with `as_frame_stack`; the bank works on one
frame at a time. A bank built with a voxel ``spacing`` works on volumes
``(Z, Y, X[, C])`` instead: 3D filters with sigma per axis in physical units on
a 3D pyramid of 1x2x2 or 2x2x2 blocks (`VoxelGrid`, `PyramidVolume`; docs/volumes.md).
Upsampled (``L<n>up``) features interpolate a level linearly between its blocks' centres;
`linear_taps` gives the indices and weights they read.

Examples
--------
>>> import numpy as np
>>> from msclassify.features import FeatureBank
>>> bank = FeatureBank("default")
>>> image = np.random.default_rng(0).integers(0, 256, (64, 64), dtype=np.uint8)
>>> X = bank.gather(image, ys=[3, 40], xs=[5, 63])       # training: labelled pixels
>>> X.shape
(2, 100)
>>> levels = bank.compute_levels(image, ["L1:gauss:s1.6:c0", "L0:intensity:c0"])
>>> levels.arrays[1].shape                              # prediction: per level
(32, 32, 1)
"""

from ._bank import FeatureBank, FeatureLevels
from ._cache import FeatureCache
from ._grid import VoxelGrid, check_spacing
from ._kernels import linear_taps
from ._pyramid import PyramidImage, as_frame_stack, intensity_scale
from ._specs import FILTERS, N_LEVELS, PRESETS, FeatureSpec, make_id, modelled_batch_cost, parse_id
from ._support import support_pixels, support_radius, support_voxels
from ._volume import PyramidVolume, smooth_volume

__all__ = ["FILTERS", "N_LEVELS", "PRESETS", "FeatureBank", "FeatureCache", "FeatureLevels",
           "FeatureSpec", "PyramidImage", "PyramidVolume", "VoxelGrid", "as_frame_stack",
           "check_spacing", "intensity_scale", "linear_taps", "make_id", "modelled_batch_cost",
           "parse_id",
           "smooth_volume", "support_pixels", "support_radius", "support_voxels"]
