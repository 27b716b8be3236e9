"""How far the host's noise can move the sim's *modeled* schedule: the butterfly effect the virtual
twin rule guards against (SPEC section 3 `twin_ttft`, section 10 "The twin").

Replays the demo's points (bundled traces, 8 x H200 Qwen3-235B-A22B, c4 / c8 / c16, 180 modeled
s, the demo's settings) in virtual time: once as bench's twin does at the demo's speed (the plan
hears of each end `--reference-ms` modeled ms late: CLIENT_REACTION_S x 2 = 3.8 ms), then `--draws`
times with each end heard late by a random delay (exponential, mean `--delay-ms`, seeded): what
a host adds per request over HTTP, varying from request to request. The next request of the
session goes out that much later, as over HTTP; the records keep the modeled times, so what moves
TTFT p50 / p90 here is only the engine's batching and queueing of the shifted arrivals. Draws
far over 2.5 % off the reference mean that a quiet host's runs of these points will often be NOT
VALID for the twin rule. `--fixed`: every end exactly `--delay-ms` late (one draw is enough).

    python benchmarks/twin_sensitivity.py [--delay-ms 3.8] [--draws 5] [--reference-ms 3.8] [--fixed]
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

from agentx.data import sample_traces
from agentx.engine.config import Deployment
from agentx.replay.folder import report
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.virtual.runner import VirtualRun
from agentx.virtual.twin import CLIENT_REACTION_S

DEMO_SPEED = 2.0  # agentx.cli.bench's


class LateEnds(VirtualRun):
    """A virtual run whose plan hears of each request's end a random delay late (mean `mean_s`)."""

    def __init__(self, *args, mean_s: float, seed: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.rng, self.mean_s = random.Random(seed), mean_s

    def _ended(self, d, rec, at: float) -> None:
        super()._ended(d, rec, at + self.rng.expovariate(1 / self.mean_s))


def figures(run: VirtualRun, out: Path) -> dict:
    run.execute()
    rm = report(out)["request_metrics"]
    return {"p50": rm["ttft_s"]["p50"], "p90": rm["ttft_s"]["p90"], "itl": rm["itl_s"]["p50"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    reaction_ms = CLIENT_REACTION_S * 1000 * DEMO_SPEED
    ap.add_argument("--delay-ms", type=float, default=reaction_ms, help="Mean late end of the draws (modeled ms).")
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--reference-ms", type=float, default=reaction_ms, help="The reference's fixed late end.")
    ap.add_argument("--fixed", action="store_true", help="The draws' ends exactly --delay-ms late.")
    ap.add_argument("--concurrency", default="4,8,16")
    ap.add_argument("--duration", type=float, default=180.0)
    args = ap.parse_args()
    sessions = load_sessions([sample_traces()])
    late = f"{args.delay_ms:g} ms" + ("" if args.fixed else f" mean, {args.draws} draws")
    print(f"| lanes | reference ({args.reference_ms:g} ms) TTFT p50 / p90 ms | late ends ({late}): TTFT p50 off "
          "the reference | TTFT p90 off | ITL p50 off |")
    print("|---|---|---|---|---|")
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
            print(f"| c{n} | {base['p50'] * 1000:,.1f} / {base['p90'] * 1000:,.1f} | {col('p50')} | {col('p90')} | "
                  f"{col('itl')} |", flush=True)


if __name__ == "__main__":
    main()
