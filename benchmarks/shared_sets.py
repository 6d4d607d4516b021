"""Loaders for the real tabular data sets the benchmarks and tests use.

They live with the benchmarks, not in the package, because the data does: each
takes ``data_dir``, the shared data folder (``$MSCLASSIFY_SHARED_DATA``, see
``_common.SHARED_DATA``) holding the snapshot described in its ``PROVENANCE.md``
(sub-folders ``fnan_budgetrf/``, ``yahoo_ltr_sample_lightgbm/``, ``covtype_h2o/``,
``higgs_sample_lightgbm/``). The files are read in place; never copy them into
the repository. The tests import them as ``benchmarks.shared_sets``.
"""

from pathlib import Path

import numpy as np

from msclassify.tabular import TabularData, load_feature_costs, load_svmlight

MINIBOONE_SENTINEL = -999.0
YAHOO_SAMPLE_N_FEATURES = 300  # largest feature id in LightGBM's rank.train / rank.test
YAHOO_N_FEATURES = 519  # Yahoo! LTR set 1, the features yahoo_cs_cost prices

COVTYPE_FEATURE_NAMES = (
    ("Elevation", "Aspect", "Slope", "Horizontal_Distance_To_Hydrology",
     "Vertical_Distance_To_Hydrology", "Horizontal_Distance_To_Roadways", "Hillshade_9am",
     "Hillshade_Noon", "Hillshade_3pm", "Horizontal_Distance_To_Fire_Points")
    + tuple(f"Wilderness_Area{i}" for i in range(1, 5))
    + tuple(f"Soil_Type{i}" for i in range(1, 41)))

HIGGS_FEATURE_NAMES = (
    ("lepton_pT", "lepton_eta", "lepton_phi", "missing_energy_magnitude", "missing_energy_phi")
    + tuple(f"jet{j}_{part}" for j in range(1, 5) for part in ("pt", "eta", "phi", "btag"))
    + ("m_jj", "m_jjj", "m_lv", "m_jlv", "m_bb", "m_wbb", "m_wwbb"))

_SPLITS = {"train": "tr", "tr": "tr", "validation": "tv", "tv": "tv", "test": "te", "te": "te"}


def _split(split, allowed):
    if split not in allowed:
        raise ValueError(f"split must be one of {sorted(allowed)}, got {split!r}")
    return allowed[split]


def load_miniboone_tiny(data_dir, split="train", missing_sentinel_to_nan=False):
    """Feng Nan's class-balanced MiniBooNE subsets ``mbne_tiny_{tr,tv,te}`` (50 features).

    Parameters
    ----------
    data_dir : str or Path
        The shared data folder (holding ``fnan_budgetrf/``).
    split : {"train", "validation", "test"} (or "tr", "tv", "te")
        2000 / 1000 / 2000 rows, half of them signal (label 1).
    missing_sentinel_to_nan : bool
        Replace UCI's missing-value sentinel -999.0 by NaN. Off by default, as in
        the BudgetRF experiments, which use the sentinel as an ordinary value.

    Returns
    -------
    TabularData
    """
    suffix = _split(split, _SPLITS)
    return load_svmlight(Path(data_dir) / "fnan_budgetrf" / f"mbne_tiny_{suffix}", n_features=50,
                         query_file=None,
                         missing_sentinel=MINIBOONE_SENTINEL if missing_sentinel_to_nan else None)


def load_yahoo_ltr_sample(data_dir, split="train", absent=0.0):
    """LightGBM's Yahoo! LTR sample ``rank.train`` / ``rank.test`` with its ``.query`` groups.

    Train has 3005 documents in 201 queries, test 768 in 50; labels are the
    relevance grades 0-4. Both splits get ``YAHOO_SAMPLE_N_FEATURES`` = 300
    columns (column j is feature id j+1), so models trained on one apply to the other.

    Parameters
    ----------
    data_dir : str or Path
        The shared data folder (holding ``yahoo_ltr_sample_lightgbm/``).
    split : {"train", "test"}
    absent : float
        Value for feature ids a document lacks (0 by the svmlight convention; np.nan
        to treat them as missing).

    Returns
    -------
    TabularData
        ``qid`` is the query index from the ``.query`` file.
    """
    name = _split(split, {"train": "rank.train", "test": "rank.test"})
    path = Path(data_dir) / "yahoo_ltr_sample_lightgbm" / name
    return load_svmlight(path, n_features=YAHOO_SAMPLE_N_FEATURES, query_file=f"{path}.query",
                         absent=absent)


def load_yahoo_feature_costs(data_dir):
    """The 519 Yahoo! LTR feature costs (values 1, 5, 20, 50, 100, 150, 200) from ``yahoo_cs_cost``.

    They price the features of Yahoo! LTR set 1 (Nan's ``yahoo_cssm`` files); how
    they map to the feature ids of the LightGBM sample is unknown (see PROVENANCE.md).
    """
    return load_feature_costs(Path(data_dir) / "fnan_budgetrf" / "yahoo_cs_cost",
                              n_features=YAHOO_N_FEATURES)


def load_covtype_20k(data_dir, positive_class=2):
    """The first 20,000 rows of UCI Covertype (54 features, classes 1-7).

    Parameters
    ----------
    data_dir : str or Path
        The shared data folder (holding ``covtype_h2o/``).
    positive_class : int or None
        Return the binary task "this class (label 1) vs the rest (label 0)";
        class 2 (Lodgepole Pine) by default. None keeps the classes 1-7.

    Returns
    -------
    TabularData
    """
    path = Path(data_dir) / "covtype_h2o" / "covtype.20k.data"
    table = _read_table(path, ",", n_columns=55)
    classes = table[:, -1].astype(np.int64)
    if positive_class is not None:
        if positive_class not in set(classes.tolist()):
            raise ValueError(f"positive_class={positive_class!r} does not occur in {path}; "
                             f"classes are {sorted(set(classes.tolist()))}")
        classes = (classes == positive_class).astype(np.int64)
    return TabularData(np.ascontiguousarray(table[:, :-1]), classes, None, COVTYPE_FEATURE_NAMES)


def load_higgs_sample(data_dir, split="train"):
    """LightGBM's HIGGS sample ``binary.train`` (7000 rows) / ``binary.test`` (500 rows).

    Tab-separated: the label (1 = signal) then 28 features.
    """
    name = _split(split, {"train": "binary.train", "test": "binary.test"})
    table = _read_table(Path(data_dir) / "higgs_sample_lightgbm" / name, "\t", n_columns=29)
    return TabularData(np.ascontiguousarray(table[:, 1:]), table[:, 0].astype(np.int64), None,
                       HIGGS_FEATURE_NAMES)


def _read_table(path, delimiter, n_columns):
    """The numeric table of a known data file, checked for its number of columns."""
    table = np.loadtxt(path, delimiter=delimiter, dtype=np.float64, ndmin=2, encoding="utf-8")
    if table.shape[1] != n_columns:
        raise ValueError(f"{path} has {table.shape[1]} columns, expected {n_columns}; is the "
                         "shared data folder the snapshot of PROVENANCE.md?")
    return table
