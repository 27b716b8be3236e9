"""`--speed auto` against the demo's point (issue #43), as `agentx demo` runs it: the point picked
in virtual time (of the demo's candidates, at speed 2), this host probed at that point
(`replay/speed.py`: its timer, then 20 wall s at speed 2, its host error read against the point's
twin), then the point over HTTP at the speed picked, `--runs` times. A row per run: the host's load
average, the probe's worst scaling rule as a share of its limit at the probe's speed, the pick, the
run's worst scaling rule (host error or sim lag, measured, at the pick) and its validity. The ratio
of the two shares is what `PROBED_MARGIN` (75 %) must cover: a pick is only as good as the host
stays as quiet as it was while probed.

    python benchmarks/speed_auto.py [--runs 3] [--concurrency 8,12,16,24] [--duration 120] [--cores 0,1]

`--cores`: pinned to these CPUs (`os.sched_setaffinity`, the sim server inherits it), e.g. two
cores of a bigger quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
from pathlib import Path


def worst(rules: list[dict], names) -> tuple[str, float]:
    shares = [(r["rule"], r["figure"] / r["bound"]) for r in rules
              if r["rule"] in names and r["figure"] is not None and r["bound"]]
    return max(shares, key=lambda s: s[1], default=("-", float("nan")))


def valid(result: dict) -> str:
    failed = [r["rule"] for r in result["validity"]["rules"] if not r["ok"]]
    return "yes" if not failed else "no: " + ", ".join(failed)


def main() -> None:
    from agentx.cli import demo
    from agentx.cli.common import _corpus
    from agentx.replay.speed import SCALING_RULES

    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--concurrency", default=demo.DEMO_CANDIDATES)
    ap.add_argument("--duration", type=float, default=demo.DEMO_DURATION)
    ap.add_argument("--cores", default=None)
    args = ap.parse_args()
    if args.cores:
        os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
    corpus = _corpus([])
    sessions = corpus.sessions()
    with contextlib.redirect_stdout(io.StringIO()):
        point = demo.pick_point(sessions, [int(c) for c in args.concurrency.split(",")], args.duration,
                                demo.DEMO_SPEED, corpus.label)
    print(f"host: {os.cpu_count()} CPUs{f', pinned to {args.cores}' if args.cores else ''}; the point: c{point.lanes} "
          f"({args.duration:g} modeled s), probed at speed {demo.DEMO_SPEED:g}")
    print(f"{'run':<4} {'load':>5}  {'probe: worst rule':<24} {'share':>6}  {'pick':>5}  {'run: worst rule':<24} "
          f"{'share':>6}  {'run/probe':>9}  valid")
    for k in range(args.runs):
        load = os.getloadavg()[0]
        out = Path(tempfile.mkdtemp(prefix="speed-auto-"))
        with contextlib.redirect_stdout(io.StringIO()):
            choice = demo.probe_speed(sessions, point, corpus.label)
            result = (demo.run_point(sessions, point.lanes, args.duration, choice.speed, out, corpus.label)
                      if choice.valid else None)
        probe_rule, per_speed = max(choice.shares.items(), key=lambda s: s[1], default=("-", float("nan")))
        probe_share = per_speed * choice.probe_speed
        if result is None:
            print(f"{k + 1:<4} {load:>5.1f}  {probe_rule:<24} {probe_share:>6.0%}  {'none':>5}  (not run: "
                  f"{choice.reason})")
            continue
        run_rule, run_share = worst(result["validity"]["rules"], SCALING_RULES)
        at_pick = per_speed * choice.speed  # the probe's prediction at the pick
        print(f"{k + 1:<4} {load:>5.1f}  {probe_rule:<24} {probe_share:>6.0%}  {choice.speed:>5g}  {run_rule:<24} "
              f"{run_share:>6.0%}  {run_share / at_pick:>9.2f}  {valid(result)}")


if __name__ == "__main__":
    main()
