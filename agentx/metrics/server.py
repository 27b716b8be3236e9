"""Engine adapters: the scraped series of vLLM, SGLang, llama.cpp or the simulated engine
(which uses vLLM's names) mapped to one vocabulary over the profiling window (SPEC §3)."""

from __future__ import annotations

# metric -> candidate names per engine, first found wins (names drift across versions)
COUNTERS = {
    "prefix_queries": ["vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total",
                       "sglang:prompt_tokens_total"],
    "prefix_hits": ["vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total",
                    "sglang:cached_tokens_total", "llamacpp:prompt_tokens_cached_total"],
    "external_queries": ["vllm:external_prefix_cache_queries_total"],
    "external_hits": ["vllm:external_prefix_cache_hits_total"],
    "prompt_tokens": ["vllm:prompt_tokens_total", "sglang:prompt_tokens_total"],
    "computed_prompt_tokens": ["llamacpp:prompt_tokens_total"],  # llama.cpp counts only what it computed
    "generation_tokens": ["vllm:generation_tokens_total", "sglang:generation_tokens_total",
                          "llamacpp:tokens_predicted_total"],
    "preemptions": ["vllm:num_preemptions_total"],
}
GAUGES = {
    "kv_usage": ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
                 "llamacpp:kv_cache_usage_ratio"],
    "running": ["vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing"],
    "waiting": ["vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"],
}
BY_SOURCE = "vllm:prompt_tokens_by_source_total"
TIER_HITS = "agentx_sim:prefix_cache_hits_by_tier_total"
OFFLOAD_BYTES, OFFLOAD_TIME = "vllm:kv_offload_total_bytes_total", "vllm:kv_offload_total_time_total"
SKIPPED = "agentx_sim:kv_store_skipped_bytes_total"
WRITES = {"DRAM": "GPU_to_CPU", "SSD": "CPU_to_SSD"}  # a tier's writes: their transfer_type


def metric_name(key: str) -> str:
    return key.split("{", 1)[0]


def _total(samples: dict, name: str) -> float | None:
    values = [v for k, v in samples.items() if metric_name(k) == name]
    return sum(values) if values else None


def _by_name(samples: dict) -> dict[str, list[float]]:
    """A scrape's values grouped by metric name, each group in the scrape's order (its sums are
    `_total`'s, bit for bit; one pass where `_total` takes one per name)."""
    out: dict[str, list[float]] = {}
    names = _NAMES
    for k, v in samples.items():
        name = names.get(k)
        if name is None:
            name = names[k] = metric_name(k)
        group = out.get(name)
        if group is None:
            out[name] = [v]
        else:
            group.append(v)
    return out


_NAMES: dict[str, str] = {}  # sample key -> metric name (the same keys in every scrape of a run)


def _reduce(groups: dict[str, list[float]], name: str, mean: bool) -> float | None:
    values = groups.get(name)
    if not values:
        return None
    return sum(values) / len(values) if mean else sum(values)


def label_value(key: str, label: str) -> str | None:
    """A label's value in a sample key `name{a="x",b="y"}` (scrape.parse_samples' form), or None."""
    for marker in (f'{{{label}="', f',{label}="'):  # the whole label name, not one ending in it
        if marker in key:
            return key.split(marker, 1)[1].split('"', 1)[0]
    return None


def detect_engine(series: list[dict]) -> str:
    names = {metric_name(k) for row in series[-3:] for k in row["samples"]}
    for prefix, engine in (("vllm:", "vllm"), ("sglang:", "sglang"), ("llamacpp:", "llama.cpp")):
        if any(n.startswith(prefix) for n in names):
            return engine
    return "unknown"


def _window(series: list[dict]) -> tuple[list[dict], dict, dict, float, bool] | None:
    """The profile window's scrapes, the samples it opened and closed with, its span and whether
    those came from the exact open / close scrapes; None when no scrape lies inside it."""
    profile = [row for row in series if row["phase"] == "profile"]
    opened = next((row for row in series if row["phase"] == "open"), None)
    closed = next((row for row in series if row["phase"] == "close"), None)
    if opened and closed:
        return profile or [opened, closed], opened["samples"], closed["samples"], closed["t"] - opened["t"], True
    if not profile:
        return None
    before = [row for row in series if row["phase"] not in ("profile", "close") and row["t"] <= profile[0]["t"]]
    start = before[-1] if before else profile[0]
    return profile, start["samples"], profile[-1]["samples"], profile[-1]["t"] - start["t"], False


