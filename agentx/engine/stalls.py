"""The sim's own event-loop stalls (issue #24): a stretch of wall time in which the server's one
thread held the loop (or was held off the CPU), so that no token could be written on time.

At `--speed S` a stall of w wall seconds is S x w modeled seconds of lag in every token due
meanwhile, and a request whose first token falls in it carries all of it as host error. The
watch times the server's synchronous phases (a request's parse, an engine slice, a request's
finish, a scrape), each cyclic garbage collection (`gc.callbacks`) and the engine loop's
wake-ups (how late a timed sleep returned); whatever lasted STALL_S or more is a stall: one
observation of `agentx_sim:loop_stall_seconds` (wall seconds) and a line in the truth log
saying what the loop was doing. Each stall carries the CPU seconds the process spent in it: CPU
close to the wall time is the sim's own work, little CPU is a host that ran something else.

Cost when nothing stalls: per phase two clock reads, a getrusage and a pread of the thread's
schedstat (~3 us; the last two are the start of a stall's deltas); nothing is logged.
"""

from __future__ import annotations

import gc
import os
import resource
import time

from agentx.engine.metrics import Histogram

# A phase is a stall from 50 ms of wall time: 10x the largest legitimate synchronous step (a
# 128k-token prompt's parse and hashes, ~6 ms of CPU; the engine's catch-up slice is 10 ms), and
# 100 modeled ms at the demo's speed 2 (200 at the speed 4 it was chosen at), a third to half a
# TTFT p50: lag under it is the host error's ordinary few ms, lag over it is one event to name.
STALL_S = 0.05
STALL_BUCKETS = (0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

clock, cpu_clock = time.perf_counter, time.process_time
RUSAGE = ("ru_majflt", "ru_minflt", "ru_inblock", "ru_oublock", "ru_nvcsw", "ru_nivcsw")


class LoopWatch:
    """Stalls of one server's loop: `hist` (wall seconds), `by_phase` (counts), `max_s`; each
    stall also goes to `log` (a callable taking the truth log's record) when given."""

    def __init__(self, threshold: float = STALL_S, log=None):
        self.threshold = threshold
        self.log = log
        self.hist = Histogram(STALL_BUCKETS)
        self.by_phase: dict[str, int] = {}
        self.max_s = 0.0
        self.count = 0
        self._gc_start = None
        self._sched = None  # /proc/thread-self/schedstat of the loop's thread (Linux): its run-queue wait
        self.context = None  # a callable: what the engine is doing (a dict), added to every stall record

    def start(self) -> None:
        gc.callbacks.append(self._gc)
        try:
            self._sched = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self._sched = None

    def stop(self) -> None:
        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)
        if self._sched is not None:
            os.close(self._sched)
            self._sched = None

    def mark(self) -> tuple:
        """Now: (wall, CPU, the process's resource usage, the thread's run-queue wait or None)."""
        return clock(), cpu_clock(), resource.getrusage(resource.RUSAGE_SELF), self._queued()

    def _queued(self) -> float | None:
        """Seconds the loop's thread has waited on a run queue (ready, not running) since it started."""
        if self._sched is None:
            return None
        try:
            return int(os.pread(self._sched, 64, 0).split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return None

    def end(self, mark: tuple, phase: str, info=None) -> float:
        """A phase begun at `mark` ended now; recorded as a stall when it lasted the threshold or
        more (`info`: a dict, or a callable making it, only called then). Returns its wall seconds."""
        wall = clock() - mark[0]
        if wall >= self.threshold:
            now = self.mark()
            info = dict(info() if callable(info) else info or {})
            info.update({k[3:]: getattr(now[2], k) - getattr(mark[2], k) for k in RUSAGE})
            if now[3] is not None and mark[3] is not None:
                info["runqueue_s"] = round(now[3] - mark[3], 6)  # ready but not running: another process had the CPU
            self.stall(phase, wall, now[1] - mark[1], info)
        return wall

    def stall(self, phase: str, wall: float, cpu: float, info: dict | None = None) -> None:
        self.count += 1
        self.hist.observe(wall)
        self.by_phase[phase] = self.by_phase.get(phase, 0) + 1
        self.max_s = max(self.max_s, wall)
        if self.log is None:
            return
        record = {"phase": phase, "wall_s": round(wall, 6), "cpu_s": round(cpu, 6), "at": time.time(),
                  "gc_counts": gc.get_count()}
        if info:
            record.update(info)
        if self.context is not None:
            record["engine"] = self.context()
        self.log({"stall": record})

    def _gc(self, event: str, info: dict) -> None:
        if event == "start":
            self._gc_start = self.mark()
        elif self._gc_start is not None:
            mark, self._gc_start = self._gc_start, None
            self.end(mark, "gc", lambda: {"generation": info["generation"], "collected": info["collected"],
                                          "tracked_objects": len(gc.get_objects(info["generation"]))})

    def series(self, labels: dict) -> list[tuple]:
        """(kind, name, doc, labels, value) for /metrics (`metrics.server_series`)."""
        out = [("histogram", "agentx_sim:loop_stall_seconds", f"Wall seconds the sim's event loop was held "
                f"({self.threshold:g} s or more: a stall; its phase is in the truth log).", labels, self.hist),
               ("gauge", "agentx_sim:loop_stall_max_seconds", "The longest stall of the sim's event loop (wall s).",
                labels, self.max_s)]
        out += [("counter", "agentx_sim:loop_stalls", "Stalls of the sim's event loop by phase.",
                 {**labels, "phase": phase}, n) for phase, n in sorted(self.by_phase.items())]
        return out
