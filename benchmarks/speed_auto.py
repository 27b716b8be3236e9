"""`--speed auto` against the demo's point (issue #43): `agentx demo --speed auto` with one
candidate for its point over HTTP (default c24, 120 modeled s), as a user runs it: the line saying
which speed it picked and why, the demo's verdict line of that point (not run where the probe
found no speed can be valid), and the point's validity at that speed, rule by rule. The host's
load average before and after is printed: the pick is only as good as the host stays as quiet as
it was while probed.

    python benchmarks/speed_auto.py [--concurrency 24] [--duration 120] [--cores 0,1]

`--cores`: run pinned to these CPUs (`taskset`), e.g. two cores of a bigger quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", default="24")
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--cores", default=None)
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="speed-auto-")) / "demo"
    cmd = [sys.executable, "-m", "agentx.cli", "demo", "--concurrency", args.concurrency, "--duration",
           str(args.duration), "--speed", "auto", "--out", str(out), "--allow-invalid"]
    if args.cores:
        cmd = ["taskset", "-c", args.cores] + cmd
    load = os.getloadavg()
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"})  # a line a line
    after = os.getloadavg()
    lines = res.stdout.splitlines()
    picked = next((line for line in lines if line.startswith("speed auto:")), "(no speed line)")
    verdict = next((line for line in lines if line.startswith("c") and (" over HTTP: valid" in line or
                                                                       " over HTTP: NOT VALID" in line)),
                   "(no verdict line)")
    print(f"host: {os.cpu_count()} CPUs{f', pinned to {args.cores}' if args.cores else ''}; load average "
          f"{load[0]:.1f} before, {after[0]:.1f} after")
    print(picked)
    print(verdict)
    folders = sorted((out / "http").glob("c*"))
    print(f"{'point':<8} {'valid':<6} {'TTFT p50 ms':>11}  failing rules")
    for folder in folders:
        path = folder / "result.json"
        if not path.exists():
            print(f"{folder.name:<8} (no result: exit {res.returncode})")
            continue
        r = json.loads(path.read_text())
        v, ttft = r["validity"], (r["request_metrics"].get("ttft_s") or {}).get("p50")
        failing = ", ".join(f"{x['rule']} {x['figure']:.3g} (bound {x['bound']:.3g})" for x in v["rules"]
                            if not x["ok"] and isinstance(x["figure"], (int, float))) or "-"
        print(f"c{r['identity']['concurrency']:<7} {str(v['valid']):<6} {ttft * 1000 if ttft else float('nan'):>11.1f}  "
              f"{failing}")


if __name__ == "__main__":
    main()
