"""Batch prediction: stream frames through a pixel classifier into a resumable writer.

The driver (this process) reads frames from a `msclassify.io.FrameSource` and
writes the results with a `msclassify.io.FrameWriter`, in frame order; the
prediction itself runs either here or on a Dask cluster. With Dask, workers
are pure compute: they get frames in chunks and return label images, so they
need neither the input nor the output folder on their file system, and every
frame is written by the one process that also checks what was already done.
Each write is atomic, so whatever stops a run (Ctrl-C, SIGKILL, a full disk, a
dead worker) leaves only complete frames, and a re-run skips them.

The model travels to every worker once, as the bytes of its model file inside a
worker plugin (no pickle of the model, the same loader as on the driver). One
prediction runs at a time per worker process, using that worker's share of its
machine's cores as Numba threads: ``cores // workers on the host``.
"""

import contextlib
import dataclasses
import logging
import os
import queue
import signal
import threading
import time
import uuid
from collections import deque
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..checks import available_memory, check_int
from ..modelfile import ModelFile, open_model_file
from ._apply import FramePrediction, predict_frame
from ._classifier import load_pixel_model
from ._export import FrameExport
from ._priority import lower_this_thread

__all__ = ["BatchError", "available_cores", "connect", "local_cluster", "model_record",
           "predict_frames", "predict_to_writer", "prediction_provenance"]

# Frames per Dask task: large enough that scheduling overhead (~ms) is small
# next to a prediction (~0.1 s for 1024x1024), small enough to balance load.
DEFAULT_CHUNK_SIZE = 4
# Chunks in flight per worker: one running, one queued, so a worker never
# waits for the driver; more would only hold frames in memory.
_CHUNKS_PER_WORKER = 2
# Frames read ahead of the one predicted, in this process: decoding overlaps prediction.
_READ_AHEAD = 2
# Frames predicted at once by `predict_to_writer` in this process (`_predict_here`).
_FRAMES_IN_FLIGHT = 2
# Frames `predict_frames` has handed over that may wait for its caller, and how often its
# thread, waiting for the caller to take one, checks that the caller has not stopped.
_FRAMES_WAITING = 2
_HAND_OVER_POLL_SECONDS = 0.1
# How long a run on a cluster without workers waits for one to join.
_WORKER_WAIT_SECONDS = 60
# While waiting for a chunk: how often the cluster is checked, and how long it may have no
# scheduler or no worker before the run ends (a message well within 30 s).
_POLL_SECONDS = 1.0
_LOST_SECONDS = 15.0


class BatchError(RuntimeError):
    """Batch prediction failed for a reason outside the model and the files (e.g. a dead worker)."""


