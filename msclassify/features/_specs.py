"""Feature specifications: stable ids, filters, presets and the cost model.

Feature ids
-----------
A feature is identified by a string whose meaning never changes once released::

    L{level}:{filter}:s{sigma}:c{channel}      e.g. "L2:gauss:s1.6:c0"
    L{level}:intensity:c{channel}              e.g. "L0:intensity:c2"
    L{level}up:{filter}:s{sigma}:c{channel}    e.g. "L2up:gauss:s1.6:c0"

``level`` 0..3 is the pyramid level (full resolution, 2x2, 4x4, 8x8 block means
of the padded image), ``sigma`` is ``repr(float(sigma))`` in pixels *of that
level* (so the scale in original pixels is about ``sigma * 2**level``) and
``channel`` is the input channel.

A plain level-L feature is stored on the level's grid: constant on each
``2**L x 2**L`` block, so near an edge every pixel of a block gets the block's
mixed value. An **upsampled** feature (``L{level}up``, level 1..3) is the same
filter computed on level L and then interpolated bilinearly back to full
resolution, each level pixel's value sitting at its block's centre (output
pixel (y, x) is at level coordinate ``((y + 0.5) / 2**L - 0.5, ...)``; the
clamped border is the half-sample symmetric one). It is a smooth
full-resolution feature (level 0, share 1) that costs about what the coarse
filter costs: large-scale context at every pixel without a large Gaussian at
full resolution. The filters (ilastik's bank, computed on the
Gaussian-smoothed level image ``G = G_sigma * I`` with finite differences, as
``skimage.feature.hessian_matrix(..., use_gaussian_derivatives=False)`` does):

============== ================================================================
intensity      the level image itself (block means; raw pixels on level 0)
gauss          G
gradmag        sqrt(gx^2 + gy^2), central differences of G
log            five-point Laplacian of G
dog            G_sigma - G_{0.66 sigma} (ilastik's ratio)
hessian_max    larger eigenvalue of the finite-difference Hessian of G
hessian_min    smaller eigenvalue of it
structure_max  larger eigenvalue of G_{0.5 sigma} * (grad G grad G^T)
               (inner scale sigma, outer scale 0.5 sigma, as in ilastik)
structure_min  smaller eigenvalue of it
============== ================================================================

Gaussians have radius ``int(3 * sigma + 0.5)``; every border is half-sample
symmetric. These constants are part of the ids' meaning.

Cost model (``batch_cost`` = gamma_m)
-------------------------------------
Deterministic, never timed, so a model trained twice gets the same costs. The
unit is one multiply-add per *original-resolution* pixel:

* a Gaussian of radius r costs ``2 (2r + 1)`` taps per level pixel (separable);
* stencils: gradient 4, Laplacian 5, Hessian 10 (3 + 3 + 4), gradient products 3;
* every feature pays 1 per level pixel to store its value;
* the level's filter cost is scaled by its pixel fraction ``4**-level``;
* a level-L feature also pays the block-mean pyramid it needs: building level l
  from level l-1 reads every pixel of level l-1 once, so
  ``pyramid(L) = sum(4**-l for l in range(L))`` (0, 1, 1.25, 1.3125).

* upsampling a level-L plane: every level row is interpolated across once
  (2 operations per output pixel of those rows, ``2 * 2**-L`` per original
  pixel), then every output row blends two of them (2) and is stored (1):
  ``upsample(L) = 2 * 2**-L + 3``.

So ``batch_cost = 4**-L * (filter_taps + 1) + pyramid(L)`` (``+ upsample(L)``
for an upsampled feature); the whole-image operation count is
``batch_cost * H * W``. Intermediate results shared between
features (a smoothed image, the pyramid) are charged to each feature in full,
because the booster pays gamma_m per feature. Reading and normalising the input,
which every model does, is not charged. ``sample_cost`` (beta_m) is 0: in image
mode nothing is paid per pixel.
"""

import math
import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..checks import check_int, is_int

N_LEVELS = 4
GAUSSIAN_TRUNCATE = 3.0
DOG_RATIO = 0.66
STRUCTURE_OUTER_RATIO = 0.5
MAX_SIGMA = 64.0

