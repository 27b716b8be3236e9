"""What each hint-reading KV policy buys, in virtual time (issue #30; SPEC §6 "KV policies").

`agentx sim bench` on the bundled real traces, one point per (policy, hint level): LRU without
hints, then retain, demote and prefetch with the harness's hints and with the oracle's. The
deployment is the default 8 x H200 with the KV memory squeezed (`--mem`, default 0.55 of GPU
memory: ~265k tokens of KV) so the traces' sessions compete for it. Prints measured prefix-cache
hit rate, TTFT p90 and throughput per GPU; the runs are deterministic (virtual time).

    python benchmarks/kv_policies.py [--concurrency 8 16] [--duration 1800] [--mem 0.55] [--cpu-offload-gb 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentx.engine.config import Deployment, EngineConfig  # noqa: E402
from agentx.replay.corpus import Corpus  # noqa: E402
from agentx.replay.settings import BenchSettings  # noqa: E402
from agentx.virtual.runner import sim_bench  # noqa: E402

POINTS = (("lru", "none"), ("retain", "harness"), ("retain", "oracle"), ("demote", "harness"), ("demote", "oracle"),
          ("prefetch", "harness"), ("prefetch", "oracle"))


def point(sessions, labels, policy: str, hints: str, concurrency: int, args, out: Path) -> dict:
    settings = BenchSettings.build(out=str(out), url="virtual", concurrency=concurrency, duration=args.duration,
                                   hints=hints, **labels)
    engine = EngineConfig(gpu_memory_utilization=args.mem, cpu_offload_gb=args.cpu_offload_gb, kv_policy=policy)
    sim_bench(settings, sessions, Deployment(engine))
    metrics = json.loads((out / "result.json").read_text())["request_metrics"]
    return {"hit": metrics["cache"]["measured_hit_rate"], "ttft_p90": metrics["ttft_s"]["p90"],
            "tok_gpu": metrics["throughput"]["total_tok_s_per_gpu"],
            "out_gpu": metrics["throughput"]["output_tok_s_per_gpu"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--duration", type=float, default=1800.0)
    parser.add_argument("--mem", type=float, default=0.55)
    parser.add_argument("--cpu-offload-gb", type=float, default=0.0)
    args = parser.parse_args()
    corpus = Corpus(())
    print(f"bundled traces, 8 x H200, qwen3-235b-a22b, gpu memory {args.mem}, DRAM {args.cpu_offload_gb:g} GB, "
          f"{args.duration:g} s profiling (virtual time)")
    print(f"{'c':>3}  {'policy':<9}{'hints':<9}{'hit rate':>9}{'TTFT p90':>10}{'tok/s/GPU':>11}{'out/s/GPU':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for c in args.concurrency:
            sessions = corpus.sessions(c)
            for policy, hints in POINTS:
                r = point(sessions, corpus.labels, policy, hints, c, args, Path(tmp) / f"{c}-{policy}-{hints}")
                print(f"{c:>3}  {policy:<9}{hints:<9}{r['hit']:>8.1%}{r['ttft_p90']:>9.2f}s{r['tok_gpu']:>11,.0f}"
                      f"{r['out_gpu']:>11.1f}")


if __name__ == "__main__":
    main()
