"""Tabular loaders, ranking/classification metrics, cost-accuracy curves and the tabular samples."""

import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.metrics import ndcg_score
from sklearn.preprocessing import StandardScaler

from msclassify.datasets import sample_data_path
from msclassify.metrics import (accuracy, cost_accuracy_auc, cost_accuracy_curve, ndcg_at_k,
                                precision_at_k, roc_auc)
from benchmarks.shared_sets import (load_covtype_20k, load_higgs_sample, load_miniboone_tiny,
                                    load_yahoo_feature_costs, load_yahoo_ltr_sample)
from msclassify.tabular import (TabularData, load_csv, load_feature_costs, load_miniboone,
                                load_svmlight, load_train_test, read_query_file)

SAMPLES = sample_data_path("tabular")


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


# -- svmlight / LETOR ------------------------------------------------------------------------------
def test_svmlight_with_qid_and_comments(tmp_path):
    path = _write(tmp_path, "a.txt", "# header comment\n2 qid:10 1:0.5 3:1 # doc a\n"
                                     "0 qid:10 2:-1.25\n\n1 qid:11 3:4e-1\n")
    data = load_svmlight(path)
    np.testing.assert_array_equal(data.X, [[0.5, 0, 1], [0, -1.25, 0], [0, 0, 0.4]])
    assert data.y.dtype == np.int64 and data.y.tolist() == [2, 0, 1]
    assert data.qid.tolist() == [10, 10, 11] and data.group_sizes.tolist() == [2, 1]
    assert data.feature_names == ("f1", "f2", "f3")


def test_svmlight_query_file_width_absent_and_sentinel(tmp_path):
    path = _write(tmp_path, "rank.train", "1 1:0 3:2\n0 2:-999\n1 1:1\n")
    _write(tmp_path, "rank.train.query", "2\n1\n")
    data = load_svmlight(path, n_features=5)           # .query picked up automatically
    assert data.X.shape == (3, 5) and data.qid.tolist() == [0, 0, 1]
    assert load_svmlight(path, query_file=None).qid is None
    missing = load_svmlight(path, absent=np.nan, missing_sentinel=-999.0)
    assert missing.X[0, 0] == 0 and np.isnan(missing.X[0, 1])  # explicit 0 stays 0
    assert np.isnan(missing.X[1, 1]) and np.isnan(missing.X[2, 2])
    assert load_svmlight(path, zero_based=True).feature_names == ("f0", "f1", "f2", "f3")


@pytest.mark.parametrize("text, message", [
    ("1 1:0.5\n0 2:abc\n", r"line 2: value 'abc' of feature 2 is not a number"),
    ("1 1:0.5\nx 2:1\n", r"line 2: label 'x' is not a number"),
    ("1 3:1 2:1\n", r"line 1: feature ids must increase"),
    ("1 1:1\n1 0:1\n", r"line 2: feature id 0, but svmlight feature ids start at 1; add 1 to every"),
    ("1 1:1 junk\n", r"line 1: 'junk' is not of the form feature_id:value"),
    ("1 qid:1 1:1\n1 1:1\n", r"line 2: no qid field"),
    ("1 qid:a 1:1\n", r"line 1: query id 'a'"),
    ("1 1:1 9:1\n", r"line 1: feature id 9 does not fit n_features=4"),
])
def test_svmlight_errors_name_file_and_line(tmp_path, text, message):
    path = _write(tmp_path, "bad.svm", text)
    with pytest.raises(ValueError, match=message) as info:
        load_svmlight(path, n_features=4, query_file=None)
    assert str(path) in str(info.value)


def test_query_file_errors(tmp_path):
    data = _write(tmp_path, "d.svm", "1 1:1\n0 1:2\n1 1:3\n")
    _write(tmp_path, "d.svm.query", "2\n2\n")
    with pytest.raises(ValueError, match="add up to 4 rows but the data file has 3"):
        load_svmlight(data)
    bad = _write(tmp_path, "bad.query", "2\n-1\n")
    with pytest.raises(ValueError, match=r"bad.query, line 2: '-1' is not a positive whole number"):
        read_query_file(bad)
    qid_data = _write(tmp_path, "q.svm", "1 qid:1 1:1\n0 qid:2 1:2\n1 qid:2 1:3\n")
    _write(tmp_path, "q.svm.query", "2\n1\n")
    with pytest.raises(ValueError, match="disagree with the qid fields"):
        load_svmlight(qid_data)
    with pytest.raises(FileNotFoundError, match="nothere"):
        load_svmlight(tmp_path / "nothere")


