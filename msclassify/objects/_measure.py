"""Per-object measurements of one frame: `skimage.measure.regionprops_table`, its names kept.

`find_objects` turns a frame's predicted classes into numbered objects (connected
components of one class, 8-neighbourhood, small ones dropped, touching ones
optionally split); `measure_objects` measures them. The columns keep
scikit-image's names and conventions: ``centroid-0`` is the row and
``centroid-1`` the column of the centroid (pixels), ``bbox-0 .. bbox-3`` are
``min_row, min_col, max_row, max_col`` (max exclusive), ``orientation`` is the
angle in radians between the row axis and the major axis, in ``[-pi/2, pi/2]``,
counter-clockwise as seen in an image shown with row 0 on top.
"""

import numpy as np
import pandas as pd
from scipy import ndimage as ndi
from skimage.filters import threshold_otsu
from skimage.measure import inertia_tensor, moments_central, regionprops_table

__all__ = ["SHAPE_COLUMNS", "find_objects", "measure_objects"]

# what every table holds, in regionprops_table's names (centroid and bbox expand to -0, -1, ...)
_PROPERTIES = ("label", "area", "centroid", "bbox", "orientation", "axis_major_length",
               "axis_minor_length", "eccentricity", "solidity")
SHAPE_COLUMNS = ("area", "centroid-0", "centroid-1", "bbox-0", "bbox-1", "bbox-2", "bbox-3",
                 "orientation", "axis_major_length", "axis_minor_length", "eccentricity",
                 "solidity")
_INTENSITY = ("intensity_mean", "intensity_max", "centroid_weighted")
# computed by `orientation_weighted` and `orientation_body`, named like the intensity columns
_WEIGHTED = _INTENSITY + ("orientation_weighted", "orientation_body")


def find_objects(labels, target, *, min_size=0, split=None, probability=None, image=None):
    """Numbered objects of class ``target`` in one frame's predicted classes.

    Parameters
    ----------
    labels : ndarray (H, W)
        Predicted class values of a frame.
    target : int
        The class whose connected components (8-neighbourhood) are the objects.
    min_size : int
        Objects with fewer pixels are dropped (before splitting).
    split : ObjectSplitter, optional
        Splits touching objects (see `ObjectSplitter`).
    probability : ndarray (H, W), optional
        The probability of ``target``, used by a splitter that splits on it.
    image : ndarray, optional
        The frame, used by a splitter that splits on its intensity.

    Returns
    -------
    ndarray of int32 (H, W)
        0 for background, objects 1, 2, ... in raster order of their first pixel.

    Examples
    --------
    >>> labels = np.array([[2, 2, 1, 2],
    ...                    [2, 1, 1, 1]], np.uint8)
    >>> find_objects(labels, 2).tolist()
    [[1, 1, 0, 2], [1, 0, 0, 0]]
    >>> find_objects(labels, 2, min_size=2).tolist()
    [[1, 1, 0, 0], [1, 0, 0, 0]]
    """
    objects, boxes = _components(np.asarray(labels) == target, int(min_size))
    if split is not None:
        objects = split.split(objects, probability, image, boxes=boxes)
    return objects


def _components(mask, min_size):
    """8-connected components of ``mask`` with at least ``min_size`` pixels, numbered 1, 2, ...,
    and their bounding boxes (`scipy.ndimage.find_objects` of the result; None when not
    looked for, i.e. without a size filter).

    Small ones are erased and the rest renumbered inside their bounding boxes, so a
    frame with a few objects costs one labelling pass, not several whole-frame ones.
    """
    objects, n = ndi.label(mask, structure=np.ones((3, 3), dtype=bool))
    if min_size <= 1 or n == 0:
        return objects, None
    kept = []
    for index, box in enumerate(ndi.find_objects(objects), start=1):
        inside = objects[box] == index
        if np.count_nonzero(inside) < min_size:
            objects[box][inside] = 0
        else:
            kept.append(box)
            if len(kept) != index:
                objects[box][inside] = len(kept)
    return objects, kept


