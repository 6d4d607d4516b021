"""``msclassify demo``: train on the sample fly frames, report SEG, cost and speed, write PNGs."""

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..datasets import load_sample_flies
from ..io import write_atomically
from ..metrics import label_instances, seg_score
from ..objects import ObjectPipeline, ObjectTracker, write_table
from ..pixel import PixelClassifier
from ..plotting import agreement_overlay, cost_map_figure, tracks_figure
from ._common import (CommandError, make_output_folder, progress, say, training_progress,
                      write_png)

_FLY = 2  # class value of "fly" in the sample data's scribbles (1 = background)
_MIN_FLY = 500  # pixels: a sample fly covers about 2500
_DEMO_FILES = ("model.msc", "overlay.png", "cost_map.png", "objects.csv", "tracks.png")
_RECORD = "msclassify_demo.json"  # what the demo wrote into -o: only those files are replaced


def add_demo_command(commands, quiet):
    """Add ``demo`` to the ``msclassify`` sub-parsers ``commands``."""
    demo = commands.add_parser(
        "demo", parents=[quiet], help="train on the sample fly frames and report SEG, cost, speed",
        description="Train a pixel classifier on the scribbles of the synthetic sample fly "
                    "frames, predict the other frames and report SEG against the exact masks, "
                    "the evaluation cost and frames/s; writes an overlay and a cost map (PNG), "
                    "the table of the flies in every frame with their tracks (CSV) and a plot "
                    "of the tracks, and the model.")
    demo.add_argument("-o", "--output", default="msclassify-demo",
                      help="folder for overlay.png, cost_map.png, objects.csv, tracks.png and "
                           "model.msc; a file of those names the demo did not write there is "
                           "never replaced (default: %(default)s)")
    demo.set_defaults(run=_cmd_demo)


def _check_demo_folder(out):
    """CommandError if writing the demo's files into ``out`` would replace a file of the user's.

    The demo records the SHA-256 of every file it writes in ``msclassify_demo.json``;
    only a file that still matches its record is replaced.
    """
    record = _demo_record(out)
    for name in (*_DEMO_FILES, _RECORD):
        path = out / name
        if not os.path.lexists(path):
            continue
        if name == _RECORD:
            if record is None:
                raise CommandError(f"{path} exists but is not a record msclassify demo wrote; "
                                   "choose another folder with -o")
            continue
        if path.is_symlink() or not path.is_file() or record.get(name) != _digest(path):
            raise CommandError(f"{path} exists and was not written by msclassify demo (or was "
                               "changed since), so it is never replaced: choose another "
                               "folder with -o")


