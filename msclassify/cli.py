"""The ``msclassify`` command: demo, train, predict, evaluate, info, and ``tabular``.

Every sub-command mirrors the Python API (``--cost-tradeoff`` is
``PixelClassifier(cost_tradeoff=...)``). Failures caused by the input (a
missing or corrupt file, a model for other images, an unwritable or full
output folder) print one line naming the file and the fix and exit with
status 1; ``--traceback`` shows the Python traceback instead. Ctrl-C exits
with status 130. ``msclassify predict`` writes every frame atomically and a
re-run of the same command resumes after the frames already written.

Examples
--------
::

    msclassify demo
    msclassify train frames.tif --labels scribbles.tif -o flies.msc --cost-tradeoff 2e-4
    msclassify predict flies.msc video.mp4 -o labels/ --workers 2
    msclassify evaluate labels/ masks.tif
    msclassify info flies.msc
    msclassify tabular sweep data.train --test data.test --costs costs.txt -o sweep/
"""

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np

from .modelfile import ModelFileError
from .io import FrameReadError, FrameWriteError

__all__ = ["main"]

_PROG = "msclassify"
_EXIT_ERROR = 1
_EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
_FLY = 2  # class value of "fly" in the sample data's scribbles (1 = background)

# PixelClassifier parameters exposed as options: name -> (type, choices, help).
_MODEL_OPTIONS = {
    "cost_tradeoff": (float, None, "how much prediction cost to trade for accuracy (mu, per "
                                   "labelled pixel and operation per image pixel); 0 = plain "
                                   "gradient boosting"),
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
    "colsample": (float, None, "fraction of the features drawn for each tree"),
    "random_state": (int, None, "seed, for reproducible models"),
    "share_mode": (str, ("path", "feature"), "how coarse features discount evaluations"),
    "growth": (str, ("best_first", "breadth_first"), "tree growth order"),
    "hessian": (str, ("exact", "unit"), "second-order or first-order (GreedyMiser) boosting"),
    "feature_cost_mode": (str, ("lazy", "coupled"), "per-sample feature cost accounting"),
    "evaluation_cost_mode": (str, ("leaf", "tree"), "evaluation cost accounting"),
    "n_cost_samples": (int, None, "pixels drawn from the frames to represent a whole image in "
                                  "the cost terms"),
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


class CommandError(ValueError):
    """A command cannot run as asked; the message says what to change."""


# -- helpers -----------------------------------------------------------------------------------

def _progress(total, description, quiet, initial=0, unit="frame"):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc=description, unit=unit, disable=quiet,
                file=sys.stderr, dynamic_ncols=True, smoothing=0.1)


def _training_callback(bar):
    """``callback(iteration, n)`` for `PixelClassifier.fit` that advances ``bar``.

    It returns None: a truthy value would stop training (``tqdm.update`` returns True).
    """
    def callback(iteration, n_iterations):
        bar.update(iteration - bar.n)
    return callback


def _say(args, message):
    if not args.quiet:
        print(message, flush=True)


def _load_pixel_model(path):
    from . import load_model
    from .pixel import PixelClassifier

    model = load_model(path)
    if not isinstance(model, PixelClassifier):
        raise CommandError(f"{path} holds a {type(model).__name__}, not a pixel classifier; train "
                           "one for images with: msclassify train IMAGES --labels LABELS -o "
                           "MODEL.msc")
    return model


def _frame_channels(shape):
    return 1 if len(shape) == 2 else shape[2]


def _parse_frames(text, n_frames, source):
    """Positions selected by ``--frames START:STOP[:STEP]`` (Python slice rules) or ``INDEX``."""
    if text is None:
        return range(n_frames)
    try:
        parts = [int(part) if part.strip() else None for part in text.split(":")]
    except ValueError:
        parts = []
    if not 1 <= len(parts) <= 3 or (len(parts) == 1 and parts[0] is None):
        raise CommandError(f"--frames {text!r} is not START:STOP[:STEP] or INDEX; e.g. --frames "
                           "0:300 for the first 300 frames")
    if len(parts) == 1:
        selection = range(n_frames)[parts[0]:parts[0] + 1 if parts[0] != -1 else None]
    else:
        if len(parts) == 3 and parts[2] is not None and parts[2] < 1:
            raise CommandError(f"--frames {text!r}: STEP must be a positive integer")
        selection = range(n_frames)[slice(*parts)]
    if len(selection) == 0:
        raise CommandError(f"--frames {text} selects no frame of {source}, which has {n_frames} "
                           f"frames (0..{n_frames - 1})")
    return selection


