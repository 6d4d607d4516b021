"""The ``msclassify`` command: demo, train, predict, evaluate, info, and ``tabular``.

Every sub-command mirrors the Python API (``--cost-tradeoff`` is
``PixelClassifier(cost_tradeoff=...)``). Failures caused by the input (a
missing or corrupt file, a model for other images, an unwritable or full
output folder) print one line naming the file and the fix and exit with
status 1; ``--traceback`` shows the Python traceback instead. Ctrl-C exits
with status 130. ``msclassify predict`` writes every frame atomically and a
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

from ._main import build_parser, main

__all__ = ["build_parser", "main"]
