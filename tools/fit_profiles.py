"""Print the engine profiles fitted on every calibration row of each engine x hardware group (the
ones shipped in agentx/engine/presets.toml [profile.*]) and, first, the held-out check that
`agentx sim calibrate` also runs: each row predicted from constants fitted on its group's other
scenario. Closed form (agentx/engine/steady.py); about a second.

    PYTHONPATH=. python tools/fit_profiles.py
"""

from __future__ import annotations

from agentx.engine.calibration import load_table
from agentx.engine.fit import fit, groups, held_out, predict, rooflines


def main() -> None:
    rows = [r for r in load_table().row if r.modeled]
    roofs, held = rooflines(rows), held_out(rows)
    within = within_itl = 0
    print("held-out closed form (fitted on the group's other scenario):")
    for r in rows:
        if r.id not in held:
            print(f"  {r.id:34s} no other scenario in its group")
            continue
        s = predict(roofs[r.id], r, held[r.id][0])
        ratio, itl = s.tok_s_per_gpu / r.tok_s_per_gpu, s.iteration_s * 1000 / r.tpot_ms_p50
        within, within_itl = within + (abs(ratio - 1) <= 0.15), within_itl + (abs(itl - 1) <= 0.20)
        print(f"  {r.id:34s} tok/s {ratio:5.2f}  TPOT {itl:5.2f}  fit {held[r.id][0]}")
    print(f"held-out: {within}/{len(held)} within 15 % tok/s, {within_itl}/{len(held)} within 20 % TPOT\n")
    print("# ---- profiles fitted on all rows of each group (tools/fit_profiles.py)")
    by_group = groups(rows)
    for engine in sorted({e for e, _ in by_group}):
        _emit(engine, fit(roofs, [r for r in rows if r.engine == engine]), [r for r in rows if r.engine == engine])
        for (e, hw), members in sorted(by_group.items()):
            if e == engine:
                _emit(f'"{engine}.{hw}"', fit(roofs, members), members)


def _emit(key: str, params, rows) -> None:
    mfu, mbu, overhead = params
    print(f"\n[profile.{key}]\nmfu = {mfu:g}\nmbu = {mbu:g}\noverhead_ms = {overhead:g}\n"
          f'source = "fitted by tools/fit_profiles.py on calibration rows {", ".join(r.id for r in rows)}"')


if __name__ == "__main__":
    main()
