"""Versioned model files: a zip holding ``model.json`` and ``.npy`` arrays.

`write_model` and `read_model` write and validate the container for every model
class (each class's ``save`` and ``_from_model_file`` hold what it stores);
`load_model` opens any saved model by the kind recorded in its file. Loading
never executes code: JSON is parsed with :mod:`json` and arrays are
read with ``allow_pickle=False``, so a model file from an untrusted source can
at worst fail validation. Files are written to a temporary sibling and renamed
into place, so an interrupted save never leaves a half-written model behind.
"""

import importlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from .io import write_atomically

__all__ = ["ModelFileError", "estimator_params", "load_model", "read_model", "write_model"]

FORMAT_NAME = "msclassify-model"
FORMAT_VERSION = 1


class ModelFileError(ValueError):
    """A model file is missing, corrupt, truncated or from a newer version."""


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


def write_model(path, kind, meta, arrays):
    """Write a model atomically.

    Parameters
    ----------
    path : str or Path
        Destination file (conventionally ``*.msc``).
    kind : str
        What the file holds, e.g. ``"cegb_classifier"``; `read_model` returns it.
    meta : dict
        JSON-serialisable metadata (parameters, classes, feature specs, ...).
    arrays : dict of str to ndarray
        Numeric arrays (no object dtype).
    """
    path = Path(path)
    header = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "kind": kind,
              "arrays": sorted(arrays), "meta": meta}
    if not path.parent.is_dir():
        raise ModelFileError(f"cannot save model to {path}: folder {path.parent} does not exist")

    def write(fh):
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("model.json", json.dumps(header, indent=1))
            for name, array in arrays.items():
                array = np.asarray(array)
                if array.dtype.hasobject:
                    raise TypeError(f"array {name!r} has object dtype; model files hold numbers only")
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
                zf.writestr(f"{name}.npy", buffer.getvalue())

    write_atomically(path, write)


def read_model(path):
    """Read and validate a model file written by `write_model`.

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
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"model file {path} does not exist")
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
            if bad is not None:
                raise ModelFileError(f"model file {path} is corrupt (entry {bad} fails its checksum)")
            header = json.loads(zf.read("model.json"))
            if header.get("format") != FORMAT_NAME:
                raise ModelFileError(f"{path} is not an msclassify model file")
            version = header.get("format_version")
            if not isinstance(version, int) or version > FORMAT_VERSION:
                raise ModelFileError(
                    f"{path} was written by a newer msclassify (format version {version}, this one "
                    f"reads up to {FORMAT_VERSION}); upgrade msclassify to load it")
            arrays = {}
            for name in header["arrays"]:
                with zf.open(f"{name}.npy") as fh:
                    arrays[name] = np.lib.format.read_array(io.BytesIO(fh.read()), allow_pickle=False)
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, KeyError, EOFError, json.JSONDecodeError, ValueError, OSError) as exc:
        raise ModelFileError(
            f"model file {path} is corrupt or truncated ({type(exc).__name__}: {exc}); "
            "re-save or re-train the model") from None
    return header["kind"], header["meta"], arrays


# kind -> "module:class"; classes implement ``_from_model_file(meta, arrays)``.
_MODEL_KINDS = {
    "cegb_classifier": "msclassify:CEGBClassifier",
    "cegb_regressor": "msclassify:CEGBRegressor",
    "greedy_miser_classifier": "msclassify:GreedyMiserClassifier",
    "greedy_miser_regressor": "msclassify:GreedyMiserRegressor",
    "budgetrf_classifier": "msclassify.baselines:BudgetRFClassifier",
    "pixel_classifier": "msclassify.pixel:PixelClassifier",
    "grbb_classifier": "msclassify.baselines:GRBBClassifier",
    "laplacian_boosting_classifier": "msclassify.baselines:LaplacianBoostingClassifier",
    "cstc_classifier": "msclassify.baselines:CSTCClassifier",
    "cstc_regressor": "msclassify.baselines:CSTCRegressor",
}


def load_model(path):
    """Load a model saved by any msclassify model's ``save`` method.

    Never executes code from the file (no pickle). Raises `ModelFileError` (a
    ValueError) naming the problem for a missing, corrupt, truncated or
    newer-version file.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from msclassify import CEGBRegressor, load_model
    >>> X = np.arange(50.0)[:, None]; model = CEGBRegressor(n_estimators=5).fit(X, X[:, 0])
    >>> path = os.path.join(tempfile.mkdtemp(), "m.msc"); model.save(path)
    >>> bool(np.all(load_model(path).predict(X) == model.predict(X)))
    True
    """
    kind, meta, arrays = read_model(path)
    if kind not in _MODEL_KINDS:
        raise ModelFileError(f"{path} holds a model of unknown kind {kind!r}; it may need a newer "
                             "msclassify")
    module, name = _MODEL_KINDS[kind].split(":")
    cls = getattr(importlib.import_module(module), name)
    try:
        return cls._from_model_file(meta, arrays)
    except (KeyError, TypeError, IndexError) as exc:
        raise ModelFileError(f"model file {path} is incomplete or inconsistent "
                             f"({type(exc).__name__}: {exc})") from None
