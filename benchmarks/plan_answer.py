"""A capacity plan's answer as a Markdown table: `agentx sim plan PLAN.yaml`'s per-configuration
table (largest concurrency meeting the SLO, its figures, the hit rate by lanes) and its winner line,
in virtual time (deterministic). The points run in a temporary folder and are not stored.

    python benchmarks/plan_answer.py benchmarks/plan_example.yaml [--workers N] --markdown
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentx.virtual.answer_table import answer_rows, winner_line  # noqa: E402
from agentx.virtual.capacity import load_plan, run_plan  # noqa: E402
from mdtable import markdown  # noqa: E402

LEFT = ("configuration",)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("plan", type=Path)
    ap.add_argument("--workers", type=int, default=0, help="Local processes (0: one per core).")
    ap.add_argument("--markdown", action="store_true", help="The table as Markdown (the only output form).")
    args = ap.parse_args()
    plan = load_plan(args.plan)
    with tempfile.TemporaryDirectory() as tmp:
        answers = run_plan(plan, Path(tmp), None, args.workers or None)
    rows = answer_rows(answers)
    # the hit rate by lanes last, as it is the widest; the answer's columns always, the others only
    # where a configuration fills them
    keep = ("configuration", "max lanes", "p90 TTFT s", "tok/s per GPU", "low confidence (no answer)")
    heads = [h for h in rows[0] if h in keep or any(r[h] not in ("-", "") for r in rows)]
    heads = [h for h in heads if h != "hit rate by lanes"] + ["hit rate by lanes"]
    slo = plan.slo
    print(f"largest concurrency with p90 E2E-normalized interactivity >= {slo['p90_e2e_normalized_interactivity']:g} "
          f"tok/s and p90 TTFT <= {slo['p90_ttft_s']:g} s\n")
    body = [[r[h] for h in heads] for r in rows]
    table = markdown(heads, body, left=1)
    lines = table.splitlines()
    left = ("configuration", "hit rate by lanes", "low confidence (no answer)")
    lines[1] = "|" + "|".join("---" if h in left else "---:" for h in heads) + "|"
    print("\n".join(lines))
    print(f"\n{winner_line(answers)}")


if __name__ == "__main__":
    main()
