"""Console rendering of trace statistics."""

from __future__ import annotations

import math

from rich import box
from rich.table import Table

from agentx.traces.stats import Distribution, TraceStats


def _num(x: float, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if unit == "s":
        return f"{x:,.1f}s" if x < 600 else f"{x / 60:,.1f}m"
    if abs(x) >= 10_000:
        return f"{x / 1000:,.1f}k"
    return f"{x:,.0f}" if x >= 100 or x == int(x) else f"{x:,.2f}"


def stats_table(stats: TraceStats, source: str) -> Table:
    table = Table(title=f"Trace statistics: {source}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("metric")
    for name in ("n", "mean", "p50", "p90", "p95", "p99", "max", "lognorm fit"):
        table.add_column(name, justify="right")

    def row(label: str, d: Distribution, unit: str = "") -> None:
        fit = "-" if d.n == 0 else f"{_num(d.lognormal_median, unit)},{d.lognormal_sigma:.2f}"
        table.add_row(label, f"{d.n:,}", *(_num(getattr(d, k), unit) for k in ("mean", "p50", "p90", "p95", "p99", "max")), fit)

    row("ISL", stats.isl)
    row("OSL", stats.osl)
    row("turn gap", stats.gap, "s")
    row("subagents*", stats.subagents_per_session)
    row("subagent wall", stats.subagent_wall_time, "s")
    row("session wall", stats.duration, "s")
    kinds = ", ".join(f"{k} {v:,}" for k, v in stats.streams.items())
    share = stats.sessions_with_subagents / stats.sessions if stats.sessions else math.nan
    table.caption = (
        f"sessions {stats.sessions:,}   requests {stats.requests:,}   streams: {kinds}\n"
        f"sessions with subagents {stats.sessions_with_subagents:,} ({share:.1%})   "
        f"gaps over 60 s {stats.gap_share_over_60s:.1%}\n"
        f"theoretical prefix-cache hit rate {stats.theoretical_hit_rate:.1%}"
        + (f"   billed-count requests {stats.billed_count_requests:,}" if stats.billed_count_requests else "")
        + "\n* per session with at least one subagent; lognorm: median,sigma of a log-normal fit;"
        + " ISL and OSL in tokens"
    )
    table.caption_justify = "left"
    return table
