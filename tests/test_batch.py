"""Batch prediction engine: in-process and on a real Dask LocalCluster.

The cluster runs two worker processes on 127.0.0.1, as ``msclassify predict --workers 2`` does.
"""

import itertools
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import tifffile

import msclassify.pixel.batch as batch
from msclassify import load_model
from msclassify.io import FrameWriteError, open_writer
from msclassify.pixel import BACKGROUND_NICE, PixelClassifier, label_dtype, predict_frame
from msclassify.pixel.batch import (BatchError, _ModelPlugin, _numba_threads, _predict_chunk,
                                    _workers_per_host, available_cores, connect, local_cluster,
                                    predict_to_writer)

distributed = pytest.importorskip("distributed")

SIZE = 48


def make_frames(n_frames, seed=0):
    """Dark noisy frames with one bright square each, at a position that moves with t."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(10, 40, (n_frames, SIZE, SIZE)).astype(np.uint8)
    for t in range(n_frames):
        start = 4 + (3 * t) % 24
        frames[t, start:start + 16, start:start + 16] += 180
    return frames


class FrameList(list):
    """The part of the FrameSource interface the engine uses."""

    def read(self, index):
        return self[index]


class ThresholdModel:
    """Stub model: class 2 where the frame is bright, else 1 (hand-checkable)."""

    classes_ = np.array([1, 2], dtype=np.uint8)

    def predict(self, frame):
        return np.where(frame > 100, 2, 1).astype(np.uint8)

    def predict_proba(self, frame):
        p = (frame > 100).astype(np.float32) * 0.8 + 0.1
        return np.stack([1 - p, p], axis=2)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    frames = make_frames(1)
    labels = np.zeros((SIZE, SIZE), np.uint8)
    labels[:3, :] = 1
    labels[8:16, 8:16] = 2
    clf = PixelClassifier(features="fast", n_estimators=6, random_state=0).fit(frames[0], labels)
    path = tmp_path_factory.mktemp("model") / "squares.msc"
    clf.save(path)
    return path


@pytest.fixture(scope="module")
def client():
    with local_cluster(2) as client:
        yield client


# -- small pieces ------------------------------------------------------------------------------

def test_label_dtype_is_the_smallest_unsigned_type_holding_every_class():
    assert label_dtype([1, 2]) == np.uint8
    assert label_dtype([1, 255]) == np.uint8
    assert label_dtype([1, 256]) == np.uint16
    assert label_dtype(np.array([3, 70000])) == np.uint32


def test_numba_threads_share_the_cores_between_the_workers_of_a_host():
    assert _numba_threads(cores=2, workers_on_host=2, numba_max=2) == 1
    assert _numba_threads(cores=2, workers_on_host=1, numba_max=2) == 2
    assert _numba_threads(cores=8, workers_on_host=3, numba_max=8) == 2
    assert _numba_threads(cores=16, workers_on_host=1, numba_max=4) == 4  # Numba's pool size
    assert _numba_threads(cores=2, workers_on_host=5, numba_max=2) == 1   # never zero


def test_predict_frame_with_probabilities_labels_the_most_probable_class():
    frame = np.array([[0, 200], [101, 100]], np.uint8)
    labels, proba, uncertainty = predict_frame(ThresholdModel(), frame, probabilities=True,
                                               dtype=np.uint16)
    assert labels.dtype == np.uint16 and labels.tolist() == [[1, 2], [2, 1]]
    assert proba.dtype == np.float32 and proba.shape == (2, 2, 2)
    np.testing.assert_allclose(uncertainty, 1 - proba.max(axis=2))
    labels, proba, uncertainty = predict_frame(ThresholdModel(), frame)
    assert labels.dtype == np.uint8 and proba is None and uncertainty is None


# -- in-process engine -------------------------------------------------------------------------

def test_local_engine_writes_the_todo_frames_of_a_selection_in_order(tmp_path):
    frames = FrameList(make_frames(8))
    selection = [1, 3, 5, 7]                     # writer position p holds source frame selection[p]
    writer = open_writer(tmp_path / "out", len(selection), (SIZE, SIZE))
    seen = []
    written = predict_to_writer(ThresholdModel(), frames, writer, [0, 2, 3],
                                frame_index=selection, on_frame=seen.append)
    assert written == 3 and seen == [0, 2, 3]
    assert writer.completed() == [0, 2, 3]
    for position in (0, 2, 3):
        stored = tifffile.imread(tmp_path / "out" / f"frame_{position:06d}.tif")
        np.testing.assert_array_equal(stored, ThresholdModel().predict(frames[selection[position]]))


def test_local_engine_with_a_real_model_matches_predict(tmp_path, model_file):
    model = load_model(model_file)
    frames = FrameList(make_frames(3))
    writer = open_writer(tmp_path / "out.zarr", 3, (SIZE, SIZE), n_classes=2, format="zarr")
    predict_to_writer(model, frames, writer, [0, 1, 2], probabilities=True)
    import zarr
    root = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    for t in range(3):
        np.testing.assert_allclose(root["probabilities"][t], model.predict_proba(frames[t]),
                                   rtol=1e-6)
        np.testing.assert_array_equal(root["labels"][t], model.predict(frames[t]))


class _Timeline:
    """A source, model and writer that record which thread does what, and when."""

    def __init__(self, n_frames):
        import threading
        self.frames = make_frames(n_frames)
        self.events = []
        self.written = {}
        self.dtype = np.uint8
        self.first_written = threading.Event()
        self.lock, self.running, self.most_running = threading.Lock(), 0, 0

    def read(self, index):
        self.events.append(("read", index, _thread_name()))
        return self.frames[index]

    def predict(self, frame):
        index = next(t for t, f in enumerate(self.frames) if np.array_equal(f, frame))
        if index == 1:      # frame 0 is written while frame 1 is predicted, or never
            assert self.first_written.wait(10), "frame 0 was not written during frame 1"
        self.events.append(("predict", index, _thread_name()))
        with self.lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        time.sleep(0.05)
        with self.lock:
            self.running -= 1
        return ThresholdModel().predict(frame)

    def write(self, position, labels, probabilities=None):
        self.events.append(("write", position, _thread_name()))
        self.written[position] = labels
        self.first_written.set()


def _thread_name():
    import threading
    return threading.current_thread().name


@pytest.mark.parametrize("in_flight", [True, False])
def test_local_engine_reads_ahead_and_writes_while_the_next_frame_is_predicted(monkeypatch,
                                                                               in_flight):
    """Reads ahead in one thread, writes in another, in order; with two frames in flight
    (a threading layer that runs kernels from several threads, two threads or more) the
    frames after the first are predicted two at a time in two threads of their own."""
    monkeypatch.setattr(batch, "_threadsafe_numba", lambda: True)
    monkeypatch.setattr(batch, "_frame_threads", lambda: 1 if in_flight else 0)
    timeline = _Timeline(5)
    seen = []
    assert predict_to_writer(timeline, timeline, timeline, range(5), on_frame=seen.append) == 5
    assert seen == [0, 1, 2, 3, 4] and sorted(timeline.written) == [0, 1, 2, 3, 4]
    threads = {kind: {name for k, _, name in timeline.events if k == kind}
               for kind in ("read", "predict", "write")}
    first = next(name for k, i, name in timeline.events if k == "predict" and i == 0)
    assert first == _thread_name()
    if in_flight:
        assert len(threads["predict"] - {first}) == 2 and timeline.most_running == 2
    else:
        assert threads["predict"] == {first} and timeline.most_running == 1
    assert len(threads["read"]) == len(threads["write"]) == 1
    assert not threads["read"] & threads["predict"] and not threads["write"] & threads["predict"]
    order = [(k, i) for k, i, _ in timeline.events]
    assert [i for k, i in order if k == "read"] == [0, 1, 2, 3, 4]
    assert [i for k, i in order if k == "write"] == [0, 1, 2, 3, 4]
    for t in range(5):
        np.testing.assert_array_equal(timeline.written[t], 1 + (timeline.frames[t] > 100))


class _SizedTimeline(_Timeline):
    """A `_Timeline` whose model says each frame's prediction needs 1000 bytes."""

    def prediction_bytes(self, shape, probabilities=False):
        assert shape == (SIZE, SIZE)
        return 1000


