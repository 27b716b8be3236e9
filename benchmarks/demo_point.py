"""Which point, window and speed `agentx demo` should replay over HTTP (SPEC section 10, "The
demo"): for each, in virtual time, the wall time it would take (warmup, window and drain over the
speed) and how often a host's jitter would move it off its virtual twin by more than the twin
rules' 2.5 %.

Per (lanes, window, speed): the twin (the plan hearing of each end CLIENT_REACTION_S x the speed
late), then `--draws` replays with each end heard late by a random delay (exponential, mean
`--reaction-ms` x the speed: a host's reaction) and each TTFT measured late by a random host error
(exponential, mean `--host-error-ms` x the speed), compared with the twin over the requests both
hold, as the twin rules compare them (`agentx/virtual/jitter.py`; `benchmarks/twin_sensitivity.py` has the per-draw figures).
Quiet host: reaction 1.9 ms, host error 1.5 ms (wall, the medians measured by
`benchmarks/http_split.py`); `--busy`: 4 and 3 ms (what the same measured beside other work).

    python -m benchmarks.demo_point [--lanes 8,24] [--windows 120] [--speeds 1.5,2] [--draws 30] [--busy]
"""

from __future__ import annotations

import argparse

from agentx.cli.demo import DEMO_CANDIDATES, DEMO_DURATION, DEMO_SPEED
from agentx.data import sample_traces
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.virtual.jitter import QUIET_HOST_ERROR_S, QUIET_REACTION_S, jitter

TWIN_LIMIT = 0.025


def one(sessions: list, n: int, window: float, speed: float, args) -> str:
    settings = BenchSettings.build(url="virtual", concurrency=n, duration=window, gpus=8, hardware="H200", grace=30.0)
    j = jitter(settings, sessions, speed, args.draws, reaction_s=args.reaction_ms / 1000,
               host_error_s=args.host_error_ms / 1000)
    over = sum(d > TWIN_LIMIT for d in j.deviations)
    return (f"| c{n} | {window:g} | {speed:g} | {j.requests} | {j.last_end_s:,.0f} | {j.last_end_s / speed:,.0f} | "
            f"{j.deviations[len(j.deviations) // 2]:.1%} / {j.worst:.1%} | {over} of {len(j.deviations)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lanes", default=DEMO_CANDIDATES)
    ap.add_argument("--windows", default=f"{DEMO_DURATION:g}", help="Modeled seconds of profiling.")
    ap.add_argument("--speeds", default=f"{DEMO_SPEED:g}")
    ap.add_argument("--draws", type=int, default=30)
    ap.add_argument("--busy", action="store_true", help="A busy host's reaction and host error (4 and 3 wall ms).")
    ap.add_argument("--reaction-ms", type=float, default=None, help="Mean late end per draw, wall ms (x the speed).")
    ap.add_argument("--host-error-ms", type=float, default=None, help="Mean host error per TTFT, wall ms (x the speed).")
    args = ap.parse_args()
    if args.reaction_ms is None:
        args.reaction_ms = 4.0 if args.busy else QUIET_REACTION_S * 1000
    if args.host_error_ms is None:
        args.host_error_ms = 3.0 if args.busy else QUIET_HOST_ERROR_S * 1000
    sessions = load_sessions([sample_traces()])
    print(f"host model: reaction {args.reaction_ms:g} ms, host error {args.host_error_ms:g} ms (wall, mean, x the speed)")
    print("| point | window (modeled s) | speed | requests | last end (modeled s) | wall s (warmup, window, drain) | "
          "worst paired deviation, median / max over draws | draws over 2.5 % |")
    print("|---|---|---|---|---|---|---|---|")
    for window in (float(x) for x in args.windows.split(",")):
        for n in (int(x) for x in args.lanes.split(",")):
            for speed in (float(x) for x in args.speeds.split(",")):
                print(one(sessions, n, window, speed, args), flush=True)


if __name__ == "__main__":
    main()