# -- demo --------------------------------------------------------------------------------------

def _cmd_demo(args):
    from .datasets import load_sample_flies
    from .metrics import label_instances, seg_score
    from .pixel import PixelClassifier

    start = time.perf_counter()
    out = Path(args.output)
    _make_output_folder(out)
    frames, masks, scribbles = load_sample_flies()
    scribbled = [t for t in range(len(frames)) if scribbles[t].any()]
    held_out = [t for t in range(len(frames)) if t not in scribbled]
    height, width = frames.shape[1:]
    _say(args, f"sample data: {len(frames)} synthetic fly-arena frames of {width}x{height}; "
               f"scribbles on frame(s) {_list(scribbled)}")
    counts = {value: int(np.count_nonzero(scribbles[scribbled] == value)) for value in (1, _FLY)}
    _say(args, f"training on {counts[1]} background and {counts[_FLY]} fly pixels "
               "(a first run also compiles Numba kernels) ...")
    clf = PixelClassifier(random_state=0)
    fit_start = time.perf_counter()
    with _progress(clf.n_estimators, "training", args.quiet, unit="tree") as bar:
        clf.fit([frames[t] for t in scribbled], [scribbles[t] for t in scribbled],
                callback=_training_callback(bar))
    _say(args, f"trained in {time.perf_counter() - fit_start:.1f} s: {clf.booster_.n_trees} "
               f"trees using {len(clf.features_used_)} of {len(clf.bank_)} candidate features "
               f"({', '.join(clf.features_used_)})")

    clf.predict(frames[held_out[0]])  # compiles the prediction kernels outside the timing
    tic = time.perf_counter()
    predictions = np.stack([clf.predict(frames[t]) for t in held_out])
    elapsed = time.perf_counter() - tic
    _say(args, f"predicted frames {_list(held_out)}: {len(held_out) / elapsed:.1f} frames/s "
               f"({elapsed / len(held_out) * 1000:.0f} ms per {width}x{height} frame)")

    result = seg_score(masks[held_out], label_instances(predictions, foreground=_FLY),
                       per_frame=True)
    per_frame = " ".join(f"{score:.3f}" for score in result.per_frame)
    _say(args, f"SEG vs the exact masks: {result.score:.3f} over {int(result.n_objects.sum())} "
               f"flies (per frame: {per_frame})")

    shown = held_out[0]
    cost = clf.prediction_cost(frames[shown])
    pixels = height * width
    _say(args, f"evaluation cost: {cost.evaluation / pixels:.2f} operations per pixel for the "
               f"trees ({cost.n_node_evaluations / pixels:.2f} node evaluations per pixel, "
               f"{clf.booster_.n_trees} trees) + {cost.features / pixels:.2f} for the features "
               f"= {cost.total / pixels:.2f}")

    model_path = out / "model.msc"
    clf.save(model_path)
    overlay_path, cost_path = out / "overlay.png", out / "cost_map.png"
    _write_overlay(overlay_path, frames[shown], predictions[0] == _FLY, masks[shown] > 0)
    _write_cost_map(cost_path, clf.cost_map(frames[shown]), shown)
    _say(args, f"wrote {overlay_path} (frame {shown}: green = fly found, red = background "
               "called fly, blue = fly missed)")
    _say(args, f"wrote {cost_path} (evaluation operations per pixel, frame {shown})")
    _say(args, f"wrote {model_path}; try: msclassify info {model_path}")
    _say(args, f"done in {time.perf_counter() - start:.1f} s")
    return 0