@pytest.mark.parametrize("available, most_running", [(1999, 1), (2000, 2)])
def test_two_frames_are_in_flight_only_while_memory_holds_both(monkeypatch, available,
                                                               most_running):
    """With memory for one frame's prediction (1000 bytes) but not two, each frame waits for
    the one before and is predicted alone, in this thread; with memory for two, two at a
    time. The frames are written the same, in order."""
    monkeypatch.setattr(batch, "_threadsafe_numba", lambda: True)
    monkeypatch.setattr(batch, "_frame_threads", lambda: 1)
    monkeypatch.setattr(batch, "available_memory", lambda: available)
    timeline = _SizedTimeline(5)
    seen = []
    assert predict_to_writer(timeline, timeline, timeline, range(5), on_frame=seen.append) == 5
    assert seen == [0, 1, 2, 3, 4] and timeline.most_running == most_running
    predicting = {name for k, _, name in timeline.events if k == "predict"}
    assert (predicting == {_thread_name()}) == (most_running == 1)
    for t in range(5):
        np.testing.assert_array_equal(timeline.written[t], 1 + (timeline.frames[t] > 100))


def test_whether_frames_go_two_at_a_time_is_decided_once(monkeypatch):
    asked = []
    monkeypatch.setattr(batch, "_threadsafe_numba", lambda: True)
    monkeypatch.setattr(batch, "_frame_threads", lambda: asked.append(1) or 0)
    timeline = _Timeline(4)
    assert predict_to_writer(timeline, timeline, timeline, range(4)) == 4
    assert len(asked) == 1 and sorted(timeline.written) == [0, 1, 2, 3]


