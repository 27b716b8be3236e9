"""Time of `agentx trace stats` and `agentx trace convert` on each hand-made hostile trace file
(`tests/data/hostile/`): accepted or rejected within seconds. The unit test
(`tests/test_hostile_inputs.py`) checks the outcome and the memory bound; the time is measured
here, where a loaded machine is a fact to print, not a failure (target: each under 10 s on a
quiet 2-core machine).

    python benchmarks/hostile_traces.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOSTILE = Path(__file__).resolve().parent.parent / "tests" / "data" / "hostile"
BOUND_S = 10.0


def timed(*args: str) -> tuple[int, float]:
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "agentx.cli", *args], capture_output=True, text=True)
    return res.returncode, time.perf_counter() - start


def main() -> None:
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'file':34} {'stats s':>8} {'convert s':>10} {'exit':>6} {'under 10 s':>10}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(HOSTILE.iterdir()):
            if path.name == "README.md":
                continue
            code_s, stats_s = timed("trace", "stats", str(path))
            code_c, convert_s = timed("trace", "convert", str(path), "--to", "bailian", "--out", f"{tmp}/o.jsonl")
            worst = max(worst, stats_s, convert_s)
            ok = "yes" if max(stats_s, convert_s) < BOUND_S else "NO"
            print(f"{path.name:34} {stats_s:8.2f} {convert_s:10.2f} {f'{code_s}/{code_c}':>6} {ok:>10}")
    print(f"slowest command: {worst:.2f} s (bound {BOUND_S:g} s; each includes Python start-up)")


if __name__ == "__main__":
    main()