def _list(indices):
    return ", ".join(str(t) for t in indices)


def _make_output_folder(folder):
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"cannot create output folder {folder} ({exc.strerror or exc}); "
                           "choose a writable folder with -o") from None


def _write_png(path, write):
    from .io import write_atomically

    try:
        write_atomically(path, write)
    except OSError as exc:
        raise FrameWriteError(f"cannot write {path} ({exc.strerror or exc}); choose a writable "
                              "output folder with -o", errno=exc.errno,
                              filename=str(path)) from None


def _write_overlay(path, frame, predicted, truth):
    """Frame in grey with agreement colours: green hit, red false fly, blue missed fly."""
    import imageio.v3 as iio

    grey = frame.astype(np.float32)
    grey = (grey - grey.min()) / max(float(np.ptp(grey)), 1e-6)
    image = np.repeat(grey[:, :, None], 3, axis=2)
    for where, colour in ((predicted & truth, (0.1, 0.9, 0.2)), (predicted & ~truth, (1, 0.1, 0.1)),
                          (~predicted & truth, (0.2, 0.4, 1))):
        image[where] = 0.45 * image[where] + 0.55 * np.asarray(colour)
    rgb = (image * 255 + 0.5).astype(np.uint8)
    _write_png(path, lambda file: iio.imwrite(file, rgb, extension=".png"))


def _write_cost_map(path, cost_map, frame_index):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 6), dpi=110)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    shown = axes.imshow(cost_map, cmap="magma", interpolation="nearest")
    axes.set_title(f"evaluation cost, frame {frame_index}\n(mean {cost_map.mean():.2f} "
                   "operations per pixel)")
    axes.set_axis_off()
    figure.colorbar(shown, ax=axes, label="operations per pixel")
    _write_png(path, lambda file: figure.savefig(file, format="png", bbox_inches="tight"))


# -- train -------------------------------------------------------------------------------------


def _match_frames(frames, others):
    """Index into ``frames`` of each frame of ``others``: by position when the counts match,
    else by frame name. Returns ``(indices, None)``, or ``(None, name)`` for the first frame of
    ``others`` whose name is not among ``frames``."""
    if len(others) == len(frames):
        return list(range(len(frames))), None
    by_name = {frames.name(i): i for i in range(len(frames))}
    for name in others.names():
        if name not in by_name:
            return None, name
    return [by_name[name] for name in others.names()], None

def _training_frames(image_paths, label_paths, gray):
    """(frames, label images) of every labelled frame; labels pair with frames by index or name."""
    from .io import open_frames, read_label_stack

    if len(image_paths) != len(label_paths):
        raise CommandError(f"got {len(image_paths)} image input(s) but {len(label_paths)} label "
                           "input(s); give one --labels entry per image input, in the same order")
    frames, labels = [], []
    for image_path, label_path in zip(image_paths, label_paths):
        with open_frames(image_path, as_gray=gray) as images, \
                read_label_stack(label_path) as label_source:
            position, missing = _match_frames(images, label_source)
            if missing is not None:
                raise CommandError(
                    f"{label_path} has {len(label_source)} label frame(s) but {image_path} "
                    f"has {len(images)} frame(s), and label frame {missing!r} names no "
                    f"frame of it; give one label image per frame, or name the label files "
                    f"after the frames (e.g. {images.name(0)}.tif)")
            for index in range(len(label_source)):
                label_image = label_source.read(index)
                if not label_image.any():
                    continue
                frame = images.read(position[index])
                if frame.shape[:2] != label_image.shape:
                    raise CommandError(
                        f"label frame {label_source.name(index)} of {label_path} is "
                        f"{label_image.shape[1]}x{label_image.shape[0]} but frame "
                        f"{images.name(position[index])} of {image_path} is "
                        f"{frame.shape[1]}x{frame.shape[0]}; labels must match their frames")
                frames.append(frame)
                labels.append(label_image)
    if not frames:
        raise CommandError(f"the label images {', '.join(map(str, label_paths))} hold no labelled "
                           "pixel; label at least two classes (0 = unlabelled, 1, 2, ... = "
                           "classes)")
    return frames, labels


