"""`agentx sim calibrate`'s tables as Markdown (the docs' calibration page), in virtual time.

Default: leave one out, every row predicted from constants refitted without it (the command's
default): the per-row table, the per hardware x engine table and the summary line. `--fits`: one
summary row per fit (in sample, leave one out, leave one hardware x engine out), each a full run.

    python benchmarks/calibration.py [--fits] [--workers 2] --markdown
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentx.report.calibration import GROUP_HEAD, ROW_HEAD, group_cells, row_cells  # noqa: E402
from agentx.virtual.calibrate import as_json, calibrate  # noqa: E402
from mdtable import markdown  # noqa: E402

FITS = (("in sample (`--in-sample`, the shipped constants)", True, False),
        ("leave one out (the default)", False, False),
        ("leave one hardware x engine out (`--leave-out group`)", False, True))


def report(in_sample: bool, group: bool, workers: int):
    with tempfile.TemporaryDirectory() as tmp:
        outcomes, skipped = calibrate(Path(tmp), None, in_sample, workers, 10, group)
    return as_json(outcomes, skipped, in_sample, group), outcomes, skipped


def pct(v) -> str:
    return "-" if v is None else f"{v:.0%}".replace("%", " %")


def rows_tables(workers: int) -> None:
    rep, outcomes, skipped = report(False, False, workers)
    print(f"**Calibration rows ({rep['profiles']})**\n")
    print(markdown(ROW_HEAD, [row_cells(o) for o in outcomes], left=4))
    groups = [group_cells(n, g) for n, g in rep["summary"]["groups"].items()]
    groups.append(group_cells("all", rep["summary"]["total"]))
    print("\n**Per hardware x engine**\n")
    print(markdown(GROUP_HEAD, groups))
    t = rep["summary"]["total"]
    print(f"\n{t['rows']} rows: {pct(t['within_tok_s'])} within ±15 % on tok/s per GPU, {pct(t['within_itl'])} "
          f"within ±20 % on ITL p50, {pct(t['within_both'])} both; geo-mean ratio {t['geomean_tok_s_ratio']:.2f} "
          f"(tok/s), {t['geomean_itl_ratio'] or 0:.2f} (ITL)"
          + (f"; listed, not modeled: {', '.join(s.id for s in skipped)}" if skipped else ""))


def fits_table(workers: int) -> None:
    rows = []
    for name, in_sample, group in FITS:
        t = report(in_sample, group, workers)[0]["summary"]["total"]
        rows.append([name, pct(t["within_tok_s"]), pct(t["within_itl"]), pct(t["within_both"]),
                     f"{t['geomean_tok_s_ratio']:.2f} / {t['geomean_itl_ratio'] or 0:.2f}"])
    print(markdown(["fit", "tok/s within ±15 %", "ITL within ±20 %", "both", "geo-mean ratios tok/s / ITL"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fits", action="store_true", help="One summary row per fit (three full runs).")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--markdown", action="store_true", help="Markdown tables (the only output form).")
    args = ap.parse_args()
    (fits_table if args.fits else rows_tables)(args.workers)


if __name__ == "__main__":
    main()
