"""The point summary (every printed figure with its definition) and the ISL / OSL histograms
with their log-normal fits."""

from __future__ import annotations

import math

from agentx.metrics.tables import interval_note
from agentx.metrics.trust import diagnosis, provenance
from agentx.report.figures import empty, figure, log_bars

# (label, section, key, scale, format, definition); SPEC §3 is the source of every definition
REQUEST_ROWS = [
    ("TTFT ms", "ttft_s", 1000, "{:,.1f}", "Time from just before the request is written to the first chunk "
     "carrying output."),
    ("E2E latency s", "e2el_s", 1, "{:,.2f}", "end - start: the last output chunk's arrival minus the request's start."),
    ("ITL ms", "itl_s", 1000, "{:,.1f}", "(e2el - ttft) / (osl - 1) per request with osl >= 2 (vLLM's TPOT)."),
    ("interactivity tok/s", "interactivity_tok_s", 1, "{:,.1f}", "Percentile q is 1 / (ITL percentile q): "
     "p90 is the interactivity 90 % of requests reached."),
    ("E2E-norm. interactivity tok/s", "e2e_normalized_interactivity_tok_s", 1, "{:,.1f}",
     "1 / percentile_q(e2el_i / osl_i): output speed including the wait for the first token."),
    ("ISL tokens", "isl", 1, "{:,.0f}", "Prompt tokens: the server's usage.prompt_tokens, else the planned ISL."),
    ("OSL tokens", "osl", 1, "{:,.0f}", "Output tokens: the server's usage.completion_tokens, else chunks counted."),
]
COLUMNS = ("p50", "p90", "p99", "mean")


def _fmt(value, fmt: str = "{:,.1f}", scale: float = 1.0) -> str:
    return "-" if value is None else fmt.format(value * scale)


def summary_rows(result: dict) -> dict:
    """{"distributions": [(label, definition, [p50, p90, p99, mean])], "figures": [(label, value, definition)]}"""
    rm, req, sm, health = result["request_metrics"], result["requests"], result["server_metrics"], result["client_health"]
    dists, v = [], result["validity"]
    low = f" (low sample: n = {v.get('sample')} < {v.get('low_sample_below')})" if v.get("low_sample") else ""
    ci = result.get("spread") or {}
    for label, key, scale, fmt, definition in REQUEST_ROWS:
        d, iv = rm.get(key) or {}, ci.get(key) or {}
        dists.append((label + low, definition, [_fmt(d.get(c), fmt, scale) + interval_note(iv.get(c)) for c in COLUMNS]))
    tp, cache = rm.get("throughput", {}), rm.get("cache", {})
    late = health.get("dispatch_lateness_ms") or {}
    pct = lambda v: _fmt(v, "{:.1f}%", 100)  # noqa: E731
    figures = [
        ("requests", f"{req['succeeded']:,} ok of {req['profiled']:,} profiled (+{req['warmup']:,} warmup)",
         "Profiling-window requests; warmup requests are excluded from every figure."),
        ("errors", ", ".join(f"{k} {v}" for k, v in req["errors"].items()) or "none",
         "Failed profiling requests by category; cancellations are counted apart."),
        ("total tok/s", _fmt(tp.get("total_tok_s"), "{:,.0f}"), "Σ (input + output tokens) / (last end - first start) "
         "over the successful profiling requests."),
        ("output tok/s", _fmt(tp.get("output_tok_s"), "{:,.0f}"), "Σ output tokens / (last end - first start)."),
        ("total tok/s per GPU", _fmt(tp.get("total_tok_s_per_gpu"), "{:,.0f}"), "Total tok/s / number of GPUs."),
        ("output tok/s per GPU", _fmt(tp.get("output_tok_s_per_gpu"), "{:,.0f}"), "Output tok/s / number of GPUs."),
        ("$ per M output tokens", _fmt(tp.get("usd_per_m_output_tokens"), "{:,.2f}"),
         f"$/GPU-h ({tp.get('cost_basis', '-')}) / (per-GPU output tok/s * 3600 / 1e6)."),
        ("output tok/s per MW", _fmt(tp.get("output_tok_s_per_mw"), "{:,.0f}"), "Per-GPU output tok/s * 1000 / kW per GPU."),
        *_power_rows(result),
        *_cache_rows(cache, sm),
        *_tier_rows(sm),
        ("KV usage mean / max", f"{pct(sm.get('kv_usage_mean'))} / {pct(sm.get('kv_usage_max'))}",
         "The engine's KV-cache usage gauge over the profiling scrapes."),
        ("dispatch lateness p50 / p99 ms", f"{_fmt(late.get('p50'), '{:.2f}')} / {_fmt(late.get('p99'), '{:.2f}')}",
         "Actual minus planned start, in wall milliseconds; p99 over 10 ms flags the run client-bound."),
        ("valid", "yes" if result["validity"]["valid"] else "no: " + "; ".join(result["validity"]["reasons"]),
         "Valid when every rule below passes (SPEC section 3)."),
    ]
    return {"columns": list(COLUMNS), "distributions": dists, "figures": figures,
            "provenance": provenance(result), "diagnosis": diagnosis(result),
            "rules": [(r["rule"], _rule_figure(r), _outcome(r)) for r in (result["validity"].get("rules") or [])]}


