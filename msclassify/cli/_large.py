"""``msclassify predict`` of one image (or, with ``--axes``, one volume) larger than memory:
chunk by chunk into OME-Zarr, HDF5 or a tiled TIFF (a volume: OME-Zarr)."""

from pathlib import Path

import numpy as np

from ..io import check_not_an_input, is_large_image, open_chunk_writer, open_image
from ..pixel import (check_channels, label_dtype, large_provenance, load_pixel_model,
                     model_plan, predict_to_store, training_windows)
from ._common import CommandError, run_prediction, say
from ._volumes import open_chunked_volume

DEFAULT_CHUNK = 1024
DEFAULT_VOLUME_CHUNK = 128


def wants_large(args):
    """True if ``msclassify predict`` should take the chunked path: --chunks was given, or
    the input is a zarr store or an HDF5 dataset (``file.h5:/path``)."""
    return args.chunks is not None or is_large_image(args.input)


def _check_options(args):
    given = [name for name, used in (("--frames", args.frames is not None),
                                     ("--export", args.export != "labels"),
                                     ("--format", args.format not in ("tif", "tiff", "zarr")),
                                     ("--table", args.table is not None),
                                     ("--spacing", args.spacing is not None and not args.axes),
                                     ("--per-slice", args.per_slice))
             if used]
    if given:
        raise CommandError(f"{', '.join(given)} do(es) not apply to one large image predicted "
                           "chunk by chunk (its output, named by -o, is an OME-Zarr store, an "
                           "HDF5 file or a TIFF of labels)")
    if args.output is None:
        raise CommandError("a large image is predicted into an OME-Zarr store, an HDF5 file or a "
                           "TIFF: give it with -o (e.g. -o labels.zarr, -o labels.h5:/labels or "
                           "-o labels.tif)")


def _file_of(spec):
    """The file or folder an input or output names (``file.h5`` of ``file.h5:/path``)."""
    path = Path(str(spec))
    return path if path.exists() else Path(str(spec).split(":", 1)[0])


def predict_large(args, model_file, cluster):
    """Run the chunked prediction that ``args`` asks for with the model in ``model_file`` (a
    `msclassify.modelfile.ModelFile`); ``cluster`` is a context manager giving a Dask client
    or None."""
    _check_options(args)
    check_not_an_input(_file_of(args.output), [_file_of(args.input), args.model])
    model = load_pixel_model(model_file)
    spacing, n_axes = None, 2
    if args.axes is not None:       # one volume, chunk by chunk in z too
        image, spacing = open_chunked_volume(args, model)
        n_axes = 3
    elif model.bank_.grid is not None:
        raise CommandError(f"{args.model} is a volume model ({model.bank_.grid.describe()}); "
                           "name the input's axes with --axes (e.g. --axes zyx)")
    else:
        image = open_image(args.input)
    channels = 1 if image.ndim == n_axes else image.shape[n_axes]
    try:
        check_channels(model, channels, args.input, args.model)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    size = args.chunks or (DEFAULT_CHUNK if n_axes == 2 else DEFAULT_VOLUME_CHUNK)
    chunks = tuple(min(size, n) for n in image.shape[:n_axes])
    try:
        model_plan(model, image.shape, chunks)
    except ValueError as exc:
        raise CommandError(f"--chunks {size}: {exc}") from None
    classes = np.asarray(model.classes_)
    provenance = large_provenance(model_file, image, chunks, args.probabilities)
    try:
        writer = open_chunk_writer(args.output, image.shape[:n_axes], chunks, classes,
                                   dtype=label_dtype(classes),
                                   n_classes=classes.size if args.probabilities else None,
                                   provenance=provenance, overwrite=args.overwrite,
                                   **({} if spacing is None else {"spacing": spacing}))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    with writer:
        return _predict_into(args, model, model_file, image, writer, cluster)


def _predict_into(args, model, model_file, image, writer, cluster):
    n_chunks = int(np.prod(writer.grid))
    done = writer.completed()
    model_bytes = model_file.content if args.workers or args.scheduler else None
    status, written, elapsed = run_prediction(
        args, cluster, n_chunks, len(done), "chunk", args.output,
        lambda client, on_chunk: predict_to_store(
            model, image, writer, probabilities=args.probabilities, client=client,
            model_bytes=model_bytes, on_chunk=on_chunk, completed=done))
    if status == 0 and written:
        pixels = np.prod(writer.shape, dtype=np.float64) * written / n_chunks
        unit = "Mpixel" if writer.spacing is None else "Mvoxel"
        say(args, f"wrote {written} chunks of {'x'.join(map(str, writer.chunks))} to "
                  f"{args.output} in {elapsed:.1f} s ({pixels / elapsed / 1e6:.2f} {unit}/s); "
                  f"labels: {writer.location}")
    return status


def large_training_frames(args, features):
    """``msclassify train`` on one large image: crops around its scribbles (`training_windows`)."""
    if len(args.images) != 1 or len(args.labels) != 1:
        raise CommandError("a large image trains alone: give one IMAGES input and one --labels "
                           "input of the same size")
    image, labels = open_image(args.images[0]), open_image(args.labels[0], allow_missing=True)
    if labels.ndim != 2:
        raise CommandError(f"--labels {args.labels[0]} has shape {labels.shape}; expected one "
                           "(H, W) label image")
    try:
        frames, label_frames = training_windows(image, labels, features,
                                                args.chunks or DEFAULT_CHUNK)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    read = sum(frame.shape[0] * frame.shape[1] for frame in frames)
    say(args, f"read {len(frames)} crop(s) around the scribbles: {read / 1e6:.1f} of "
              f"{image.shape[0] * image.shape[1] / 1e6:.1f} Mpixel")
    return frames, label_frames
