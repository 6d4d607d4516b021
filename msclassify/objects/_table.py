"""Object tables on disk: CSV or Parquet written atomically, and the journal that resumes them.

`write_table` and `read_table` pick the format by the file's suffix (``.csv``,
``.parquet``; Parquet through pyarrow, ``pip install 'msclassify[parquet]'``).
A table is written whole, to a temporary sibling renamed into place, so a
table at its path is always complete.

While frames stream (`ObjectTableWriter`), every frame's rows are appended to a
journal next to the table, ``.NAME.journal`` (JSON lines: first what makes the
table, then one line per frame, flushed to disk before the frame counts as
done). A run that stops leaves the journal; the same run started again reads
it, skips its frames and rebuilds the tracks from them; the last run writes the
table and deletes the journal. A journal made by another run (another model,
input, frame count or option) is refused, never mixed or deleted.
"""

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..io import FrameWriteError, check_not_an_input, write_atomically

__all__ = ["TABLE_FORMATS", "TableJournal", "check_table_path", "read_table", "write_table"]

TABLE_FORMATS = {".csv": "comma-separated text", ".parquet": "Apache Parquet (pyarrow)"}
_JOURNAL_FORMAT = "msclassify-object-table-journal"


def _format(path):
    suffix = Path(path).suffix.lower()
    if suffix not in TABLE_FORMATS:
        raise ValueError(f"table {path}: unknown format {suffix or '(no suffix)'!r}; name it "
                         f"{' or '.join('*' + s for s in TABLE_FORMATS)}")
    return suffix


def _import_pyarrow():
    try:
        import pyarrow  # noqa: F401  (pandas writes Parquet through it)
    except ImportError:
        raise ImportError("writing Parquet needs pyarrow: pip install 'msclassify[parquet]' "
                          "(or write a .csv table)") from None


def check_table_path(path, overwrite=False, inputs=()):
    """Raise a one-line error unless a table can be written at ``path``.

    ``inputs`` are the files the run reads (the frames, the model, an object-label
    file): the table may not be one of them, even with ``overwrite``.

    Examples
    --------
    >>> import tempfile, os
    >>> check_table_path(os.path.join(tempfile.mkdtemp(), "objects.csv"))
    >>> check_table_path("objects.txt")
    Traceback (most recent call last):
    ...
    ValueError: table objects.txt: unknown format '.txt'; name it *.csv or *.parquet
    """
    path = Path(path)
    check_not_an_input(path, inputs)
    if _format(path) == ".parquet":
        _import_pyarrow()
    if path.is_dir():
        raise ValueError(f"table {path} is a folder; give a file name such as {path}/objects.csv")
    if path.exists() and not overwrite:
        raise FileExistsError(f"table {path} already exists; choose another file name or "
                              "replace it (overwrite=True; msclassify predict --overwrite)")


def write_table(table, path, *, overwrite=False):
    """Write ``table`` (a pandas DataFrame) to ``path``, CSV or Parquet by its suffix, atomically.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "objects.csv")
    >>> write_table(pd.DataFrame({"frame": [0], "area": [16.0]}), path)
    >>> read_table(path).to_dict("list")
    {'frame': [0], 'area': [16.0]}
    """
    check_table_path(path, overwrite)
    if _format(path) == ".csv":
        write_atomically(path, lambda file: table.to_csv(file, index=False))
    else:
        write_atomically(path, lambda file: table.to_parquet(file, index=False))


def read_table(path):
    """The table at ``path`` (CSV or Parquet by its suffix) as a pandas DataFrame."""
    if _format(path) == ".csv":
        return pd.read_csv(path)
    _import_pyarrow()
    return pd.read_parquet(path)