# -- MiniBooNE text --------------------------------------------------------------------------------
def test_miniboone_format(tmp_path):
    path = _write(tmp_path, "MiniBooNE_PID.txt",
                  "     2     1\n 0.283624E+01 -0.1E+01\n 0.5E+00 -0.999000E+03\n 1 2\n")
    data = load_miniboone(path)
    np.testing.assert_allclose(data.X, [[2.83624, -1], [0.5, -999], [1, 2]])
    assert data.y.tolist() == [1, 1, 0] and data.feature_names == ("x1", "x2")
    assert np.isnan(load_miniboone(path, missing_sentinel=-999.0).X[1, 1])


@pytest.mark.parametrize("text, message", [
    ("2 x\n1 2\n", r"line 1: expected two counts"),
    ("1 1\n1 2\n3\n", r"line 3: found 1 columns but line 2 has 2"),
    ("1 1\n1 2\n3 y\n", r"line 3, column 2: 'y' is not a number"),
    ("2 2\n1 2\n3 4\n", r"announces 2 signal \+ 2 background = 4 rows, but the file has 2"),
    ("1 0\n", r"has no data rows"),
])
def test_miniboone_errors(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        load_miniboone(_write(tmp_path, "m.txt", text))


# -- CSV -------------------------------------------------------------------------------------------
def test_csv_with_named_label_and_missing_cells(tmp_path):
    path = _write(tmp_path, "t.csv", "a, label ,b\n1.5,1,\n2,0,NA\n\n-3,1,4\n")
    data = load_csv(path, "label")
    np.testing.assert_array_equal(data.X[[0, 2]], [[1.5, np.nan], [-3, 4]])
    assert np.isnan(data.X[1, 1]) and data.y.tolist() == [1, 0, 1]
    assert data.feature_names == ("a", "b") and data.qid is None
    words = load_csv(_write(tmp_path, "w.csv", "x;kind\n1;cat\n2;dog\n"), "kind", delimiter=";")
    assert words.y.tolist() == ["cat", "dog"]


@pytest.mark.parametrize("text, message", [
    ("a,b\n1,2\n", r"has no column 'label'; its columns are \['a', 'b'\]"),
    ("a,label\n1,0\n1,2,3\n", r"line 3: 3 cells but the header has 2 columns"),
    ("a,label\n1,0\nfoo,1\n", r"line 3, column 'a': 'foo' is not a number"),
    ("a,label\n1,\n", r"line 2: the label \(label\) is missing"),
    ("a,label\n", r"no data rows"),
    ("", r"is empty"),
])
def test_csv_errors(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        load_csv(_write(tmp_path, "t.csv", text), "label")


# -- feature costs ---------------------------------------------------------------------------------
def test_cost_file(tmp_path):
    path = _write(tmp_path, "costs", "1.000000\n# a comment\n\n5\n0\n")
    np.testing.assert_array_equal(load_feature_costs(path), [1, 5, 0])


@pytest.mark.parametrize("text, n_features, message", [
    ("1\n-2\n", None, r"line 2: cost -2 must be finite and >= 0"),
    ("1\nnan\n", None, r"line 2: cost nan must be finite"),
    ("inf\n", None, r"line 1: cost inf must be finite"),
    ("1\nfive\n", None, r"line 2: 'five' is not a number"),
    ("1 2\n", None, r"line 1: expected one cost per line, found 2"),
    ("1\n2\n", 3, r"holds 2 costs but the data has 3 features"),
    ("\n", None, r"holds no costs"),
])
def test_cost_file_errors(tmp_path, text, n_features, message):
    with pytest.raises(ValueError, match=message):
        load_feature_costs(_write(tmp_path, "costs", text), n_features)


def test_a_cost_file_longer_than_the_svmlight_features_is_refused(tmp_path, shared_data):
    """519 costs (the full Yahoo! LTR set) for a sample whose feature ids end at 300."""
    data = shared_data()
    yahoo = data / "yahoo_ltr_sample_lightgbm"
    with pytest.raises(ValueError, match=r"holds 519 costs but only the first 300 features occur "
                                         r"in .*rank.train and .*rank.test"):
        load_train_test(yahoo / "rank.train", yahoo / "rank.test",
                        data / "fnan_budgetrf" / "yahoo_cs_cost")
    train = _write(tmp_path, "t.svm", "1 1:1 2:3\n0 1:2\n1 1:1\n0 2:1\n")
    test = _write(tmp_path, "t.test", "1 3:1\n0 1:1\n")
    three = _write(tmp_path, "three.cost", "1\n2\n3\n")
    # feature 3 occurs in the test file only: the cost file fits
    loaded, _, costs = load_train_test(train, test, three)
    assert loaded.n_features == 3 and costs.tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="holds 3 costs but only the first 2 features occur"):
        load_train_test(train, cost_path=three, test_fraction=0)
    csv = _write(tmp_path, "t.csv", "a,b,c,label\n1,0,0,0\n2,0,0,1\n1,0,0,1\n2,0,0,0\n")
    assert load_train_test(csv, cost_path=three, test_fraction=0)[2].size == 3   # CSV columns


def test_sweep_plot_labels_do_not_overlap():
    from matplotlib.figure import Figure

    from msclassify.tabular import CostSweep, SweepPoint, plot_cost_sweep
    points = [SweepPoint("plain GB", 0.0, 30.0, {"accuracy": 0.92}, ("a",), 10, 0.1)]
    points += [SweepPoint(f"CEGB mu={mu:g}", mu, 10.0 - 0.3 * k, {"accuracy": 0.9 - 0.002 * k},
                          ("a",), 10, 0.1)
               for k, mu in enumerate((1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2))]
    ax = Figure(figsize=(4, 3)).add_subplot()
    plot_cost_sweep(CostSweep(tuple(points), "accuracy", "classification"), ax)
    boxes = [text.get_window_extent() for text in ax.texts]
    assert len(boxes) >= 4                          # close points: most labels still fit
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert {text.get_text() for text in ax.texts} <= {f"μ={p.cost_tradeoff:g}"
                                                      for p in points[1:]}


def test_tabular_data_checks_shapes():
    with pytest.raises(ValueError, match="qid must have one entry per row"):
        TabularData(np.zeros((2, 1)), np.zeros(2), np.zeros(3), ("a",))
    with pytest.raises(ValueError, match="1 feature names for 2 columns"):
        TabularData(np.zeros((2, 2)), np.zeros(2), None, ("a",))


# -- the shared real data sets ---------------------------------------------------------------------
def test_shared_sets_match_provenance(shared_data):
    folder = shared_data()
    sizes = {"train": 2000, "validation": 1000, "test": 2000}
    for split, n in sizes.items():
        data = load_miniboone_tiny(folder, split)
        assert data.X.shape == (n, 50) and np.bincount(data.y).tolist() == [n // 2, n // 2]
    raw = load_miniboone_tiny(folder, "tr")
    with_nan = load_miniboone_tiny(folder, "tr", missing_sentinel_to_nan=True)
    assert np.array_equal(np.isnan(with_nan.X), raw.X == -999.0) and np.isnan(with_nan.X).any()

    train, test = load_yahoo_ltr_sample(folder, "train"), load_yahoo_ltr_sample(folder, "test")
    assert train.X.shape == (3005, 300) and train.group_sizes.size == 201
    assert test.X.shape == (768, 300) and test.group_sizes.size == 50
    assert set(train.y.tolist()) == {0, 1, 2, 3, 4}
    costs = load_yahoo_feature_costs(folder)
    values, counts = np.unique(costs, return_counts=True)
    assert dict(zip(values.tolist(), counts.tolist())) == {1: 123, 5: 31, 20: 191, 50: 125,
                                                           100: 16, 150: 32, 200: 1}

    cover = load_covtype_20k(folder)
    assert cover.X.shape == (20000, 54) and cover.y.sum() == 6022
    assert cover.X[0, :3].tolist() == [2596, 51, 3]
    assert np.bincount(load_covtype_20k(folder, positive_class=None).y).tolist()[1:] == \
        [2942, 6022, 2160, 2160, 2396, 2160, 2160]
    higgs = load_higgs_sample(folder)
    assert higgs.X.shape == (7000, 28) and load_higgs_sample(folder, "test").X.shape == (500, 28)
    assert higgs.y[0] == 1 and higgs.X[0, :2].tolist() == [0.869, -0.635]
    with pytest.raises(ValueError, match="split must be one of"):
        load_higgs_sample(folder, "validation")


# -- metrics ---------------------------------------------------------------------------------------
def test_accuracy_and_auc_by_hand():
    assert accuracy([0, 1, 1, 0], [0, 1, 0, 0]) == 0.75
    # positives 0.35, 0.8 vs negatives 0.1, 0.4: 3 of 4 pairs ordered correctly
    assert roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75
    assert roc_auc([0, 0, 1, 1], np.array([[0.9, 0.1], [0.6, 0.4], [0, 0.35], [0, 0.8]])) == 0.75
    with pytest.raises(ValueError, match="3 entries but y_true has 4"):
        accuracy([0, 1, 1, 0], [0, 1, 0])
    with pytest.raises(ValueError, match="exactly two classes"):
        roc_auc([1, 1], [0.2, 0.3])


def test_precision_at_5_follows_the_paper():
    qid = [1] * 6
    scores = [6, 5, 4, 3, 2, 1]
    assert precision_at_k([1, 1, 1, 1, 1, 0], scores, qid) == 1.0       # top 5 all relevant
    assert precision_at_k([1, 1, 0, 1, 1, 1], scores, qid) == 2 / 5     # first irrelevant at j = 3
    assert precision_at_k([0, 1, 1, 1, 1, 1], scores, qid) == 0.0       # j = 1
    assert precision_at_k([1, 1, 1, 1, 0, 0], scores, qid) == 4 / 5     # j = 5
    assert precision_at_k([2, 1, 0], [3, 2, 1], [1, 1, 1]) == 2 / 5     # grades, threshold 1
    assert precision_at_k([2, 1, 0], [3, 2, 1], [1, 1, 1], relevance_threshold=2) == 1 / 5
    assert precision_at_k([1, 1], [0.5, 0.1], [4, 4]) == 1.0            # < 5 docs, all relevant
    # mean over queries; rows of a query need not be contiguous
    assert precision_at_k([1, 0, 0, 1], [9, 9, 1, 8], [1, 2, 2, 1], k=2) == pytest.approx(0.5)
    # equal scores put the irrelevant document first, whatever the file order
    assert precision_at_k([1, 0, 1], [1, 1, 0], [1, 1, 1], k=2) == 0.0
    assert precision_at_k([0, 1, 1], [1, 1, 0], [1, 1, 1], k=2) == 0.0
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        precision_at_k([1], [1], [1], k=0)


def test_ndcg_by_hand_and_against_sklearn():
    # ranked grades 0, 1 (ideal 2, 1): (0 + 1/log2 3) / (3 + 1/log2 3)
    expected = (1 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert ndcg_at_k([2, 0, 1], [0.2, 0.9, 0.5], [7, 7, 7], k=2) == pytest.approx(expected)
    assert ndcg_at_k([3, 2, 0], [3, 2, 1], [1, 1, 1]) == 1.0
    no_relevant = ([0, 0, 2, 1], [1, 2, 3, 4], [1, 1, 2, 2])
    second = (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert ndcg_at_k(*no_relevant) == pytest.approx((1 + second) / 2)
    assert ndcg_at_k(*no_relevant, no_relevant="zero") == pytest.approx(second / 2)
    assert ndcg_at_k(*no_relevant, no_relevant="skip") == pytest.approx(second)
    assert ndcg_at_k([1, 0], [5, 5], [1, 1], k=1) == 0.0   # tie: worst order
    rng = np.random.default_rng(0)
    grades, scores = rng.integers(0, 5, size=(8, 12)), rng.normal(size=(8, 12))
    reference = ndcg_score(2.0**grades - 1, scores, k=5)  # sklearn: linear gains, log2 discount
    mine = ndcg_at_k(grades.ravel(), scores.ravel(), np.repeat(np.arange(8), 12), k=5)
    assert mine == pytest.approx(reference)


def test_cost_accuracy_frontier_and_area():
    curve = cost_accuracy_curve([3, 1, 2, 5, 3], [0.9, 0.5, 0.4, 0.9, 0.8])
    assert curve.costs.tolist() == [1, 3] and curve.scores.tolist() == [0.5, 0.9]
    assert curve.indices.tolist() == [1, 0]
    np.testing.assert_array_equal(curve.score_at([0.5, 1, 2.9, 3, 100]), [np.nan, .5, .5, .9, .9])
    assert curve.area((1, 5)) == pytest.approx(0.7)           # (2 * 0.5 + 2 * 0.9) / 4
    assert curve.area((2, 4)) == pytest.approx(0.7)           # (1 * 0.5 + 1 * 0.9) / 2
    assert curve.area() == pytest.approx(0.5)                 # [1, 3]: 0.5 throughout
    assert curve.area((4, 4)) == 0.9
    assert cost_accuracy_auc([1, 3], [0.5, 0.9], (1, 5)) == pytest.approx(0.7)
    with pytest.raises(ValueError, match="cheapest model costs 1.0"):
        curve.area((0, 5))
    with pytest.raises(ValueError, match="finite"):
        cost_accuracy_curve([1, np.nan], [0.5, 0.6])


# -- the shipped samples ---------------------------------------------------------------------------
def _generator():
    from msclassify.datasets import _generate_tables  # white-box: the samples' generator

    return _generate_tables


def test_samples_are_reproduced_byte_for_byte_and_small(tmp_path):
    _generator().generate(tmp_path)
    written = sorted(p.name for p in tmp_path.iterdir())
    assert len(written) == 9
    for name in written:
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), name
        assert (SAMPLES / name).stat().st_size < 200_000


def test_yahoo_style_costs_follow_the_real_histogram(shared_data):
    real = load_yahoo_feature_costs(shared_data())
    values, counts = np.unique(real, return_counts=True)
    assert dict(zip(values.tolist(), counts.tolist())) == _generator().YAHOO_COST_HISTOGRAM
    sample = load_feature_costs(SAMPLES / "yahoo_style.cost", 30)
    assert set(sample.tolist()) <= set(values.tolist())
    share = {v: np.mean(sample == v) for v in values}
    for value, count in zip(values, counts):
        assert abs(share[value] - count / real.size) <= 1 / 30


def _auc_of(columns, train, test, y_train, y_test):
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(train[:, columns], y_train)
    return roc_auc(y_test, model.predict_proba(test[:, columns])[:, 1])


def test_samples_load_and_expensive_features_carry_the_signal():
    train = load_svmlight(SAMPLES / "yahoo_style.train", n_features=30)
    test = load_svmlight(SAMPLES / "yahoo_style.test", n_features=30)
    costs = load_feature_costs(SAMPLES / "yahoo_style.cost", train.n_features)
    assert train.group_sizes.size == 60 and test.group_sizes.size == 30
    assert set(train.y.tolist()) == {0, 1, 2, 3, 4}
    relevant_train, relevant_test = train.y >= 1, test.y >= 1
    cheap, dear = costs <= 5, costs >= 50
    assert _auc_of(dear, train.X, test.X, relevant_train, relevant_test) > \
        _auc_of(cheap, train.X, test.X, relevant_train, relevant_test) + 0.1

    mini = load_miniboone(SAMPLES / "miniboone_style.txt", missing_sentinel=-999.0)
    mini_costs = load_feature_costs(SAMPLES / "miniboone_style.cost", mini.n_features)
    assert mini.X.shape == (800, 12) and mini.y.sum() == 260 and np.isnan(mini.X).any()
    rows = ~np.isnan(mini.X).any(axis=1)
    X, y = mini.X[rows], mini.y[rows]
    order = np.random.default_rng(0).permutation(y.size)
    fit, held = order[:500], order[500:]
    assert _auc_of(mini_costs >= 20, X[fit], X[held], y[fit], y[held]) > \
        _auc_of(mini_costs == 1, X[fit], X[held], y[fit], y[held]) + 0.1

    table = load_csv(SAMPLES / "csv_style.csv", "label")
    table_costs = load_feature_costs(SAMPLES / "csv_style.cost", table.n_features)
    assert table.X.shape == (600, 7) and np.isnan(table.X).any()
    X = np.nan_to_num(table.X)
    assert _auc_of(table_costs == 100, X[:400], X[400:], table.y[:400], table.y[400:]) > \
        _auc_of(table_costs == 1, X[:400], X[400:], table.y[:400], table.y[400:]) + 0.1
