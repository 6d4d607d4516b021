"""Versioned model files: a zip holding ``model.json`` and ``.npy`` arrays.

`write_model` and `read_model` write and validate the container for every model
class (each class's ``save`` and ``_from_model_file`` hold what it stores);
`build_model` makes a model of a given class from what `read_model` returned
(``msclassify.load_model`` picks the class by the kind recorded in the file). A
`ModelFile` holds a file's bytes, read once (`open_model_file`): a prediction
run parses them, records their digest and ships them to Dask workers without
reading the file again. Loading never executes code: JSON is parsed with :mod:`json` and arrays are read from
their ``.npy`` headers without pickle, so a model file from an untrusted source
can at worst fail validation. Files are written to a temporary sibling and
renamed into place, so an interrupted save never leaves a half-written model
behind.

What is checked before a model is used
--------------------------------------
* The container: a zip whose entries are stored or deflated, each no larger than
  `MAX_ARRAY_BYTES` and no more compressed than deflate can compress (so a zip
  bomb is refused before it is inflated), whose checksums hold.
* Every array's ``.npy`` header before its data is read: a numeric dtype (never
  object), a shape whose size times the item size is what the zip entry holds.
* ``model.json``: an object with ``format``, an integer ``format_version`` this
  msclassify reads, a ``kind`` and ``meta``.
* Every field that changes a prediction, by the model class, with the helpers
  below (`model_array`, `model_number`, `model_numbers`, `model_classes`):
  finite leaf values and thresholds, node links that only point forward, feature
  ids within range, the objective, classes that fit their dtype, the feature
  bank and the channel count of pixel models.

Anything else wrong raises `ModelFileError` too: one line naming the file, the
problem and the fix, never another exception.
"""

import errno
import hashlib
import io
import json
import os
import re
import tempfile
import zipfile
import zlib
from numbers import Integral, Real
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .checks import file_problem
from .io import write_atomically

__all__ = ["MAX_ARRAY_BYTES", "ModelFile", "ModelFileError", "build_model", "check_model_path",
           "estimator_params", "is_model_file", "model_array", "model_classes", "model_number",
           "model_numbers", "open_model_file", "read_model", "write_model"]

FORMAT_NAME = "msclassify-model"
FORMAT_VERSION = 1
# No array of a model file may be larger (the largest models written here are a few MB).
MAX_ARRAY_BYTES = 2**30
# model.json of a forest of thousands of trees is a few hundred kB.
_MAX_JSON_BYTES = 2**26
# A model file larger than this is not read into memory (the largest written here are a few MB).
_MAX_FILE_BYTES = 2**30
# Deflate shrinks data by at most about 1032x; an entry claiming more is damaged or a bomb.
_MAX_DEFLATE_RATIO = 1100
_ARRAY_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")


class ModelFileError(ValueError):
    """A model file is missing, corrupt, truncated, invalid or from a newer version."""


def estimator_params(estimator, **replace):
    """``estimator.get_params()`` as JSON: arrays as float lists, a RandomState as None.

    Parameters named in ``replace`` take the given (JSON-able) values as they are,
    e.g. the feature ids of a pixel classifier's bank.

    Examples
    --------
    >>> from msclassify import CEGBClassifier
    >>> estimator_params(CEGBClassifier(feature_costs=np.ones(2)))["feature_costs"]
    [1.0, 1.0]
    """
    params = estimator.get_params()
    for name, value in params.items():
        if name in replace:
            params[name] = replace[name]
        elif isinstance(value, (np.ndarray, list, tuple)):
            params[name] = np.asarray(value, dtype=float).tolist()
        elif isinstance(value, np.random.RandomState):
            params[name] = None
        elif isinstance(value, np.generic):
            params[name] = value.item()
    return params


def is_model_file(path):
    """Whether ``path`` is a regular file that opens as an msclassify model container.

    Only the container and ``model.json``'s format name are looked at, not the model.
    """
    if file_problem(path):
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo("model.json")
            if info.file_size > _MAX_JSON_BYTES:
                return False
            header = json.loads(zf.read(info))
        return isinstance(header, dict) and header.get("format") == FORMAT_NAME
    except (zipfile.BadZipFile, zlib.error, KeyError, OSError, ValueError, EOFError):
        return False


