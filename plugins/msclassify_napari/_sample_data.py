"""napari sample data: the synthetic fly-arena frames with user-style scribbles."""

import sys

import numpy as np

from msclassify.datasets import load_sample_flies

from ._controller import CLASS_NAMES_KEY

__all__ = ["sample_flies"]

SCRIBBLES_NAME = "scribbles"


def sample_flies():
    """The 8 synthetic fly frames, their scribbles (1 background, 2 fly) and the exact masks.

    The masks layer is hidden; it is the reference the plugin's tests score against.
    napari would show the middle frame, which has no scribbles: once the layers
    are in the viewer, its time slider moves to the first scribbled frame.
    """
    frames, masks, scribbles = load_sample_flies()
    first = int(np.flatnonzero(scribbles.reshape(len(scribbles), -1).any(axis=1))[0])
    _show_frame_when_added(first)
    return [
        (frames, {"name": "flies"}, "image"),
        (masks, {"name": "fly masks (reference)", "visible": False}, "labels"),
        (scribbles, {"name": SCRIBBLES_NAME,
                     "metadata": {CLASS_NAMES_KEY: {1: "background", 2: "fly"}}}, "labels"),
    ]


def _show_frame_when_added(frame):
    """Move the current viewer's time slider to ``frame`` once the scribble layer is added.

    napari is not imported here: called from napari's Open Sample it is loaded already, and
    called without napari (e.g. a script reading the sample) there is no viewer to move.
    """
    napari = sys.modules.get("napari")
    viewer = None if napari is None else napari.current_viewer()
    if viewer is None:
        return

    def on_inserted(event):
        if event.value.name.startswith(SCRIBBLES_NAME):
            viewer.layers.events.inserted.disconnect(on_inserted)
            viewer.dims.set_current_step(0, frame)

    viewer.layers.events.inserted.connect(on_inserted)
