"""Console tables of result points (one run, and a sweep of runs)."""

from __future__ import annotations

import math

from rich.table import Table

from agentx.metrics.validity import paired_text
from agentx.metrics.verdict import short_verdict, verdict


def _f(value, scale: float = 1.0, fmt: str = "{:,.1f}") -> str:
    """A figure, or `-` when there is none (never `nan`)."""
    return "-" if value is None or not math.isfinite(value) else fmt.format(value * scale)


def low_sample_note(result: dict) -> str | None:
    """`low sample (n = 4 < 30)` when the percentiles rest on few requests (SPEC section 3)."""
    v = result.get("validity") or {}
    if not v.get("low_sample"):
        return None
    return f"low sample (n = {v.get('sample')} < {v.get('low_sample_below')})"


def result_table(result: dict, title: str) -> Table:
    rm = result["request_metrics"]
    low = low_sample_note(result)
    if low:
        title += f" - {low.upper()}: percentiles are rough"
    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column("metric")
    for col in ("p50", "p90", "p99", "mean"):
        table.add_column(col, justify="right")
    rows = [("TTFT ms", "ttft_s", 1000), ("E2E latency s", "e2el_s", 1), ("ITL ms", "itl_s", 1000),
            ("interactivity tok/s", "interactivity_tok_s", 1),
            ("E2E-norm. interactivity tok/s", "e2e_normalized_interactivity_tok_s", 1),
            ("ISL tokens", "isl", 1), ("OSL tokens", "osl", 1)]
    ci = result.get("spread") or {}
    for label, key, scale in rows:
        d, iv = rm.get(key) or {}, ci.get(key) or {}
        fmt = "{:,.0f}" if key in ("isl", "osl") else "{:,.1f}"
        table.add_row(label + (" (low sample)" if low else ""),
                      *(_f(d.get(c), scale, fmt) + interval_note(iv.get(c)) for c in ("p50", "p90", "p99", "mean")))
    return table


def _rel(x: float) -> str:
    v = x * 100
    return f"{v:+.1f}" if abs(v) < 1 else f"{v:+.0f}"


def interval_note(d: dict | None) -> str:
    """` (-28/+45%)`: a figure's 95 % interval relative to it (SPEC section 3, "Spread")."""
    if not d or d.get("lo_rel") is None:
        return ""
    return f" ({_rel(d['lo_rel'])}/{_rel(d['hi_rel'])}%)"


def spread_line(ci: dict) -> str:
    """How the intervals in brackets were made."""
    return (f"95 % intervals in brackets (another sample of session trees): cluster bootstrap over {ci['trees']:,} session trees "
            f"({ci['requests']:,} requests, {ci['resamples']} resamples, seed {ci['seed']})")


def host_error_line(host: dict) -> str:
    """What the client measured minus what agentx-sim modeled, and the sim's own lag in it."""
    def part(key: str, label: str) -> str:
        d = host.get(key)
        return f"{label} p50 {d['p50'] * 1000:+,.2f} ms p90 {d['p90'] * 1000:+,.2f} ms" if d else f"{label} -"
    line = "host error (measured minus modeled): " + ", ".join((part("ttft_s", "TTFT"), part("itl_s", "ITL")))
    return line + "; of it the sim's own lag: " + ", ".join((part("sim_lag_ttft_s", "TTFT"), part("sim_lag_itl_s", "ITL")))


def twin_line(tw: dict) -> str:
    """The run's figures against the same plan in virtual time (SPEC section 3, `twin`)."""
    if not tw.get("checked"):
        return f"virtual twin: not checked ({tw.get('reason')})"
    dev = tw.get("deviation") or {}

    def part(key: str, label: str) -> str:
        v, d = tw.get(key), dev.get(key)
        return f"{label} {v * 1000:,.1f} ms" + (f" (run {d:+.1%})" if d is not None else "") if v is not None \
            else f"{label} -"
    return ("virtual twin (the same plan in virtual time): " + ", ".join(
        (part("ttft_p50_s", "TTFT p50"), part("ttft_p90_s", "p90"), part("itl_p50_s", "ITL p50")))
        + (f"; {paired_text(tw['paired_ttft_s'])}" if tw.get("paired_ttft_s") else ""))



def _pct(fraction) -> str:
    """A share as a percentage that keeps small values visible (0.25 %, not 0 %)."""
    if fraction is None:
        return "-"
    v = fraction * 100
    return f"{v:.2g}%" if 0 < v < 10 else f"{v:.0f}%"


FIELD_WORDS = {"engine_version": "engine version", "block_size": "KV block", "max_model_len": "max model length",
               "engine_settings": "engine settings", "gpus": "GPUs"}


