"""Volumes on the command line: ``--axes``, ``--spacing`` and ``--per-slice`` of train,
predict and evaluate.

How an axis is meant is never guessed: without ``--axes`` every input is read as
before (frames of a video or stack); with ``--axes`` (``zyx``, ``zcyx``,
``tzyx``, ...) the TIFF's array is read as volumes (`msclassify.io.read_volume`).
The spacing is ``--spacing Z Y X`` or the one the file records (OME-TIFF, ImageJ
hyperstack); ``--per-slice`` classifies the slices as 2D frames instead.
"""

import contextlib
import json
from pathlib import Path

import numpy as np

from ..features import check_spacing
from ..io import (check_axes, check_not_an_input, open_volume, read_volume, recorded_z_axis,
                  write_atomically, write_volume)
from ..metrics import label_instances, seg_score
from ..pixel import check_channels, training_windows
from ._common import CommandError, make_output_folder, run_prediction, say

MANIFEST = "msclassify_volumes.json"
_FORMAT = "msclassify-volumes"


def add_volume_options(parser, predicting=False):
    """``--axes``, ``--spacing`` and ``--per-slice`` on a train or predict sub-parser."""
    group = parser.add_argument_group("volumes (z-stacks; TIFF inputs)")
    group.add_argument("--axes", metavar="AXES",
                       help="read each input as volumes whose stored axes are AXES, one letter "
                            "per axis from t (time), z, c (channel), y, x, e.g. zyx, zcyx or "
                            "tzyx (default: frames of a video or stack, as always)")
    group.add_argument("--spacing", type=float, nargs=3, metavar=("Z", "Y", "X"),
                       help="voxel size (z, y, x) in one unit, e.g. 50 4 4 (default: the "
                            "spacing the file records, OME-TIFF or ImageJ)")
    group.add_argument("--per-slice", action="store_true",
                       help="with --axes: classify every z slice as a 2D frame (for thin or "
                            "very anisotropic stacks)" + (" with a 2D model" if predicting
                                                          else "; trains a 2D model"))


def uses_volumes(args, inputs=()):
    """True if the command reads volumes; checks that the volume options go together.

    Without --axes, says so when one of ``inputs`` records a z axis (it is read as frames).
    """
    if args.axes is None:
        if args.spacing is not None or args.per_slice:
            raise CommandError("--spacing and --per-slice are for volumes; name the input's "
                               "axes with --axes (e.g. --axes zyx)")
        for path in inputs:
            axes = recorded_z_axis(path)
            if axes is not None:
                say(args, f"note: {path} records the axes {axes}; without --axes it is read as "
                          "frames (pass --axes to read it as volumes)")
        return False
    try:
        axes = check_axes(args.axes)
    except ValueError as exc:
        raise CommandError(f"--axes: {exc}") from None
    if args.per_slice and args.spacing is not None:
        raise CommandError("--per-slice classifies slices as 2D frames; it takes no --spacing")
    args.axes = axes
    return True


def _spacing(args, recorded, source):
    """The voxel spacing: --spacing, else the one ``source`` records; CommandError if none."""
    if args.spacing is not None:
        try:
            return check_spacing(args.spacing, "--spacing")
        except ValueError as exc:
            raise CommandError(str(exc)) from None
    if recorded is None:
        raise CommandError(f"{source} records no voxel spacing; pass --spacing Z Y X (e.g. "
                           "--spacing 50 4 4), or --per-slice to classify its slices as frames")
    try:
        return check_spacing(recorded, f"the voxel spacing {source} records")
    except ValueError as exc:
        raise CommandError(f"{exc}; correct the file's metadata or pass --spacing Z Y X") \
            from None


def _read(path, axes, reserve=0):
    try:
        return read_volume(path, axes, reserve)
    except (ValueError, MemoryError) as exc:
        raise CommandError(str(exc)) from None


