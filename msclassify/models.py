"""Every kind of saved model by name: `load_model` opens any model file msclassify wrote.

A model file records its kind (``"pixel_classifier"``, ``"cegb_classifier"``, ...);
this module maps each kind to its class, which sits in a lower layer, so the
model file code (`msclassify.modelfile`) never has to reach up to the classes.
"""

from .baselines import (BudgetRFClassifier, CSTCClassifier, CSTCRegressor, GRBBClassifier,
                        LaplacianBoostingClassifier)
from .cegb import CEGBClassifier, CEGBRegressor, GreedyMiserClassifier, GreedyMiserRegressor
from .modelfile import ModelFileError, build_model, open_model_file, read_model
from .pixel import PixelClassifier

__all__ = ["MODEL_KINDS", "load_model"]

#: kind recorded in a model file -> the class that reads it (``cls._from_model_file``)
MODEL_KINDS = {
    "cegb_classifier": CEGBClassifier,
    "cegb_regressor": CEGBRegressor,
    "greedy_miser_classifier": GreedyMiserClassifier,
    "greedy_miser_regressor": GreedyMiserRegressor,
    "budgetrf_classifier": BudgetRFClassifier,
    "pixel_classifier": PixelClassifier,
    "grbb_classifier": GRBBClassifier,
    "laplacian_boosting_classifier": LaplacianBoostingClassifier,
    "cstc_classifier": CSTCClassifier,
    "cstc_regressor": CSTCRegressor,
}


def load_model(path):
    """Load a model saved by any msclassify model's ``save`` method.

    Never executes code from the file (no pickle). Every field that changes a
    prediction is validated (see `msclassify.modelfile`).

    Parameters
    ----------
    path : str, Path or msclassify.modelfile.ModelFile
        The file, or its bytes already read (`msclassify.modelfile.open_model_file`).

    Raises
    ------
    ModelFileError
        A ValueError with one line naming the file and the problem, for a
        missing, corrupt, truncated, invalid or newer-version file.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from msclassify import CEGBRegressor, load_model
    >>> X = np.arange(50.0)[:, None]; model = CEGBRegressor(n_estimators=5).fit(X, X[:, 0])
    >>> path = os.path.join(tempfile.mkdtemp(), "m.msc"); model.save(path)
    >>> bool(np.all(load_model(path).predict(X) == model.predict(X)))
    True
    """
    model_file = open_model_file(path)
    kind, meta, arrays = read_model(model_file)
    if kind not in MODEL_KINDS:
        raise ModelFileError(f"{model_file.path} holds a model of unknown kind {kind!r}; it may "
                             "need a newer msclassify")
    return build_model(MODEL_KINDS[kind], model_file.path, meta, arrays)
