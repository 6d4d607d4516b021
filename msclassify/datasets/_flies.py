"""The synthetic fly-arena video that ships inside msclassify.

`load_sample_flies` returns the synthetic fly-arena video (frames, exact
instance masks and user-style scribbles); `make_sample_flies` renders it again
from its deterministic generator (module ``_generate_flies``, whose docstring
says what the images contain).

Where `load_sample_flies` finds the data, in this order:

1. ``flies/*.tif`` in the sample data folder (`sample_data_path`): package
   data, present in a wheel install as in a git checkout
   (``$MSCLASSIFY_SAMPLE_DATA`` names another folder).
2. A copy regenerated earlier into the user cache folder
   (``$MSCLASSIFY_CACHE``, else ``$XDG_CACHE_HOME/msclassify``, else
   ``~/.cache/msclassify``; then ``sample_data/flies``).
3. Otherwise the generator renders the set (deterministic, some seconds) into
   the cache folder, never into the package, which may be read-only. The
   cached copy is then reused as is: delete it after changing the generator.
"""

import os
import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tifffile

from . import _generate_flies
from ._sample_data import sample_data_path

__all__ = ["SampleFlies", "load_sample_flies", "make_sample_flies"]

_FILES = _generate_flies.FILES


class SampleFlies(NamedTuple):
    """The synthetic fly video: three (T, H, W) stacks of the same shape.

    Attributes
    ----------
    frames : ndarray of uint8
        Greyscale frames: bright flies on a dark arena floor.
    masks : ndarray of uint16
        Exact instance masks: 0 background, fly ``k`` has id ``k`` in every
        frame; body, legs and the semi-transparent wings all count as fly.
    scribbles : ndarray of uint8
        User-style training labels: 0 unlabelled, 1 background, 2 fly (drawn
        on the first two frames only).
    """

    frames: np.ndarray
    masks: np.ndarray
    scribbles: np.ndarray


def load_sample_flies():
    """Load the synthetic fly-arena video with its masks and scribbles.

    Returns
    -------
    SampleFlies
        ``frames`` (8, 1024, 1024) uint8, ``masks`` uint16 and ``scribbles``
        uint8 of the same shape.

    Raises
    ------
    FileNotFoundError
        If ``$MSCLASSIFY_SAMPLE_DATA`` is set but is not a folder.
    ValueError
        If a sample file is damaged.

    Examples
    --------
    >>> from msclassify.datasets import load_sample_flies
    >>> frames, masks, scribbles = load_sample_flies()
    >>> frames.shape, frames.dtype.name, int(masks[0].max())
    ((8, 1024, 1024), 'uint8', 4)
    """
    for folder in (sample_data_path("flies"), _cache_dir() / "flies"):
        if all((folder / name).is_file() for name in _FILES.values()):
            return _read(folder)
    return _read(_regenerate(_cache_dir() / "flies"))


def make_sample_flies(frame_indices=None):
    """Render the sample fly video again, bit for bit as `load_sample_flies` returns it.

    Parameters
    ----------
    frame_indices : sequence of int, optional
        Frames to render (default: all 8). Frame ``t`` is the same whichever
        other frames are rendered with it; only frames 0 and 1 carry scribbles.

    Returns
    -------
    SampleFlies
        ``frames``, ``masks`` and ``scribbles`` of shape (len(frame_indices), 1024, 1024).

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify.datasets import load_sample_flies, make_sample_flies
    >>> again = make_sample_flies(frame_indices=[1])
    >>> bool(np.array_equal(again.frames[0], load_sample_flies().frames[1]))
    True
    """
    return SampleFlies(**_generate_flies.generate(frame_indices=frame_indices))


def _cache_dir():
    if os.environ.get("MSCLASSIFY_CACHE"):
        return Path(os.environ["MSCLASSIFY_CACHE"]) / "sample_data"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "msclassify" / "sample_data"


def _regenerate(target):
    target.parent.mkdir(parents=True, exist_ok=True)
    # write beside the target and rename, so a crash or a concurrent run never
    # leaves a half-written set behind
    staging = Path(tempfile.mkdtemp(prefix=".flies-", dir=target.parent))
    try:
        _generate_flies.write(_generate_flies.generate(), staging)
        try:
            staging.rename(target)
        except OSError:  # another process finished first; its files are identical
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _read(folder):
    arrays = {}
    for field, name in _FILES.items():
        try:
            arrays[field] = tifffile.imread(folder / name)
        except Exception as exc:  # tifffile raises many types for a damaged file
            raise ValueError(f"cannot read sample data file {folder / name} ({exc}); delete it "
                             "to have it regenerated, or reinstall msclassify") from None
    shapes = {field: a.shape for field, a in arrays.items()}
    if len(set(shapes.values())) != 1 or arrays["frames"].ndim != 3:
        raise ValueError(f"sample data in {folder} is inconsistent (shapes {shapes}); delete the "
                         "files to have them regenerated, or reinstall msclassify")
    return SampleFlies(**arrays)