FILTER_TITLES = {
    "intensity": "intensity",
    "gauss": "Gaussian smoothing",
    "gradmag": "gradient magnitude",
    "log": "Laplacian of Gaussian",
    "dog": "difference of Gaussians",
    "hessian_max": "Hessian eigenvalue (larger)",
    "hessian_min": "Hessian eigenvalue (smaller)",
    "structure_max": "structure-tensor eigenvalue (larger)",
    "structure_min": "structure-tensor eigenvalue (smaller)",
}
FILTERS = tuple(FILTER_TITLES)
SIGMA_FILTERS = FILTERS[1:]

_ID_PATTERN = re.compile(r"^L(\d+)(up)?:([a-z_]+)(?::s([^:]+))?:c(\d+)$")


def gaussian_radius(sigma):
    """Radius of the truncated Gaussian kernel used for ``sigma``."""
    return int(GAUSSIAN_TRUNCATE * float(sigma) + 0.5)


def _gaussian_taps(sigma):
    return 2 * (2 * gaussian_radius(sigma) + 1)


def pyramid_cost(level):
    """Block-mean operations per original pixel needed to build ``level``."""
    return sum(4.0 ** -l for l in range(level))


def upsample_cost(level):
    """Operations per original pixel to interpolate a level-``level`` plane to full resolution."""
    return 2.0 * 2.0 ** -level + 3.0


# Stencil taps of the finite differences on 2 or 3 axes: gradient, Laplacian, Hessian, and
# the gradient products of the structure tensor (one per tensor entry, each smoothed).
STENCIL_TAPS = {2: {"gradmag": 4, "log": 5, "hessian": 10, "products": 3},
                3: {"gradmag": 6, "log": 7, "hessian": 21, "products": 6}}


def filter_taps(filter, sigma, gaussian_taps=None, n_axes=2):
    """Multiply-adds per level pixel of one filter: its Gaussians (``gaussian_taps(sigma)``
    each, default the 2D separable ``2 (2r + 1)``) and its stencils on ``n_axes`` axes."""
    if filter == "intensity":
        return 0
    gaussian_taps = _gaussian_taps if gaussian_taps is None else gaussian_taps
    stencil = STENCIL_TAPS[n_axes]
    smooth = gaussian_taps(sigma)
    if filter == "gauss":
        return smooth
    if filter in ("gradmag", "log"):
        return smooth + stencil[filter]
    if filter == "dog":
        return smooth + gaussian_taps(DOG_RATIO * sigma) + 1
    if filter in ("hessian_max", "hessian_min"):
        return smooth + stencil["hessian"]
    # structure tensor: gradient, the products, their outer smoothings
    products = stencil["products"]
    return (smooth + stencil["gradmag"] + products
            + products * gaussian_taps(STRUCTURE_OUTER_RATIO * sigma))


def modelled_batch_cost(level, filter, sigma=None, upsampled=False):
    """Modelled operations per original pixel to compute one feature on a whole image.

    ``4**-level * (filter_taps + 1) + sum(4**-l for l in range(level))``: the
    filter's multiply-adds (a Gaussian of radius r: ``2 (2r + 1)``; stencils:
    gradient 4, Laplacian 5, Hessian 10, gradient products 3) plus one store per
    level pixel, scaled to original pixels, plus the 2x2-mean passes that build
    the level; an upsampled feature adds ``upsample_cost(level) = 2 * 2**-level + 3``
    for the interpolation to full resolution. Deterministic (never timed), so
    retraining gives the same costs.

    Examples
    --------
    >>> modelled_batch_cost(0, "intensity")
    1.0
    >>> modelled_batch_cost(1, "gauss", 1.0)   # (2 * 7 + 1) / 4 + 1
    4.75
    >>> modelled_batch_cost(1, "gauss", 1.0, upsampled=True)   # 4.75 + 2 / 2 + 3
    8.75
    """
    level, filter, sigma, _, upsampled = _check_parts(level, filter, sigma, 0, upsampled)
    cost = 4.0 ** -level * (filter_taps(filter, sigma) + 1) + pyramid_cost(level)
    return cost + upsample_cost(level) if upsampled else cost


