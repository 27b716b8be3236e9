"""A concurrency sweep: one bench run per level, each in its own folder (`c{N}` when more than
one)."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings


def sweep(settings: BenchSettings, sessions: list, concurrencies: list[int], out: Path, command: str = "",
          progress=None, done=None, run=bench) -> list[tuple[int, dict]]:
    """(concurrency, result point) per level. `progress(settings)`, when given, is a context
    manager around each run yielding its `on_tick`; `done(n, folder, result)` follows each run.
    `run(settings, sessions, command, on_tick)` makes one run (default `bench`)."""
    results = []
    for n in concurrencies:
        folder = out / f"c{n}" if len(concurrencies) > 1 else out
        s = settings.replace(concurrency=n, out=str(folder))
        with progress(s) if progress else nullcontext() as tick:
            result = run(s, sessions, command, tick)
        if done:
            done(n, folder, result)
        results.append((n, result))
    return results
