"""``msclassify predict --table``: the object table (and tracks, classes) of a prediction run."""

import hashlib
from pathlib import Path

import numpy as np

from ..objects import (SPLIT_LANDSCAPES, ObjectClassifier, ObjectPipeline, ObjectSplitter,
                       ObjectTableWriter, ObjectTracker, TABLE_FORMATS, check_table_path,
                       find_objects, objects_at, read_object_labels, remember_frames)
from ..pixel import predict_frame
from ._common import CommandError, say


def add_object_arguments(predict):
    """Add the object-table options to the ``predict`` parser."""
    group = predict.add_argument_group(
        "objects", "a table of the objects of one class in every frame (regionprops' columns: "
                   "centroid-0 = row, centroid-1 = column, orientation in radians), written "
                   "when the last frame is done; see docs/objects.md")
    group.add_argument("--table", metavar="PATH",
                       help="write the object table here (" + ", ".join(
                           f"{suffix}: {what}" for suffix, what in TABLE_FORMATS.items())
                       + "); -o is then optional")
    group.add_argument("--tracks", action="store_true",
                       help="link the objects over frames (trackpy): adds column 'track'")
    group.add_argument("--search-range", type=float, default=100.0, metavar="PIXELS",
                       help="--tracks: the farthest an object moves between frames "
                            "(default: %(default)s)")
    group.add_argument("--memory", type=int, default=25, metavar="FRAMES",
                       help="--tracks: frames an object may vanish and keep its track "
                            "(default: %(default)s)")
    group.add_argument("--split", choices=tuple(SPLIT_LANDSCAPES),
                       help="split touching objects by a watershed of: " + "; ".join(
                           f"{name}: {what}" for name, what in SPLIT_LANDSCAPES.items()))
    group.add_argument("--object-labels", metavar="CSV",
                       help="classify the objects: a CSV of labelled objects (columns frame, "
                            "centroid-0, centroid-1, class; at least 2 objects per class); "
                            "adds column 'class'")
    group.add_argument("--track-class", action="append", metavar="NAME",
                       help="--tracks with --object-labels: track only objects of this class "
                            "(repeat for several; default: all)")


def check_object_arguments(args):
    """Refuse object options without --table, and a table that exists, before any work."""
    if args.table is None:
        used = [option for option, value in (("--tracks", args.tracks), ("--split", args.split),
                                             ("--object-labels", args.object_labels),
                                             ("--track-class", args.track_class)) if value]
        if used:
            raise CommandError(f"{', '.join(used)} need --table PATH (the object table)")
        if args.output is None:
            raise CommandError("give -o OUTPUT (the predicted frames), --table PATH (the "
                               "objects), or both")
        return
    if args.track_class and not (args.tracks and args.object_labels):
        raise CommandError("--track-class needs --tracks and --object-labels")
    if args.search_range <= 0 or args.memory < 0:
        raise CommandError("--search-range must be > 0 pixels and --memory >= 0 frames")
    try:
        check_table_path(args.table, overwrite=args.overwrite,
                         inputs=[path for path in (args.input, args.model, args.object_labels)
                                 if path is not None])
    except (ValueError, OSError, ImportError) as exc:
        raise CommandError(f"--table: {exc}") from None


def table_target(args, classes):
    """The class whose objects the table holds: --class, or a two-class model's second."""
    if args.export_class is not None:
        if int(args.export_class) not in [int(c) for c in classes]:
            raise CommandError(f"--class {args.export_class} is not one the model predicts "
                               f"({', '.join(map(str, classes))})")
        return int(args.export_class)
    if classes.size != 2:
        raise CommandError(f"--table needs --class: the model predicts {classes.size} classes "
                           f"({', '.join(map(str, classes))})")
    return int(classes[1])


def open_object_table(args, model, source, selection, writer, provenance):
    """The `ObjectTableWriter` that --table and its options ask for, and the source to read."""
    classes = np.asarray(model.classes_)
    target = table_target(args, classes)
    splitter = (None if args.split is None else
                ObjectSplitter(args.split, min_size=max(args.min_size or 0, 1)))
    pipeline = ObjectPipeline(
        target=target, classes=tuple(int(c) for c in classes), min_size=args.min_size or 0,
        splitter=splitter,
        tracker=ObjectTracker(args.search_range, args.memory) if args.tracks else None,
        track_classes=tuple(args.track_class) if args.track_class else None,
        probability_columns=args.probabilities)
    if args.object_labels is not None:
        pipeline.classifier, pipeline.origin = _train_classifier(args, model, source, pipeline)
        unknown = sorted(set(args.track_class or ()) - set(pipeline.classifier.classes_))
        if unknown:
            raise CommandError(f"--track-class {', '.join(unknown)}: no such class in "
                               f"{args.object_labels} ({', '.join(pipeline.classifier.classes_)})")
    frames = remember_frames(source)
    try:
        table = ObjectTableWriter(writer, args.table, pipeline, frames, selection, provenance,
                                  overwrite=args.overwrite)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return table, frames


def _train_classifier(args, model, source, pipeline):
    """An `ObjectClassifier` trained on the objects the object-label file points at."""
    try:
        points = read_object_labels(args.object_labels)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    too_far = points["line"][points["frame"] >= len(source)]
    if len(too_far):
        line = too_far.iloc[0]
        raise CommandError(f"{args.object_labels} line {line}: frame "
                           f"{points['frame'][too_far.index[0]]} is not in {args.input} "
                           f"({len(source)} frames)")
    samples, labels = [], []
    for frame, rows in points.groupby("frame", sort=True):
        image = source.read(int(frame))
        prediction = predict_frame(model, image, pipeline.needs_probabilities)
        probability = None
        if prediction.probabilities is not None:
            probability = prediction.probabilities[..., list(pipeline.classes).index(
                pipeline.target)]
        objects = find_objects(prediction.labels, pipeline.target, min_size=pipeline.min_size,
                               split=pipeline.splitter, probability=probability, image=image)
        try:
            labels.append(objects_at(objects, rows, where=str(args.object_labels)))
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        samples.append((objects, image))
    try:
        classifier = ObjectClassifier(random_state=0).fit(samples, labels)
    except ValueError as exc:
        raise CommandError(f"{args.object_labels}: {exc}") from None
    say(args, f"object classes {', '.join(classifier.classes_)} learnt from {len(points)} "
              f"labelled objects; the classifier uses the {' and '.join(classifier.groups_used_)} "
              f"features ({classifier.cost_per_object() * 1e6:.0f} us per object)")
    digest = hashlib.sha256(Path(args.object_labels).read_bytes()).hexdigest()
    return classifier, {"object_labels": {"path": str(Path(args.object_labels).absolute()),
                                          "sha256": digest}}
