"""Fit the engine timing constants on the calibration table and print them as presets.toml's
[timing] section, after the leave-one-out check that `agentx sim calibrate` also runs (each row
predicted from constants fitted without it). Closed form (agentx/engine/steady.py).

    PYTHONPATH=. python tools/fit_profiles.py [--check] [--write]

It fits on the modeled rows outside the held-out third (calibration.HELD_OUT_RULE) only.
--check first prints the leave-one-out and leave-one-group-out steady-state ratios.

--write replaces presets.toml's [timing] entries (from `[timing.mfu]` to the end) with them.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from agentx.engine.calibration import load_table
from agentx.engine.fit import GRIDS, PRIORS, fit, held_out, key_of, term_table

COLLECTIVE = ("assumed, not fitted: 70 % of the datasheet scale-up bandwidth for NCCL / RCCL ring all-reduce "
              "and all-to-all (their latency is inside overhead_ms); its bandwidth term is 15 % of an iteration in "
              "the DSR1 DEP8 8k1k H200 row, under 8 % in every other calibration row")
# GPUs without a calibration row of their own whose memory system is a fitted GPU's (Blackwell:
# 8 TB/s of HBM3e per GPU in every preset, B300 and GB300 too): they take that GPU's MBU
SIBLINGS = {"B300": "B200", "GB200": "B200", "GB300": "B200"}
DEFAULTS = {"mfu": "the median of the fitted precision classes (a class without a calibration row)",
            "mbu": "the median of the fitted GPUs (GPUs with neither a calibration row nor a fitted sibling)",
            "overhead_ms": "the median of the fitted engine x vendor entries (an engine build without a calibration row)",
            "moe_efficiency": "the median of the fitted vendor x precision classes (a pairing without a calibration row)",
            "kv_efficiency": "the median of the fitted attention kinds, TensorRT-LLM's own included",
            "roofline_norm": "the one fitted value"}


def check(rows, table, group: bool) -> None:
    """Print each row's steady-state ratios under constants fitted without it (or its group), and
    per iteration kind its share and its compute / memory time (the larger binds)."""
    held, within, within_itl = held_out(rows, group), 0, 0
    print(f"# {'leave one hardware x engine group out' if group else 'leave one out'} (steady state):")
    for r in rows:
        t, c = table[r.id], held[r.id][0]
        step = t.step(c)
        ratio, itl = t.k / step / t.tok_s, step / t.tpot
        within, within_itl = within + (abs(ratio - 1) <= 0.15), within_itl + (abs(itl - 1) <= 0.20)
        kinds = "  ".join(f"{p.share:4.0%} compute {(p.compute + p.compute_experts / c['moe_efficiency']) / c['mfu'] * 1e3:6.1f} ms memory "
                          f"{(p.dense + p.experts / c['moe_efficiency'] + p.kv / c['kv_efficiency']) / c['mbu'] * 1e3:5.1f}"
                          for p in t.phases)
        print(f"#  {r.id:30s} tok/s {ratio:5.2f}  TPOT {itl:5.2f}  {kinds}")
    print(f"# {within}/{len(rows)} within 15 % tok/s, {within_itl}/{len(rows)} within 20 % TPOT\n")


def main() -> None:
    rows = [r for r in load_table().row if r.modeled and not r.held_out]  # never the held-out third
    table = term_table(rows)
    if "--check" in sys.argv:
        check(rows, table, group=False)
        check(rows, table, group=True)
    values = fit(rows, table)
    section = timing_section(rows, table, values)
    print(section)
    if "--write" in sys.argv:
        path = Path(__file__).parent.parent / "agentx/engine/presets.toml"
        text = path.read_text()
        path.write_text(text[:text.index("[timing.mfu]")] + section)


def timing_section(rows, table, values) -> str:
    out = []
    for name in GRIDS:
        p = PRIORS[name]
        out.append(f"[timing.{name}]")
        out.append(f'# prior {p.value:g} (ln sigma {p.sigma:g}): {p.source}')
        for key, value in sorted(values[name].items()):
            users = [r.id for r in rows if key_of(name, r) == key]
            how = ("no routed experts: unused" if name == "moe_efficiency" and
                   all(not table[u].experts for u in users) else
                   f"fitted on all {len(rows)} fit rows" if len(users) == len(rows) else f"fitted on {', '.join(users)}")
            grid = GRIDS[name]
            edge = " (AT A GRID BOUND)" if value in (round(float(grid[0]), 2), round(float(grid[-1]), 2)) and "unused" not in how else ""
            out.append(f'"{key}" = {{ value = {value:g}, source = "{how}; prior {p.value:g}{edge}" }}')
        if name == "mbu":
            for gpu, sibling in SIBLINGS.items():
                out.append(f'"{gpu}" = {{ value = {values[name][sibling]:g}, source = "no calibration row: '
                           f'{sibling}\'s fitted value (the same HBM3e memory system, 8 TB/s)" }}')
        dense = {key_of("moe_efficiency", r) for r in rows if not table[r.id].experts}
        fitted = [v for k, v in values[name].items() if not (name == "moe_efficiency" and k in dense)]
        out.append(f'default = {{ value = {statistics.median(fitted):g}, source = "{DEFAULTS[name]}" }}')
    out.append(f'[timing.collective_efficiency]\nvalue = 0.7\nsource = "{COLLECTIVE}"')
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
