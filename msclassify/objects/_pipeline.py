"""A frame's objects, measured, classified and tracked; and the same while a prediction streams.

`ObjectPipeline` holds what is done to every frame (which class the objects
are, the size filter, the splitter, the object classifier, the tracker) and
makes one frame's rows (`ObjectPipeline.frame_table`). `ObjectTableWriter`
sits between `msclassify.pixel.batch.predict_to_writer` and the frame writer:
each predicted frame is measured, journaled (`TableJournal`) and then handed
on, so the table and the frames resume together; `remember_frames` keeps the
frames the batch reads until their rows are made.
"""

import dataclasses

import numpy as np

import pandas as pd

from ._measure import _find_objects, _measure_columns
from ._table import TableJournal

__all__ = ["ObjectPipeline", "ObjectTableWriter", "remember_frames"]


@dataclasses.dataclass
class ObjectPipeline:
    """What is done to every frame's predicted classes to make its table rows.

    Parameters
    ----------
    target : int
        The class whose objects are measured (e.g. 2, fly).
    classes : sequence of int
        The pixel model's classes (the probability of ``target`` is their column).
    min_size : int
        Objects with fewer pixels are dropped.
    splitter : ObjectSplitter, optional
        Splits touching objects.
    classifier : ObjectClassifier, optional
        Adds column ``class``.
    tracker : ObjectTracker, optional
        Adds column ``track`` (-1 for objects of classes not in ``track_classes``),
        linking the intensity-weighted centroids of a grey frame's objects (the
        centroids without a frame, or of a colour one).
    track_classes : sequence of str, optional
        With a classifier: the classes that are tracked (default: all).
    probability_columns : bool
        Add ``probability_mean`` and ``probability_max`` (needs the probabilities).
    origin : dict, optional
        Anything else that makes the rows, for the record (e.g. the digest of the
        object-label file the classifier learnt from).

    Examples
    --------
    >>> from msclassify.objects import ObjectTracker
    >>> pipeline = ObjectPipeline(target=2, classes=[1, 2], tracker=ObjectTracker(5))
    >>> labels = np.ones((6, 6), np.uint8); labels[1:3, 1:3] = 2
    >>> pipeline.frame_table(labels, None, None, frame=0)[["frame", "track", "area"]].values.tolist()
    [[0.0, 0.0, 4.0]]
    """

    target: int
    classes: tuple = (1, 2)
    min_size: int = 0
    splitter: object = None
    classifier: object = None
    tracker: object = None
    track_classes: tuple | None = None
    probability_columns: bool = False
    origin: dict | None = None

    @property
    def needs_probabilities(self):
        """Whether `frame_table` needs the class probabilities."""
        return self.probability_columns or (self.splitter is not None
                                            and self.splitter.landscape == "probability")

    def frame_table(self, labels, image, probabilities, frame):
        """The rows of one frame: its objects measured, classified and tracked.

        Parameters
        ----------
        labels : ndarray (H, W)
            Predicted class values.
        image : ndarray or None
            The frame (intensity columns; needed by a classifier).
        probabilities : ndarray (H, W, n_classes) or None
        frame : int
            The frame's number.
        """
        probability = None
        if probabilities is not None:
            column = [int(c) for c in self.classes].index(int(self.target))
            probability = probabilities[..., column]
        elif self.needs_probabilities:
            raise ValueError("this object table needs the class probabilities of every frame")
        objects, boxes = _find_objects(labels, self.target, self.min_size, self.splitter,
                                       probability, image)
        columns = _measure_columns(objects, image,
                                   probability if self.probability_columns else None, frame,
                                   boxes)
        classes = (None if self.classifier is None
                   else self.classifier.predict(objects, image, boxes=boxes))
        added = {}                  # the columns after frame and object, in the table's order
        if self.tracker is not None:
            tracked = np.ones(len(columns["object"]), dtype=bool)
            if classes is not None and self.track_classes is not None:
                tracked = np.isin(classes, list(self.track_classes))
            added["track"] = self._link(frame, columns, tracked)
        if classes is not None:
            added["class"] = classes
        first = {name: columns.pop(name) for name in ("frame", "object")}
        return pd.DataFrame({**first, **added, **columns})

    def _link(self, frame, columns, tracked):
        tracks = np.full(len(tracked), -1, dtype=np.int64)
        coordinates = np.stack([columns[name] for name in _positions(columns)], axis=1)
        tracks[tracked] = self.tracker.link(frame, coordinates[tracked])
        return tracks

    def replay(self, frame, table):
        """Link a journaled frame's rows again (resuming), so the tracker continues."""
        if self.tracker is None or "track" not in table:
            return
        tracks = table["track"].to_numpy()
        self.tracker.link(frame, table[_positions(table)].to_numpy()[tracks >= 0],
                          tracks[tracks >= 0])

    def record(self):
        """What makes the rows, for the table's journal (JSON-able)."""
        def describe(part):
            if part is None:
                return None
            if dataclasses.is_dataclass(part):
                return {"kind": type(part).__name__, **dataclasses.asdict(part)}
            return {"kind": type(part).__name__, **{k: v for k, v in vars(part).items()
                                                    if not k.startswith("_")
                                                    and not k.endswith("_")}}
        return {"target": int(self.target), "min_size": int(self.min_size),
                "splitter": describe(self.splitter),
                "classifier": describe(self.classifier), "origin": self.origin,
                "tracker": describe(self.tracker),
                "track_classes": None if self.track_classes is None else list(self.track_classes),
                "probability_columns": bool(self.probability_columns)}


