"""The object dock's logic without Qt: objects and object classes frame by frame, and the
objects a user labelled by clicking.

Nothing here holds a stack: `ObjectFrames` computes a frame's objects when it
is read (napari reads the frame on screen; `LazyFrames` keeps the last few),
`ClassFrames` colours them by the class each got, and `measure_frames` /
`classify_frames` are generators a worker thread runs, one frame at a time.
`ObjectLabels` are the clicked points, kept in the object-label file's form
(`msclassify.objects.OBJECT_LABEL_COLUMNS`), so that saving them gives a file
``msclassify predict --object-labels`` reads and loading one gives them back.
"""

import zlib

import numpy as np
import pandas as pd

from msclassify.objects import (OBJECT_LABEL_COLUMNS, ObjectClassifier, ObjectPipeline,
                                ObjectSplitter, ObjectTracker, find_objects, measure_objects,
                                objects_at)

__all__ = ["ClassFrames", "ObjectFrames", "ObjectLabels", "SegmentationChanged", "ShownObjects",
           "classify_frames", "frames_text", "frames_to_measure", "measure_frames",
           "object_pipeline", "train_classifier"]

MEASURE_AGAIN = "press Measure objects to measure again"


class SegmentationChanged(ValueError):
    """A frame of the segmentation differs from when its objects were first found (painted
    on after Measure objects): its objects would no longer be the table's."""


def object_pipeline(target, *, min_size=0, split=None, tracks=False):
    """The `ObjectPipeline` of the dock's options, as ``msclassify predict --table`` makes it
    (so objects, and the object labels that point at them, are the same on the CLI).

    Examples
    --------
    >>> object_pipeline(2, min_size=50, split="intensity").splitter.min_size
    50
    """
    if split == "probability":
        raise ValueError("the dock splits on the distance or the intensity; the probability "
                         "of every frame is not kept in napari")
    return ObjectPipeline(int(target), min_size=int(min_size),
                          splitter=None if split is None else
                          ObjectSplitter(split, min_size=max(int(min_size), 1)),
                          tracker=ObjectTracker() if tracks else None)


class _Frame2D:
    """A 2-D label image seen as a stack of one frame."""

    def __init__(self, array):
        self.array = array
        self.ndim = array.ndim
        self.shape = array.shape

    def __getitem__(self, index):
        return self.array


class ObjectFrames:
    """The objects of every frame of a segmentation, found when a frame is read.

    A frame source for `LazyFrames` (``read``, ``shape``, ``dtype``): frame ``t``
    is ``find_objects`` of the segmentation's frame ``t`` with the pipeline's
    class, size filter and splitter, numbered as in the table's ``object`` column.

    Examples
    --------
    >>> from msclassify_napari._reader import LazyFrames
    >>> labels = np.ones((2, 6, 6), np.uint8); labels[1, 1:3, 1:3] = 2
    >>> stack = LazyFrames(ObjectFrames(labels, None, object_pipeline(2)))
    >>> stack.shape, int(stack[1].max()), int(stack[0].max())
    ((2, 6, 6), 1, 0)

    A frame is read the same as the first time or not at all: painted on since,
    its objects would be numbered unlike the table's rows.

    >>> labels[1, 4:6, 4:6] = 2
    >>> try:
    ...     stack.source.read(1)
    ... except SegmentationChanged as exc:
    ...     print(str(exc))  # doctest: +ELLIPSIS
    the segmentation changed on frame 1 since Measure objects: press Measure objects to ...
    """

    path = "objects"

    def __init__(self, labels, image, pipeline, name="the segmentation"):
        self.labels = labels if labels.ndim == 3 else _Frame2D(labels)
        self.image = image
        self.pipeline = pipeline
        self.name = name
        self.shape = tuple(labels.shape[-2:])
        self.dtype = np.dtype(np.int32)
        self._length = 1 if labels.ndim == 2 else labels.shape[0]
        self._checksums = {}    # frame -> CRC-32 of the segmentation frame first read

    def _same_as_first_read(self, index, labels):
        checksum = zlib.crc32(np.ascontiguousarray(labels).view(np.uint8))
        if self._checksums.setdefault(int(index), checksum) != checksum:
            where = "" if isinstance(self.labels, _Frame2D) else f" on frame {index}"
            raise SegmentationChanged(f"{self.name} changed{where} since Measure objects: "
                                      + MEASURE_AGAIN)

    def __len__(self):
        return self._length

    def image_frame(self, index):
        """Frame ``index`` of the image (None without one)."""
        if self.image is None:
            return None
        return np.asarray(self.image if isinstance(self.labels, _Frame2D) else self.image[index])

    def read(self, index):
        pipeline = self.pipeline
        labels = np.asarray(self.labels[index])
        self._same_as_first_read(index, labels)
        return find_objects(labels, pipeline.target,
                            min_size=pipeline.min_size, split=pipeline.splitter,
                            image=self.image_frame(index)).astype(np.int32, copy=False)


