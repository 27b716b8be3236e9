"""A sweep folder's points: the frontier chart (SPEC §5) and the sweep table (also as CSV)."""

from __future__ import annotations

import csv
from pathlib import Path

from agentx.report.figures import empty, figure

# x options: (label, section, key, percentile, higher is better)
X_METRICS = [
    ("p90 E2E-normalized interactivity tok/s", "e2e_normalized_interactivity_tok_s", "p90", True),
    ("p50 E2E-normalized interactivity tok/s", "e2e_normalized_interactivity_tok_s", "p50", True),
    ("p90 interactivity tok/s", "interactivity_tok_s", "p90", True),
    ("p50 interactivity tok/s", "interactivity_tok_s", "p50", True),
    ("p90 TTFT s", "ttft_s", "p90", False),
    ("p50 TTFT s", "ttft_s", "p50", False),
]
Y_METRICS = {
    "total_tok_s_per_gpu": "total tok/s per GPU",
    "output_tok_s_per_gpu": "output tok/s per GPU",
    "output_tokens_per_usd": "output tokens per $",
    "output_tok_s_per_mw": "output tok/s per MW",
}
TABLE_COLUMNS = ["run", "concurrency", "deployment", "ok", "total_tok_s", "output_tok_s", "total_tok_s_per_gpu",
                 "ttft_p50_ms", "ttft_p90_ms", "interactivity_p50", "e2e_norm_interactivity_p90",
                 "theoretical_hit_pct", "server_hit_pct", "usd_per_m_output_tokens", "valid"]


def deployment(result: dict) -> str:
    """The legend of a curve: hardware + engine + settings."""
    i = result["identity"]
    parts = [f"{i.get('gpus') or '?'} x {i.get('hardware') or '?'}", i.get("engine") or "engine ?", i.get("model")]
    parts += [i.get(k) for k in ("precision", "parallelism", "spec_decoding", "router") if i.get(k)]
    if i.get("kv_offload"):
        parts.append(f"KV offload {i['kv_offload']}")
    return ", ".join(str(p) for p in parts if p)


def y_value(result: dict, key: str) -> float | None:
    tp = result["request_metrics"].get("throughput", {})
    if key == "output_tokens_per_usd":
        usd = tp.get("usd_per_m_output_tokens")
        return 1e6 / usd if usd else None
    return tp.get(key)


def x_value(result: dict, section: str, pct: str) -> float | None:
    return (result["request_metrics"].get(section) or {}).get(pct)


def pareto(points: list[tuple[float, float]], higher_x_better: bool) -> list[int]:
    """Indices of the points no other point beats on both x and y (y: higher is better), by x."""
    order = sorted(range(len(points)), key=lambda i: points[i][0], reverse=higher_x_better)
    best, keep = float("-inf"), []
    for i in order:  # from the best x down: keep a point when its y beats every better-x point's
        if points[i][1] > best:
            keep.append(i)
            best = points[i][1]
    return sorted(keep, key=lambda i: points[i][0])


