"""``msclassify tabular train | sweep | evaluate``: CEGB on tabular data with feature costs.

The sub-commands mirror the Python API: ``train`` fits a `CEGBClassifier`
(``--cost-tradeoff`` is ``cost_tradeoff``, ``--trees`` is ``n_estimators``; with
``--budget`` the model is cut by ``with_budget`` on validation data), ``sweep``
runs `msclassify.tabular.cost_sweep` and ``evaluate`` scores a saved
model. Data files are svmlight/LETOR (with ``qid`` or a ``<file>.query`` file:
ranking data, trained as binary relevance grade > 0 and scored by precision@5
and NDCG@5), MiniBooNE text or CSV; cost files hold one cost per line, in
feature order. Every file is written atomically, and only when the command
succeeds. Errors are reported by `msclassify.cli.main` as one line, exit 1.

Examples
--------
::

    msclassify tabular train data.train --costs data.cost --cost-tradeoff 0.01 -o model.msc
    msclassify tabular train data.train --costs data.cost --budget 50 -o cheap.msc
    msclassify tabular evaluate model.msc data.test --json scores.json
    msclassify tabular sweep data.train --test data.test --costs data.cost -o sweep/
"""

import argparse
import inspect
import json
import time
from pathlib import Path

import numpy as np

from ..baselines import BudgetRFClassifier, CSTCClassifier
from ..budget import check_budget, with_feature_costs
from ..cegb import CEGBClassifier
from ..io import write_atomically
from ..metrics import precision_at_k
from ..modelfile import check_model_path
from ..models import load_model
from ..plotting import cost_sweep_figure
from ..tabular import (DEFAULT_COST_TRADEOFFS, FILE_FORMATS, check_trainable, cost_sweep,
                      load_feature_costs, load_table_for_model, load_train_test,
                      parse_cost_tradeoffs, score_model, training_targets)
from ._common import (CommandError, make_output_folder, positive_int, progress, say,
                      training_callback, write_png)

__all__ = ["add_tabular_commands"]

# Options shared by train and sweep: option -> (parameter name, type, help).
_BOOSTING_OPTIONS = {
    "split_cost": ("split_cost", float, "cost of evaluating one split, in feature-cost units "
                                        "(alpha)"),
    "trees": ("n_estimators", positive_int, "boosting iterations"),
    "leaves": ("max_leaves", positive_int, "leaves per tree"),
    "learning_rate": ("learning_rate", float, "shrinkage of every tree"),
    "min_samples_leaf": ("min_samples_leaf", positive_int, "training rows a leaf needs at least"),
    "random_state": ("random_state", int, "seed of the binning and of the held-out split"),
}


# -- shared helpers ----------------------------------------------------------------------------

def _write_json(path, document):
    text = json.dumps(document, indent=2, allow_nan=False) + "\n"
    write_atomically(path, lambda file: file.write(text.encode("utf-8")))


def _check_output_file(path, what):
    path = Path(path)
    if not path.parent.is_dir():
        raise CommandError(f"cannot write the {what} to {path}: folder {path.parent} does not "
                           "exist; create it or choose another path")
    if path.is_dir():
        raise CommandError(f"cannot write the {what} to {path}: it is a folder; give a file name")
    return path


def _score_text(scores):
    return ", ".join(f"{name} {value:.4f}" for name, value in scores.items())


def _cost_text(cost):
    return (f"{cost.per_sample.mean():.4g} per sample (features {cost.feature.mean():.4g} + "
            f"evaluation {cost.evaluation.mean():.4g})")


def _add_data_options(parser, costs_help="feature-cost file, one cost per line in feature "
                                          "order (default: 1 per feature)"):
    parser.add_argument("--format", choices=FILE_FORMATS, default="auto",
                        help="data file format; auto: .csv is CSV, a first line of two counts "
                             "is MiniBooNE, anything else svmlight/LETOR (default: %(default)s)")
    parser.add_argument("--label-column", default="label",
                        help="label column of a CSV file (default: %(default)s)")
    parser.add_argument("--costs", metavar="FILE", help=costs_help)


def _add_boosting_options(parser, defaults, names):
    group = parser.add_argument_group("boosting")
    for option in names:
        parameter, kind, text = _BOOSTING_OPTIONS[option]
        # SUPPRESS: options not given stay out of the namespace, so the library's own
        # defaults apply (one source of truth)
        group.add_argument("--" + option.replace("_", "-"), type=kind, default=argparse.SUPPRESS,
                           metavar="N" if kind in (int, positive_int) else "X",
                           help=f"{text} (default: {defaults[parameter]})")