def _cmd_train(args):
    from .pixel import PixelClassifier

    output = Path(args.output)
    if not output.parent.is_dir():
        raise CommandError(f"cannot save the model to {output}: folder {output.parent} does not "
                           "exist; create it or choose another path with -o")
    frames, labels = _training_frames(args.images, args.labels, args.gray)
    params = {name: getattr(args, name) for name in (*_MODEL_OPTIONS, *_MODEL_FLAGS)
              if hasattr(args, name)}
    features = args.features.split(",") if "," in args.features or ":" in args.features \
        else args.features
    clf = PixelClassifier(features=features, **params)
    classes, counts = np.unique(np.concatenate([lab[lab > 0] for lab in labels]),
                                return_counts=True)
    _say(args, f"training on {len(frames)} labelled frame(s): "
               + ", ".join(f"class {c}: {n} px" for c, n in zip(classes, counts)))
    fit_start = time.perf_counter()
    with _progress(clf.n_estimators, "training", args.quiet, unit="tree") as bar:
        clf.fit(frames, labels, callback=_training_callback(bar))
    clf.save(output)
    _say(args, f"trained in {time.perf_counter() - fit_start:.1f} s: {clf.booster_.n_trees} trees, "
               f"{len(clf.features_used_)} of {len(clf.bank_)} features used; saved {output}")
    return 0


# -- predict -----------------------------------------------------------------------------------

def _cmd_predict(args):
    from .pixel import batch
    from .io import open_frames, open_writer

    model = _load_pixel_model(args.model)
    with open_frames(args.input, as_gray=model.n_channels_ == 1) as source:
        channels = _frame_channels(source.shape)
        if channels != model.n_channels_:
            raise CommandError(
                f"{args.model} was trained on {model.n_channels_}-channel images but {args.input} "
                f"has {channels}-channel frames; predict frames like the training frames, or "
                "train a model on these with msclassify train")
        selection = _parse_frames(args.frames, len(source), args.input)
        classes = np.asarray(model.classes_)
        writer = open_writer(args.output, len(selection), source.shape[:2],
                             dtype=batch.label_dtype(classes),
                             names=[source.name(i) for i in selection],
                             n_classes=classes.size if args.probabilities else None,
                             format=args.format)
        with writer:
            done = set(writer.completed())
            todo = [position for position in range(len(selection)) if position not in done]
            if not todo:
                _say(args, f"all {len(selection)} frames are already in {args.output}; nothing "
                           "to do")
                return 0
            if done:
                _say(args, f"resuming: {len(done)} of {len(selection)} frames are already in "
                           f"{args.output}")
            return _run_prediction(args, model, source, writer, selection, todo)


def _run_prediction(args, model, source, writer, selection, todo):
    from .pixel import batch

    model_bytes, cluster = None, contextlib.nullcontext()
    if args.workers is not None or args.scheduler is not None:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise CommandError("--workers and --scheduler need Dask: pip install "
                               "'dask[distributed]'") from None
        model_bytes = Path(args.model).read_bytes()
        cluster = (batch.local_cluster(args.workers) if args.workers is not None
                   else batch.connect(args.scheduler))
    written = 0

    def on_frame(position):
        nonlocal written
        written += 1
        bar.update(1)

    start = time.perf_counter()
    with _progress(len(selection), "predicting", args.quiet,
                   initial=len(selection) - len(todo)) as bar:
        try:
            with cluster as client:
                batch.predict_to_writer(model, source, writer, todo, frame_index=selection,
                                         probabilities=args.probabilities, client=client,
                                         model_bytes=model_bytes, chunk_size=args.chunk_size,
                                         on_frame=on_frame)
        except KeyboardInterrupt:
            bar.close()
            done = len(selection) - len(todo) + written
            print(f"{_PROG} predict: interrupted; {done} of {len(selection)} frames are complete "
                  f"in {args.output}. Run the same command again to resume.", file=sys.stderr)
            return _EXIT_INTERRUPTED
        except (FrameReadError, batch.BatchError) as exc:
            done = len(selection) - len(todo) + written
            error = FrameReadError if isinstance(exc, FrameReadError) else CommandError
            resume = (f"; the {done} frames written to {args.output} stay valid and a re-run "
                      "resumes after them") if done else ""
            raise error(f"{exc}{resume}") from None
    elapsed = time.perf_counter() - start
    _say(args, f"wrote {written} frames to {args.output} in {elapsed:.1f} s "
               f"({written / elapsed:.2f} frames/s)")
    return 0


