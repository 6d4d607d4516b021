"""Load a tabular data set of any supported format, with a test set and feature costs.

`load_table` reads svmlight/LETOR, MiniBooNE text or CSV, chosen by name or
sniffed from the file; `load_train_test` adds a test set (a file or a held-out
part, `split_train_test`) and a feature-cost file. The ``msclassify tabular``
command and the napari tabular widget load their data with these.
"""

from pathlib import Path

import numpy as np
from sklearn.model_selection import GroupShuffleSplit, train_test_split

from ..checks import file_problem
from ._costs import load_feature_costs
from ._csv import load_csv
from ._data import TabularData
from ._miniboone import load_miniboone
from ._svmlight import load_svmlight
from ._text import data_lines

__all__ = ["FILE_FORMATS", "load_table", "load_table_for_model", "load_train_test",
           "split_train_test"]

FILE_FORMATS = ("auto", "svmlight", "miniboone", "csv")


def _sniff_format(path):
    """"csv" by extension, "miniboone" for a first line of two counts, else "svmlight"."""
    if Path(path).suffix.lower() == ".csv":
        return "csv"
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            tokens = line.split()
            if tokens and not tokens[0].startswith("#"):
                return "miniboone" if len(tokens) == 2 and all(t.isdigit() for t in tokens) \
                    else "svmlight"
    return "svmlight"


def load_table(path, file_format="auto", *, label_column="label", n_features=None,
               missing_sentinel=None):
    """Load a data file of any format `msclassify.tabular` reads, chosen by name or sniffed.

    Parameters
    ----------
    path : str or Path
    file_format : {"auto", "svmlight", "miniboone", "csv"}
        ``"auto"``: ``.csv`` files are CSV, a file whose first line holds two
        counts is MiniBooNE, anything else svmlight/LETOR (its ``<path>.query``
        group file is read when present).
    label_column : str
        Label column of a CSV file.
    n_features : int, optional
        Column count of an svmlight file (give the training file's to a test file).
    missing_sentinel : float, optional
        Value meaning "missing" (MiniBooNE: -999.0).

    Returns
    -------
    TabularData

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "rank.train")
    >>> _ = open(path, "w").write("2 qid:1 1:0.5 3:1\\n0 qid:1 2:0.25\\n")
    >>> load_table(path).X.shape
    (2, 3)
    """
    if file_format not in FILE_FORMATS:
        raise ValueError(f"file_format must be one of {FILE_FORMATS}, got {file_format!r}")
    problem = file_problem(path)
    if problem:
        raise ValueError(f"data file {path} {problem}")
    if file_format == "auto":
        file_format = _sniff_format(path)
    if file_format == "csv":
        return load_csv(path, label_column, missing_sentinel=missing_sentinel)
    if file_format == "miniboone":
        data = load_miniboone(path, missing_sentinel=missing_sentinel)
    else:
        data = load_svmlight(path, n_features=n_features, missing_sentinel=missing_sentinel)
    _check_finite(path, data, skip_lines=int(file_format == "miniboone"))
    return data


def _check_finite(path, data, skip_lines):
    """ValueError naming the file, line and feature of the first infinite value in ``data``."""
    infinite = np.isinf(data.X)
    if not infinite.any():
        return
    row, column = (int(index[0]) for index in np.nonzero(infinite))
    line = next((number for index, (number, _) in enumerate(data_lines(path, skip_lines))
                 if index == row), "?")
    raise ValueError(f"data file {path}, line {line}: feature {data.feature_names[column]} is "
                     f"{data.X[row, column]:g}; replace infinite values by large finite numbers")