def test_local_engine_writes_in_its_own_thread_when_numba_cannot_share_kernels(monkeypatch):
    monkeypatch.setattr(batch, "_threadsafe_numba", lambda: False)
    timeline = _Timeline(3)
    timeline.first_written.set()
    predict_to_writer(timeline, timeline, timeline, range(3))
    assert {name for k, _, name in timeline.events if k != "read"} == {_thread_name()}
    assert sorted(timeline.written) == [0, 1, 2]


@pytest.mark.parametrize("in_flight", [True, False])
def test_ctrl_c_while_a_frame_is_handed_to_the_writer_loses_no_frame(tmp_path, monkeypatch,
                                                                     in_flight):
    """Ctrl-C arriving while frame 2 waits to be written: frame 2 and every frame predicted
    before the stop are still written, so the completed frames have no gap (a re-run
    resumes from the first missing one)."""
    monkeypatch.setattr(batch, "_threadsafe_numba", lambda: True)
    monkeypatch.setattr(batch, "_frame_threads", lambda: 1 if in_flight else 0)
    real_write, interrupted = batch._write, []

    def write(writer, position, *args):
        if position == 2 and not interrupted:
            interrupted.append(position)
            raise KeyboardInterrupt
        return real_write(writer, position, *args)
    monkeypatch.setattr(batch, "_write", write)
    writer = open_writer(tmp_path / "out", 6, (SIZE, SIZE))
    with pytest.raises(KeyboardInterrupt):
        predict_to_writer(ThresholdModel(), FrameList(make_frames(6)), writer, range(6))
    done = writer.completed()
    assert interrupted == [2] and 2 in done and done == list(range(len(done)))


def test_a_failing_read_stops_the_run_with_its_error(tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "_threadsafe_numba", lambda: True)
    writer = open_writer(tmp_path / "out", 5, (SIZE, SIZE))

    class Broken(FrameList):
        def read(self, index):
            if index == 3:
                raise OSError("frame 3 is damaged")
            return self[index]
    with pytest.raises(OSError, match="frame 3 is damaged"):
        predict_to_writer(ThresholdModel(), Broken(make_frames(5)), writer, range(5))
    # frame 2 is written too unless its prediction had not started when frame 3's read
    # failed (then it is dropped with the frames read ahead: a race of the frames in flight)
    assert writer.completed() in ([0, 1], [0, 1, 2])


@pytest.mark.parametrize("threaded", [True, False])
def test_a_failing_write_stops_the_run_and_keeps_earlier_frames(tmp_path, monkeypatch, threaded):
    monkeypatch.setattr(batch, "_threadsafe_numba", lambda: threaded)
    writer = open_writer(tmp_path / "out", 5, (SIZE, SIZE))
    real_write = writer.write

    def write(position, labels, probabilities=None):
        if position == 2:
            raise FrameWriteError(f"cannot write frame {position}: disk full")
        real_write(position, labels, probabilities)

    writer.write = write
    with pytest.raises(FrameWriteError, match="disk full"):
        predict_to_writer(ThresholdModel(), FrameList(make_frames(5)), writer, range(5))
    assert writer.completed() == [0, 1]


def test_predict_frames_yields_the_selected_frames_in_order_as_predicted(model_file):
    model = load_model(model_file)
    frames = FrameList(make_frames(6))
    selection = [5, 1, 3]
    seen = list(batch.predict_frames(model, frames, [0, 2], frame_index=selection,
                                     probabilities=True, dtype=np.uint16))
    assert [position for position, _ in seen] == [0, 2]
    for (position, result), index in zip(seen, (5, 3)):
        assert result.labels.dtype == np.uint16
        np.testing.assert_array_equal(result.labels, model.predict(frames[index]))
        np.testing.assert_allclose(result.probabilities, model.predict_proba(frames[index]),
                                   rtol=1e-6)


