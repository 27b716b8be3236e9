"""What each hint-reading KV policy, the SSD tier and the store path's rules buy, in virtual time
(issue #30; SPEC §6 "KV policies", "Offload tiers and the store path").

`agentx sim bench` on the bundled real traces (default) or on `--traces DIR` (e.g. the synthetic
393-session corpus with `--max-context 256k`), one point per (concurrency, SSD drives, store
rules, policy, hint level): LRU without hints, then retain, demote and prefetch with the harness's
hints, then each with the oracle's (the upper bound the trace's knowledge gives). The deployment
is the default 8 x H200 serving Qwen3-235B-A22B with the KV memory squeezed (`--mem`, default
0.55 of GPU memory: ~265k tokens of KV) so the sessions compete for it; `--cpu-offload-gb` gives
a DRAM tier, `--ssd-drives` an SSD tier under it. Prints per point the measured hit rate (usage),
the server's hit rate by tier (HBM, DRAM, SSD), TTFT p90, total tok/s per GPU, the goodput in
tokens per GPU at the SLO (`--slo`, default TTFT 5 s and 50 ms per output token, the plan's
default SLO) and the bytes written to DRAM and the SSD. The runs are deterministic (virtual time).

    python benchmarks/kv_policies.py [--traces DIR | --synthetic] [--max-context 256k] [--concurrency 8 16]
        [--duration 1800] [--mem 0.55] [--cpu-offload-gb 0] [--ssd-drives 0 8] [--store-rules on off]
        [--points lru:none retain:harness ...] [--markdown]

`--synthetic` writes the synthetic 393-session corpus (`agentx trace synth --sessions 393 --seed 1`)
to a temporary folder and replays it; `--markdown` prints the table as Markdown (the docs' tables,
benchmarks/docs.py) and the run's cost on stderr.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpora import synthetic_393  # noqa: E402
from mdtable import markdown  # noqa: E402

from agentx.engine.config import Deployment, EngineConfig  # noqa: E402
from agentx.metrics.goodput import parse_slo  # noqa: E402
from agentx.replay.corpus import Corpus  # noqa: E402
from agentx.replay.settings import BenchSettings  # noqa: E402
from agentx.virtual.runner import sim_bench  # noqa: E402

POINTS = ("lru:none", "retain:harness", "demote:harness", "prefetch:harness", "retain:oracle", "demote:oracle",
          "prefetch:oracle")


def point(sessions, labels, policy: str, hints: str, concurrency: int, ssd: int, rules: bool, args, out: Path) -> dict:
    settings = BenchSettings.build(out=str(out), url="virtual", concurrency=concurrency, duration=args.duration,
                                   hints=hints, slo=parse_slo(args.slo), **labels)
    engine = EngineConfig(gpu_memory_utilization=args.mem, cpu_offload_gb=args.cpu_offload_gb, kv_policy=policy,
                          ssd_drives=ssd, store_rules=rules)
    result = sim_bench(settings, sessions, Deployment(engine))
    rm, sm = result["request_metrics"], result["server_metrics"]
    written = sm.get("kv_written_bytes") or {}
    return {"hit": rm["cache"]["measured_hit_rate"], "tiers": sm.get("hit_rate_by_tier") or {},
            "ttft_p90": rm["ttft_s"]["p90"], "tok_gpu": rm["throughput"]["total_tok_s_per_gpu"],
            "good_gpu": rm["goodput"]["total_tok_s_per_gpu"], "dram_gb": written.get("DRAM", 0) / 1e9,
            "ssd_gb": written.get("SSD", 0) / 1e9}


def _pct(v) -> str:
    return "-" if v is None else f"{v:.1%}"


HEADERS = ["lanes", "SSD drives", "store rules", "policy", "hints", "hit", "HBM hit", "DRAM hit", "SSD hit",
           "TTFT p90 s", "tok/s per GPU", "goodput per GPU", "DRAM GB written", "SSD GB written"]


def cells(c: int, ssd: int, rules: str, policy: str, hints: str, r: dict) -> list[str]:
    t = r["tiers"]
    return [str(c), str(ssd), rules, policy, hints, _pct(r["hit"]), _pct(t.get("HBM")), _pct(t.get("DRAM")),
            _pct(t.get("SSD")), f"{r['ttft_p90']:.2f}", f"{r['tok_gpu']:,.0f}", f"{r['good_gpu']:,.0f}",
            f"{r['dram_gb']:,.0f}", f"{r['ssd_gb']:,.0f}"]


def line(row: list[str]) -> str:
    c, ssd, rules, policy, hints, hit, hbm, dram, ssd_hit, ttft, tok, good, dram_gb, ssd_gb = row
    return (f"{c:>3} {ssd:>3} {rules:<6}{policy:<9}{hints:<8}{hit:>7}{hbm:>7}{dram:>7}{ssd_hit:>7}{ttft:>9}s"
            f"{tok:>10}{good:>10}{dram_gb:>9}{ssd_gb:>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", nargs="*", default=[], help="Trace files or folders (default: the bundled traces).")
    parser.add_argument("--synthetic", action="store_true", help="The synthetic 393-session corpus.")
    parser.add_argument("--markdown", action="store_true", help="A Markdown table; the cost on stderr.")
    parser.add_argument("--max-context", default=None, help="The traces' variant (e.g. 256k).")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--duration", type=float, default=1800.0)
    parser.add_argument("--mem", type=float, default=0.55)
    parser.add_argument("--cpu-offload-gb", type=float, default=0.0)
    parser.add_argument("--ssd-drives", type=int, nargs="+", default=[0], help="SSD tier drives (0: none), each a row set.")
    parser.add_argument("--store-rules", nargs="+", default=["on"], choices=("on", "off"))
    parser.add_argument("--points", nargs="+", default=list(POINTS), help="policy:hints pairs.")
    parser.add_argument("--slo", nargs="+", default=["ttft:5000", "tpot:50"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        traces = (str(synthetic_393(Path(tmp))),) if args.synthetic else tuple(args.traces)
        run(args, Corpus(traces, max_context=args.max_context), Path(tmp))


def run(args, corpus: Corpus, tmp: Path) -> None:
    name = "synthetic 393" if args.synthetic else ", ".join(args.traces) or "bundled traces"
    if args.synthetic or args.traces:
        name += f" ({args.max_context or 'all'})"
    caption = (f"{name}, 8 x H200, qwen3-235b-a22b, gpu memory {args.mem}, DRAM {args.cpu_offload_gb:g} GB, "
               f"{args.duration:g} s profiling (virtual time), goodput SLO {' '.join(args.slo)}")
    rows = []
    if not args.markdown:
        print(caption)
        print(f"{'c':>3} {'ssd':>3} {'rules':<6}{'policy':<9}{'hints':<8}{'hit':>7}{'HBM':>7}{'DRAM':>7}{'SSD':>7}"
              f"{'TTFT p90':>10}{'tok/s/GPU':>10}{'good/GPU':>10}{'DRAM GB':>9}{'SSD GB':>8}")
    started, cpu0 = time.time(), time.process_time()
    for c in args.concurrency:
        sessions = corpus.sessions(c)
        for ssd in args.ssd_drives:
            for rules in args.store_rules:
                for spec in args.points:
                    policy, hints = spec.split(":")
                    out = tmp / f"{c}-{ssd}-{rules}-{policy}-{hints}"
                    r = point(sessions, corpus.labels, policy, hints, c, ssd, rules == "on", args, out)
                    rows.append(cells(c, ssd, rules, policy, hints, r))
                    if not args.markdown:
                        print(line(rows[-1]), flush=True)
    if args.markdown:
        print(f"{caption}\n\n{markdown(HEADERS, rows, left=5)}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"{time.time() - started:,.0f} s wall, {time.process_time() - cpu0:,.0f} CPU s, peak RSS {peak:,.0f} MB, "
          f"load average {load}", file=sys.stderr if args.markdown else sys.stdout)


if __name__ == "__main__":
    main()