def _model_spacing(args, recorded, grid, source):
    """The input's spacing (--spacing, else recorded, else the model's): CommandError if it
    is not the volume model's (its features are in physical units)."""
    given = args.spacing if args.spacing is not None else recorded
    spacing = grid.spacing if given is None else _spacing(args, recorded, source)
    if not np.allclose(spacing, grid.spacing, rtol=1e-6):
        raise CommandError(f"{source} has voxel spacing {spacing} but {args.model} was "
                           f"trained on {grid.spacing}; its features are in physical units, "
                           "so resample the volume or train a model on this spacing")
    return spacing


def open_chunked_volume(args, model):
    """``predict --axes ... --chunks``: the input as a `msclassify.io.LazyVolume` (OME-Zarr,
    zarr or TIFF, read window by window) and its spacing, checked against the volume model."""
    uses_volumes(args)
    grid = model.bank_.grid
    if grid is None:
        raise CommandError(f"{args.model} is a 2D model; chunked prediction of a volume needs a "
                           "volume model (train with --axes zyx), or predict its slices without "
                           "--chunks using --per-slice")
    if args.workers is not None or args.scheduler is not None:
        raise CommandError("--workers/--scheduler: a volume is predicted chunk by chunk in this "
                           "process; leave them out")
    try:
        volume = open_volume(args.input, args.axes)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return volume, _model_spacing(args, volume.spacing, grid, args.input)


def first_volume(path, axes):
    """The first volume of a TIFF whose stored axes are ``axes``: ``(Z, Y, X[, C])``."""
    try:
        axes = check_axes(axes)
    except ValueError as exc:
        raise CommandError(f"--axes: {exc}") from None
    return _squeeze(_read(path, axes).data[0])


def _squeeze(volume):
    """``(Z, Y, X, C)`` -> ``(Z, Y, X)`` for one channel."""
    return volume[..., 0] if volume.shape[-1] == 1 else volume


def train_volumes(args, make_classifier):
    """Read volume inputs and labels, fit `PixelClassifier` (3D, or 2D with --per-slice)."""
    if len(args.images) != len(args.labels):
        raise CommandError(f"got {len(args.images)} IMAGES input(s) but {len(args.labels)} "
                           "--labels; give one label file per input")
    label_axes = args.axes.replace("c", "")
    volumes, labels, spacing = [], [], None
    for image_path, label_path in zip(args.images, args.labels):
        image, label = _read(image_path, args.axes), _read(label_path, label_axes)
        if image.data.shape[:4] != label.data.shape[:4]:
            raise CommandError(f"labels {label_path} are (T, Z, Y, X) {label.data.shape[:4]} but "
                               f"{image_path} is {image.data.shape[:4]}; give labels of the "
                               "volume's shape")
        if not args.per_slice and spacing is None:
            spacing = _spacing(args, image.spacing, image_path)
            say(args, f"voxel spacing (z, y, x): {' x '.join(f'{s:g}' for s in spacing)}"
                      + ("" if args.spacing is not None else f" (recorded in {image_path})"))
        volumes += [_squeeze(v) for v in image.data]
        labels += [v[..., 0] for v in label.data]
    if args.per_slice:
        frames = [plane for volume in volumes for plane in volume]
        label_frames = [plane for volume in labels for plane in volume]
        return make_classifier(None), frames, label_frames
    if not any(np.any(lab) for lab in labels):
        raise CommandError("the labels hold no labelled voxel on any slice; scribble at least "
                           "two classes (0 = unlabelled)")
    return make_classifier(spacing), volumes, labels


