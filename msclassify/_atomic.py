"""Atomic file writes shared by model files and batch outputs."""

import os
import tempfile
from pathlib import Path


def write_atomically(final_path, write):
    """Run ``write(file)`` on a temporary sibling, fsync it, then rename it to ``final_path``.

    A crash or an exception at any point leaves either the old file or the new
    one, never a half-written ``final_path``; the temporary file is removed on
    error (a hard kill can leave a hidden ``.NAME.*.tmp``, which readers ignore).
    """
    final_path = Path(final_path)
    fd, temporary = tempfile.mkstemp(prefix=f".{final_path.name}.", suffix=".tmp",
                                     dir=final_path.parent)
    os.close(fd)  # reopened by name: tifffile needs a file object with a real .name
    try:
        # mkstemp creates owner-only files; outputs get the permissions of an ordinary file.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        with open(temporary, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, final_path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
