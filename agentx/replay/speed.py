"""The fastest speed at which a run against agentx-sim over HTTP can be valid on this host
(`sim serve --speed auto`, and `agentx demo`'s default; SPEC section 10, "Settled: speed auto").

At speed S every wall second of host work (the client's dispatch and parsing, the HTTP path, the
sim's own per-iteration cost) becomes S modeled seconds, so the host-error and sim-lag rules of
`metrics/validity.py` (measured minus modeled, as a share of the figure, HOST_ERROR_LIMIT) grow
about linearly with S, while the client's dispatch-lateness rule (wall milliseconds,
LATE_BOUND_MS) does not move with S. The probe: this host's timer lateness (asyncio sleeps), then
a short real run at a probe speed against the sim (the same deployment flags and workload) whose
host error, read against the figures of the run the speed is for (the demo: its point's twin) or
the probe's own, gives each rule's share at that speed; the pick is the fastest of SPEEDS (up to a
cap) whose share, scaled linearly, stays within PROBED_MARGIN at or below the probe's speed and
MARGIN above it. A host whose probe already fails a rule that does not scale has none."""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from agentx.metrics.summary import LATE_BOUND_MS

SPEEDS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0)
# the share of each scaling rule's limit a pick may be predicted to use: at or below the probe's
# speed, PROBED_MARGIN (what is left is the probe's noise and the host's drift since; SPEC section 10,
# "Settled: speed auto"); above it, MARGIN (also: a faster run loads the host more than the probe did)
PROBED_MARGIN = 0.75
MARGIN = 0.5
SCALING_RULES = ("host_error_ttft", "host_error_itl", "sim_lag_ttft", "sim_lag_itl")
PROBE_S = 20.0  # the probe's window (wall seconds at speed 1)
# a short probe's own rules, not the host's: its window cuts long requests (`cancelled`); the twin
# is not run; the spread asks for no agreement
NOT_THE_HOSTS = ("cancelled", "spread")


@dataclass(frozen=True)
class SpeedChoice:
    speed: float  # the pick (the slowest of SPEEDS where none is valid)
    valid: bool  # a speed can be valid here (the run at speed 1 passed the rules that do not scale)
    ceiling: float | None  # the fastest speed the scaling rules allow within their margins (None: no figure bound it)
    timer_late_ms: dict  # p50 / p99 of an asyncio sleep's lateness, wall ms
    shares: dict  # rule -> its share of the limit per unit of speed (figure / bound / the probe's speed)
    reason: str  # one line: why this speed
    probe_speed: float = 1.0  # the speed the probe ran at
    lanes: int | None = None  # the probe's lanes (None: not probed, `choose()` alone)
    host_error: dict | None = None  # the probe's `host_error` (measured minus modeled, modeled s at probe_speed)
    stalled: bool = False  # not valid for a rule no speed changes (the client's lateness, the timer, failures)

    def line(self) -> str:
        return f"speed auto: {self.speed:g} ({self.reason})" if self.valid else f"speed auto: none ({self.reason})"


def timer_lateness(n: int = 200, sleep_s: float = 0.002) -> dict:
    """How late this host wakes an asyncio sleep (wall ms): what delays each dispatch."""
    async def probe() -> list[float]:
        late = []
        for _ in range(n):
            t = time.perf_counter()
            await asyncio.sleep(sleep_s)
            late.append((time.perf_counter() - t - sleep_s) * 1000)
        return late

    late = np.asarray(asyncio.run(probe()))
    return {"p50": float(np.percentile(late, 50)), "p99": float(np.percentile(late, 99)), "n": n}


