"""`agentx sim calibrate`'s tables as Markdown (the docs' calibration page), in virtual time.

One run over the three shares (in sample, leave one hardware x engine group out, held out), as
`agentx sim calibrate` does by default: the shares table (all rows, then MoE and dense apart),
the headline per share, then the per-row table.

    python benchmarks/calibration.py [--workers 2] --markdown
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentx.report.calibration import GROUP_HEAD, ROW_HEAD, headline, row_cells, summary_rows  # noqa: E402
from agentx.virtual.calibrate import as_json, calibrate  # noqa: E402
from mdtable import markdown  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--markdown", action="store_true", help="Markdown tables (the only output form).")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        outcomes, skipped = calibrate(Path(tmp), workers=args.workers)
    report = as_json(outcomes, skipped)
    print("**Shares** (" + "; ".join(f"`{k}`: {v}" for k, v in report["shares"].items())
          + f"; held-out rule: {report['held_out_rule']})\n")
    print(markdown(GROUP_HEAD, summary_rows(report)))
    print("\n" + "\n".join(f"- {line}" for line in headline(report).splitlines()))
    if skipped:
        print(f"\nListed, not modeled: {', '.join(s.id for s in skipped)}")
    print("\n**Rows** (each once per share it is scored in)\n")
    print(markdown(ROW_HEAD, [row_cells(o) for o in outcomes], left=5))


if __name__ == "__main__":
    main()