# -- evaluate ----------------------------------------------------------------------------------

class _LazyFrames:
    """A (T, H, W) stack that reads frame ``t`` only when indexed (for `seg_score`)."""

    ndim = 3

    def __init__(self, n_frames, read):
        self.shape = (n_frames,)
        self._read = read

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, t):
        return self._read(t)


def _cmd_evaluate(args):
    from .io import read_label_stack
    from .metrics import label_instances, seg_score

    with read_label_stack(args.prediction) as prediction, \
            read_label_stack(args.reference) as reference:
        reference_index, missing = _match_frames(reference, prediction)
        if missing is not None:
            raise CommandError(
                f"{args.prediction} has {len(prediction)} frames and {args.reference} "
                f"{len(reference)}, and prediction frame {missing!r} names no reference "
                "frame; evaluate predictions of the same frames as the reference")
        if prediction.shape != reference.shape:
            raise CommandError(f"{args.prediction} has {prediction.shape} frames but "
                               f"{args.reference} has {reference.shape} frames; they must match")
        foreground = args.foreground
        if not args.instances and foreground is None:
            values, counts = np.unique(prediction.read(0), return_counts=True)
            background = values[np.argmax(counts)]
            foreground = [int(v) for v in values if v != background and v != 0]
            _say(args, f"objects: classes {foreground or 'none'} of {args.prediction} (class "
                       f"{background}, the most frequent, is background; choose with "
                       "--foreground or pass --instances for instance labels)")

        def predicted_instances(t):
            labels = prediction.read(t)
            return labels if args.instances else label_instances(labels, foreground=foreground)

        result = seg_score(_LazyFrames(len(reference_index),
                                       lambda t: reference.read(reference_index[t])),
                           _LazyFrames(len(prediction), predicted_instances), per_frame=True)
        if not args.quiet:
            width = max(len(name) for name in prediction.names())
            print(f"{'frame':<{width}}  objects  SEG")
            for t, (score, n_objects) in enumerate(zip(result.per_frame, result.n_objects)):
                print(f"{prediction.name(t):<{width}}  {n_objects:7d}  {score:.4f}")
        print(f"SEG {result.score:.4f} over {int(result.n_objects.sum())} objects in "
              f"{len(prediction)} frames")
    return 0


# -- info --------------------------------------------------------------------------------------

def _tree_stats(trees):
    """(leaves, split nodes, maximum depth) summed / maximised over the trees."""
    leaves = splits = depth = 0
    for tree in trees:
        feature, left, right = tree["feature"], tree["left"], tree["right"]
        node_depth = np.zeros(len(feature), dtype=np.int64)
        for node in range(len(feature)):  # children are created after their parent
            if feature[node] >= 0:
                node_depth[left[node]] = node_depth[right[node]] = node_depth[node] + 1
        leaves += int(np.count_nonzero(feature < 0))
        splits += int(np.count_nonzero(feature >= 0))
        depth = max(depth, int(node_depth.max(initial=0)))
    return leaves, splits, depth


