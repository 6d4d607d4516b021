"""``msclassify predict``: every frame of a video, stack or folder, resumable, here or on Dask."""

import contextlib
from pathlib import Path

import numpy as np

from ..io import open_frames
from ..modelfile import open_model_file
from ..pixel import EXPORT_KINDS, FrameExport, batch, check_channels, load_pixel_model, open_export
from ._common import CommandError, positive_int, run_prediction, say
from ._large import DEFAULT_CHUNK, DEFAULT_VOLUME_CHUNK, predict_large, wants_large
from ._objects import add_object_arguments, check_object_arguments, open_object_table
from ._volumes import add_volume_options, predict_volumes, uses_volumes

_CHUNK_SIZE = 4  # frames per Dask task


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
    predict.add_argument("-o", "--output",
                         help="output folder (tif: one label TIFF per frame) or zarr store "
                              "(optional with --table)")
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
    predict.add_argument("--min-size", type=int, metavar="PIXELS",
                         help="--export instances and --table: drop objects smaller than this "
                              "(default: 0, keep all)")
    predict.add_argument("--frames", metavar="START:STOP[:STEP]",
                         help="predict only these frames (Python slice of the frame numbers)")
    cluster = predict.add_mutually_exclusive_group()
    cluster.add_argument("--workers", type=positive_int, metavar="N",
                         help="predict on a local Dask cluster of N worker processes")
    cluster.add_argument("--scheduler", metavar="ADDRESS",
                         help="predict on an existing Dask cluster, e.g. tcp://host:8786")
    predict.add_argument("--chunk-size", type=positive_int, metavar="N",
                         help="frames per Dask task, with --workers or --scheduler (default: "
                              f"{_CHUNK_SIZE})")
    predict.add_argument("--chunks", type=positive_int, metavar="PIXELS",
                         help="predict one large image chunk by chunk (PIXELS a side; default "
                              f"{DEFAULT_CHUNK} for zarr and HDF5 inputs, which always take "
                              "this path) into OME-Zarr labels (-o OUT.zarr), an HDF5 dataset "
                              "(-o OUT.h5 or OUT.h5:/path) or a tiled, pyramidal TIFF (-o "
                              "OUT.tif, written once all chunks are done), with bounded memory, "
                              "identical to predicting it whole; input: OME-Zarr, zarr array, "
                              "file.h5:/dataset or a (tiled) TIFF; with --axes one volume into "
                              "OME-Zarr labels, chunks of PIXELS voxels a side "
                              f"(default {DEFAULT_VOLUME_CHUNK})")
    predict.add_argument("--overwrite", action="store_true",
                         help="delete an existing output of msclassify at -o first and start "
                              "over (by default a matching output is resumed and any other "
                              "refused)")
    add_volume_options(predict, predicting=True)
    add_object_arguments(predict)
    predict.set_defaults(run=_cmd_predict)