def _check_parts(level, filter, sigma, channel, upsampled=False):
    if not is_int(level, 0) or level >= N_LEVELS:
        raise ValueError(f"level must be an int in 0..{N_LEVELS - 1}, got {level!r}")
    if filter not in FILTER_TITLES:
        raise ValueError(f"unknown filter {filter!r}; choose one of {', '.join(FILTERS)}")
    if filter == "intensity":
        if sigma is not None:
            raise ValueError("the intensity filter takes no sigma; pass sigma=None")
    else:
        if sigma is None or isinstance(sigma, bool):
            raise ValueError(f"filter {filter!r} needs a sigma (e.g. 1.0)")
        sigma = float(sigma)
        if not (math.isfinite(sigma) and 0 < sigma <= MAX_SIGMA):
            raise ValueError(f"sigma must be in (0, {MAX_SIGMA}], got {sigma!r}")
    check_int(channel, "channel", minimum=0)
    if not isinstance(upsampled, (bool, np.bool_)):
        raise TypeError(f"upsampled must be True or False, got {upsampled!r}")
    if upsampled and level == 0:
        raise ValueError("only a coarse level (1..3) can be upsampled to full resolution; "
                         "a level-0 feature already is")
    return (int(level), filter, None if sigma is None else float(sigma), int(channel),
            bool(upsampled))


def make_id(level, filter, sigma=None, channel=0, upsampled=False):
    """The canonical id of a feature.

    Examples
    --------
    >>> make_id(2, "gauss", 1.6)
    'L2:gauss:s1.6:c0'
    >>> make_id(2, "gauss", 1.6, upsampled=True)
    'L2up:gauss:s1.6:c0'
    """
    level, filter, sigma, channel, upsampled = _check_parts(level, filter, sigma, channel,
                                                            upsampled)
    head = f"L{level}up" if upsampled else f"L{level}"
    if sigma is None:
        return f"{head}:{filter}:c{channel}"
    return f"{head}:{filter}:s{float(sigma)!r}:c{channel}"


class ParsedId(NamedTuple):
    """The parts of a feature id (see `parse_id`)."""

    level: int
    filter: str
    sigma: float | None
    channel: int
    upsampled: bool = False


def parse_id(feature_id):
    """Split an id into ``ParsedId(level, filter, sigma or None, channel, upsampled)``.

    ``level`` is the pyramid level the filter runs on; an upsampled feature is
    then interpolated to full resolution. Raises on malformed ids.

    Examples
    --------
    >>> parse_id("L2up:gauss:s1.6:c0")
    ParsedId(level=2, filter='gauss', sigma=1.6, channel=0, upsampled=True)
    """
    if not isinstance(feature_id, str):
        raise TypeError(f"a feature id is a string like 'L2:gauss:s1.6:c0', got {feature_id!r}")
    match = _ID_PATTERN.match(feature_id)
    if match is None:
        raise ValueError(f"malformed feature id {feature_id!r}; expected "
                         "'L<level>:<filter>:s<sigma>:c<channel>' (e.g. 'L2:gauss:s1.6:c0'), "
                         "'L<level>:intensity:c<channel>' or 'L<level>up:...' (e.g. "
                         "'L2up:gauss:s1.6:c0')")
    level, upsampled, filter, sigma_text, channel = match.groups()
    try:
        sigma = None if sigma_text is None else float(sigma_text)
    except ValueError:
        raise ValueError(f"feature id {feature_id!r}: sigma {sigma_text!r} is not a "
                         "number") from None
    parts = ParsedId(int(level), filter, sigma, int(channel), upsampled is not None)
    canonical = make_id(*parts)
    if canonical != feature_id:
        raise ValueError(f"feature id {feature_id!r} is not in canonical form; use {canonical!r}")
    return parts


def _describe(level, filter, sigma, channel, upsampled, block_size=None):
    block = "full resolution" if level == 0 else f"{2 ** level}x{2 ** level} block means"
    if block_size is not None and len(block_size) == 3 and level:
        block = "x".join(map(str, block_size)) + " block means"
    if upsampled:
        block += ", interpolated to full resolution"
    title = FILTER_TITLES[filter]
    if sigma is not None:
        title = f"{title}, sigma {float(sigma)!r}"
    return f"{title} ({block}), channel {channel}"