class ShownObjects:
    """What the objects layer shows: the objects of a frame (`ObjectFrames` through its
    `LazyFrames`), none on a frame painted on since Measure (napari's drawing must not raise).

    Examples
    --------
    >>> from msclassify_napari._reader import LazyFrames
    >>> labels = np.ones((2, 6, 6), np.uint8); labels[:, 1:3, 1:3] = 2
    >>> objects = LazyFrames(ObjectFrames(labels, None, object_pipeline(2)), cache_frames=0)
    >>> shown = ShownObjects(objects)
    >>> int(shown.read(1).max()), labels.__setitem__((1, 4, 4), 2), int(shown.read(1).max())
    (1, None, 0)
    """

    path = "objects shown"

    def __init__(self, objects):
        self.objects = objects
        self.shape = objects.shape[1:]
        self.dtype = objects.dtype

    def __len__(self):
        return len(self.objects)

    def read(self, index):
        try:
            return self.objects.frame(int(index))
        except SegmentationChanged:
            return np.zeros(self.shape, self.dtype)


def frames_to_measure(labels):
    """The frames of a segmentation that may hold objects: those written to for a
    `FrameLabels` (a movie segmented on a few frames), else all.

    Examples
    --------
    >>> frames_to_measure(np.zeros((3, 4, 4), np.uint8)), frames_to_measure(np.zeros((4, 4)))
    ([0, 1, 2], [0])
    """
    if labels.ndim == 2:
        return [0]
    stored = getattr(labels, "stored_frames", None)
    return list(stored()) if stored is not None else list(range(labels.shape[0]))


def frames_text(frames):
    """Frames as runs, for a status line: which frames a table holds.

    Examples
    --------
    >>> frames_text([0, 1, 2, 3, 39, 1499, 1500]), frames_text([7]), frames_text([])
    ('frames 0–3, 39, 1499–1500', 'frame 7', 'no frame')
    """
    frames = sorted(int(frame) for frame in frames)
    if not frames:
        return "no frame"
    runs, first = [], frames[0]
    for previous, frame in zip(frames, frames[1:] + [None]):
        if frame is None or frame != previous + 1:
            runs.append(str(first) if first == previous else f"{first}–{previous}")
            first = frame
    return ("frames " if len(frames) > 1 else "frame ") + ", ".join(runs)


def measure_frames(objects, frames, tracker=None):
    """Measure (and link) the objects frame by frame: yields ``(frame, table)``.

    Parameters
    ----------
    objects : LazyFrames of `ObjectFrames`
    frames : sequence of int
        In order (the tracker links them in this order).
    tracker : ObjectTracker, optional
        Adds column ``track``.

    Examples
    --------
    >>> from msclassify_napari._reader import LazyFrames
    >>> labels = np.ones((2, 8, 8), np.uint8); labels[0, 1:3, 1:3] = 2; labels[1, 2:4, 1:3] = 2
    >>> stack = LazyFrames(ObjectFrames(labels, labels * 10, object_pipeline(2)))
    >>> tables = [table for _, table in measure_frames(stack, [0, 1], ObjectTracker())]
    >>> pd.concat(tables)[["frame", "track", "centroid-0"]].values.tolist()
    [[0.0, 0.0, 1.5], [1.0, 0.0, 2.5]]
    """
    source = objects.source
    for frame in frames:
        table = measure_objects(np.asarray(objects.frame(frame)), source.image_frame(frame),
                                frame=frame)
        if tracker is not None:
            table.insert(2, "track", tracker.link(
                frame, table[["centroid-0", "centroid-1"]].to_numpy()))
        yield frame, table