def train_volume_windows(args, features, make_classifier, chunk):
    """``train --axes ... --chunks``: one volume larger than memory, read only in windows
    around its scribbled voxels (`msclassify.pixel.training_windows` with the spacing: the
    scribbles' features are the whole volume's). Returns the classifier, crops and labels."""
    if len(args.images) != 1 or len(args.labels) != 1:
        raise CommandError("a volume read around its scribbles trains alone: give one IMAGES "
                           "input and one --labels input of the same shape")
    if args.per_slice:
        raise CommandError("--per-slice trains a 2D model on whole slices; crops around the "
                           "scribbles (--chunks, zarr input) train a volume model: drop one")
    try:
        volume = open_volume(args.images[0], args.axes)
        labels = open_volume(args.labels[0], args.axes.replace("c", ""), allow_missing=True)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if labels.shape != volume.shape[:3]:
        raise CommandError(f"labels {args.labels[0]} are (Z, Y, X) {labels.shape} but "
                           f"{args.images[0]} is {volume.shape[:3]}; give labels of the "
                           "volume's shape")
    spacing = _spacing(args, volume.spacing, args.images[0])
    say(args, f"voxel spacing (z, y, x): {' x '.join(f'{s:g}' for s in spacing)}"
              + ("" if args.spacing is not None else f" (recorded in {args.images[0]})"))
    try:
        frames, label_frames = training_windows(volume, labels, features, chunk,
                                                spacing=spacing)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    read = sum(int(np.prod(frame.shape[:3])) for frame in frames)
    say(args, f"read {len(frames)} crop(s) around the scribbles: {read / 1e6:.2f} of "
              f"{np.prod(volume.shape[:3]) / 1e6:.2f} Mvoxel")
    return make_classifier(spacing), [_squeeze(f) for f in frames], label_frames


def predict_volumes(args, model, model_file):
    """Predict every volume of the input into ``-o`` (one label TIFF per volume), resumably."""
    unsupported = [option for option, used in (
        ("--probabilities", args.probabilities), ("--export", args.export != "labels"),
        ("--format", args.format not in ("tif", "tiff")), ("--frames", args.frames is not None),
        ("--workers/--scheduler", args.workers is not None or args.scheduler is not None),
        ("--table", args.table is not None))
        if used]
    if unsupported:
        raise CommandError(f"{', '.join(unsupported)}: volumes are written as label volumes, one "
                           "TIFF per volume, here; leave these options out")
    grid = model.bank_.grid
    if grid is None and not args.per_slice:
        raise CommandError(f"{args.model} is a 2D model; predict the volume slice by slice with "
                           "--per-slice, or train a volume model (--axes zyx --spacing Z Y X)")
    if grid is not None and args.per_slice:
        raise CommandError(f"{args.model} is a volume model ({grid.describe()}); --per-slice "
                           "needs a 2D model")
    shape = _stored_volume_shape(args.input, args.axes)
    reserve = 0 if shape is None else model.prediction_bytes(shape if grid else shape[1:])
    source = _read(args.input, args.axes, reserve)
    data = source.data
    try:
        check_channels(model, data.shape[-1], args.input, args.model)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    spacing = None
    if grid is not None:
        spacing = _model_spacing(args, source.spacing, grid, args.input)
    output = Path(args.output)
    check_not_an_input(output, [args.input, args.model])  # before --overwrite deletes anything
    record = {"format": _FORMAT, "model_sha256": model_file.sha256,
              "input": {"name": Path(args.input).name, "size": Path(args.input).stat().st_size,
                        "shape": list(data.shape), "axes": args.axes},
              "spacing": None if spacing is None else list(spacing),
              "per_slice": bool(args.per_slice)}
    done = _open_output(output, record, args.overwrite, len(data))

    def predict(client, on_volume):
        for t, volume in enumerate(data):
            if t in done:
                continue
            volume = _squeeze(volume)
            labels = (np.stack([model.predict(plane) for plane in volume]) if grid is None
                      else model.predict(volume))
            write_volume(output / f"volume_{t:04d}.tif", labels, spacing or (1.0, 1.0, 1.0))
            on_volume(t)

    status, written, elapsed = run_prediction(args, contextlib.nullcontext(), len(data),
                                              len(done), "volume", output, predict)
    if status == 0 and written:
        say(args, f"wrote {written} label volume(s) to {output} in {elapsed:.1f} s")
    return status


def _stored_volume_shape(path, axes):
    """``(Z, Y, X)`` of one volume of a regular TIFF file, without reading its pixels; None if
    it cannot tell (`read_volume` then says what is wrong)."""
    import tifffile
    if not Path(path).is_file():       # a FIFO named .tif would block
        return None
    try:
        with tifffile.TiffFile(path) as tif:
            shape = tif.series[0].shape
    except Exception:  # not a TIFF, unreadable: read_volume says what is wrong
        return None
    return tuple(shape[axes.index(a)] for a in "zyx") if len(shape) == len(axes) else None


