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
    return _find_objects(labels, target, min_size, split, probability, image)[0]


def _find_objects(labels, target, min_size=0, split=None, probability=None, image=None):
    """`find_objects` and the objects' bounding boxes (``scipy.ndimage.find_objects`` of it:
    entry ``k - 1`` is object ``k``'s), found without another pass over the frame."""
    objects, boxes = _components(np.asarray(labels) == target, int(min_size))
    if split is not None:
        boxes = split._split_in_place(objects, probability, image, boxes)
    return objects, boxes


# the side (pixels) of the blocks `_components` first looks for the mask's pixels in
_BLOCK = 16
_EIGHT = np.ones((3, 3), dtype=bool)


def _components(mask, min_size):
    """8-connected components of ``mask`` with at least ``min_size`` pixels, numbered 1, 2, ...
    in raster order of their first pixel (as ``scipy.ndimage.label`` numbers them), and their
    bounding boxes (``scipy.ndimage.find_objects`` of the result).

    Objects cover a small part of a frame, so the frame is not labelled whole: the
    ``_BLOCK``-pixel blocks holding a pixel of the mask are labelled (8-connected), and each
    group of touching blocks is labelled on its own crop (``scipy.ndimage.label``): a
    component's pixels touch only pixels of its own or an adjacent block, so it lies
    inside one group.
    """
    height, width = mask.shape
    objects = np.zeros(mask.shape, dtype=np.int32)
    where = np.flatnonzero(mask)
    if where.size == 0:
        return objects, []
    blocks = np.zeros((-(-height // _BLOCK), -(-width // _BLOCK)), dtype=bool)
    blocks[where // width // _BLOCK, where % width // _BLOCK] = True
    groups, _ = ndi.label(blocks, structure=_EIGHT)
    found = []                  # (first pixel's raster index, box, pixels in the box)
    for group, (block_rows, block_cols) in enumerate(ndi.find_objects(groups), start=1):
        top, left = block_rows.start * _BLOCK, block_cols.start * _BLOCK
        own = np.repeat(np.repeat(groups[block_rows, block_cols] == group, _BLOCK, axis=0),
                        _BLOCK, axis=1)
        crop = mask[top:block_rows.stop * _BLOCK, left:block_cols.stop * _BLOCK]
        parts, _ = ndi.label(crop & own[:crop.shape[0], :crop.shape[1]], structure=_EIGHT)
        for part, (rows, cols) in enumerate(ndi.find_objects(parts), start=1):
            inside = parts[rows, cols] == part
            if np.count_nonzero(inside) < min_size:
                continue
            box = (slice(top + rows.start, top + rows.stop),
                   slice(left + cols.start, left + cols.stop))
            first = box[0].start * width + box[1].start + int(np.argmax(inside[0]))
            found.append((first, box, inside))
    found.sort(key=lambda item: item[0])
    for number, (_, box, inside) in enumerate(found, start=1):
        objects[box][inside] = number
    return objects, [box for _, box, _ in found]


def measure_objects(objects, image=None, probability=None, *, frame=0, boxes=None):
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
    boxes : list of tuple of slice, optional
        The objects' bounding boxes, ``scipy.ndimage.find_objects(objects)``, when
        already known (saves a pass over the whole frame).

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
    return pd.DataFrame(_measure_columns(objects, image, probability, frame, boxes))


def _measure_columns(objects, image=None, probability=None, frame=0, boxes=None):
    """`measure_objects`' columns, a dict in the table's order (a frame's table is made
    once, with the columns a pipeline adds)."""
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
    if boxes is None:
        boxes = ndi.find_objects(objects)
    # regionprops_table measures the objects' crops packed into one small image, so no pass
    # over the frame (e.g. its own `find_objects`)
    numbers, boxes, corners, places, canvas = _packed_objects(objects, boxes)
    # one channel is measured as it is (regionprops reads each object's pixels as float64);
    # several are stacked into one float32 image
    shape = canvas.shape
    intensity = (None if not channels else
                 np.zeros(shape + (1,), dtype=channels[0].dtype) if len(channels) == 1 else
                 np.zeros(shape + (len(channels),), dtype=np.float32))
    crops = []
    if channels:
        for number, box, place in zip(numbers, boxes, places):
            inside = canvas[place] == number
            for c, channel in enumerate(channels):
                intensity[place + (c,)] = channel[box]
            crops.append((inside, intensity[place] * inside[..., None]))
    columns = regionprops_table(canvas, intensity_image=intensity, properties=_PROPERTIES + (
        ("intensity_mean", "intensity_max", "centroid_weighted_local") if channels else ()))
    columns = _to_frame(columns, boxes, corners)
    for extra in (orientation_weighted, orientation_body) if channels else ():
        for c in range(len(channels)):
            columns[f"{extra.__name__}-{c}"] = np.array(
                [extra(inside, values[..., c]) for inside, values in crops], dtype=np.float64)
    if "intensity_max-0" in columns:            # the same dtype whatever the frame's
        columns["intensity_max-0"] = columns["intensity_max-0"].astype(np.float32)
    columns = _name_channels(columns, image, probability is not None)
    return {"frame": np.full(len(numbers), int(frame), dtype=np.int64),
            "object": columns.pop("label"), **columns}


def _packed_objects(objects, boxes):
    """The objects of ``boxes`` (``find_objects(objects)``; None entries skipped) with their
    crops packed into one small label image (`_pack`), each crop holding only its own
    object, so a property measured there is measured on the very pixels it has in
    ``objects``.

    Returns
    -------
    numbers, boxes, corners, places, canvas
        The objects' numbers, their boxes in ``objects``, their crops' top-left corners and
        slices in ``canvas``, and the packed label image.
    """
    numbers = [number for number, box in enumerate(boxes, start=1) if box is not None]
    boxes = [boxes[number - 1] for number in numbers]
    corners, shape = _pack(boxes, objects.shape[1])
    canvas = np.zeros(shape, dtype=objects.dtype)
    places = []
    for number, box, (row, col) in zip(numbers, boxes, corners):
        place = (slice(row, row + box[0].stop - box[0].start),
                 slice(col, col + box[1].stop - box[1].start))
        canvas[place][objects[box] == number] = number
        places.append(place)
    return numbers, boxes, corners, places, canvas


def _pack(boxes, width):
    """Top-left corners of the boxes' crops packed in rows at most ``width`` wide (or one
    box), left to right, and the shape of the image that holds them (at least 1x1)."""
    corners, top, left, row_height, right = [], 0, 0, 0, 0
    for rows, cols in boxes:
        height, box_width = rows.stop - rows.start, cols.stop - cols.start
        if left and left + box_width > width:
            top, left, row_height = top + row_height, 0, 0
        corners.append((top, left))
        left += box_width
        row_height, right = max(row_height, height), max(right, left)
    return corners, (max(top + row_height, 1), max(right, 1))


def _to_frame(columns, boxes, corners):
    """regionprops_table's columns of the packed crops -> those of the objects in the frame:
    box corners moved; centroids moved exactly as if measured in the frame (regionprops'
    centroid is the mean of the pixel coordinates, whose sum is an integer; its weighted
    centroid is the crop's own plus the box's corner)."""
    shift = {axis: np.array([box[axis].start - corner[axis]
                             for box, corner in zip(boxes, corners)], dtype=np.int64)
             for axis in (0, 1)}
    start = {axis: np.array([box[axis].start for box in boxes], dtype=np.float64)
             for axis in (0, 1)}
    moved = {}
    for name, values in columns.items():
        base, _, axis = name.partition("-")
        if base == "bbox":
            values = values + shift[int(axis) % 2]
        elif base == "centroid":
            area = columns["area"]
            values = (np.round(values * area) + shift[int(axis)] * area) / area
        elif base == "centroid_weighted_local":
            name = "centroid_weighted-" + axis
            values = values + start[int(axis.partition("-")[0])]
        moved[name] = values
    return moved


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
