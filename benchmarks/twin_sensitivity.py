"""How far the host's noise can move the sim's *modeled* schedule: the butterfly effect the virtual
twin rule guards against (SPEC section 3 `twin_ttft`, section 10 "The twin").

Replays the demo's point over HTTP (bundled traces, 8 x H200 Qwen3-235B-A22B, `agentx.cli.demo`'s
DEMO_CANDIDATES lanes for DEMO_DURATION modeled s; `--concurrency` for others) in virtual time:
once as bench's twin does at the demo's speed (the plan hears of each end `--reference-ms` modeled
ms late: CLIENT_REACTION_S x the speed, 3.8 ms at the demo's speed 2), then `--draws`
times with each end heard late by a random delay (exponential, mean `--delay-ms`, seeded): what
a host adds per request over HTTP, varying from request to request. The next request of the
session goes out that much later, as over HTTP; the records keep the modeled times, so what moves
TTFT p50 / p90 here is only the engine's batching and queueing of the shifted arrivals. Each draw
is compared with the reference twice: over the whole windows (what a window's percentile moves,
its edge included) and over the requests both windows hold, as the twin rules compare them
(`virtual.twin.paired_ttft`; with the requests only one window held). Draws over 2.5 % on the
paired figures, or over 5 % of requests in one window only, mean that a quiet host's runs of these
points will often be NOT VALID for the twin rules. `--fixed`: every end exactly `--delay-ms` late (one draw is enough).
`--host-error-ms M`: the same-request comparison also adds to each draw's TTFTs a host error
(exponential, mean M modeled ms), as the run's measured figures carry it while its twin's are
modeled: in the demo's runs the host error, not the schedule, was most of the twin deviation (a
busy c6 at +2.9 % whose modeled TTFT p50 was the twin's within 0.02 %; SPEC section 10).

    python benchmarks/twin_sensitivity.py [--delay-ms 1.9] [--draws 5] [--reference-ms 1.9] [--fixed] [--host-error-ms 2] [--concurrency 16,24] [--duration 120]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from agentx.cli.demo import DEMO_CANDIDATES, DEMO_DURATION, DEMO_SPEED
from agentx.data import sample_traces
from agentx.engine.config import Deployment
from agentx.replay.folder import report
from agentx.records import read_records
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.virtual.runner import VirtualRun
from agentx.virtual.jitter import LateEnds, measured
from agentx.virtual.twin import CLIENT_REACTION_S, paired_ttft


def figures(run: VirtualRun, out: Path) -> dict:
    run.execute()
    rm = report(out)["request_metrics"]
    return {"p50": rm["ttft_s"]["p50"], "p90": rm["ttft_s"]["p90"], "itl": rm["itl_s"]["p50"], "out": out}


def same_requests(draw: dict, base: dict, host_error_s: float = 0.0, seed: int = 0) -> str:
    """TTFT p50 / p90 and ITL p50 over the requests both windows hold; the requests one window held."""
    p = paired_ttft(measured(read_records(draw["out"]), host_error_s, seed), read_records(base["out"]))
    alone = p["unpaired_run"] + p["unpaired_twin"]
    return (f"{p['ttft_p50_rel']:+.1%} / {p['ttft_p90_rel']:+.1%} / {p['itl_p50_rel']:+.1%} "
            f"({alone} of {p['n'] + alone})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    reaction_ms = CLIENT_REACTION_S * 1000 * DEMO_SPEED
    ap.add_argument("--delay-ms", type=float, default=reaction_ms, help="Mean late end of the draws (modeled ms).")
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--reference-ms", type=float, default=reaction_ms, help="The reference's fixed late end.")
    ap.add_argument("--fixed", action="store_true", help="The draws' ends exactly --delay-ms late.")
    ap.add_argument("--concurrency", default=DEMO_CANDIDATES)
    ap.add_argument("--duration", type=float, default=DEMO_DURATION)
    ap.add_argument("--host-error-ms", type=float, default=0.0,
                    help="Mean host error added to each draw's TTFTs in the same-request comparison (modeled ms; "
                         "0: none, the schedule's butterfly alone).")
    args = ap.parse_args()
    sessions = load_sessions([sample_traces()])
    late = f"{args.delay_ms:g} ms" + ("" if args.fixed else f" mean, {args.draws} draws")
    print(f"| lanes | reference ({args.reference_ms:g} ms) TTFT p50 / p90 ms | late ends ({late}): TTFT p50 off "
          "the reference | TTFT p90 off | ITL p50 off | the same requests: TTFT p50 / p90 / ITL p50 off "
          "(requests in one window only) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.concurrency.split(",")):
            settings = BenchSettings.build(url="virtual", concurrency=n, duration=args.duration, gpus=8,
                                           hardware="H200", grace=30.0)

            def one(name: str, **kw) -> dict:
                out = Path(tmp) / f"c{n}-{name}"
                cls = LateEnds if "mean_s" in kw else VirtualRun
                return figures(cls(settings.replace(out=str(out)), sessions, Deployment(), **kw), out)

            base = one("reference", client_delay_s=args.reference_ms / 1000)
            if args.fixed:
                devs = [one("fixed", client_delay_s=args.delay_ms / 1000)]
            else:
                devs = [one(f"draw{k}", mean_s=args.delay_ms / 1000, seed=k) for k in range(args.draws)]
            col = lambda key: ", ".join(f"{d[key] / base[key] - 1:+.1%}" for d in devs)  # noqa: E731
            same = "; ".join(same_requests(d, base, args.host_error_ms / 1000, k) for k, d in enumerate(devs))
            print(f"| c{n} | {base['p50'] * 1000:,.1f} / {base['p90'] * 1000:,.1f} | {col('p50')} | {col('p90')} | "
                  f"{col('itl')} | {same} |", flush=True)


if __name__ == "__main__":
    main()
