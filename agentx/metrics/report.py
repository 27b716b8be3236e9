"""Console tables of result points (one run, and a sweep of runs)."""

from __future__ import annotations

import math

from rich.table import Table


def _f(value, scale: float = 1.0, fmt: str = "{:,.1f}") -> str:
    """A figure, or `-` when there is none (never `nan`)."""
    return "-" if value is None or not math.isfinite(value) else fmt.format(value * scale)


def result_table(result: dict, title: str) -> Table:
    rm = result["request_metrics"]
    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column("metric")
    for col in ("p50", "p90", "p99", "mean"):
        table.add_column(col, justify="right")
    rows = [("TTFT ms", "ttft_s", 1000), ("E2E latency s", "e2el_s", 1), ("ITL ms", "itl_s", 1000),
            ("interactivity tok/s", "interactivity_tok_s", 1),
            ("E2E-norm. interactivity tok/s", "e2e_normalized_interactivity_tok_s", 1),
            ("ISL tokens", "isl", 1), ("OSL tokens", "osl", 1)]
    for label, key, scale in rows:
        d = rm.get(key) or {}
        fmt = "{:,.0f}" if key in ("isl", "osl") else "{:,.1f}"
        table.add_row(label, *(_f(d.get(c), scale, fmt) for c in ("p50", "p90", "p99", "mean")))
    return table


def result_lines(result: dict) -> list[str]:
    rm, req, sm = result["request_metrics"], result["requests"], result["server_metrics"]
    tp, cache, health = rm.get("throughput", {}), rm.get("cache", {}), result["client_health"]
    errors = ", ".join(f"{k} {v}" for k, v in req["errors"].items()) or "none"
    lines = [
        f"requests: {req['succeeded']:,} ok of {req['profiled']:,} profiled (+{req['warmup']:,} warmup); "
        f"errors: {errors}; cancelled {req['cancelled']}",
        f"throughput: {_f(tp.get('total_tok_s'), fmt='{:,.0f}')} tok/s total, "
        f"{_f(tp.get('output_tok_s'), fmt='{:,.0f}')} output tok/s, {_f(tp.get('requests_per_s'), fmt='{:.2f}')} req/s",
    ]
    if "total_tok_s_per_gpu" in tp:
        line = (f"per GPU: {tp['total_tok_s_per_gpu']:,.0f} tok/s total, {tp['output_tok_s_per_gpu']:,.0f} output")
        if "usd_per_m_output_tokens" in tp:
            line += (f"; ${tp['usd_per_m_output_tokens']:,.2f} per M output tokens ({tp['cost_basis']}), "
                     f"{tp['output_tok_s_per_mw']:,.0f} output tok/s per MW")
        lines.append(line)
    hit, cpu = sm.get("prefix_hit_rate"), sm.get("external_hit_rate")
    lines.append(
        f"prefix cache hit: theoretical {_f(cache.get('theoretical_hit_rate'), 100, '{:.1f}%')}, "
        f"measured {_f(cache.get('measured_hit_rate'), 100, '{:.1f}%')} (usage), "
        f"server {_f(hit, 100, '{:.1f}%')} ({sm.get('engine')})"
        + (f", CPU tier {_f(cpu, 100, '{:.1f}%')}" if cpu is not None else ""))
    if "kv_usage_mean" in sm:
        lines.append(f"server: KV usage mean {_f(sm['kv_usage_mean'], 100, '{:.0f}%')} "
                     f"max {_f(sm['kv_usage_max'], 100, '{:.0f}%')}; "
                     f"running mean {sm.get('running_mean', 0):.1f}, waiting mean {sm.get('waiting_mean', 0):.1f} "
                     f"max {sm.get('waiting_max', 0):.0f}")
    slow = result["sessions"]["slowdown"]
    if slow:
        lines.append(f"sessions replayed whole: {result['sessions']['trees_whole']}, "
                     f"slowdown p50 {slow['p50']:.2f}x p90 {slow['p90']:.2f}x")
    late = health.get("dispatch_lateness_ms") or {}
    lines.append(f"client: dispatch lateness p50 {_f(late.get('p50'), fmt='{:.2f}')} ms, "
                 f"p99 {_f(late.get('p99'), fmt='{:.2f}')} ms, CPU {_f(health.get('cpu_percent'), fmt='{:.0f}%')}"
                 + (" - CLIENT-BOUND" if health["client_bound"] else ""))
    v = result["validity"]
    lines.append("valid" if v["valid"] else "NOT VALID: " + "; ".join(v["reasons"]))
    return lines


def sweep_table(results: list[tuple[int, dict]]) -> Table:
    """One row per run of a concurrency sweep."""
    t = Table(title="sweep", title_justify="left", show_edge=False)
    for col in ("lanes", "ok", "total tok/s", "output tok/s", "TTFT p50 ms", "TTFT p90 ms",
                "interact. p50", "E2E-norm. p90", "server hit", "valid"):
        t.add_column(col, justify="right")
    for n, r in results:
        rm, sm = r["request_metrics"], r["server_metrics"]
        tp, ttft = rm.get("throughput", {}), rm.get("ttft_s") or {}
        inter, norm = rm.get("interactivity_tok_s") or {}, rm.get("e2e_normalized_interactivity_tok_s") or {}
        fmt = lambda v, f="{:,.0f}": "-" if v is None else f.format(v)  # noqa: E731
        t.add_row(str(n), f"{r['requests']['succeeded']:,}", fmt(tp.get("total_tok_s")), fmt(tp.get("output_tok_s")),
                  fmt(ttft.get("p50") and ttft["p50"] * 1000), fmt(ttft.get("p90") and ttft["p90"] * 1000),
                  fmt(inter.get("p50"), "{:,.1f}"), fmt(norm.get("p90"), "{:,.1f}"),
                  fmt(sm.get("prefix_hit_rate") and sm["prefix_hit_rate"] * 100, "{:.1f}%"),
                  "yes" if r["validity"]["valid"] else "no")
    return t

