"""napari sample data: the synthetic fly-arena frames with user-style scribbles."""

from msclassify.datasets import load_sample_flies

from ._controller import CLASS_NAMES_KEY

__all__ = ["sample_flies"]


def sample_flies():
    """The 8 synthetic fly frames, their scribbles (1 background, 2 fly) and the exact masks.

    The masks layer is hidden; it is the reference the plugin's tests score against.
    """
    frames, masks, scribbles = load_sample_flies()
    return [
        (frames, {"name": "flies"}, "image"),
        (masks, {"name": "fly masks (reference)", "visible": False}, "labels"),
        (scribbles, {"name": "scribbles",
                     "metadata": {CLASS_NAMES_KEY: {1: "background", 2: "fly"}}}, "labels"),
    ]