def _boosting_params(args, names):
    return {_BOOSTING_OPTIONS[option][0]: getattr(args, option) for option in names
            if hasattr(args, option)}


# -- train -------------------------------------------------------------------------------------

_TRAIN_OPTIONS = ("split_cost", "trees", "leaves", "learning_rate", "min_samples_leaf",
                  "random_state")


def _cmd_train(args):
    output = Path(args.output)
    check_model_path(output)  # before training, not after it
    if args.validation is None and not 0 <= args.validation_fraction < 1:
        raise CommandError(f"--validation-fraction must be in [0, 1), got "
                           f"{args.validation_fraction}")
    if args.budget is not None:
        try:
            check_budget(args.budget)
        except ValueError as exc:
            raise CommandError(f"--budget: {exc}") from None
        if args.validation is None and args.validation_fraction == 0:
            raise CommandError("--budget needs validation data to measure the cost on: give "
                               "--validation FILE or --validation-fraction F > 0")
    params = _boosting_params(args, _TRAIN_OPTIONS)
    train, validation, costs = load_train_test(
        args.data, args.validation, args.costs, args.format, label_column=args.label_column,
        test_fraction=args.validation_fraction, random_state=params.get("random_state", 0))
    check_trainable(train)
    if validation is not None and (train.qid is None) != (validation.qid is None):
        raise CommandError(f"{args.data} and {args.validation} must both be ranking data (with "
                           "queries) or neither; check the .query files / qid fields")
    if costs is None:
        costs = np.ones(train.n_features)
    model = CEGBClassifier(cost_tradeoff=args.cost_tradeoff, growth=args.growth,
                           feature_costs=costs, **params)
    task = "ranking (binary relevance: grade > 0)" if train.qid is not None else "classification"
    say(args, f"training on {train.n_samples} rows x {train.n_features} features, {task}"
               + (f"; validating on {validation.n_samples} rows" if validation is not None else ""))
    start = time.perf_counter()
    with progress(model.n_estimators, "training", args.quiet, unit="tree") as bar:
        model.fit(train.X, training_targets(train), callback=training_callback(bar))
    seconds = time.perf_counter() - start
    n_iterations = model.n_iterations_
    used = model.features_used()
    say(args, f"trained in {seconds:.2f} s: {model.booster_.n_trees} trees; "
               f"{used.size} of {train.n_features} features used: "
               f"{', '.join(train.feature_names[i] for i in used) or 'none'}")
    if args.budget is not None:
        scoring = None
        if validation.qid is not None:
            def scoring(_relevant, proba):
                return precision_at_k(validation.y, proba[:, 1], validation.qid, k=5)
        model = model.with_budget(args.budget, validation.X, training_targets(validation), scoring)
        used = model.features_used()
        say(args, f"budget {args.budget:g}: kept {model.n_iterations_} of {n_iterations} "
                   f"iterations, {used.size} features")
        if model.n_iterations_ == 0:
            say(args, "no iteration fits the budget: the model predicts the training prior; "
                       "a larger --cost-tradeoff makes the first trees use cheaper features")
    if validation is not None:
        cost = model.prediction_cost(validation.X)
        say(args, f"validation: mean prediction cost {_cost_text(cost)}; "
                   f"{_score_text(score_model(model, validation))}")
    model.save(output)
    say(args, f"saved {output}")
    return 0


# -- evaluate ----------------------------------------------------------------------------------

def _load_tabular_model(path):
    model = load_model(path)
    if not isinstance(model, (CEGBClassifier, BudgetRFClassifier, CSTCClassifier)):
        raise CommandError(f"{path} holds a {type(model).__name__}, not a tabular classifier; "
                           "train one with: msclassify tabular train DATA -o MODEL.msc")
    return model


