"""A point's figures over time (SPEC §9), drawn from its `series` (SPEC §8,
agentx/results/series.py: the one definition of every value on the grid, shared by the served
pages, the HTML report and the API). Warmup and drain are shaded; a button shows the profiling
window alone."""

from __future__ import annotations

from agentx.report.figures import COLORS, empty, figure


class Grid:
    """The series' grid and its profiling window."""

    def __init__(self, series: dict):
        self.series = series
        self.server = series.get("server") or {}
        self.t = series["t"]
        a, b = series.get("profile_start_s"), series.get("profile_end_s")
        self.window = (a, b) if a is not None and b is not None else None

    def layout(self) -> dict:
        """Warmup (before the window) and drain (after it) shaded; a button hides them."""
        if self.window is None or not self.t:
            return {}
        a, b = self.window
        shade = {"type": "rect", "xref": "x", "yref": "paper", "y0": 0, "y1": 1, "line": {"width": 0},
                 "fillcolor": COLORS["warmup"], "layer": "below"}
        shapes = [{**shade, "x0": 0, "x1": a}, {**shade, "x0": b, "x1": max(self.t[-1], b)}]
        note = {"xref": "x", "yref": "paper", "y": 1.0, "showarrow": False, "font": {"size": 10, "color": "#666"}}
        buttons = [{"label": "with warmup", "method": "relayout", "args": [{"xaxis.autorange": True}]},
                   {"label": "profiling only", "method": "relayout", "args": [{"xaxis.range": [a, b]}]}]
        return {"shapes": shapes, "annotations": [{**note, "x": a / 2, "text": "warmup"}],
                "updatemenus": [{"type": "buttons", "direction": "right", "x": 1.0, "xanchor": "right", "y": 1.18,
                                 "showactive": True, "buttons": buttons, "font": {"size": 10}}]}

    def figure(self, data: list[dict], title: str, y_title: str, **layout) -> dict:
        step = self.series.get("step_s", 1)
        return figure(data, title, f"run time s (step {step:g} s)", y_title, **{**self.layout(), **layout})

    def line(self, y: list, name: str, scale: float = 1.0, **style) -> dict:
        ys = [None if v is None else v * scale for v in y]
        return {"type": "scatter", "mode": "lines+markers", "x": self.t, "y": ys, "name": name, "connectgaps": True,
                "marker": {"size": 3}, "line": {"width": 1.5, **style},
                "hovertemplate": f"{name}: %{{y:.3~g}} at %{{x:.0f}} s<extra></extra>"}

    def get(self, key: str) -> list | None:
        """A series of the grid (request side, else server side) with at least one value."""
        v = self.series.get(key, self.server.get(key))
        return v if isinstance(v, list) and any(x is not None for x in v) else None


def latency_over_time(g: Grid) -> dict:
    title = "TTFT and interactivity (requests ended in the step)"
    ttft50, ttft90, inter = g.get("ttft_p50_s"), g.get("ttft_p90_s"), g.get("interactivity_p50_tok_s")
    if ttft50 is None:
        return empty(title, "no successful request")
    data = [g.line(ttft50, "TTFT p50 s", color="#f4a259")]
    if ttft90 is not None:
        data.append(g.line(ttft90, "TTFT p90 s", color="#d1495b", dash="dot"))
    if inter is not None:
        data.append({**g.line(inter, "interactivity p50 tok/s", color="#00798c"), "yaxis": "y2"})
    return g.figure(data, title, "TTFT s", **dual_axis("tok/s"))


def dual_axis(right_title: str) -> dict:
    """The layout of a chart with a right axis: both from zero (a line never dips below the other's
    zero), room on the right for the right axis' ticks and title."""
    return {"yaxis": {"rangemode": "tozero"}, "margin": {"r": 70},
            "yaxis2": {"title": {"text": right_title, "standoff": 6}, "overlaying": "y", "side": "right",
                       "rangemode": "tozero", "automargin": True, "showgrid": False}}


def _rate(values: list) -> list:
    """A rate from counter differences, never below zero (a counter reset reads as a negative step)."""
    return [None if v is None else max(0.0, v) for v in values]


def queue_over_time(g: Grid) -> dict:
    lines = [(g.get(k), k) for k in ("running", "waiting")]
    if all(v is None for v, _ in lines):
        return empty("Requests running / waiting", "the server exposes no queue gauges")
    return g.figure([g.line(v, n, shape="hv") for v, n in lines if v is not None],
                    "Requests running / waiting (engine gauges)", "requests")