def measure_objects(objects, image=None, probability=None, *, frame=0):
    """One row per object of a frame: where it is, its shape and its intensities.

    Parameters
    ----------
    objects : ndarray of int (H, W)
        Objects numbered 1, 2, ... (0 = background), e.g. from `find_objects`.
    image : ndarray (H, W) or (H, W, C), optional
        The frame: adds ``intensity_mean``, ``intensity_max`` and the
        intensity-weighted centroid ``centroid_weighted-0`` (row),
        ``centroid_weighted-1`` (column), where bright pixels count more (a
        fly's bright body more than its dim wings); per channel
        (``intensity_mean-0``, ``centroid_weighted-0-0``, ...) for a
        multichannel frame, scikit-image's names. And ``orientation_weighted``:
        regionprops' ``orientation`` (radians, same convention) of the
        intensity-weighted second moments (skimage's ``moments_weighted_central``),
        the axis of the bright part (a fly's body rather than its spread wings);
        per channel (``orientation_weighted-0``, ...) for a multichannel frame.
        And ``orientation_body``: ``orientation`` of the object's bright part alone
        (`orientation_body`: the largest connected part of its pixels above Otsu's
        threshold of its own intensities; a fly's body without its wings).
    probability : ndarray (H, W), optional
        The probability of the objects' class: adds ``probability_mean`` and
        ``probability_max``.
    frame : int
        The frame number written in column ``frame``.

    Returns
    -------
    pandas.DataFrame
        Columns ``frame``, ``object`` (the object's number in ``objects``), then
        `SHAPE_COLUMNS` and the intensity columns; one row per object, in the
        order of their numbers.

    Examples
    --------
    A 4x4 square with its centre at row 3.5, column 5.5:

    >>> objects = np.zeros((8, 10), int); objects[2:6, 4:8] = 1
    >>> table = measure_objects(objects, image=objects * 10.0)
    >>> table[["object", "area", "centroid-0", "centroid-1", "intensity_mean"]].to_numpy().tolist()
    [[1.0, 16.0, 3.5, 5.5, 10.0]]
    """
    objects = np.asarray(objects)
    if objects.ndim != 2:
        raise ValueError(f"objects must be a 2-D label image, got shape {objects.shape}")
    channels = []
    if image is not None:
        image = np.asarray(image)
        if image.shape[:2] != objects.shape:
            raise ValueError(f"the image's shape {image.shape} does not match the objects' "
                             f"{objects.shape}")
        channels += [image] if image.ndim == 2 else [image[..., c] for c in range(image.shape[2])]
    if probability is not None:
        probability = np.asarray(probability)
        if probability.shape != objects.shape:
            raise ValueError(f"the probability's shape {probability.shape} does not match the "
                             f"objects' {objects.shape}")
        channels.append(probability)
    properties = _PROPERTIES + (_INTENSITY if channels else ())
    # one channel is measured as it is (regionprops reads each object's pixels as float64);
    # several are stacked into one float32 image
    intensity = (None if not channels else channels[0][..., None] if len(channels) == 1 else
                 np.stack([np.asarray(c, dtype=np.float32) for c in channels], axis=-1))
    columns = regionprops_table(objects, intensity_image=intensity, properties=properties,
                                extra_properties=(orientation_weighted, orientation_body)
                                if channels else ())
    if "intensity_max-0" in columns:            # the same dtype whatever the frame's
        columns["intensity_max-0"] = columns["intensity_max-0"].astype(np.float32)
    columns = _name_channels(columns, image, probability is not None)
    table = pd.DataFrame(columns)
    table.insert(0, "frame", np.full(len(table), int(frame), dtype=np.int64))
    return table.rename(columns={"label": "object"})


def orientation_weighted(region, intensity):
    """regionprops' ``orientation`` of the intensity-weighted second moments of one channel
    (an ``extra_properties`` function of `skimage.measure.regionprops_table`)."""
    weights = np.where(region, intensity, 0.0)
    mu = moments_central(weights, order=2)
    if not mu[0, 0] > 0:
        return np.nan                           # an object of black pixels has no weights
    a, b, _, c = inertia_tensor(weights, mu).flat
    if a == c:                                  # regionprops' orientation breaks the tie so
        return -np.pi / 4 if b >= 0 else np.pi / 4
    return 0.5 * np.arctan2(-2 * b, c - a)


def orientation_body(region, intensity):
    """regionprops' ``orientation`` of an object's bright part: the largest connected
    (8-neighbourhood) part of its pixels brighter than Otsu's threshold of the object's own
    intensities (the whole object when they are all equal); an ``extra_properties``
    function of `skimage.measure.regionprops_table`.

    Otsu's threshold splits the object's histogram into its two best-separated classes, so
    no constant says what "bright" is; keeping the largest part drops stray bright pixels.
    A fly lit from below has a bright body and dim, translucent wings: this is the body's
    axis, which the wings, spread or overlapping another fly, do not pull.

    Examples
    --------
    A bright bar along the rows (length 9) with a wider dim plate across it:

    >>> region = np.zeros((11, 11), bool); intensity = np.zeros((11, 11))
    >>> region[1:10, 4:7] = True; intensity[1:10, 4:7] = 200
    >>> region[3:8, 0:11] = True; intensity[3:8, 0:11] = 20; intensity[3:8, 4:7] = 200
    >>> float(orientation_body(region, intensity))
    0.0
    """
    values = intensity[region]
    if values.size == 0:
        return np.nan
    body = region & (intensity > threshold_otsu(values)) if np.ptp(values) > 0 else region
    parts, n = ndi.label(body, structure=np.ones((3, 3), dtype=bool))
    if n > 1:
        body = parts == 1 + np.argmax(np.bincount(parts.ravel())[1:])
    return orientation_weighted(body, body.astype(np.float64))


def _name_channels(columns, image, with_probability):
    """regionprops_table's ``intensity_mean-K`` per channel K -> the frame's and the probability's
    (``probability_mean``); the probability-weighted centroid and orientation are left out."""
    n_image = 0 if image is None else (1 if image.ndim == 2 else image.shape[2])
    renamed = {}
    for name, values in columns.items():
        base, _, channel = name.rpartition("-")
        if base.split("-")[0] in _WEIGHTED:
            channel = int(channel)
            if channel == n_image and with_probability:
                if base.endswith("weighted") or base == "orientation_body":
                    continue
                name = base.replace("intensity", "probability")
            elif n_image == 1:
                name = base
            # a multichannel frame keeps scikit-image's per-channel names
        renamed[name] = values
    return renamed
