"""How far the host's noise can move the sim's *modeled* schedule (the butterfly effect the
virtual twin rule guards against; SPEC section 3 `twin_ttft`, section 10 "The twin").

Replays the demo's points (bundled traces, 8 x H200 Qwen3-235B-A22B, c8 / c16 / c32, 240 modeled
s, the demo's settings) in virtual time: once as bench's twin does, then again with each request's
end seen late by the client, by a random delay of mean `--delay-ms` modeled milliseconds
(exponential, seeded): what a host adds per request over HTTP (about 1.5 ms of wall time, x the
demo's speed 4 = 6 modeled ms; SPEC section 10, "Host error"). The next request of the session
then goes out that much later, as over HTTP. The per-request error is the same in every perturbed
run; what moves TTFT p50 / p90 is the engine's batching and queueing of the shifted arrivals. A
spread well over 2.5 % here means a quiet host's runs will often fail the twin rule.

    python benchmarks/twin_sensitivity.py [--delay-ms 6] [--draws 5] [--concurrency 8,16,32] [--fixed]
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

from agentx.data import sample_traces
from agentx.engine.config import Deployment
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.replay.folder import report
from agentx.virtual.runner import VirtualRun


class LateEnds(VirtualRun):
    """A virtual run whose client sees each request's end `delay` modeled seconds late."""

    def __init__(self, *args, delay_s: float, seed: int, fixed: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.rng, self.mean, self.fixed = random.Random(seed), delay_s, fixed

    def _ended(self, d, rec, at: float) -> None:
        late = self.mean if self.fixed else self.rng.expovariate(1 / self.mean) if self.mean > 0 else 0.0
        super()._ended(d, rec, at + late)


def run(settings: BenchSettings, sessions: list, out: Path, delay_s: float, seed: int, fixed: bool = False) -> dict:
    r = LateEnds(settings.replace(out=str(out)), sessions, Deployment(), delay_s=delay_s, seed=seed, fixed=fixed)
    r.execute()
    rm = report(out)["request_metrics"]
    return {"p50": rm["ttft_s"]["p50"], "p90": rm["ttft_s"]["p90"], "itl": rm["itl_s"]["p50"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay-ms", type=float, default=6.0)
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--concurrency", default="8,16,32")
    ap.add_argument("--duration", type=float, default=240.0)
    ap.add_argument("--fixed", action="store_true", help="Every end exactly --delay-ms late (draws are then equal).")
    args = ap.parse_args()
    sessions = load_sessions([sample_traces()])
    print(f"| lanes | twin TTFT p50 / p90 ms | late ends ({args.delay_ms:g} ms mean), {args.draws} draws: TTFT p50 "
          "off the twin | TTFT p90 off | ITL p50 off |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.concurrency.split(",")):
            settings = BenchSettings.build(url="virtual", concurrency=n, duration=args.duration, gpus=8,
                                           hardware="H200", grace=30.0)
            base = run(settings, sessions, Path(tmp) / f"c{n}-twin", 0.0, 0)
            devs = [run(settings, sessions, Path(tmp) / f"c{n}-{k}", args.delay_ms / 1000, k, args.fixed)
                    for k in range(args.draws)]
            col = lambda key: ", ".join(f"{d[key] / base[key] - 1:+.1%}" for d in devs)  # noqa: E731
            print(f"| c{n} | {base['p50'] * 1000:,.1f} / {base['p90'] * 1000:,.1f} | {col('p50')} | {col('p90')} | "
                  f"{col('itl')} |", flush=True)


if __name__ == "__main__":
    main()