def available_cores():
    """CPU cores this process may run on (respects affinity masks and CPU sets)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _frame_chunks(indices, chunk_size):
    for start in range(0, len(indices), chunk_size):
        yield indices[start:start + chunk_size]


def predict_to_writer(model, source, writer, todo, *, frame_index=None, probabilities=False,
                      client=None, model_bytes=None, chunk_size=DEFAULT_CHUNK_SIZE,
                      on_frame=None):
    """Predict frames ``todo`` of ``source`` and write each to ``writer``, in order.

    Parameters
    ----------
    model : PixelClassifier
        Used in this process; with a ``client`` only its ``classes_`` are used here.
    source : msclassify.io.FrameSource
        Anything with ``read(i)``; read in increasing order of ``i``.
    writer : msclassify.io.FrameWriter
        Anything with ``write(position, labels, probabilities=None)`` and ``dtype``.
    todo : sequence of int
        Writer positions still to do, increasing.
    frame_index : sequence of int, optional
        Source frame of every writer position (default: the same number), for
        writing a selection of the source's frames.
    probabilities : bool
        Also write class probabilities (``writer`` must be opened with ``n_classes``).
    client : distributed.Client, optional
        Predict on this Dask cluster; ``model_bytes`` (the model file's content)
        are then required and shipped to each worker once.
    chunk_size : int
        Frames per Dask task.
    on_frame : callable, optional
        ``on_frame(position)`` after each frame is written (progress bars).

    Returns
    -------
    int
        Number of frames written.

    Examples
    --------
    >>> import numpy as np
    >>> class Threshold:                      # any object with predict(frame)
    ...     def predict(self, frame):
    ...         return (frame > 1).astype(np.uint8) + 1
    >>> class Frames(list):
    ...     def read(self, i):
    ...         return self[i]
    >>> class Written(dict):
    ...     dtype = np.uint8
    ...     def write(self, position, labels, probabilities=None):
    ...         self[position] = labels
    >>> written = Written()
    >>> predict_to_writer(Threshold(), Frames([np.arange(4)] * 3), written, [0, 2])
    2
    >>> sorted(written), written[2].tolist()
    ([0, 2], [1, 1, 2, 2])
    """
    todo = [int(position) for position in todo]
    if frame_index is None:
        frame_index = _Identity()
    check_int(chunk_size, "chunk_size")
    if client is None:
        return _predict_here(model, source, writer, todo, frame_index, probabilities, on_frame)
    if model_bytes is None:
        raise ValueError("predicting on a Dask cluster needs model_bytes (the model file's "
                         "content), which are shipped to the workers")
    return _predict_on_cluster(client, model_bytes, source, writer, todo, frame_index,
                               probabilities, chunk_size, on_frame)


def predict_frames(model, source, todo, *, frame_index=None, probabilities=False, dtype=None,
                   nice=0, should_stop=None):
    """Predict frames ``todo`` of ``source`` as `predict_to_writer` does in this process
    (the next frames read ahead, two frames at a time where cores and memory allow), and
    yield each in order, for a caller that shows the frames rather than writing them (the
    napari plugin).

    The frames are predicted in a background thread (a daemon); at most
    ``_FRAMES_WAITING`` finished frames wait for the caller beside the frames in flight.
    Closing the generator (or dropping it) or a true ``should_stop()`` stops the run: the
    background thread ends after the frames in flight, without the caller waiting for them.

    Parameters
    ----------
    model, source, todo, frame_index, probabilities
        As for `predict_to_writer`.
    dtype : numpy dtype, optional
        Dtype of the labels (default: that of the model's classes).
    nice : int
        The background thread, and the threads it starts, run that many steps lower in CPU
        priority than the caller (Linux; `run_at_lower_priority`'s rule), e.g.
        `BACKGROUND_NICE` below a GUI.
    should_stop : callable, optional
        Asked in the background thread before each frame is handed over; true stops the run
        (for a caller that stops iterating without closing the generator, e.g. a napari
        worker's ``abort_requested``).

    Yields
    ------
    position : int
        The position in ``todo``'s numbering (as a writer would get it).
    prediction : FramePrediction
        Labels, and with ``probabilities`` the probabilities (uncertainty is None).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> model = SimpleNamespace(predict=lambda frame: (frame > 1).astype(np.uint8) + 1)
    >>> source = SimpleNamespace(read=lambda i: np.arange(4) + i - 1)    # frame i
    >>> [(p, r.labels.tolist()) for p, r in predict_frames(model, source, [0, 2])]
    [(0, [1, 1, 1, 2]), (2, [1, 2, 2, 2])]
    """
    handed = queue.Queue()                 # written frames (None: the end)
    room = threading.Semaphore(_FRAMES_WAITING)
    closed = threading.Event()

    def stopped():
        return closed.is_set() or (should_stop is not None and bool(should_stop()))

    def wait_for_room(position):
        # on_frame, in the background thread (never in a pool's thread, which the
        # interpreter's exit joins): the run goes on once the caller has taken a frame
        while not room.acquire(timeout=_HAND_OVER_POLL_SECONDS):
            if stopped():
                raise _Stopped
    failed = []

    def run():
        lower_this_thread(nice)
        try:
            predict_to_writer(model, source, _HandOver(handed, stopped, dtype), todo,
                              frame_index=frame_index, probabilities=probabilities,
                              on_frame=wait_for_room)
        except _Stopped:
            pass
        except BaseException as exc:       # handed to the caller's thread, raised there
            failed.append(exc)
        finally:
            handed.put(None)

    thread = threading.Thread(target=run, name="msclassify predict_frames", daemon=True)
    thread.start()
    try:
        while (item := handed.get()) is not None:
            room.release()
            yield item
        thread.join()
        if failed:
            raise failed[0]
    finally:
        closed.set()                       # closed early: the frames in flight end, unshown


class _Stopped(Exception):
    """`predict_frames`' caller stopped taking frames."""


@dataclasses.dataclass
class _HandOver:
    """A frame writer for `predict_frames`: hands each frame to the iterating thread (never
    waits: `predict_frames`' ``on_frame`` does)."""

    handed: queue.Queue
    stopped: object                 # callable: whether the caller stopped taking frames
    dtype: object = None

    def write(self, position, labels, probabilities=None):
        if self.stopped():
            raise _Stopped
        self.handed.put((position, FramePrediction(labels, probabilities, None)))


def model_record(model_file):
    """What an output records of the model that made it: its file's absolute path (for
    messages) and SHA-256 (compared on resume, so a re-saved identical model matches).

    Parameters
    ----------
    model_file : str, Path or msclassify.modelfile.ModelFile
    """
    model_file = open_model_file(model_file)
    return {"path": str(Path(model_file.path).absolute()), "sha256": model_file.sha256}


def prediction_provenance(model_file, source, frame_index, probabilities, export=None):
    """What makes the frames of a batch prediction, for its output's record (`open_writer`).

    Parameters
    ----------
    model_file : str, Path or msclassify.modelfile.ModelFile
        The model file (or its bytes, read once); recorded by its SHA-256, so a
        re-saved identical model matches.
    source : msclassify.io.FrameSource
        The input; recorded by `FrameSource.identity` (size, frame count, frame shape
        and dtype, a fingerprint of its content).
    frame_index : range
        The input frames predicted (``--frames``).
    probabilities : bool
        Whether probabilities are written too.
    export : msclassify.pixel.FrameExport, optional
        What is written of each frame, recorded unless it is the class labels
        themselves (the default export, as outputs recorded before exports).

    Returns
    -------
    dict
        ``model``, ``input``, ``frames`` ([start, stop, step]), ``probabilities``
        and ``export`` (kind, target class, minimum object size) if recorded.
        Paths are recorded for messages only: a moved model or input of the same
        content resumes.
    """
    frames = range(len(source))[frame_index] if isinstance(frame_index, slice) else frame_index
    if not isinstance(frames, range):
        raise TypeError(f"frame_index must be a range or a slice, got {type(frame_index).__name__}")
    return {"model": model_record(model_file),
            "input": source.identity(),
            "frames": [frames.start, frames.stop, frames.step],
            "probabilities": bool(probabilities),
            **({} if export is None or export == FrameExport() else
               {"export": dataclasses.asdict(export)})}


def _predict_here(model, source, writer, todo, frame_index, probabilities, on_frame):
    """`predict_to_writer` in this process, three stages at once: one thread reads the next
    frames (decoding), frames are predicted (their Numba kernels release the GIL), another
    thread writes the frame before (and measures its objects, with
    `msclassify.objects.ObjectTableWriter`).

    The first frame is predicted in this thread with all of Numba's threads. Then, when
    Numba's threading layer runs kernels from several threads at once and has two threads
    or more (decided once, after the first frame), two frames are predicted at a time, in
    two threads that share Numba's threads between them (`_FRAMES_IN_FLIGHT`): a frame's
    kernels then wait less for each other, and the cores do not idle while one frame's
    serial parts run. Prediction memory is then held for two frames: a frame starts beside
    the one in flight only while the memory available holds both frames' predictions
    (``model.prediction_bytes`` each; the frame in flight may not have taken its share
    yet), else it waits for that frame and is predicted alone, in this thread (where one
    frame that does not fit fails with predict's one-line MemoryError). Otherwise frames
    are predicted one at a time in this thread.

    Frames are read in increasing order and written in order, one write at a time; a write's
    error stops the run at the next frame. Whatever else stops this thread (a read's error,
    Ctrl-C) lets the frames already predicted be written (complete frames, which a re-run
    skips) and drops the frames read ahead.
    The writes stay in this thread if Numba's threading layer is ``workqueue``, which may not
    run parallel kernels from two threads at once (an object classifier's trees would).
    """
    if not todo:
        return 0
    reader, writing = ThreadPoolExecutor(1), ThreadPoolExecutor(1)
    predicting = None
    reads = deque(reader.submit(source.read, frame_index[p]) for p in todo[:_READ_AHEAD])
    predicted = deque()                     # (position, future) of frames being predicted
    pending = None                          # (position, future) of the write under way
    needed = None                           # prediction bytes of one frame (frames in flight)

    def write_oldest():
        nonlocal pending
        done_position, result = predicted[0]      # taken off once handed over
        labels, proba, _ = result.result()
        pending = _write(writer, done_position, labels, proba, pending, writing, on_frame)
        predicted.popleft()
    try:
        for i, position in enumerate(todo):
            frame = reads.popleft().result()
            if i + _READ_AHEAD < len(todo):
                reads.append(reader.submit(source.read, frame_index[todo[i + _READ_AHEAD]]))
            beside = predicting is not None and _room_in_flight(needed)
            if not beside:
                while predicted:                  # alone: the frame in flight ends first
                    write_oldest()
                result = Future()
                result.set_result(predict_frame(model, frame, probabilities, writer.dtype))
                predicted.append((position, result))
                if i == 0:
                    threads = _frame_threads()
                    if threads:
                        predicting = ThreadPoolExecutor(_FRAMES_IN_FLIGHT)
                        needed = _prediction_bytes(model, frame, probabilities)
            else:
                predicted.append((position, predicting.submit(
                    _predict_with_threads, threads, model, frame, probabilities,
                    writer.dtype)))
            del frame
            # write the oldest frame once the next is under way (or at the end)
            while predicted and (predicting is None or len(predicted) >= _FRAMES_IN_FLIGHT
                                 or i + 1 == len(todo)):
                write_oldest()
    except BaseException:
        # a failed read or Ctrl-C: the frames predicted before it are still written, in order
        # (none skipped: a frame whose write has begun is the pending one)
        for done_position, result in predicted:
            if pending is not None and pending[0] == done_position:
                continue
            if result.cancel() or result.exception() is not None:
                break
            labels, proba, _ = result.result()
            pending = _write(writer, done_position, labels, proba, pending, writing, on_frame)
        raise
    finally:
        reader.shutdown(wait=True, cancel_futures=True)
        if predicting is not None:
            predicting.shutdown(wait=True, cancel_futures=True)
        writing.shutdown(wait=True)         # the one write submitted finishes
        # ... and counts as written (also when a read or Ctrl-C stopped the run meanwhile)
        if pending is not None and pending[1].exception() is None and on_frame is not None:
            on_frame(pending[0])
    if pending is not None:
        pending[1].result()                 # the last write's error
    return len(todo)


def _write(writer, position, labels, proba, pending, writing, on_frame):
    """Wait for the write under way (``pending``), then write frame ``position``: in the
    writing thread if Numba allows (returns the new pending write), else here (None)."""
    if pending is not None:
        pending[1].result()
        if on_frame is not None:
            on_frame(pending[0])
    if _threadsafe_numba():
        return position, writing.submit(writer.write, position, labels, proba)
    writer.write(position, labels, proba)
    if on_frame is not None:
        on_frame(position)
    return None


def _frame_threads():
    """Numba threads for each of `_FRAMES_IN_FLIGHT` frames predicted at once, or 0 to
    predict one frame at a time (a threading layer that cannot run kernels from two threads
    at once, or one thread)."""
    import numba
    threads = numba.get_num_threads()
    if threads < _FRAMES_IN_FLIGHT or not _threadsafe_numba():
        return 0
    return threads // _FRAMES_IN_FLIGHT


def _prediction_bytes(model, frame, probabilities):
    """The model's estimate of one frame's prediction memory (``prediction_bytes``), or None
    for a model without one."""
    estimate = getattr(model, "prediction_bytes", None)
    return None if estimate is None else estimate(np.shape(frame)[:2], probabilities)


def _room_in_flight(needed):
    """Whether the memory available now holds the predictions of `_FRAMES_IN_FLIGHT` frames
    of ``needed`` bytes each (True when the model gives no estimate)."""
    return needed is None or _FRAMES_IN_FLIGHT * needed <= available_memory()


def _predict_with_threads(threads, model, frame, probabilities, dtype):
    """`predict_frame` with ``threads`` Numba threads (the setting is the calling thread's)."""
    import numba
    numba.set_num_threads(threads)
    return predict_frame(model, frame, probabilities, dtype)


def _threadsafe_numba():
    """Whether Numba's threading layer runs parallel kernels from several threads at once
    (OpenMP and TBB do; workqueue does not). Asked after a prediction, when it is known."""
    import numba
    try:
        return numba.threading_layer() != "workqueue"
    except ValueError:                      # no parallel kernel has run: nothing to clash with
        return False


class _Identity:
    def __getitem__(self, position):
        return position


# -- Dask --------------------------------------------------------------------------------------

def _numba_threads(cores, workers_on_host, numba_max):
    """Numba threads for one worker: its share of the host's cores, at least one."""
    return max(1, min(numba_max, cores // max(1, workers_on_host)))


try:
    from distributed import WorkerPlugin as _WorkerPluginBase
except ImportError:  # dask is optional; without it only local prediction is available
    _WorkerPluginBase = object


class _ModelPlugin(_WorkerPluginBase):
    """Holds one model on a Dask worker: loaded once at setup from the model file's bytes."""

    def __init__(self, model_bytes, workers_per_host):
        self.model_bytes = model_bytes
        self.workers_per_host = dict(workers_per_host)

    def setup(self, worker):
        import numba

        self.model = load_pixel_model(ModelFile(Path("the model shipped to this worker"),
                                                self.model_bytes))
        host = worker.address.rsplit(":", 1)[0].split("://")[-1]
        self.numba_threads = _numba_threads(available_cores(), self.workers_per_host.get(host, 1),
                                            numba.config.NUMBA_NUM_THREADS)
        # One prediction at a time per process: its Numba threads already use the
        # process's share of the cores, and concurrent parallel launches would oversubscribe.
        self.lock = threading.Lock()

    def teardown(self, worker):
        self.model = None


def _predict_chunk(frames, plugin_name, probabilities, dtype):
    """Dask task: labels (and probabilities) of a (n, H, W[, C]) chunk of frames."""
    import numba
    from distributed import get_worker

    plugin = get_worker().plugins[plugin_name]
    with plugin.lock:
        numba.set_num_threads(plugin.numba_threads)  # thread-local: set in the task's thread
        results = [predict_frame(plugin.model, frame, probabilities, dtype) for frame in frames]
    labels = np.stack([result.labels for result in results])
    proba = np.stack([result.probabilities for result in results]) if probabilities else None
    return labels, proba


def _workers_per_host(client):
    hosts = {}
    for address in client.scheduler_info(n_workers=-1)["workers"]:
        host = address.rsplit(":", 1)[0].split("://")[-1]
        hosts[host] = hosts.get(host, 0) + 1
    return hosts


def _n_workers(client):
    return len(client.scheduler_info(n_workers=-1)["workers"])


def _wait_for_workers(client):
    """BatchError unless the cluster has a worker (or one joins within a minute)."""
    if _n_workers(client) == 0:
        try:
            client.wait_for_workers(1, timeout=_WORKER_WAIT_SECONDS)
        except TimeoutError:
            raise BatchError(f"the Dask cluster at {client.scheduler.address} has no workers; "
                             "start some with: dask worker SCHEDULER_ADDRESS") from None


def _run_on_cluster(client, model_bytes, items, submit, finish, describe, hint):
    """Run one task per item on the cluster, ``_CHUNKS_PER_WORKER`` per worker in flight.

    The model travels once, to a worker plugin. ``submit(item, plugin_name)`` returns the
    item's future, ``finish(item, result)`` takes the results in submission order (the
    driver writes them). A dead worker raises BatchError naming ``describe(item)`` and the
    ``hint``; whatever stops the run drops every task still on the cluster (a shared
    cluster would otherwise keep them), and everything finished so far stays finished.
    """
    from distributed import KilledWorker

    _wait_for_workers(client)
    plugin_name = f"msclassify-model-{uuid.uuid4().hex}"
    client.register_plugin(_ModelPlugin(model_bytes, _workers_per_host(client)), name=plugin_name)
    remaining = iter(items)
    pending = deque()

    def submit_next():
        item = next(remaining, None)
        if item is not None:
            pending.append((item, submit(item, plugin_name)))

    try:
        for _ in range(_CHUNKS_PER_WORKER * max(1, _n_workers(client))):
            submit_next()
        while pending:
            item, future = pending[0]
            try:
                result = _result(client, future, describe(item))
            except KilledWorker as exc:
                raise BatchError(f"a Dask worker died while predicting {describe(item)} ({exc}); "
                                 f"it may have run out of memory: {hint}") from None
            finish(item, result)
            pending.popleft()[1].release()
            submit_next()
    finally:
        client.cancel([future for _, future in pending], force=True)
        with contextlib.suppress(Exception):
            client.unregister_worker_plugin(plugin_name)


def _predict_on_cluster(client, model_bytes, source, writer, todo, frame_index, probabilities,
                        chunk_size, on_frame):
    dtype = np.dtype(writer.dtype)
    written = 0

    def submit(chunk, plugin_name):
        frames = np.stack([source.read(frame_index[position]) for position in chunk])
        return client.submit(_predict_chunk, frames, plugin_name, probabilities, dtype,
                             key=f"msclassify-predict-{plugin_name[-8:]}-{chunk[0]}", pure=False)

    def finish(chunk, result):
        nonlocal written
        labels, proba = result
        for offset, position in enumerate(chunk):
            writer.write(position, labels[offset], None if proba is None else proba[offset])
            written += 1
            if on_frame is not None:
                on_frame(position)

    _run_on_cluster(client, model_bytes, _frame_chunks(todo, chunk_size), submit, finish,
                   lambda chunk: f"frames {chunk[0]}..{chunk[-1]}", "use fewer workers per machine")
    return written


def _result(client, future, what):
    """``future.result()``, or BatchError once the cluster cannot deliver it.

    Dask waits for ever for a worker when every worker has gone, and keeps
    reconnecting to a scheduler that has gone: both are checked every
    `_POLL_SECONDS` and end the run after `_LOST_SECONDS`.
    """
    from distributed.comm import CommClosedError

    lost_since = None
    while True:
        try:
            return future.result(timeout=_POLL_SECONDS)
        except TimeoutError:
            pass
        except (CancelledError, CommClosedError):  # the scheduler restarted or went away
            raise BatchError(f"the connection to the Dask scheduler was lost while predicting "
                             f"{what}; restart the cluster") from None
        if client.status != "running":
            problem = "the connection to the Dask scheduler is lost"
        elif _n_workers(client) == 0:
            problem = "every Dask worker has left the cluster"
        else:
            lost_since = None
            continue
        lost_since = time.monotonic() if lost_since is None else lost_since
        if time.monotonic() - lost_since >= _LOST_SECONDS:
            raise BatchError(f"{problem} (for {_LOST_SECONDS:.0f} s, while predicting {what}); "
                             "restart the cluster")


@contextlib.contextmanager
def local_cluster(n_workers):
    """A `distributed.Client` on a new LocalCluster of ``n_workers`` processes on this machine.

    Each worker process runs one task thread (``threads_per_worker=1``); its
    predictions use ``cores // n_workers`` Numba threads (set per task with
    `numba.set_num_threads`), so the workers together use every core once. The
    cluster listens on 127.0.0.1 only, on free ports (its HTTP server too, which
    would otherwise take port 8787 and collide with other clusters).

    Raises
    ------
    ImportError
        Without Dask (``pip install 'msclassify[dask]'``).
    """
    distributed = _import_distributed()

    # NUMBA_NUM_THREADS cannot be used here: the spawned worker re-imports the
    # driver's __main__ module, which may import Numba before the Nanny sets the
    # variable, and Numba then refuses the change once its threads run.
    with _sigint_ignored_by_children():
        cluster = distributed.LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    with cluster, distributed.Client(cluster) as client:
        yield client


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise ImportError("Dask clusters need the optional dependency dask.distributed: "
                          "pip install 'msclassify[dask]'") from None
    return distributed


@contextlib.contextmanager
def _sigint_ignored_by_children():
    """Ignore SIGINT while worker processes are spawned, so that they inherit "ignore".

    Ctrl-C in a terminal signals the whole process group; the driver alone should
    react (stop, then shut the cluster down), not every worker with a traceback.
    Python keeps an inherited "ignore" instead of installing its KeyboardInterrupt
    handler. A Ctrl-C during these seconds of start-up is lost.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def connect(address, timeout=30):
    """A `distributed.Client` connected to the scheduler at ``address``.

    Raises
    ------
    BatchError
        When no scheduler answers at ``address`` within ``timeout`` seconds.
    ImportError
        Without Dask (``pip install 'msclassify[dask]'``).
    """
    distributed = _import_distributed()
    try:
        client = distributed.Client(address, timeout=timeout)
    except (OSError, ValueError) as exc:
        raise BatchError(f"cannot connect to the Dask scheduler at {address} ({exc}); check the "
                         "address (tcp://HOST:8786) or start one with: dask scheduler") from None
    # A lost scheduler is reported as one BatchError; the client's own log of its
    # attempts to reconnect (tracebacks at ERROR level) would bury that line.
    log = logging.getLogger("distributed.client")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        with client:
            yield client
    finally:
        log.setLevel(level)
