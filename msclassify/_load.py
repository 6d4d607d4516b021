"""`load_model`: open any saved msclassify model by the kind recorded in its file."""

import importlib

from ._modelfile import ModelFileError, read_model

# kind -> "module:class"; classes implement ``_from_model_file(meta, arrays)``.
_MODEL_KINDS = {
    "cegb_classifier": "msclassify.cegb._sklearn:CEGBClassifier",
    "cegb_regressor": "msclassify.cegb._sklearn:CEGBRegressor",
    "greedy_miser_classifier": "msclassify.cegb._sklearn:GreedyMiserClassifier",
    "greedy_miser_regressor": "msclassify.cegb._sklearn:GreedyMiserRegressor",
    "budgetrf_classifier": "msclassify.baselines._budgetrf:BudgetRFClassifier",
    "pixel_classifier": "msclassify.pixel:PixelClassifier",
    "grbb_classifier": "msclassify.baselines._grbb:GRBBClassifier",
    "laplacian_boosting_classifier": "msclassify.baselines._grbb:LaplacianBoostingClassifier",
    "cstc_classifier": "msclassify.baselines._cstc:CSTCClassifier",
    "cstc_regressor": "msclassify.baselines._cstc:CSTCRegressor",
}


def register_model_kind(kind, target):
    """Let another module's model class be opened by `load_model` (``target="module:Class"``)."""
    _MODEL_KINDS[kind] = target


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