class ObjectLabels:
    """The objects a user labelled: one point inside each, with its class.

    Points, not object numbers, so that they stay meaningful when the objects are
    found again with other options, and so that they are an object-label file
    (`table`, `msclassify.objects.write_object_labels`).

    Examples
    --------
    >>> objects = np.zeros((6, 6), np.int32); objects[1:3, 1:3] = 1; objects[4:6, 4:6] = 2
    >>> labels = ObjectLabels()
    >>> labels.toggle(objects, 0, (1.2, 1.7), "fly"), labels.toggle(objects, 0, (5, 5), "debris")
    ('labelled', 'labelled')
    >>> labels.toggle(objects, 0, (2, 2), "fly"), len(labels)
    ('unlabelled', 1)
    >>> labels.toggle(objects, 0, (0, 5), "fly")
    'no object'
    """

    def __init__(self, points=None):
        self.points = pd.DataFrame({name: pd.Series(dtype=kind) for name, kind in zip(
            OBJECT_LABEL_COLUMNS, ("int64", "float64", "float64", "object"))})
        if points is not None:
            self.points = pd.concat([self.points, points[list(OBJECT_LABEL_COLUMNS)]],
                                    ignore_index=True)

    def __len__(self):
        return len(self.points)

    def _on(self, objects, frame):
        """Object number under each point of ``frame`` (0: on none)."""
        rows = self.points.index[self.points["frame"] == frame]
        places = np.rint(self.points.loc[rows, ["centroid-0", "centroid-1"]].to_numpy()).astype(int)
        inside = ((places >= 0) & (places < objects.shape)).all(axis=1)
        numbers = np.zeros(len(rows), int)
        numbers[inside] = objects[places[inside, 0], places[inside, 1]]
        return rows, numbers

    def toggle(self, objects, frame, point, name):
        """Label the object under ``point`` (row, column) of ``frame`` as ``name``; if it
        already is, unlabel it.

        Returns
        -------
        str
            ``"labelled"``, ``"relabelled"`` (it had another class), ``"unlabelled"`` or
            ``"no object"`` (the point is on the background: nothing changes).
        """
        row, col = (int(round(value)) for value in point)
        if not (0 <= row < objects.shape[0] and 0 <= col < objects.shape[1]) \
                or objects[row, col] == 0:
            return "no object"
        rows, numbers = self._on(objects, frame)
        same = rows[numbers == objects[row, col]]
        previous = set(self.points.loc[same, "class"])
        self.points = self.points.drop(index=same).reset_index(drop=True)
        if previous == {name}:
            return "unlabelled"
        self.points.loc[len(self.points)] = [int(frame), float(point[0]), float(point[1]), name]
        self.points["frame"] = self.points["frame"].astype(np.int64)
        return "relabelled" if previous else "labelled"

    def table(self):
        """The labels as an object-label file's rows, by frame."""
        return self.points.sort_values("frame", kind="stable").reset_index(drop=True)

    def training_set(self, objects):
        """``(samples, y)`` for `ObjectClassifier.fit` from the labelled frames of ``objects``
        (LazyFrames of `ObjectFrames`).

        Raises
        ------
        ValueError
            When a point lies on no object (the objects were found again with other
            options), naming the label.
        """
        points = self.table()
        points["line"] = np.arange(len(points)) + 1
        samples, y = [], []
        n_frames = len(objects.source)
        for frame, rows in points.groupby("frame", sort=True):
            if not 0 <= frame < n_frames:
                raise ValueError(f"object label(s) on line(s) {', '.join(map(str, rows['line']))} "
                                 f"point at frame {frame}, but the segmentation has {n_frames} "
                                 "frame(s): label objects of this segmentation")
            frame_objects = np.asarray(objects.frame(int(frame)))
            y.append(objects_at(frame_objects, rows, where="object label"))
            samples.append((frame_objects, objects.source.image_frame(int(frame))))
        return samples, y


def train_classifier(labels, objects):
    """An `ObjectClassifier` fitted on the labelled objects.

    Raises
    ------
    ValueError
        One line: no labels, one class, a class with one example, a label on no object.
    """
    if len(labels) == 0:
        raise ValueError("no objects are labelled yet: tick 'Click objects to label them', "
                         "pick a class and click a few objects of each class")
    samples, y = labels.training_set(objects)
    return ObjectClassifier(random_state=0).fit(samples, y)


def classify_frames(classifier, objects, frames):
    """The class of every object, frame by frame: yields ``(frame, classes)``, classes in the
    order of the objects' numbers (the table's rows of that frame)."""
    source = objects.source
    for frame in frames:
        yield frame, classifier.predict(np.asarray(objects.frame(frame)),
                                        source.image_frame(frame))


class ClassFrames:
    """The objects of every frame coloured by class: a frame source for `LazyFrames`.

    Pixel value ``k + 1`` where the object's class is ``names[k]`` (`set_classes`
    tells the class of each object of a frame), 0 elsewhere and on frames not
    classified yet.

    Examples
    --------
    >>> from msclassify_napari._reader import LazyFrames
    >>> labels = np.ones((1, 4, 6), np.uint8); labels[0, :2, :2] = 2; labels[0, :2, 4:] = 2
    >>> objects = LazyFrames(ObjectFrames(labels, None, object_pipeline(2)))
    >>> classes = ClassFrames(objects, ["fly", "debris"])
    >>> classes.set_classes(0, ["debris", "fly"])
    >>> classes.read(0)[0].tolist()
    [2, 2, 0, 0, 1, 1]
    """

    path = "object classes"

    def __init__(self, objects, names):
        self.objects = objects
        self.names = list(names)
        self.shape = objects.shape[1:]
        self.dtype = np.dtype(np.uint8)
        self._lookup = {}

    def __len__(self):
        return len(self.objects)

    def clear(self, names):
        """Forget every frame's classes; ``names`` are the classes from now on."""
        self.names = list(names)
        self._lookup = {}

    def set_classes(self, frame, classes):
        for name in classes:
            if name not in self.names:
                self.names.append(name)
        values = [self.names.index(name) + 1 for name in classes]
        self._lookup[int(frame)] = np.array([0, *values], np.uint8)

    def read(self, index):
        lookup = self._lookup.get(int(index))
        if lookup is None:
            return np.zeros(self.shape, self.dtype)
        try:
            return lookup[np.asarray(self.objects.frame(int(index)))]
        except SegmentationChanged:            # painted on since: its objects are not known
            return np.zeros(self.shape, self.dtype)
