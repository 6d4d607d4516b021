"""FeatureCache: features of recently seen frames, for retraining on the same frames."""

import hashlib
import json
import threading
from collections import OrderedDict

import numpy as np

from ..checks import check_int

__all__ = ["FeatureCache"]


def _frame_digest(frame):
    frame = np.ascontiguousarray(frame)
    digest = hashlib.blake2b(frame.view(np.uint8).reshape(-1), digest_size=16).hexdigest()
    return f"{frame.dtype.str}{frame.shape}{digest}"


class FeatureCache:
    """Least-recently-used store of `FeatureBank.compute_levels` results.

    Interactive training retrains after every stroke on frames whose pixels have
    not changed; with a cache, only the first training on a frame computes its
    features. Entries are keyed by the bank's spec and a digest of the frame's
    bytes, so an edited frame or another bank is never served stale features.

    Parameters
    ----------
    max_bytes : int
        Memory the cached features may take (default 1 GiB; one 1024² frame with
        the "default" preset takes about 126 MB). Frames larger than this are
        computed but not kept.

    Examples
    --------
    >>> import numpy as np
    >>> from msclassify.features import FeatureBank, FeatureCache
    >>> bank, cache = FeatureBank("fast"), FeatureCache()
    >>> image = np.random.default_rng(0).random((32, 32))
    >>> cache.levels(bank, image) is cache.levels(bank, image), len(cache)
    (True, 1)
    """

    def __init__(self, max_bytes=1 << 30):
        self.max_bytes = check_int(max_bytes, "max_bytes", minimum=0)
        self._entries = OrderedDict()
        self._nbytes = 0
        self._lock = threading.Lock()

    def __len__(self):
        return len(self._entries)

    @property
    def nbytes(self):
        """Bytes held by the cached features."""
        return self._nbytes

    def levels(self, bank, frame):
        """``bank.compute_levels(frame)`` (all features), from the cache when possible."""
        key = (json.dumps(bank.to_dict(), sort_keys=True), _frame_digest(frame))
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        levels = bank.compute_levels(frame)
        size = sum(array.nbytes for array in levels.arrays)
        with self._lock:
            if size <= self.max_bytes and key not in self._entries:
                self._entries[key] = levels
                self._nbytes += size
                while self._nbytes > self.max_bytes:
                    _, evicted = self._entries.popitem(last=False)
                    self._nbytes -= sum(array.nbytes for array in evicted.arrays)
        return levels

    def clear(self):
        """Drop every cached frame."""
        with self._lock:
            self._entries.clear()
            self._nbytes = 0