def _cmd_evaluate(args):
    model = _load_tabular_model(args.model)
    json_path = None if args.json is None else _check_output_file(args.json, "scores")
    n_features = model.n_features_in_
    data = load_table_for_model(args.data, n_features, model.features_used(), args.format,
                                label_column=args.label_column)
    if args.costs is not None:
        model = with_feature_costs(model, load_feature_costs(args.costs, n_features))
    cost = model.prediction_cost(data.X)
    scores = score_model(model, data)
    used = model.features_used()
    task = "ranking" if data.qid is not None else "classification"
    print(f"{args.model} ({type(model).__name__}) on {args.data}: {data.n_samples} rows, {task}")
    print(f"scores: {_score_text(scores)}")
    print(f"mean prediction cost: {_cost_text(cost)}"
          + (f" (priced with {args.costs})" if args.costs else ""))
    print(f"features used: {used.size} of {n_features}: "
          f"{', '.join(data.feature_names[i] for i in used) or 'none'}")
    if json_path is not None:
        _write_json(json_path, {
            "model": str(args.model), "model_class": type(model).__name__,
            "data": str(args.data), "costs": args.costs, "task": task,
            "n_samples": data.n_samples, "scores": scores,
            "mean_cost": {"total": float(cost.per_sample.mean()),
                          "feature": float(cost.feature.mean()),
                          "evaluation": float(cost.evaluation.mean()), "batch": float(cost.batch)},
            "features_used": [data.feature_names[i] for i in used]})
        say(args, f"wrote {json_path}")
    return 0


# -- sweep -------------------------------------------------------------------------------------

_SWEEP_OPTIONS = ("split_cost", "trees", "leaves", "learning_rate", "min_samples_leaf",
                  "random_state")