def frontier_chart(results: list[tuple[str, dict]], y_key: str) -> dict:
    """Points of every run, a frontier curve per deployment, x chosen by a dropdown, an
    "optimal only" toggle; simulated points are diamonds, KV-offload points ringed."""
    title = f"{Y_METRICS[y_key]} vs interactivity"
    groups: dict[str, list[tuple[str, dict]]] = {}
    for name, r in results:
        if y_value(r, y_key) is not None:
            groups.setdefault(deployment(r), []).append((name, r))
    if not groups:
        return empty(title, "no point has this figure (set --gpus and --hardware for per-GPU, cost and power)")
    data, masks, dominated = [], [], []
    for xi, (x_label, section, pct, higher) in enumerate(X_METRICS):
        for dep, runs in groups.items():
            pts = [(x_value(r, section, pct), y_value(r, y_key), name, r) for name, r in runs]
            pts = [p for p in pts if p[0] is not None]
            front = set(pareto([(p[0], p[1]) for p in pts], higher))
            sim = runs[0][1]["identity"].get("engine") == "agentx-sim"
            offload = bool(runs[0][1]["identity"].get("kv_offload"))
            marker = {"size": 10, "symbol": "diamond" if sim else "circle",
                      "line": {"width": 3 if offload else 0, "color": "#222"}}
            legend = dep + (" (simulated)" if sim else "")
            base = {"type": "scatter", "legendgroup": dep, "visible": xi == 0,
                    "hovertemplate": "%{text}: x %{x:.3~g}, y %{y:,.4~g}<extra>%{fullData.name}</extra>"}
            front_pts = sorted((p for k, p in enumerate(pts) if k in front), key=lambda p: p[0])
            others = [p for k, p in enumerate(pts) if k not in front]
            for trace_pts, mode, is_front in ((front_pts, "lines+markers+text", True), (others, "markers+text", False)):
                data.append({**base, "mode": mode, "x": [p[0] for p in trace_pts], "y": [p[1] for p in trace_pts],
                             "text": [f"c{p[3]['identity'].get('concurrency')}" for p in trace_pts],
                             "customdata": [p[2] for p in trace_pts], "textposition": "top center",
                             "name": legend if is_front else f"{legend}: off the frontier", "marker": marker,
                             "showlegend": xi == 0, "line": {"shape": "linear"}})
                masks.append(xi)
                dominated.append(not is_front)
    x_buttons = [{"label": label, "method": "update",
                  "args": [{"visible": [m == xi for m in masks], "showlegend": [m == xi for m in masks]},
                           {"xaxis.title.text": label, "xaxis.autorange": True}]}
                 for xi, (label, *_rest) in enumerate(X_METRICS)]
    off = [i for i, d in enumerate(dominated) if d]
    toggle = [{"label": "all points", "method": "restyle", "args": [{"opacity": 1}, off]},
              {"label": "optimal only", "method": "restyle", "args": [{"opacity": 0}, off]}]
    menus = [{"buttons": x_buttons, "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom", "font": {"size": 10}},
             {"type": "buttons", "buttons": toggle, "direction": "right", "x": 1, "xanchor": "right", "y": 1.02,
              "yanchor": "bottom", "font": {"size": 10}}]
    fig = figure(data, title, X_METRICS[0][0], Y_METRICS[y_key], updatemenus=menus, height=440, margin={"t": 90})
    fig["layout"]["title"]["y"] = 0.97
    return fig


def table_rows(results: list[tuple[str, dict]]) -> list[dict]:
    rows = []
    for name, r in results:
        rm, sm = r["request_metrics"], r.get("server_metrics", {})  # an imported point may lack sections
        tp, cache = rm.get("throughput", {}), rm.get("cache", {})
        ttft = rm.get("ttft_s") or {}
        ms = lambda v: None if v is None else round(v * 1000, 1)  # noqa: E731
        pct = lambda v: None if v is None else round(v * 100, 1)  # noqa: E731
        rnd = lambda v, n=1: None if v is None else round(v, n)  # noqa: E731
        rows.append({
            "run": name, "concurrency": r["identity"].get("concurrency"), "deployment": deployment(r),
            "ok": r.get("requests", {}).get("succeeded"), "total_tok_s": rnd(tp.get("total_tok_s")),
            "output_tok_s": rnd(tp.get("output_tok_s")), "total_tok_s_per_gpu": rnd(tp.get("total_tok_s_per_gpu")),
            "ttft_p50_ms": ms(ttft.get("p50")), "ttft_p90_ms": ms(ttft.get("p90")),
            "interactivity_p50": rnd((rm.get("interactivity_tok_s") or {}).get("p50")),
            "e2e_norm_interactivity_p90": rnd((rm.get("e2e_normalized_interactivity_tok_s") or {}).get("p90")),
            "theoretical_hit_pct": pct(cache.get("theoretical_hit_rate")), "server_hit_pct": pct(sm.get("prefix_hit_rate")),
            "usd_per_m_output_tokens": rnd(tp.get("usd_per_m_output_tokens"), 2),
            "valid": {True: "yes", False: "no"}.get(r.get("validity", {}).get("valid"), "-"),
        })
    return rows


def write_csv(rows: list[dict], path: Path) -> list[dict]:
    """`rows` as CSV at `path`; returns them."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, TABLE_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows
