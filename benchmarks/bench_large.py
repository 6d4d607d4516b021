"""Images larger than memory: time and peak RSS of chunked prediction against image and chunk size.

Builds, in a temporary folder (never in the repository), OME-Zarr (NGFF 0.5) mosaics
tiled from the 15 real 512x512 frames of ``isbi2012_em`` (uint16, the frames times 257;
each tile flipped by its position), trains the default `PixelClassifier` on scribbles
drawn from frame 0's membrane mask, and measures, each run in its own process so its
peak RSS is its own:

* ``in memory``: the image read whole into an ndarray and ``model.predict`` on it
  (the path a new user takes; only for sizes that fit);
* ``chunked``: ``predict_to_store`` from the OME-Zarr into an OME-Zarr label store
  (what ``msclassify predict IMAGE.zarr -o OUT.zarr --chunks C`` runs), I/O included;
* ``dask N``: the same on a local Dask cluster of N workers (cluster start-up excluded);
* ``skimage + RF (dask map_overlap)``: what a user would otherwise write: scikit-image's
  ``multiscale_basic_features`` (intensity, texture, sigma 1-16) + a
  RandomForest(50 trees, depth 10) trained on the same scribbles, applied with
  ``dask.array.map_overlap`` (depth 64 px, the features' reach) and written with
  ``to_zarr``.

The in-memory and chunked runs on the same pixels alternate (``--rounds``), so a change
in the machine's load hits both. Results: ``benchmarks/results/large.json``, a
Markdown table, and ``docs/large_images.png``.

    python benchmarks/bench_large.py                     # the full run (a 2 GB image)
    python benchmarks/bench_large.py --quick             # a few minutes, small images
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import REPO, SHARED_DATA, print_table, write_results

TILE = 512
SCRIBBLES_PER_CLASS = 1500


def _em_tiles():
    import imageio.v3 as iio
    folder = SHARED_DATA / "isbi2012_em"
    return [iio.imread(folder / f"image_{i}.png").astype(np.uint16) * 257 for i in range(15)]


def _scribbles():
    import imageio.v3 as iio
    membrane = iio.imread(SHARED_DATA / "isbi2012_em" / "label_0.png") == 0
    labels = np.zeros(membrane.shape, np.uint8)
    rng = np.random.default_rng(0)
    for value, mask in ((1, ~membrane), (2, membrane)):
        ys, xs = np.nonzero(mask)
        pick = rng.choice(ys.size, SCRIBBLES_PER_CLASS, replace=False)
        labels[ys[pick], xs[pick]] = value
    return labels


def _tile(tiles, row, col):
    tile = tiles[(row * 7 + col) % len(tiles)]
    return tile[::-1] if (row + col) % 2 else tile[:, ::-1] if row % 3 == 0 else tile


def build_mosaic(path, size, chunk=1024):
    """An OME-Zarr 0.5 image of ``size`` x ``size`` uint16 pixels tiled from the EM frames."""
    import zarr
    tiles = _em_tiles()
    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    root.attrs["ome"] = {"version": "0.5", "multiscales": [{
        "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
        "datasets": [{"path": "0", "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, 1.0]}]}]}]}
    array = root.create_array("0", shape=(size, size), chunks=(chunk, chunk), dtype=np.uint16)
    block = np.empty((chunk, min(size, 8 * chunk)), np.uint16)
    for y in range(0, size, chunk):
        for x0 in range(0, size, block.shape[1]):
            width = min(block.shape[1], size - x0)
            for ty in range(chunk // TILE):
                for tx in range(width // TILE):
                    block[ty * TILE:(ty + 1) * TILE, tx * TILE:(tx + 1) * TILE] = _tile(
                        tiles, (y // TILE) + ty, (x0 // TILE) + tx)
            array[y:y + chunk, x0:x0 + width] = block[:min(chunk, size - y), :width]
    return path


def train_model(path):
    from msclassify import PixelClassifier
    image = _em_tiles()[0]
    PixelClassifier(random_state=0).fit(image, _scribbles()).save(path)


# -- the measured runs, each in a child process ----------------------------------------------

def _peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(kind, model_path, image_path, out, chunks, workers):
    from msclassify import load_model
    from msclassify.io import ChunkedLabelWriter, open_image
    from msclassify.pixel import label_dtype, predict_chunks, predict_to_store

    model = load_model(model_path)
    image = open_image(image_path)
    warm = np.asarray(image[:512, :512])
    predict_chunks(model, warm, 256)                       # compile and warm up
    start_rss = _peak_mb()
    if kind == "memory":
        data = np.asarray(image[:, :])
        start = time.perf_counter()
        labels = model.predict(data)
        seconds = time.perf_counter() - start
        checksum = int(labels[::97, ::89].astype(np.int64).sum())
    else:
        writer = ChunkedLabelWriter(out, image.shape, (chunks, chunks), model.classes_,
                                    dtype=label_dtype(model.classes_))
        if kind == "chunked":
            start = time.perf_counter()
            predict_to_store(model, image, writer)
            seconds = time.perf_counter() - start
        else:
            from msclassify.pixel.batch import local_cluster
            with local_cluster(workers) as client:
                start = time.perf_counter()
                predict_to_store(model, image, writer, client=client,
                                 model_bytes=Path(model_path).read_bytes())
                seconds = time.perf_counter() - start
        import zarr
        labels = zarr.open_array(f"{out}/labels/classes/0", mode="r")
        checksum = int(labels[::97, ::89].astype(np.int64).sum())
    return {"seconds": seconds, "peak_rss_mb": _peak_mb(), "rss_before_mb": start_rss,
            "checksum": checksum}


def child_peer(image_path, out):
    """scikit-image features + RandomForest via dask.array.map_overlap."""
    import dask.array as da
    import zarr
    from skimage.feature import multiscale_basic_features
    from sklearn.ensemble import RandomForestClassifier

    def features(block):
        return multiscale_basic_features(block.astype(np.float32) / 65535, intensity=True,
                                         edges=False, texture=True, sigma_min=1, sigma_max=16)

    scribbles = _scribbles()
    train = features(_em_tiles()[0])
    forest = RandomForestClassifier(n_estimators=50, max_depth=10, n_jobs=-1, random_state=0)
    forest.fit(train[scribbles > 0], scribbles[scribbles > 0])
    start_rss = _peak_mb()
    source = zarr.open_group(str(image_path), mode="r")["0"]
    image = da.from_zarr(source)

    def predict(block):
        f = features(block)
        return forest.predict(f.reshape(-1, f.shape[-1])).reshape(block.shape).astype(np.uint8)

    start = time.perf_counter()
    labels = da.map_overlap(predict, image, depth=64, boundary="reflect", dtype=np.uint8)
    labels.to_zarr(str(out), overwrite=True)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_rss_mb": _peak_mb(), "rss_before_mb": start_rss}


def run_child(args_list, script=__file__):
    """Run ``script --child ARGS`` in its own process; the JSON it prints last."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, script, "--child", *map(str, args_list)],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"child {args_list} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=32768,
                        help="side of the large image (32768: 2 GiB of uint16)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192],
                        help="sides of the smaller images, in memory and chunked")
    parser.add_argument("--chunks", type=int, nargs="+", default=[512, 1024, 2048])
    parser.add_argument("--chunk", type=int, default=2048, help="chunk of the large run")
    parser.add_argument("--peer-size", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tmp", default=None, help="folder for the mosaics (default: a temp dir)")
    parser.add_argument("--quick", action="store_true",
                        help="--size 8192 --sizes 2048 4096 --chunks 1024 --rounds 1")
    parser.add_argument("--workers-only", action="store_true",
                        help="only in-process vs 1 vs 2 Dask workers on the last of --sizes with "
                             "--chunk, --rounds times interleaved (results/large_workers.json)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        result = child_peer(*rest) if kind == "peer" else child(
            kind, rest[0], rest[1], rest[2], int(rest[3]), int(rest[4]))
        print(json.dumps(result))
        return
    if args.quick:
        args.size, args.sizes, args.chunks, args.rounds = 8192, [2048, 4096], [1024], 1
    folder = Path(tempfile.mkdtemp(prefix="bench_large_", dir=args.tmp))
    rows = []
    try:
        model = folder / "em.msc"
        train_model(model)
        sizes = [args.sizes[-1]] if args.workers_only else \
            sorted(set(args.sizes + [args.size, args.peer_size]))
        built = {}
        for size in sizes:
            start = time.perf_counter()
            built[size] = build_mosaic(folder / f"em_{size}.zarr", size)
            print(f"built {size}x{size} in {time.perf_counter() - start:.0f} s", flush=True)

        def measure(kind, size, chunks=0, workers=0):
            out = folder / f"out_{kind}_{size}_{chunks}_{workers}.zarr"
            result = run_child([kind, model, built[size], out, chunks, workers])
            shutil.rmtree(out, ignore_errors=True)
            row = {"method": kind if kind != "dask" else f"dask {workers}", "size": size,
                   "megapixels": size * size / 1e6, "chunks": chunks or "",
                   "seconds": result["seconds"],
                   "mpixel_per_s": size * size / 1e6 / result["seconds"],
                   "peak_rss_mb": result["peak_rss_mb"], "checksum": result["checksum"],
                   "load_average": round(os.getloadavg()[0], 2)}
            rows.append(row)
            print(json.dumps(row), flush=True)
            return row

        if args.workers_only:
            for _ in range(args.rounds):
                local = measure("chunked", args.sizes[-1], args.chunk)
                for workers in (1, 2):
                    dask = measure("dask", args.sizes[-1], args.chunk, workers)
                    assert dask["checksum"] == local["checksum"], "Dask != in-process"
            return _report(rows, "large_workers", {"numba_threads":
                                                   os.environ.get("NUMBA_NUM_THREADS")})
        # The same pixels in memory and chunked, alternating.
        for size in args.sizes:
            for _ in range(args.rounds):
                memory = measure("memory", size)
                for chunks in args.chunks:
                    chunked = measure("chunked", size, chunks)
                    assert chunked["checksum"] == memory["checksum"], "chunked != whole image"
        for workers in (1, 2):
            measure("dask", args.sizes[-1], args.chunk, workers)
        peer = run_child(["peer", built[args.peer_size], folder / "peer.zarr"])
        rows.append({"method": "skimage + RF (dask map_overlap)", "size": args.peer_size,
                     "megapixels": args.peer_size ** 2 / 1e6, "chunks": "dask auto",
                     "seconds": peer["seconds"],
                     "mpixel_per_s": args.peer_size ** 2 / 1e6 / peer["seconds"],
                     "peak_rss_mb": peer["peak_rss_mb"],
                     "load_average": round(os.getloadavg()[0], 2)})
        print(json.dumps(rows[-1]), flush=True)
        measure("chunked", args.peer_size, 1024)
        measure("chunked", args.size, args.chunk)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    _report(rows, None, {})
    ratios = throughput_ratios(rows)
    for chunks, values in ratios.items():
        print(f"chunked {chunks} / in memory, throughput on the same pixels: median "
              f"{np.median(values):.2f} over {len(values)} pairs ({min(values):.2f}-"
              f"{max(values):.2f})")
    write_results("large_quick" if args.quick else "large", {
        "image_bytes": args.size ** 2 * 2, "numba_threads": os.environ.get("NUMBA_NUM_THREADS"),
        "rows": rows, "throughput_ratios": ratios})
    _plot(rows, REPO / "docs" / ("large_images_quick.png" if args.quick else "large_images.png"))


def _report(rows, name, extra):
    """Print the table of ``rows``; write them to results/``name``.json when named."""
    print_table(rows, ["method", "size", "megapixels", "chunks", "seconds", "mpixel_per_s",
                       "peak_rss_mb", "load_average"])
    if name is not None:
        write_results(name, {**extra, "rows": rows})


def throughput_ratios(rows):
    """``{chunks: [chunked / in-memory throughput]}`` for each in-memory run and the chunked
    runs on the same image that followed it in the same round."""
    ratios, memory = {}, None
    for row in rows:
        if row["method"] == "memory":
            memory = row
        elif row["method"] == "chunked" and memory is not None and row["size"] == memory["size"]:
            ratios.setdefault(row["chunks"], []).append(row["mpixel_per_s"]
                                                        / memory["mpixel_per_s"])
        else:
            memory = None
    return ratios


def _plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for method in dict.fromkeys(r["method"] for r in rows):
        for chunks in dict.fromkeys(r["chunks"] for r in rows if r["method"] == method):
            points = sorted((r["megapixels"], r["peak_rss_mb"], r["mpixel_per_s"]) for r in rows
                            if r["method"] == method and r["chunks"] == chunks)
            label = f"{method} {chunks}".strip()
            left.plot([p[0] for p in points], [p[1] for p in points], "o-", label=label)
            right.plot([p[0] for p in points], [p[2] for p in points], "o-", label=label)
    for axis, title in ((left, "peak RSS (MB)"), (right, "Mpixel / s")):
        axis.set_xscale("log")
        axis.set_xlabel("image size (Mpixel)")
        axis.set_title(title)
    left.set_yscale("log")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
