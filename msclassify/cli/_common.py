"""What every sub-command shares: the error it raises, progress bars, messages, option types."""

import argparse
import sys
import time

from ..checks import check_int
from ..io import FrameReadError, FrameWriteError
from ..plotting import save_png

PROG = "msclassify"
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


class CommandError(ValueError):
    """A command cannot run as asked; the message says what to change."""


def progress(total, description, quiet, initial=0, unit="frame"):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc=description, unit=unit, disable=quiet,
                file=sys.stderr, dynamic_ncols=True, smoothing=0.1)


def training_callback(bar):
    """``callback(iteration, n)`` for `PixelClassifier.fit` that advances ``bar``.

    It returns None: a truthy value would stop training (``tqdm.update`` returns True).
    """
    def callback(iteration, n_iterations):
        bar.total = n_iterations       # cost_tradeoff="auto" counts the trees of all its fits
        bar.update(iteration - bar.n)
    return callback


def training_progress(bar):
    """``progress(report)`` for `PixelClassifier.fit` that shows stage, percent and ETA on ``bar``.

    ``bar`` counts percent (total 100); its description is the stage ("features",
    "teacher", "distillation", "model", "μ path 3/5") and its postfix the ETA the
    fit estimates (`msclassify.pixel.TrainingProgress`). A stage is drawn when it starts:
    tqdm redraws at most every 0.1 s, so a quick stage would not be seen.
    """
    shown = set()

    def progress(report):
        if report.stage != "done":
            bar.set_description_str(f"training: {report.stage}",
                                    refresh=report.stage not in shown)
            shown.add(report.stage)
        if report.eta_s is not None:
            bar.set_postfix_str(f"ETA {report.eta_s:.0f} s", refresh=False)
        bar.update(round(100 * report.fraction) - bar.n)
    return progress


def tradeoff_lines(model):
    """How a fitted `PixelClassifier`'s cost_tradeoff came about: a summary, then its path table."""
    if model.tradeoff_path_ is None:
        return [f"cost tradeoff: {model.cost_tradeoff_:g} (fixed)"]
    lines = [f"cost tradeoff: {model.cost_tradeoff_:g} (chosen automatically): "
             f"{model.tradeoff_reason_}"]
    if model.tradeoff_path_:
        lines.append("  cost_tradeoff  score   scribbles  teacher  ops/pixel  features")
        for point in model.tradeoff_path_:
            mark = "*" if point["cost_tradeoff"] == model.cost_tradeoff_ else " "
            lines.append(f"{mark} {point['cost_tradeoff']:<12g}  {point['score']:.4f}  "
                         f"{point['scribble_score']:.4f}     {point['teacher_agreement']:.4f}   "
                         f"{point['cost_per_pixel']:<9.3g}  {len(point['features_used'])}")
    return lines


def run_prediction(args, cluster, total, done, unit, where, predict, interrupted=None):
    """Run ``predict(client, on_item)`` over the ``total - done`` frames or chunks (``unit``)
    not yet in ``where``, as ``msclassify predict`` does: say what is resumed (or that
    nothing is left), show progress, and on Ctrl-C or a read or worker error say how many
    are complete and that the same command resumes.

    ``cluster`` is a context manager giving a Dask client or None; ``predict`` calls
    ``on_item(index)`` after each item is written; ``interrupted`` replaces the Ctrl-C
    message. Returns ``(status, written, seconds)``.
    """
    from ..pixel import batch

    if done == total:
        say(args, f"all {total} {unit}s are already in {where}; nothing to do")
        return 0, 0, 0.0
    if done:
        say(args, f"resuming: {done} of {total} {unit}s are already in {where}")
    written = 0

    def on_item(index):
        nonlocal written
        written += 1
        bar.update(1)

    start = time.perf_counter()
    with progress(total, "predicting", args.quiet, initial=done, unit=unit) as bar:
        try:
            with cluster as client:
                predict(client, on_item)
        except KeyboardInterrupt:
            bar.close()
            print(f"{PROG} predict: interrupted; " + (
                interrupted or f"{done + written} of {total} {unit}s are complete in {where}. "
                "Run the same command again to resume."), file=sys.stderr)
            return EXIT_INTERRUPTED, written, time.perf_counter() - start
        except (FrameReadError, batch.BatchError) as exc:
            error = FrameReadError if isinstance(exc, FrameReadError) else CommandError
            resume = (f"; the {done + written} {unit}s written to {where} stay valid and a "
                      "re-run resumes after them") if done + written else ""
            raise error(f"{exc}{resume}") from None
    return 0, written, time.perf_counter() - start


def say(args, message):
    if not args.quiet:
        print(message, flush=True)


def positive_int(text):
    """An argparse ``type``: the integer >= 1 that ``text`` spells."""
    try:
        return check_int(int(text), "value")
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None


def make_output_folder(folder):
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"cannot create output folder {folder} ({exc.strerror or exc}); "
                           "choose a writable folder with -o") from None


def write_png(path, image, crop=False):
    """`msclassify.plotting.save_png`, failing with a `FrameWriteError` that says to use ``-o``."""
    try:
        save_png(path, image, crop)
    except OSError as exc:
        raise FrameWriteError(f"cannot write {path} ({exc.strerror or exc}); choose a writable "
                              "output folder with -o", errno=exc.errno,
                              filename=str(path)) from None
