"""The synthetic fly-arena video shipped with the repository.

`load_sample_flies` returns the synthetic fly-arena video of ``sample_data/flies/``
(frames, exact instance masks and user-style scribbles), made by
``sample_data/generate.py``; see that script's docstring for what the images
contain.

Where the data comes from, in this order:

1. ``<repo>/sample_data/flies/*.tif``, committed next to the package
   (``$MSCLASSIFY_SAMPLE_DATA`` names another ``sample_data`` folder).
2. A copy regenerated earlier into the user cache folder
   (``$MSCLASSIFY_CACHE``, else ``$XDG_CACHE_HOME/msclassify``, else
   ``~/.cache/msclassify``; then ``sample_data/flies``).
3. If the TIFF files are missing but ``<repo>/sample_data/generate.py`` is
   there, it is run (deterministic, a few seconds) and its output is written
   into the cache folder, never into the source tree, which may be read-only.
   The cached copy is then reused as is: delete it after changing the generator.

Without the ``sample_data`` folder (e.g. a wheel install) a `FileNotFoundError`
says so and how to get it.
"""

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tifffile

__all__ = ["SampleFlies", "load_sample_flies"]

_REPO_SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"
_FILES = {"frames": "frames.tif", "masks": "masks.tif", "scribbles": "scribbles.tif"}


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
        If neither the data nor its generator can be found.

    Examples
    --------
    >>> from msclassify.datasets import load_sample_flies
    >>> frames, masks, scribbles = load_sample_flies()
    >>> frames.shape, frames.dtype.name, int(masks[0].max())
    ((8, 1024, 1024), 'uint8', 4)
    """
    sample_data = _sample_data_dir()
    for folder in (sample_data / "flies", _cache_dir() / "flies"):
        if all((folder / name).is_file() for name in _FILES.values()):
            return _read(folder)
    generator = sample_data / "generate.py"
    if not generator.is_file():
        raise FileNotFoundError(
            f"the sample fly data is not available: neither {sample_data / 'flies'} nor "
            f"its generator {generator} exists (a pip-installed msclassify does not ship them). "
            "Use a git checkout of msclassify, or run sample_data/generate.py from one with "
            f"--out {_cache_dir() / 'flies'}")
    return _read(_regenerate(generator, _cache_dir() / "flies"))


def _sample_data_dir():
    if os.environ.get("MSCLASSIFY_SAMPLE_DATA"):
        return Path(os.environ["MSCLASSIFY_SAMPLE_DATA"])
    return _REPO_SAMPLE_DATA


def _cache_dir():
    if os.environ.get("MSCLASSIFY_CACHE"):
        return Path(os.environ["MSCLASSIFY_CACHE"]) / "sample_data"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "msclassify" / "sample_data"


def _regenerate(generator, target):
    spec = importlib.util.spec_from_file_location("_msclassify_sample_generator", generator)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target.parent.mkdir(parents=True, exist_ok=True)
    # write beside the target and rename, so a crash or a concurrent run never
    # leaves a half-written set behind
    staging = Path(tempfile.mkdtemp(prefix=".flies-", dir=target.parent))
    try:
        module.write(module.generate(), staging)
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
                             "to have it regenerated, or restore it from git") from None
    shapes = {field: a.shape for field, a in arrays.items()}
    if len(set(shapes.values())) != 1 or arrays["frames"].ndim != 3:
        raise ValueError(f"sample data in {folder} is inconsistent (shapes {shapes}); delete the "
                         "files to have them regenerated, or restore them from git")
    return SampleFlies(**arrays)
