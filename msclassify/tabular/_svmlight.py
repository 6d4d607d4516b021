"""svmlight / LETOR files (``label [qid:q] fid:value ... # comment``) and ``.query`` files."""

from pathlib import Path

import numpy as np
from sklearn.datasets import load_svmlight_file

from ..checks import physical_memory
from ._data import TabularData, labels_as_numbers, run_lengths
from ._text import check_file, data_lines


def read_query_file(path, n_rows=None):
    """Read a LightGBM/LETOR ``.query`` file: the size of each query group, one per line.

    Parameters
    ----------
    path : str or Path
    n_rows : int, optional
        If given, the sizes must add up to it (the row count of the data file).

    Returns
    -------
    ndarray of int64, shape (n_queries,)

    Raises
    ------
    ValueError
        Naming file and line of a size that is not a positive whole number, or
        giving both totals when the sizes do not add up to ``n_rows``.
    """
    path = check_file(path, "query file")
    sizes = []
    for number, line in data_lines(path):
        token = line.strip()
        if not token.isdigit() or int(token) == 0:
            raise ValueError(f"query file {path}, line {number}: {token!r} is not a positive whole "
                             "number (each line holds the number of rows of one query)")
        sizes.append(int(token))
    sizes = np.array(sizes, dtype=np.int64)
    if n_rows is not None and sizes.sum() != n_rows:
        raise ValueError(f"query file {path}: the {sizes.size} query sizes add up to {sizes.sum()} "
                         f"rows but the data file has {n_rows}; the .query file belongs to another "
                         "data file or is truncated")
    return sizes


def _explain_svmlight_error(path, zero_based, n_features):
    """Find the first line sklearn's parser rejected and say what is wrong with it."""
    lowest = 0 if zero_based else 1
    for number, line in data_lines(path):
        tokens = line.split()
        where = f"svmlight file {path}, line {number}"
        try:
            float(tokens[0])
        except ValueError:
            return f"{where}: label {tokens[0]!r} is not a number"
        previous = lowest - 1
        for token in tokens[1:]:
            key, sep, value = token.partition(":")
            if not sep:
                return f"{where}: {token!r} is not of the form feature_id:value"
            if key == "qid":
                if not value.lstrip("-").isdigit():
                    return f"{where}: query id {value!r} is not a whole number"
                continue
            if not key.isdigit():
                return f"{where}: feature id {key!r} in {token!r} is not a whole number"
            try:
                float(value)
            except ValueError:
                return f"{where}: value {value!r} of feature {key} is not a number"
            fid = int(key)
            if fid < lowest:
                return (f"{where}: feature id {fid}, but svmlight feature ids start at "
                        f"{lowest}; add 1 to every feature id of the file (it numbers them "
                        "from 0)")
            if fid <= previous:
                return f"{where}: feature ids must increase along a line ({fid} after {previous})"
            if n_features is not None and fid - lowest >= n_features:
                return f"{where}: feature id {fid} does not fit n_features={n_features}"
            previous = fid
    return None


def _check_dense_size(path, sparse, zero_based):
    """ValueError naming the line of the largest feature id if the dense table cannot fit.

    The table is dense (N x largest id): one stray id of 2e9 would ask for hundreds of GiB.
    """
    n_rows, n_columns = sparse.shape
    needed = n_rows * n_columns * 8
    if needed <= physical_memory() // 2:
        return
    row = int(np.searchsorted(sparse.indptr, int(np.argmax(sparse.indices)), side="right") - 1) \
        if sparse.nnz else 0
    line = next((number for index, (number, _) in enumerate(data_lines(path)) if index == row),
                "?")
    largest = n_columns - 1 + (0 if zero_based else 1)
    raise ValueError(f"svmlight file {path}, line {line}: feature id {largest} makes a dense "
                     f"table of {n_rows} x {n_columns} values ({needed / 2**30:.0f} GiB), more "
                     "than this machine's memory; check that line (a stray or corrupt id?)")