def _demo_record(out):
    """{file name: SHA-256} of the files the demo wrote into ``out`` ({} if none)."""
    try:
        record = json.loads((out / _RECORD).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != "msclassify-demo":
        return None
    files = record.get("files")
    return files if isinstance(files, dict) else None


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()  # a few kB each


def _record_demo_file(out, path):
    record = _demo_record(out) or {}
    record[path.name] = _digest(path)
    text = json.dumps({"format": "msclassify-demo", "files": record}, indent=1).encode()
    write_atomically(out / _RECORD, lambda file: file.write(text))


def _cmd_demo(args):
    start = time.perf_counter()
    out = Path(args.output)
    make_output_folder(out)
    _check_demo_folder(out)
    frames, masks, scribbles = load_sample_flies()
    scribbled = [t for t in range(len(frames)) if scribbles[t].any()]
    held_out = [t for t in range(len(frames)) if t not in scribbled]
    height, width = frames.shape[1:]
    say(args, f"sample data: {len(frames)} synthetic fly-arena frames of {width}x{height}; "
               f"scribbles on frame(s) {_list(scribbled)}")
    counts = {value: int(np.count_nonzero(scribbles[scribbled] == value)) for value in (1, _FLY)}
    say(args, f"training on {counts[1]} background and {counts[_FLY]} fly pixels "
               "(a first run also compiles Numba kernels) ...")
    clf = PixelClassifier(random_state=0)
    fit_start = time.perf_counter()
    with progress(100, "training", args.quiet, unit="%") as bar:     # stage and ETA, as train
        clf.fit([frames[t] for t in scribbled], [scribbles[t] for t in scribbled],
                progress=training_progress(bar))
    say(args, f"trained in {time.perf_counter() - fit_start:.1f} s: {clf.booster_.n_trees} "
               f"trees using {len(clf.features_used_)} of {len(clf.bank_)} candidate features "
               f"({', '.join(clf.features_used_)})")

    clf.predict(frames[held_out[0]])  # compiles the prediction kernels outside the timing
    tic = time.perf_counter()
    predictions = np.stack([clf.predict(frames[t]) for t in held_out])
    elapsed = time.perf_counter() - tic
    say(args, f"predicted frames {_list(held_out)}: {len(held_out) / elapsed:.1f} frames/s "
               f"({elapsed / len(held_out) * 1000:.0f} ms per {width}x{height} frame)")

    result = seg_score(masks[held_out], label_instances(predictions, foreground=_FLY),
                       per_frame=True)
    per_frame = " ".join(f"{score:.3f}" for score in result.per_frame)
    say(args, f"SEG vs the exact masks: {result.score:.3f} over {int(result.n_objects.sum())} "
               f"flies (per frame: {per_frame})")

    shown = held_out[0]
    cost = clf.prediction_cost(frames[shown])
    pixels = height * width
    say(args, f"evaluation cost: {cost.evaluation / pixels:.2f} operations per pixel for the "
               f"trees ({cost.n_node_evaluations / pixels:.2f} node evaluations per pixel, "
               f"{clf.booster_.n_trees} trees) + {cost.features / pixels:.2f} for the features "
               f"= {cost.total / pixels:.2f}")

    model_path, overlay_path, cost_path, table_path, plot_path = (out / name
                                                                  for name in _DEMO_FILES)
    _check_demo_folder(out)  # again: the folder may have changed while training
    _write_tracks(args, out, table_path, plot_path, frames,
                  [predictions[held_out.index(t)] if t in held_out else clf.predict(frames[t])
                   for t in range(len(frames))])
    clf.save(model_path)
    _record_demo_file(out, model_path)
    write_png(overlay_path, agreement_overlay(frames[shown], predictions[0] == _FLY,
                                              masks[shown] > 0))
    _record_demo_file(out, overlay_path)
    write_png(cost_path, cost_map_figure(clf.cost_map(frames[shown]),
                                         f"evaluation cost, frame {shown}"), crop=True)
    _record_demo_file(out, cost_path)
    say(args, f"wrote {overlay_path} (frame {shown}: green = fly found, red = background "
               "called fly, blue = fly missed)")
    say(args, f"wrote {cost_path} (evaluation operations per pixel, frame {shown})")
    say(args, f"wrote {model_path}; try: msclassify info {model_path}")
    say(args, f"done in {time.perf_counter() - start:.1f} s")
    return 0


def _write_tracks(args, out, table_path, plot_path, frames, predictions):
    """The flies of every frame, measured and tracked: ``table_path`` (CSV) and ``plot_path``."""
    pipeline = ObjectPipeline(_FLY, min_size=_MIN_FLY, tracker=ObjectTracker(search_range=50))
    tables = [pipeline.frame_table(labels, frame, None, t)
              for t, (frame, labels) in enumerate(zip(frames, predictions))]
    table = pd.concat(tables, ignore_index=True)
    write_table(table, table_path, overwrite=True)
    _record_demo_file(out, table_path)
    write_png(plot_path, tracks_figure(frames[-1], table, f"tracks over {len(frames)} frames "
                                                          "(dot: last position)"), crop=True)
    _record_demo_file(out, plot_path)
    n_tracks = int(table["track"].max()) + 1 if len(table) else 0
    say(args, f"wrote {table_path} ({len(table)} objects of at least {_MIN_FLY} px in "
               f"{len(frames)} frames, {n_tracks} tracks) and {plot_path}")


def _list(indices):
    return ", ".join(str(t) for t in indices)
