"""``msclassify train``: a pixel classifier from labelled frames (the PixelClassifier options)."""

import argparse
import time
from pathlib import Path

import numpy as np

from ..io import read_training_frames
from ..modelfile import check_model_path
from ..pixel import PixelClassifier
from ._common import positive_int, progress, say, tradeoff_lines, training_progress
from ._large import (DEFAULT_CHUNK, DEFAULT_VOLUME_CHUNK, is_large_image,
                     large_training_frames)
from ._volumes import (add_volume_options, train_summary, train_volume_windows, train_volumes,
                       uses_volumes)


def cost_tradeoff_value(text):
    """``--cost-tradeoff``: ``auto`` or a number."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a number, got {text!r}") from None


# PixelClassifier parameters exposed as options: name -> (type, choices, help).
_MODEL_OPTIONS = {
    "cost_tradeoff": (cost_tradeoff_value, None,
                      "how much prediction cost to trade for accuracy (mu, per labelled pixel "
                      "and operation per image pixel); 0 = plain gradient boosting; auto = the "
                      "cheapest model whose accuracy on held-out scribbles is within "
                      "--tolerance of the best"),
    "tolerance": (float, None, "with --cost-tradeoff auto: held-out balanced accuracy a "
                               "cheaper model may lose"),
    "split_cost": (float, None, "cost of one tree-node evaluation, in operations (alpha)"),
    "n_estimators": (int, None, "boosting iterations (trees per class)"),
    "learning_rate": (float, None, "shrinkage of every tree"),
    "max_leaves": (int, None, "leaves per tree"),
    "max_depth": (int, None, "depth limit of every tree"),
    "min_samples_leaf": (int, None, "labelled pixels a leaf needs at least"),
    "min_hessian_leaf": (float, None, "hessian sum a leaf needs at least"),
    "l2_regularization": (float, None, "L2 penalty on leaf values"),
    "max_bins": (int, None, "histogram bins per feature (at most 255)"),
    "subsample": (float, None, "fraction of the labelled pixels drawn for each tree"),
    "colsample": (float, None, "fraction of the features drawn for each tree; none: all with "
                               "two classes, half with more"),
    "random_state": (int, None, "seed, for reproducible models"),
    "share_mode": (str, ("path", "feature"), "how coarse features discount evaluations"),
    "growth": (str, ("best_first", "breadth_first"), "tree growth order"),
    "hessian": (str, ("exact", "unit"), "second-order or first-order (GreedyMiser) boosting"),
    "feature_cost_mode": (str, ("lazy", "coupled"), "per-sample feature cost accounting"),
    "evaluation_cost_mode": (str, ("leaf", "tree"), "evaluation cost accounting"),
    "n_cost_samples": (int, None, "pixels drawn from the frames to represent a whole image in "
                                  "the cost terms"),
    "distill_weight": (float, None, "weight of the pixels labelled by the full-resolution "
                                    "teacher, relative to the labelled pixels; 0 = no "
                                    "distillation"),
    "n_distill_pixels": (int, None, "teacher-labelled pixels drawn per frame, mostly near the "
                                    "teacher's outlines"),
    "class_weight": (str, ("auto", "balanced", "sqrt", "none"),
                     ("auto = the classes scribbled less than the distillation teacher finds "
                      "them in the frames weigh as much as the others; balanced = every class "
                      "weighs the same in the loss however much of it was scribbled; sqrt = "
                      "the square root of how much; none = every labelled pixel weighs 1")),
    "n_unlabelled": (int, None, "with --semi-supervised: unlabelled pixels drawn in total"),
    "n_neighbors": (int, None, "with --semi-supervised: neighbours per pixel in the graph"),
    "laplacian_regularization": (float, None, "with --semi-supervised: graph smoothness weight "
                                              "in the scribbles' gradients"),
}
# PixelClassifier switches exposed as flags: name -> help.
_MODEL_FLAGS = {
    "semi_supervised": "also learn from unlabelled pixels of the scribbled frames (GRBB); helps "
                       "with sparse strokes, not with a few scattered clicks",
}


def add_train_command(commands, quiet):
    """Add ``train`` to the ``msclassify`` sub-parsers ``commands``."""
    train = commands.add_parser(
        "train", parents=[quiet], help="train a pixel classifier from labelled frames",
        description="Train a pixel classifier on labelled (scribbled) frames. Label images: 0 = "
                    "unlabelled, 1, 2, ... = classes. Each IMAGES input pairs with the LABELS "
                    "input at the same position, frame by frame when both hold as many frames, "
                    "else by name (label file frame_000123.tif labels frame 123 of a video).")
    train.add_argument("images", nargs="+", metavar="IMAGES",
                       help="video, TIFF stack, image, folder or quoted glob of frames")
    train.add_argument("--labels", nargs="+", required=True, metavar="LABELS",
                       help="label images for each IMAGES input, in the same order")
    train.add_argument("-o", "--output", required=True, help="model file to write (*.msc)")
    train.add_argument("--chunks", type=positive_int, metavar="PIXELS",
                       help="one large image (OME-Zarr, zarr, file.h5:/dataset or TIFF; zarr and "
                            "HDF5 always take this path) scribbled in places: read it only "
                            "around the scribbles, chunk by chunk (PIXELS a side, default "
                            f"{DEFAULT_CHUNK}); with --axes one volume, read around its "
                            f"scribbled voxels (default {DEFAULT_VOLUME_CHUNK} a side)")
    colour = train.add_mutually_exclusive_group()
    colour.add_argument("--gray", dest="as_gray", action="store_const", const=True,
                        default="auto",
                        help="train on the grey (luma) of colour frames (default: only when "
                             "the frames are grey footage stored as colour, R = G = B)")
    colour.add_argument("--color", dest="as_gray", action="store_const", const=False,
                        help="train on the colour channels as stored, even of grey footage "
                             "stored as colour")
    _add_model_options(train)
    add_volume_options(train)
    train.set_defaults(run=_cmd_train)


def _add_model_options(parser):
    defaults = PixelClassifier().get_params()
    group = parser.add_argument_group("model (the PixelClassifier parameters of the same names)")
    group.add_argument("--features", default=defaults["features"],
                       help="candidate features: a preset (fast, default, fine, pyramid, rich) or a "
                            "comma-separated list of feature ids (default: %(default)s)")
    for name, (kind, choices, text) in _MODEL_OPTIONS.items():
        default = "none" if defaults[name] is None else defaults[name]
        metavar = None if choices else {int: "N", float: "X"}.get(kind, "auto|X")
        # SUPPRESS: options not given stay out of the namespace, so PixelClassifier's
        # own defaults apply (one source of truth)
        group.add_argument("--" + name.replace("_", "-"), type=kind, choices=choices,
                           metavar=metavar, default=argparse.SUPPRESS,
                           help=f"{text} (default: {default})")
    for name, text in _MODEL_FLAGS.items():
        group.add_argument("--" + name.replace("_", "-"), action="store_true",
                           default=argparse.SUPPRESS, help=f"{text} (default: off)")


def _cmd_train(args):
    output = Path(args.output)
    check_model_path(output)  # before training, not after it
    params = {name: getattr(args, name) for name in (*_MODEL_OPTIONS, *_MODEL_FLAGS)
              if hasattr(args, name)}
    if params.get("class_weight") == "none":
        params["class_weight"] = None
    features = args.features.split(",") if "," in args.features or ":" in args.features \
        else args.features
    if uses_volumes(args, args.images):
        def make(spacing):
            return PixelClassifier(features=features, spacing=spacing, **params)
        if args.chunks is not None or any(is_large_image(path) for path in args.images):
            clf, frames, labels = train_volume_windows(args, features, make,
                                                       args.chunks or DEFAULT_VOLUME_CHUNK)
        else:
            clf, frames, labels = train_volumes(args, make)
        say(args, train_summary(args, clf, frames))
        unit = "slice(s)" if clf.spacing is None else "volume(s)"
    else:
        if args.chunks is not None or any(is_large_image(path) for path in args.images):
            frames, labels = large_training_frames(args, features)
        else:
            frames, labels = read_training_frames(args.images, args.labels,
                                                  as_gray=args.as_gray)
        clf = PixelClassifier(features=features, **params)
        unit = "frame(s)"
    classes, counts = np.unique(np.concatenate([lab[lab > 0] for lab in labels]),
                                return_counts=True)
    channels = "grey" if frames[0].ndim == labels[0].ndim else f"{frames[0].shape[-1]} channels"
    say(args, f"training on {len(frames)} labelled {unit} ({channels}): "
               + ", ".join(f"class {c}: {n} px" for c, n in zip(classes, counts)))
    fit_start = time.perf_counter()
    with progress(100, "training", args.quiet, unit="%") as bar:
        clf.fit(frames, labels, progress=training_progress(bar))
    clf.save(output)
    for line in tradeoff_lines(clf):
        say(args, line)
    say(args, f"trained in {time.perf_counter() - fit_start:.1f} s: {clf.booster_.n_trees} trees, "
               f"{len(clf.features_used_)} of {len(clf.bank_)} features used; saved {output}")
    return 0
