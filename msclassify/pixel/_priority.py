"""Background work at a lower CPU priority than the window, so that on a busy machine the
GUI thread keeps its share of a core (the napari plugin's whole-image run and Apply to
frames, `msclassify.pixel.batch.predict_frames`).

On 2 cores, a whole-image run's threads (the Numba team, the chunk reader and writer) take
both cores; the GUI thread then waits for a core on every repaint, and panning stalls longer
(`benchmarks/study_background_pan.py`). Linux keeps a nice value per thread, and the threads a
thread starts inherit it: `run_at_lower_priority` runs a function in a thread of its own,
``nice`` steps lower, so the run and every thread it starts yield a contended core to the
window, and take all cores while the window is idle. The thread ends with the function, so no
pooled worker thread stays lowered (an unprivileged process cannot raise it again). Elsewhere
(macOS, Windows) the function runs at the usual priority.
"""

import os
import sys
import threading

__all__ = ["BACKGROUND_NICE", "lower_this_thread", "run_at_lower_priority"]

# How much lower than the window a background run runs (Linux nice steps, 19 the lowest):
# a thread at nice 10 weighs about a tenth of one at 0 when both want the same core.
BACKGROUND_NICE = 10


def lower_this_thread(nice):
    """Lower the calling thread's CPU priority by ``nice`` steps (Linux; elsewhere, or when
    not allowed, nothing); the threads it starts afterwards inherit it."""
    if not sys.platform.startswith("linux") or nice <= 0:
        return           # elsewhere PRIO_PROCESS would name a process, not this thread
    thread = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, thread,
                       min(os.getpriority(os.PRIO_PROCESS, thread) + nice, 19))
    except OSError:
        pass             # not allowed here: the usual priority


def run_at_lower_priority(function, nice=BACKGROUND_NICE):
    """``function()``, run in a new thread ``nice`` steps lower in CPU priority (Linux;
    elsewhere at the usual priority); waits for it and returns its result or raises its
    exception.

    Examples
    --------
    >>> run_at_lower_priority(lambda: 6 * 7)      # on Linux at nice 10 (its own thread)
    42
    """
    outcome = {}

    def target():
        lower_this_thread(nice)
        try:
            outcome["value"] = function()
        except BaseException as exc:       # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="msclassify-background", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
