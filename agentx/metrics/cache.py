"""Prefix-cache ceilings and efficiency (SPEC §3).

The theoretical hit of a request (`theo_cached`) counts the tokens of its hash blocks already
sent in its tree: what an infinite cache keyed by the trace's blocks would hold. An engine
caches whole blocks of its own size and always computes the last prompt token (vLLM, SGLang;
llama.cpp's block is one token), so the most it can hit is `theo_cached` rounded down to its
blocks and capped at the full blocks of the first `ISL - 1` tokens. Cache efficiency is what the
engine hit over that ceiling: 1.0 means nothing was lost to eviction or routing.
"""

from __future__ import annotations


def engine_ceiling(theo_cached: int, isl: int, block: int) -> int:
    """Prompt tokens an engine with `block`-token blocks can at best find cached."""
    return min(theo_cached // block * block, max(0, isl - 1) // block * block)


def cache_summary(records: list, block: int | None, server_hits: float | None = None) -> dict:
    """Ceilings over successful profiling records, and the efficiency of what was measured: the
    answers' reported `cached` where every record reports it, else the server's hits over the
    window (`server_hits`)."""
    isl = sum(r.isl_planned for r in records)
    out: dict = {"engine_block_size": block}
    if not records or not isl or not block:
        return out
    ceiling = sum(engine_ceiling(r.theo_cached, r.isl_planned, block) for r in records)
    out["engine_ceiling_hit_rate"] = ceiling / isl
    if all(r.cached is not None for r in records):
        measured, source = sum(r.cached for r in records), "usage"
    elif server_hits is not None:
        measured, source = server_hits, "server"
    else:
        return out
    out["cache_efficiency"] = measured / ceiling if ceiling else None
    out["cache_efficiency_source"] = source
    return out
