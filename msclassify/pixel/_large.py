"""One image larger than memory, predicted chunk by chunk into a resumable store, here or on Dask.

The driver reads each chunk's window from the (lazy) image, the prediction runs
here or on a Dask worker (`msclassify.pixel.batch`'s model plugin: the model
travels once, as its file's bytes), and the driver writes the chunk to the
store. So workers need neither the input nor the output on their file system,
and the store is written by one process, which also knows what is done: a
re-run skips the finished chunks. Memory: one window and its features per
prediction in flight (docs/large_images.md, *Memory*).
"""

from concurrent.futures import ThreadPoolExecutor
from ._chunks import ChunkPlan, _read, feature_halos, model_plan, predict_chunk
from .batch import _run_on_cluster, model_record

__all__ = ["large_provenance", "predict_to_store"]

def large_provenance(model_file, image, chunks, probabilities):
    """What makes a chunked prediction, for its store's record (`msclassify.io.ChunkedLabelWriter`).

    The model file's SHA-256 and ``image.identity()`` (a `msclassify.io.LazyImage`'s:
    description, shape, dtype, a fingerprint of its pixels); paths are recorded for
    messages only, so a moved model or input of the same content resumes.

    Parameters
    ----------
    model_file : str, Path or msclassify.modelfile.ModelFile
    image : msclassify.io.LazyImage
    chunks : (int, int)
    probabilities : bool
    """
    return {"model": model_record(model_file), "input": image.identity(),
            "chunks": [int(c) for c in chunks], "probabilities": bool(probabilities)}


def _outputs(probabilities):
    return ("class", "proba") if probabilities else ("class",)


def predict_to_store(model, image, writer, *, probabilities=False, client=None, model_bytes=None,
                     on_chunk=None, completed=None):
    """Predict every chunk of ``image`` that ``writer`` does not hold yet, and write it.

    Parameters
    ----------
    model : PixelClassifier
    image : array_like
        ``(H, W)`` or ``(H, W, C)``, an ndarray or a lazy image (`msclassify.io.open_image`,
        zarr, h5py), read window by window.
    writer : msclassify.io.ChunkedLabelWriter
        Anything with ``shape``, ``chunks``, ``completed()`` and
        ``write_chunk(index, labels, probabilities=None)``; its chunks are the plan's.
    probabilities : bool, optional
        Also write class probabilities (``writer`` must have ``n_classes``).
    client : distributed.Client, optional
        Predict on this Dask cluster; ``model_bytes`` (the model file's content) are
        then required.
    on_chunk : callable, optional
        ``on_chunk(index)`` after each chunk is written (progress bars).
    completed : set of tuple, optional
        The chunks ``writer`` already holds, if the caller asked it (default:
        ``writer.completed()``, which reads the store's markers).

    Returns
    -------
    int
        Chunks written.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from msclassify import PixelClassifier
    >>> from msclassify.io import ChunkedLabelWriter
    >>> image = np.zeros((96, 80)); image[20:70, 10:60] = 1
    >>> labels = np.zeros((96, 80), np.uint8); labels[:3] = 1; labels[40:50, 30:40] = 2
    >>> clf = PixelClassifier("fast", n_estimators=5, random_state=0).fit(image, labels)
    >>> path = os.path.join(tempfile.mkdtemp(), "out.zarr")
    >>> writer = ChunkedLabelWriter(path, image.shape, (48, 48), clf.classes_, dtype=np.uint8)
    >>> predict_to_store(clf, image, writer), predict_to_store(clf, image, writer)
    (4, 0)
    """
    groups = feature_halos(model)
    plan = model_plan(model, image.shape, writer.chunks, groups)
    if tuple(writer.shape) != plan.shape:
        raise ValueError(f"the writer is for a {writer.shape} image, this one is {plan.shape}")
    done = writer.completed() if completed is None else completed
    todo = [index for index in plan if index not in done]
    outputs = _outputs(probabilities)
    if client is None:
        return _here(model, image, plan, todo, writer, outputs, groups, on_chunk)
    if model.bank_.grid is not None:
        raise ValueError("a volume is predicted chunk by chunk in this process; leave out "
                         "client (Dask clusters predict 2-D images)")
    if model_bytes is None:
        raise ValueError("predicting on a Dask cluster needs model_bytes (the model file's "
                         "content), which are shipped to the workers")
    return _on_cluster(client, model_bytes, image, plan, todo, writer, outputs, on_chunk)


def _read_window(image, plan, index):
    window = plan.window(index)
    return _Window(_read(image, window), tuple(w.start for w in window), plan.shape)


def _here(model, image, plan, todo, writer, outputs, groups, on_chunk):
    """Predict in this process, reading the next window and writing the last chunk on two
    threads meanwhile (zarr's and h5py's decoding and compression overlap the prediction;
    one chunk is read ahead and one written behind, so memory holds at most three)."""
    with ThreadPoolExecutor(1) as reader, ThreadPoolExecutor(1) as writing:
        ahead = reader.submit(_read_window, image, plan, todo[0]) if todo else None
        behind = None
        for position, index in enumerate(todo):
            window = ahead.result()
            if position + 1 < len(todo):
                ahead = reader.submit(_read_window, image, plan, todo[position + 1])
            results = predict_chunk(model, window, plan, index, outputs, groups)
            if behind is not None:
                _finish(behind, on_chunk)
            behind = (writing.submit(writer.write_chunk, index, *results), index)
        if behind is not None:
            _finish(behind, on_chunk)
    return len(todo)


def _finish(written, on_chunk):
    future, index = written
    future.result()
    if on_chunk is not None:
        on_chunk(index)


class _Window:
    """The part of an image a worker was sent, addressed in the whole image's coordinates."""

    def __init__(self, data, origin, shape):
        self.data, self.origin = data, origin
        self.shape = tuple(shape) + data.shape[len(origin):]

    def __getitem__(self, window):
        return self.data[tuple(slice(w.start - o, w.stop - o)
                               for w, o in zip(window, self.origin))]


def _predict_remote(data, origin, shape, chunks, halo, index, plugin_name, outputs):
    """Dask task: one chunk's outputs from its window (``data`` at ``origin``)."""
    import numba
    from distributed import get_worker

    plugin = get_worker().plugins[plugin_name]
    with plugin.lock:
        numba.set_num_threads(plugin.numba_threads)
        plan = ChunkPlan(shape, chunks, halo)
        return predict_chunk(plugin.model, _Window(data, origin, shape), plan, index, outputs)


def _on_cluster(client, model_bytes, image, plan, todo, writer, outputs, on_chunk):
    written = 0

    def submit(index, plugin_name):
        window = plan.window(index)
        return client.submit(_predict_remote, _read(image, window),
                             tuple(w.start for w in window), plan.shape, plan.chunks, plan.halo,
                             index, plugin_name, outputs,
                             key=f"msclassify-chunk-{plugin_name[-8:]}-{index[0]}-{index[1]}",
                             pure=False)

    def finish(index, results):
        nonlocal written
        writer.write_chunk(index, *results)
        written += 1
        if on_chunk is not None:
            on_chunk(index)

    _run_on_cluster(client, model_bytes, todo, submit, finish, lambda index: f"chunk {index}",
                   "use smaller chunks or fewer workers per machine")
    return written