def _first_line_without_qid(path):
    for number, line in data_lines(path):
        if not any(token.startswith("qid:") for token in line.split()[1:]):
            return number
    return None


def load_svmlight(path, n_features=None, query_file="auto", zero_based=False, absent=0.0,
                  missing_sentinel=None):
    """Load an svmlight/LETOR file as dense `TabularData`.

    Each line is ``label [qid:q] fid:value fid:value ... [# comment]``. Query
    groups come from ``qid:`` fields or from a separate ``.query`` file of group
    sizes (LightGBM's layout, e.g. ``rank.train`` + ``rank.train.query``).

    Parameters
    ----------
    path : str or Path
    n_features : int, optional
        Number of columns (use the same value for train and test files). Default:
        the largest feature id in the file.
    query_file : "auto", str, Path or None
        Group-size file. ``"auto"`` uses ``<path>.query`` if it exists; None ignores
        any. If the data file also has ``qid:`` fields, the two must agree.
    zero_based : bool
        Whether feature ids start at 0. By default id 1 is column 0, and
        ``feature_names`` keep the file's ids (``"f1"``, ``"f2"``, ...).
    absent : float
        Value of a feature id that a line leaves out: 0 by the svmlight convention,
        or ``np.nan`` to treat it as missing.
    missing_sentinel : float, optional
        A value that means "missing" in this data (MiniBooNE uses -999.0); it is
        replaced by NaN.

    Returns
    -------
    TabularData
        ``qid`` is the in-file query id, or the group index (0, 1, ...) from a
        ``.query`` file, or None.

    Raises
    ------
    ValueError
        Naming file and line of a malformed line, and for ``.query`` sizes that do
        not add up to the number of rows.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "rank.train")
    >>> _ = open(path, "w").write("2 qid:1 1:0.5 3:1 # doc a\\n0 qid:1 2:0.25\\n")
    >>> data = load_svmlight(path)
    >>> data.X
    array([[0.5 , 0.  , 1.  ],
           [0.  , 0.25, 0.  ]])
    >>> data.y, data.qid, data.feature_names
    (array([2, 0]), array([1, 1]), ('f1', 'f2', 'f3'))
    """
    path = check_file(path, "svmlight file")
    try:
        sparse, labels, qid = load_svmlight_file(str(path), n_features=n_features, dtype=np.float64,
                                                 zero_based=zero_based, query_id=True)
    except ValueError as exc:
        problem = _explain_svmlight_error(path, zero_based, n_features)
        raise ValueError(problem or f"svmlight file {path}: {exc}") from None
    n_rows = sparse.shape[0]
    if n_rows == 0:
        raise ValueError(f"svmlight file {path} has no data lines")
    if 0 < qid.size < n_rows:
        raise ValueError(f"svmlight file {path}, line {_first_line_without_qid(path)}: no qid "
                         "field, but other lines have one; give every line a qid or none")
    qid = qid.astype(np.int64) if qid.size else None

    if query_file == "auto":
        candidate = Path(f"{path}.query")
        query_file = candidate if candidate.is_file() else None
    if query_file is not None:
        sizes = read_query_file(query_file, n_rows)
        from_sizes = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
        if qid is not None:
            if not np.array_equal(run_lengths(qid), sizes):
                raise ValueError(f"the groups of {query_file} disagree with the qid fields of "
                                 f"{path}; keep one of the two (delete the .query file to "
                                 "use the qid fields)")
        else:
            qid = from_sizes

    _check_dense_size(path, sparse, zero_based)
    if absent == 0:
        X = sparse.toarray()
    else:  # sklearn keeps explicit "fid:0" entries, so only truly absent ids get `absent`
        X = np.full(sparse.shape, float(absent))
        coo = sparse.tocoo()
        X[coo.row, coo.col] = coo.data
    if missing_sentinel is not None:
        X[X == missing_sentinel] = np.nan
    offset = 0 if zero_based else 1
    names = tuple(f"f{column + offset}" for column in range(X.shape[1]))
    return TabularData(np.ascontiguousarray(X), labels_as_numbers(labels), qid, names)
