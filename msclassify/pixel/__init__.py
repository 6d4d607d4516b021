"""Pixel classification: a feature bank joined to cost-efficient gradient boosting.

`PixelClassifier` learns from scribbles (``fit``) and predicts frames with the
multi-scale predictor, which evaluates the trees coarse to fine on pyramid
blocks and computes only the features the model uses. The pieces:

`PixelClassifier`, `ImageCost`, `training_set`, `TrainingProgress`
    the estimator, its per-image prediction cost, the rows it trains the core on and
    the progress reports of its ``fit`` (stage, fraction done, ETA)
`predict_multiscale`, `MultiscaleResult`
    tree evaluation on pyramid blocks, coarse to fine
`UnlabelledPixels`, `jittered_grid`
    semi-supervised training (GRBB on unlabelled pixels of the scribbled frames)
`IntensityRange`
    the units of the training frames' intensities, in which every frame is read
`TrainingProgress`
    what ``PixelClassifier.fit(progress=...)`` reports: stage, fraction done, time left
`load_pixel_model`, `check_channels`
    a saved classifier, checked to be one and to fit the frames at hand
`predict_frame`, `FramePrediction`, `most_probable`, `label_dtype`
    one frame's labels, probabilities and uncertainty from one pass; the labels' dtype
`ChunkPlan`, `predict_chunks`, `predict_chunk`, `predict_region`, `model_halo`, `model_plan`,
`feature_halos`
    images larger than memory: chunk by chunk through block-aligned windows with exact halos,
    identical to predicting them whole
`training_windows`
    crops of such an image around its scribbles, to train on (exact features there)
`predict_to_store`, `large_provenance`
    such an image into a resumable OME-Zarr store (`msclassify.io.ChunkedLabelWriter`), here
    or on a Dask cluster
`FrameExport`, `open_export`
    what to write per frame (class values, a 0/255 mask, objects, a probability) and where
    (a folder of TIFFs, a zarr store, one TIFF stack: `msclassify.io`'s writers)
`msclassify.pixel.batch`
    streaming many frames into a resumable writer, here or on a Dask cluster
`run_at_lower_priority`, `BACKGROUND_NICE`
    background work below a window's CPU priority (Linux), so the window stays responsive

Examples
--------
>>> import numpy as np
>>> from msclassify.pixel import PixelClassifier
>>> image = np.zeros((32, 32)); image[8:24, 8:24] = 1
>>> labels = np.zeros((32, 32), np.uint8); labels[:2] = 1; labels[14:18, 14:18] = 2
>>> clf = PixelClassifier(n_estimators=5, random_state=0).fit(image, labels)
>>> clf.predict(image)[16, 16], clf.predict(image)[0, 0]
(np.uint8(2), np.uint8(1))
"""

from ._apply import FramePrediction, label_dtype, most_probable, predict_frame
from ._chunks import (ChunkPlan, feature_halos, model_halo, model_plan, predict_chunk,
                      predict_chunks, predict_region, training_windows)
from ._classifier import (ImageCost, PixelClassifier, check_channels, load_pixel_model,
                          training_set)
from ._export import EXPORT_FORMATS, EXPORT_KINDS, FrameExport, open_export
from ._intensity import IntensityRange
from ._large import large_provenance, predict_to_store
from ._multiscale import MultiscaleResult, predict_multiscale
from ._priority import BACKGROUND_NICE, run_at_lower_priority
from ._progress import TrainingProgress
from ._semi_supervised import UnlabelledPixels, jittered_grid

__all__ = ["BACKGROUND_NICE", "ChunkPlan", "EXPORT_FORMATS", "EXPORT_KINDS", "FrameExport",
           "FramePrediction", "ImageCost", "IntensityRange", "MultiscaleResult", "PixelClassifier",
           "TrainingProgress",
           "UnlabelledPixels", "check_channels", "feature_halos", "jittered_grid", "label_dtype",
           "large_provenance", "load_pixel_model", "model_halo", "model_plan", "most_probable",
           "open_export", "predict_chunk", "predict_chunks", "predict_frame", "predict_multiscale",
           "predict_region", "predict_to_store", "run_at_lower_priority", "training_set",
           "training_windows"]