def _check_output_folder(folder):
    """Fail before the sweep, not after it, if ``folder`` cannot become an output folder."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise CommandError(f"{folder} is a file; give a folder for sweep.json and sweep.png "
                           "with -o")
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise CommandError(f"cannot create the output folder {folder}: {existing} is a file")
    return folder


def _print_table(sweep):
    metrics = list(sweep.points[0].scores) if sweep.points else [sweep.metric]
    header = ["model", "mu", "mean cost", *metrics, "# features", "train s"]
    rows = [[p.name, f"{p.cost_tradeoff:g}", f"{p.mean_cost:.4g}",
             *(f"{p.scores[m]:.4f}" for m in metrics), str(len(p.features_used)),
             f"{p.train_seconds:.2f}"] for p in sweep.points]
    widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) if c == 0 else cell.rjust(w)
                        for c, (cell, w) in enumerate(zip(row, widths))))


def _cmd_sweep(args):
    output = _check_output_folder(args.output)
    if args.test is None and not 0 < args.test_fraction < 1:
        raise CommandError(f"--test-fraction must be in (0, 1), got {args.test_fraction}: the "
                           "sweep scores every model on held-out rows (or give --test FILE)")
    try:
        tradeoffs = parse_cost_tradeoffs(args.cost_tradeoffs)
    except ValueError as exc:
        raise CommandError(f"--cost-tradeoffs {args.cost_tradeoffs!r}: {exc}") from None
    params = _boosting_params(args, _SWEEP_OPTIONS)
    train, test, costs = load_train_test(
        args.data, args.test, args.costs, args.format, label_column=args.label_column,
        test_fraction=args.test_fraction, random_state=params.get("random_state", 0))
    check_trainable(train)
    n_estimators = params.get("n_estimators",
                              inspect.signature(cost_sweep).parameters["n_estimators"].default)
    say(args, f"sweep: plain GB and CEGB at mu = {', '.join(f'{mu:g}' for mu in tradeoffs)}; "
               f"{train.n_samples} training rows, {test.n_samples} test rows, "
               f"{train.n_features} features")
    with progress((1 + len(tradeoffs)) * n_estimators, "sweep", args.quiet,
                   unit="tree") as bar:
        sweep = cost_sweep(train, test, costs, tradeoffs, callback=training_callback(bar),
                           **params)
    settings = {"data": str(args.data), "test": None if args.test is None else str(args.test),
                "test_fraction": None if args.test else args.test_fraction,
                "costs": args.costs, "format": args.format, "label_column": args.label_column,
                "cost_tradeoffs": tradeoffs, **params,
                "n_train": train.n_samples, "n_test": test.n_samples,
                "n_features": train.n_features}
    make_output_folder(output)
    _write_json(output / "sweep.json", {"settings": settings, **sweep.to_dict()})
    write_png(output / "sweep.png", cost_sweep_figure(
        sweep, f"{Path(args.data).name}: {sweep.task}, {test.n_samples} test rows"))
    if not args.quiet:
        _print_table(sweep)
    say(args, f"wrote {output / 'sweep.json'} and {output / 'sweep.png'}")
    return 0


# -- parser ------------------------------------------------------------------------------------

def _show_help(parser):
    def run(_args):
        parser.print_help()
        return 2
    return run


def add_tabular_commands(commands, quiet):
    """Add ``tabular`` and its sub-commands to the ``msclassify`` sub-parsers ``commands``.

    ``quiet`` is the parent parser holding ``-q/--quiet``.
    """
    tabular = commands.add_parser(
        "tabular", help="CEGB on tabular data with feature costs: train, sweep, evaluate",
        description="Cost-efficient gradient boosting on tabular data (svmlight/LETOR with "
                    "queries, MiniBooNE text, CSV) with per-feature costs.")
    tabular.set_defaults(run=_show_help(tabular))
    sub = tabular.add_subparsers(metavar="SUBCOMMAND")

    model_defaults = CEGBClassifier().get_params()
    train = sub.add_parser(
        "train", parents=[quiet], help="fit a CEGB classifier (optionally cut to a cost budget)",
        description="Fit a CEGBClassifier on a data file. Ranking data (qid) is trained as binary "
                    "relevance (grade > 0). A part of the data (or --validation FILE) is held "
                    "out to report the validation cost and score; with --budget the model keeps "
                    "the most accurate number of iterations whose mean validation cost per "
                    "sample is <= BUDGET (CEGBClassifier.with_budget).")
    train.add_argument("data", metavar="DATA", help="training data file")
    train.add_argument("-o", "--output", required=True, help="model file to write (*.msc)")
    _add_data_options(train)
    train.add_argument("--cost-tradeoff", type=float, default=model_defaults["cost_tradeoff"],
                       metavar="MU", help="mu: prediction cost traded for loss; 0 = plain "
                                          "gradient boosting (default: %(default)s)")
    train.add_argument("--growth", choices=("best_first", "breadth_first"),
                       default=model_defaults["growth"],
                       help="tree growth order (default: %(default)s)")
    _add_boosting_options(train, model_defaults, _TRAIN_OPTIONS)
    held_out = train.add_mutually_exclusive_group()
    held_out.add_argument("--validation", metavar="FILE", help="validation data file")
    held_out.add_argument("--validation-fraction", type=float, default=0.2, metavar="F",
                          help="fraction of DATA held out for validation (whole queries for "
                               "ranking data); 0 trains on everything (default: %(default)s)")
    train.add_argument("--budget", type=float, metavar="B",
                       help="mean prediction cost per validation sample allowed")
    train.set_defaults(run=_cmd_train, command="tabular train")

    evaluate = sub.add_parser(
        "evaluate", parents=[quiet], help="score a tabular model and its prediction cost",
        description="Accuracy and ROC AUC (or precision@5 and NDCG@5 for ranking data with "
                    "queries) and the mean prediction cost per sample of a saved tabular model.")
    evaluate.add_argument("model", metavar="MODEL", help="model file from msclassify tabular train")
    evaluate.add_argument("data", metavar="DATA", help="data file to score on")
    _add_data_options(evaluate, costs_help="feature-cost file: price the prediction cost with "
                                           "these costs instead of the model's own")
    evaluate.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    evaluate.set_defaults(run=_cmd_evaluate, command="tabular evaluate")

    sweep_defaults = {name: parameter.default
                      for name, parameter in inspect.signature(cost_sweep).parameters.items()}
    sweep = sub.add_parser(
        "sweep", parents=[quiet], help="plain GB and CEGB over several mu: cost vs accuracy",
        description="Train plain gradient boosting and CEGB for each cost tradeoff mu, score "
                    "each on test data by mean prediction cost and accuracy (precision@5 / "
                    "NDCG@5 for ranking data); write OUTDIR/sweep.json and OUTDIR/sweep.png.")
    sweep.add_argument("data", metavar="DATA", help="training data file")
    sweep.add_argument("-o", "--output", required=True, metavar="OUTDIR",
                       help="folder for sweep.json and sweep.png")
    _add_data_options(sweep)
    test = sweep.add_mutually_exclusive_group()
    test.add_argument("--test", metavar="FILE", help="test data file")
    test.add_argument("--test-fraction", type=float, default=0.3, metavar="F",
                      help="fraction of DATA held out as test data (whole queries for ranking "
                           "data) when no --test is given (default: %(default)s)")
    sweep.add_argument("--cost-tradeoffs", default=",".join(f"{mu:g}" for mu in
                                                            DEFAULT_COST_TRADEOFFS),
                       metavar="MU,MU,...", help="CEGB tradeoffs mu > 0; plain GB (mu = 0) is "
                                                 "always trained (default: %(default)s)")
    _add_boosting_options(sweep, sweep_defaults, _SWEEP_OPTIONS)
    sweep.set_defaults(run=_cmd_sweep, command="tabular sweep")
    return tabular
