"""Splitting touching objects: a watershed from the deep maxima of a landscape.

Two flies that touch are one connected component. Inside a component, the
distance to its edge, the class probability or the frame's brightness has one
high region per body, joined by a narrow neck or a dimmer seam where they touch. `ObjectSplitter` finds the maxima that
stand out by at least ``depth`` of the component's highest value (h-maxima, so
a shallow dip between thorax and abdomen does not count) and floods the
component from them (`skimage.segmentation.watershed`); a piece smaller than
``min_size`` pixels is not split off.
"""

from dataclasses import dataclass

import numpy as np
from scipy import ndimage as ndi
from skimage.morphology import h_maxima
from skimage.segmentation import watershed

from ..checks import is_int

__all__ = ["SPLIT_LANDSCAPES", "ObjectSplitter"]

_SIGMA = 2  # pixels: the probability's smoothing
_EIGHT = np.ones((3, 3), dtype=bool)
# a plateau proven not deep is joined to the top above its own height - h + _MARGIN * h
_MARGIN = 0.01
SPLIT_LANDSCAPES = {
    "distance": "distance of each pixel to the object's edge (shape alone)",
    "probability": "the class probability, smoothed by a Gaussian of sigma 2 px",
    "intensity": "the frame's brightness, smoothed by a Gaussian of sigma 2 px (bright objects "
                 "on a dark background, e.g. flies lit from below)",
}


@dataclass(frozen=True)
class ObjectSplitter:
    """Splits components that hold several touching objects.

    Parameters
    ----------
    landscape : {"distance", "probability", "intensity"}
        What is flooded (`SPLIT_LANDSCAPES`).
    depth : float in (0, 1)
        A maximum counts when it rises at least ``depth`` times the component's
        highest value above the saddle that joins it to a higher one.
    min_size : int
        Pieces must have at least this many pixels, else the component stays whole.

    Examples
    --------
    Two discs of radius 6 that overlap a little are one component, then two:

    >>> yy, xx = np.mgrid[:20, :34]
    >>> both = ((yy - 10) ** 2 + (xx - 10) ** 2 < 36) | ((yy - 10) ** 2 + (xx - 21) ** 2 < 36)
    >>> objects = both.astype(np.int32)
    >>> np.unique(ObjectSplitter().split(objects)).tolist()
    [0, 1, 2]
    >>> np.unique(ObjectSplitter(min_size=200).split(objects)).tolist()
    [0, 1]
    """

    landscape: str = "distance"
    depth: float = 0.2
    min_size: int = 0

    def __post_init__(self):
        if self.landscape not in SPLIT_LANDSCAPES:
            raise ValueError(f"landscape must be one of {', '.join(SPLIT_LANDSCAPES)}, got "
                             f"{self.landscape!r}")
        if not 0 < self.depth < 1:
            raise ValueError(f"depth must be between 0 and 1 (a fraction of the highest value), "
                             f"got {self.depth!r}")
        if not is_int(self.min_size, 0):
            raise ValueError(f"min_size must be an integer >= 0 (pixels), got {self.min_size!r}")

    def split(self, objects, probability=None, image=None, *, boxes=None):
        """``objects`` (numbered 1, 2, ...) with touching objects split; the first piece of a
        split object keeps its number, the others are numbered after the last object.

        Parameters
        ----------
        objects : ndarray of int (H, W)
        probability : ndarray (H, W), optional
            Required by the ``probability`` landscape.
        image : ndarray (H, W) or (H, W, C), optional
            The frame; required by the ``intensity`` landscape (channels averaged).
        boxes : list of tuple of slice, optional
            The objects' bounding boxes, ``scipy.ndimage.find_objects(objects)``, when
            already known (saves a pass over the whole frame).
        """
        out = np.asarray(objects).astype(np.int32, copy=True)
        self._split_in_place(out, probability, image,
                             ndi.find_objects(out) if boxes is None else list(boxes))
        return out

    def _split_in_place(self, objects, probability, image, boxes):
        """`split` into ``objects`` itself (int32, numbered 1, 2, ...) given their bounding
        boxes ``boxes`` (``scipy.ndimage.find_objects(objects)``); returns the boxes of the
        objects after splitting (that list, with the first pieces' boxes and the new
        pieces' added), so the objects are measured without another pass over the frame."""
        surface = None
        if self.landscape != "distance":
            surface = probability if self.landscape == "probability" else image
            if surface is None:
                needed = "class probability" if self.landscape == "probability" else "frame"
                raise ValueError(f"splitting on the {self.landscape} needs the {needed}")
            surface = np.asarray(surface)
        boxes = list(boxes)
        n = len(boxes)                          # the largest number (find_objects' length)
        for index, box in enumerate(boxes[:n], start=1):
            if box is None:
                continue
            inside = objects[box] == index
            if np.count_nonzero(inside) < 2 * max(self.min_size, 1):
                continue
            pieces = self._pieces(inside, self._height(inside, box, surface))
            if pieces is not None:
                # the first piece keeps the number, the others are numbered after the last
                moved = inside & (pieces > 1)
                objects[box][moved] = pieces[moved] - 1 + n
                boxes += [None] * (int(pieces.max()) - 1)
                # the first piece keeps too the pixels the flood did not reach (joined to it
                # only diagonally: watershed floods across edges)
                numbered = np.where(moved, pieces, inside)
                for piece, (rows, cols) in enumerate(ndi.find_objects(numbered), start=1):
                    boxes[index - 1 if piece == 1 else piece - 2 + n] = (
                        slice(box[0].start + rows.start, box[0].start + rows.stop),
                        slice(box[1].start + cols.start, box[1].start + cols.stop))
                n += int(pieces.max()) - 1
        return boxes

    def _height(self, inside, box, surface):
        """The landscape over one component's bounding box, 0 outside the component (a
        smoothed surface is made >= 0 inside it, so that 0 is its floor)."""
        if self.landscape == "distance":
            return ndi.distance_transform_edt(np.pad(inside, 1))[1:-1, 1:-1]
        # smoothed over the box and a margin of 3 sigma, so the edge of the box is smoothed alike
        margin = 3 * _SIGMA
        rows, cols = box
        top, left = max(rows.start - margin, 0), max(cols.start - margin, 0)
        window = surface[top:rows.stop + margin, left:cols.stop + margin].astype(np.float32)
        if window.ndim == 3:
            window = window.mean(axis=-1)
        smooth = ndi.gaussian_filter(window, _SIGMA)
        smooth = smooth[rows.start - top:rows.stop - top, cols.start - left:cols.stop - left]
        return np.where(inside, smooth - min(float(smooth[inside].min()), 0.0), 0)

    def _pieces(self, inside, height):
        """The component flooded from its deep maxima, 1..k, or None when it stays whole."""
        top = float(height.max())
        if top <= 0:
            return None
        if _at_most_one_deep_maximum(height, self.depth * top):
            return None
        peaks, n_peaks = ndi.label(h_maxima(height, self.depth * top) & inside,
                                   structure=_EIGHT)
        if n_peaks < 2:
            return None
        pieces = watershed(-height, peaks, mask=inside)
        sizes = np.bincount(pieces.ravel())[1:]
        if (sizes < max(self.min_size, 1)).any():
            return None
        return pieces


