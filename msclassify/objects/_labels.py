"""Object labels from a file: which object of which frame is of which class.

An object-label file is a CSV table with columns ``frame``, ``centroid-0``
(row), ``centroid-1`` (column) and ``class``: a point inside each labelled
object. Rows of an object table with a ``class`` column added are such a file
(an object's centroid lies inside it unless the object is bent), and so are
the points clicked in napari.
"""

from pathlib import Path

import numpy as np
import pandas as pd

from ..io import write_atomically

__all__ = ["OBJECT_LABEL_COLUMNS", "objects_at", "read_object_labels", "write_object_labels"]

OBJECT_LABEL_COLUMNS = ("frame", "centroid-0", "centroid-1", "class")


def read_object_labels(path):
    """The labelled points of an object-label file, checked.

    Returns
    -------
    pandas.DataFrame
        `OBJECT_LABEL_COLUMNS`, ``frame`` int, ``class`` str, plus ``line`` (the
        row's line in the file, for messages).

    Raises
    ------
    ValueError
        One line saying what is wrong with the file and how to fix it.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "labels.csv")
    >>> _ = open(path, "w").write("frame,centroid-0,centroid-1,class\\n3,10.5,20,fly\\n")
    >>> read_object_labels(path).values.tolist()
    [[3, 10.5, 20, 'fly', 2]]
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"object-label file {path} does not exist; check the path")
    try:
        table = pd.read_csv(path, dtype={"class": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"object-label file {path} is not a CSV table ({exc}); write one row "
                         f"per object with columns {', '.join(OBJECT_LABEL_COLUMNS)}") from None
    missing = [name for name in OBJECT_LABEL_COLUMNS if name not in table.columns]
    if missing:
        raise ValueError(f"object-label file {path} lacks column(s) {', '.join(missing)}; it needs "
                         f"{', '.join(OBJECT_LABEL_COLUMNS)} (one row per labelled object)")
    table = table[list(OBJECT_LABEL_COLUMNS)].copy()
    table["line"] = np.arange(len(table)) + 2  # the header is line 1
    if table.empty:
        raise ValueError(f"object-label file {path} has no rows; label a few objects per class")
    for name in ("frame", "centroid-0", "centroid-1"):
        values = pd.to_numeric(table[name], errors="coerce")
        bad = table["line"][values.isna() | ~np.isfinite(values)]
        if len(bad):
            raise ValueError(f"object-label file {path} line {bad.iloc[0]}: {name} "
                             f"{table[name][bad.index[0]]!r} is not a number")
        table[name] = values
    frames = table["frame"]
    bad = table["line"][(frames < 0) | (frames != np.round(frames))]
    if len(bad):
        raise ValueError(f"object-label file {path} line {bad.iloc[0]}: frame "
                         f"{frames[bad.index[0]]!r} is not a frame number (0, 1, 2, ...)")
    table["frame"] = frames.astype(np.int64)
    if table["class"].isna().any():
        line = table["line"][table["class"].isna()].iloc[0]
        raise ValueError(f"object-label file {path} line {line}: the class is empty")
    return table.reset_index(drop=True)


def write_object_labels(points, path, *, overwrite=False):
    """Write labelled points as an object-label file that `read_object_labels` reads.

    Parameters
    ----------
    points : pandas.DataFrame
        Columns `OBJECT_LABEL_COLUMNS` (others are left out), one row per labelled object.
    path : str or Path
        A ``.csv`` file; written atomically.
    overwrite : bool
        Replace an existing file.

    Raises
    ------
    ValueError
        When ``path`` exists (and not ``overwrite``) or a column is missing.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "labels.csv")
    >>> points = pd.DataFrame({"frame": [0, 2], "centroid-0": [4.0, 7.5],
    ...                        "centroid-1": [3.0, 1.0], "class": ["fly", "debris"]})
    >>> write_object_labels(points, path)
    >>> read_object_labels(path)["class"].tolist()
    ['fly', 'debris']
    """
    path = Path(path)
    missing = [name for name in OBJECT_LABEL_COLUMNS if name not in points]
    if missing:
        raise ValueError(f"object labels lack column(s) {', '.join(missing)}; they need "
                         f"{', '.join(OBJECT_LABEL_COLUMNS)}")
    if path.exists() and not overwrite:
        raise ValueError(f"{path} already exists; choose another file name or replace it")
    table = points[list(OBJECT_LABEL_COLUMNS)].copy()
    table["frame"] = table["frame"].astype(np.int64)
    write_atomically(path, lambda file: table.to_csv(file, index=False))


def objects_at(objects, points, *, where="object-label file"):
    """The object number under each point of one frame.

    Parameters
    ----------
    objects : ndarray of int (H, W)
    points : pandas.DataFrame
        Rows of `read_object_labels` for this frame.

    Raises
    ------
    ValueError
        When a point lies on no object, or two points of different classes on one.

    Examples
    --------
    >>> objects = np.zeros((4, 4), int); objects[1:3, 1:3] = 7
    >>> points = pd.DataFrame({"frame": [0], "centroid-0": [1.6], "centroid-1": [2.2],
    ...                        "class": ["fly"], "line": [2]})
    >>> objects_at(objects, points)
    {7: 'fly'}
    """
    labels = {}
    height, width = objects.shape
    for _, point in points.iterrows():
        row, col = int(round(point["centroid-0"])), int(round(point["centroid-1"]))
        place = (f"{where} line {point['line']}: frame {point['frame']} at row {row}, "
                 f"column {col}")
        if not (0 <= row < height and 0 <= col < width):
            raise ValueError(f"{place} is outside the {width}x{height} frame")
        number = int(objects[row, col])
        if number == 0:
            raise ValueError(f"{place} is on no object (the pixel model finds none there, or "
                             "it was dropped by --min-size); put the point inside an object")
        if labels.get(number, point["class"]) != point["class"]:
            raise ValueError(f"{place}: the object there is labelled both "
                             f"{labels[number]!r} and {point['class']!r}")
        labels[number] = point["class"]
    return labels
