"""Small helpers every stage uses: stable keys, shared prefixes, a paused cyclic collector,
percentiles and the process's peak memory."""

from __future__ import annotations

import gc
import hashlib
import resource
from contextlib import contextmanager

import numpy as np


def key64(*parts) -> int:
    """A stable 64-bit key of strings and ints (not Python's salted hash)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def shared_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading items two arrays share."""
    m = min(len(a), len(b))
    same = a[:m] == b[:m]
    return m if same.all() else int(np.argmin(same))


@contextmanager
def gc_paused():
    """For building many objects without cycles (loading traces: ~10 per request): the cyclic
    collector would rescan the growing heap again and again (a third of the load time on a 99k
    corpus)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def percentiles(values: np.ndarray, qs) -> list[float] | None:
    """Percentiles `qs` (linear interpolation) of a float array; None when it is empty (the
    caller says what an empty distribution reads as)."""
    if values.size == 0:
        return None
    return [float(p) for p in np.percentile(values, qs)]


def log_bins(values, bins: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(the positive values, `bins` + 1 log-spaced edges from their min to their max, counts per
    bin); None when no value is positive. The one binning of every stored log histogram."""
    v = np.asarray(values, dtype=float)
    pos = v[v > 0]
    if pos.size == 0:
        return None
    lo, hi = float(pos.min()), float(pos.max())
    edges = np.geomspace(lo, hi if hi > lo else lo + 1, bins + 1)
    counts, _ = np.histogram(pos, edges)
    return pos, edges, counts


def peak_rss_mb() -> float:
    """This process's peak resident memory. VmHWM where Linux has it: `ru_maxrss` carries a parent's
    peak over fork and exec, so a child of a large process would report the parent's size."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