def _cmd_info(args):
    from . import load_model
    from .pixel import PixelClassifier

    model = load_model(args.model)
    booster = model.booster_
    leaves, splits, depth = _tree_stats(booster.trees)
    params = model.get_params()
    print(f"model:      {args.model} ({type(model).__name__})")
    if hasattr(model, "classes_"):
        print(f"classes:    {', '.join(str(c) for c in np.asarray(model.classes_).tolist())}")
    print(f"trees:      {booster.n_trees} ({booster.n_iterations} iterations x "
          f"{booster.n_outputs} output(s)), {splits} splits, {leaves} leaves, depth <= {depth}")
    print("parameters: " + ", ".join(f"{name}={params[name]}" for name in
                                     ("cost_tradeoff", "split_cost", "n_estimators", "max_leaves",
                                      "learning_rate") if name in params))
    used = booster.features_used()
    if not isinstance(model, PixelClassifier):
        print(f"features:   {used.size} of {booster.n_features} used: "
              f"{', '.join(str(i) for i in used)}")
        return 0
    bank = model.bank_
    print(f"images:     {model.n_channels_} channel(s); features preset/list: "
          f"{params['features'] if isinstance(params['features'], str) else 'custom'}")
    print(f"features:   {used.size} of {len(bank)} candidates used; modelled whole-image cost "
          f"{bank.batch_costs()[used].sum():.2f} operations per pixel")
    for index in used:
        spec = bank.specs[index]
        print(f"  {spec.id:<28} share {spec.share:>2}  cost {spec.batch_cost:6.3f}  {spec.name}")
    if args.image is not None:
        from .io import open_frames

        with open_frames(args.image, as_gray=model.n_channels_ == 1) as frames:
            frame = frames.read(0)
        cost = model.prediction_cost(frame)
        pixels = frame.shape[0] * frame.shape[1]
        print(f"cost on {args.image} (first frame, {frame.shape[1]}x{frame.shape[0]}): "
              f"{cost.evaluation / pixels:.3f} evaluation + {cost.features / pixels:.3f} feature "
              f"= {cost.total / pixels:.3f} operations per pixel; "
              f"{cost.n_node_evaluations / pixels:.3f} node evaluations per pixel")
    return 0


# -- argument parsing --------------------------------------------------------------------------

def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _add_model_options(parser):
    from .pixel import PixelClassifier

    defaults = PixelClassifier().get_params()
    group = parser.add_argument_group("model (the PixelClassifier parameters of the same names)")
    group.add_argument("--features", default=defaults["features"],
                       help="candidate features: a preset (fast, default, rich) or a "
                            "comma-separated list of feature ids (default: %(default)s)")
    for name, (kind, choices, text) in _MODEL_OPTIONS.items():
        default = "none" if defaults[name] is None else defaults[name]
        metavar = None if choices else {int: "N", float: "X"}[kind]
        # SUPPRESS: options not given stay out of the namespace, so PixelClassifier's
        # own defaults apply (one source of truth)
        group.add_argument("--" + name.replace("_", "-"), type=kind, choices=choices,
                           metavar=metavar, default=argparse.SUPPRESS,
                           help=f"{text} (default: {default})")
    for name, text in _MODEL_FLAGS.items():
        group.add_argument("--" + name.replace("_", "-"), action="store_true",
                           default=argparse.SUPPRESS, help=f"{text} (default: off)")


