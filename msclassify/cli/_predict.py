"""``msclassify predict``: every frame of a video, stack or folder, resumable, here or on Dask."""

import contextlib
import sys
import time

import numpy as np

from ..io import FrameReadError, open_frames
from ..modelfile import open_model_file
from ..pixel import EXPORT_KINDS, FrameExport, batch, check_channels, load_pixel_model, open_export
from ._common import EXIT_INTERRUPTED, PROG, CommandError, positive_int, progress, say


def add_predict_command(commands, quiet):
    """Add ``predict`` to the ``msclassify`` sub-parsers ``commands``."""
    predict = commands.add_parser(
        "predict", parents=[quiet], help="predict every frame of a video, stack or folder",
        description="Predict label images for every frame. Frames are streamed and each output "
                    "frame is written atomically; re-running the same command resumes after "
                    "the frames already written (they are verified, not redone). The output "
                    "records what made it (the model file's digest, the input's size, frame "
                    "count and fingerprint, --frames, --probabilities): a run with anything "
                    "else is refused; start over with --overwrite or choose another -o.")
    predict.add_argument("model", help="model file from msclassify train")
    predict.add_argument("input", help="video (mp4, avi, ...), multi-page TIFF, image folder or "
                                       "quoted glob such as 'frames/*.png'")
    predict.add_argument("-o", "--output", required=True,
                         help="output folder (tif: one label TIFF per frame) or zarr store")
    predict.add_argument("--probabilities", action="store_true",
                         help="also write float32 class probabilities for every frame")
    predict.add_argument("--format", choices=("tif", "tiff", "zarr", "tiff-stack"),
                         default="tif",
                         help="one TIFF per frame, one zarr stack chunked by frame, or one "
                              "multi-page TIFF file (-o names the file; written when complete, "
                              "not resumable) (default: %(default)s)")
    predict.add_argument("--export", choices=tuple(EXPORT_KINDS), default="labels",
                         help="what to write per frame: " + "; ".join(
                             f"{kind}: {what}" for kind, what in EXPORT_KINDS.items())
                         + " (default: %(default)s)")
    predict.add_argument("--class", dest="export_class", type=int, metavar="VALUE",
                         help="the class exported by --export mask/instances/probability "
                              "(default for a two-class model: its second class, e.g. 2)")
    predict.add_argument("--min-size", type=int, default=0, metavar="PIXELS",
                         help="--export instances: drop objects smaller than this "
                              "(default: %(default)s, keep all)")
    predict.add_argument("--frames", metavar="START:STOP[:STEP]",
                         help="predict only these frames (Python slice of the frame numbers)")
    cluster = predict.add_mutually_exclusive_group()
    cluster.add_argument("--workers", type=positive_int, metavar="N",
                         help="predict on a local Dask cluster of N worker processes")
    cluster.add_argument("--scheduler", metavar="ADDRESS",
                         help="predict on an existing Dask cluster, e.g. tcp://host:8786")
    predict.add_argument("--chunk-size", type=positive_int, default=4, metavar="N",
                         help="frames per Dask task (default: %(default)s)")
    predict.add_argument("--overwrite", action="store_true",
                         help="delete an existing output of msclassify at -o first and start "
                              "over (by default a matching output is resumed and any other "
                              "refused)")
    predict.set_defaults(run=_cmd_predict)


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


def _cmd_predict(args):
    model_file = open_model_file(args.model)  # read once: parsed, digested, shipped to workers
    model = load_pixel_model(model_file)
    with open_frames(args.input, as_gray=model.n_channels_ == 1) as source:
        channels = 1 if len(source.shape) == 2 else source.shape[2]
        try:
            check_channels(model, channels, args.input, args.model)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        selection = _parse_frames(args.frames, len(source), args.input)
        classes = np.asarray(model.classes_)
        export = _frame_export(args, classes)
        provenance = batch.prediction_provenance(model_file, source, selection,
                                                 args.probabilities, export)
        try:
            writer = open_export(args.output, len(selection), source.shape[:2], export, classes,
                                 names=[source.name(i) for i in selection],
                                 n_classes=classes.size if args.probabilities else None,
                                 format="tiff" if args.format == "tif" else args.format,
                                 provenance=provenance, overwrite=args.overwrite)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        with writer:
            done = set(writer.completed())
            todo = [position for position in range(len(selection)) if position not in done]
            if not todo:
                say(args, f"all {len(selection)} frames are already in {args.output}; nothing "
                           "to do")
                return 0
            if done:
                say(args, f"resuming: {len(done)} of {len(selection)} frames are already in "
                           f"{args.output}")
            return _run_prediction(args, model, model_file, source, writer, selection, todo)


def _frame_export(args, classes):
    """The `FrameExport` that --export, --class and --min-size ask for."""
    target = args.export_class
    if args.export != "labels" and target is None:
        if classes.size != 2:
            raise CommandError(f"--export {args.export} needs --class: the model predicts "
                               f"{classes.size} classes ({', '.join(map(str, classes))})")
        target = int(classes[1])
        say(args, f"exporting class {target} (the model's second class; choose another with "
                  "--class)")
    try:
        return FrameExport(args.export, target, args.min_size).check_classes(classes)
    except ValueError as exc:
        raise CommandError(f"--export {args.export}: {exc}") from None


def _run_prediction(args, model, model_file, source, writer, selection, todo):
    model_bytes, cluster = None, contextlib.nullcontext()
    if args.workers is not None or args.scheduler is not None:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise CommandError("--workers and --scheduler need Dask: pip install "
                               "'msclassify[dask]'") from None
        model_bytes = model_file.content
        cluster = (batch.local_cluster(args.workers) if args.workers is not None
                   else batch.connect(args.scheduler))
    written = 0

    def on_frame(position):
        nonlocal written
        written += 1
        bar.update(1)

    start = time.perf_counter()
    with progress(len(selection), "predicting", args.quiet,
                   initial=len(selection) - len(todo)) as bar:
        try:
            with cluster as client:
                batch.predict_to_writer(model, source, writer, todo, frame_index=selection,
                                         probabilities=writer.needs_probabilities, client=client,
                                         model_bytes=model_bytes, chunk_size=args.chunk_size,
                                         on_frame=on_frame)
        except KeyboardInterrupt:
            bar.close()
            done = len(selection) - len(todo) + written
            if args.format == "tiff-stack":
                print(f"{PROG} predict: interrupted; the TIFF stack {args.output} was not written "
                      "(a stack is written in one go).", file=sys.stderr)
                return EXIT_INTERRUPTED
            print(f"{PROG} predict: interrupted; {done} of {len(selection)} frames are complete "
                  f"in {args.output}. Run the same command again to resume.", file=sys.stderr)
            return EXIT_INTERRUPTED
        except (FrameReadError, batch.BatchError) as exc:
            done = len(selection) - len(todo) + written
            error = FrameReadError if isinstance(exc, FrameReadError) else CommandError
            resume = (f"; the {done} frames written to {args.output} stay valid and a re-run "
                      "resumes after them") if done else ""
            raise error(f"{exc}{resume}") from None
    elapsed = time.perf_counter() - start
    say(args, f"wrote {written} frames to {args.output} in {elapsed:.1f} s "
               f"({written / elapsed:.2f} frames/s)")
    return 0