def _power_rows(result: dict) -> list[tuple[str, str, str]]:
    """The measured power figures (or why there are none)."""
    p = result.get("power") or {}
    measured = p.get("valid") and p.get("avg_w") is not None
    why = "-" if measured else ("not measured" if not p.get("source") else "not valid: " + "; ".join(p.get("reasons") or []))
    return [
        ("GPU power average / peak W", f"{_fmt(p.get('avg_w'), '{:,.0f}')} / {_fmt(p.get('peak_w'), '{:,.0f}')}"
         if measured else why, f"Measured by {p.get('source') or 'bench --power'}: energy over the profiling window "
         "(the GPUs' energy counters, else integrated power) / its duration; peak: the highest read of all GPUs."),
        ("energy per output token (measured) J", _fmt(p.get("joules_per_output_token"), "{:,.3f}") if measured else why,
         "Average measured W / output tok/s."),
        ("energy per token (measured) J", _fmt(p.get("joules_per_total_token"), "{:,.4f}") if measured else why,
         "Average measured W / total tok/s."),
        ("total tok/s per MW (measured)", _fmt(p.get("total_tok_s_per_mw"), "{:,.0f}") if measured else why,
         "Total tok/s * 1e6 / average measured W."),
    ]


def _outcome(rule: dict) -> str:
    """pass, FAIL: reason, or (a rule with no figure) not checked: reason."""
    if not rule["ok"]:
        return "FAIL: " + rule["reason"]
    return rule["reason"] if rule.get("figure") is None and rule.get("reason") else "pass"


def _cache_rows(cache: dict, sm: dict) -> list[tuple[str, str, str]]:
    """The prefix-cache figures: theoretical, the answers' (usage) and the server's (SPEC §3)."""
    pct = lambda v: _fmt(v, "{:.1f}%", 100)  # noqa: E731
    return [
        ("theoretical prefix hit", pct(cache.get("theoretical_hit_rate")), "Prompt tokens an infinite prefix cache "
         "would hold (sent before in the same tree) / planned prompt tokens."),
        ("measured prefix hit (usage)", pct(cache.get("measured_hit_rate")),
         "Σ usage.prompt_tokens_details.cached_tokens / Σ prompt tokens, over requests reporting it."),
        ("server prefix hit", pct(sm.get("prefix_hit_rate")), "Δ prefix-cache hits / Δ queries of the engine's "
         "/metrics over the profiling window (GPU tier): every admission, a preempted request's resume included "
         f"({_fmt((sm.get('counters') or {}).get('preemptions'), '{:,.0f}')} preemptions), which finds its own "
         "blocks again: above the usage figure, which counts each request's first admission."),
        ("server hit, first admissions", pct(sm.get("first_admission_hit_rate")), "Δ prompt tokens by source: "
         "local cache hit / all sources, over the window: each request's first admission, as usage counts it."),
        ("server CPU-tier hit", pct(sm.get("external_hit_rate")), "Δ external hits / Δ external queries (CPU / "
         "offload tier)."),
    ]


def _tier_rows(sm: dict) -> list[tuple[str, str, str]]:
    """The KV tiers' figures, where the engine published them (the simulated engine; SPEC §3)."""
    rows, pct = [], lambda v: _fmt(v, "{:.1f}%", 100)  # noqa: E731
    if sm.get("hit_rate_by_tier"):
        rows.append(("server hit by tier", " / ".join(f"{t} {pct(v)}" for t, v in sm["hit_rate_by_tier"].items()),
                     "Δ hits of each tier (HBM, DRAM, SSD) / Δ prefix-cache queries over the window."))
    rate = sm.get("kv_write_bytes_per_s") or {}
    for tier, b in (sm.get("kv_written_bytes") or {}).items():
        rows.append((f"KV written to {tier}", f"{b / 1e9:,.1f} GB, {_fmt(rate.get(tier) and rate[tier] / 1e9, '{:.2f}')} GB/s",
                     "Δ bytes the store path wrote to the tier over the window, and per second of it."))
    return rows


def _rule_figure(rule: dict) -> str:
    figure, bound = rule.get("figure"), rule.get("bound")
    show = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)  # noqa: E731
    return f"{show(figure)} (bound {show(bound)})"


def _lognormal_counts(n: int, mu: float, sigma: float, edges: list[float]) -> list[float]:
    """Expected count per bin of the log-normal fitted by the moments of ln x."""
    if sigma <= 0:
        return [0.0] * (len(edges) - 1)
    cdf = [0.5 * (1 + math.erf((math.log(e) - mu) / (sigma * math.sqrt(2)))) for e in edges]
    return [n * (b - a) for a, b in zip(cdf[:-1], cdf[1:])]


def token_histogram(histograms: dict, which: str) -> dict:
    """ISL or OSL of the successful profiling requests from the point's stored `histograms`
    (SPEC §8: log-spaced bins, the log-normal fit)."""
    h = histograms.get(which)
    title = f"{which.upper()} distribution (profiling requests)"
    if not h:
        return empty(title, "no successful profiling request")
    bars, axis = log_bars(h["edges"], h["counts"], "requests", ",.0f", " tokens")
    fit = _lognormal_counts(h["n"], h["lognormal"]["mu"], h["lognormal"]["sigma"], h["edges"])
    data = [bars, {"type": "scatter", "mode": "lines", "x": bars["x"], "y": fit, "name": "log-normal fit",
                   "line": {"color": "#000000", "width": 2}, "hovertemplate": "fit: %{y:.1f}<extra></extra>"}]
    median = math.exp(h["lognormal"]["mu"])
    return figure(data, f"{title}: n {h['n']:,}, geometric mean {median:,.0f}", "tokens (log scale)", "requests",
                  xaxis=axis, bargap=0.05)