def summarize_server(series: list[dict]) -> dict:
    """Hit rates, KV usage, queue depth and prompt tokens by source over the profile window.

    Counters are the difference between the scrapes taken as the window opened and as its last
    request ended (`window: exact`); runs recorded without them fall back to the last scrape
    before the window and the last one inside it (`window: periodic`). Gauges are the mean and
    max over the periodic scrapes inside the window."""
    window = _window(series)
    if window is None:
        return {"engine": detect_engine(series) if series else "none", "scrapes": 0,
                "missing": ["no scrape inside the profiling window"]}
    profile, first, last, span, exact = window
    out: dict = {"engine": detect_engine(series), "scrapes": len(profile), "window": "exact" if exact else "periodic"}
    missing = []
    deltas = {}
    for metric, names in COUNTERS.items():
        name = next((n for n in names if _total(last, n) is not None), None)
        if name is None:
            missing.append(metric)
            continue
        deltas[metric] = (_total(last, name) or 0.0) - (_total(first, name) or 0.0)
    grouped = None  # per scrape in the window, its values by metric name
    for metric, names in GAUGES.items():
        name = next((n for n in names if _total(last, n) is not None), None)
        if name is None:
            missing.append(metric)
            continue
        if grouped is None:
            grouped = [_by_name(row["samples"]) for row in profile]
        mean = metric == "kv_usage"  # a fraction per replica: their mean
        values = [_reduce(groups, name, mean) for groups in grouped]
        values = [v for v in values if v is not None]
        out[f"{metric}_mean"] = sum(values) / len(values)
        out[f"{metric}_max"] = max(values)
    if "computed_prompt_tokens" in deltas and "prefix_hits" in deltas:  # llama.cpp: computed + cached
        deltas["prompt_tokens"] = deltas["prefix_queries"] = deltas["computed_prompt_tokens"] + deltas["prefix_hits"]
        missing = [m for m in missing if m not in ("prefix_queries", "prompt_tokens")]
    if deltas.get("prefix_queries"):
        out["prefix_hit_rate"] = deltas["prefix_hits"] / deltas["prefix_queries"] if "prefix_hits" in deltas else None
    if deltas.get("external_queries"):
        out["external_hit_rate"] = deltas.get("external_hits", 0.0) / deltas["external_queries"]
    sources = {}
    for samples, sign in ((last, 1.0), (first, -1.0)):
        for key, value in samples.items():
            if metric_name(key) == BY_SOURCE:
                src = label_value(key, "source")
                sources[src] = sources.get(src, 0.0) + sign * value
    if sources:
        out["prompt_tokens_by_source"] = sources
        if sum(sources.values()) > 0:  # by source counts each request's first admission only (SPEC §3)
            out["first_admission_hit_rate"] = sources.get("local_cache_hit", 0.0) / sum(sources.values())
    else:
        missing.append("prompt_tokens_by_source")
    out.update(tier_summary(first, last, span, deltas.get("prefix_queries")))
    out["counters"] = deltas
    groups = _worker_groups(first, last)
    if groups:
        out["workers"] = groups
    out["missing"] = [m for m in missing if m != "computed_prompt_tokens"]  # a llama.cpp-only helper
    return out


# per worker group of a disaggregated sim (label `worker`, SPEC §6): counter -> its name
WORKER_COUNTERS = {"prefix_queries": "vllm:prefix_cache_queries_total", "prefix_hits": "vllm:prefix_cache_hits_total",
                   "prompt_tokens": "vllm:prompt_tokens_total", "generation_tokens": "vllm:generation_tokens_total",
                   "kv_transfer_tokens": "agentx_sim:kv_transfer_tokens_total",
                   "kv_transfer_s": "agentx_sim:kv_transfer_seconds_total"}


def _worker_groups(first: dict, last: dict) -> dict:
    """{group: {counter: delta over the window, prefix_hit_rate}} of a deployment whose series carry
    a `worker` label (prefill / decode workers); {} otherwise."""
    groups: dict[str, dict] = {}
    names = {v: k for k, v in WORKER_COUNTERS.items()}
    for samples, sign in ((last, 1.0), (first, -1.0)):
        for key, value in samples.items():
            metric = names.get(metric_name(key))
            group = label_value(key, "worker") if metric else None
            if group is not None:
                row = groups.setdefault(group, dict.fromkeys(WORKER_COUNTERS, 0.0))
                row[metric] += sign * value
    for row in groups.values():
        row["prefix_hit_rate"] = row["prefix_hits"] / row["prefix_queries"] if row["prefix_queries"] else None
    return groups


def _by_label(samples: dict, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in samples.items():
        if metric_name(key) == name:
            v = label_value(key, label)
            out[v] = out.get(v, 0.0) + value  # summed over replicas
    return out


def _delta(first: dict, last: dict, name: str, label: str) -> dict[str, float]:
    before = _by_label(first, name, label)
    return {k: v - before.get(k, 0.0) for k, v in _by_label(last, name, label).items()}


def tier_summary(first: dict, last: dict, span_s: float, queries: float | None) -> dict:
    """The KV tiers over the window (the simulated engine's series; SPEC §3): the hit rate by
    tier (tokens each tier held / prompt tokens looked up), bytes written to DRAM and the SSD,
    the write bandwidth that used (bytes / window seconds) and the share of the window each
    write link was busy, and the bytes the store path's rules did not write. Empty without the
    series (another engine)."""
    hits = _delta(first, last, TIER_HITS, "tier")
    if not hits:
        return {}
    out: dict = {"hit_rate_by_tier": {t: v / queries for t, v in hits.items()} if queries else None}
    moved, busy = _delta(first, last, OFFLOAD_BYTES, "transfer_type"), _delta(first, last, OFFLOAD_TIME, "transfer_type")
    written = {tier: moved[kind] for tier, kind in WRITES.items() if kind in moved}
    if written:
        out["kv_written_bytes"] = written
        out["kv_write_bytes_per_s"] = {t: b / span_s for t, b in written.items()} if span_s > 0 else None
        out["kv_write_link_busy"] = {t: busy.get(WRITES[t], 0.0) / span_s for t in written} if span_s > 0 else None
    skipped: dict[str, dict[str, float]] = {}
    for key, value in last.items():
        if metric_name(key) == SKIPPED:
            tier, rule = label_value(key, "tier"), label_value(key, "rule")
            per = skipped.setdefault(tier, {})
            per[rule] = per.get(rule, 0.0) + value - first.get(key, 0.0)
    if skipped:
        out["kv_store_skipped_bytes"] = skipped
    return out
