"""Pictures of results: a segmentation against the truth, a cost map, a cost sweep; PNG files.

`agreement_overlay`
    a frame in grey with agreement colours: green hit, red false object, blue missed object
`cost_map_figure`
    a matplotlib figure of a cost map (`msclassify.PixelClassifier.cost_map`)
`cost_sweep_figure`
    a matplotlib figure of a cost sweep (`msclassify.tabular.cost_sweep`)
`tracks_figure`
    a matplotlib figure of object tracks over a frame (`msclassify.objects` tables)
`save_png`
    an RGB image or a figure written atomically as PNG

Matplotlib is imported when a figure is made, not with this module (the command
line starts faster).

Examples
--------
>>> import numpy as np
>>> overlay = agreement_overlay(np.zeros((4, 4)), np.eye(4, dtype=bool), np.eye(4, dtype=bool))
>>> overlay.shape, overlay.dtype.name, overlay[0, 0].tolist()
((4, 4, 3), 'uint8', [14, 126, 28])
"""

import imageio.v3 as iio
import numpy as np

from .io import write_atomically

__all__ = ["agreement_overlay", "cost_map_figure", "cost_sweep_figure", "save_png",
           "tracks_figure"]

_HIT, _FALSE, _MISSED = (0.1, 0.9, 0.2), (1, 0.1, 0.1), (0.2, 0.4, 1)


def agreement_overlay(frame, predicted, truth):
    """The frame in grey, coloured where a predicted mask and the true one agree or not.

    Parameters
    ----------
    frame : ndarray, shape (H, W)
    predicted, truth : ndarray of bool, shape (H, W)
        The object masks (e.g. ``labels == fly``).

    Returns
    -------
    ndarray of uint8, shape (H, W, 3)
        Green where both say object, red where only the prediction does, blue
        where only the truth does.
    """
    grey = frame.astype(np.float32)
    grey = (grey - grey.min()) / max(float(np.ptp(grey)), 1e-6)
    image = np.repeat(grey[:, :, None], 3, axis=2)
    for where, colour in ((predicted & truth, _HIT), (predicted & ~truth, _FALSE),
                          (~predicted & truth, _MISSED)):
        image[where] = 0.45 * image[where] + 0.55 * np.asarray(colour)
    return (image * 255 + 0.5).astype(np.uint8)


def cost_map_figure(cost_map, title="evaluation cost"):
    """A matplotlib figure of a per-pixel cost map with its colour bar and mean.

    Parameters
    ----------
    cost_map : ndarray, shape (H, W)
        Operations per pixel, as `msclassify.PixelClassifier.cost_map` gives them.
    title : str, optional
        First line of the title; the second gives the mean.

    Returns
    -------
    matplotlib.figure.Figure
    """
    figure = _figure(figsize=(7, 6), dpi=110)
    axes = figure.add_subplot()
    shown = axes.imshow(cost_map, cmap="magma", interpolation="nearest")
    axes.set_title(f"{title}\n(mean {cost_map.mean():.2f} operations per pixel)")
    axes.set_axis_off()
    figure.colorbar(shown, ax=axes, label="operations per pixel")
    return figure


def cost_sweep_figure(sweep, title):
    """A matplotlib figure of a cost sweep: score against mean cost (`plot_cost_sweep`).

    Parameters
    ----------
    sweep : msclassify.tabular.CostSweep
    title : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .tabular import plot_cost_sweep

    figure = _figure(figsize=(6, 4.5), dpi=110, tight_layout=True)
    plot_cost_sweep(sweep, figure.add_subplot()).set_title(title, fontsize=9)
    return figure


def tracks_figure(frame, table, title="tracks", reference=None):
    """A matplotlib figure of the tracks of an object table drawn over a frame.

    Parameters
    ----------
    frame : ndarray (H, W) or (H, W, 3)
        Shown in grey under the tracks.
    table : pandas.DataFrame
        Columns ``track`` (-1 = not tracked), ``frame``, ``centroid-0``, ``centroid-1``.
    title : str
    reference : sequence of ndarray (T, 2), optional
        Other paths (row, column) drawn wide and pale under the tracks, e.g. a
        reference tracker's.

    Returns
    -------
    matplotlib.figure.Figure
    """
    figure = _figure(figsize=(7, 7), dpi=110, tight_layout=True)
    axes = figure.add_subplot()
    axes.imshow(frame, cmap="gray")
    for k, path in enumerate(reference or ()):
        axes.plot(path[:, 1], path[:, 0], color="white", lw=3, alpha=0.35,
                  label="reference" if k == 0 else None)
    colours = [f"C{k}" for k in range(10)]
    tracked = table[table["track"] >= 0].sort_values(["track", "frame"])
    for track, rows in tracked.groupby("track"):
        axes.plot(rows["centroid-1"], rows["centroid-0"], lw=1, color=colours[int(track) % 10],
                  label=f"track {track} ({len(rows)} frames)")
        axes.plot(rows["centroid-1"].iloc[-1], rows["centroid-0"].iloc[-1], "o", ms=3,
                  color=colours[int(track) % 10])
    axes.set_title(title, fontsize=9)
    if len(tracked):
        axes.legend(loc="lower right", fontsize=7)
    axes.set_axis_off()
    return figure


def save_png(path, image, crop=False):
    """Write an RGB(A) uint8 image or a matplotlib figure to ``path`` as PNG, atomically.

    Parameters
    ----------
    path : str or Path
    image : ndarray of uint8, shape (H, W, 3 or 4), or matplotlib.figure.Figure
    crop : bool, optional
        Cut a figure's white margins (matplotlib's ``bbox_inches="tight"``).

    Raises
    ------
    OSError
        If the file cannot be written (the old file, if any, stays as it was).
    """
    if hasattr(image, "savefig"):
        options = {"bbox_inches": "tight"} if crop else {}
        write_atomically(path, lambda file: image.savefig(file, format="png", **options))
    else:
        write_atomically(path, lambda file: iio.imwrite(file, image, extension=".png"))


def _figure(**kwargs):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(**kwargs)
    FigureCanvasAgg(figure)
    return figure
