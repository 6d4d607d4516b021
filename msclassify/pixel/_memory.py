"""Checking that a frame's prediction fits in memory before allocating it.

Predicting a frame allocates, per pixel, the frame as floats and its pyramid,
each used feature of each level (with its filter's buffer), the raw scores of
every output (and their upsampled sum) and, for probabilities, one float per
class. `frame_bytes` estimates that from above (the demo's model on a 2048x2048
frame: 30.1 bytes per pixel measured, 34 estimated; with probabilities 37.1 and
42); `check_frame_memory` refuses a frame that needs more than
the memory available now, with one line saying how much it needs, instead of
failing half-way with a NumPy ``MemoryError`` traceback.
"""

import numpy as np

from ..checks import available_memory

__all__ = ["LARGE_FRAME_ADVICE", "check_frame_memory", "frame_bytes"]

# What to do with a frame too large for memory (the one place to point to another path).
LARGE_FRAME_ADVICE = "crop or downscale it, or predict on a machine with more memory"


def frame_bytes(n_pixels, feature_shares, n_outputs, n_classes, probabilities):
    """Upper estimate of the bytes predicting one frame (or volume) of ``n_pixels`` allocates.

    Parameters
    ----------
    n_pixels : int
        Pixels (voxels) of the frame.
    feature_shares : sequence of int
        Pixels per value of each used feature (1 at full resolution, 4, 16, ...).
    n_outputs : int
        Raw scores per pixel (1 for two classes, else the number of classes).
    n_classes : int
    probabilities : bool
        Whether class probabilities are returned too.

    Examples
    --------
    >>> frame_bytes(1000 * 1000, [1, 4], n_outputs=1, n_classes=2, probabilities=False)
    34000000
    """
    per_pixel = 8 + 8 * sum(1 / share for share in feature_shares) + 16 * n_outputs
    if probabilities:
        per_pixel += 4 * n_classes
    return int(np.ceil(n_pixels * per_pixel))


def check_frame_memory(needed, shape):
    """MemoryError (one line) if ``needed`` bytes for a frame (or volume) of ``shape`` are not
    available.

    Examples
    --------
    >>> check_frame_memory(1000, (10, 10))  # a kilobyte: fine
    >>> check_frame_memory(2**62, (2**30, 2**30))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    MemoryError: a 1073741824x1073741824 frame needs about 4294967296.0 GiB to predict, ...
    """
    available = available_memory()
    if needed > available:
        what = (f"{shape[1]}x{shape[0]} frame" if len(shape) == 2
                else "x".join(map(str, shape)) + " (z, y, x) volume")
        advice = LARGE_FRAME_ADVICE if len(shape) == 2 else (
            "predict it chunk by chunk (msclassify.pixel.predict_chunks; on the command line "
            "predict --axes ... --chunks N)")
        raise MemoryError(f"a {what} needs about {_size(needed)} to "
                          f"predict, but only {_size(available)} of memory is available: "
                          f"{advice}")


def _size(n_bytes):
    return f"{n_bytes / 2**30:.1f} GiB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:.1f} MiB"
