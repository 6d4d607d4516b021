"""From masks to objects: a table per object per frame, object classes and tracks over video.

The layer above `msclassify.pixel`: a frame's predicted classes become numbered
objects (`find_objects`, optionally split where they touch by `ObjectSplitter`),
measured by `skimage.measure.regionprops_table` with its column names kept
(`measure_objects`), classified by a cost-efficient object classifier
(`ObjectClassifier` on `object_features`), linked over frames by trackpy
(`ObjectTracker`) and written as CSV or Parquet (`write_table`, `read_table`).
`ObjectPipeline` does all of it to one frame; `ObjectTableWriter` does it while
a batch prediction streams frames, journaled so that a stopped run resumes
(`TableJournal`). See docs/objects.md.

Examples
--------
>>> import numpy as np
>>> labels = np.ones((8, 10), np.uint8); labels[3:5, 2:8] = 2   # class 2: a 2x6 bar
>>> objects = find_objects(labels, target=2)
>>> measure_objects(objects)[["area", "centroid-0", "centroid-1", "orientation"]].values.tolist()
[[12.0, 3.5, 4.5, 1.5707963267948966]]
"""

from ._classify import FEATURE_GROUPS, ObjectClassifier, object_features
from ._labels import OBJECT_LABEL_COLUMNS, objects_at, read_object_labels, write_object_labels
from ._measure import SHAPE_COLUMNS, find_objects, measure_objects
from ._pipeline import ObjectPipeline, ObjectTableWriter, remember_frames
from ._split import SPLIT_LANDSCAPES, ObjectSplitter
from ._table import TABLE_FORMATS, TableJournal, check_table_path, read_table, write_table
from ._track import ObjectTracker

__all__ = ["FEATURE_GROUPS", "OBJECT_LABEL_COLUMNS", "SHAPE_COLUMNS", "SPLIT_LANDSCAPES",
           "TABLE_FORMATS", "ObjectClassifier", "ObjectPipeline", "ObjectSplitter",
           "ObjectTableWriter", "ObjectTracker", "TableJournal", "check_table_path",
           "find_objects", "measure_objects", "object_features", "objects_at",
           "read_object_labels", "read_table", "remember_frames", "write_object_labels",
           "write_table"]
