"""Cold load of a TraceLab-sized round-row file (357k rounds, like the public SyFI trace), with
peak memory: the rows are decoded, timed from their events, and get hash ids synthesized from
their prefix lengths.

Writes a deterministic synthetic file in TraceLab's normalized row shape once (sessions of 5 to
120 rounds, contexts growing to ~1M tokens, 5 % of rounds with a shrunk prefix), then loads it in
a fresh process.

    python benchmarks/tracelab_load.py [--rounds 357000] [--file PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

MEASURE = r"""
import resource, sys, time
from agentx.traces.load import load_sessions
t0 = time.perf_counter()
sessions = load_sessions([sys.argv[1]], "tracelab")
dt = time.perf_counter() - t0
print(len(sessions), sum(s.n_requests for s in sessions), dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def write_rounds(path: Path, rounds: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    n = sid = 0
    with path.open("w") as out:
        while n < rounds:
            sid += 1
            ctx, t = rng.randint(8000, 30000), 1.7e9 + rng.random() * 1e7
            provider = rng.choice(["claude", "codex"])
            for k in range(rng.randint(5, 120)):
                add = rng.randint(100, 5000)
                prefix = ctx if rng.random() > 0.05 else rng.randint(0, ctx)
                stamp = [datetime.fromtimestamp(x, timezone.utc).isoformat() for x in (t, t + 3)]
                out.write(json.dumps({
                    "session_id": f"s{sid}", "round_index": k, "provider": provider, "model": "m",
                    "input_tokens_total": prefix + add, "prefix_tokens": prefix, "newly_append_tokens": add,
                    "output_tokens": 200, "timing_events": [{"event_type": "tool_result", "timestamp": stamp[0]},
                                                            {"event_type": "tool_call", "timestamp": stamp[1]}],
                    "tools": [{"tool_name": "Bash", "tool_wall_latency_ms": 1500}]}) + "\n")
                ctx, t, n = min(prefix + add + 200, 900_000), t + 5, n + 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=357_000)
    ap.add_argument("--file", type=Path, default=None)
    args = ap.parse_args()
    path = args.file or Path(tempfile.mkdtemp()) / "rounds.jsonl"
    if not path.exists():
        write_rounds(path, args.rounds)
    out = subprocess.run([sys.executable, "-c", MEASURE, str(path)], check=True, capture_output=True, text=True)
    sessions, requests, seconds, peak_mb = out.stdout.split()
    print(f"{'file':<10}{'sessions':>10}{'rounds':>10}{'load s':>9}{'peak MB':>9}")
    print(f"{path.stat().st_size / 1e6:>7.0f} MB{int(sessions):>10,}{int(requests):>10,}{float(seconds):>9.1f}"
          f"{float(peak_mb):>9.0f}")


if __name__ == "__main__":
    main()