@dataclass(frozen=True, kw_only=True)
class FeatureSpec:
    """What one feature is and what it costs.

    Build specs with `FeatureSpec.make` or `FeatureSpec.from_id`, which fill in
    the derived fields; the constructor checks that they agree with ``id``.

    Attributes
    ----------
    id : str
        Stable id, e.g. ``"L2:gauss:s1.6:c0"`` (see the module docstring).
    name : str
        Human-readable description.
    level : int
        Pyramid level 0..3 of the stored feature; it is constant on ``2**level``
        square blocks (0 for an upsampled feature).
    share : int
        ``4**level``: original pixels sharing one value (s_m of CEGB).
    batch_cost : float
        Whole-image cost gamma_m from the documented cost model.
    sample_cost : float
        Per-pixel cost beta_m (0 for image features).
    channel : int
        Input channel.
    filter : str
        Filter name (one of `FILTERS`).
    sigma : float or None
        Scale in pixels of the level; None for ``intensity``.
    source_level : int
        Pyramid level the filter runs on (``level`` unless upsampled).
    upsampled : bool
        True if the filtered level is interpolated to full resolution (``L<n>up`` ids).
    block : tuple of int
        The level's block per axis in original pixels: ``(2**level, 2**level)`` for
        images, ``(bz, 2**level, 2**level)`` for volumes (`msclassify.features.VoxelGrid`);
        ``share`` is its product. An upsampled feature's is ``(1, 1)`` or ``(1, 1, 1)``.

    Examples
    --------
    >>> spec = FeatureSpec.from_id("L2:gauss:s1.6:c0")
    >>> spec.level, spec.share, spec.sigma
    (2, 16, 1.6)
    >>> spec = FeatureSpec.from_id("L2up:gauss:s1.6:c0")
    >>> spec.level, spec.share, spec.source_level
    (0, 1, 2)
    """

    id: str
    name: str
    level: int
    share: int
    batch_cost: float
    sample_cost: float = 0.0
    channel: int
    filter: str
    sigma: float | None
    source_level: int | None = None
    upsampled: bool = False
    block: tuple | None = None

    def __post_init__(self):
        source_level, filter, sigma, channel, upsampled = parse_id(self.id)
        if self.source_level is None:
            object.__setattr__(self, "source_level", self.level)
        level = 0 if upsampled else source_level
        if (self.level, self.filter, self.sigma, self.channel, self.source_level,
                self.upsampled) != (level, filter, sigma, channel, source_level, upsampled):
            raise ValueError(f"FeatureSpec fields (level={self.level}, filter={self.filter!r}, "
                             f"sigma={self.sigma!r}, channel={self.channel}, source_level="
                             f"{self.source_level}, upsampled={self.upsampled}) disagree with "
                             f"its id {self.id!r}; build specs with FeatureSpec.from_id or "
                             "FeatureSpec.make")
        block = _check_block(self.block, level, upsampled)
        object.__setattr__(self, "block", block)
        if self.share != math.prod(block):
            raise ValueError(f"share of a level-{level} feature is {math.prod(block)}, got "
                             f"{self.share}")
        for field in ("batch_cost", "sample_cost"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise ValueError(f"{field} must be a finite number >= 0, got {value!r}")

    @classmethod
    def make(cls, level, filter, sigma=None, channel=0, *, upsampled=False, batch_cost=None,
             sample_cost=0.0, block=None):
        """Spec of one feature; ``batch_cost`` defaults to `modelled_batch_cost`.

        ``level`` is the level the filter runs on; ``upsampled=True`` interpolates
        the result to full resolution (a level-0 feature, id ``L<level>up:...``).
        ``block`` is the level's block of a volume's pyramid (give ``batch_cost``
        with it: `msclassify.features.VoxelGrid.batch_cost`); default the image's.

        Examples
        --------
        >>> FeatureSpec.make(1, "dog", 1.6, channel=2).id
        'L1:dog:s1.6:c2'
        >>> FeatureSpec.make(3, "gauss", 1.0, upsampled=True).level
        0
        """
        source, filter, sigma, channel, upsampled = _check_parts(level, filter, sigma, channel,
                                                                 upsampled)
        feature_id = make_id(source, filter, sigma, channel, upsampled)
        if batch_cost is None:
            if block is not None and len(block) != 2:
                raise ValueError("a feature of a volume needs its batch_cost "
                                 "(VoxelGrid.batch_cost)")
            batch_cost = modelled_batch_cost(source, filter, sigma, upsampled)
        level = 0 if upsampled else source
        block = _check_block(block, level, upsampled)
        name = _describe(source, filter, sigma, channel, upsampled, block)
        return cls(id=feature_id, name=name, level=level, share=math.prod(block),
                   batch_cost=float(batch_cost), sample_cost=float(sample_cost), channel=channel,
                   filter=filter, sigma=sigma, source_level=source, upsampled=upsampled,
                   block=block)

    @classmethod
    def from_id(cls, feature_id, *, batch_cost=None, sample_cost=0.0, block=None):
        """Spec for a stable id; ``batch_cost`` defaults to `modelled_batch_cost`."""
        level, filter, sigma, channel, upsampled = parse_id(feature_id)
        return cls.make(level, filter, sigma, channel, upsampled=upsampled,
                        batch_cost=batch_cost, sample_cost=sample_cost, block=block)


def _check_block(block, level, upsampled):
    """``block`` as a tuple of ints: ``(2**level,) * 2`` by default, or a volume's
    ``(bz, 2**level, 2**level)`` with ``bz`` a power of two up to ``2**level``."""
    side = 2 ** level
    if block is None:
        return (side, side)
    try:
        block = tuple(int(b) for b in block)
    except (TypeError, ValueError):
        raise ValueError(f"block must be a tuple of ints, got {block!r}") from None
    if len(block) == 2 and block == (side, side):
        return block
    bz = block[0] if len(block) == 3 else 0
    if len(block) != 3 or block[1:] != (side, side) or not 1 <= bz <= side or bz & (bz - 1):
        raise ValueError(f"the block of a level-{level} feature is ({side}, {side}) in an image or "
                         f"(bz, {side}, {side}) in a volume with bz a power of two <= {side}; "
                         f"got {block!r}")
    return block


def _per_level(sigmas_by_level, extra_gauss_sigmas=()):
    """(level, filter, sigma) triples: intensity, then every filter at every sigma."""
    triples = []
    for level, sigmas in enumerate(sigmas_by_level):
        triples.append((level, "intensity", None))
        triples.extend((level, "gauss", s) for s in extra_gauss_sigmas)
        for sigma in sigmas:
            triples.extend((level, filter, sigma) for filter in SIGMA_FILTERS)
    return tuple(triples)


def _fast_preset():
    triples = [(0, "intensity", None), (0, "gauss", 1.0), (0, "gradmag", 1.0)]
    for level in range(1, N_LEVELS):
        triples.append((level, "intensity", None))
        triples.extend((level, filter, 1.0) for filter in
                       ("gauss", "gradmag", "log", "hessian_max", "hessian_min"))
    return tuple(triples)


# Sigmas are in pixels of each level: coarse levels get the small sigmas, since one
# coarse pixel already spans 2**level original pixels. "rich" follows ilastik's
# sigma set (0.3 only for smoothing, as ilastik's dialog allows). "default" has
# every level at sigmas 0.7-3.5: its coarse levels make cheap models possible, and
# PixelClassifier's distillation (msclassify.pixel._distill) keeps them off object
# outlines. "fine" (levels 0 and 1 only; the default of phase 1 of issue 11) is
# what learners without distillation segment most accurately with on the real
# sets (benchmarks/study_features.py).
PRESETS = {
    "fast": _fast_preset(),
    "default": _per_level([(0.7, 1.6, 3.5)] * 4),
    "fine": _per_level([(0.7, 1.6, 3.5), (0.7, 1.6, 3.5)]),
    "pyramid": _per_level([(0.7, 1.6), (0.7, 1.6, 3.5), (0.7, 1.6, 3.5), (0.7, 1.6, 3.5)]),
    "rich": _per_level([(0.7, 1.0, 1.6, 3.5, 5.0, 10.0), (0.7, 1.0, 1.6, 3.5, 5.0),
                        (0.7, 1.0, 1.6, 3.5), (0.7, 1.0, 1.6, 3.5)], extra_gauss_sigmas=(0.3,)),
}
