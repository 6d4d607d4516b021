"""``msclassify info``: classes, features, costs and trees of a saved model."""

import numpy as np

from ..io import open_frames
from ..models import load_model
from ..pixel import PixelClassifier
from ._common import tradeoff_lines


def add_info_command(commands, quiet):
    """Add ``info`` to the ``msclassify`` sub-parsers ``commands``."""
    info = commands.add_parser("info", help="classes, features, costs and trees of a model")
    info.add_argument("model", help="model file (*.msc)")
    info.add_argument("--image", help="also report the prediction cost on the first frame of "
                                      "this video, stack or image")
    info.set_defaults(run=_cmd_info, quiet=False)


def _structure(model):
    """One line on the model's trees: boosted trees, a BudgetRF forest or a CSTC tree."""
    booster = getattr(model, "booster_", None)
    if hasattr(model, "trees_"):  # BudgetRF
        nodes = sum(tree["feature"].size for tree in model.trees_)
        splits = sum(int(np.count_nonzero(tree["feature"] >= 0)) for tree in model.trees_)
        return (f"{len(model.trees_)} trees (BudgetRF forest), {splits} splits, "
                f"{nodes - splits} leaves")
    if hasattr(model, "children_"):  # CSTC
        feature_map = ("the raw features (identity map)" if booster is None else
                       f"{booster.n_trees} regression trees")
        return f"{model.n_nodes_} classifier nodes (CSTC tree) on {feature_map}"
    trees = booster.tree_statistics()
    return (f"{booster.n_trees} ({booster.n_iterations} iterations x {booster.n_outputs} "
            f"output(s)), {trees['n_splits']} splits, {trees['n_leaves']} leaves, depth <= "
            f"{trees['max_depth']}")


def _cmd_info(args):
    model = load_model(args.model)
    params = model.get_params()
    print(f"model:      {args.model} ({type(model).__name__})")
    if hasattr(model, "classes_"):
        print(f"classes:    {', '.join(str(c) for c in np.asarray(model.classes_).tolist())}")
    print(f"trees:      {_structure(model)}")
    print("parameters: " + ", ".join(f"{name}={params[name]}" for name in
                                     ("cost_tradeoff", "split_cost", "n_estimators", "max_leaves",
                                      "learning_rate", "budget", "max_depth") if name in params))
    if not isinstance(model, PixelClassifier):
        used = np.asarray(model.features_used())
        print(f"features:   {used.size} of {model.n_features_in_} used: "
              f"{', '.join(str(i) for i in used)}")
        return 0
    used = model.booster_.features_used()
    bank = model.bank_
    for line in tradeoff_lines(model):
        print(line)
    print(f"images:     {model.n_channels_} channel(s); features preset/list: "
          f"{params['features'] if isinstance(params['features'], str) else 'custom'}")
    units = model.intensity_
    print("intensity:  " + ("normalised by each frame's dtype (saved before intensities were "
                            "recorded)" if units is None else
                            f"trained on {units.dtype.name} frames with values "
                            f"{units.low:g}..{units.high:g}"))
    print(f"features:   {used.size} of {len(bank)} candidates used; modelled whole-image cost "
          f"{model.feature_cost_per_pixel_:.2f} operations per pixel")
    for index in used:
        spec = bank.specs[index]
        print(f"  {spec.id:<28} share {spec.share:>2}  cost {spec.batch_cost:6.3f}  {spec.name}")
    if args.image is not None:
        with open_frames(args.image, as_gray=model.n_channels_ == 1) as frames:
            frame = frames.read(0)
        cost = model.prediction_cost(frame)
        pixels = frame.shape[0] * frame.shape[1]
        print(f"cost on {args.image} (first frame, {frame.shape[1]}x{frame.shape[0]}): "
              f"{cost.evaluation / pixels:.3f} evaluation + {cost.features / pixels:.3f} feature "
              f"= {cost.total / pixels:.3f} operations per pixel; "
              f"{cost.n_node_evaluations / pixels:.3f} node evaluations per pixel")
    return 0
