"""Linking objects over frames into tracks, frame by frame, with trackpy.

trackpy (Crocker & Grier's linking, maintained by the soft-matter community)
links one frame at a time through its `trackpy.linking.Linker`: a track is
extended by the object that minimises the summed squared displacement of all
links within ``search_range``, and an object that vanishes is remembered for
``memory`` frames (gap closing: it is linked again when it reappears near where
it was last seen). With ``motion="velocity"`` each track is expected where a
share ``velocity_weight`` of its last velocity takes it (two objects that cross
keep their ids, where the nearest position would swap them). Track ids are final when a frame is linked, so tracks grow
while frames are segmented, and replaying the frames of a table reproduces them
(`ObjectTracker.replay`), which is how an interrupted run resumes.
"""

import numpy as np

from ..checks import is_int

__all__ = ["ObjectTracker"]


class ObjectTracker:
    """Track ids for the objects of successive frames.

    Parameters
    ----------
    search_range : float
        Largest distance (pixels) an object moves between two linked frames.
    memory : int
        Frames an object may vanish (missed, merged with another) and still
        continue its track when it reappears.
    motion : {"velocity", "none"}
        Where a track is expected in the next frame: moved on by its last
        velocity (pixels per frame, from its last two positions), or where it was.
    velocity_weight : float
        With ``motion="velocity"``, the share of the last velocity a track is
        expected to keep, between 0 (it stays) and 1 (constant velocity). A
        velocity from two positions is a noisy guess of the next step (animals
        stop, turn and jump); the default 0.5, halfway, misses a stop after a
        jump, or a step after a stop, by half a step rather than a whole one.

    Examples
    --------
    Two objects that swap nothing: each keeps its id; one vanishes for a frame
    and continues its track.

    >>> tracker = ObjectTracker(search_range=5, memory=2)
    >>> tracker.link(0, [[10, 10], [30, 30]]).tolist()
    [0, 1]
    >>> tracker.link(1, [[31, 31]]).tolist()
    [1]
    >>> tracker.link(2, [[32, 32], [11, 11]]).tolist()
    [1, 0]
    """

    def __init__(self, search_range=100.0, memory=25, motion="velocity", velocity_weight=0.5):
        if not (isinstance(search_range, (int, float)) and search_range > 0):
            raise ValueError(f"search_range must be a positive distance in pixels, got "
                             f"{search_range!r}")
        if not is_int(memory, 0):
            raise ValueError(f"memory must be an integer >= 0 (frames), got {memory!r}")
        if motion not in ("velocity", "none"):
            raise ValueError(f"motion must be 'velocity' or 'none', got {motion!r}")
        if not (isinstance(velocity_weight, (int, float)) and 0 <= velocity_weight <= 1):
            raise ValueError(f"velocity_weight must be between 0 and 1, got {velocity_weight!r}")
        self.search_range = float(search_range)
        self.memory = int(memory)
        self.motion = motion
        self.velocity_weight = float(velocity_weight)
        self._velocity = {}      # trackpy's track object -> (frame, position, velocity)
        self._linker = None
        self._ids = {}           # trackpy's track object -> our track id
        self._n_tracks = 0
        self._last_frame = None

    def link(self, frame, coordinates, ids=None):
        """Track id of each object of ``frame`` (after every earlier frame was linked).

        Parameters
        ----------
        frame : int
            Frame number, larger than that of the previous call.
        coordinates : array-like (n, 2)
            The objects' centroids (row, column).
        ids : array-like (n,), optional
            The ids these objects got before (replaying a journal): the tracks
            continue under them, even where trackpy breaks an exact tie otherwise.

        Returns
        -------
        ndarray of int64 (n,)
            Ids 0, 1, 2, ... in the order tracks start.
        """
        from trackpy.linking import Linker

        coordinates = np.asarray(coordinates, dtype=np.float64).reshape(-1, 2)
        frame = int(frame)
        if self._last_frame is not None and frame <= self._last_frame:
            raise ValueError(f"frames are linked in increasing order: frame {frame} after "
                             f"frame {self._last_frame}")
        if self._linker is None:
            self._linker = Linker(self.search_range, memory=self.memory,
                                  predictor=self._predict if self.motion == "velocity" else None)
            self._linker.init_level(coordinates, frame)
        else:
            self._linker.next_level(coordinates, frame)
        self._last_frame = frame
        points = self._linker.hash.points
        if ids is not None:
            for point, known in zip(points, np.asarray(ids, dtype=np.int64).ravel()):
                self._adopt(point.track, int(known))
        ids = np.array([self._id(point.track) for point in points], dtype=np.int64)
        for point in points:
            last = self._velocity.get(point.track)
            velocity = (np.zeros(2) if last is None else
                        (np.asarray(point.pos) - last[1]) / (frame - last[0]))
            self._velocity[point.track] = (frame, np.array(point.pos, dtype=np.float64),
                                           velocity)
        self._forget_ended()
        return ids

    def _predict(self, frame, points):
        """Where trackpy should expect ``points`` (of earlier frames) in ``frame``: moved on by
        ``velocity_weight`` times the last velocity from where each was last seen."""
        expected = []
        for point in points:
            seen, position, velocity = self._velocity[point.track]
            expected.append(position + self.velocity_weight * velocity * (frame - seen))
        return np.array(expected, dtype=np.float64).reshape(-1, 2)

    def _adopt(self, track, known):
        """Give ``track`` the id ``known``; a track that held it takes ``track``'s old id."""
        before = self._id(track)
        for other, given in self._ids.items():
            if given == known and other is not track:
                self._ids[other] = before
        self._ids[track] = known
        self._n_tracks = max(self._n_tracks, known + 1)

    def _id(self, track):
        if track not in self._ids:
            self._ids[track] = self._n_tracks
            self._n_tracks += 1
        return self._ids[track]

    def _forget_ended(self):
        """Drop tracks neither in the current frame nor remembered (keeps the map small)."""
        alive = {point.track for point in self._linker.hash.points}
        alive |= {point.track for point in self._linker.mem_set}
        if len(self._ids) > 2 * len(alive) + 16:
            self._ids = {track: i for track, i in self._ids.items() if track in alive}
            self._velocity = {track: v for track, v in self._velocity.items() if track in alive}

    def replay(self, frames, coordinates, ids=None):
        """Link earlier frames again (resuming), with their recorded ``ids`` if given."""
        ids = [None] * len(frames) if ids is None else ids
        return [self.link(frame, coords, known)
                for frame, coords, known in zip(frames, coordinates, ids)]