def split_train_test(data, test_fraction=0.3, random_state=0):
    """Hold out a test set: whole queries for ranking data, stratified by class otherwise.

    Parameters
    ----------
    data : TabularData
    test_fraction : float
        Fraction of rows (of queries, for ranking data) in the test set, in (0, 1).
    random_state : int

    Returns
    -------
    train, test : TabularData

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify.tabular import TabularData
    >>> X = np.arange(40.0).reshape(20, 2); y = np.arange(20) % 2
    >>> train, test = split_train_test(TabularData(X, y, None, ("a", "b")), 0.25)
    >>> train.n_samples, test.n_samples, int(test.y.sum())
    (15, 5, 2)
    """
    if not isinstance(data, TabularData):
        raise TypeError(f"data must be a TabularData (from msclassify.tabular), got "
                        f"{type(data).__name__}")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    rows = np.arange(data.n_samples)
    if data.qid is not None:
        if np.unique(data.qid).size < 2:
            raise ValueError("ranking data with a single query cannot be split by query; give a "
                             "separate test file")
        splitter = GroupShuffleSplit(n_splits=1, test_size=test_fraction,
                                     random_state=random_state)
        train_rows, test_rows = next(splitter.split(rows, groups=data.qid))
        # keep each query's rows together and in file order
        train_rows, test_rows = np.sort(train_rows), np.sort(test_rows)
    else:
        _, counts = np.unique(data.y, return_counts=True)
        stratify = data.y if counts.min() >= 2 else None
        train_rows, test_rows = train_test_split(rows, test_size=test_fraction,
                                                 random_state=random_state, stratify=stratify)

    def take(selected):
        qid = None if data.qid is None else data.qid[selected]
        return TabularData(data.X[selected], data.y[selected], qid, data.feature_names)

    return take(train_rows), take(test_rows)


def _check_costs_fit_features(costs, cost_path, train, test, train_path, test_path):
    """Refuse a cost file longer than the svmlight data's features (see `load_train_test`)."""
    occurring = train.X.any(axis=0) | (False if test is None else test.X.any(axis=0))
    used = int(np.flatnonzero(occurring).max(initial=-1)) + 1
    if costs.size > used:
        files = f"{train_path}" + (f" and {test_path}" if test_path else "")
        raise ValueError(f"the cost file {cost_path} holds {costs.size} costs but only the first "
                         f"{used} features occur in {files}; it seems to be for other data (e.g. "
                         "the 519 costs of the full Yahoo! LTR set). Give one cost per feature "
                         "of this data, in feature order")


def load_train_test(train_path, test_path=None, cost_path=None, file_format="auto", *,
                    label_column="label", test_fraction=0.3, random_state=0):
    """Load training data, test data (a file or a held-out part) and feature costs.

    Parameters
    ----------
    train_path : str or Path
    test_path : str or Path, optional
        Without it `split_train_test` holds out ``test_fraction`` of the training file.
    cost_path : str or Path, optional
        Feature-cost file (one cost per line); it also fixes the column count of
        svmlight files, whose last features may be absent from every line. A
        cost file with more costs than the features that occur in the svmlight
        files (training and test) is refused: its extra costs would price
        nothing, so it most likely belongs to other data.
    file_format, label_column
        As for `load_table`.
    test_fraction : float
        In (0, 1); 0 holds out nothing (``test`` is None then).
    random_state : int

    Returns
    -------
    train : TabularData
    test : TabularData or None
    costs : ndarray of shape (M,) or None

    Examples
    --------
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> _ = open(os.path.join(folder, "d.csv"), "w").write("a,b,label\\n" + "1,2,0\\n3,4,1\\n" * 5)
    >>> _ = open(os.path.join(folder, "c.txt"), "w").write("1\\n9\\n")
    >>> train, test, costs = load_train_test(os.path.join(folder, "d.csv"),
    ...                                      cost_path=os.path.join(folder, "c.txt"))
    >>> train.n_samples, test.n_samples, costs.tolist()
    (7, 3, [1.0, 9.0])
    """
    costs = load_feature_costs(cost_path) if cost_path else None
    train = load_table(train_path, file_format, label_column=label_column)
    svmlight = _is_svmlight(train_path, file_format)
    if costs is not None and svmlight and costs.size > train.n_features:
        # the last feature ids may be absent (0) from every training line, and occur in the
        # test file only; _check_costs_fit_features refuses ids that occur nowhere
        train = _with_columns(train, costs.size)
    test = None
    if test_path:
        test = load_table(test_path, file_format, label_column=label_column,
                          n_features=train.n_features)
    if costs is not None:
        if svmlight:
            _check_costs_fit_features(costs, cost_path, train, test, train_path, test_path)
        if costs.size != train.n_features:
            raise ValueError(f"the cost file {cost_path} holds {costs.size} costs but "
                             f"{train_path} has {train.n_features} features; give one cost per "
                             "feature, in feature order")
    if not test_path and test_fraction != 0:
        train, test = split_train_test(train, test_fraction, random_state)
    return train, test, costs


