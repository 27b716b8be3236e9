"""Server state and request figures over time on a 1 s grid of run time (SPEC §9), the warmup
shaded and a button to show the profiling window alone.

Gauges (running / waiting, KV usage) hold the last scrape's value; counters are interpolated
linearly between scrapes and differenced on the grid (rates, hit rates as a ratio of sums over
a window); request figures are percentiles over a trailing window of the requests that ended
(TTFT, interactivity) or started (lateness, theoretical hit) in it.
"""

from __future__ import annotations

import math

import numpy as np

from agentx.metrics.server import BY_SOURCE, COUNTERS, GAUGES, label_value, metric_name
from agentx.report.figures import COLORS, empty, figure, values
from agentx.report.rundata import RunData

WINDOW_S = 10.0  # trailing window of the request figures and the hit rates
MAX_POINTS = 20_000  # the grid step grows past 1 s for runs longer than this many seconds
CPU_KV_USAGE = ["vllm:cpu_cache_usage_perc", "vllm:cpu_kv_cache_usage_perc"]


class Timeline:
    """The grid, the profiling window and the server series of one run."""

    def __init__(self, run: RunData):
        c = run.columns
        self.run = run
        self.profile = np.array([p == "profile" for p in c["phase"]], dtype=bool)
        self.ok = self.profile & np.array([e is None for e in c["error"]], dtype=bool)
        end = max(float(np.nanmax(c["end"])) if len(c["end"]) else 0.0,
                  max((row["t"] for row in run.series), default=0.0))
        self.step = max(1.0, math.ceil(end / MAX_POINTS))
        self.t = np.arange(0.0, end + self.step, self.step)
        starts, ends = c["start"][self.profile], c["end"][self.profile]
        self.window = (float(starts.min()), float(ends.max())) if starts.size else None
        self.scrape_t = np.array([row["t"] for row in run.series], dtype=float)

    def layout(self) -> dict:
        """Warmup (before the window) and drain (after it) shaded; a button hides them."""
        if self.window is None:
            return {}
        a, b = self.window
        shade = {"type": "rect", "xref": "x", "yref": "paper", "y0": 0, "y1": 1, "line": {"width": 0},
                 "fillcolor": COLORS["warmup"], "layer": "below"}
        shapes = [{**shade, "x0": 0, "x1": a}, {**shade, "x0": b, "x1": float(self.t[-1])}]
        note = {"xref": "x", "yref": "paper", "y": 1.0, "showarrow": False, "font": {"size": 10, "color": "#666"}}
        buttons = [{"label": "with warmup", "method": "relayout", "args": [{"xaxis.autorange": True}]},
                   {"label": "profiling only", "method": "relayout", "args": [{"xaxis.range": [a, b]}]}]
        return {"shapes": shapes, "annotations": [{**note, "x": a / 2, "text": "warmup"}],
                "updatemenus": [{"type": "buttons", "direction": "right", "x": 1.0, "xanchor": "right", "y": 1.18,
                                 "showactive": True, "buttons": buttons, "font": {"size": 10}}]}

    def figure(self, data: list[dict], title: str, y_title: str, **layout) -> dict:
        return figure(data, title, "run time s", y_title, **{**self.layout(), **layout})

    def line(self, y, name: str, **style) -> dict:
        return {"type": "scatter", "mode": "lines", "x": self.t.tolist(), "y": values(y), "name": name,
                "line": {"width": 1.5, **style}, "hovertemplate": f"{name}: %{{y:.3~g}} at %{{x:.0f}} s<extra></extra>"}

    # ---------------------------------------------------------------- server series

    def metric(self, names: list[str]) -> np.ndarray | None:
        """Per scrape, the sum over label sets of the first of `names` the server exposes."""
        for name in names:
            rows = [[v for k, v in row["samples"].items() if metric_name(k) == name] for row in self.run.series]
            if any(rows):
                return np.array([sum(r) if r else np.nan for r in rows], dtype=float)
        return None

    def gauge(self, names: list[str]) -> np.ndarray | None:
        """The last scrape's value at each grid point (NaN before the first)."""
        v = self.metric(names)
        if v is None:
            return None
        i = np.searchsorted(self.scrape_t, self.t, side="right") - 1
        return np.where((i >= 0) & (self.t <= self.scrape_t[-1] + 1.5 * self.step), v[np.maximum(i, 0)], np.nan)

    def counter(self, v: np.ndarray | None) -> np.ndarray | None:
        """A counter interpolated onto the grid (NaN outside the scraped span)."""
        if v is None or len(self.scrape_t) < 2:
            return None
        keep = np.isfinite(v)
        return np.interp(self.t, self.scrape_t[keep], v[keep], left=np.nan, right=np.nan)

    def rate(self, v: np.ndarray | None) -> np.ndarray | None:
        g = self.counter(v)
        return None if g is None else np.concatenate([[np.nan], np.diff(g) / self.step])

    def ratio(self, hits: np.ndarray | None, queries: np.ndarray | None) -> np.ndarray | None:
        """Δhits / Δqueries over the trailing window (a ratio of sums, not a mean of ratios)."""
        h, q = self.counter(hits), self.counter(queries)
        if h is None or q is None:
            return None
        lag = max(1, int(round(WINDOW_S / self.step)))
        dh, dq = h[lag:] - h[:-lag], q[lag:] - q[:-lag]
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(dq > 0, dh / dq, np.nan)
        return np.concatenate([np.full(lag, np.nan), r])

    # ---------------------------------------------------------------- request figures

    def trailing(self, at: np.ndarray, v: np.ndarray, q: float) -> np.ndarray:
        """Percentile q of `v` over the requests whose time `at` lies in (t - window, t]."""
        order = np.argsort(at)
        at, v = at[order], v[order]
        lo = np.searchsorted(at, self.t - WINDOW_S, side="right")
        hi = np.searchsorted(at, self.t, side="right")
        return np.array([np.percentile(v[a:b], q) if b > a else np.nan for a, b in zip(lo, hi)])

    def trailing_sum_ratio(self, at: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        order = np.argsort(at)
        at, cn, cd = at[order], np.concatenate([[0], np.cumsum(num[order])]), np.concatenate([[0], np.cumsum(den[order])])
        lo = np.searchsorted(at, self.t - WINDOW_S, side="right")
        hi = np.searchsorted(at, self.t, side="right")
        d = cd[hi] - cd[lo]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(d > 0, (cn[hi] - cn[lo]) / np.maximum(d, 1), np.nan)


def latency_over_time(tl: Timeline) -> dict:
    c = tl.run.columns
    ok = tl.ok & np.isfinite(c["ttft"])
    if not ok.any():
        return empty("TTFT and interactivity over time", "no successful request")
    end, ttft = c["end"][ok], c["ttft"][ok]
    osl = np.where(c["osl"] >= 0, c["osl"], c["chunks"])[ok]
    multi = osl >= 2
    itl = (end[multi] - c["start"][ok][multi] - ttft[multi]) / (osl[multi] - 1)
    data = [tl.line(tl.trailing(end, ttft, 50), "TTFT p50 s", color="#f4a259"),
            tl.line(tl.trailing(end, ttft, 90), "TTFT p90 s", color="#d1495b", dash="dot")]
    if multi.any():
        with np.errstate(divide="ignore"):  # a zero ITL (all tokens in one chunk) has no finite rate
            inter = 1.0 / tl.trailing(end[multi], itl, 50)
        data.append({**tl.line(inter, "interactivity p50 tok/s", color="#00798c"), "yaxis": "y2"})
    return tl.figure(data, f"TTFT and interactivity (requests ended in the last {WINDOW_S:g} s)", "TTFT s",
                     yaxis2={"title": {"text": "tok/s"}, "overlaying": "y", "side": "right", "rangemode": "tozero"})


def queue_over_time(tl: Timeline) -> dict:
    running, waiting = tl.gauge(GAUGES["running"]), tl.gauge(GAUGES["waiting"])
    if running is None and waiting is None:
        return empty("Requests running / waiting", "the server exposes no queue gauges")
    data = [tl.line(v, n, shape="hv") for v, n in ((running, "running"), (waiting, "waiting")) if v is not None]
    return tl.figure(data, "Requests running / waiting (engine gauges)", "requests")


def kv_over_time(tl: Timeline) -> dict:
    gpu, cpu = tl.gauge(GAUGES["kv_usage"]), tl.gauge(CPU_KV_USAGE)
    if gpu is None:
        return empty("KV cache usage", "the server exposes no KV usage gauge")
    data = [tl.line(gpu * 100, "GPU KV usage %", shape="hv")]
    if cpu is not None:
        data.append(tl.line(cpu * 100, "CPU tier KV usage %", shape="hv"))
    title = "KV cache usage" + ("" if cpu is not None else " (no CPU-tier gauge exposed)")
    return tl.figure(data, title, "%", yaxis={"range": [0, 105]})


def hit_rate_over_time(tl: Timeline) -> dict:
    c = tl.run.columns
    gpu = tl.ratio(tl.metric(COUNTERS["prefix_hits"]), tl.metric(COUNTERS["prefix_queries"]))
    cpu = tl.ratio(tl.metric(COUNTERS["external_hits"]), tl.metric(COUNTERS["external_queries"]))
    sent = tl.profile | np.array([p == "warmup" for p in c["phase"]], dtype=bool)
    theo = tl.trailing_sum_ratio(c["start"][sent], c["theo_cached"][sent].astype(float),
                                 c["isl_planned"][sent].astype(float))
    data = [tl.line(theo * 100, "theoretical %", color="#999", dash="dot")]
    for v, name in ((gpu, "GPU %"), (cpu, "CPU tier %")):
        if v is not None and np.isfinite(v).any():
            data.append(tl.line(v * 100, name))
    return tl.figure(data, f"Prefix-cache hit rate (Δhits / Δqueries over {WINDOW_S:g} s)", "%",
                     yaxis={"range": [0, 105]})


def prompt_sources_over_time(tl: Timeline) -> dict:
    keys = sorted({k for row in tl.run.series for k in row["samples"] if metric_name(k) == BY_SOURCE})
    title = "Prompt tokens by source (cumulative from the first scrape)"
    if not keys:
        return empty(title, "the server exposes no prompt-tokens-by-source counter")
    data = []
    for key in keys:
        v = tl.counter(np.array([row["samples"].get(key, np.nan) for row in tl.run.series], dtype=float))
        if v is not None:  # a stack drops to zero at a gap: draw the scraped span only
            keep = np.isfinite(v)
            data.append({**tl.line(v[keep] - v[keep].min(), label_value(key, "source")), "x": tl.t[keep].tolist(),
                         "stackgroup": "src"})
    return tl.figure(data, title, "tokens") if data else empty(title, "fewer than two scrapes")


def throughput_over_time(tl: Timeline) -> dict:
    # prefill computes the prompt tokens of source local_compute (the rest came cached)
    rows = [[v for k, v in row["samples"].items()
             if metric_name(k) == BY_SOURCE and label_value(k, "source") == "local_compute"] for row in tl.run.series]
    if any(rows):
        computed = np.array([sum(r) if r else np.nan for r in rows], dtype=float)
    else:  # no split by source: prompt tokens minus prefix hits
        p, h = tl.metric(COUNTERS["prompt_tokens"]), tl.metric(COUNTERS["prefix_hits"])
        computed = None if p is None else p - (h if h is not None else 0)
    prefill, decode = tl.rate(computed), tl.rate(tl.metric(COUNTERS["generation_tokens"]))
    if prefill is None and decode is None:
        return empty("Prefill and decode throughput", "the server exposes no token counters (or one scrape)")
    data = []
    if prefill is not None:
        data.append(tl.line(prefill, "prefill tok/s (computed prompt tokens)", color=COLORS["prefill"]))
    if decode is not None:
        data.append({**tl.line(decode, "decode tok/s", color=COLORS["decode"]), "yaxis": "y2"})
    return tl.figure(data, "Prefill and decode throughput (engine counters)", "prefill tok/s",
                     yaxis2={"title": {"text": "decode tok/s"}, "overlaying": "y", "side": "right", "rangemode": "tozero"})


def lateness_over_time(tl: Timeline) -> dict:
    c = tl.run.columns
    sent = np.isfinite(c["planned"]) & np.isfinite(c["start"])
    if not sent.any():
        return empty("Client dispatch lateness", "no request was sent")
    scale = tl.run.info.get("settings", {}).get("clock_scale") or 1.0
    late = (c["start"][sent] - c["planned"][sent]) * 1000 / scale
    data = [tl.line(tl.trailing(c["start"][sent], late, 50), "p50 ms"),
            tl.line(tl.trailing(c["start"][sent], late, 99), "p99 ms", dash="dot")]
    return tl.figure(data, f"Client dispatch lateness (wall ms, requests started in the last {WINDOW_S:g} s)", "ms")


def over_time(run: RunData) -> dict[str, dict]:
    """Every over-time chart of the point, by id."""
    tl = Timeline(run)
    return {"latency": latency_over_time(tl), "queue": queue_over_time(tl), "kv": kv_over_time(tl),
            "hit_rate": hit_rate_over_time(tl), "sources": prompt_sources_over_time(tl),
            "throughput": throughput_over_time(tl), "lateness": lateness_over_time(tl)}
