"""Cold load + graph construction of an AgentX-shaped corpus, with peak memory.

Builds 393 synthetic sessions (~99k requests, contexts to 1M) with `agentx trace synth`
once, then measures in fresh processes:
  - agentx: load every file into the trace model and build every session graph;
  - stdlib json: `json.loads` of the first N files only (no model), for a speed ratio.
Target (issue #2): <= 10 s and <= 2 GB for the whole corpus on a 2-core machine.

    python benchmarks/trace_load.py [--sessions 393] [--seed 1] [--dir PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEASURE = r"""
import json, resource, sys, time
from pathlib import Path
mode, folder, limit = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
files = sorted(folder.glob("*.json"))[:limit]
t0 = time.perf_counter()
if mode == "agentx":
    from agentx.common import gc_paused
    from agentx.traces.graph import build_graph
    from agentx.traces.load import load_sessions
    sessions = load_sessions(files, "weka")
    t1 = time.perf_counter()
    with gc_paused():
        graphs = [build_graph(s) for s in sessions]
    requests = sum(len(g.nodes) for g in graphs)
else:
    import gc
    gc.disable()  # same footing as agentx, which pauses the collector while loading
    docs = [json.loads(f.read_bytes()) for f in files]
    t1 = time.perf_counter()
    requests = 0
t2 = time.perf_counter()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"load": t1 - t0, "graph": t2 - t1, "total": t2 - t0, "rss_mb": rss, "files": len(files), "requests": requests}))
"""


def measure(mode: str, folder: Path, limit: int) -> dict:
    cmd = [sys.executable, "-c", MEASURE, mode, str(folder), str(limit)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=393)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", type=Path, default=None, help="reuse or create the corpus here")
    ap.add_argument("--subset", type=int, default=20, help="files for the stdlib-json comparison")
    args = ap.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="agentx-corpus-"))
    if not any(folder.glob("*.json")):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "agentx.cli", "trace", "synth", "--sessions", str(args.sessions),
                        "--seed", str(args.seed), "--out", str(folder)], check=True)
        print(f"synth: {time.perf_counter() - t:.1f} s")
    size = sum(f.stat().st_size for f in folder.glob("*.json")) / 1e9
    full = measure("agentx", folder, 10**9)
    sub_a = measure("agentx", folder, args.subset)
    sub_j = measure("json", folder, args.subset)
    rows = [
        (f"agentx, all {full['files']} files", full),
        (f"agentx, first {args.subset} files", sub_a),
        (f"stdlib json.loads, first {args.subset} files", sub_j),
    ]
    print(f"\ncorpus: {folder} ({size:.2f} GB of JSON, {full['requests']:,} requests)\n")
    print(f"{'what':<44} {'load s':>8} {'graph s':>8} {'total s':>8} {'peak RSS MB':>12}")
    for name, r in rows:
        print(f"{name:<44} {r['load']:>8.2f} {r['graph']:>8.2f} {r['total']:>8.2f} {r['rss_mb']:>12.0f}")
    print(f"\nspeed-up over stdlib json on the subset: {sub_j['total'] / sub_a['total']:.1f}x "
          f"(memory {sub_j['rss_mb'] / sub_a['rss_mb']:.1f}x less)")
    met = full["total"] <= 10 and full["rss_mb"] <= 2048
    print(f"target <= 10 s and <= 2048 MB: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
