"""Reading Bailian sessions that are one long chain of turns (issue #26: the root walk was
quadratic, 5k turns 5.8 s, 20k 48.5 s): read time per chain length, and the same rows as
Mooncake for scale.

    python benchmarks/bailian_chain.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentx.traces.bailian import read_bailian  # noqa: E402


def chain(path: Path, turns: int) -> None:
    with open(path, "w") as f:
        for i in range(turns):
            f.write(json.dumps({"chat_id": i, "parent_chat_id": i - 1 if i else -1, "timestamp": float(i),
                                "input_length": 100 + i, "output_length": 10, "type": "text", "turn": i + 1,
                                "hash_ids": [i]}) + "\n")


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    print(f"{'turns':>8} {'read s':>8} {'sessions':>9}")
    for turns in (5_000, 10_000, 20_000, 100_000):
        path = folder / f"chain-{turns}.jsonl"
        chain(path, turns)
        t0 = time.perf_counter()
        sessions = read_bailian(path)
        print(f"{turns:>8,} {time.perf_counter() - t0:>8.2f} {len(sessions):>9}")
        path.unlink()
    print(f"(load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
