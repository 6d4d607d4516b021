"""Atomic writes: a file is either its old self or complete, never half-written."""

import errno
import os
import tempfile
from pathlib import Path

from ._errors import FrameWriteError, _write_error

__all__ = ["write_atomically"]


def write_atomically(final_path, write):
    """Run ``write(file)`` on a temporary sibling, fsync it, then rename it to ``final_path``.

    A crash or an exception at any point leaves either the old file or the new
    one, never a half-written ``final_path``; the temporary file is removed on
    error (a hard kill can leave a hidden ``.NAME.*.tmp``, which readers ignore).

    Raises
    ------
    FrameWriteError
        When the operating system refuses the write (a full disk, a read-only or
        missing folder): one line naming ``final_path``, the cause and the fix.
    """
    final_path = Path(final_path)
    temporary = None
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{final_path.name}.", suffix=".tmp",
                                         dir=final_path.parent)
        os.close(fd)  # reopened by name: tifffile needs a file object with a real .name
        # mkstemp creates owner-only files; outputs get the permissions of an ordinary file.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        with open(temporary, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, final_path)
    except BaseException as exc:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, FrameWriteError):
            raise _write_error(final_path, exc, writing_frame=False) from None
        raise


def publish(temporary, final_path):
    """Give the finished file ``temporary`` the name ``final_path``, never replacing a file.

    A hard link is atomic and fails when ``final_path`` exists, so a file that
    another run wrote meanwhile is never overwritten; the temporary name is then
    removed. On a file system without hard links, the rename happens only if no
    file of that name exists (a check that cannot be atomic there).

    Raises
    ------
    FileExistsError
        When ``final_path`` exists; ``temporary`` is left as it is.
    """
    try:
        os.link(temporary, final_path)
    except FileExistsError:
        raise
    except OSError:  # no hard links on this file system
        if os.path.lexists(final_path):
            raise FileExistsError(errno.EEXIST, "file exists", str(final_path)) from None
        os.replace(temporary, final_path)
        return
    os.unlink(temporary)
