"""The capacity plan's answer as a table (one row per configuration)."""

from __future__ import annotations

from rich.table import Table


def _fmt(value, spec: str = "{:,.0f}") -> str:
    return "-" if value is None else spec.format(value)


def plan_table(plan, answers: list[dict]) -> Table:
    slo = plan.slo
    t = Table(title=f"capacity: largest concurrency with p90 E2E-normalized interactivity >= "
                    f"{slo['p90_e2e_normalized_interactivity']:g} tok/s and p90 TTFT <= {slo['p90_ttft_s']:g} s",
              title_justify="left", show_edge=False)
    for col in ("configuration", "max lanes", "p90 norm. tok/s", "p90 TTFT s", "tok/s per GPU", "tokens per $",
                "tok/s per MW", "KV tokens", "hit rate by lanes"):
        t.add_column(col, justify="left" if col in ("configuration", "hit rate by lanes") else "right",
                     overflow="fold")
    for a in answers:
        p = a["at_max"] or {}
        hits = " ".join(f"{c['concurrency']}:{_fmt(c['hit_rate'] and c['hit_rate'] * 100, '{:.0f}%')}"
                        for c in a["curve"])
        t.add_row(a["config"], _fmt(a["max_concurrency"]), _fmt(p.get("p90_norm"), "{:,.1f}"),
                  _fmt(p.get("p90_ttft"), "{:,.2f}"), _fmt(p.get("tok_s_per_gpu")), _fmt(p.get("tokens_per_usd")),
                  _fmt(p.get("tok_s_per_mw")), _fmt(a["kv_capacity_tokens"]), hits)
    return t
