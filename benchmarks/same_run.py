"""Whether two virtual-time run folders are the same run: every file byte for byte, with the run id,
the wall-clock start, the command line and the run's own costs (wall s, CPU s, peak RSS) masked.
Prints one line per file that differs (and the first differing line), or `same`.

    python benchmarks/same_run.py BEFORE_FOLDER AFTER_FOLDER

(`advance_turns`, the loop turns, is a cost too.) A check for optimizations of `agentx sim bench` that must not move any figure (issue #42): run the
same seeded `sim bench` before and after the change, then compare the two folders.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

VARYING = {"run_id", "start_time", "command", "wall_s", "cpu_s", "peak_rss_mb", "advance_turns", "out", "host"}


def _mask(obj):
    if isinstance(obj, dict):
        return {k: "*" if k in VARYING else _mask(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_mask(v) for v in obj]
    return obj


def masked(folder: Path, name: str) -> list[str]:
    text = (folder / name).read_text()
    run_id = json.loads((folder / "run.json").read_text())["run_id"]
    text = text.replace(run_id, "RUN").replace(str(folder), "OUT")
    if name.endswith(".json"):
        return json.dumps(_mask(json.loads(text)), indent=1, sort_keys=True).splitlines()
    return [re.sub(r'"(wall_s|cpu_s|peak_rss_mb)": [0-9.e+-]+', r'"\1": *', line) for line in text.splitlines()]


def main() -> None:
    a, b = Path(sys.argv[1]), Path(sys.argv[2])
    names = sorted({p.name for p in a.iterdir() if p.suffix in (".json", ".jsonl", ".csv")}
                   | {p.name for p in b.iterdir() if p.suffix in (".json", ".jsonl", ".csv")})
    differ = 0
    for name in names:
        if not (a / name).exists() or not (b / name).exists():
            print(f"{name}: only in {'the second' if not (a / name).exists() else 'the first'}")
            differ += 1
            continue
        la, lb = masked(a, name), masked(b, name)
        if la != lb:
            differ += 1
            i = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
            print(f"{name}: differs at line {i + 1} of {len(la)} / {len(lb)}\n  < {la[i][:300] if i < len(la) else ''}"
                  f"\n  > {lb[i][:300] if i < len(lb) else ''}")
    print("same" if not differ else f"{differ} file(s) differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