def _is_svmlight(path, file_format):
    return (file_format if file_format != "auto" else _sniff_format(path)) == "svmlight"


def _with_columns(data, n_features):
    """``data`` with zero columns appended up to ``n_features`` (svmlight ids absent from
    every line), named like the loader names them."""
    extra = n_features - data.n_features
    X = np.hstack([data.X, np.zeros((data.n_samples, extra))])
    names = data.feature_names + tuple(f"f{column + 1}" for column in range(data.n_features,
                                                                            n_features))
    return TabularData(np.ascontiguousarray(X), data.y, data.qid, names)


def load_table_for_model(path, n_features, used_features, file_format="auto", *,
                         label_column="label", column_names=None):
    """Load data to score a model trained on ``n_features`` columns that splits on ``used_features``.

    An svmlight file may leave out its last feature ids on every line (they read as
    0), so it may have fewer columns than the model: that is fine as long as the model
    never looks at the missing ones. Otherwise the model would score zeros in place
    of real features, which is refused.

    With ``column_names`` (the model's training columns, ``column_names_``), the
    columns of a CSV file are matched by their header names, in any order.

    Raises
    ------
    ValueError
        Naming the file: more columns than the model, fewer columns in a CSV or
        MiniBooNE file, an svmlight file without features the model uses, or a
        CSV file without a column the model was trained on.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "test.svm")
    >>> _ = open(path, "w").write("1 1:0.5 2:1\\n0 1:0.25\\n")
    >>> load_table_for_model(path, 4, [0, 1]).X.shape
    (2, 4)
    >>> load_table_for_model(path, 4, [0, 3])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: ...holds feature ids up to 2 ... but the model splits on feature 4 ...
    """
    data = load_table(path, file_format, label_column=label_column)
    if column_names is not None and (file_format if file_format != "auto"
                                     else _sniff_format(path)) == "csv":
        return _columns_by_name(data, path, tuple(column_names))
    if data.n_features == n_features:
        return data
    if data.n_features > n_features or not _is_svmlight(path, file_format):
        raise ValueError(f"{path} has {data.n_features} features but the model was trained on "
                         f"{n_features}; give data of the same columns")
    missing = [int(f) for f in np.asarray(used_features) if f >= data.n_features]
    if missing:
        raise ValueError(f"{path} holds feature ids up to {data.n_features} (svmlight: an id a "
                         f"line leaves out reads as 0) but the model splits on feature "
                         f"{max(missing) + 1} of its {n_features}: it would score zeros in its "
                         "place; give data with the same features as the training data")
    return _with_columns(data, n_features)


def _columns_by_name(data, path, names):
    """``data`` with its columns in the order of ``names`` (a CSV's header names)."""
    if data.feature_names == names:
        return data
    missing = [name for name in names if name not in data.feature_names]
    extra = [name for name in data.feature_names if name not in names]
    if missing or extra:
        problem = (f"has no column {missing[0]!r}" if missing else
                   f"has a column {extra[0]!r}")
        raise ValueError(f"CSV file {path} {problem}, but the model was trained on the columns "
                         f"{', '.join(names)}; give data with the same columns (in any order)")
    order = [data.feature_names.index(name) for name in names]
    return TabularData(np.ascontiguousarray(data.X[:, order]), data.y, data.qid, names)