def test_closing_predict_frames_early_stops_the_run_and_its_thread():
    class Counted(FrameList):
        reads = 0

        def read(self, index):
            Counted.reads += 1
            return self[index]
    frames = Counted(make_frames(30))
    run = batch.predict_frames(ThresholdModel(), frames, range(30))
    assert [position for position, _ in itertools.islice(run, 2)] == [0, 1]
    run.close()
    for thread in threading.enumerate():             # it ends after the frames in flight
        if thread.name == "msclassify predict_frames":
            thread.join(timeout=30)
            assert not thread.is_alive()
    # two yielded, up to three handed over (two waiting and one whose run waits for room),
    # two in flight, two read ahead: not the 30 frames
    assert Counted.reads <= 9


def test_predict_frames_stops_when_should_stop_turns_true_without_a_close():
    frames = FrameList(make_frames(30))
    stop = threading.Event()
    run = batch.predict_frames(ThresholdModel(), frames, range(30), should_stop=stop.is_set)
    assert next(run)[0] == 0
    stop.set()                        # the caller stops taking frames but keeps the generator
    for thread in threading.enumerate():
        if thread.name == "msclassify predict_frames":
            thread.join(timeout=30)
            assert not thread.is_alive()


def test_a_program_that_keeps_an_unfinished_predict_frames_still_exits():
    program = textwrap.dedent("""
        import time

        import numpy as np
        from msclassify.pixel import PixelClassifier
        from msclassify.pixel.batch import predict_frames

        class Frames(list):
            def read(self, i):
                return self[i]

        image = np.zeros((32, 32)); image[8:24, 8:24] = 1
        labels = np.zeros((32, 32), np.uint8); labels[:2] = 1; labels[14:18, 14:18] = 2
        model = PixelClassifier(n_estimators=2, random_state=0).fit(image, labels)
        # a Numba model: frames are written (handed over) in a thread pool's thread, which
        # the interpreter's exit joins
        run = predict_frames(model, Frames([image] * 30), range(30))
        print(next(run)[0])           # one frame taken, the generator kept, not closed
        time.sleep(2)                 # the run fills its hand-over queue and waits
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "0", done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_predict_frames_can_run_below_the_callers_priority():
    def own_nice():
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    class Recording(ThresholdModel):
        nices = []

        def predict(self, frame):
            Recording.nices.append(own_nice())
            return super().predict(frame)
    mine = own_nice()
    frames = FrameList(make_frames(6))
    seen = [r.labels for _, r in batch.predict_frames(Recording(), frames, range(6),
                                                      nice=BACKGROUND_NICE)]
    # every frame, also those predicted two at a time in the threads the run starts
    assert Recording.nices == [min(mine + BACKGROUND_NICE, 19)] * 6 and own_nice() == mine
    assert all(np.array_equal(s, ThresholdModel().predict(f)) for s, f in zip(seen, frames))


def test_predict_frames_raises_a_failing_reads_error_after_the_frames_before_it():
    class Broken(FrameList):
        def read(self, index):
            if index == 3:
                raise OSError("frame 3 is damaged")
            return self[index]
    seen = []
    with pytest.raises(OSError, match="frame 3 is damaged"):
        for position, _ in batch.predict_frames(ThresholdModel(), Broken(make_frames(5)),
                                                range(5)):
            seen.append(position)
    # frames 0 and 1 are handed over before frame 3 is read; frame 2 too unless its
    # prediction had not started (then it is dropped with the frames read ahead)
    assert seen in ([0, 1], [0, 1, 2])


def test_the_cluster_path_needs_the_model_bytes():
    with pytest.raises(ValueError, match="model_bytes"):
        predict_to_writer(ThresholdModel(), FrameList(), None, [0], client=object())


# -- Dask --------------------------------------------------------------------------------------

def test_cluster_runs_worker_processes_on_loopback_with_one_thread_each(client):
    workers = client.scheduler_info()["workers"]
    assert len(workers) == 2
    assert all(address.startswith("tcp://127.0.0.1:") for address in workers)
    assert all(info["nthreads"] == 1 for info in workers.values())
    pids = client.run(lambda: __import__("os").getpid())
    assert len(set(pids.values())) == 2 and __import__("os").getpid() not in pids.values()
    assert _workers_per_host(client) == {"127.0.0.1": 2}


def test_cluster_results_equal_local_results_in_order(client, model_file, tmp_path):
    model = load_model(model_file)
    frames = FrameList(make_frames(11))
    writer = open_writer(tmp_path / "out", 11, (SIZE, SIZE), n_classes=2)
    order = []
    written = predict_to_writer(model, frames, writer, list(range(11)), probabilities=True,
                                client=client, model_bytes=model_file.read_bytes(), chunk_size=3,
                                on_frame=order.append)
    assert written == 11 and order == list(range(11))
    assert writer.completed() == list(range(11))
    for t in range(11):
        stored = tifffile.imread(tmp_path / "out" / f"frame_{t:06d}.tif")
        np.testing.assert_array_equal(stored, model.predict(frames[t]))
        probabilities = tifffile.imread(tmp_path / "out" / "probabilities" / f"frame_{t:06d}.tif")
        np.testing.assert_allclose(probabilities, model.predict_proba(frames[t]), rtol=1e-6)
    # the model plugin is removed again, so a shared cluster does not accumulate models
    plugins = client.run(lambda dask_worker: [name for name in dask_worker.plugins
                                              if name.startswith("msclassify-model")])
    assert all(names == [] for names in plugins.values())


def test_the_model_is_loaded_once_per_worker_and_uses_its_share_of_the_cores(client, model_file):
    name = "msclassify-model-test-once"
    client.register_plugin(_ModelPlugin(model_file.read_bytes(), _workers_per_host(client)),
                           name=name)
    try:
        def model_identity(dask_worker):
            plugin = dask_worker.plugins[name]
            return id(plugin.model), plugin.numba_threads

        before = client.run(model_identity)
        frames = make_frames(8)
        futures = [client.submit(_predict_chunk, frames[t:t + 2], name, False, np.uint8,
                                 pure=False) for t in range(0, 8, 2)]
        results = client.gather(futures)
        after = client.run(model_identity)
    finally:
        client.unregister_worker_plugin(name)
    assert before == after  # the same model object served every task
    assert all(threads == max(1, available_cores() // 2) for _, threads in after.values())
    model = load_model(model_file)
    labels = np.concatenate([labels for labels, _ in results])
    np.testing.assert_array_equal(labels, np.stack([model.predict(f) for f in frames]))


def test_a_worker_error_reaches_the_driver_as_the_same_exception(client, model_file, tmp_path):
    colour = FrameList(np.repeat(make_frames(2)[..., None], 3, axis=3))  # model is for grey
    writer = open_writer(tmp_path / "out", 2, (SIZE, SIZE))
    with pytest.raises(ValueError, match="like the training images"):
        predict_to_writer(load_model(model_file), colour, writer, [0, 1], client=client,
                          model_bytes=model_file.read_bytes())
    assert writer.completed() == []


def test_interrupting_the_driver_cancels_the_queued_chunks(client, model_file, tmp_path):
    writer = open_writer(tmp_path / "out", 12, (SIZE, SIZE))

    def interrupt_after_two(position):
        if position == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        predict_to_writer(load_model(model_file), FrameList(make_frames(12)), writer,
                          list(range(12)), client=client, model_bytes=model_file.read_bytes(),
                          chunk_size=1, on_frame=interrupt_after_two)
    assert writer.completed() == [0, 1]
    # nothing of the run is left on the cluster (cancelling is asynchronous)
    deadline = time.monotonic() + 10
    while _prediction_keys(client) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _prediction_keys(client) == []


def _prediction_keys(client):
    return [key for key in client.who_has() if str(key).startswith("msclassify-predict")]


def test_connecting_to_a_missing_scheduler_is_a_batch_error():
    address = "tcp://127.0.0.1:9"  # the discard port: nothing listens there
    with pytest.raises(BatchError, match=f"cannot connect to the Dask scheduler at {address}"):
        with connect(address, timeout=1):
            pass


@pytest.mark.parametrize("open_cluster", [lambda: batch.local_cluster(1),
                                          lambda: batch.connect("tcp://127.0.0.1:9")])
def test_without_dask_the_error_names_the_extra_to_install(open_cluster, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # makes `import distributed` fail
    with pytest.raises(ImportError, match=r"^Dask clusters need .*pip install 'msclassify\[dask\]'$"):
        with open_cluster():
            pass


def test_a_cluster_without_workers_is_a_batch_error(model_file, tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "_WORKER_WAIT_SECONDS", 1)
    with distributed.LocalCluster(n_workers=0, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as empty:
        writer = open_writer(tmp_path / "out", 1, (SIZE, SIZE))
        with pytest.raises(BatchError, match="has no workers; start some with: dask worker"):
            predict_to_writer(load_model(model_file), FrameList(make_frames(1)), writer, [0],
                              client=empty, model_bytes=model_file.read_bytes())