class TableJournal:
    """The rows of the frames done so far, on disk, for a table being streamed.

    Parameters
    ----------
    path : str or Path
        The table's path; the journal is ``.NAME.journal`` beside it.
    record : dict
        What makes the table (JSON-able): a journal with another record is refused.
    overwrite : bool
        Replace an existing table and journal.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "objects.csv")
    >>> journal = TableJournal(path, {"model": "a"})
    >>> journal.append(0, pd.DataFrame({"frame": [5], "area": [16.0]}))
    >>> TableJournal(path, {"model": "a"}).done()          # a new run resumes
    [0]
    >>> try:                                               # another run is refused
    ...     TableJournal(path, {"model": "b"})
    ... except ValueError as exc:
    ...     print(str(exc).split("(")[1].split(")")[0])
    model: "a" there, "b" now
    >>> journal.finish().to_dict("list"), os.path.exists(path)
    ({'frame': [5], 'area': [16.0]}, True)
    """

    def __init__(self, path, record, *, overwrite=False):
        self.path = Path(path)
        self.journal = self.path.with_name(f".{self.path.name}.journal")
        self.record = json.loads(json.dumps(record))
        check_table_path(self.path, overwrite)
        if overwrite:
            self.journal.unlink(missing_ok=True)
        self._frames = {}
        if self.journal.exists():
            self._read()
        else:
            self._create()

    def _create(self):
        header = json.dumps({"format": _JOURNAL_FORMAT, "record": self.record}) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.journal, lambda file: file.write(header.encode()))
        except FrameWriteError as exc:
            raise FrameWriteError(f"cannot write table {self.path}: {exc}") from None

    def _read(self):
        with open(self.journal, "rb") as file:
            lines = file.read().split(b"\n")
        try:
            header = json.loads(lines[0])
            assert header["format"] == _JOURNAL_FORMAT
        except (ValueError, KeyError, TypeError, AssertionError):
            raise ValueError(f"{self.journal} (the journal of table {self.path}) is damaged; "
                             "delete it to start the table over") from None
        difference = _difference(header["record"], self.record)
        if difference:
            raise ValueError(f"table {self.path}: its journal {self.journal} was started by "
                             f"another run ({difference}); resuming would mix the two: run as "
                             f"before, or start over with overwrite=True (msclassify predict "
                             f"--overwrite), or choose another table path")
        # the last line may be torn by a kill mid-write: everything before it is whole
        good = len(lines[0]) + 1
        for line in lines[1:]:
            try:
                entry = json.loads(line)
                rows = pd.DataFrame(entry["rows"]).astype(entry["dtypes"])
                self._frames[int(entry["position"])] = rows
            except (ValueError, KeyError, TypeError):
                break
            good += len(line) + 1
        with open(self.journal, "rb+") as file:
            file.truncate(min(good, os.path.getsize(self.journal)))

    def done(self):
        """Positions whose rows are in the journal, increasing."""
        return sorted(self._frames)

    def rows(self, position):
        """The rows journaled for ``position``."""
        return self._frames[position]

    def append(self, position, table):
        """Journal the rows of ``position`` (flushed to disk before returning)."""
        rows = {name: _plain(table[name]) for name in table.columns}
        dtypes = {name: str(dtype) for name, dtype in table.dtypes.items()}
        line = json.dumps({"position": int(position), "rows": rows, "dtypes": dtypes}) + "\n"
        try:
            with open(self.journal, "a") as file:
                file.write(line)
                file.flush()
                os.fsync(file.fileno())
        except OSError as exc:
            raise FrameWriteError(f"cannot write the journal of table {self.path} "
                                  f"({exc.strerror or exc}); free some space and run again to "
                                  "resume", errno=exc.errno, filename=str(self.journal)) from None
        self._frames[int(position)] = table.reset_index(drop=True)

    def finish(self):
        """Write the table (rows of every position in order) and delete the journal."""
        tables = [self._frames[p] for p in sorted(self._frames)]
        table = (pd.concat(tables, ignore_index=True) if tables else pd.DataFrame())
        write_table(table, self.path, overwrite=True)
        self.journal.unlink(missing_ok=True)
        return table


def _plain(column):
    """A column as JSON-able Python values (NaN as None)."""
    values = column.to_numpy()
    if values.dtype.kind == "f":
        return [None if np.isnan(v) else float(v) for v in values]
    return values.tolist()


def _difference(found, expected, prefix=""):
    """What differs between two records, one item per differing entry (paths ignored)."""
    differences = []
    for key in sorted(set(found) | set(expected)):
        there, now = found.get(key), expected.get(key)
        if key == "path" or there == now:
            continue
        if isinstance(there, dict) and isinstance(now, dict):
            differences.append(_difference(there, now, f"{prefix}{key} "))
        else:
            differences.append(f"{prefix}{key}: {json.dumps(there)[:60]} there, "
                               f"{json.dumps(now)[:60]} now")
    return "; ".join(item for item in differences if item)
