"""What the tool-traffic route buys (issue #30): dedicated prefill workers for low-reuse,
tool-result-heavy prompts, against the default disaggregated routing and one aggregated pool.

Three deployments of the same GPUs (4 instances of 8 x H200 serving Qwen3-235B-A22B), each replayed
in virtual time with `--hints harness` on the bundled real traces and on the synthetic 393-session
corpus (256k variant):
- `4 replicas`: aggregated, `--replicas 4 --router session-affinity`;
- `1P + 3D, all`: `--prefill 1 --decode 3 --router session-affinity`: every prompt prefills on the
  prefill worker (the default disaggregated routing), its KV crosses to a decode worker;
- `1P + 3D, tool`: the same workers with `--prefill-route tool`: only tool traffic (SPEC section 6)
  prefills remotely, the rest prefills where it decodes (the decode workers are mixed);
Prints a Markdown table (docs/routing.md's): measured hit rate, the prefill side's server hit rate, the
share of prompt tokens prefilled on the prefill worker and the share whose KV crossed the link (what
the decode worker held already does not), TTFT p50 / p90, throughput per GPU.

    python benchmarks/tool_route.py [--duration 600] [--bundled-lanes 32] [--synthetic-lanes 32]
        [--corpus DIR]   # an existing `agentx trace synth --sessions 393 --seed 1` corpus
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from corpora import synthetic_393

DEPLOYMENTS = (("4 replicas", ["--replicas", "4"]),
               ("1P + 3D, all", ["--prefill", "1", "--decode", "3"]),
               ("1P + 3D, tool", ["--prefill", "1", "--decode", "3", "--prefill-route", "tool"]))


def point(out: Path, lanes: int, duration: float, deployment: list[str], traces: list[str]) -> dict:
    cmd = [sys.executable, "-m", "agentx.cli", "sim", "bench", *deployment, "--router", "session-affinity",
           "--hints", "harness", "--concurrency", str(lanes), "--duration", str(duration), "--out", str(out), *traces]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "result.json").read_text())


def row(name: str, lanes: int, deployment: str, r: dict) -> str:
    rm, sm = r["request_metrics"], r["server_metrics"]
    ttft, tp = rm["ttft_s"], rm["throughput"]
    prompt = sm["counters"]["prompt_tokens"]
    workers = sm.get("workers", {})
    remote = workers.get("prefill", {}).get("prompt_tokens", 0.0)
    moved = workers.get("decode", {}).get("kv_transfer_tokens", 0.0)
    return (f"| {name} | {lanes} | {deployment} | {rm['cache']['measured_hit_rate'] * 100:.1f}% | "
            f"{sm['prefix_hit_rate'] * 100:.1f}% | {remote / prompt * 100:.1f}% | {moved / prompt * 100:.1f}% | "
            f"{ttft['p50'] * 1000:,.0f} | {ttft['p90'] * 1000:,.0f} | {tp['total_tok_s_per_gpu']:,.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--bundled-lanes", type=int, default=32)
    ap.add_argument("--synthetic-lanes", type=int, default=32)
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--traces", choices=("bundled", "synthetic", "both"), default="both",
                    help="Which traces' rows (the synthetic corpus is written first: ~2 GB, a minute).")
    ap.add_argument("--markdown", action="store_true", help="Only what is the same on any host (the docs' table).")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        print("| traces | lanes | deployment | measured hit | server hit (prefill side) | prompts prefilled remotely "
              "| prompt KV moved | TTFT p50 ms | TTFT p90 ms | tok/s per GPU |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        rows = [("bundled (14 real sessions)", args.bundled_lanes, [])] if args.traces != "synthetic" else []
        if args.traces != "bundled":
            corpus = args.corpus or synthetic_393(tmp)
            rows.append(("synthetic 393 (256k)", args.synthetic_lanes, ["--traces", str(corpus), "--max-context", "256k"]))
        for name, lanes, traces in rows:
            for label, deployment in DEPLOYMENTS:
                out = tmp / f"{name.split()[0]}-{lanes}-{label.replace(' ', '').replace(',', '-')}"
                print(row(name, lanes, label, point(out, lanes, args.duration, deployment, traces)), flush=True)


if __name__ == "__main__":
    main()
