"""A sweep folder's points: the frontier chart (SPEC §5) and the sweep table (also as CSV)."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from agentx.report.figures import empty, figure
from agentx.results import frontier as fr
from agentx.results.points import deployment_labels, metric_columns

X_LABELS = {"p90_e2e_norm_intvty": "p90 E2E-normalized interactivity tok/s",
            "p50_e2e_norm_intvty": "p50 E2E-normalized interactivity tok/s",
            "p90_intvty": "p90 interactivity tok/s", "p50_intvty": "p50 interactivity tok/s", "p90_ttft": "p90 TTFT s"}
Y_LABELS = {"tput_per_gpu": "total tok/s per GPU", "output_tput_per_gpu": "output tok/s per GPU",
            "input_tput_per_gpu": "input tok/s per GPU", "tok_per_usd_hyperscaler": "total tokens per $ (hyperscaler)",
            "tok_per_usd_neocloud": "total tokens per $ (neocloud)",
            "tok_per_usd_rental_3y": "total tokens per $ (3-yr rental)", "tok_s_per_mw": "total tok/s per MW",
            "measured_tok_s_per_mw": "total tok/s per MW (measured power)",
            "joules_per_output_token": "J per output token (measured, lower is better)",
            "joules_per_total_token": "J per token (measured, lower is better)"}
assert set(X_LABELS) == set(fr.X_METRICS)
assert set(Y_LABELS) == set(fr.Y_METRICS)
TABLE_COLUMNS = ["run", "concurrency", "deployment", "ok", "total_tok_s", "output_tok_s", "total_tok_s_per_gpu",
                 "ttft_p50_ms", "ttft_p90_ms", "interactivity_p50", "e2e_norm_interactivity_p90",
                 "theoretical_hit_pct", "server_hit_pct", "usd_per_m_output_tokens", "valid"]


def deployment(result: dict) -> str:
    """The label of a point's deployment: hardware + engine + settings."""
    return deployment_label(result["identity"])


def deployment_label(i: dict) -> str:
    parts = [f"{i.get('gpus') or '?'} x {i.get('hardware') or '?'}", i.get("engine") or "engine ?", i.get("model")]
    parts += [i.get(k) for k in ("precision", "parallelism", "spec_decoding", "router", "engine_settings") if i.get(k)]
    if i.get("kv_offload"):
        parts.append(f"KV offload {i['kv_offload']}")
    return ", ".join(str(p) for p in parts if p)


def frontier_rows(results: list[tuple[str, dict]]) -> list[dict]:
    """Result points as the rows agentx/results/frontier.py takes (the database's columns, SPEC §8):
    id = the point's name, its deployment labels and metric columns."""
    return [{"id": name, "concurrency": r["identity"].get("concurrency"),
             "simulated": str(r["identity"].get("engine") or "").startswith("agentx-sim"),
             "valid": r["validity"]["valid"], "reasons": r["validity"]["reasons"],
             **deployment_labels(r["identity"]), **metric_columns(r)} for name, r in results]


# Past these a frontier's concurrency labels, and its legend, are in each point's hover only: laying
# them out is slow (1,000 points in 40 curves: ~0.3 s of a 1 s budget), and past 10 curves
# plotly's colours repeat, so such a legend would not tell the curves apart anyway.
LABELLED_POINTS = 100
LEGEND_CURVES = 10


def _invalid_trace(pts: list[dict], x: str, y: str, legend: str) -> dict:
    """A curve's NOT VALID points: hollow markers never joined to it, each with its reasons."""
    reasons = ["NOT VALID: " + "; ".join(r.get("reasons") or ["NOT VALID"]) for r in pts]
    return {"type": "scattergl" if len(pts) > 200 else "scatter", "mode": "markers", "x": [r[x] for r in pts], "y": [r[y] for r in pts],
            "text": [f"c{r['concurrency']}" for r in pts], "customdata": [r["id"] for r in pts],
            "hovertext": [f"{deployment_label(r)}; {why}" for r, why in zip(pts, reasons)],
            "name": f"{legend}: NOT VALID (never on the frontier)", "legendgroup": legend,
            "marker": {"size": 9, "symbol": ["diamond-open" if r["simulated"] else "circle-open" for r in pts],
                       "line": {"width": 2}, "color": "#c0392b"},
            "hovertemplate": "%{text} (%{hovertext}): x %{x:.3~g}, y %{y:,.4~g}<extra></extra>"}


