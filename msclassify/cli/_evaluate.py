"""``msclassify evaluate``: SEG of predicted labels against reference masks."""

import numpy as np

from ..io import match_frames, read_label_stack
from ..metrics import label_instances, seg_score
from ._common import CommandError, say
from ._volumes import evaluate_volumes


def add_evaluate_command(commands, quiet):
    """Add ``evaluate`` to the ``msclassify`` sub-parsers ``commands``."""
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
    evaluate.add_argument("--volumes", action="store_true",
                          help="PRED and GT are label volumes (a predict output of volumes or "
                               "a (Z, Y, X) / (T, Z, Y, X) TIFF): objects (6-connected: "
                               "voxels sharing a face) and SEG in 3D")
    evaluate.set_defaults(run=_cmd_evaluate)


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
    if args.volumes:
        return evaluate_volumes(args)
    with read_label_stack(args.prediction) as prediction, \
            read_label_stack(args.reference) as reference:
        reference_index, missing = match_frames(reference, prediction)
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
            say(args, f"objects: classes {foreground or 'none'} of {args.prediction} (class "
                       f"{background}, the most frequent, is background; choose with "
                       "--foreground or pass --instances for instance labels)")

        seen = set()

        def predicted_instances(t):
            labels = prediction.read(t)
            if args.instances:
                return labels
            seen.update(np.unique(labels).tolist())
            return label_instances(labels, foreground=foreground)

        result = seg_score(_LazyFrames(len(reference_index),
                                       lambda t: reference.read(reference_index[t])),
                           _LazyFrames(len(prediction), predicted_instances), per_frame=True)
        absent = [value for value in (foreground or []) if value not in seen]
        if not args.instances and absent:
            raise CommandError(
                f"--foreground {' '.join(map(str, absent))}: no pixel of {args.prediction} has "
                f"that class (its frames hold {', '.join(map(str, sorted(seen))) or 'nothing'}); "
                "give the class value(s) of the objects")
        if not args.quiet:
            width = max(len(name) for name in prediction.names())
            print(f"{'frame':<{width}}  objects  SEG")
            for t, (score, n_objects) in enumerate(zip(result.per_frame, result.n_objects)):
                print(f"{prediction.name(t):<{width}}  {n_objects:7d}  {score:.4f}")
        print(f"SEG {result.score:.4f} over {int(result.n_objects.sum())} objects in "
              f"{len(prediction)} frames")
    return 0
