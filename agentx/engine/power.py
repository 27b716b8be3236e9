"""Modeled GPU power of one engine core (SPEC §6, "Power"): every GPU of its tensor-parallel
group draws the preset's idle power, plus (TDP - idle) while an iteration keeps it busy.

An iteration of duration d is busy for its roofline time (compute and memory combined, timing.overlap; without
the fixed per-iteration overhead and the host-link loads, when the GPU waits), so the draw
averaged over an iteration is idle + (TDP - idle) x busy / d, and an idle engine draws idle.
Energy per GPU at modeled time t is idle x t + (TDP - idle) x (busy seconds up to t), an
iteration's busy time spread evenly over it (a decode window, engine/window.py, records each of
its iterations as `step()` would). Published as DCGM exporter's series (engine/metrics.py):
`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (mJ), `DCGM_FI_DEV_POWER_USAGE` (W, the mean over the
last modeled second, as nvidia-smi's power.draw averages over 1 s) and `DCGM_FI_DEV_GPU_UTIL`
(%, busy share of that second).
"""

from __future__ import annotations

import math
from collections import deque

AVERAGE_S = 1.0  # power and utilization are means over this much modeled time
KEEP_S = 4.0  # iterations that ended this long before the latest one began are folded into a sum
# (queries come at the engine's present, at most an iteration behind its latest one, or at or after
# the time `hold` names: a virtual run's window closes as its last profiled request ends, read after
# its loop has run on through the grace or the drain)


class PowerModel:
    def __init__(self, idle_w: float, tdp_w: float):
        self.idle_w, self.tdp_w = idle_w, tdp_w
        self.folded = 0.0  # busy seconds of iterations folded away
        self.total = 0.0  # busy seconds of every iteration so far
        self.recent: deque = deque()  # (start, end, busy seconds, busy seconds before it) of later iterations
        self.hold = -math.inf  # no iteration ending at or after this is folded away

    @property
    def known(self) -> bool:
        return self.tdp_w > 0

    def iteration(self, start: float, duration: float, busy: float) -> None:
        if duration > 0 and busy > 0:
            recent, busy = self.recent, min(busy, duration)
            while recent and recent[0][1] < min(start - KEEP_S, self.hold):
                self.folded += recent.popleft()[2]
            recent.append((start, start + duration, busy, self.total))
            self.total += busy

    def busy_s(self, t: float) -> float:
        """Busy seconds up to modeled time t (exact for t no earlier than KEEP_S before the
        latest iteration's start, or than `hold`); read from the latest iteration back, as reads
        come near the present."""
        for start, end, busy, before in reversed(self.recent):
            if start < t:
                return before + (busy if end <= t else busy * (t - start) / (end - start))
        return self.folded

    def energy_j(self, t: float) -> float:
        """Joules one GPU of the group has drawn from modeled time 0 to t."""
        return self.idle_w * t + (self.tdp_w - self.idle_w) * self.busy_s(t)

    def reading(self, t: float) -> tuple[float, float, float]:
        """(utilization: busy share of the last AVERAGE_S, watts: the mean draw over it, joules
        since 0) of one GPU at modeled time t."""
        span, busy = min(AVERAGE_S, t), self.busy_s(t)
        util = (busy - self.busy_s(t - span)) / span if span > 0 else 0.0
        extra = self.tdp_w - self.idle_w
        return util, self.idle_w + extra * util, self.idle_w * t + extra * busy
