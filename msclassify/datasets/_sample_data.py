"""Where the sample data that ships inside msclassify is.

The sample files are package data (``msclassify/datasets/data/``), so a wheel
install has them as well as a git checkout: ``flies/`` (the synthetic fly
video, `load_sample_flies`) and ``tabular/`` (small synthetic tables in the
svmlight/LETOR, MiniBooNE and CSV formats, with feature-cost files; its
``README.md`` says what is in them). ``$MSCLASSIFY_SAMPLE_DATA`` names another
folder of the same layout to use instead.
"""

import os
from pathlib import Path

__all__ = ["sample_data_path"]

_PACKAGE_DATA = Path(__file__).resolve().parent / "data"


def sample_data_path(*parts):
    """The sample data folder, or a path inside it.

    Parameters
    ----------
    *parts : str
        Path components below the folder, e.g. ``"tabular", "csv_style.csv"``.

    Returns
    -------
    pathlib.Path
        ``$MSCLASSIFY_SAMPLE_DATA`` if set, else the folder inside the
        installed package, joined with `parts`.

    Raises
    ------
    FileNotFoundError
        If ``$MSCLASSIFY_SAMPLE_DATA`` is set but is not a folder.

    Examples
    --------
    >>> from msclassify.datasets import sample_data_path
    >>> from msclassify.tabular import load_csv, load_feature_costs
    >>> table = load_csv(sample_data_path("tabular", "csv_style.csv"), "label")
    >>> costs = load_feature_costs(sample_data_path("tabular", "csv_style.cost"), 7)
    >>> table.X.shape, costs.tolist()
    ((600, 7), [1.0, 1.0, 1.0, 10.0, 10.0, 100.0, 100.0])
    """
    chosen = os.environ.get("MSCLASSIFY_SAMPLE_DATA")
    if chosen:
        folder = Path(chosen)
        if not folder.is_dir():
            raise FileNotFoundError(
                f"MSCLASSIFY_SAMPLE_DATA={chosen} is not a folder; unset it to use the sample "
                "data that ships with msclassify")
    else:
        folder = _PACKAGE_DATA
    return folder.joinpath(*parts)
