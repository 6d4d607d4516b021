"""What the tests share: where the real data is, the benchmarks' loaders of it, and how
to start a process that a test interrupts with Ctrl-C.

The shared real data (``fly_sleap``, ``stardist_wheel``, the tabular sets, ...)
lives outside the repository, in ``$MSCLASSIFY_SHARED_DATA`` (default
``<repo>/../shared/data``), the folder the benchmarks read too. Tests that read it
take the `shared_data` fixture; the loaders of the tabular sets are
``benchmarks.shared_sets``, importable because the repository root is on the path.
"""

import os
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MSCLASSIFY_SHARED_DATA", REPO.parent / "shared" / "data"))

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def interruptible():
    """``preexec_fn`` for a child process that a test interrupts with SIGINT: the child
    starts with SIGINT's default action, as from a terminal. A shell starts background
    jobs with SIGINT ignored, children inherit that, and Python then installs no
    KeyboardInterrupt handler: the Ctrl-C tests failed when pytest ran in the background."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def shared_data():
    """``shared_data("fly_sleap/clip.mp4")``: a path in the shared real data, or skip the test.

    Without an argument, the shared data folder itself.
    """
    def path(relative=""):
        found = SHARED_DATA / relative
        if not found.exists():
            pytest.skip(f"shared data {found} is absent: set MSCLASSIFY_SHARED_DATA to the "
                        "shared data folder (or clone msclassify next to shared/)")
        return found

    return path
