"""Pinning benchmark processes to cores (shared by the benchmark scripts)."""

import os
from pathlib import Path


def pin(pid: int, cpu: int) -> None:
    """Pin every thread of a process to one core (affinity is per thread on Linux, and a child
    starts with its parent's: the check is on the machine, not on this process's affinity)."""
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        return
    tasks = Path(f"/proc/{pid}/task")
    for tid in ([int(t.name) for t in tasks.iterdir()] if tasks.exists() else [pid]):
        try:
            os.sched_setaffinity(tid, {cpu})
        except ProcessLookupError:  # a thread that just ended
            pass
