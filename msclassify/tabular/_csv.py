"""CSV files with a header row and a named label column."""

import csv
import math

import numpy as np

from ._data import TabularData, labels_as_numbers
from ._text import check_file

MISSING_TOKENS = ("", "NA", "N/A", "NaN", "nan", "?")


def load_csv(path, label_column, delimiter=",", missing_tokens=MISSING_TOKENS,
             missing_sentinel=None):
    """Load a CSV file whose first row names the columns.

    Parameters
    ----------
    path : str or Path
    label_column : str
        Name of the column holding the labels; every other column is a feature.
    delimiter : str
        Column separator.
    missing_tokens : sequence of str
        Feature cells read as NaN (missing). Labels may not be missing.
    missing_sentinel : float, optional
        A numeric value meaning "missing", replaced by NaN.

    Returns
    -------
    TabularData
        Features float64; labels int64/float64 if all numeric, else strings.

    Raises
    ------
    ValueError
        Naming file and line of a row with the wrong number of cells, a feature
        cell that is not a number, or a missing label; or naming the header's
        columns when ``label_column`` is not among them.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(path, "w").write("a,label,b\\n1.5,yes,\\n2,no,4\\n")
    >>> data = load_csv(path, "label")
    >>> data.X, data.y, data.feature_names
    (array([[1.5, nan],
           [2. , 4. ]]), array(['yes', 'no'], dtype='<U3'), ('a', 'b'))
    """
    path = check_file(path, "CSV file")
    missing = set(missing_tokens)
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        header = next(reader, None)
        if not header:
            raise ValueError(f"CSV file {path} is empty; it needs a header row naming the columns")
        header = [name.strip() for name in header]
        if label_column not in header:
            raise ValueError(f"CSV file {path} has no column {label_column!r}; its columns are "
                             f"{header}")
        label_index = header.index(label_column)
        rows, labels = [], []
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise ValueError(f"CSV file {path}, line {line}: {len(row)} cells but the header "
                                 f"has {len(header)} columns")
            label = row[label_index].strip()
            if label in missing:
                raise ValueError(f"CSV file {path}, line {line}: the label ({label_column}) is "
                                 "missing; drop unlabelled rows")
            labels.append(label)
            values = []
            for column, cell in enumerate(row):
                if column == label_index:
                    continue
                cell = cell.strip()
                if cell in missing:
                    values.append(math.nan)
                    continue
                try:
                    values.append(float(cell))
                except ValueError:
                    raise ValueError(f"CSV file {path}, line {line}, column {header[column]!r}: "
                                     f"{cell!r} is not a number") from None
                if math.isinf(values[-1]):
                    raise ValueError(f"CSV file {path}, line {line}, column {header[column]!r}: "
                                     f"{cell!r} is infinite; replace it by a large finite "
                                     "number or leave the cell empty (missing)")
            rows.append(values)
    if not rows:
        raise ValueError(f"CSV file {path} has a header but no data rows")
    X = np.array(rows, dtype=np.float64).reshape(len(rows), len(header) - 1)
    if missing_sentinel is not None:
        X[X == missing_sentinel] = np.nan
    try:
        y = labels_as_numbers(np.array(labels, dtype=np.float64))
    except ValueError:
        y = np.array(labels)
    names = tuple(name for column, name in enumerate(header) if column != label_index)
    return TabularData(X, y, None, names)
