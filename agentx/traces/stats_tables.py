"""Console rendering of trace statistics."""

from __future__ import annotations

import math
from typing import Callable

from rich import box
from rich.table import Table

from agentx.traces.stats import SOURCE_RULES, Distribution, TraceStats


_TIME_UNITS = ((600, 1, "s"), (600 * 60, 60, "m"), (96 * 3600, 3600, "h"), (3650 * 86400, 86400, "d"))


def _num(x: float | None, unit: str = "") -> str:
    """At most 7 characters, so large values are never cut: 9,999  99.9k  10.0M  59.9s  2.3h  317.1y."""
    if x is None or not math.isfinite(x):
        return "-"
    if unit == "s":
        for limit, size, name in _TIME_UNITS:
            if x < limit:
                return f"{x / size:.1f}{name}"
        return f"{x / (365 * 86400):,.1f}y"
    if abs(x) >= 1_000_000:
        return f"{x / 1e6:,.1f}M"
    if abs(x) >= 10_000:
        return f"{x / 1000:.1f}k"
    return f"{x:,.0f}" if x >= 100 or x == int(x) else f"{x:,.2f}"


def _share(x: float) -> str:
    """A fraction as a percentage; `n/a` when there is nothing to count."""
    return f"{x:.1%}" if math.isfinite(x) else "n/a"


def _ratio(part: float, whole: float) -> float:
    return part / whole if whole else math.nan


STATS_COLUMNS = ("metric", "n", "mean", "p50", "p90", "p95", "p99", "max", "lognorm fit")


def hit_lines(stats: TraceStats, source_rule: bool = False) -> list[str]:
    """The theoretical hit rates, each named by its rule: agentx's (per session tree), the corpus-wide
    one of global ids, and with `source_rule` the source's own (SOURCE_RULES)."""
    line = f"theoretical prefix-cache hit rate {_share(stats.theoretical_hit_rate)} (agentx: within each session tree)"
    if stats.corpus_hit_rate is not None:
        line += f", {_share(stats.corpus_hit_rate)} across the corpus (global ids)"
    lines = [line]
    if source_rule:
        if stats.source_hit_rule is None:
            lines.append("by the source's rule: the same as agentx's (the format defines no other)")
        else:
            lines.append(f"by the source's rule {_share(stats.source_hit_rate or math.nan)} "
                         f"({SOURCE_RULES[stats.source_hit_rule]})")
    return lines


def stats_rows(stats: TraceStats, source_rule: bool = False) -> tuple[list[list[str]], list[str]]:
    """The cells of `agentx trace stats` (one row per distribution) and its caption lines, as printed."""

    def row(label: str, d: Distribution, unit: str = "") -> list[str]:
        fit = f"{_num(d.lognormal_median, unit)},{d.lognormal_sigma:.2f}" if math.isfinite(d.lognormal_sigma) else "-"
        return [label, f"{d.n:,}", *(_num(getattr(d, k), unit) for k in ("mean", "p50", "p90", "p95", "p99", "max")),
                fit]

    rows = [row("ISL", stats.isl), row("OSL", stats.osl), row("turn gap", stats.gap, "s"),
            row("subagents*", stats.subagents_per_session), row("subagent wall", stats.subagent_wall_time, "s"),
            row("session wall", stats.duration, "s")]
    kinds = ", ".join(f"{k} {v:,}" for k, v in stats.streams.items())
    share = _ratio(stats.sessions_with_subagents, stats.sessions)
    caption = [
        f"sessions {stats.sessions:,}   requests {stats.requests:,}   streams: {kinds}",
        f"sessions with subagents {stats.sessions_with_subagents:,} ({_share(share)})   "
        f"gaps over 60 s {_share(stats.gap_share_over_60s)}",
        *hit_lines(stats, source_rule),
        *([f"billed-count requests {stats.billed_count_requests:,}"] if stats.billed_count_requests else []),
        "* per session with at least one subagent; lognorm: median,sigma of a log-normal fit; ISL and OSL in tokens",
    ]
    return rows, caption


def stats_table(stats: TraceStats, source: str, source_rule: bool = False) -> Table:
    table = Table(title=f"Trace statistics: {source}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    table.add_column(STATS_COLUMNS[0])
    for name in STATS_COLUMNS[1:]:
        table.add_column(name, justify="right")
    rows, caption = stats_rows(stats, source_rule)
    for cells in rows:
        table.add_row(*cells)
    table.caption = "\n".join(caption)
    table.caption_justify = "left"
    return table


def segments_table(stats: TraceStats) -> Table | None:
    """Token share and reuse per segment kind (SPEC §1, "Segments"); None without segments."""
    if not stats.segments:
        return None
    table = Table(title="Input by segment kind", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    table.add_column("kind")
    for name in ("tokens", "share", "new", "reused later", "share of never reused"):
        table.add_column(name, justify="right")
    total = sum(k.tokens for k in stats.segments)
    never = sum(k.never_reused for k in stats.segments)
    for k in stats.segments:
        table.add_row(k.kind, _num(k.tokens), _share(_ratio(k.tokens, total)), _num(k.new),
                      _share(_ratio(k.reused, k.new)), _share(_ratio(k.never_reused, never)))
    table.caption = ("share: of all input tokens sent; new: first sent in their request; reused later: of the new "
                     "tokens, share a later request of the session sends again")
    table.caption_justify = "left"
    return table


def compare_table(corpora: list[tuple[str, TraceStats]], source_rule: bool = False) -> Table:
    """Corpora side by side: one column each, the figures that tell agentic traffic apart."""
    table = Table(title="Trace statistics side by side", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("metric")
    for name, _ in corpora:
        table.add_column(name, justify="right")
    rows: list[tuple[str, Callable[[TraceStats], str]]] = [
        ("sessions", lambda s: f"{s.sessions:,}"),
        ("requests", lambda s: f"{s.requests:,}"),
        ("requests / session", lambda s: _num(s.requests / s.sessions) if s.sessions else "-"),
        ("sessions with subagents", lambda s: _share(_ratio(s.sessions_with_subagents, s.sessions))),
        ("requests in subagents", lambda s: _share(_ratio(s.subagent_requests, s.requests))),
    ]
    for label, dist, unit in (("ISL", "isl", ""), ("OSL", "osl", ""), ("turn gap", "gap", "s"),
                              ("session wall", "duration", "s")):
        for p in ("p50", "p90", "p99"):
            rows.append((f"{label} {p}", lambda s, d=dist, p=p, u=unit: _num(getattr(getattr(s, d), p), u)))
    rows += [
        ("gaps over 60 s", lambda s: _share(s.gap_share_over_60s)),
        ("theoretical hit rate", lambda s: _share(s.theoretical_hit_rate)),
        ("  across the corpus", lambda s: "-" if s.corpus_hit_rate is None else _share(s.corpus_hit_rate)),
    ]
    if source_rule:
        rows.append(("  by the source's rule", lambda s: "-" if s.source_hit_rule is None else
                     f"{_share(s.source_hit_rate or math.nan)} ({s.source_hit_rule})"))
    for label, cell in rows:
        table.add_row(label, *(cell(stats) for _, stats in corpora))
    table.caption = ("ISL and OSL in tokens; hit rate: token-weighted, infinite cache, within each session tree "
                     "(across the corpus: global ids only)")
    if source_rule:
        table.caption += "".join(f"\n{key}: {SOURCE_RULES[key]}" for key in
                                 dict.fromkeys(s.source_hit_rule for _, s in corpora if s.source_hit_rule))
    table.caption_justify = "left"
    return table
