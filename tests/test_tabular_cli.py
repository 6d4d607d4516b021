"""``msclassify tabular train | sweep | evaluate`` on the tabular sample files, in-process.

Each command's output is checked against the Python API it mirrors
(`CEGBClassifier`, ``with_budget``, `cost_sweep`, `score_model`).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from msclassify import CEGBClassifier, CEGBRegressor, load_model
from msclassify.cli import main
from msclassify.datasets import sample_data_path
from msclassify.pixel import PixelClassifier
from msclassify.tabular import cost_sweep, load_train_test, score_model, training_targets

REPO = Path(__file__).resolve().parents[1]
SAMPLES = sample_data_path("tabular")
CSV, CSV_COSTS = SAMPLES / "csv_style.csv", SAMPLES / "csv_style.cost"
YAHOO_TRAIN, YAHOO_TEST = SAMPLES / "yahoo_style.train", SAMPLES / "yahoo_style.test"
YAHOO_COSTS = SAMPLES / "yahoo_style.cost"
FEW_TREES = ["--trees", "12", "--leaves", "4", "-q"]


def run(*args):
    return main(["tabular", *map(str, args)])


def test_train_then_evaluate_round_trip(tmp_path, capsys):
    model_path, json_path = tmp_path / "model.msc", tmp_path / "scores.json"
    assert run("train", CSV, "--costs", CSV_COSTS, "--cost-tradeoff", "0.01", *FEW_TREES,
               "-o", model_path) == 0
    model = load_model(model_path)
    assert type(model) is CEGBClassifier and model.n_iterations_ == 12
    train, validation, costs = load_train_test(CSV, cost_path=CSV_COSTS, test_fraction=0.2)
    np.testing.assert_array_equal(model.booster_.feature_costs, costs)
    # the command fits what the API fits on the same 80 %
    reference = CEGBClassifier(n_estimators=12, max_leaves=4, cost_tradeoff=0.01,
                               feature_costs=costs).fit(train.X, training_targets(train))
    np.testing.assert_allclose(model.predict_proba(validation.X),
                               reference.predict_proba(validation.X))
    capsys.readouterr()

    assert run("evaluate", model_path, CSV, "--json", json_path) == 0
    printed = capsys.readouterr().out
    report = json.loads(json_path.read_text())
    data, _, _ = load_train_test(CSV, test_fraction=0)
    assert report["task"] == "classification" and report["n_samples"] == data.n_samples == 600
    assert report["scores"] == pytest.approx(score_model(model, data))
    assert set(report["scores"]) == {"accuracy", "roc_auc"}
    cost = model.prediction_cost(data.X)
    assert report["mean_cost"]["total"] == pytest.approx(cost.per_sample.mean())
    assert report["mean_cost"]["feature"] == pytest.approx(cost.feature.mean())
    assert report["features_used"] == [data.feature_names[i]
                                       for i in model.booster_.features_used()]
    assert f"accuracy {report['scores']['accuracy']:.4f}" in printed


def test_evaluate_can_price_a_model_with_other_costs(tmp_path, capsys):
    plain, priced_json = tmp_path / "plain.msc", tmp_path / "priced.json"
    assert run("train", CSV, *FEW_TREES, "-o", plain) == 0     # default: cost 1 per feature
    assert run("evaluate", plain, CSV, "--costs", CSV_COSTS, "--json", priced_json, "-q") == 0
    # plain boosting (mu = 0) grows the same trees whatever the costs, so a model trained
    # with the cost file must cost what --costs reports for the model trained without it
    with_costs, with_costs_json = tmp_path / "with_costs.msc", tmp_path / "with_costs.json"
    assert run("train", CSV, "--costs", CSV_COSTS, *FEW_TREES, "-o", with_costs) == 0
    assert run("evaluate", with_costs, CSV, "--json", with_costs_json, "-q") == 0
    priced = json.loads(priced_json.read_text())["mean_cost"]
    assert priced == pytest.approx(json.loads(with_costs_json.read_text())["mean_cost"])
    data, _, _ = load_train_test(CSV, test_fraction=0)
    unit = load_model(plain).prediction_cost(data.X).per_sample.mean()
    assert unit < priced["total"]   # the saved model still has its own unit costs


def test_budget_is_respected_and_matches_with_budget(tmp_path, capsys):
    model_path = tmp_path / "cheap.msc"
    budget = 11.2   # between the costs of the cheaper and the dearer prefixes of this model
    assert run("train", CSV, "--costs", CSV_COSTS, "--cost-tradeoff", "0.01", "--trees", "30",
               "--leaves", "4", "--budget", budget, "-o", model_path) == 0
    printed = capsys.readouterr().out
    model = load_model(model_path)
    train, validation, costs = load_train_test(CSV, cost_path=CSV_COSTS, test_fraction=0.2)
    full = CEGBClassifier(n_estimators=30, max_leaves=4, cost_tradeoff=0.01,
                          feature_costs=costs).fit(train.X, training_targets(train))
    assert full.prediction_cost(validation.X).per_sample.mean() > budget   # the budget binds
    expected = full.with_budget(budget, validation.X, validation.y)
    assert 0 < model.n_iterations_ == expected.n_iterations_ < 30
    assert model.validation_cost_ == pytest.approx(expected.validation_cost_)
    assert model.validation_cost_ <= budget
    assert model.prediction_cost(validation.X).per_sample.mean() == pytest.approx(
        model.validation_cost_)
    assert f"kept {model.n_iterations_} of 30 iterations" in printed
    assert "30 trees" in printed     # what was trained, before the cut


def test_budget_below_every_prefix_keeps_the_prior_and_says_how_to_fix_it(tmp_path, capsys):
    model_path = tmp_path / "prior.msc"
    assert run("train", CSV, "--costs", CSV_COSTS, "--trees", "5", "--budget", "0.5",
               "-o", model_path) == 0
    assert load_model(model_path).n_iterations_ == 0
    assert "larger --cost-tradeoff" in capsys.readouterr().out


def test_ranking_data_with_queries(tmp_path, capsys):
    model_path, json_path = tmp_path / "rank.msc", tmp_path / "rank.json"
    assert run("train", YAHOO_TRAIN, "--costs", YAHOO_COSTS, "--validation", YAHOO_TEST,
               "--cost-tradeoff", "0.001", "--budget", "100", *FEW_TREES, "-o", model_path) == 0
    model = load_model(model_path)
    np.testing.assert_array_equal(model.classes_, [0, 1])   # binary relevance: grade > 0
    train, test, _ = load_train_test(YAHOO_TRAIN, YAHOO_TEST, YAHOO_COSTS)
    assert test.qid is not None and model.validation_cost_ <= 100
    assert model.validation_score_ == pytest.approx(score_model(model, test)["precision@5"])
    assert run("evaluate", model_path, YAHOO_TEST, "--json", json_path, "-q") == 0
    report = json.loads(json_path.read_text())
    assert report["task"] == "ranking"
    assert report["scores"] == pytest.approx(score_model(model, test))
    assert set(report["scores"]) == {"precision@5", "ndcg@5"}


def test_sweep_writes_json_and_plot_matching_cost_sweep(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert run("sweep", YAHOO_TRAIN, "--test", YAHOO_TEST, "--costs", YAHOO_COSTS,
               "--cost-tradeoffs", "0.01, 0.001", "--trees", "10", "--leaves", "4",
               "-o", out) == 0
    printed = capsys.readouterr().out
    document = json.loads((out / "sweep.json").read_text())
    train, test, costs = load_train_test(YAHOO_TRAIN, YAHOO_TEST, YAHOO_COSTS)
    reference = cost_sweep(train, test, costs, [0.001, 0.01], n_estimators=10, max_leaves=4)
    assert document["metric"] == "precision@5" and document["task"] == "ranking"
    assert document["settings"]["cost_tradeoffs"] == [0.001, 0.01]
    assert document["settings"]["n_estimators"] == 10 and document["settings"]["n_test"] == 338
    assert [p["name"] for p in document["points"]] == [p.name for p in reference.points]
    for written, expected in zip(document["points"], reference.points):
        assert written["mean_cost"] == pytest.approx(expected.mean_cost)
        assert written["scores"] == pytest.approx(expected.scores)
        assert written["features_used"] == list(expected.features_used)
    image = iio.imread(out / "sweep.png")
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 200
    assert image.std() > 10   # something is drawn
    assert sorted(os.listdir(out)) == ["sweep.json", "sweep.png"]   # no temporary files left
    for point in reference.points:
        assert point.name in printed
    assert "precision@5" in printed and "ndcg@5" in printed


def test_sweep_holds_out_a_test_fraction(tmp_path):
    out = tmp_path / "csv_sweep"
    assert run("sweep", CSV, "--costs", CSV_COSTS, "--test-fraction", "0.25",
               "--cost-tradeoffs", "0.01", "--trees", "5", "--leaves", "4", "-q", "-o", out) == 0
    document = json.loads((out / "sweep.json").read_text())
    assert document["metric"] == "accuracy" and document["settings"]["n_test"] == 150
    assert len(document["points"]) == 2


# -- errors ------------------------------------------------------------------------------------
def single_class_csv(tmp_path):
    path = tmp_path / "one_class.csv"
    path.write_text("a,b,label\n" + "".join(f"{i},{2 * i},1\n" for i in range(40)))
    return path


def error_cases(tmp_path):
    out = tmp_path / "out"
    return [
        (["train", tmp_path / "missing.csv", "-o", tmp_path / "m.msc"],
         "missing.csv does not exist"),
        (["train", CSV, "--costs", SAMPLES / "miniboone_style.cost", "-o", tmp_path / "m.msc"],
         "holds 12 costs but"),
        (["train", single_class_csv(tmp_path), "-o", tmp_path / "m.msc"], "single class"),
        (["train", CSV, "--budget", "-1", "-o", tmp_path / "m.msc"], "budget must be"),
        (["train", CSV, "--budget", "5", "--validation-fraction", "0", "-o", tmp_path / "m.msc"],
         "--budget needs validation data"),
        (["train", CSV, "-o", tmp_path / "no_folder" / "m.msc"], "no_folder does not exist"),
        (["sweep", CSV, "--cost-tradeoffs", "0.01,abc", "-o", out], "'abc' is not a number"),
        (["sweep", CSV, "--cost-tradeoffs", "-1", "-o", out], "must be > 0"),
        (["sweep", CSV, "--costs", SAMPLES / "miniboone_style.cost", "-o", out],
         "holds 12 costs but"),
        (["sweep", single_class_csv(tmp_path), "-o", out], "single class"),
        (["sweep", tmp_path / "missing.txt", "-o", out], "does not exist"),
        (["evaluate", tmp_path / "missing.msc", CSV], "does not exist"),
    ]


@pytest.mark.parametrize("case", range(12))
def test_bad_input_is_one_line_exit_1_and_no_output(tmp_path, capsys, case):
    argv, message = error_cases(tmp_path)[case]
    before = set(tmp_path.rglob("*"))
    assert run(*argv) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"msclassify tabular {argv[0]}: error: ")
    assert message in lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert set(tmp_path.rglob("*")) == before     # no model, folder or partial file


def test_evaluate_scores_a_saved_cstc_tree(tmp_path):
    from msclassify.baselines import CSTCClassifier
    data_path, costs_path = SAMPLES / "miniboone_style.txt", SAMPLES / "miniboone_style.cost"
    data, _, costs = load_train_test(data_path, cost_path=costs_path, test_fraction=0)
    tree = CSTCClassifier(feature_costs=costs, cost_tradeoff=1e-3, random_state=0).fit(
        data.X, training_targets(data))
    tree.save(tmp_path / "cstc.msc")
    assert run("evaluate", tmp_path / "cstc.msc", data_path, "--json", tmp_path / "e.json",
               "-q") == 0
    report = json.loads((tmp_path / "e.json").read_text())
    assert report["model_class"] == "CSTCClassifier"
    assert report["scores"] == pytest.approx(score_model(tree, data))
    assert report["mean_cost"]["total"] == pytest.approx(
        tree.prediction_cost(data.X).per_sample.mean())
    assert report["features_used"] == [data.feature_names[i] for i in tree.features_used()]


def test_evaluate_refuses_pixel_and_regression_models(tmp_path, capsys):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (32, 32)).astype(np.uint8)
    labels = np.zeros((32, 32), np.uint8)
    labels[:4], labels[-4:] = 1, 2
    PixelClassifier(features="fast", n_estimators=2).fit(image, labels).save(tmp_path / "px.msc")
    X = rng.normal(size=(50, 7))
    CEGBRegressor(n_estimators=2).fit(X, X[:, 0]).save(tmp_path / "reg.msc")
    for name, kind in (("px.msc", "PixelClassifier"), ("reg.msc", "CEGBRegressor")):
        assert run("evaluate", tmp_path / name, CSV, "--json", tmp_path / "e.json") == 1
        error = capsys.readouterr().err.strip()
        assert error.startswith("msclassify tabular evaluate: error: ")
        assert f"holds a {kind}, not a tabular classifier" in error
    assert not (tmp_path / "e.json").exists()


def test_evaluate_rejects_data_with_other_columns(tmp_path, capsys):
    assert run("train", CSV, *FEW_TREES, "-o", tmp_path / "m.msc") == 0
    assert run("evaluate", tmp_path / "m.msc", SAMPLES / "miniboone_style.txt") == 1
    assert "has 12 features but" in capsys.readouterr().err


def test_python_m_msclassify_tabular_help():
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-m", "msclassify", "tabular", "--help"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for command in ("train", "sweep", "evaluate"):
        assert command in result.stdout


@pytest.mark.parametrize("feature_map", ["trees", "identity"])
def test_evaluate_prices_a_cstc_tree_with_a_cost_file(tmp_path, feature_map):
    from msclassify.baselines import CSTCClassifier
    data_path, costs_path = SAMPLES / "miniboone_style.txt", SAMPLES / "miniboone_style.cost"
    data, _, costs = load_train_test(data_path, cost_path=costs_path, test_fraction=0)
    tree = CSTCClassifier(max_depth=2, feature_map=feature_map, feature_costs=costs,
                          cost_tradeoff=0.0, n_weak_learners=10, random_state=0).fit(
        data.X, training_targets(data))
    tree.save(tmp_path / "cstc.msc")
    doubled = tmp_path / "doubled.cost"
    doubled.write_text("".join(f"{2 * float(cost)!r}\n" for cost in costs))
    assert run("evaluate", tmp_path / "cstc.msc", data_path, "--costs", doubled,
               "--json", tmp_path / "e.json", "-q") == 0
    report = json.loads((tmp_path / "e.json").read_text())
    own = tree.prediction_cost(data.X)
    assert own.feature.mean() > 0
    assert report["mean_cost"]["feature"] == pytest.approx(2 * own.feature.mean())
    assert report["mean_cost"]["evaluation"] == pytest.approx(own.evaluation.mean())
