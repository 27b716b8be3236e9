"""The compare page's content (SPEC §9): two to four points' configurations side by side (the
settings that differ marked), every summary figure with its change from the first point, and their
over-time charts overlaid on one time axis (seconds from each point's profiling start)."""

from __future__ import annotations

from agentx.report.figures import empty, figure
from agentx.report.frontier_chart import PALETTE
from agentx.report.overtime import Grid
from agentx.report.point import COLUMNS, REQUEST_ROWS
from agentx.report.toolkit import fmt_number

SETTINGS = ("model", "hardware", "gpus", "engine", "engine_version", "precision", "parallelism", "spec_decoding",
            "kv_offload", "router", "engine_settings", "dataset", "concurrency")
# (label, section of request_metrics / result, key, unit); the single figures beside the distributions
FIGURES = (("total tok/s", "throughput", "total_tok_s", ""), ("output tok/s", "throughput", "output_tok_s", ""),
           ("total tok/s per GPU", "throughput", "total_tok_s_per_gpu", ""),
           ("output tok/s per GPU", "throughput", "output_tok_s_per_gpu", ""),
           ("input tok/s per GPU", "throughput", "input_tok_s_per_gpu", ""),
           ("$ per M output tokens", "throughput", "usd_per_m_output_tokens", ""),
           ("output tok/s per MW (cost model: kW all-in per GPU)", "throughput", "output_tok_s_per_mw", ""),
           ("theoretical prefix hit", "cache", "theoretical_hit_rate", "%"),
           ("measured prefix hit (usage)", "cache", "measured_hit_rate", "%"),
           ("server prefix hit", "server_metrics", "prefix_hit_rate", "%"),
           ("server CPU-tier hit", "server_metrics", "external_hit_rate", "%"),
           ("KV usage mean", "server_metrics", "kv_usage_mean", "%"), ("KV usage max", "server_metrics", "kv_usage_max", "%"),
           ("requests ok", "requests", "succeeded", ""), ("requests profiled", "requests", "profiled", ""),
           ("energy per output token (measured) J", "power", "joules_per_output_token", ""),
           ("energy per token (measured) J", "power", "joules_per_total_token", ""),
           ("total tok/s per MW (measured)", "power", "total_tok_s_per_mw", ""),
           ("GPU power average W", "power", "avg_w", ""), ("GPU power peak W", "power", "peak_w", ""))
# over-time charts: (id, title, series key, scale, y title)
OVERLAYS = (("throughput", "Decode throughput", "decode_tok_s", 1, "decode tok/s"),
            ("prefill", "Prefill throughput", "prefill_tok_s", 1, "prefill tok/s"),
            ("ttft", "TTFT p50 (requests ended in the step)", "ttft_p50_s", 1, "s"),
            ("interactivity", "Interactivity p50", "interactivity_p50_tok_s", 1, "tok/s"),
            ("kv", "GPU KV cache usage", "kv_usage", 100, "%"), ("running", "Requests running", "running", 1, "requests"),
            ("hit_rate", "Prefix-cache hit rate (GPU)", "prefix_hit_rate", 100, "%"),
            ("power", "GPU power (all GPUs, measured)", "power_w", 1, "W"))


def settings_rows(results: list[dict]) -> list[dict]:
    """A row per setting: its value per point and whether the points differ in it."""
    rows = []
    for key in SETTINGS:
        values = [(r.get("identity") or {}).get(key) for r in results]
        if all(v in (None, "") for v in values):
            continue
        rows.append({"label": key.replace("_", " "), "values": ["-" if v in (None, "") else str(v) for v in values],
                     "differs": len({str(v) for v in values}) > 1})
    valid = [(r.get("validity") or {}).get("valid") for r in results]
    rows.append({"label": "valid", "values": [{True: "yes", False: "no"}.get(v, "-") for v in valid],
                 "differs": len(set(valid)) > 1})
    return rows


def _section(result: dict, name: str) -> dict:
    return (result.get("request_metrics") or {}).get(name) or result.get(name) or {}


def _delta(value, first) -> str:
    if value is None or first is None or first == 0:
        return ""
    return f"{(value - first) / abs(first):+.1%}"


def figure_rows(results: list[dict]) -> list[dict]:
    """Every summary figure: its value per point and, from the second point on, its change from the first."""
    rows = []
    for label, key, scale, _, _ in REQUEST_ROWS:
        for q in COLUMNS:
            values = [(_section(r, key).get(q)) for r in results]
            name, unit = label.rsplit(" ", 1)  # "TTFT ms" -> "TTFT p50 ms"
            rows.append(_row(f"{name} {q} {unit}", [None if v is None else v * scale for v in values], ""))
    for label, section, key, unit in FIGURES:
        rows.append(_row(label, [_section(r, section).get(key) for r in results], unit))
    return [r for r in rows if any(v != "-" for v in r["values"])]


LOWER_BETTER = ("TTFT", "E2E latency", "ITL", "$ per", "energy per")
HIGHER_BETTER = ("tok/s", "interactivity", "hit")


def direction(label: str) -> int:
    """+1 where a higher figure is better, -1 where lower is, 0 where neither (counts, lengths, watts)."""
    if label.startswith(LOWER_BETTER):
        return -1
    return 1 if any(word in label for word in HIGHER_BETTER) else 0


def _verdict(value, first, sign: int) -> str:
    """The change's class: "better", "worse" or "" (no change, no direction, no value)."""
    if not sign or value is None or first is None or value == first:
        return ""
    return "better" if (value - first) * sign > 0 else "worse"


def _row(label: str, values: list, unit: str) -> dict:
    sign = direction(label)
    return {"label": label, "values": [fmt_number(v, unit) for v in values],
            "deltas": [""] + [_delta(v, values[0]) for v in values[1:]],
            "verdicts": [""] + [_verdict(v, values[0], sign) for v in values[1:]]}


def overlay_charts(names: list[str], series: list[dict]) -> dict[str, dict]:
    """Each over-time chart with a line per point, on seconds from each point's profiling start."""
    grids = [Grid(s) for s in series]
    out = {}
    for chart, title, key, scale, y_title in OVERLAYS:
        data = []
        for k, (name, g) in enumerate(zip(names, grids)):
            values = g.get(key) if key != "power_w" else (g.series.get("power") or {}).get("power_w")
            if values is not None and all(v is None for v in values):
                values = None
            if values is None:
                continue
            zero = g.window[0] if g.window else 0.0
            data.append({"type": "scatter", "mode": "lines", "name": name, "x": [t - zero for t in g.t],
                         "y": [None if v is None else v * scale for v in values], "connectgaps": True,
                         "line": {"color": PALETTE[k % len(PALETTE)], "width": 1.8, "dash": ("solid", "dash")[k % 2]},
                         "hovertemplate": f"{name}: %{{y:.3~g}} at %{{x:.0f}} s<extra></extra>"})
        out[chart] = (figure(data, title, "s from the profiling start", y_title, yaxis={"rangemode": "tozero"})
                      if data else empty(title, "no point has this series"))
    return out
