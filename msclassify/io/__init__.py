"""Frame input/output for batch prediction: stream frames in, write label images out.

Readers stream: `open_frames` returns a `FrameSource` that decodes one frame at
a time from a video, a multi-page TIFF, a folder of images, a glob pattern or a
zarr label stack written by `open_writer`; the whole movie is never held in
memory. What a file says it holds (a video's frame count or duration, a TIFF's
chain of pages and its tifffile or ImageJ metadata) is checked against what is
there: a file that ends early gives the frames that are complete and a
`FrameReadWarning` naming them, and a layout that could be read two ways (a
(3, H, W) array saved with tifffile's defaults) is read one way with a warning
saying which. `read_training_frames` pairs frames with label images (by
position or by name, `match_frames`) for training.

Writers store one label image per frame, either as one TIFF per frame in a
folder or as one chunk per frame in a zarr array. Every frame is written
atomically (temporary file, then rename), so a killed or failed run never
leaves a half-written frame behind, and `FrameWriter.completed` lists the frames
that are already complete so a re-run resumes where the last one stopped. An
output records what it holds and, given a provenance, what made it (for
``msclassify predict``: the model file's digest, the input's identity, the
options that change pixels); a run that would mix in other frames is refused,
and ``overwrite=True`` deletes an output msclassify wrote to start over.

Bad input raises `FrameReadError` (a ValueError) and a failed write raises
`FrameWriteError` (an OSError); both carry a one-line message naming the file
and the fix. `write_atomically` is the atomic write itself, shared by the frame
writers, model files (`msclassify.modelfile`) and the command line's outputs.

The modules, one concept each:

``_errors``, ``_atomic``
    the errors and warning; atomic writes
``_frames``
    `FrameSource`, the base of every reader; frame names; the grey rule
``_video``, ``_tiff``, ``_images``, ``_zarr``
    readers of videos (PyAV), TIFF stacks (tifffile), image files and zarr label stacks
    (and the zarr writer)
``_open``, ``_training``
    opening inputs and outputs by path; pairing frames with label images for training
``_lazy``, ``_chunked``, ``_ngff``, ``_hdf5``, ``_tiled_tiff``
    one image larger than memory: read window by window from OME-Zarr, zarr, HDF5 or tiled
    TIFF (`open_image`); its labels written chunk by chunk, resumably (`ChunkedWriter`), to
    OME-Zarr (`ChunkedLabelWriter`), HDF5 (`ChunkedHDF5Writer`) or a tiled, pyramidal TIFF
    (`ChunkedTiffWriter`); `open_chunk_writer` picks one by the output's name
``_manifest``, ``_writers``
    what an output records of itself and which outputs are msclassify's own; `BaseWriter`,
    the per-frame TIFF folder and the TIFF stack
``_volume``
    volumes in TIFF files (axes named by the caller, the spacing the file records) and the
    NGFF spacing of an OME-Zarr group
``_lazy_volume``
    one volume larger than memory, read window by window from OME-Zarr, zarr or TIFF
    (`open_volume`)
"""

import importlib

# name -> the module that defines it; imported when first used (PEP 562), so that the
# napari plugin's activation (the video extensions) and its OME-Zarr reader do not import
# every reader and writer (tifffile, imageio, h5py's module, ...) on napari's GUI thread
_EXPORTS = {
    "write_atomically": "._atomic", "FrameReadError": "._errors", "FrameReadWarning": "._errors",
    "FrameWriteError": "._errors", "IMAGE_EXTENSIONS": "._frames", "TIFF_EXTENSIONS": "._frames",
    "VIDEO_EXTENSIONS": "._frames", "FrameSource": "._frames", "natural_sort_key": "._frames",
    "ChunkedWriter": "._chunked", "ChunkedHDF5Writer": "._hdf5", "LazyImage": "._lazy",
    "is_large_image": "._lazy", "open_image": "._lazy", "LazyVolume": "._lazy_volume",
    "open_volume": "._lazy_volume", "check_not_an_input": "._manifest",
    "ChunkedLabelWriter": "._ngff", "label_colours": "._ngff", "open_chunk_writer": "._open",
    "open_frames": "._open", "open_writer": "._open", "read_label_stack": "._open",
    "ChunkedTiffWriter": "._tiled_tiff", "match_frames": "._training",
    "read_training_frames": "._training", "VolumeData": "._volume", "check_axes": "._volume",
    "ngff_spacing": "._volume", "read_volume": "._volume", "recorded_z_axis": "._volume",
    "tiff_spacing": "._volume", "write_volume": "._volume", "BaseWriter": "._writers",
    "FrameWriter": "._writers", "TiffFolderWriter": "._writers", "TiffStackWriter": "._writers",
    "ZarrWriter": "._zarr",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