def _open_output(output, record, overwrite, n_volumes):
    """Check or create the output folder and its record; the volumes already written."""
    make_output_folder(output)
    manifest = output / MANIFEST
    ours = sorted(output.glob("volume_*.tif"))
    if manifest.exists() and overwrite:
        for path in ours:
            path.unlink()
        manifest.unlink()
        ours = []
    if manifest.exists():
        try:
            found = json.loads(manifest.read_text())
        except (OSError, ValueError):
            found = None
        if found != record:
            raise CommandError(f"{output} holds label volumes of another run (model, input or "
                               "options differ); start over with --overwrite or choose another -o")
        return {int(p.stem.split("_")[1]) for p in ours if p.stem.split("_")[1].isdigit()
                and int(p.stem.split("_")[1]) < n_volumes}
    if any(output.iterdir()):
        raise CommandError(f"{output} is not empty and holds no msclassify volumes; choose an "
                           "empty or new folder with -o")
    write_atomically(manifest, lambda file: file.write(json.dumps(record, indent=1).encode()))
    return set()


def _label_volumes(path):
    """``(T, Z, Y, X)`` label volumes: a predict output folder or one TIFF ((Z,Y,X) or
    (T,Z,Y,X))."""
    import tifffile
    path = Path(path)
    files = sorted(path.glob("volume_*.tif")) if path.is_dir() else [path]
    if not files:
        raise CommandError(f"{path} holds no label volumes (volume_*.tif)")
    try:
        arrays = [tifffile.imread(f) for f in files]
    except (OSError, ValueError, tifffile.TiffFileError) as exc:
        raise CommandError(f"cannot read label volumes from {path} ({exc})") from None
    if len(arrays) == 1 and arrays[0].ndim == 4:
        return arrays[0]
    if any(a.ndim != 3 for a in arrays):
        raise CommandError(f"{path}: label volumes must be (Z, Y, X) or (T, Z, Y, X), got "
                           f"{[a.shape for a in arrays]}")
    return np.stack(arrays)


def evaluate_volumes(args):
    """3D SEG of predicted label volumes against reference instance volumes."""
    prediction, reference = _label_volumes(args.prediction), _label_volumes(args.reference)
    if prediction.shape != reference.shape:
        raise CommandError(f"{args.prediction} holds volumes of shape {prediction.shape} but "
                           f"{args.reference} {reference.shape}; they must match")
    foreground = args.foreground
    if not args.instances and foreground is None:
        values, counts = np.unique(prediction, return_counts=True)
        background = values[np.argmax(counts)]
        foreground = [int(v) for v in values if v != background and v != 0]
        say(args, f"objects: classes {foreground or 'none'} (class {background}, the most "
                  "frequent, is background; choose with --foreground)")
    if not args.instances:
        absent = [v for v in foreground if not np.any(prediction == v)]
        if absent:
            raise CommandError(f"--foreground {' '.join(map(str, absent))}: no voxel of "
                               f"{args.prediction} has that class")
        prediction = label_instances(prediction, foreground=foreground, volume=True)
    result = seg_score(reference, prediction, per_frame=True, volume=True)
    if not args.quiet:
        print("volume  objects  SEG")
        for t, (score, n_objects) in enumerate(zip(result.per_frame, result.n_objects)):
            print(f"{t:6d}  {n_objects:7d}  {score:.4f}")
    print(f"SEG {result.score:.4f} over {int(result.n_objects.sum())} objects in "
          f"{len(prediction)} volume(s) (3D objects)")
    return 0


def train_summary(args, classifier, volumes):
    """One line on what is being trained: 3D with its pyramid, or per slice."""
    if classifier.spacing is None:
        return f"training a 2D model on {len(volumes)} slice(s) (--per-slice)"
    return f"training a volume model on {len(volumes)} volume(s)"
