"""What goes wrong reading or writing frames, as one-line errors that name the file and the fix."""

import errno

__all__ = ["FrameReadError", "FrameReadWarning", "FrameWriteError"]

# They are msclassify.io's: tracebacks and doctests name them so.
_PUBLIC_MODULE = "msclassify.io"


class FrameReadError(ValueError):
    """Frames cannot be read: missing, corrupt, truncated, empty or unsupported input."""

    __module__ = _PUBLIC_MODULE


class FrameReadWarning(UserWarning):
    """Frames were read, but not all the file says it holds (it ends early), or an
    ambiguous layout was read one way; the message names the file and the frames read."""

    __module__ = _PUBLIC_MODULE


class FrameWriteError(OSError):
    """An output cannot be written: a frame, an output folder, a model or another file
    (disk full, not writable, foreign files, a different prediction).

    ``errno`` and ``filename`` are set when an operating-system error caused it.
    """

    __module__ = _PUBLIC_MODULE

    def __init__(self, message, errno=None, filename=None):
        super().__init__(message)
        self.errno, self.filename = errno, filename

    def __str__(self):
        return self.args[0]


def _reason(exc):
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _write_error(path, exc, writing_frame=True, unit="frame"):
    """A FrameWriteError naming ``path``, the cause and the fix (and, ``writing_frame``, that
    the ``unit``s written before stay)."""
    resume = f"; {unit}s already written stay valid and a re-run resumes after them"
    if isinstance(exc, FrameWriteError):  # from write_atomically: already says what and why
        return FrameWriteError(f"{exc}{resume if writing_frame else ''}", errno=exc.errno,
                               filename=exc.filename)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "the disk is full: free space or write to another disk"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "the folder is not writable: choose a writable output folder"
    elif exc.errno == errno.ENOTDIR:
        fix = "part of the output path is not a folder: choose another output path"
    elif exc.errno == errno.ENOENT:
        fix = "the output folder no longer exists: re-create it or choose another"
    elif exc.errno == errno.EISDIR:
        fix = "a folder of that name is in the way: choose another output path"
    else:
        fix = "check the output folder"
    return FrameWriteError(f"cannot write {path} ({exc.strerror or exc}): {fix}"
                           f"{resume if writing_frame else ''}", errno=exc.errno,
                           filename=str(path))
