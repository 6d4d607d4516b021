"""Chunked prediction into each output format: OME-Zarr, HDF5 and a tiled pyramidal TIFF.

The same job as ``bench_large.py``'s "chunked" rows (the default `PixelClassifier`
trained on a real ``isbi2012_em`` frame, an OME-Zarr mosaic of the EM frames built in
a temporary folder), written by `msclassify.io.open_chunk_writer` to ``OUT.zarr``,
``OUT.h5`` and ``OUT.tif`` (with the probabilities when ``--probabilities``), each run
in its own process so its peak RSS is its own, the formats alternating over
``--rounds``. Timed: everything, reading, predicting and writing (for the TIFF, also
writing the file from its hidden store at the end). The labels of every format are
checked equal. Results: ``benchmarks/results/large_outputs.json`` and a table.

    python benchmarks/bench_large_outputs.py                 # 4096x4096, 1024 chunks
    python benchmarks/bench_large_outputs.py --size 8192 --rounds 3
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import print_table, write_results
from bench_large import _peak_mb, build_mosaic, run_child, train_model

FORMATS = {"zarr": "out.zarr", "hdf5": "out.h5", "tiff": "out.tif"}


def child(kind, model_path, image_path, out, chunks, probabilities):
    from msclassify import load_model
    from msclassify.io import open_chunk_writer, open_image
    from msclassify.pixel import label_dtype, predict_chunks, predict_to_store

    model = load_model(model_path)
    image = open_image(image_path)
    predict_chunks(model, np.asarray(image[:512, :512]), 256)      # compile and warm up
    rss_before = _peak_mb()
    probabilities = probabilities == "1"
    start = time.perf_counter()
    with open_chunk_writer(out, image.shape, (chunks, chunks), model.classes_,
                           dtype=label_dtype(model.classes_),
                           n_classes=len(model.classes_) if probabilities else None) as writer:
        predict_to_store(model, image, writer, probabilities=probabilities)
    seconds = time.perf_counter() - start
    labels = open_image(f"{out}/labels/classes" if kind == "zarr" else
                        f"{out}:/labels" if kind == "hdf5" else out)
    checksum = int(np.asarray(labels[::97, ::89]).astype(np.int64).sum())
    size = sum(f.stat().st_size for f in Path(out).parent.rglob("*") if f.is_file()
               and "em_" not in str(f) and not f.name.endswith(".msc"))
    return {"seconds": seconds, "peak_rss_mb": _peak_mb(), "rss_before_mb": rss_before,
            "checksum": checksum, "output_mb": size / 1e6}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--chunks", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--probabilities", action="store_true")
    parser.add_argument("--tmp", default=None, help="folder for the mosaic (default: a temp dir)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, model, image, out, chunks, probabilities = args.child
        print(json.dumps(child(kind, model, image, out, int(chunks), probabilities)))
        return
    folder = Path(tempfile.mkdtemp(prefix="bench_large_outputs_", dir=args.tmp))
    rows = []
    try:
        model = folder / "em.msc"
        train_model(model)
        image = build_mosaic(folder / f"em_{args.size}.zarr", args.size)
        for _ in range(args.rounds):
            for kind, name in FORMATS.items():
                run = folder / f"run_{kind}"
                run.mkdir()
                result = run_child([kind, model, image, run / name, args.chunks,
                                    int(args.probabilities)], script=__file__)
                shutil.rmtree(run)
                row = {"format": kind, "size": args.size, "chunks": args.chunks,
                       "probabilities": args.probabilities, **result,
                       "mpixel_per_s": args.size ** 2 / 1e6 / result["seconds"],
                       "load_average": round(os.getloadavg()[0], 2)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert len({row["checksum"] for row in rows}) == 1, "the formats hold different labels"
    print_table(rows, ["format", "size", "chunks", "probabilities", "seconds", "mpixel_per_s",
                       "peak_rss_mb", "output_mb", "load_average"])
    write_results("large_outputs", {"numba_threads": os.environ.get("NUMBA_NUM_THREADS"),
                                    "rows": rows})


if __name__ == "__main__":
    sys.exit(main())