def _at_most_one_deep_maximum(height, h):
    """Whether ``h_maxima(height, h)`` (3x3 footprint) is provably one 8-connected region or
    none, found without its reconstruction (which sorts every pixel of the box).

    ``height`` is >= 0 with a positive maximum ``top`` and ``0 < h < top``. Every pixel
    of h_maxima's result climbs (through 8-neighbours, never down) to a regional maximum
    in the result, so the result has no more regions than the regional maxima in it.
    Those are among the plateaus of pixels >= ``h`` without a higher neighbour (each a
    connected set of one height; the result holds no pixel below ``h``). A plateau of
    height ``p`` that is joined to the highest pixel by pixels all >= ``t``, with
    ``t <= top - h - margin``, is reconstructed to at least ``t`` (the reconstruction
    of the marker ``height - h - resolution``, which is ``>= top - h - margin`` there);
    with ``t > p - h`` its residue stays below ``h`` and it is not in the result. The
    highest plateau not yet proven sets ``t`` just above its ``p - h`` (``margin`` above),
    and one superlevel set proves it and every lower plateau joined to the top in it;
    one that is not proven (a maximum as deep as ``h`` or nearly so, or one within
    ``2 margin`` of ``top``, a tie h_maxima keeps) leaves the answer False, and the
    caller runs h_maxima itself.
    """
    top_index = int(np.argmax(height))
    top = float(height.flat[top_index])
    margin = _MARGIN * h
    plateaus = (height >= h) & (height == ndi.maximum_filter(height, size=3))
    numbers, n = ndi.label(plateaus, structure=_EIGHT)
    if n <= 1:
        return True
    where = np.flatnonzero(plateaus)
    _, first = np.unique(numbers.flat[where], return_index=True)
    pixels = where[first]
    pixels = pixels[numbers.flat[pixels] != numbers.flat[top_index]]
    levels = height.flat[pixels].astype(np.float64)
    order = np.argsort(-levels, kind="stable")
    pixels, levels = pixels[order], levels[order]
    while len(pixels):
        if levels[0] > top - 2 * margin:
            return False
        parts, _ = ndi.label(height >= levels[0] - h + margin, structure=_EIGHT)
        joined = parts.flat[pixels] == parts.flat[top_index]
        if not joined[0]:
            return False
        pixels, levels = pixels[~joined], levels[~joined]
    return True