def _source_words(source: str) -> str:
    """`user` -> `named by you`; `server /version` -> `read from the server's /version`; joined by `and`."""
    def one(part: str) -> str:
        who, _, endpoint = part.strip().partition(" ")
        return "named by you" if who == "user" else f"read from the server's {endpoint or 'answers'}"
    return " and ".join(one(p) for p in source.split(" and "))


def identity_line(ident: dict) -> str:
    """What was measured, and where each part of its identity came from: named by the user, or read
    from one of the server's endpoints (`identity.sources`)."""
    src = ident.get("sources") or {}
    parts = [f"engine: {ident.get('engine') or 'unknown'}" + (f" {ident['engine_version']}" if ident.get("engine_version") else "")]
    if ident.get("model"):
        parts.append(f"model {ident['model']}")
    if ident.get("gpus") and ident.get("hardware"):
        parts.append(f"{ident['gpus']} x {ident['hardware']}")
    if ident.get("block_size"):
        parts.append(f"KV block {ident['block_size']} tokens")
    if ident.get("max_model_len"):
        parts.append(f"max model length {ident['max_model_len']:,}")
    where: dict[str, list[str]] = {}
    for key, source in src.items():
        where.setdefault(_source_words(source), []).append(FIELD_WORDS.get(key, key.replace("_", " ")))
    said = "; ".join(f"{label}: {', '.join(keys)}" for label, keys in where.items())
    return ", ".join(parts) + (f" ({said})" if said else " (nothing published by the server, nothing named by you)")


def accuracy_line(acc: dict) -> str:
    """`bench --eval`'s figure in one line (SPEC section 3, "Accuracy")."""
    lo, hi = acc["interval"]
    ref = (f"; reference {acc['reference']:.0%} ({acc['reference_source']})" if acc.get("reference") is not None
           else "; no reference (--eval-reference)")
    failed = f", {acc['errors']} failed" if acc.get("errors") else ""
    return (f"accuracy: {acc['eval']} {acc['correct']}/{acc['n']} = {acc['accuracy']:.1%} (95 % interval "
            f"{lo:.0%}-{hi:.0%}{failed}){ref}")


def probe_line(result: dict) -> str:
    """The cache probe's result in one line (`agentx/replay/probe.py`)."""
    line = f"cache probe: {result['mismatches']} mismatches in {result['probes'] - result['errors']} probes"
    if result["errors"]:
        line += f" ({result['errors']} failed)"
    bad = [p for p in result["items"] if p["match"] is False]
    if bad:
        p = bad[0]
        line += (f"; first: session {p['session']} request {p['request']}, ISL {p['isl']}, prefix {p['prefix']}, "
                 f"tier {p['tier']}, outputs differ from position {p['first_difference']}")
    return line


def power_line(p: dict | None) -> str | None:
    """Measured power (SPEC §3, "Power"): J per token and tok/s per MW, or why there are none."""
    if not p or p.get("source") is None:
        return None
    if p.get("avg_w") is None:
        return f"power ({p['source']}): none measured: " + "; ".join(p.get("reasons") or ["no readings"])
    line = (f"power ({p['source']}, {p['gpus']} GPUs, {p['method']}): {p['energy_j'] / 1000:,.1f} kJ over "
            f"{p['window_s']:,.0f} s, average {p['avg_w']:,.0f} W, peak {_f(p.get('peak_w'), fmt='{:,.0f}')} W; "
            f"{_f(p.get('joules_per_output_token'), fmt='{:,.3f}')} J per output token, "
            f"{_f(p.get('joules_per_total_token'), fmt='{:,.4f}')} J per token; "
            f"{_f(p.get('output_tok_s_per_mw'), fmt='{:,.0f}')} output and "
            f"{_f(p.get('total_tok_s_per_mw'), fmt='{:,.0f}')} total tok/s per MW (measured: the GPUs' own draw, "
            "power.output_tok_s_per_mw / total_tok_s_per_mw)")
    if not p["valid"]:
        line += " -- NOT VALID: " + "; ".join(p["reasons"])
    return line


