"""napari reader for OME-Zarr images: every level of the pyramid as one multiscale layer.

napari calls a reader on its GUI thread and adds the layers it returns in the same call, so
whatever the reader's module imports freezes the window while a user opens the image. This
module imports nothing but zarr, and zarr only when a folder is read: not the classifier
(`_large`, the dock, imports Numba, scikit-learn and Dask: seconds), not Qt, not napari.
"""

from pathlib import Path

__all__ = ["get_zarr_reader", "read_ome_zarr"]


def _multiscales(path):
    import zarr

    try:
        group = zarr.open_group(str(path), mode="r")
    except Exception:
        return None, None
    attrs = group.attrs.asdict()
    multiscales = attrs.get("ome", attrs).get("multiscales")
    return group, multiscales


def get_zarr_reader(path):
    """`read_ome_zarr` for an OME-Zarr image folder, None for anything else."""
    if isinstance(path, (list, tuple)) or not Path(path).is_dir():
        return None
    _, multiscales = _multiscales(path)
    return read_ome_zarr if multiscales else None


def read_ome_zarr(path):
    """Every level of the OME-Zarr image at ``path`` as one multiscale napari image layer.

    Channels (an NGFF ``c`` axis) become ``channel_axis``; the labels written by
    ``msclassify predict`` (its ``labels/`` group) come as a multiscale labels layer.
    """
    group, multiscales = _multiscales(path)
    first = multiscales[0]
    axes = [a["name"] if isinstance(a, dict) else a for a in first["axes"]]
    levels = [group[d["path"]] for d in first["datasets"]]
    kwargs = {"name": Path(path).stem, "multiscale": len(levels) > 1,
              "metadata": {"msclassify_path": str(path)}}
    if "c" in axes:
        kwargs["channel_axis"] = axes.index("c")
    layers = [(levels if len(levels) > 1 else levels[0], kwargs, "image")]
    if "labels" in group:
        for name in group["labels"].attrs.asdict().get("ome", {}).get("labels", []):
            found, label_scales = _multiscales(Path(path) / "labels" / name)
            if label_scales:
                data = [found[d["path"]] for d in label_scales[0]["datasets"]]
                layers.append((data if len(data) > 1 else data[0],
                               {"name": name, "multiscale": len(data) > 1}, "labels"))
    return layers