def kv_over_time(g: Grid) -> dict:
    """GPU KV usage (the engines' mean) and, where exposed, the CPU tier's, and each engine's
    (replica's) when the server has several."""
    gpu, cpu = g.get("kv_usage"), g.get("cpu_kv_usage")
    if gpu is None:
        return empty("KV cache usage", "the server exposes no KV usage gauge")
    engines = g.server.get("kv_usage_by_engine") or {}
    cpu_engines = g.server.get("cpu_kv_usage_by_engine") or {}
    mean = " (mean of the engines)" if engines else ""
    data = [g.line(gpu, f"GPU KV usage %{mean}", 100, shape="hv", color="#00798c", width=2.5)]
    data += [g.line(v, f"GPU {name} %", 100, shape="hv", dash="dot", width=1) for name, v in engines.items()]
    if cpu is not None:
        data.append(g.line(cpu, f"CPU tier KV usage %{mean}", 100, shape="hv", color="#d1495b", width=2.5))
        data += [g.line(v, f"CPU tier {name} %", 100, shape="hv", dash="dash", width=1)
                 for name, v in cpu_engines.items()]
    missing = [why for why, absent in (("no CPU-tier gauge exposed", cpu is None),
                                       ("one engine", not engines)) if absent]
    title = "KV cache usage" + (f" ({', '.join(missing)})" if missing else ", per engine")
    return g.figure(data, title, "%", yaxis={"range": [0, 105]})


def inflight_over_time(g: Grid) -> dict:
    """Prompt tokens of the requests in flight at each grid time, and the distinct ones among them."""
    title = "Prompt tokens in flight (client records)"
    total, unique = g.get("inflight_tokens"), g.get("inflight_unique_tokens")
    if total is None:
        return empty(title, "no request was in flight at a grid time")
    data = [g.line(total, "sum of ISL", shape="hv", color="#999", dash="dot")]
    if unique is not None:
        data.append(g.line(unique, "unique (union of prefixes per tree)", shape="hv", color="#00798c"))
    else:
        title += ": unique tokens need the run's dataset.json"
    return g.figure(data, title, "tokens")


def hit_rate_over_time(g: Grid) -> dict:
    data = [g.line(v, name, 100, **style) for key, name, style in (
        ("theoretical_hit_rate", "theoretical %", {"color": "#999", "dash": "dot"}),
        ("prefix_hit_rate", "GPU %", {}), ("cpu_prefix_hit_rate", "CPU tier %", {}))
        if (v := g.get(key)) is not None]
    if not data:
        return empty("Prefix-cache hit rate", "no request was sent")
    return g.figure(data, "Prefix-cache hit rate (Δhits / Δqueries, steps i-2 .. i+2)", "%", yaxis={"range": [0, 105]})


def prompt_sources_over_time(g: Grid) -> dict:
    title = "Prompt tokens by source (cumulative from the first scrape)"
    sources = g.server.get("prompt_tokens_by_source") or {}
    if not sources:
        return empty(title, "the server exposes no prompt-tokens-by-source counter")
    data = []
    for name, v in sources.items():  # a stack drops to zero at a gap: draw the scraped steps only
        keep = [i for i, x in enumerate(v) if x is not None]
        data.append({**g.line([v[i] for i in keep], name), "x": [g.t[i] for i in keep], "stackgroup": "src"})
    return g.figure(data, title, "tokens")


def throughput_over_time(g: Grid) -> dict:
    prefill, decode = g.get("prefill_tok_s"), g.get("decode_tok_s")
    if prefill is None and decode is None:
        return empty("Prefill and decode throughput", "the server exposes no token counters (or one scrape)")
    data = []
    if prefill is not None:
        data.append(g.line(_rate(prefill), "prefill tok/s (prompt tokens minus prefix hits)", color=COLORS["prefill"]))
    if decode is not None:
        data.append({**g.line(_rate(decode), "decode tok/s", color=COLORS["decode"]), "yaxis": "y2"})
    return g.figure(data, "Prefill and decode throughput (engine counters)", "prefill tok/s", **dual_axis("decode tok/s"))


def power_over_time(g: Grid) -> dict:
    """The GPUs' measured power (bench --power) beside the decode throughput it bought."""
    power = g.series.get("power") or {}
    watts = power.get("power_w")
    if not watts or all(v is None for v in watts):
        return empty("GPU power", "no power measured (bench --power dcgm:URL, nvidia-smi, amd-smi or rocm-smi)")
    data = [g.line(watts, "GPU power W (all GPUs)", color="#d1495b")]
    decode = g.get("decode_tok_s")
    if decode is not None:
        data.append({**g.line(_rate(decode), "decode tok/s", color=COLORS["decode"], dash="dot"), "yaxis": "y2"})
    return g.figure(data, f"GPU power ({power.get('source') or 'measured'}) and decode throughput", "W",
                    **dual_axis("decode tok/s"))


def lateness_over_time(g: Grid) -> dict:
    p50, p99 = g.get("lateness_p50_ms"), g.get("lateness_p99_ms")
    if p50 is None:
        return empty("Client dispatch lateness", "no request was sent")
    return g.figure([g.line(p50, "p50 ms"), g.line(p99, "p99 ms", dash="dot")],
                    "Client dispatch lateness (wall ms, requests started in the step)", "ms")


def over_time(series: dict) -> dict[str, dict]:
    """Every over-time chart of a point, by id, from its stored series."""
    g = Grid(series)
    return {"latency": latency_over_time(g), "queue": queue_over_time(g), "kv": kv_over_time(g),
            "inflight": inflight_over_time(g),
            "hit_rate": hit_rate_over_time(g), "sources": prompt_sources_over_time(g),
            "throughput": throughput_over_time(g), "power": power_over_time(g), "lateness": lateness_over_time(g)}
