"""Small argument checks shared across msclassify, with messages that say what was wrong.

`is_int`, `check_int`
    a whole number (Python or numpy integer, never a bool) at least some minimum
`check_number`
    a finite real number (never a bool) >= 0 or > 0
`check_per_feature`
    one finite value >= 0 per feature (costs, shares)
`as_seed`
    an int seed (or None) from any scikit-learn ``random_state``
`file_problem`
    what keeps a path from being read as a regular file (missing, a folder, a FIFO, ...)

Examples
--------
>>> check_int(3, "n_estimators")
3
>>> check_int(True, "n_estimators")
Traceback (most recent call last):
    ...
ValueError: n_estimators must be an integer >= 1, got True
"""

import os
import stat
from numbers import Integral, Real

try:
    import resource
except ImportError:  # Windows
    resource = None

import numpy as np

__all__ = ["as_seed", "available_memory", "check_int", "check_number", "check_per_feature",
           "file_problem", "is_int", "physical_memory"]

_CGROUP = "/sys/fs/cgroup"


def is_int(value, minimum=None):
    """Whether ``value`` is an integer (not a bool), and ``>= minimum`` when one is given.

    Examples
    --------
    >>> is_int(np.int64(2), 1), is_int(2.0), is_int(False), is_int(0, minimum=1)
    (True, False, False, False)
    """
    return bool(isinstance(value, Integral) and not isinstance(value, (bool, np.bool_))
                and (minimum is None or value >= minimum))


def check_int(value, name, minimum=1):
    """``value`` as an int; ValueError unless it is an integer (not a bool) ``>= minimum``."""
    if not is_int(value, minimum):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_number(value, name, strict=False, note=None):
    """``value`` as a float; ValueError unless it is a finite number (not a bool) >= 0.

    Parameters
    ----------
    value : object
    name : str
        The parameter's name, for the message.
    strict : bool, optional
        Require ``> 0`` instead of ``>= 0``.
    note : str, optional
        What the number means, added to the message in parentheses.

    Examples
    --------
    >>> check_number(0.5, "learning_rate", strict=True)
    0.5
    >>> check_number(-1, "budget", note="mean cost per sample")
    Traceback (most recent call last):
        ...
    ValueError: budget must be a finite number >= 0 (mean cost per sample), got -1
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real) \
            or not np.isfinite(value) or value < 0 or (strict and value == 0):
        relation = ">" if strict else ">="
        meaning = f" ({note})" if note else ""
        raise ValueError(f"{name} must be a finite number {relation} 0{meaning}, got {value!r}")
    return float(value)


def check_per_feature(name, values, n_features, default):
    """One finite value >= 0 per feature as a float64 array; ``default`` for each when None.

    Examples
    --------
    >>> check_per_feature("feature_costs", None, 3, 1.0).tolist()
    [1.0, 1.0, 1.0]
    """
    if values is None:
        return np.full(n_features, default, dtype=np.float64)
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of numbers, one per feature") from None
    if array.ndim != 1 or array.shape[0] != n_features:
        raise ValueError(
            f"{name} has {array.size} value(s) but X has {n_features} feature(s); give one per feature")
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise ValueError(f"{name} must be finite and >= 0")
    return np.ascontiguousarray(array)


def as_seed(random_state):
    """An int seed (or None) for numpy's Generator and the core, from any scikit-learn random_state.

    None and integers are returned as they are; a `numpy.random.RandomState` gives
    one draw from it (so a shared RandomState gives each call a new seed).

    Examples
    --------
    >>> as_seed(7), as_seed(None), as_seed(np.random.RandomState(0))
    (7, None, 209652396)
    """
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31))
    if random_state is None or is_int(random_state):
        return random_state
    raise TypeError(f"random_state must be None, an int or a numpy RandomState, got "
                    f"{random_state!r}")


_SPECIAL_FILES = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_problem(path):
    """What keeps ``path`` from being read as a regular file, or None when it is one.

    Readers seek in their files and read them more than once, so a named pipe or a
    device (which would block or never end) is refused like a missing file.

    Examples
    --------
    >>> import tempfile
    >>> file_problem(tempfile.gettempdir())
    'is a folder, not a file'
    >>> file_problem("/no/such/file.tif")
    'does not exist'
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be opened ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    kind = next((name for test, name in _SPECIAL_FILES if test(mode)), "a special file")
    return f"is {kind}, not a regular file; save its content to a file first"


def available_memory():
    """Bytes this process may still allocate: free RAM, within its cgroup and ``ulimit -v``.

    Reads Linux's ``/proc`` and cgroup files; elsewhere the machine's physical memory
    is the only bound known.

    Examples
    --------
    >>> 0 <= available_memory() <= physical_memory()
    True
    """
    limits = [_kib_field("/proc/meminfo", "MemAvailable") or physical_memory()]
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            limits.append(soft - _kib_field("/proc/self/status", "VmSize"))
    except (ValueError, OSError, AttributeError, TypeError):
        pass
    try:
        with open(os.path.join(_CGROUP, "memory.max")) as fh:
            cap = fh.read().strip()
        if cap != "max":
            with open(os.path.join(_CGROUP, "memory.current")) as fh:
                limits.append(int(cap) - int(fh.read().strip()))
    except (OSError, ValueError):
        pass
    return max(0, min(limits))


def _kib_field(path, name):
    """The ``name:  N kB`` field of a /proc file, in bytes (None if absent)."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def physical_memory():
    """Bytes of physical memory of this machine (2**62, "unknown", where it cannot be read).

    Examples
    --------
    >>> physical_memory() > 2**20
    True
    """
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 2**62