def _positions(table):
    """The columns (of a table, or a dict of its columns) tracks link: the intensity-weighted
    centroid of a grey frame's objects (a fly's body rather than its wings), else the
    centroid."""
    weighted = ["centroid_weighted-0", "centroid_weighted-1"]
    return weighted if all(c in table for c in weighted) else ["centroid-0", "centroid-1"]


class _RememberedFrames:
    """A frame source that keeps every frame it reads until `take` hands it over."""

    def __init__(self, source):
        self._source = source
        self._kept = {}

    def read(self, index):
        frame = self._source.read(index)
        self._kept[int(index)] = frame
        return frame

    def take(self, index):
        return self._kept.pop(int(index))


def remember_frames(source):
    """Wrap ``source`` so that an `ObjectTableWriter` gets each frame the batch read."""
    return _RememberedFrames(source)


class ObjectTableWriter:
    """A frame writer that first adds each frame's object rows to a table, then writes it.

    Parameters
    ----------
    writer : frame writer or None
        Where the predicted frames go (`msclassify.pixel.open_export`), or None
        for the table alone.
    table_path : str or Path
    pipeline : ObjectPipeline
    frames : remembered source (`remember_frames`)
        The frames the batch reads; the source ``read`` by position ``frame_index``.
    frame_index : sequence of int
        The frame number of every position.
    record : dict
        What makes the frames (`prediction_provenance`); with the pipeline's
        record it is the journal's record, so only the same run resumes.
    overwrite : bool

    The positions `completed` are those both in the journal and in ``writer``;
    opening replays the journal's tracks in order so tracking continues.
    """

    def __init__(self, writer, table_path, pipeline, frames, frame_index, record, *,
                 overwrite=False):
        self._writer = writer
        self.pipeline = pipeline
        self._frames = frames
        self._frame_index = frame_index
        self.journal = TableJournal(table_path, {"frames": record, "objects": pipeline.record()},
                                    overwrite=overwrite)
        written = set(range(len(frame_index)) if writer is None else writer.completed())
        # the tracker continues from the frames done, in order; a frame the journal has but
        # the writer lost is redone (and its rows replaced), and so is every one after it
        resumed = []
        for position in self.journal.done():
            if position not in written:
                break
            pipeline.replay(self._frame_index[position], self.journal.rows(position))
            resumed.append(position)
        self._done = resumed
        self.dtype = None if writer is None else writer.dtype
        self.needs_probabilities = pipeline.needs_probabilities or (
            writer is not None and writer.needs_probabilities)

    def completed(self):
        """Positions whose frame and rows are both done (a prefix of the positions)."""
        return list(self._done)

    def write(self, position, labels, probabilities=None):
        """Measure, classify and track the frame at ``position``, journal its rows, write it."""
        frame = self._frame_index[position]
        image = self._frames.take(frame)
        self.journal.append(position, self.pipeline.frame_table(labels, image, probabilities,
                                                                frame))
        if self._writer is not None:
            self._writer.write(position, labels, probabilities)
        self._done.append(position)

    def finish(self):
        """Write the table (every position must be done); returns it."""
        missing = len(self._frame_index) - len(self._done)
        if missing:
            raise ValueError(f"{missing} frames are not in the table yet")
        return self.journal.finish()

    def close(self):
        if self._writer is not None:
            self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