def choose(rules: list[dict], timer: dict, probe_speed: float = 1.0, cap: float = SPEEDS[-1]) -> SpeedChoice:
    """The speed from a probe's validity rules (`result.validity.rules`, measured at `probe_speed`),
    the timer, and the fastest speed the caller allows (`cap`)."""
    fixed = [r for r in rules if not r["ok"] and r["rule"] not in SCALING_RULES + NOT_THE_HOSTS
             and not r["rule"].startswith("twin")]
    shares = {r["rule"]: r["figure"] / r["bound"] / probe_speed for r in rules  # per unit of speed
              if r["rule"] in SCALING_RULES and r["figure"] is not None and r["bound"]}
    if fixed or timer["p99"] > LATE_BOUND_MS:
        why = fixed[0]["reason"] if fixed else f"timer lateness p99 {timer['p99']:.1f} ms over {LATE_BOUND_MS} ms"
        return SpeedChoice(SPEEDS[0], False, None, timer, shares, f"no speed can be valid on this host: {why}",
                           stalled=True)
    worst = max(shares.items(), key=lambda kv: kv[1], default=None)
    ceiling = None if worst is None or worst[1] <= 0 else _ceiling(worst[1], probe_speed)
    by_host = [s for s in SPEEDS if ceiling is None or s <= ceiling]
    at = f"at speed {probe_speed:g}"
    if not by_host:
        return SpeedChoice(SPEEDS[0], False, ceiling, timer, shares,
                           f"no speed can be valid on this host now: {worst[0]} {at} is {worst[1] * probe_speed:.0%} "
                           f"of its limit: no listed speed keeps it under {PROBED_MARGIN:.0%}")
    speed = max([s for s in by_host if s <= cap], default=by_host[0])
    if worst is None:
        why = "no host-error figure bounds it"
    else:
        margin = PROBED_MARGIN if speed <= probe_speed else MARGIN
        why = (f"{worst[0]} {at} is {worst[1] * probe_speed:.1%} of its limit"
               + ("" if speed == probe_speed else f", about {worst[1] * speed:.0%} at {speed:g} (it grows with the speed)")
               + f": under {margin:.0%}")
    if by_host[-1] > speed:
        why += f"; {speed:g} is the fastest asked"
    return SpeedChoice(speed, True, ceiling, timer, shares,
                       f"{why}; timer lateness p99 {timer['p99']:.2f} ms (limit {LATE_BOUND_MS} ms)")


def _ceiling(share: float, probe_speed: float) -> float:
    """The fastest speed at which a rule whose share of its limit is `share` per unit of speed stays
    within its margin: PROBED_MARGIN up to the probe's speed, MARGIN beyond it."""
    probed = PROBED_MARGIN / share
    return probed if probed < probe_speed else max(probe_speed, MARGIN / share)


def slower_speed(rules: list[dict], speed: float) -> float | None:
    """The fastest of SPEEDS at which a run's scaling rules (`validity.rules`), measured at `speed`,
    would stay under MARGIN of their limits (each share grows linearly with the speed); None: none."""
    shares = [r["figure"] / r["bound"] / speed for r in rules
              if r["rule"] in SCALING_RULES and r["figure"] is not None and r["bound"]]
    worst = max(shares, default=0.0)
    fits = [s for s in SPEEDS if worst * s <= MARGIN]
    return fits[-1] if fits else None


def auto_speed(sessions: list, concurrency: int, serve_args: tuple[str, ...] = (), probe_s: float = PROBE_S,
               speed: float = 1.0, reference: dict | None = None, cap: float = SPEEDS[-1], **labels) -> SpeedChoice:
    """Probe this host (timer, then `probe_s` wall seconds at `speed` of `sessions` at `concurrency`
    against `agentx sim serve SERVE_ARGS`) and choose the speed, at most `cap`. `reference`: the
    TTFT / ITL figures (`request_metrics`' `ttft_s`, `itl_s`) of the run the speed is for (the
    demo's point's twin), against which the probe's host error is read; None: the probe's own,
    whose short window holds mostly the short requests. `labels`: BenchSettings options the probe
    shares with the run (`dataset`, `max_context`, ...)."""
    from agentx.engine.launch import sim_server
    from agentx.metrics.validity import host_rules
    from agentx.replay.driver import bench
    from agentx.replay.settings import BenchSettings

    timer = timer_lateness()
    with (tempfile.TemporaryDirectory(prefix="agentx-speed-") as out,
          sim_server(*serve_args, "--speed", f"{speed:g}") as url):
        settings = BenchSettings.build(url=url, concurrency=concurrency, duration=probe_s * speed, out=out,
                                       clock_scale=speed, warmup_requests_per_lane=1, grace=0.0, **labels)
        result = bench(settings, sessions)
    rules = result["validity"]["rules"]
    if reference is not None:
        rules = [r for r in rules if r["rule"] not in SCALING_RULES] + host_rules(result.get("host_error"), reference)
    return dataclasses.replace(choose(rules, timer, speed, cap), probe_speed=speed, lanes=concurrency,
                               host_error=result.get("host_error"))


_OWN_FLAGS = {"--speed", "--auto-lanes", "--host", "--port", "--truth-log"}  # (each takes a value)


def serve_flags(argv: list[str]) -> tuple[str, ...]:
    """`sim serve`'s flags less those the probe sets itself (speed, address, truth log): the
    deployment the probe serves is the one the user asked for."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg.split("=", 1)[0] in _OWN_FLAGS:
            skip = "=" not in arg
        else:
            out.append(arg)
    return tuple(out)
