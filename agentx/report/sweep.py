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


def frontier_chart(results: list[tuple[str, dict]], y_key: str, x_index: int = 0) -> dict:
    """Points of every run against X_METRICS[x_index], a frontier curve per deployment, an
    "optimal only" toggle; simulated points are diamonds, KV-offload points ringed. A trace's
    customdata holds the point names (what a click opens)."""
    x_label, section, pct, higher = X_METRICS[x_index]
    title = f"{Y_METRICS[y_key]} vs {x_label}"
    groups: dict[str, list[tuple[str, dict]]] = {}
    for name, r in results:
        if y_value(r, y_key) is not None and x_value(r, section, pct) is not None:
            groups.setdefault(deployment(r), []).append((name, r))
    if not groups:
        return empty(title, "no point has these figures (set --gpus and --hardware for per-GPU, cost and power)")
    data, off = [], []
    for dep, runs in groups.items():
        pts = [(x_value(r, section, pct), y_value(r, y_key), name, r) for name, r in runs]
        front = set(pareto([(p[0], p[1]) for p in pts], higher))
        identity = runs[0][1]["identity"]
        sim = identity.get("engine") == "agentx-sim"
        marker = {"size": 10, "symbol": "diamond" if sim else "circle",
                  "line": {"width": 3 if identity.get("kv_offload") else 0, "color": "#222"}}
        legend = dep + (" (simulated)" if sim else "")
        front_pts = sorted((p for k, p in enumerate(pts) if k in front), key=lambda p: p[0])
        others = [p for k, p in enumerate(pts) if k not in front]
        for trace_pts, is_front in ((front_pts, True), (others, False)):
            if not trace_pts:
                continue
            off += [] if is_front else [len(data)]
            data.append({"type": "scatter", "mode": "lines+markers+text" if is_front else "markers",
                         "x": [p[0] for p in trace_pts], "y": [p[1] for p in trace_pts],
                         "text": [f"c{p[3]['identity'].get('concurrency')}" for p in trace_pts],
                         "customdata": [p[2] for p in trace_pts], "textposition": "top center",
                         "name": legend if is_front else f"{legend}: off the frontier", "legendgroup": dep,
                         "showlegend": is_front, "marker": marker,
                         "hovertemplate": "%{text}: x %{x:.3~g}, y %{y:,.4~g}<extra>%{fullData.name}</extra>"})
    toggle = [{"label": "all points", "method": "restyle", "args": [{"visible": True}, off]},
              {"label": "optimal only", "method": "restyle", "args": [{"visible": False}, off]}]
    menus = [{"type": "buttons", "buttons": toggle, "direction": "right", "x": 1, "xanchor": "right", "y": 1.02,
              "yanchor": "bottom", "font": {"size": 10}}] if off else []
    return figure(data, title, x_label, Y_METRICS[y_key], updatemenus=menus, height=440, margin={"t": 70})


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
            "theoretical_hit_pct": pct(cache.get("theoretical_hit_rate")),
            "server_hit_pct": pct(sm.get("prefix_hit_rate")),
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