def _check_options(args):
    """CommandError for an option that does nothing with the others given."""
    if args.export == "labels" and args.export_class is not None:
        raise CommandError("--class chooses the class of --export mask, instances or "
                           "probability; --export labels writes every class: drop --class or "
                           "choose one of those exports")
    if args.export != "instances" and args.min_size is not None and args.table is None:
        raise CommandError(f"--min-size applies to --export instances and --table (objects), "
                           f"not --export {args.export}: drop it, use --export instances or "
                           "add --table")
    if args.chunk_size is not None and args.workers is None and args.scheduler is None:
        raise CommandError("--chunk-size sets the frames per Dask task: give it with --workers "
                           "or --scheduler, or drop it")


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
    _check_options(args)
    check_object_arguments(args)
    model_file = open_model_file(args.model)  # read once: parsed, digested, shipped to workers
    if wants_large(args):
        return predict_large(args, model_file, _cluster(args))
    model = load_pixel_model(model_file)
    if uses_volumes(args, [args.input]):
        return predict_volumes(args, model, model_file)
    if model.bank_.grid is not None:
        raise CommandError(f"{args.model} is a volume model ({model.bank_.grid.describe()}); "
                           "name the input's axes with --axes (e.g. --axes zyx)")
    _check_frames_output(args)
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
            writer = None if args.output is None else open_export(
                args.output, len(selection), source.shape[:2], export, classes,
                names=[source.name(i) for i in selection],
                n_classes=classes.size if args.probabilities else None,
                format="tiff" if args.format == "tif" else args.format,
                provenance=provenance, overwrite=args.overwrite,
                inputs=[*source.files(), args.model])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        frames = source
        if args.table is not None:
            writer, frames = open_object_table(args, model, source, selection, writer,
                                               provenance)
        with writer:
            done = set(writer.completed())
            todo = [position for position in range(len(selection)) if position not in done]
            status = _run_prediction(args, model, model_file, frames, writer, selection, todo)
            if status == 0 and args.table is not None:
                table = writer.finish()
                say(args, f"wrote {len(table)} objects of {len(selection)} frames to {args.table}"
                    + (f" ({table['track'].max() + 1} tracks)" if "track" in table and len(table)
                       else ""))
            return status


def _check_frames_output(args):
    """CommandError when -o names one HDF5 or TIFF file: per-frame output is a folder (an
    existing path is left to the writer's checks, which protect inputs and foreign files)."""
    if args.output is None or args.format not in ("tif", "tiff"):
        return
    name = Path(str(args.output).split(":/", 1)[0])
    if name.exists() or name.is_symlink():
        return
    if name.suffix.lower() in (".h5", ".hdf5", ".he5"):
        raise CommandError(f"-o {args.output}: an HDF5 file holds one large image predicted "
                           "chunk by chunk: add --chunks N (e.g. --chunks 1024) for a single "
                           "image, or give -o a folder for one TIFF per frame")
    if name.suffix.lower() in (".tif", ".tiff"):
        raise CommandError(f"-o {args.output} names one TIFF file, but per-frame output is a "
                           "folder of TIFFs: add --chunks N (e.g. --chunks 1024) for one tiled "
                           "TIFF of a single image, --format tiff-stack for one multi-page TIFF "
                           f"of all frames, or name a folder (e.g. -o {name.with_suffix('')})")


def _destination(args):
    """Where the run writes: -o, --table or both."""
    return " and ".join(path for path in (args.output, args.table) if path)


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
        min_size = args.min_size if args.export == "instances" and args.min_size else 0
        return FrameExport(args.export, target, min_size).check_classes(classes)
    except ValueError as exc:
        raise CommandError(f"--export {args.export}: {exc}") from None


def _cluster(args):
    """A context manager giving the Dask client --workers/--scheduler ask for, or None."""
    if args.workers is None and args.scheduler is None:
        return contextlib.nullcontext()
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise CommandError("--workers and --scheduler need Dask: pip install "
                           "'msclassify[dask]'") from None
    return (batch.local_cluster(args.workers) if args.workers is not None
            else batch.connect(args.scheduler))


def _run_prediction(args, model, model_file, source, writer, selection, todo):
    model_bytes = None if args.workers is None and args.scheduler is None else \
        model_file.content
    where = _destination(args)
    status, written, elapsed = run_prediction(
        args, _cluster(args), len(selection), len(selection) - len(todo), "frame", where,
        lambda client, on_frame: batch.predict_to_writer(
            model, source, writer, todo, frame_index=selection,
            probabilities=writer.needs_probabilities, client=client, model_bytes=model_bytes,
            chunk_size=args.chunk_size or _CHUNK_SIZE, on_frame=on_frame),
        interrupted=(f"the TIFF stack {args.output} was not written (a stack is written in one "
                     "go).") if args.format == "tiff-stack" else None)
    if status == 0 and written:
        say(args, f"wrote {written} frames to {where} in {elapsed:.1f} s "
                  f"({written / elapsed:.2f} frames/s)")
    return status
