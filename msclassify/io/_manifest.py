"""What an output records of itself (its manifest), and which outputs are msclassify's own.

An output records what it holds (frame count, shape, dtype, classes, frame names) and,
given a provenance, what made it; a run that would mix in other frames is refused, and
``overwrite=True`` deletes only an output msclassify wrote.
"""

import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

from ..checks import is_int
from ._errors import FrameReadWarning, FrameWriteError, _write_error
from ._frames import _is_zarr


_MANIFEST_NAME = "msclassify_frames.json"


_MANIFEST_FORMAT = "msclassify-frames"
# 2: frame names and the provenance of the prediction (version 1 outputs have neither)
_MANIFEST_VERSION = 2


def _partial_output_note(path, n_found, manifest):
    """A warning for an output folder holding fewer frames than its run was to write."""
    expected = manifest.get("n_frames") if isinstance(manifest, dict) else None
    if not is_int(expected) or n_found >= expected:
        return
    warnings.warn(f"{path} holds {n_found} of the {expected} frames msclassify was to write "
                  "there (an unfinished run or a partial export): reading those only; re-run "
                  "the same prediction to finish it", FrameReadWarning, stacklevel=4)


def _describe(manifest):
    try:
        dtype = np.dtype(manifest["dtype"]).name
    except (KeyError, TypeError):
        dtype = "unknown type"
    shape = "x".join(str(size) for size in manifest.get("frame_shape") or [])
    classes = manifest.get("n_classes")
    return (f"{manifest.get('n_frames')} frames of {shape} {dtype}"
            + (f" with {classes} class probabilities" if classes else ""))


def _first(names):
    return repr(str(names[0])) if names else "none"


def _without_paths(value):
    """``value`` without its ``path`` entries: where a file lies is not what it holds."""
    if isinstance(value, dict):
        return {key: _without_paths(item) for key, item in value.items() if key != "path"}
    return value


def _summary(value):
    if isinstance(value, dict):
        digest = value.get("sha256") or value.get("fingerprint")
        if digest:
            name = Path(str(value.get("path", ""))).name
            return f"{name + ' ' if name else ''}(content {str(digest)[:12]})".strip()
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _provenance_difference(found, expected):
    """What differs between two provenance records (paths ignored), or None."""
    if _without_paths(found) == _without_paths(expected):
        return None
    if found is None:
        return "it holds no record of what made it (an earlier msclassify or a napari export)"
    if expected is None or not isinstance(found, dict):
        return "it was made by a recorded prediction run"
    differences = [f"{key}: {_summary(found.get(key))} there, {_summary(expected.get(key))} now"
                   for key in sorted(set(found) | set(expected), key=str)
                   if _without_paths(found.get(key)) != _without_paths(expected.get(key))]
    return "; ".join(differences)


def _output_kind(path):
    """"tiff" or "zarr" for an output msclassify wrote, "empty" for an empty folder, else None."""
    path = Path(path)
    if not path.is_dir() or path.is_symlink():
        return None
    if _is_zarr(path):
        try:
            metadata = json.loads((path / "zarr.json").read_text())
            return "zarr" if "msclassify" in metadata.get("attributes", {}) else None
        except (OSError, ValueError, AttributeError):
            return None
    entries = list(path.iterdir())
    if not entries:
        return "empty"
    if not (path / _MANIFEST_NAME).is_file():
        return None

    def ours(entry, inside_probabilities=False):
        if entry.name.startswith("."):
            return entry.name.endswith(".tmp") and entry.is_file()
        if entry.is_file():
            return entry.suffix == ".tif" or (entry.name == _MANIFEST_NAME
                                              and not inside_probabilities)
        return (entry.is_dir() and entry.name == "probabilities" and not inside_probabilities
                and all(ours(child, True) for child in entry.iterdir()))

    return "tiff" if all(ours(entry) for entry in entries) else None


def _remove_output(path):
    """Delete an output msclassify wrote at ``path`` (for ``overwrite=True``); refuse anything else.

    The output is first renamed to a hidden sibling, so a crash while deleting leaves
    either the whole old output, or none at ``path`` and a hidden ``.NAME.overwritten-*``.
    """
    path = Path(path)
    if not os.path.lexists(path):
        return
    kind = _output_kind(path)
    if kind is None:
        what = "a file" if not path.is_dir() else "files msclassify did not write"
        raise FrameWriteError(f"output {path} holds {what}; overwrite only replaces outputs "
                              "msclassify wrote: move them away or choose another output")
    if kind == "empty":
        return
    try:
        trash = Path(tempfile.mkdtemp(prefix=f".{path.name}.overwritten-", dir=path.parent))
        os.replace(path, trash / path.name)
        shutil.rmtree(trash)
    except OSError as exc:
        raise _write_error(path, exc, writing_frame=False) from None
