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
from ._frames import _default_names, _is_zarr


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


def _as_recorded(provenance):
    """``provenance`` as an output's record reads it back (tuples become lists), or None;
    TypeError unless it is a dict of JSON values (no NaN)."""
    if provenance is None:
        return None
    if not isinstance(provenance, dict):
        raise TypeError(f"provenance must be a dict or None, got {type(provenance).__name__}")
    try:
        return json.loads(json.dumps(provenance, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"provenance must hold JSON values only ({exc})") from None


_START_OVER = ("to start over, delete it with overwrite=True (msclassify predict --overwrite), "
               "or write to another output")


def _different_job(found, expected, different):
    return ("holds a different job ("
            + ", ".join(f"{key} {found.get(key)} there, {expected[key]} now" for key in different)
            + ")")


def _check_record(path, found, expected, keys, describe=_different_job):
    """FrameWriteError unless ``found``, the record an output at ``path`` holds of itself, is
    the record ``expected`` of this run: the same format, a version this msclassify reads,
    the same provenance (paths ignored) and the same ``keys``.

    ``describe(found, expected, different_keys)`` says how the contents differ.

    Examples
    --------
    >>> record = {"format": "f", "format_version": 1, "shape": [2, 3], "provenance": None}
    >>> _check_record("out", record, record, ["shape"])
    >>> _check_record("out", dict(record, format_version="1"), record, ["shape"])
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    msclassify.io.FrameWriteError: output out has a damaged record of what it holds (format_version '1'); ...
    """
    # a damaged record no longer says what is msclassify's: overwrite would refuse it
    unrecorded = "move it away or write to another output"
    if not isinstance(found, dict) or "format" not in found:
        raise FrameWriteError(f"output {path} has an unreadable record of what it holds; "
                              f"{unrecorded}")
    if found.get("format") != expected["format"]:
        raise FrameWriteError(f"output {path} holds another kind of msclassify output "
                              f"({found.get('format')!r}, not {expected['format']!r}); "
                              f"{unrecorded}")
    version = found.get("format_version", 0)
    if not is_int(version):
        raise FrameWriteError(f"output {path} has a damaged record of what it holds "
                              f"(format_version {version!r}); {unrecorded}")
    if version > expected["format_version"]:
        raise FrameWriteError(f"output {path} was written by a newer msclassify; upgrade or "
                              "choose another output")
    difference = _provenance_difference(found.get("provenance"), expected.get("provenance"))
    if difference:
        raise FrameWriteError(f"output {path} was made by something else: {difference}; "
                              f"resuming would mix the two; {_START_OVER}")
    different = [key for key in keys if found.get(key) != expected[key]]
    if different:
        raise FrameWriteError(f"output {path} {describe(found, expected, different)}; "
                              f"{_START_OVER}")


# The marker array of a store written chunk by chunk (`msclassify.io.ChunkedLabelWriter`).
CHUNKS_DONE = "msclassify_done"


def _output_kind(path):
    """"tiff" or "zarr" for an output msclassify wrote, "empty" for an empty folder, else None."""
    path = Path(path)
    if not path.is_dir() or path.is_symlink():
        return None
    if _is_zarr(path):
        try:
            metadata = json.loads((path / "zarr.json").read_text())
            recorded = "msclassify" in metadata.get("attributes", {})
        except (OSError, ValueError, AttributeError):
            return None
        # only the arrays msclassify writes; anything a user added keeps the store
        ours = {"zarr.json", "labels", "done", "probabilities", CHUNKS_DONE}
        return "zarr" if recorded and all(entry.name in ours and not entry.is_symlink()
                                          for entry in path.iterdir()) else None
    entries = list(path.iterdir())
    if not entries:
        return "empty"
    try:  # only the frames the manifest names (version 1: frame_000000, ...) are msclassify's
        manifest = json.loads((path / _MANIFEST_NAME).read_text())
        if manifest.get("format") != _MANIFEST_FORMAT:
            return None
        names = manifest.get("names") or _default_names(min(int(manifest["n_frames"]), 10**7))
        files = {f"{name}.tif" for name in names}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None

    def ours(entry, inside_probabilities=False):
        if entry.is_symlink():
            return False
        if entry.name.startswith("."):  # a temporary file of write_atomically
            return (entry.is_file() and entry.name.endswith(".tmp")
                    and entry.name[1:].rsplit(".", 2)[0] in files | {_MANIFEST_NAME})
        if entry.is_file():
            return entry.name in files or (entry.name == _MANIFEST_NAME
                                           and not inside_probabilities)
        return (entry.is_dir() and entry.name == "probabilities" and not inside_probabilities
                and all(ours(child, True) for child in entry.iterdir()))

    return "tiff" if all(ours(entry) for entry in entries) else None


def check_not_an_input(output, inputs):
    """Raise FrameWriteError if ``output`` is, holds or links to one of ``inputs``.

    Writing (or, with ``overwrite=True``, deleting) there would destroy an input,
    such as the video being predicted or the model file. Symbolic and hard links
    count as the file they point to.

    Examples
    --------
    >>> import tempfile, os
    >>> video = os.path.join(tempfile.mkdtemp(), "video.mp4")
    >>> open(video, "wb").close()
    >>> check_not_an_input(video + ".labels", [video])  # another path: fine
    >>> check_not_an_input(video, [video])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    msclassify.io.FrameWriteError: the output ...video.mp4 is the input ...video.mp4; writing there would destroy it: ...
    """
    output = Path(output)
    real_output = Path(os.path.realpath(output))
    for item in inputs:
        item = Path(item)
        if not os.path.exists(item):
            continue
        real_item = Path(os.path.realpath(item))
        same = real_item == real_output or (os.path.exists(output)
                                            and os.path.samefile(output, item))
        if same or real_output in real_item.parents:
            how = "is" if same else "holds"
            raise FrameWriteError(f"the output {output} {how} the input {item}; writing there "
                                  "would destroy it: choose another output path",
                                  filename=str(output))


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
