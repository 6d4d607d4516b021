"""Training pairs: the labelled frames of some inputs and their label images."""

from ._errors import FrameReadError
from ._frames import _is_grey_stored_as_colour
from ._open import open_frames, read_label_stack

__all__ = ["match_frames", "read_training_frames"]


def match_frames(frames, others):
    """Index into ``frames`` of each frame of ``others``: by position, or else by frame name.

    By position when both hold as many frames; otherwise a frame of ``others``
    pairs with the frame of ``frames`` of the same `FrameSource.name` (label file
    ``frame_000123.tif`` with frame 123 of a video).

    Returns
    -------
    indices : list of int or None
        ``indices[i]`` is the frame of ``frames`` that frame ``i`` of ``others`` pairs with.
    missing : str or None
        The name of the first frame of ``others`` that pairs with none (``indices`` is
        None then).
    """
    if len(others) == len(frames):
        return list(range(len(frames))), None
    by_name = {frames.name(i): i for i in range(len(frames))}
    for name in others.names():
        if name not in by_name:
            return None, name
    return [by_name[name] for name in others.names()], None


def _first_frame_is_grey(source):
    """Whether the first frame of ``source`` is grey: one channel, or R = G = B."""
    with open_frames(source) as frames:
        first = frames.read(0)
    return first.ndim == 2 or _is_grey_stored_as_colour(first)


def read_training_frames(image_paths, label_paths, *, as_gray=False):
    """The labelled frames of some inputs and their label images, for training.

    Each of ``image_paths`` (anything `open_frames` reads) pairs with the label
    input at the same position (anything `read_label_stack` reads); frames pair
    with label images as `match_frames` says. Label images without a labelled
    pixel (all 0) are skipped. ``as_gray`` is as in `open_frames`; with ``"auto"``
    every input is read as grey when none has colour in its first frame (grey
    footage stored as RGB is read as grey), else every input is read as stored.

    Returns
    -------
    frames, labels : list of ndarray
        The labelled frames and their ``(H, W)`` label images.

    Raises
    ------
    FrameReadError
        As `open_frames`; when the inputs do not pair up, a label image does not
        match its frame's size, or no label image holds a labelled pixel.
    """
    if len(image_paths) != len(label_paths):
        raise FrameReadError(f"got {len(image_paths)} image input(s) but {len(label_paths)} label "
                             "input(s); give one label input per image input, in the same order")
    if as_gray == "auto":  # other values: as open_frames takes them
        as_gray = all(_first_frame_is_grey(path) for path in image_paths)
    frames, labels = [], []
    for image_path, label_path in zip(image_paths, label_paths):
        with open_frames(image_path, as_gray=as_gray) as images, \
                read_label_stack(label_path) as label_source:
            position, missing = match_frames(images, label_source)
            if missing is not None:
                raise FrameReadError(
                    f"{label_path} has {len(label_source)} label frame(s) but {image_path} "
                    f"has {len(images)} frame(s), and label frame {missing!r} names no "
                    f"frame of it; give one label image per frame, or name the label files "
                    f"after the frames (e.g. {images.name(0)}.tif)")
            for index in range(len(label_source)):
                label_image = label_source.read(index)
                if not label_image.any():
                    continue
                frame = images.read(position[index])
                if frame.shape[:2] != label_image.shape:
                    raise FrameReadError(
                        f"label frame {label_source.name(index)} of {label_path} is "
                        f"{label_image.shape[1]}x{label_image.shape[0]} but frame "
                        f"{images.name(position[index])} of {image_path} is "
                        f"{frame.shape[1]}x{frame.shape[0]}; labels must match their frames")
                frames.append(frame)
                labels.append(label_image)
    if not frames:
        raise FrameReadError(f"the label images {', '.join(map(str, label_paths))} hold no "
                             "labelled pixel; label at least two classes (0 = unlabelled, 1, 2, "
                             "... = classes)")
    return frames, labels
