"""Sample a telemetry source every second into `power.jsonl`, one line per read: the run-clock
time, the run's phase and the readings per GPU, or the read's error. Two more reads bound the
profiling window, as the server scrapes do: "open" at the profiling start itself (not when the
warmup drained: the idle lead in between would count as window energy) and "close" when its last
request has ended."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated

import msgspec

from agentx.power.readings import GpuReading, TelemetryError
from agentx.records import Head, iter_jsonl, read_jsonl, read_line

Phase = Annotated[str, msgspec.Meta(max_length=20)]
# the reads between "open" and "close": a drained run (--drain) closes when its last profiled
# request ends, so its drain reads lie inside the window whose energy is counted
WINDOW_PHASES = ("open", "profile", "drain", "close")


class PowerSample(msgspec.Struct, frozen=True, omit_defaults=True):
    t: float  # run clock (modeled seconds with a clock scale)
    phase: Phase
    gpus: Annotated[list[GpuReading], msgspec.Meta(max_length=4096)] = []
    error: Annotated[str, msgspec.Meta(max_length=500)] | None = None


_encode = msgspec.json.Encoder().encode


def sample_line(sample: PowerSample) -> bytes:
    return _encode(sample) + b"\n"


def read_power(path: Path) -> list[PowerSample]:
    """A run folder's `power.jsonl` (none: an empty list); a bad line is an error naming it."""
    return read_jsonl(path, PowerSample) if path.exists() else []


def read_window_power(path: Path) -> list[PowerSample]:
    """The reads of `read_power` that `energy.window_energy` looks at (open, profile, drain,
    close), a line at a time (a 72-GPU hour's warmup reads are never kept)."""
    if not path.exists():
        return []
    return [read_line(path, at, PowerSample) for at, head in iter_jsonl(path, Head) if head.phase in WINDOW_PHASES]


class PowerSampler:
    def __init__(self, source, path: Path, clock, phase, interval_s: float = 1.0):
        self.source, self.path, self.clock, self.phase, self.interval = source, path, clock, phase, interval_s
        self.file = None
        self.reads = self.errors = 0

    def __enter__(self):
        self.file = open(self.path, "ab", buffering=0)
        return self

    def __exit__(self, *exc):
        self.file.close()

    async def run(self) -> None:
        next_at = time.perf_counter()
        while True:
            await self.sample_once()
            next_at += self.interval
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    async def sample_once(self, phase: str | None = None) -> bool:
        """One read, stamped when it was asked for; False when it failed."""
        t, phase = self.clock(), phase or self.phase()
        try:
            sample = PowerSample(t, phase, await self.source.read())
        except TelemetryError as e:
            sample = PowerSample(t, phase, error=str(e)[:500])
        self.reads += 1
        self.errors += sample.error is not None
        self.file.write(sample_line(sample))
        return sample.error is None
