"""The sim server's engine loop: one task per core runs iterations on the modeled schedule (wall
seconds x speed) and delivers each one's tokens at its modeled end; requests still being read
hold an iteration that would start after their heads came."""

from __future__ import annotations

import asyncio
import contextlib
import time

from agentx.engine.core import Sequence
from agentx.engine.disagg import Workers
from agentx.engine.metrics import ServerStats
from agentx.engine.stalls import LoopWatch

RESYNC_S = 1.0  # behind the modeled schedule by more than this (wall): restart it from now
SLICE_S = 0.01  # while behind, run iterations back to back for this long between deliveries
ORDER_WAIT_S = 1.0  # a request waits at most this long (wall, from its head) for those that arrived before it
# The sim's clock (wall seconds): CLOCK_MONOTONIC read when asked. Not the event loop's time(): uvloop's
# counts whole milliseconds and is read once per loop turn, so heads, due times and lags were up to a
# millisecond or more off, and a timer could wake the engine before its tokens were due (issue #24).
clock = time.perf_counter
# Timers count whole milliseconds (uvloop's fire up to ~1 ms early, asyncio's up to 1 ms late): the
# engine waits for a due time on a timer until it is this close, then sleeps the rest with the loop held.
TIMER_GRAIN_S = 0.0015


class EngineLoop:
    """The engine's side of the server: the cores (replicas, or prefill and decode workers), the
    wall time modeled time starts at, a wake-up per core, and the heads of the requests being read."""

    def __init__(self, core, speed: float, stats: ServerStats, watch: LoopWatch):
        self.core = core
        self.disagg = core if isinstance(core, Workers) else None
        self.speed, self.stats, self.watch = speed, stats, watch
        self.wakes: list[asyncio.Event] = []
        self.reading: dict[asyncio.Event, float] = {}  # requests whose head came and body is being read: head time
        self.queued = asyncio.Event()  # set when one of them is queued or refused
        self.t0 = 0.0

    def modeled_now(self) -> float:
        return (clock() - self.t0) * self.speed

    def modeled_at(self, wall: float) -> float:
        return (wall - self.t0) * self.speed

    def start(self) -> list[asyncio.Task]:
        """Start modeled time now and a task per core; the tasks are the caller's to cancel."""
        self.wakes = [asyncio.Event() for _ in self.core.cores]
        self.t0 = clock()
        self.watch.start()
        return [asyncio.create_task(self.run(core, wake)) for core, wake in zip(self.core.cores, self.wakes)]

    async def run(self, core, wake: asyncio.Event) -> None:
        """Run iterations on the modeled schedule and deliver each one's tokens at its end.

        Iteration k+1 starts when iteration k ends (modeled time), and an idle engine starts
        when its first request arrived, however late the loop gets to it: a loop held off the
        CPU for a while (a busy host) catches up, running iterations back to back for up to
        SLICE_S before their tokens are delivered together, and the modeled schedule is what it
        would have been. Only more than RESYNC_S behind (CPU-bound: it cannot catch up) does
        the schedule restart from now. A request that arrived after an iteration's modeled
        start waits for the next one (`EngineCore.step`), as it would on time.
        """
        prev_end, emitted = clock(), {}
        while True:
            if core.idle:
                wake.clear()
                await wake.wait()
            prev_end, start, held = self._slice(core, prev_end, emitted)
            await self._deliver(emitted, prev_end)
            if held is not None:
                mark = self.watch.mark()
                await self._wait_read(start)
                self.watch.end(mark, "held", lambda: {"head_age_s": round(clock() - held, 6)})

    def _slice(self, core, prev_end: float, emitted: dict) -> tuple[float, float, float | None]:
        """Iterations back to back from `prev_end` (wall) until one ends in the future or SLICE_S
        is up; their sequences with new tokens go to `emitted`. Returns the last one's end, the
        start of the one held, and the head time of the request holding it (None if none)."""
        speed, t0, watch = self.speed, self.t0, self.watch
        now = slice_start = clock()
        held, start, mark, steps = None, prev_end, watch.mark(), 0
        while not core.idle:
            if core.running:
                start = prev_end
                modeled = (start - t0) * speed
            else:
                modeled = max((prev_end - t0) * speed, core.waiting[0].arrival)
                start = t0 + modeled / speed
            if now - start > RESYNC_S:
                start, modeled = now, self._restart(core, modeled, (now - t0) * speed)
            held = self._read_before(start, now)
            if held is not None:  # a request that arrived before this iteration starts is still being read
                break
            core.now = modeled
            step = core.step()
            steps += 1
            if self.disagg and step.finished:
                self._hand_off(step.finished)
            prev_end = start + step.duration / speed
            if step.decodes:
                self.stats.itl.observe(step.duration / speed, step.decodes)
            for seq in step.emitted:  # their new tokens are due at the iteration's modeled end
                seq.due.extend([core.now] * (len(seq.output) - len(seq.due)))
                emitted[seq] = None
            now = clock()
            if prev_end > now or now - slice_start > SLICE_S:
                break
        watch.end(mark, "engine", lambda: {"iterations": steps})
        return prev_end, start, held

    async def _deliver(self, emitted: dict, due: float) -> None:
        """At `due` (wall), wake the handlers of the sequences in `emitted` to write their tokens."""
        watch = self.watch
        delay, mark, stalls = due - clock(), watch.mark(), watch.count
        await _wait_until(due)
        # the core may already be computing later tokens: show only these. Each stream's write is
        # a socket send (~50-90 us on a VM), so the order matters: first tokens (TTFT), then
        # answers that end here (their successors wait for them), then the rest.
        for seq in sorted(emitted, key=_delivery_rank):
            seq.delivered = len(seq.output)
            seq.waiter.set()
        if emitted:  # a loop turn for their handlers to write them before the next iteration's CPU
            emitted.clear()
            await asyncio.sleep(0)
        if watch.count == stalls:  # late (the wake-up or the turn) with no phase of ours to explain it: host, I/O
            watch.end((mark[0] + max(delay, 0.0), *mark[1:]), "wakeup")

    async def _wait_read(self, start: float) -> None:
        """Wait while a request whose head came before `start` (wall) is still being read, each at
        most ORDER_WAIT_S from its head. The condition is checked again at every wake-up: a body
        queued while the engine was delivering, before this wait began, set `queued` before the
        wait could see it, and waiting for the next signal held the engine until another request
        was queued or the second was up (issue #24: the 0.2-1 s stalls of the demo)."""
        while (head := self._read_before(start, clock())) is not None:
            self.queued.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(head + ORDER_WAIT_S - clock()):
                    await self.queued.wait()

    def _hand_off(self, finished: list[Sequence]) -> None:
        """Prefill stages that finished: their KV leaves for a decode worker, arriving at its
        modeled time (a timer on the modeled schedule; `Workers.prefilled`)."""
        loop = asyncio.get_running_loop()
        for seq in finished:
            if self.disagg.prefilled(seq):
                when = seq.stage.sent_at + seq.stage.transfer_s
                loop.call_later(self.t0 + when / self.speed - clock(), self._kv_arrived, when)

    def _kv_arrived(self, when: float) -> None:
        for i in self.disagg.arrive(when):
            self.wakes[i].set()

    def _restart(self, core, behind: float, modeled: float) -> float:
        """Restart the modeled schedule at `modeled` (now), `behind` being where it was: the
        skipped modeled time is no engine's, so each request in flight keeps its share
        (`jumped`) and the modeled timings it is told leave it out: a restart shows as lag."""
        self.stats.restarts += 1
        for seq in (*core.running, *core.waiting):
            share = modeled - max(behind, seq.arrival)
            if share > 0:
                seq.jumped += share
                if seq.first_token_at is None:
                    seq.jumped_first += share
        return modeled

    def _read_before(self, start: float, now: float) -> float | None:
        """The head time of the oldest request still being read whose head came before `start`
        (wall); None if none. The engine holds such an iteration until the request is queued, so
        the sim's own reading and parsing of a body is not modeled time: the request arrives
        when its head did (waiting at most ORDER_WAIT_S for a stalled body)."""
        oldest = min(self.reading.values(), default=None)
        if oldest is None or oldest > start:
            return None
        live = [h for h in self.reading.values() if now - h < ORDER_WAIT_S and h <= start]
        return min(live) if live else None

    def energy_j(self) -> float | None:
        """Joules all the modeled GPUs have drawn until now (modeled time); None without power figures."""
        if not self.core.cores[0].power.known:
            return None
        now = self.modeled_now()
        return sum(c.cfg.gpus * c.power.energy_j(now) for c in self.core.cores)

    def state(self) -> dict:
        """What the engine held when a stall was recorded: requests running and waiting, the
        longest prompt among them, and the KV index's size (runs, entries)."""
        cores = self.core.cores
        seqs = [s for c in cores for s in (*c.running, *c.waiting)]
        return {"running": sum(len(c.running) for c in cores), "waiting": sum(len(c.waiting) for c in cores),
                "longest_prompt": max((s.prompt_len for s in seqs), default=0), "reading": len(self.reading),
                "kv_runs": sum(len(c.kv.runs) for c in cores), "kv_entries": sum(c.kv.entries for c in cores)}


async def _wait_until(due: float) -> None:
    """Wait until `clock()` reaches `due`, never returning before it: on a timer while it is more
    than TIMER_GRAIN_S away, then the rest in one sleep holding the loop (at most TIMER_GRAIN_S;
    other work waits that long, but no token is written early)."""
    await asyncio.sleep(max(due - clock(), 0.0))  # (a loop turn even when due: I/O runs)
    while (left := due - clock()) > 0:
        if left > TIMER_GRAIN_S:
            await asyncio.sleep(left - TIMER_GRAIN_S / 2)
        else:
            time.sleep(left)


def _delivery_rank(seq: Sequence) -> int:
    """A delivery's place among those of one instant: 0 a first token, 1 an answer's end, 2 the rest."""
    if seq.delivered == 0:
        return 0
    return 1 if seq.finish_reason is not None else 2