def result_lines(result: dict) -> list[str]:
    rm, req, sm = result["request_metrics"], result["requests"], result["server_metrics"]
    tp, cache, health = rm.get("throughput", {}), rm.get("cache", {}), result["client_health"]
    ident = result["identity"]
    errors = ", ".join(f"{k} {v}" for k, v in req["errors"].items()) or "none"
    lines = [identity_line(ident)]
    if (ident.get("token_scale") or 1) > 1:
        k = ident["token_scale"]
        lines.append(f"token scale {k}: ISL, OSL and throughput are 1/{k} of the trace's (prefix structure kept)")
    lines += [
        f"requests: {req['succeeded']:,} ok of {req['profiled']:,} profiled (+{req['warmup']:,} warmup); "
        f"errors: {errors}; cancelled {req['cancelled']}"
        + (f"; drained (+{req.get('drain', 0):,} sent after the window, not profiled)" if req.get("drained") else ""),
        f"throughput: {_f(tp.get('total_tok_s'), fmt='{:,.0f}')} tok/s total, "
        f"{_f(tp.get('output_tok_s'), fmt='{:,.0f}')} output tok/s, {_f(tp.get('requests_per_s'), fmt='{:.2f}')} req/s",
    ]
    if rm.get("goodput"):
        lines.append(_goodput_line(rm["goodput"]))
    if "total_tok_s_per_gpu" in tp:
        line = (f"per GPU: {tp['total_tok_s_per_gpu']:,.0f} tok/s total, {tp['output_tok_s_per_gpu']:,.0f} output")
        if "usd_per_m_output_tokens" in tp:
            line += (f"; ${tp['usd_per_m_output_tokens']:,.2f} per M output tokens ({tp['cost_basis']}), "
                     f"{tp['output_tok_s_per_mw']:,.0f} output tok/s per MW (cost model: {tp['kw_per_gpu']:g} kW "
                     "all-in per GPU, throughput.output_tok_s_per_mw)")
        lines.append(line)
    power = power_line(result.get("power"))
    if power:
        lines.append(power)
    reasoning = rm.get("reasoning_tokens")
    if reasoning:
        lines.append(f"reasoning tokens: p50 {reasoning['p50']:,.0f}, mean {reasoning['mean']:,.1f} per answer "
                     f"({reasoning['n']:,} answers with reasoning; OSL counts them)")
    lines.append(_cache_line(cache, sm))
    if cache.get("cache_efficiency") is not None:
        lines.append(f"cache efficiency: {cache['cache_efficiency']:.3f} ({cache['cache_efficiency_source']} hits over "
                     "the engine-block ceiling; 1 = nothing lost to eviction or routing)")
    if sm.get("hit_rate_by_tier") or sm.get("kv_written_bytes"):
        lines.append(_tiers_line(sm))
    if "kv_usage_mean" in sm:
        lines.append(f"server: KV usage mean {_pct(sm['kv_usage_mean'])} max {_pct(sm['kv_usage_max'])}; "
                     f"running mean {sm.get('running_mean', 0):.1f}, waiting mean {sm.get('waiting_mean', 0):.1f} "
                     f"max {sm.get('waiting_max', 0):.0f}")
    lines += [_sessions_line(result["sessions"]), _client_line(health)]
    return lines + trust_lines(result) + [f"hint: {hint}" for hint in result.get("hints") or []]


def _goodput_line(good: dict) -> str:
    slo = ", ".join(f"{k} <= {v:g} ms" for k, v in good["slo_ms"].items())
    per_gpu = good.get("total_tok_s_per_gpu")
    return (f"goodput: {_f(good['requests_per_s'], fmt='{:.2f}')} req/s, {good['met']:,} of {good['of']:,} "
            f"requests ({_pct(good['share'])}) met {slo}"
            + (f"; {per_gpu:,.0f} tok/s per GPU at the SLO" if per_gpu is not None else ""))


def _cache_line(cache: dict, sm: dict) -> str:
    hit, cpu = sm.get("prefix_hit_rate"), sm.get("external_hit_rate")
    line = (f"prefix cache hit: theoretical {_f(cache.get('theoretical_hit_rate'), 100, '{:.1f}%')} (hash blocks)")
    if cache.get("engine_ceiling_hit_rate") is not None:
        line += f", ceiling {cache['engine_ceiling_hit_rate']:.1%} at {cache['engine_block_size']}-token blocks"
    return line + (f", measured {_f(cache.get('measured_hit_rate'), 100, '{:.1f}%')} (usage), "
                   f"server {_f(hit, 100, '{:.1f}%')} ({sm.get('engine')})"
                   + (f", CPU tier {_f(cpu, 100, '{:.1f}%')}" if cpu is not None else "") + _resumes(sm))


def _resumes(sm: dict) -> str:
    """Why the server's rate can exceed the answers' (SPEC §3): it counts every admission, and a
    request preempted and resumed looks its blocks up again (and finds its own)."""
    n = (sm.get("counters") or {}).get("preemptions")
    if not n:
        return ""
    first = sm.get("first_admission_hit_rate")
    return (f"; the server counts {n:,.0f} resumes after a preemption as lookups too (each finds its own blocks)"
            + (f", its first admissions hit {first:.1%}" if first is not None else ""))


