"""The capacity plan's answer as rows (one per configuration): a table here, and in the HTML report."""

from __future__ import annotations

from rich.table import Table


def _fmt(value, spec: str = "{:,.0f}") -> str:
    return "-" if value is None else spec.format(value)


def answer_rows(answers: list[dict]) -> list[dict[str, str]]:
    """Per configuration: the answer (largest concurrency meeting the SLO), its figures, the KV
    capacity, the measured hit rate at every concurrency and the concurrencies too uncertain to
    answer (SPEC section 3, "Settled: confidence"), formatted."""
    rows = []
    for a in answers:
        p = a.get("at_max") or {}
        hits = " ".join(f"{c['concurrency']}:{_fmt(c['hit_rate'] and c['hit_rate'] * 100, '{:.0f}%')}"
                        for c in a["curve"])
        rows.append({"configuration": a["config"], "max lanes": _fmt(a["max_concurrency"]),
                     "p90 norm. tok/s": _fmt(p.get("p90_norm"), "{:,.1f}"),
                     "p90 TTFT s": _fmt(p.get("p90_ttft"), "{:,.2f}"),
                     "tok/s per GPU": _fmt(p.get("tok_s_per_gpu")), "tokens per $": _fmt(p.get("tokens_per_usd")),
                     "tok/s per MW": _fmt(p.get("tok_s_per_mw")), "KV tokens": _fmt(a["kv_capacity_tokens"]),
                     "hit rate by lanes": hits,
                     "low confidence (no answer)": " ".join(str(c["concurrency"]) for c in a["curve"]
                                                            if (c.get("confidence") or {}).get("low")) or "-"})
    return rows


def winner(answers: list[dict]) -> dict | None:
    """The configuration with the most throughput per GPU at its answer (the SLO met), or None."""
    met = [a for a in answers if a.get("at_max") and a["at_max"].get("tok_s_per_gpu") is not None]
    return max(met, key=lambda a: (a["at_max"]["tok_s_per_gpu"], a["max_concurrency"]), default=None)


def winner_line(answers: list[dict]) -> str:
    best = winner(answers)
    if best is None:
        return "wins: none (no configuration meets the SLO at any concurrency)"
    tiers = best["at_max"].get("hit_rate_by_tier") or {}
    hit = ", ".join(f"{t} {v:.0%}" for t, v in tiers.items())
    return (f"wins: {best['config']}: {best['at_max']['tok_s_per_gpu']:,.0f} tok/s per GPU at "
            f"{best['max_concurrency']} lanes meeting the SLO" + (f" (hit {hit})" if hit else ""))


def plan_table(plan, answers: list[dict]) -> Table:
    slo = plan.slo
    t = Table(title=f"capacity: largest concurrency with p90 E2E-normalized interactivity >= "
                    f"{slo['p90_e2e_normalized_interactivity']:g} tok/s and p90 TTFT <= {slo['p90_ttft_s']:g} s",
              title_justify="left", show_edge=False, caption=winner_line(answers), caption_justify="left")
    rows = answer_rows(answers)
    for col in rows[0] if rows else ():
        t.add_column(col, justify="left" if col in ("configuration", "hit rate by lanes",
                                                    "low confidence (no answer)") else "right",
                     overflow="fold")
    for row in rows:
        t.add_row(*row.values())
    return t