def frontier_chart(rows: list[dict], x: str, y: str) -> dict:
    """Every point of `rows` against (x, y), a curve per (model, hardware, engine) through the
    points on its frontier (SPEC §5's canonical-winner policy, agentx/results/frontier.py), an
    "optimal only" toggle; simulated points are diamonds, KV-offload points ringed. A trace's
    customdata holds the point ids (what a click opens)."""
    title = f"{Y_LABELS[y]} vs {X_LABELS[x]}"
    usable = [r for r in rows if r.get(x) is not None and r.get(y) is not None]
    if not usable:
        return empty(title, "no point has these figures (set --gpus and --hardware for per-GPU, cost and power)")
    data, off = [], []
    curves = fr.frontier(usable, x, y)
    labelled = sum(len(c.points) for c in curves) <= LABELLED_POINTS
    by_curve = defaultdict(list)
    for r in usable:
        by_curve[tuple(r[k] for k in fr.CURVE)].append(r)
    for curve in curves:
        key = tuple(curve.key[k] for k in fr.CURVE)
        members = by_curve[key]
        on = {r["id"] for r in curve.points}
        legend = ", ".join(str(v) for v in (key[1], key[2], key[0]) if v)
        front = sorted(curve.points, key=lambda r: r[x])
        others = [r for r in members if r["id"] not in on and r.get("valid") is not False]
        for pts, is_front in ((front, True), (others, False)):
            if not pts:
                continue
            off += [] if is_front else [len(data)]
            data.append({"type": "scattergl" if len(pts) > 200 else "scatter",
                         "mode": "lines+markers+text" if is_front and labelled else
                         ("lines+markers" if is_front else "markers"),
                         "x": [r[x] for r in pts], "y": [r[y] for r in pts],
                         "text": [f"c{r['concurrency']}" for r in pts], "customdata": [r["id"] for r in pts],
                         "hovertext": [deployment_label(r) for r in pts], "textposition": "top center",
                         "name": legend if is_front else f"{legend}: off the frontier", "legendgroup": legend,
                         "showlegend": is_front or not front,
                         "marker": {"size": 10 if is_front else 7,
                                    "symbol": ["diamond" if r["simulated"] else "circle" for r in pts],
                                    "line": {"width": [3 if r.get("kv_offload") else 0 for r in pts], "color": "#222"},
                                    **({} if is_front else {"opacity": 0.5})},
                         "hovertemplate": "%{text} (%{hovertext}): x %{x:.3~g}, y %{y:,.4~g}<extra></extra>"})
        if curve.invalid:  # hollow, apart from the curve, the reasons on hover
            off.append(len(data))
            data.append(_invalid_trace(curve.invalid, x, y, legend))
    toggle = [{"label": "all points", "method": "restyle", "args": [{"visible": True}, off]},
              {"label": "optimal only", "method": "restyle", "args": [{"visible": False}, off]}]
    menus = [{"type": "buttons", "buttons": toggle, "direction": "right", "x": 1, "xanchor": "right", "y": 1.02,
              "yanchor": "bottom", "font": {"size": 10}}] if off else []
    legend = {} if len(curves) <= LEGEND_CURVES else {"showlegend": False}
    if legend:
        title += f" ({len(curves)} deployments: hover a point for its own)"
    return figure(data, title, X_LABELS[x], Y_LABELS[y], updatemenus=menus, height=480, margin={"t": 70},
                  meta={"x": x, "y": y}, **legend)


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
