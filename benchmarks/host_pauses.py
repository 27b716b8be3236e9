"""How often the host itself stops a process for milliseconds (issue #24's late dispatches on a
quiet host): two processes side by side for D seconds, each stamping its own stops:

  sleeper   an event loop (uvloop, as bench's client) awaiting 1 ms timers: a stop is a timer
            that fired more than --threshold ms after it was due (bench's dispatch lateness)
  spinner   a busy loop reading the clock: a stop is a gap over --threshold ms between two reads
            (the process was off its CPU)

A stop of both processes at once (their intervals overlap) is the whole host pausing (a VM's
vCPUs descheduled by the hypervisor, a host-wide stall), which no client code can avoid: the
dispatch loop spinning instead of sleeping would not have sent on time either. CLOCK_MONOTONIC is
shared by both processes. Prints one table, the load average and the steal time /proc/stat
counted over the run.

`--spin-ms A,B` then keeps due times the way bench's dispatch loop does, in two processes side by
side for the same duration: due times 50-150 ms apart, each process sleeping until A (resp. B) ms
before a due time and spinning the rest (the loop spins its last TIMER_SLACK_S, 2 ms); prints each
one's lateness. Spinning longer avoids a sleeping process being woken late, not the host pausing.

    python benchmarks/host_pauses.py [--duration 60] [--threshold 5] [--spin-ms 2,25]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import time

import numpy as np

from agentx.serving import run_async  # uvloop where installed, as bench's client


def _side_by_side(jobs: list) -> list:
    """Run each (function, args) in its own process at once; each puts one result on the queue
    passed last. The results, in the order they arrived."""
    out = mp.Queue()
    procs = [mp.Process(target=f, args=(*args, out)) for f, args in jobs]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return results


def _sleeper(duration: float, threshold: float, out) -> None:
    async def beat() -> tuple[list, list]:
        lateness, stops = [], []
        end = time.perf_counter() + duration
        due = time.perf_counter() + 0.001
        while due < end:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            now = time.perf_counter()
            lateness.append(now - due)
            if now - due > threshold:
                stops.append((due, now))
            due = now + 0.001
        return lateness, stops

    out.put(("sleeper", *run_async(beat())))


def _spinner(duration: float, threshold: float, out) -> None:
    gaps, stops = [], []
    last = time.perf_counter()
    end = last + duration
    while last < end:
        now = time.perf_counter()
        if now - last > 0.0005:
            gaps.append(now - last)
            if now - last > threshold:
                stops.append((last, now))
        last = now
    out.put(("spinner", gaps, stops))


def _dues(duration: float, spin: float, out) -> None:
    async def keep() -> list:
        loop = asyncio.get_running_loop()
        rng = np.random.default_rng(0)
        lateness = []
        end = time.perf_counter() + duration
        due = time.perf_counter() + 0.05
        while due < end:
            wall = due - time.perf_counter()
            if wall > spin:
                woken = asyncio.Event()
                loop.call_later(wall - spin, woken.set)
                await woken.wait()
            while time.perf_counter() < due:
                await asyncio.sleep(0)
            lateness.append(time.perf_counter() - due)
            due += rng.uniform(0.05, 0.15)
        return lateness

    out.put((spin, run_async(keep())))


def _keep_dues(duration: float, spins: list[float]) -> None:
    found = dict(_side_by_side([(_dues, (duration, spin)) for spin in spins]))
    print("\n| due times kept, spinning the last | dues | p50 ms | p99 ms | max ms | late > 5 ms | > 10 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for spin in spins:
        ms = np.array(found[spin]) * 1000
        print(f"| {spin * 1000:g} ms | {len(ms):,} | {np.percentile(ms, 50):.2f} | {np.percentile(ms, 99):.2f} | "
              f"{ms.max():.1f} | {int((ms > 5).sum())} | {int((ms > 10).sum())} |")


def _steal_s() -> float | None:
    """Seconds of steal over all CPUs so far (/proc/stat, USER_HZ ticks); None off Linux."""
    try:
        with open("/proc/stat") as f:
            return int(f.readline().split()[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _overlapping(a: list, b: list) -> int:
    """Stops of `a` that overlap a stop of `b`."""
    return sum(1 for s, e in a if any(s < e2 and s2 < e for s2, e2 in b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--threshold", type=float, default=5.0, help="ms: a stop is longer than this")
    ap.add_argument("--spin-ms", default=None, help="A,B: then keep due times in two processes spinning A, B ms")
    args = ap.parse_args()
    threshold = args.threshold / 1000
    steal0 = _steal_s()
    load0 = os.getloadavg()[0]
    found = {name: (values, stops) for name, values, stops in
             _side_by_side([(f, (args.duration, threshold)) for f in (_sleeper, _spinner)])}
    steal = None if steal0 is None else _steal_s() - steal0
    print(f"{args.duration:g} s, load {load0:.2f} -> {os.getloadavg()[0]:.2f}, steal over the run "
          f"{'n/a' if steal is None else f'{steal * 1000:.0f} ms'} (all CPUs)")
    print(f"| process | samples | p50 ms | p99 ms | max ms | stops > {args.threshold:g} ms | > 10 ms | > 20 ms "
          f"| of them while the other stopped too |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, other in (("sleeper", "spinner"), ("spinner", "sleeper")):
        values, stops = found[name]
        ms = np.array(values) * 1000 if values else np.zeros(1)
        lengths = [(e - s) * 1000 for s, e in stops]
        print(f"| {name} | {len(values):,} | {np.percentile(ms, 50):.2f} | {np.percentile(ms, 99):.2f} | "
              f"{ms.max():.1f} | {len(stops)} | {sum(x > 10 for x in lengths)} | {sum(x > 20 for x in lengths)} | "
              f"{_overlapping(stops, found[other][1])} |")
    print("(spinner samples: its gaps over 0.5 ms only)")
    if args.spin_ms:
        _keep_dues(args.duration, [float(x) / 1000 for x in args.spin_ms.split(",")])


if __name__ == "__main__":
    main()