def _tiers_line(sm: dict) -> str:
    """Hit rate by tier, and per tier the bytes written, the write bandwidth and link share used."""
    hits = sm.get("hit_rate_by_tier") or {}
    line = "server: KV tiers: hit " + ", ".join(f"{t} {_pct(v)}" for t, v in hits.items())
    rate, busy = sm.get("kv_write_bytes_per_s") or {}, sm.get("kv_write_link_busy") or {}
    for tier, b in (sm.get("kv_written_bytes") or {}).items():
        line += (f"; written to {tier} {b / 1e9:,.1f} GB ({_f(rate.get(tier) and rate[tier] / 1e9, fmt='{:.2f}')} GB/s, "
                 f"link busy {_pct(busy.get(tier))})")
    return line


def _sessions_line(sessions: dict) -> str:
    slow = sessions["slowdown"]
    line = f"sessions replayed whole: {sessions['trees_whole']}"
    if slow:
        line += f", slowdown p50 {slow['p50']:.2f}x p90 {slow['p90']:.2f}x"
        if slow["p50"] < 1:
            line += " (below 1: faster than recorded; the idle caps shorten long gaps)"
    return line


def _client_line(health: dict) -> str:
    late = health.get("dispatch_lateness_ms") or {}
    line = (f"client: dispatch lateness p50 {_f(late.get('p50'), fmt='{:.2f}')} ms, "
            f"p99 {_f(late.get('p99'), fmt='{:.2f}')} ms, CPU {_f(health.get('cpu_percent'), fmt='{:.0f}%')}")
    verdict = health.get("verdict") or ("cpu_bound" if health.get("client_bound") else "ok")
    if verdict == "cpu_bound":
        line += " - CLIENT-BOUND (CPU)"
    elif verdict == "late_dispatch":
        waited = health.get("runqueue_wait_percent")
        line += (" - LATE DISPATCH (the client had CPU to spare: its event loop was held, the host woke it late or "
                 "paused (benchmarks/host_pauses.py)"
                 + (f", or the host kept it waiting for a CPU {_pct(waited / 100)} of the time)" if waited is not None
                    else ")"))
    return line


def trust_lines(result: dict) -> list[str]:
    """The cache probes, the host error, low sample, and the verdict with its reasons."""
    lines = [f"{probe_line(probe)} ({when} the run)" for when, probe in (result.get("cache_probe") or {}).items()]
    if result.get("accuracy"):
        lines.append(accuracy_line(result["accuracy"]))
    if result.get("host_error"):
        lines.append(host_error_line(result["host_error"]))
    if result.get("twin"):
        lines.append(twin_line(result["twin"]))
    if result.get("spread"):
        lines.append(spread_line(result["spread"]))
    if low_sample_note(result):
        lines.append(f"{low_sample_note(result)}: every percentile above rests on few requests (rough, not NOT VALID for that alone)")
    lines.append(verdict(result))
    return lines


def sweep_table(results: list[tuple[int | str, dict]]) -> Table:
    """One row per run of a concurrency sweep (keyed by lanes, or by the runs' folder names)."""
    t = Table(title="sweep", title_justify="left", show_edge=False)
    first = "lanes" if all(isinstance(n, int) for n, _ in results) else "run"
    for col in (first, "ok", "total tok/s", "output tok/s", "TTFT p50 ms", "TTFT p90 ms",
                "intvty p50", "E2E-norm p90", "server hit", "cache eff.", "valid"):
        t.add_column(col, justify="right", overflow="fold")  # a narrow terminal folds, never cuts
    for n, r in results:
        rm, sm = r["request_metrics"], r["server_metrics"]
        tp, ttft = rm.get("throughput", {}), rm.get("ttft_s") or {}
        inter, norm = rm.get("interactivity_tok_s") or {}, rm.get("e2e_normalized_interactivity_tok_s") or {}
        fmt = lambda v, f="{:,.0f}": "-" if v is None else f.format(v)  # noqa: E731
        low = " (low n)" if r["validity"].get("low_sample") else ""  # rough percentiles, not a reason
        t.add_row(str(n), f"{r['requests']['succeeded']:,}{low}", fmt(tp.get("total_tok_s")), fmt(tp.get("output_tok_s")),
                  fmt(ttft.get("p50") and ttft["p50"] * 1000), fmt(ttft.get("p90") and ttft["p90"] * 1000),
                  fmt(inter.get("p50"), "{:,.1f}"), fmt(norm.get("p90"), "{:,.1f}"),
                  fmt(sm.get("prefix_hit_rate") and sm["prefix_hit_rate"] * 100, "{:.1f}%"),
                  fmt(rm.get("cache", {}).get("cache_efficiency"), "{:.3f}"),
                  short_verdict(r))
    return t