def check_model_path(path):
    """ModelFileError unless a model can be saved to ``path`` without harm.

    The folder must exist and ``path`` must not be a folder nor an existing file
    that is not an msclassify model (an existing model is replaced). Call it
    before training so a long fit does not end in an error.

    Examples
    --------
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> check_model_path(os.path.join(folder, "new.msc"))
    >>> check_model_path(folder)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    msclassify.modelfile.ModelFileError: cannot save the model to ...: it is a folder; ...
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise ModelFileError(f"cannot save the model to {path}: folder {path.parent} does not "
                             "exist; create it or choose another path")
    if path.is_dir():
        raise ModelFileError(f"cannot save the model to {path}: it is a folder; give a file "
                             f"name such as {path / 'model.msc'}")
    if path.exists() and not is_model_file(path):
        problem = file_problem(path)
        what = problem if problem else "exists and is not an msclassify model file"
        raise ModelFileError(f"cannot save the model to {path}: it {what}; it is not replaced: "
                             "choose another path or delete it first")
    try:  # a read-only folder or disk: say so now, not after training
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        fix = ("the disk is full: free space or write to another disk"
               if exc.errno in (errno.ENOSPC, errno.EDQUOT) else
               "the folder is not writable: choose a writable folder")
        raise ModelFileError(f"cannot write {path} ({exc.strerror or exc}): {fix}") from None


class ModelFile(NamedTuple):
    """A model file's bytes, read once: parsed, digested and shipped from memory.

    Attributes
    ----------
    path : Path
        Where it was read from (for messages).
    content : bytes
        The whole file.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from msclassify import CEGBRegressor
    >>> path = os.path.join(tempfile.mkdtemp(), "m.msc")
    >>> CEGBRegressor(n_estimators=2).fit(np.arange(9.0)[:, None], np.arange(9.0)).save(path)
    >>> model_file = open_model_file(path)
    >>> read_model(model_file)[0], len(model_file.sha256)
    ('cegb_regressor', 64)
    """

    path: Path
    content: bytes

    @property
    def sha256(self):
        """SHA-256 of the content (hex): what made an output, for its record."""
        return hashlib.sha256(self.content).hexdigest()


def open_model_file(path):
    """Read a model file's bytes once, as a `ModelFile` (see `read_model` for what is checked).

    Raises
    ------
    ModelFileError
        If ``path`` does not exist, is a folder, cannot be read or is far larger
        than any model.
    """
    if isinstance(path, ModelFile):
        return path
    path = Path(path)
    problem = file_problem(path)
    if problem == "does not exist":
        raise ModelFileError(f"model file {path} does not exist; check the path")
    if problem == "is a folder, not a file":
        found = sorted(path.glob("*.msc"))
        hint = f" (it holds {found[0].name})" if found else ""
        raise ModelFileError(f"{path} is a folder, not a model file{hint}; give the .msc file "
                             "written by train or save")
    if problem:
        raise ModelFileError(f"model file {path} {problem}")
    try:
        size = path.stat().st_size
        if size > _MAX_FILE_BYTES:
            raise ModelFileError(f"{path} is {size / 2**30:.1f} GiB, far larger than any model "
                                 "file; give the .msc file written by train or save")
        return ModelFile(path, path.read_bytes())
    except OSError as exc:
        raise ModelFileError(f"model file {path} cannot be read ({exc.strerror or exc}); check "
                             "its permissions") from None


def write_model(path, kind, meta, arrays):
    """Write a model atomically.

    Parameters
    ----------
    path : str or Path
        Destination file (conventionally ``*.msc``); an existing msclassify model
        there is replaced, anything else is refused (`check_model_path`).
    kind : str
        What the file holds, e.g. ``"cegb_classifier"``; `read_model` returns it.
    meta : dict
        JSON-serialisable metadata (parameters, classes, feature specs, ...).
    arrays : dict of str to ndarray
        Numeric arrays (no object dtype).

    Raises
    ------
    ModelFileError
        ``path`` cannot hold a model (see `check_model_path`).
    msclassify.io.FrameWriteError
        The disk is full or the folder is not writable.
    """
    path = Path(path)
    check_model_path(path)
    header = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "kind": kind,
              "arrays": sorted(arrays), "meta": meta}
    text = json.dumps(header, indent=1)

    def entry(name):  # a fixed time stamp: the same model saves to the same bytes (and hash)
        return zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))

    def write(fh):
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(entry("model.json"), text, compress_type=zipfile.ZIP_DEFLATED)
            for name, array in arrays.items():
                array = np.asarray(array)
                if array.dtype.hasobject:
                    raise TypeError(f"array {name!r} has object dtype; model files hold numbers only")
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
                zf.writestr(entry(f"{name}.npy"), buffer.getvalue(),
                            compress_type=zipfile.ZIP_DEFLATED)

    write_atomically(path, write)


def _read_array(zf, info, path):
    """One ``.npy`` entry, its header checked before any data is read or allocated."""
    with zf.open(info) as fh:
        major, _ = np.lib.format.read_magic(fh)
        if major == 1:
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif major in (2, 3):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unknown .npy version {major}")
        if dtype.hasobject or dtype.kind not in "biuf" or dtype.subdtype is not None:
            raise ModelFileError(f"model file {path} is invalid: array {info.filename} has dtype "
                                 f"{dtype}, not numbers; re-save or re-train the model")
        count = 1
        for size in shape:
            count *= int(size)
        nbytes = count * dtype.itemsize
        header_bytes = fh.tell()
        if nbytes > MAX_ARRAY_BYTES or nbytes != info.file_size - header_bytes:
            raise ModelFileError(f"model file {path} is corrupt: array {info.filename} claims "
                                 f"shape {shape} ({nbytes} bytes) but holds "
                                 f"{info.file_size - header_bytes} bytes; re-save or re-train "
                                 "the model")
        data = fh.read(nbytes)
    if len(data) != nbytes:
        raise EOFError(f"array {info.filename} ends early")
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return np.array(array, dtype=dtype.newbyteorder("="), order="C")


def read_model(path):
    """Read and validate a model file written by `write_model`.

    Parameters
    ----------
    path : str, Path or ModelFile
        The file, or its bytes read by `open_model_file`.

    Returns
    -------
    kind : str
    meta : dict
    arrays : dict of str to ndarray

    Raises
    ------
    ModelFileError
        If the file is missing, not a model file, corrupt, truncated, or written
        by a newer format version.
    """
    model_file = open_model_file(path)
    path = model_file.path
    try:
        with zipfile.ZipFile(io.BytesIO(model_file.content)) as zf:
            infos = zf.infolist()
            for info in infos:
                limit = _MAX_JSON_BYTES if info.filename == "model.json" else MAX_ARRAY_BYTES
                if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) or \
                        info.file_size > limit or (
                        info.compress_type == zipfile.ZIP_DEFLATED
                        and info.file_size > _MAX_DEFLATE_RATIO * info.compress_size + 1024):
                    raise ModelFileError(f"model file {path} is corrupt: entry {info.filename} "
                                         f"claims {info.file_size} bytes; re-save or re-train "
                                         "the model")
            bad = zf.testzip()
            if bad is not None:
                raise ModelFileError(f"model file {path} is corrupt (entry {bad} fails its "
                                     "checksum); re-copy, re-save or re-train the model")
            if "model.json" not in zf.namelist():
                raise ModelFileError(f"{path} is a zip file but not an msclassify model file (it "
                                     "holds no model.json); give a model saved by msclassify "
                                     "train or save")
            header = json.loads(zf.read("model.json"))
            if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
                raise ModelFileError(f"{path} is not an msclassify model file (its model.json "
                                     "has no msclassify format); give a model saved by "
                                     "msclassify")
            version = header.get("format_version")
            if not isinstance(version, Integral) or isinstance(version, bool) or version < 1:
                raise ModelFileError(f"model file {path} is damaged: its format_version "
                                     f"{version!r} is not a whole number >= 1; re-save or "
                                     "re-train the model")
            if version > FORMAT_VERSION:
                raise ModelFileError(
                    f"{path} was written by a newer msclassify (format version {version}, this "
                    f"one reads up to {FORMAT_VERSION}); upgrade msclassify to load it")
            kind, meta, names = header.get("kind"), header.get("meta"), header.get("arrays")
            if not isinstance(kind, str) or not isinstance(meta, dict) or \
                    not isinstance(names, list) or \
                    not all(isinstance(name, str) and _ARRAY_NAME.fullmatch(name)
                            for name in names) or len(set(names)) != len(names):
                missing = [key for key, value, kind_of in (("kind", kind, str),
                                                           ("meta", meta, dict),
                                                           ("arrays", names, list))
                           if not isinstance(value, kind_of)]
                what = (f"no valid {', '.join(missing)}" if missing
                        else "an invalid list of arrays")
                raise ModelFileError(f"model file {path} is damaged: its model.json has "
                                     f"{what}; re-save or re-train the model")
            arrays = {name: _read_array(zf, zf.getinfo(f"{name}.npy"), path) for name in names}
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, zlib.error, KeyError, EOFError, ValueError, OSError, TypeError,
            RuntimeError, NotImplementedError, OverflowError, MemoryError) as exc:
        # zipfile and the .npy header parser raise these for damaged files
        raise ModelFileError(
            f"model file {path} is corrupt or truncated ({_reason(exc)}); re-copy, re-save or "
            "re-train the model") from None
    return kind, meta, arrays


def _reason(exc):
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__


# -- validating what a model class reads -------------------------------------------------------

def model_array(arrays, name, kind="float", ndim=1, shape=None, finite=True, low=None,
                high=None):
    """A validated array of a model file, converted for prediction.

    Parameters
    ----------
    arrays : dict
        As `read_model` returns them.
    name : str
    kind : {"float", "int", "bool"}
        ``"float"``: any real numbers, returned as float64; ``"int"``: integers (not
        floats), returned as int64; ``"bool"``: bools or 0/1 integers.
    ndim : int
    shape : tuple, optional
        The exact shape required (``None`` entries match any size).
    finite : bool
        Require finite values (floats).
    low, high : number, optional
        Inclusive bounds of the values.

    Raises
    ------
    ModelFileError
        Naming the array and what is wrong with it (the caller adds the file).

    Examples
    --------
    >>> model_array({"value": np.array([0.5, np.nan])}, "value")
    Traceback (most recent call last):
        ...
    msclassify.modelfile.ModelFileError: array 'value' holds NaN or infinite values
    """
    if name not in arrays:
        raise ModelFileError(f"array {name!r} is missing")
    array = np.asarray(arrays[name])
    allowed = {"float": "fiub", "int": "iu", "bool": "biu"}[kind]
    if array.dtype.kind not in allowed and array.size:  # (an empty array of any type is fine)
        raise ModelFileError(f"array {name!r} must hold {kind}s, not {array.dtype}")
    if array.ndim != ndim or (shape is not None and any(
            want is not None and have != want for have, want in zip(array.shape, shape))):
        raise ModelFileError(f"array {name!r} has shape {array.shape}, expected "
                             f"{shape if shape is not None else f'{ndim} dimension(s)'}")
    if kind == "bool":
        if array.dtype.kind != "b" and array.size and not np.all((array == 0) | (array == 1)):
            raise ModelFileError(f"array {name!r} must hold only 0 and 1")
        return array.astype(np.bool_)
    converted = array.astype(np.float64 if kind == "float" else np.int64)
    if kind == "float" and finite and not np.all(np.isfinite(converted)):
        raise ModelFileError(f"array {name!r} holds NaN or infinite values")
    if converted.size and ((low is not None and converted.min() < low)
                           or (high is not None and converted.max() > high)):
        raise ModelFileError(f"array {name!r} holds values outside [{low}, {high}] "
                             f"({converted.min()} .. {converted.max()})")
    return converted


def model_number(meta, key, integer=False, low=None, high=None):
    """``meta[key]`` as a validated int or float (finite, not a bool, within bounds)."""
    value = meta.get(key) if isinstance(meta, dict) else None
    kind = Integral if integer else Real
    if not isinstance(value, kind) or isinstance(value, bool) or not np.isfinite(value) or \
            (low is not None and value < low) or (high is not None and value > high):
        what = "a whole number" if integer else "a finite number"
        bounds = "" if low is None and high is None else f" in [{low}, {high}]"
        raise ModelFileError(f"{key} must be {what}{bounds}, got {value!r}")
    return int(value) if integer else float(value)


def model_numbers(meta, key, length=None, low=None, high=None):
    """``meta[key]``: a list of finite numbers (of ``length`` when given) as float64."""
    values = meta.get(key) if isinstance(meta, dict) else None
    if not isinstance(values, list) or (length is not None and len(values) != length) or \
            not all(isinstance(v, Real) and not isinstance(v, bool) and np.isfinite(v)
                    and (low is None or v >= low) and (high is None or v <= high)
                    for v in values):
        size = "" if length is None else f"{length} "
        bounds = "" if low is None and high is None else f" in [{low}, {high}]"
        raise ModelFileError(f"{key} must be a list of {size}finite numbers{bounds}")
    return np.array(values, dtype=np.float64)


def model_classes(meta, n_classes=None, positive_integers=False):
    """The ``classes`` of a classifier, in ``classes_dtype``, checked to fit it.

    Classes must be distinct and sorted (as `numpy.unique` gives them), of a
    numeric, bool or text dtype (never object), each value representable in it.

    Parameters
    ----------
    n_classes : int, optional
        How many there must be.
    positive_integers : bool
        Require integer classes >= 1 (pixel labels: 0 means unlabelled).
    """
    values, dtype_text = meta.get("classes"), meta.get("classes_dtype")
    try:
        dtype = np.dtype(dtype_text) if isinstance(dtype_text, str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.hasobject or dtype.kind not in "biufU" or dtype.itemsize > 256 \
            or (positive_integers and dtype.kind not in "iu"):
        raise ModelFileError(f"classes_dtype {dtype_text!r} is not a "
                             f"{'integer' if positive_integers else 'numeric or text'} dtype")
    if not isinstance(values, list) or len(values) < 2 or (
            n_classes is not None and len(values) != n_classes):
        expected = f"{n_classes}" if n_classes is not None else "at least 2"
        raise ModelFileError(f"classes must be a list of {expected} values, got {values!r:.80}")
    kind = dtype.kind
    if kind in "iu":
        info = np.iinfo(dtype)
        fits = all(isinstance(v, Integral) and not isinstance(v, bool)
                   and info.min <= v <= info.max for v in values)
    elif kind == "f":
        fits = all(isinstance(v, Real) and not isinstance(v, bool) and np.isfinite(v)
                   for v in values)
    elif kind == "b":
        fits = all(isinstance(v, bool) for v in values)
    else:
        fits = all(isinstance(v, str) and len(v) <= dtype.itemsize // 4 for v in values)
    if not fits:
        raise ModelFileError(f"classes {values!r:.80} do not fit classes_dtype {dtype}")
    classes = np.asarray(values, dtype=dtype)
    if np.unique(classes).size != classes.size or np.any(np.unique(classes) != classes):
        raise ModelFileError(f"classes {values!r:.80} must be distinct and sorted")
    if positive_integers and classes.min() < 1:
        raise ModelFileError(f"classes {values!r:.80} must be >= 1 (0 means unlabelled)")
    return classes


def build_model(cls, path, meta, arrays):
    """``cls._from_model_file(meta, arrays)``; anything wrong is a `ModelFileError` naming ``path``.

    ``meta`` and ``arrays`` are what `read_model` returned for the file ``path``.
    """
    try:
        return cls._from_model_file(meta, arrays)
    except ModelFileError as exc:
        raise ModelFileError(f"model file {path} is invalid: {exc}; re-save or re-train the "
                             "model") from None
    except Exception as exc:  # anything a damaged file can make a constructor raise
        raise ModelFileError(f"model file {path} is incomplete or inconsistent "
                             f"({_reason(exc)}); re-save or re-train the model") from None
