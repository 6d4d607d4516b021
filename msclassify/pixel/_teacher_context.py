"""Context for the distillation teacher: the bank's coarse filters, interpolated at pixels.

The teacher (`msclassify.pixel._distill`) sees the bank's full-resolution features,
sigma <= 3.5 px. On a few clicks that is too little context: which side of a
membrane a pixel is on, or whether a dark spot is a membrane or a mitochondrion,
shows only at sigma 8-16 (docs/scribbles.md, sections 14 and 18). The bank has
those scales already, on its coarse levels: sigma 3.5 on level 1 (2x2 blocks)
and level 2 (4x4 blocks) is about sigma 7 and 14 of the frame. Read block-wise,
as the model reads them, they draw the blocks' edges into a teacher fitted on
~1,000 pixels (section 14: mixed on two draws); read **bilinearly**, each level
value at its block's centre (the convention of the bank's ``L<n>up`` features,
`msclassify.features.FeatureSpec`), they are smooth context at every pixel and
cost no filtering: the fit has computed those levels for the model anyway.

Only the teacher sees them: it labels training pixels, so prediction stays the
model's cost.
"""

import numpy as np

from ..features import linear_taps

__all__ = ["CONTEXT_FILTERS", "CONTEXT_LEVELS", "CONTEXT_SIGMA", "context_features",
           "interpolated"]

# The context: these filters at CONTEXT_SIGMA level pixels on these levels (about sigma 7
# and 14 of the frame), when the bank has them.
CONTEXT_LEVELS = (1, 2)
CONTEXT_FILTERS = ("gauss", "hessian_max", "hessian_min", "gradmag")
CONTEXT_SIGMA = 3.5


def context_features(bank):
    """Bank indices of the teacher's context features (empty if the bank has none).

    Plain (block-wise stored) features of `CONTEXT_LEVELS` with a filter of
    `CONTEXT_FILTERS` at `CONTEXT_SIGMA`, every channel; none for a volume's bank.

    Examples
    --------
    >>> from msclassify.features import FeatureBank
    >>> bank = FeatureBank("default")
    >>> [bank.ids[i] for i in context_features(bank)][:2]
    ['L1:gauss:s3.5:c0', 'L1:gradmag:s3.5:c0']
    >>> context_features(bank).size
    8
    """
    return np.array([i for i, spec in enumerate(bank.specs)
                     if spec.level in CONTEXT_LEVELS and not spec.upsampled
                     and spec.filter in CONTEXT_FILTERS and spec.sigma == CONTEXT_SIGMA
                     and (spec.block is None or len(spec.block) == 2)], dtype=np.int64)


def _taps(coords, level, n):
    """Lower and upper level index and the upper one's weight at pixel coordinates
    ``coords`` of a level of ``n`` values: the taps of the bank's upsampling
    (`msclassify.features.linear_taps`, block centres, clamped at the border)."""
    return tuple(taps[coords] for taps in linear_taps(n << level, n, 1 << level))


def interpolated(levels, features, ys, xs):
    """Bilinear values of coarse bank features at pixels ``(ys, xs)`` of a frame.

    Parameters
    ----------
    levels : msclassify.features.FeatureLevels
        A frame's features, holding every bank index in ``features``.
    features : ndarray of int
        Bank indices (e.g. `context_features`).
    ys, xs : ndarray of int

    Returns
    -------
    ndarray of float32, shape (n, len(features))
        What the bank's ``L<n>up`` feature of the same filter gives at those
        pixels (to float32 rounding): the level's values at their blocks'
        centres, interpolated bilinearly, clamped at the border.

    Examples
    --------
    A level-1 value covers a 2x2 block and sits at its centre, so pixel 1 (just
    left of the centre between blocks 0 and 1) is 3/4 of block 0 and 1/4 of block 1:

    >>> from msclassify.features import FeatureBank, FeatureSpec
    >>> bank = FeatureBank(specs=[FeatureSpec.from_id("L1:intensity:c0")])
    >>> image = np.repeat(np.repeat(np.array([[0.0, 4.0]]), 2, axis=0), 2, axis=1)
    >>> levels = bank.compute_levels(image)
    >>> interpolated(levels, np.array([0]), np.zeros(4, int), np.arange(4))[:, 0].tolist()
    [0.0, 1.0, 3.0, 4.0]
    """
    ys, xs = np.asarray(ys), np.asarray(xs)
    out = np.empty((ys.size, len(features)), dtype=np.float32)
    column = {int(f): j for j, f in enumerate(levels.feature_indices)}
    for j, feature in enumerate(features):
        k = column[int(feature)]
        level = int(levels.level[k])
        plane = levels.arrays[level][..., levels.slot[k]]
        top, bottom, down = _taps(ys, level, plane.shape[0])
        left, right, across = _taps(xs, level, plane.shape[1])
        upper = plane[top, left] + across * (plane[top, right] - plane[top, left])
        lower = plane[bottom, left] + across * (plane[bottom, right] - plane[bottom, left])
        out[:, j] = upper + down * (lower - upper)
    return out