def build_parser():
    """The argparse parser of the ``msclassify`` command."""
    parser = argparse.ArgumentParser(
        prog=_PROG, description="Pixel classifiers that are accurate and cheap to run "
                                "(cost-efficient gradient boosting).")
    parser.add_argument("--traceback", action="store_true",
                        help="show the Python traceback of an error instead of one line")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument("-q", "--quiet", action="store_true",
                       help="print no progress bars or summaries")

    demo = commands.add_parser(
        "demo", parents=[quiet], help="train on the sample fly frames and report SEG, cost, speed",
        description="Train a pixel classifier on the scribbles of the synthetic sample fly "
                    "frames, predict the other frames and report SEG against the exact masks, "
                    "the evaluation cost and frames/s; writes an overlay and a cost map (PNG) "
                    "and the model.")
    demo.add_argument("-o", "--output", default="msclassify-demo",
                      help="folder for overlay.png, cost_map.png and model.msc "
                           "(default: %(default)s)")
    demo.set_defaults(run=_cmd_demo)

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
    train.add_argument("--gray", action="store_true",
                       help="train on the grey (luma) of colour frames, e.g. for grey footage "
                            "stored as RGB video")
    _add_model_options(train)
    train.set_defaults(run=_cmd_train)

    predict = commands.add_parser(
        "predict", parents=[quiet], help="predict every frame of a video, stack or folder",
        description="Predict label images for every frame. Frames are streamed and each output "
                    "frame is written atomically; re-running the same command resumes after "
                    "the frames already written (they are verified, not redone).")
    predict.add_argument("model", help="model file from msclassify train")
    predict.add_argument("input", help="video (mp4, avi, ...), multi-page TIFF, image folder or "
                                       "quoted glob such as 'frames/*.png'")
    predict.add_argument("-o", "--output", required=True,
                         help="output folder (tif: one label TIFF per frame) or zarr store")
    predict.add_argument("--probabilities", action="store_true",
                         help="also write float32 class probabilities for every frame")
    predict.add_argument("--format", choices=("tif", "tiff", "zarr"), default="tif",
                         help="one TIFF per frame, or one zarr stack chunked by frame "
                              "(default: %(default)s)")
    predict.add_argument("--frames", metavar="START:STOP[:STEP]",
                         help="predict only these frames (Python slice of the frame numbers)")
    cluster = predict.add_mutually_exclusive_group()
    cluster.add_argument("--workers", type=_positive_int, metavar="N",
                         help="predict on a local Dask cluster of N worker processes")
    cluster.add_argument("--scheduler", metavar="ADDRESS",
                         help="predict on an existing Dask cluster, e.g. tcp://host:8786")
    predict.add_argument("--chunk-size", type=_positive_int, default=4, metavar="N",
                         help="frames per Dask task (default: %(default)s)")
    predict.set_defaults(run=_cmd_predict)

    evaluate = commands.add_parser(
        "evaluate", parents=[quiet], help="SEG of predicted labels against reference masks",
        description="Cell Tracking Challenge SEG of predictions against reference instance "
                    "masks (0 = background), per frame and in total. Predicted class images are "
                    "split into objects by connected components of the foreground classes.")
    evaluate.add_argument("prediction", metavar="PRED",
                          help="output of msclassify predict (folder or zarr) or a label stack")
    evaluate.add_argument("reference", metavar="GT", help="reference instance masks")
    evaluate.add_argument("--foreground", type=int, nargs="+", metavar="CLASS",
                          help="class value(s) of the objects (default: every class but the "
                               "most frequent one)")
    evaluate.add_argument("--instances", action="store_true",
                          help="PRED already holds instance labels (0 = background)")
    evaluate.set_defaults(run=_cmd_evaluate)

    from ._tabular_cli import add_tabular_commands  # imports this module: not at the top
    add_tabular_commands(commands, quiet)

    info = commands.add_parser("info", help="classes, features, costs and trees of a model")
    info.add_argument("model", help="model file (*.msc)")
    info.add_argument("--image", help="also report the prediction cost on the first frame of "
                                      "this video, stack or image")
    info.set_defaults(run=_cmd_info, quiet=False)
    return parser


# -- entry point -------------------------------------------------------------------------------

def _one_line(exc):
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv=None):
    """Run ``msclassify`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    Examples
    --------
    >>> main(["info", "missing.msc"])  # doctest: +SKIP
    msclassify info: error: model file missing.msc does not exist
    1
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if getattr(args, "format", None) == "tif":
        args.format = "tiff"
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print(f"{_PROG} {args.command}: interrupted", file=sys.stderr)
        return _EXIT_INTERRUPTED
    except (CommandError, FrameReadError, FrameWriteError, ModelFileError) as exc:
        if args.traceback:
            raise
        print(f"{_PROG} {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return _EXIT_ERROR
    except (ValueError, TypeError, OSError) as exc:
        # Raised by the library for bad input (e.g. labels of one class only); the
        # message says what was wrong, --traceback says where.
        if args.traceback:
            raise
        print(f"{_PROG} {args.command}: error: {_one_line(exc)} (run with --traceback for "
              "details)", file=sys.stderr)
        return _EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
