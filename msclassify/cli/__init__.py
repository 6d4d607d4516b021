"""The ``msclassify`` command: demo, train, predict, evaluate, info, and ``tabular``.

Every sub-command mirrors the Python API (``--cost-tradeoff`` is
``PixelClassifier(cost_tradeoff=...)``). Failures caused by the input (a
missing or corrupt file, a model for other images, an unwritable or full
output folder) print one line naming the file and the fix and exit with
status 1; ``--traceback`` shows the Python traceback instead. Ctrl-C exits
with status 130 (also during start-up), a closed output pipe (``| head``) with
status 0. ``msclassify predict`` writes every frame atomically and a
re-run of the same command resumes after the frames already written.

Examples
--------
::

    msclassify demo
    msclassify train frames.tif --labels scribbles.tif -o flies.msc --cost-tradeoff 2e-4
    msclassify predict flies.msc video.mp4 -o labels/ --workers 2
    msclassify evaluate labels/ masks.tif
    msclassify info flies.msc
    msclassify tabular sweep data.train --test data.test --costs costs.txt -o sweep/
"""

import sys

__all__ = ["build_parser", "main"]

_PROG = "msclassify"
_EXIT_INTERRUPTED = 130  # 128 + SIGINT


def main(argv=None):
    """Run the ``msclassify`` command (see `msclassify.cli._main.main`); return its status.

    The library (numpy, Numba, ...) is imported here, inside the command, so that a
    Ctrl-C during those seconds of start-up ends with one line and status 130 like
    one later on, not with a traceback.
    """
    try:
        from ._main import main as run
    except KeyboardInterrupt:
        print(f"{_PROG}: interrupted", file=sys.stderr)
        return _EXIT_INTERRUPTED
    return run(argv)


def build_parser():
    """The argparse parser of the ``msclassify`` command."""
    from ._main import build_parser as build

    return build()
