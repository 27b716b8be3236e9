"""Two result points side by side: each headline metric of A and B, B - A and the change in
per cent (`agentx compare RUN_A RUN_B`), and which way is better for each."""

from __future__ import annotations

import math

from rich.table import Table

# (label, path into the result point, scale, format, higher is better; None: neither, e.g. what
# the traces hold rather than how the server did)
ROWS = (
    ("TTFT p50 ms", ("request_metrics", "ttft_s", "p50"), 1000, "{:,.1f}", False),
    ("TTFT p90 ms", ("request_metrics", "ttft_s", "p90"), 1000, "{:,.1f}", False),
    ("TTFT p99 ms", ("request_metrics", "ttft_s", "p99"), 1000, "{:,.1f}", False),
    ("ITL p50 ms", ("request_metrics", "itl_s", "p50"), 1000, "{:,.2f}", False),
    ("ITL p90 ms", ("request_metrics", "itl_s", "p90"), 1000, "{:,.2f}", False),
    ("E2E latency p50 s", ("request_metrics", "e2el_s", "p50"), 1, "{:,.2f}", False),
    ("E2E latency p90 s", ("request_metrics", "e2el_s", "p90"), 1, "{:,.2f}", False),
    ("interactivity p50 tok/s", ("request_metrics", "interactivity_tok_s", "p50"), 1, "{:,.1f}", True),
    ("E2E-norm. interactivity p90 tok/s", ("request_metrics", "e2e_normalized_interactivity_tok_s", "p90"), 1,
     "{:,.1f}", True),
    ("total tok/s", ("request_metrics", "throughput", "total_tok_s"), 1, "{:,.0f}", True),
    ("output tok/s", ("request_metrics", "throughput", "output_tok_s"), 1, "{:,.0f}", True),
    ("total tok/s per GPU", ("request_metrics", "throughput", "total_tok_s_per_gpu"), 1, "{:,.0f}", True),
    ("requests/s", ("request_metrics", "throughput", "requests_per_s"), 1, "{:,.3f}", True),
    ("goodput req/s", ("request_metrics", "goodput", "requests_per_s"), 1, "{:,.3f}", True),
    ("theoretical hit %", ("request_metrics", "cache", "theoretical_hit_rate"), 100, "{:.1f}", None),
    ("measured hit %", ("request_metrics", "cache", "measured_hit_rate"), 100, "{:.1f}", True),
    ("server hit %", ("server_metrics", "prefix_hit_rate"), 100, "{:.1f}", True),
    ("requests ok", ("requests", "succeeded"), 1, "{:,.0f}", None),
)


def _get(result: dict, path: tuple) -> float | None:
    value = result
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def compare_rows(a: dict, b: dict) -> list[dict]:
    """A row per metric either point has: a, b, delta (b - a), percent (of a), better (b's
    change is an improvement: True, a loss: False, none: None)."""
    rows = []
    for label, path, scale, fmt, higher in ROWS:
        va, vb = _get(a, path), _get(b, path)
        if va is None and vb is None:
            continue
        delta = vb - va if va is not None and vb is not None else None
        pct = 100 * delta / abs(va) if delta is not None and va else None
        better = None if not delta or higher is None else (delta > 0) == higher
        rows.append({"metric": label, "a": va, "b": vb, "delta": delta, "percent": pct, "better": better,
                     "scale": scale, "fmt": fmt})
    return rows


def compare_table(a: dict, b: dict, name_a: str, name_b: str) -> Table:
    t = Table(title=f"A = {name_a}\nB = {name_b}", title_justify="left", show_edge=False)
    for col in ("metric", "A", "B", "B - A", "change"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for r in compare_rows(a, b):
        f = lambda v: "-" if v is None else r["fmt"].format(v * r["scale"])  # noqa: E731
        change = "-" if r["percent"] is None else f"{r['percent']:+.1f}%"
        mark = {True: " better", False: " worse", None: ""}[r["better"]]
        delta = "-" if r["delta"] is None else ("+" if r["delta"] > 0 else "") + f(r["delta"])
        t.add_row(r["metric"], f(r["a"]), f(r["b"]), delta, change + mark)
    valid = lambda r: "yes" if r.get("validity", {}).get("valid") else "no"  # noqa: E731
    t.add_row("valid", valid(a), valid(b), "", "")
    return t


WORKLOAD_KEYS = ("dataset", "variant", "scenario", "token_scale", "seed", "wire")


def workload_differences(results: tuple[dict, dict], settings: tuple[dict, dict]) -> list[str]:
    """What differs between two runs beside their deployments: the workload (identity's dataset,
    variant, scenario, token scale, seed, wire) and the goodput SLOs (run.json settings `slo`), each
    as "name: A vs B". A comparison across these mixes the workload's effect with the engine's."""
    out = []
    ids = [r.get("identity") or {} for r in results]
    for key in WORKLOAD_KEYS:
        if ids[0].get(key) != ids[1].get(key):
            out.append(f"{key}: {ids[0].get(key)} vs {ids[1].get(key)}")
    slos = [s.get("slo") or None for s in settings]
    if slos[0] != slos[1]:
        out.append(f"SLO: {slos[0] or 'none'} vs {slos[1] or 'none'}")
    return out
