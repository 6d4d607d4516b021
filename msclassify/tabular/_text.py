"""Reading whitespace/delimiter-separated numeric text with errors that name file and line.

The fast path is :func:`numpy.loadtxt`. Only when it fails (or a check on the
result fails) is the file scanned again line by line to say exactly where and
what the problem is.
"""

import warnings
from pathlib import Path

import numpy as np

from ..checks import file_problem

def check_file(path, what="data file"):
    """``path`` as a Path, or FileNotFoundError saying which file is missing or not a file
    (a folder, a FIFO, a device: reading one would fail or block)."""
    path = Path(path)
    problem = file_problem(path)
    if problem:
        raise FileNotFoundError(f"{what} {path} {problem}")
    return path


def data_lines(path, skip_lines=0, comments="#"):
    """Yield ``(line_number, text)`` of non-blank lines after ``skip_lines``, comments cut off."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if number <= skip_lines:
                continue
            if comments:
                line = line.split(comments, 1)[0]
            if line.strip():
                yield number, line


def _tokens(line, delimiter):
    return [token.strip() for token in line.split(delimiter)] if delimiter else line.split()


def _is_number(token):
    try:
        float(token)
    except ValueError:
        return False
    return "_" not in token  # Python accepts "1_000"; numpy and other tools do not


def _locate_problem(path, delimiter, skip_lines, comments, n_columns):
    """Describe the first bad line of a file numpy could not read, or None if none found."""
    expected, first_line = n_columns, None
    for number, line in data_lines(path, skip_lines, comments):
        tokens = _tokens(line, delimiter)
        if expected is None:
            expected, first_line = len(tokens), number
        if len(tokens) != expected:
            since = f"line {first_line} has {expected}" if first_line else f"expected {expected}"
            return f"line {number}: found {len(tokens)} columns but {since}; every row needs " \
                   "the same number of columns"
        for column, token in enumerate(tokens, start=1):
            if not _is_number(token):
                return f"line {number}, column {column}: {token!r} is not a number"
    return None


def read_numeric_table(path, delimiter=None, skip_lines=0, comments="#", n_columns=None,
                       what="data file"):
    """Read a rectangular numeric table as float64 (rows, columns).

    Parameters
    ----------
    path : str or Path
    delimiter : str or None
        Column separator; None means any whitespace.
    skip_lines : int
        Header lines to skip.
    comments : str or None
        Text after this character is ignored.
    n_columns : int or None
        Required number of columns.
    what : str
        How to call the file in error messages.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        Naming the file and line of a ragged row or a token that is not a number,
        or saying the file has no data rows.
    """
    path = check_file(path, what)
    try:
        with warnings.catch_warnings():  # an empty file is reported below as a ValueError
            warnings.simplefilter("ignore", UserWarning)
            table = np.loadtxt(path, delimiter=delimiter, skiprows=skip_lines, comments=comments,
                               dtype=np.float64, ndmin=2, encoding="utf-8")
    except ValueError as exc:
        problem = _locate_problem(path, delimiter, skip_lines, comments, n_columns)
        raise ValueError(f"{what} {path}, {problem or exc}") from None
    if table.shape[0] == 0:
        raise ValueError(f"{what} {path} has no data rows")
    if n_columns is not None and table.shape[1] != n_columns:
        problem = _locate_problem(path, delimiter, skip_lines, comments, n_columns)
        raise ValueError(f"{what} {path}: {problem}")
    return table

