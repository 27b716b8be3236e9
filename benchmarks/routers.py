"""What each router does at 4 replicas: measured hit rate, TTFT and throughput, in modeled time.

`agentx sim bench --replicas 4 --router R` (4 x (8 x H200 serving Qwen3-235B-A22B)) on the
bundled real traces and on the synthetic 393-session corpus (256k variant); prints a Markdown
table (docs/routing.md's), with what each virtual run cost: CPU seconds, and decode iterations per
loop turn that advanced a replica (how many iterations the decode windows compute together).

    python benchmarks/routers.py [--duration 600] [--bundled-lanes 32] [--synthetic-lanes 32]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from agentx.engine.routing import RouterName
from corpora import synthetic_393

ROUTERS = tuple(RouterName)


def point(out: Path, lanes: int, duration: float, router: str, traces: list[str]) -> tuple[dict, dict]:
    """The run's result point and its client figures (run.json)."""
    cmd = [sys.executable, "-m", "agentx.cli", "sim", "bench", "--replicas", "4", "--router", router,
           "--concurrency", str(lanes), "--duration", str(duration), "--out", str(out), *traces]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    client = json.loads((out / "run.json").read_text())["client"]
    return json.loads((out / "result.json").read_text()), client


def traces_of(args, tmp: Path) -> list[tuple[str, int, list[str]]]:
    """(name, lanes, sim bench's trace flags) of the rows `--traces` asks for."""
    rows = []
    if args.traces in ("bundled", "both"):
        rows.append(("bundled (14 real sessions)", args.bundled_lanes, []))
    if args.traces in ("synthetic", "both"):
        rows.append(("synthetic 393 (256k)", args.synthetic_lanes,
                     ["--traces", str(synthetic_393(tmp)), "--max-context", "256k"]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--bundled-lanes", type=int, default=32)
    ap.add_argument("--synthetic-lanes", type=int, default=32)
    ap.add_argument("--traces", choices=("bundled", "synthetic", "both"), default="both",
                    help="Which traces' rows (the synthetic corpus is written first: ~2 GB, a minute).")
    ap.add_argument("--markdown", action="store_true", help="Only what is the same on any host (the docs' table).")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cpu = "" if args.markdown else " CPU s |"
        print(f"| traces | lanes | router | measured hit | theoretical hit | TTFT p50 ms | TTFT p90 ms | total tok/s "
              f"|{cpu} iterations / turn |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|" + ("" if args.markdown else "---:|"))
        for name, lanes, traces in traces_of(args, tmp):
            for router in ROUTERS:
                r, client = point(tmp / f"{name.split()[0]}-{lanes}-{router}", lanes, args.duration, router, traces)
                rm = r["request_metrics"]
                cache, ttft = rm["cache"], rm["ttft_s"]
                cpu_s = "" if args.markdown else f" {client['cpu_s']:.1f} |"
                print(f"| {name} | {lanes} | {router} | {cache['measured_hit_rate'] * 100:.1f}% | "
                      f"{cache['theoretical_hit_rate'] * 100:.1f}% | {ttft['p50'] * 1000:,.0f} | "
                      f"{ttft['p90'] * 1000:,.0f} | {rm['throughput']['total_tok_s']:,.0f} |"
                      f"{cpu_s} "
                      f"{client['decode_iterations'] / client['advance_turns']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
