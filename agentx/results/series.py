"""Per-point chart data precomputed at import (SPEC §8): series on a 1 s grid and ISL / OSL
histograms. The grid step is one scrape interval: 1 s of wall time, which is `clock_scale`
seconds of the run's (modeled) clock."""

from __future__ import annotations

import math

import numpy as np

from agentx.common import log_bins
from agentx.metrics.server import BY_SOURCE, COUNTERS, GAUGES, label_value, metric_name

SERIES_VERSION = 4  # 4: power_w (measured GPU power, SPEC §3 "Power")
CPU_KV_USAGE = ["vllm:cpu_cache_usage_perc", "vllm:cpu_kv_cache_usage_perc"]
FRACTIONS = set(GAUGES["kv_usage"] + CPU_KV_USAGE)  # per engine: their mean is the server's
HIT_WINDOW = 2  # the prefix hit rate at a grid step is the ratio of sums over steps i-2 .. i+2


def _r(values, digits: int = 4) -> list:
    """A float array as a JSON list: NaN -> null, rounded (compact and exact enough for charts)."""
    a = np.round(np.asarray(values, dtype=float), digits)
    return [None if math.isnan(v) else v for v in a.tolist()]


def build_series(columns: dict, scrapes: list[dict], clock_scale: float, prefix: dict | None = None,
                 token_scale: int = 1, power: list[tuple[float, float]] | None = None,
                 power_source: str | None = None) -> dict:
    """`prefix`: the dataset digest's prefix order per session (`agentx.traces.digest`), for the
    in-flight unique tokens; `token_scale`: the run's (a hash block is block_size / K tokens);
    `power`: (t, W of all GPUs) reads of `bench --power` (agentx/power/energy.power_over_time)."""
    step = float(clock_scale or 1.0)
    ends = columns["end"]
    horizon = max([float(np.nanmax(ends)) if len(ends) else 0.0] + [s["t"] for s in scrapes])
    n = int(horizon // step) + 1
    out = {"version": SERIES_VERSION, "step_s": step, "t": _r(np.arange(n) * step, 3)}
    out.update(_request_series(columns, step, n))
    out.update(_sent_series(columns, step, n, float(clock_scale or 1.0)))
    out.update(_server_series(scrapes, step, n))
    out.update(inflight_tokens(columns, prefix, step, n, token_scale))
    out["power"] = _power_series(power or [], step, n, power_source)
    return out


def _power_series(reads: list[tuple[float, float]], step: float, n: int, source: str | None) -> dict | None:
    """The GPUs' summed power per step (the last read in a step; null where none), and its source."""
    if not reads:
        return None
    col = np.full(n, np.nan)
    for t, watts in reads:
        col[min(int(t // step), n - 1)] = watts
    return {"power_w": _r(col, 1), "source": source}


def inflight_tokens(c: dict, prefix: dict | None, step: float, n: int, token_scale: int = 1) -> dict:
    """At each grid time t_i = i * step, the requests in flight (start <= t_i < end, warmup
    included): `inflight_tokens`, the sum of their planned ISL, and `inflight_unique_tokens`, the
    distinct prompt tokens among them: per tree, the union of their prompts' hash-block prefixes
    (requests of different trees share none, as for `theo_cached`), summed over trees (SPEC §9).
    Null without the digest's prefix order or when a record's session or node is not in it."""
    start, end, isl = c["start"], c["end"], c["isl_planned"]
    sent = np.flatnonzero(np.isfinite(start) & np.isfinite(end) & (end > start) & (isl > 0))
    first = np.ceil(start[sent] / step).astype(np.int64)
    last = np.minimum(np.ceil(end[sent] / step).astype(np.int64) - 1, n - 1)  # t_last < end
    span = np.maximum(last - first + 1, 0)
    req = np.repeat(sent, span)  # one (step, request) pair per step a request is in flight at
    steps = np.repeat(first, span) + np.arange(len(req)) - np.repeat(np.cumsum(span) - span, span)
    total = np.bincount(steps, weights=isl[req].astype(float), minlength=n)[:n]
    out = {"inflight_tokens": _r(total, 0), "inflight_unique_tokens": None}
    if prefix is None:
        return out
    names = [c["session"][i] for i in sent.tolist()]
    index = {name: k for k, name in enumerate(dict.fromkeys(names))}
    if any(name not in prefix for name in index):
        return out
    orders = [prefix[name] for name in index]
    sess = np.full(len(isl), -1, dtype=np.int64)
    sess[sent] = [index[name] for name in names]
    rank = np.zeros(len(isl), dtype=np.int64)
    for k, order in enumerate(orders):
        mine = sent[sess[sent] == k]
        nodes = c["node"][mine]
        if len(nodes) and (nodes.min() < 0 or nodes.max() >= len(order["rank"])):
            return out
        rank[mine] = np.asarray(order["rank"], dtype=np.int64)[nodes]
    lcps = [np.asarray(o["lcp"], dtype=np.int64) for o in orders]
    shared = np.zeros(n)
    pairs = np.lexsort((rank[req], c["tree"][req], steps))
    s_req, s_step = req[pairs], steps[pairs]
    same = np.flatnonzero((s_step[1:] == s_step[:-1]) & (c["tree"][s_req[1:]] == c["tree"][s_req[:-1]]))
    for k in same.tolist():  # neighbours in (step, tree, rank) order: what they share is all they share
        ra, rb = s_req[k], s_req[k + 1]
        order = sess[ra]
        blocks = int(lcps[order][rank[ra]:rank[rb]].min())  # ranks differ: distinct nodes of one tree
        tokens = blocks * max(1, orders[order]["block_size"] // token_scale)
        shared[s_step[k]] += min(tokens, isl[ra], isl[rb])
    out["inflight_unique_tokens"] = _r(total - shared, 0)
    return out


def _request_series(c: dict, step: float, n: int) -> dict:
    """Requests by the step they ended in: completions, errors, output tok/s, TTFT and interactivity p50."""
    ok = np.array([e is None for e in c["error"]], dtype=bool)
    b = np.minimum((c["end"] // step).astype(np.int64), n - 1)
    done = np.bincount(b[ok], minlength=n)
    errors = np.bincount(b[~ok], minlength=n)
    osl = np.where(c["osl"] >= 0, c["osl"], c["chunks"]).astype(float)
    out_tok = np.bincount(b[ok], weights=osl[ok], minlength=n) / step
    ttft_p50, ttft_p90 = np.full(n, np.nan), np.full(n, np.nan)
    inter_p50 = np.full(n, np.nan)
    dur = c["end"] - c["start"]
    itl = np.where((osl >= 2) & ok, (dur - c["ttft"]) / np.maximum(osl - 1, 1), np.nan)
    order = np.argsort(b[ok], kind="stable")
    bins_ok, ttft_ok, itl_ok = b[ok][order], c["ttft"][ok][order], itl[ok][order]
    cuts = np.flatnonzero(np.diff(bins_ok)) + 1
    for idx, tt, it in zip(np.split(bins_ok, cuts), np.split(ttft_ok, cuts), np.split(itl_ok, cuts)):
        if len(idx):
            if np.isfinite(tt).any():
                ttft_p50[idx[0]], ttft_p90[idx[0]] = np.nanpercentile(tt, [50, 90])
            if np.isfinite(it).any():
                med = np.nanmedian(it)
                inter_p50[idx[0]] = 1.0 / med if med > 0 else np.nan
    profile = np.array([p == "profile" for p in c["phase"]], dtype=bool)
    starts = c["start"][profile]
    return {
        "requests_done": done.tolist(), "requests_failed": errors.tolist(), "output_tok_s": _r(out_tok, 2),
        "ttft_p50_s": _r(ttft_p50), "ttft_p90_s": _r(ttft_p90), "interactivity_p50_tok_s": _r(inter_p50, 2),
        "profile_start_s": float(starts.min()) if starts.size else None,
        "profile_end_s": float(c["end"][profile].max()) if starts.size else None,
    }


def _sent_series(c: dict, step: float, n: int, clock_scale: float) -> dict:
    """Requests by the step they started in: dispatch lateness p50 / p99 (wall ms) and the
    theoretical prefix hit rate of what was sent (warmup included; centred window as the server's)."""
    sent = np.isfinite(c["start"]) & np.isfinite(c["planned"])
    b = np.minimum((c["start"][sent] // step).astype(np.int64), n - 1)
    late = (c["start"][sent] - c["planned"][sent]) * 1000 / clock_scale
    p50, p99 = np.full(n, np.nan), np.full(n, np.nan)
    order = np.argsort(b, kind="stable")
    cuts = np.flatnonzero(np.diff(b[order])) + 1
    for idx, v in zip(np.split(b[order], cuts), np.split(late[order], cuts)):
        if len(idx):
            p50[idx[0]], p99[idx[0]] = np.percentile(v, [50, 99])
    phase = np.array(c["phase"], dtype=object)[sent]
    use = (phase == "profile") | (phase == "warmup")
    theo = np.bincount(b[use], weights=c["theo_cached"][sent][use].astype(float), minlength=n)
    planned = np.bincount(b[use], weights=c["isl_planned"][sent][use].astype(float), minlength=n)
    st, sp = _centred_sum(theo), _centred_sum(planned)
    hit = np.where(sp > 0, st / np.where(sp > 0, sp, 1), np.nan)
    return {"lateness_p50_ms": _r(p50, 3), "lateness_p99_ms": _r(p99, 3), "theoretical_hit_rate": _r(hit)}


def _totals(samples: dict) -> dict[str, float]:
    """Sum of every label set per metric name; the KV usage fractions are averaged instead (one per
    engine or replica, SPEC §6)."""
    out: dict[str, float] = {}
    sets: dict[str, int] = {}
    for key, value in samples.items():
        name = metric_name(key)
        out[name] = out.get(name, 0.0) + value
        sets[name] = sets.get(name, 0) + 1
    for name in FRACTIONS & set(out):
        out[name] /= sets[name]
    return out


def _engine(key: str) -> str:
    """The engine a sample belongs to: its `replica` label, else its `engine` label."""
    for name in ("replica", "engine"):
        value = label_value(key, name)
        if value is not None:
            return f"{name} {value}"
    return "engine"


def _by_engine(scrapes: list[dict], name: str, b: np.ndarray, n: int) -> dict | None:
    """A gauge per engine (replica) on the grid, when the server exposes it for more than one."""
    rows = [{_engine(k): v for k, v in s["samples"].items() if metric_name(k) == name} for s in scrapes]
    engines = sorted(set().union(*rows), key=lambda e: (len(e), e))
    if len(engines) < 2:
        return None
    out = {}
    for e in engines:
        col = np.full(n, np.nan)
        col[b] = [row.get(e, np.nan) for row in rows]
        out[e] = _r(col)
    return out


def _pick(names: list[str], present: set[str]) -> str | None:
    return next((n for n in names if n in present), None)


def _server_series(scrapes: list[dict], step: float, n: int) -> dict:
    """KV usage, queue depth, prefix hit rate, prefill / decode tok/s and prompt tokens by source per step
    (the last scrape in a step; null where a step has none)."""
    if not scrapes:
        return {"server": None}
    totals = [_totals(s["samples"]) for s in scrapes]
    present = set().union(*totals)
    b = np.minimum(np.array([int(s["t"] // step) for s in scrapes]), n - 1)
    t = np.array([s["t"] for s in scrapes])

    def gauge(metric: str) -> list | None:
        name = _pick(CPU_KV_USAGE if metric == "cpu_kv_usage" else GAUGES[metric], present)
        if name is None:
            return None
        col = np.full(n, np.nan)
        col[b] = [row.get(name, np.nan) for row in totals]
        return _r(col)

    def counter(metric: str) -> np.ndarray | None:
        name = _pick(COUNTERS[metric], present)
        return None if name is None else np.array([row.get(name, 0.0) for row in totals])

    def rate(values: np.ndarray | None) -> list | None:
        if values is None or len(values) < 2:
            return None
        col = np.full(n, np.nan)
        dt = np.diff(t)
        col[b[1:]] = np.where(dt > 0, np.diff(values) / np.where(dt > 0, dt, 1), np.nan)
        return _r(col, 1)

    def hit_rate(hits: np.ndarray | None, queries: np.ndarray | None) -> list | None:
        if hits is None or queries is None or len(hits) < 2:
            return None
        sh, sq = _centred_sum(np.diff(hits)), _centred_sum(np.diff(queries))
        col = np.full(n, np.nan)
        col[b[1:]] = np.where(sq > 0, sh / np.where(sq > 0, sq, 1), np.nan)
        return _r(col)

    hits = counter("prefix_hits")
    prompt, gen = counter("prompt_tokens"), counter("generation_tokens")
    prefill = None
    if prompt is not None:
        prefill = rate(prompt - hits if hits is not None else prompt)  # computed prompt tokens
    kv_name = _pick(GAUGES["kv_usage"], present)
    return {"server": {
        "kv_usage": gauge("kv_usage"), "cpu_kv_usage": gauge("cpu_kv_usage"),
        "kv_usage_by_engine": _by_engine(scrapes, kv_name, b, n) if kv_name else None,
        "cpu_kv_usage_by_engine": _by_engine(scrapes, cpu, b, n) if (cpu := _pick(CPU_KV_USAGE, present)) else None,
        "running": gauge("running"),
        "waiting": gauge("waiting"), "prefix_hit_rate": hit_rate(hits, counter("prefix_queries")),
        "cpu_prefix_hit_rate": hit_rate(counter("external_hits"), counter("external_queries")),
        "prefill_tok_s": prefill, "decode_tok_s": rate(gen),
        "prompt_tokens_by_source": _by_source(scrapes, b, n),
        "phase": _phases(scrapes, b, n),
    }}


def _centred_sum(values: np.ndarray) -> np.ndarray:
    """Sum over indices i - HIT_WINDOW .. i + HIT_WINDOW (truncated at the ends)."""
    cum = np.concatenate([[0.0], np.cumsum(values)])
    i = np.arange(len(values))
    hi, lo = np.minimum(i + HIT_WINDOW + 1, len(values)), np.maximum(i - HIT_WINDOW, 0)
    return cum[hi] - cum[lo]


def _by_source(scrapes: list[dict], b: np.ndarray, n: int) -> dict | None:
    """Cumulative prompt tokens per source since the first scrape."""
    rows = []
    for s in scrapes:
        row: dict[str, float] = {}
        for key, value in s["samples"].items():
            src = label_value(key, "source") if metric_name(key) == BY_SOURCE else None
            if src is not None:
                row[src] = row.get(src, 0.0) + value
        rows.append(row)
    sources = sorted(set().union(*rows))
    if not sources:
        return None
    out = {}
    for src in sources:
        col = np.full(n, np.nan)
        values = np.array([row.get(src, 0.0) for row in rows])
        col[b] = values - values[0]
        out[src] = _r(col, 0)
    return out


# the scrapes that bound the profiling window read as the phase they begin
_BOUNDARY = {"open": "profile", "close": "drain"}


def _phases(scrapes: list[dict], b: np.ndarray, n: int) -> list:
    """warmup / profile / drain per step: the phase its first scrape was taken in (null without a
    scrape)."""
    col: list = [None] * n
    for i, s in zip(b.tolist(), scrapes):
        if col[i] is None:
            col[i] = _BOUNDARY.get(s.get("phase"), s.get("phase"))
    return col


def histogram(values: np.ndarray, bins: int = 40) -> dict | None:
    """Log-spaced histogram of positive token counts with a log-normal fit (mu, sigma of ln x)."""
    binned = log_bins(values, bins)
    if binned is None:
        return None
    v, edges, counts = binned
    logs = np.log(v)
    return {"edges": _r(edges, 2), "counts": counts.tolist(), "n": int(v.size),
            "lognormal": {"mu": float(logs.mean()), "sigma": float(logs.std())}}


def build_histograms(columns: dict) -> dict:
    """ISL / OSL of the successful profiling requests (the ones the result point counts)."""
    keep = np.array([p == "profile" and e is None for p, e in zip(columns["phase"], columns["error"])], dtype=bool)
    isl = np.where(columns["isl"] >= 0, columns["isl"], columns["isl_planned"])[keep]
    osl = np.where(columns["osl"] >= 0, columns["osl"], columns["chunks"])[keep]
    return {"version": SERIES_VERSION, "isl": histogram(isl), "osl": histogram(osl)}
