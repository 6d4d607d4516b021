"""Scribbles on an image larger than memory: a label image ``(H, W)`` that stores only the tiles
painted on, and windows of it for napari to paint in.

napari 0.9 does not paint on multiscale labels, and a plain Labels layer the size of a
32768² mosaic would read (and colour) the whole plane on every refresh. So the scribbles
of a large image live in one `TiledLabels` of the image's size, which allocates a tile
when it is first written, and napari paints in a *window* of it (`TiledLabels.window`:
the region on screen, at level 0), a view that shares the tiles. Moving the window keeps
every scribble; training reads the whole store, where unwritten tiles are zeros.
"""

import threading

import numpy as np

__all__ = ["TiledLabels"]


class TiledLabels:
    """A writable ``(H, W)`` integer array that allocates a ``tile`` x ``tile`` block when it
    is first written; or a window of one (`window`), which shares its tiles.

    Indexing follows NumPy for what napari and training use: integers and slices
    (steps of 1), integer index arrays (napari's brush strokes and undo; integers
    broadcast with them) and a boolean mask of the whole shape, for reading and writing.
    Slices mixed with index arrays are refused. Reads of unwritten tiles give zeros.

    Parameters
    ----------
    shape : (int, int)
    tile : int, optional
    dtype : dtype, optional

    Examples
    --------
    >>> labels = TiledLabels((32768, 32768), tile=256)
    >>> labels[1000:1002, 5000:5300] = 2                       # a stroke across two tiles
    >>> labels.stored_tiles(), labels.nbytes_stored
    ([(3, 19), (3, 20)], 131072)
    >>> view = labels.window((slice(900, 1100), slice(4990, 5010)))
    >>> view.shape, int(view[100, 10]), int((view[:, :] == 2).sum())
    ((200, 20), 2, 20)
    >>> view[(np.array([0]), np.array([0]))] = 1               # napari's fancy write
    >>> int(labels[900, 4990])
    1
    """

    def __init__(self, shape, tile=256, dtype=np.uint8):
        self.dtype = np.dtype(dtype)
        if self.dtype.kind not in "iu":
            raise TypeError(f"labels need an integer dtype, got {self.dtype}")
        self.shape = tuple(int(size) for size in shape)
        if len(self.shape) != 2 or min(self.shape) < 1:
            raise ValueError(f"shape must be (H, W) with H, W >= 1, got {tuple(shape)}")
        self.tile = int(tile)
        self.origin = (0, 0)
        self._tiles = {}
        self._lock = threading.Lock()

    ndim = 2

    @property
    def size(self):
        return self.shape[0] * self.shape[1]

    @property
    def nbytes_stored(self):
        """Bytes of the tiles held (the rest reads as zeros)."""
        return len(self._tiles) * self.tile * self.tile * self.dtype.itemsize

    def stored_tiles(self):
        """``(row, column)`` of the tiles written to so far (of the whole store)."""
        with self._lock:
            return sorted(self._tiles)

    def _sharing(self, origin, shape, tiles, lock):
        view = object.__new__(TiledLabels)
        view.dtype, view.tile, view._tiles, view._lock = self.dtype, self.tile, tiles, lock
        view.origin, view.shape = tuple(origin), tuple(shape)
        return view

    def copy(self):
        """A copy with its own tiles (a snapshot of the scribbles to train on)."""
        with self._lock:
            tiles = {tile: block.copy() for tile, block in self._tiles.items()}
        return self._sharing(self.origin, self.shape, tiles, threading.Lock())

    def window(self, region):
        """A view of ``region`` (two slices, clipped to this array) that shares the tiles."""
        bounds = [r.indices(n)[:2] for r, n in zip(region, self.shape)]
        return self._sharing([o + start for o, (start, _) in zip(self.origin, bounds)],
                             [max(stop - start, 0) for start, stop in bounds],
                             self._tiles, self._lock)

    # -- indexing ------------------------------------------------------------------------------

    def _key(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) > 2 or any(item is Ellipsis or item is None for item in key):
            raise IndexError("TiledLabels takes up to two integers, slices or index arrays")
        if len(key) == 1 and getattr(key[0], "dtype", None) == bool:
            if key[0].shape != self.shape:
                raise IndexError(f"a boolean mask of shape {key[0].shape} does not fit "
                                 f"TiledLabels of shape {self.shape}")
            key = np.nonzero(key[0])
        key = key + (slice(None),) * (2 - len(key))
        if any(isinstance(item, (np.ndarray, list)) for item in key) and not any(
                isinstance(item, slice) for item in key):
            key = tuple(np.asarray(item) for item in key)   # integers broadcast with arrays
            if any(item.dtype.kind not in "iu" for item in key):
                raise IndexError("TiledLabels takes integer index arrays (or one boolean mask "
                                 "of its shape)")
            ys, xs = np.broadcast_arrays(*key)
            ys = np.where(ys < 0, ys + self.shape[0], ys)
            xs = np.where(xs < 0, xs + self.shape[1], xs)
            if ys.size and (ys.min() < 0 or xs.min() < 0 or ys.max() >= self.shape[0]
                            or xs.max() >= self.shape[1]):
                raise IndexError(f"index out of bounds for TiledLabels of shape {self.shape}")
            return "points", (ys + self.origin[0], xs + self.origin[1])
        box, squeeze = [], []
        for axis, item in enumerate(key):
            if isinstance(item, (int, np.integer)):
                index = range(self.shape[axis])[int(item)]
                item, _ = slice(index, index + 1), squeeze.append(axis)
            if not isinstance(item, slice):
                raise IndexError(f"TiledLabels takes integers, slices or integer arrays, "
                                 f"not {type(item).__name__}")
            start, stop, step = item.indices(self.shape[axis])
            if step != 1:
                raise IndexError("TiledLabels takes slices with a step of 1")
            box.append((start + self.origin[axis], max(stop, start) + self.origin[axis]))
        return "box", (box, tuple(squeeze))

    def _tiles_of(self, box):
        (y0, y1), (x0, x1) = box
        t = self.tile
        for ty in range(y0 // t, (y1 - 1) // t + 1 if y1 > y0 else y0 // t):
            for tx in range(x0 // t, (x1 - 1) // t + 1 if x1 > x0 else x0 // t):
                ys = slice(max(y0, ty * t), min(y1, (ty + 1) * t))
                xs = slice(max(x0, tx * t), min(x1, (tx + 1) * t))
                yield (ty, tx), (ys, xs)

    def _points_by_tile(self, ys, xs):
        """``(tile, mask of the points in it)`` for each tile the points ``(ys, xs)`` touch."""
        rows, columns = ys // self.tile, xs // self.tile
        ids = (rows.astype(np.int64) << 31) + columns
        for tile_id in np.unique(ids):
            inside = ids == tile_id
            first = np.argmax(inside)
            yield (int(rows.flat[first]), int(columns.flat[first])), inside

    def _writable(self, tile):
        with self._lock:
            block = self._tiles.get(tile)
            if block is None:
                block = self._tiles[tile] = np.zeros((self.tile, self.tile), self.dtype)
            return block

    def __getitem__(self, key):
        kind, where = self._key(key)
        t = self.tile
        if kind == "points":
            ys, xs = where
            out = np.zeros(ys.shape, self.dtype)
            for tile, inside in self._points_by_tile(ys, xs):
                block = self._tiles.get(tile)
                if block is not None:
                    out[inside] = block[ys[inside] % t, xs[inside] % t]
            return out
        box, squeeze = where
        out = np.zeros(tuple(stop - start for start, stop in box), self.dtype)
        for tile, (ys, xs) in self._tiles_of(box):
            block = self._tiles.get(tile)
            if block is not None:
                out[ys.start - box[0][0]:ys.stop - box[0][0],
                    xs.start - box[1][0]:xs.stop - box[1][0]] = \
                    block[ys.start % t:ys.start % t + ys.stop - ys.start,
                          xs.start % t:xs.start % t + xs.stop - xs.start]
        return out.squeeze(squeeze) if squeeze else out

    def __setitem__(self, key, value):
        kind, where = self._key(key)
        t = self.tile
        if kind == "points":
            ys, xs = where
            value = np.broadcast_to(np.asarray(value, self.dtype), ys.shape)
            for tile, inside in self._points_by_tile(ys, xs):
                self._writable(tile)[ys[inside] % t, xs[inside] % t] = value[inside]
            return
        box, squeeze = where
        shape = tuple(stop - start for start, stop in box)
        value = np.asarray(value, self.dtype)
        value = np.broadcast_to(np.expand_dims(value, squeeze) if squeeze and value.ndim else
                                value, shape)
        for tile, (ys, xs) in self._tiles_of(box):
            part = value[ys.start - box[0][0]:ys.stop - box[0][0],
                         xs.start - box[1][0]:xs.stop - box[1][0]]
            if tile not in self._tiles and not part.any():
                continue                    # zeros into an unwritten tile: nothing to store
            self._writable(tile)[ys.start % t:ys.start % t + ys.stop - ys.start,
                                 xs.start % t:xs.start % t + xs.stop - xs.start] = part

    def __array__(self, dtype=None, copy=None):
        whole = self[:, :]
        return whole if dtype is None else whole.astype(dtype)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return (f"<TiledLabels {self.shape} at {self.origin}, {self.dtype}: "
                f"{len(self._tiles)} tile(s) of {self.tile}² stored>")
