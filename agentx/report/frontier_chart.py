"""A sweep folder's points: the frontier chart (SPEC §5) and the sweep table (also as CSV)."""

from __future__ import annotations

import csv
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from agentx.metrics.confidence import ANSWER_SPREAD_LIMIT
from agentx.report.figures import empty, figure
from agentx.report.toolkit import fmt_number
from agentx.results import frontier as fr
from agentx.results.points import deployment_labels, metric_columns

X_LABELS = {"p90_e2e_norm_intvty": "p90 E2E-normalized interactivity tok/s",
            "p50_e2e_norm_intvty": "p50 E2E-normalized interactivity tok/s",
            "p90_intvty": "p90 interactivity tok/s", "p50_intvty": "p50 interactivity tok/s", "p90_ttft": "p90 TTFT s",
            "p50_e2el": "p50 E2E latency s", "p90_e2el": "p90 E2E latency s"}
Y_LABELS = {"tput_per_gpu": "total tok/s per GPU", "output_tput_per_gpu": "output tok/s per GPU",
            "input_tput_per_gpu": "input tok/s per GPU", "tok_per_usd_hyperscaler": "total tokens per $ (hyperscaler)",
            "tok_per_usd_neocloud": "total tokens per $ (neocloud)",
            "tok_per_usd_rental_3y": "total tokens per $ (3-yr rental)", "tok_s_per_mw": "total tok/s per MW",
            "measured_tok_s_per_mw": "total tok/s per MW (measured power)",
            "joules_per_output_token": "J per output token (measured, lower is better)",
            "joules_per_total_token": "J per token (measured, lower is better)",
            "usd_per_m_tok_hyperscaler": "$ per M total tokens (hyperscaler)",
            "usd_per_m_tok_neocloud": "$ per M total tokens (neocloud)",
            "usd_per_m_tok_rental_3y": "$ per M total tokens (3-yr rental)"}
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
             "low_sample": r["validity"].get("low_sample"), "spread": r.get("spread"),
             "workload": fr.workload(r["identity"].get("dataset"), r["identity"].get("variant")),
             **deployment_labels(r["identity"]), **fr.with_derived(metric_columns(r))} for name, r in results]


# Past these a frontier's concurrency labels, and its legend, are in each point's hover only: laying
# them out is slow (1,000 points in 40 curves: ~0.3 s of a 1 s budget), and past 10 curves
# the legend would not tell the curves apart anyway.
LABELLED_POINTS = 100
LEGEND_CURVES = 10
# Okabe-Ito's colour-blind-safe palette (its yellow last: weak on white), a colour per hardware; a marker per engine
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#000000", "#f0e442")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon", "triangle-down", "pentagon")
DASHES = ("solid", "dot", "dash", "longdash", "dashdot")
# label positions tried in turn (pixel offsets of plotly's textposition from the marker), first free wins
LABEL_SPOTS = (("top center", 0, -14), ("bottom center", 0, 14), ("middle right", 1, 0), ("middle left", -1, 0),
               ("top right", 1, -12), ("bottom left", -1, 12), ("top left", -1, -12), ("bottom right", 1, 12))
PLOT_PX = (1100, 450)  # the plot area a label layout assumes (a 1,440 px page's frontier)
LEGEND_CHARS = 32  # a legend entry's length at most (the full configuration is in its hover)


@dataclass
class Palette:
    """Colours by hardware and markers by engine, over every name a page can show (all of the
    database, not the filtered rows): a filter never changes a curve's colour or marker."""
    hardware: list[str]
    engines: list[str]

    @classmethod
    def of(cls, rows: list[dict]) -> "Palette":
        return cls(sorted({str(r.get("hardware")) for r in rows}), sorted({str(r.get("engine")) for r in rows}))

    def color(self, hardware) -> str:
        names = self.hardware
        return PALETTE[names.index(str(hardware)) % len(PALETTE)] if str(hardware) in names else "#777777"

    def dash(self, hardware) -> str:  # past the palette's length, colours repeat with another dash
        names = self.hardware
        return DASHES[(names.index(str(hardware)) // len(PALETTE)) % len(DASHES)] if str(hardware) in names else "dot"

    def symbol(self, engine) -> str:
        names = self.engines
        return SYMBOLS[names.index(str(engine)) % len(SYMBOLS)] if str(engine) in names else "circle-open"

    def colors(self) -> dict:
        return {h: self.color(h) for h in self.hardware}


def point_label(r: dict) -> str:
    """A frontier label: concurrency, and parallelism where set (two configurations at c32 differ)."""
    return f"c{r['concurrency']}" + (f" {r['parallelism']}" if r.get("parallelism") else "")


def place_labels(points: list[tuple[float, float, str]], log: tuple[bool, bool] = (False, False),
                 ranges: tuple[list[float], list[float]] | None = None) -> list[str]:
    """A textposition per (x, y, label) so that no two labels' boxes overlap (greedy over
    LABEL_SPOTS, in PLOT_PX pixels of the axes' `ranges`, else of the points' range; the markers
    count as taken too); a label with no free spot keeps the first."""
    if not points:
        return []
    tx = [math.log10(p[0]) if log[0] and p[0] > 0 else p[0] for p in points]
    ty = [math.log10(p[1]) if log[1] and p[1] > 0 else p[1] for p in points]
    (x0, x1), (y0, y1) = ranges or ((min(tx), max(tx)), (min(ty), max(ty)))
    sx = PLOT_PX[0] / ((x1 - x0) or 1)
    sy = PLOT_PX[1] / ((y1 - y0) or 1)
    placed = [((px - x0) * sx - 6, (y1 - py) * sy - 6, (px - x0) * sx + 6, (y1 - py) * sy + 6) for px, py in zip(tx, ty)]
    out = []
    for (x, y, label), px, py in zip(points, tx, ty):
        cx, cy = (px - x0) * sx, (y1 - py) * sy
        w, h = 6.5 * len(label) + 4, 14
        for spot, dx, dy in LABEL_SPOTS:
            ox = cx + dx * (w / 2 + 8) - w / 2
            box = (ox, cy + dy - h / 2, ox + w, cy + dy + h / 2)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                break
        else:
            spot, box = LABEL_SPOTS[0][0], (cx - w / 2, cy - 14 - h / 2, cx + w / 2, cy - 14 + h / 2)
        placed.append(box)
        out.append(spot)
    return out


def point_info(rows: list[dict]) -> dict:
    """What a pinned tooltip shows of each point (by id): its configuration, labels, validity and
    the figures of every axis choice."""
    keys = (*X_LABELS, *Y_LABELS)
    return {str(r["id"]): {"label": deployment_label(r), "concurrency": r.get("concurrency"),
                           "source": "simulated" if r.get("simulated") else (r.get("source") or "measured"),
                           "valid": r.get("valid"), "reasons": r.get("reasons"), "low_sample": r.get("low_sample"),
                           **{k: r.get(k) for k in ("parallelism", "kv_offload", "spec_decoding", "precision",
                                                     "engine_version")},
                           "figures": {k: r.get(k) for k in keys}} for r in rows}


def wrapped(text: str, width: int = 60) -> str:
    """A hover line broken at ", " into lines of about `width` characters (plotly never wraps one)."""
    lines = [""]
    for part in text.split(", "):
        lines[-1:] = [lines[-1] + ", " + part] if lines[-1] and len(lines[-1]) + len(part) < width else \
            ([lines[-1] + ","] if lines[-1] else []) + [part]
    return "<br>".join(lines)


# a curve's labels in the order a name reads them: what a reader scans for first, the workload last
NAME_ORDER = ("hardware", "engine", "model", *(k for k in fr.CURVE if k not in ("hardware", "engine", "model", "workload")),
              "workload")


def curve_name(key: dict) -> str:
    """A curve's full name (its legend group, shown on hover): every label it has."""
    return ", ".join(str(key[k]) for k in NAME_ORDER if key.get(k))


def short_names(keys: list[dict]) -> list[str]:
    """A legend name per curve key (`frontier.CURVE`'s labels): only the labels that differ between
    the curves, hardware and engine first (the engine when none does), at most LEGEND_CHARS characters."""
    varying = [k for k in NAME_ORDER if len({key.get(k) for key in keys}) > 1] or ["engine"]
    names = [", ".join(str(key[k]) for k in varying if key.get(k)) or "?" for key in keys]
    names = [n if len(n) <= LEGEND_CHARS else re.sub(r" \([^()]*\)", "", n) for n in names]  # asides go first
    return [n if len(n) <= LEGEND_CHARS else n[:LEGEND_CHARS].rsplit(" ", 1)[0].rstrip(",") + "…" for n in names]


def axis_ranges(rows: list[dict], x: str, y: str) -> dict:
    """Each axis' range, linear and log (log10 units, plotly's), over `rows` (the valid points) with
    a margin, so an invalid outlier does not squeeze the curves."""
    out = {}
    for a, key in (("x", x), ("y", y)):
        v = [float(r[key]) for r in rows]
        lo, hi = min(v), max(v)
        pad = (hi - lo) * 0.06 or abs(hi) * 0.1 or 1.0
        pos = [q for q in v if q > 0]
        logs = [math.log10(min(pos)), math.log10(max(pos))] if pos else [0.0, 1.0]
        lpad = (logs[1] - logs[0]) * 0.06 or 0.1
        out[a] = {"linear": [lo - pad, hi + pad], "log": [logs[0] - lpad, logs[1] + lpad]}
    return out


def _invalid_trace(pts: list[dict], x: str, y: str, legend: str, group: str, color: str, symbol: str) -> dict:
    """A curve's NOT VALID points: hollow markers (its colour and marker) never joined to it, each
    with its reasons."""
    reasons = ["NOT VALID: " + "; ".join(r.get("reasons") or ["NOT VALID"]) for r in pts]
    return {"type": "scattergl" if len(pts) > 200 else "scatter", "mode": "markers", "x": [r[x] for r in pts],
            "y": [r[y] for r in pts], "text": [point_label(r) for r in pts], "customdata": [r["id"] for r in pts],
            "hovertext": [f"{wrapped(deployment_label(r))}<br>{wrapped(why)}" for r, why in zip(pts, reasons)],
            "name": f"{legend}: NOT VALID", "legendgroup": group,
            "marker": {"size": 9, "symbol": f"{symbol}-open", "line": {"width": 2}, "color": color},
            "hovertemplate": f"<b>%{{text}}</b> %{{hovertext}}<br>{X_LABELS[x]}: %{{x:,.3~g}}<br>"
                             f"{Y_LABELS[y]}: %{{y:,.4~g}}<br><i>click to pin</i><extra></extra>"}


def _low_trace(pts: list[dict], x: str, y: str, legend: str, group: str, symbol: str) -> dict:
    """A curve's low-confidence points (SPEC section 3, "Settled: confidence"): grey, never joined to
    it, each with its interval and the session trees it would need."""
    why = [f"low confidence, no answer: {r['confidence']['text']}" for r in pts]
    return {"type": "scattergl" if len(pts) > 200 else "scatter", "mode": "markers", "x": [r[x] for r in pts], "y": [r[y] for r in pts],
            "text": [point_label(r) for r in pts], "customdata": [r["id"] for r in pts],
            "hovertext": [f"{wrapped(deployment_label(r))}<br>{wrapped(w)}" for r, w in zip(pts, why)],
            "name": f"{legend}: low confidence", "legendgroup": group,
            "marker": {"size": 8, "symbol": symbol, "color": "#bbbbbb"},
            "hovertemplate": f"<b>%{{text}}</b> %{{hovertext}}<br>{X_LABELS[x]}: %{{x:,.3~g}}<br>"
                             f"{Y_LABELS[y]}: %{{y:,.4~g}}<br><i>click to pin</i><extra></extra>"}


def workloads_shown(rows: list[dict]) -> str:
    """", workload W" of points of one workload; of several, how many (a curve per workload each)."""
    names = {r.get("workload") for r in rows}
    if len(names) == 1:
        return f", workload {next(iter(names)) or 'unnamed'}"
    return f", {len(names)} workloads (a curve per workload)"


def frontier_chart(rows: list[dict], x: str, y: str, palette: Palette | None = None,
                   log: tuple[bool, bool] = (False, False), spread_limit: float = ANSWER_SPREAD_LIMIT) -> dict:
    """Every point of `rows` against (x, y), a curve per `frontier.CURVE` key (served model, workload) through
    the points on its frontier (SPEC §5's canonical-winner policy, agentx/results/frontier.py), an
    "optimal only" toggle; a colour per hardware and a marker per engine (`palette`), KV-offload
    points ringed, labels (concurrency, parallelism) placed apart. A trace's customdata holds the
    point ids (what a click pins). Low-confidence points (`spread_limit`) are grey, never joined.
    The title names the workload (or how many there are: a curve each)."""
    usable = [r for r in rows if r.get(x) is not None and r.get(y) is not None]
    title = f"{Y_LABELS[y]} vs {X_LABELS[x]}" + workloads_shown(usable)
    if not usable:
        return empty(title, "no point has these figures (set --gpus and --hardware for per-GPU, cost and power)")
    palette = palette or Palette.of(rows)
    data, off = [], []
    curves = fr.frontier(usable, x, y, spread_limit=spread_limit)
    valid = [r for r in usable if r.get("valid") is not False] or usable
    ranges = axis_ranges(valid, x, y)
    labelled = sum(len(c.points) for c in curves) <= LABELLED_POINTS
    by_curve = defaultdict(list)
    for r in usable:
        by_curve[tuple(r.get(k) for k in fr.CURVE)].append(r)
    fronts = [sorted(c.points, key=lambda r: r[x]) for c in curves]
    scale = tuple(ranges[a]["log" if on else "linear"] for a, on in zip("xy", log))
    spots = iter(place_labels([(r[x], r[y], point_label(r)) for f in fronts for r in f], log, scale)
                 if labelled else [])
    for curve, front, legend in zip(curves, fronts, short_names([c.key for c in curves])):
        on = {r["id"] for r in curve.points} | {r["id"] for r in curve.low_confidence}
        group = curve_name(curve.key)  # the full name, the legend's hover
        key = tuple(curve.key[k] for k in fr.CURVE)
        others = [r for r in by_curve[key] if r["id"] not in on and r.get("valid") is not False]
        color, symbol = palette.color(curve.key["hardware"]), palette.symbol(curve.key["engine"])
        for pts, is_front in ((front, True), (others, False)):
            if not pts:
                continue
            off += [] if is_front else [len(data)]
            data.append(_curve_trace(pts, x, y, is_front, labelled, spots, color, symbol,
                                     palette.dash(curve.key["hardware"])) |
                        {"name": legend if is_front else f"{legend}: off the frontier", "legendgroup": group,
                         "showlegend": is_front or not front})
        if curve.invalid:  # hollow, apart from the curve, the reasons on hover
            off.append(len(data))
            data.append(_invalid_trace(curve.invalid, x, y, legend, group, color, symbol))
        if curve.low_confidence:
            off.append(len(data))
            data.append(_low_trace(curve.low_confidence, x, y, legend, group, symbol))
    return _layout(data, off, curves, title, x, y, log, ranges, _outside(usable, valid, x, y, ranges))


def _curve_trace(pts: list[dict], x: str, y: str, is_front: bool, labelled: bool, spots, color: str, symbol: str,
                 dash: str) -> dict:
    """A curve's frontier points (joined, labelled) or its other valid points (markers, faint)."""
    return {"type": "scattergl" if len(pts) > 200 else "scatter",
            "mode": "lines+markers+text" if is_front and labelled else ("lines+markers" if is_front else "markers"),
            "x": [r[x] for r in pts], "y": [r[y] for r in pts],
            "text": [point_label(r) for r in pts], "customdata": [r["id"] for r in pts],
            "hovertext": [wrapped(deployment_label(r)) for r in pts],
            "textposition": [next(spots) for _ in pts] if is_front and labelled else "top center",
            "textfont": {"size": 10, "color": color}, "line": {"color": color, "dash": dash},
            "marker": {"size": 10 if is_front else 7, "color": color, "symbol": symbol,
                       "line": {"width": [3 if r.get("kv_offload") else 0 for r in pts], "color": "#888"},
                       **({} if is_front else {"opacity": 0.5})},
            "hovertemplate": f"<b>%{{text}}</b> %{{hovertext}}<br>{X_LABELS[x]}: %{{x:,.3~g}}<br>"
                             f"{Y_LABELS[y]}: %{{y:,.4~g}}<br><i>click to pin</i><extra></extra>"}


def _outside(usable: list[dict], valid: list[dict], x: str, y: str, ranges: dict) -> list[str]:
    """The NOT VALID points beyond the valid points' axes, as the page lists them."""
    (x0, x1), (y0, y1) = ranges["x"]["linear"], ranges["y"]["linear"]
    return [f"point {r['id']} {point_label(r)} ({deployment_label(r)}): {X_LABELS[x]} {fmt_number(r[x])}, "
            f"{Y_LABELS[y]} {fmt_number(r[y])}; " + "; ".join(r.get("reasons") or ["NOT VALID"])
            for r in usable if r.get("valid") is False and valid is not usable
            and not (x0 <= r[x] <= x1 and y0 <= r[y] <= y1)]


def _layout(data: list[dict], off: list[int], curves: list, title: str, x: str, y: str, log: tuple[bool, bool],
            ranges: dict, outside: list[str]) -> dict:
    toggle = [{"label": "all points", "method": "restyle", "args": [{"visible": True}, off]},
              {"label": "optimal only", "method": "restyle", "args": [{"visible": False}, off]}]
    menus = [{"type": "buttons", "buttons": toggle, "direction": "right", "x": 1, "xanchor": "right", "y": 1.02,
              "yanchor": "bottom", "font": {"size": 10}}] if off else []
    legend = {} if len(curves) <= LEGEND_CURVES else {"showlegend": False}
    if legend:
        title += f" ({len(curves)} deployments: hover a point for its own)"
    axis = lambda a, on: {"type": "log" if on else "linear", "range": ranges[a]["log" if on else "linear"]}  # noqa: E731
    return figure(data, title, X_LABELS[x], Y_LABELS[y], updatemenus=menus, height=520, margin={"t": 80, "r": 30},
                  meta={"x": x, "y": y, "ranges": ranges, "outside": outside}, xaxis=axis("x", log[0]),
                  yaxis=axis("y", log[1]), **legend)


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


TABLE_LABELS = {"run": "run", "concurrency": "concurrency", "deployment": "deployment", "ok": "requests ok",
                "total_tok_s": "total tok/s", "output_tok_s": "output tok/s", "total_tok_s_per_gpu": "total tok/s per GPU",
                "ttft_p50_ms": "TTFT p50 ms", "ttft_p90_ms": "TTFT p90 ms", "interactivity_p50": "interactivity p50 tok/s",
                "e2e_norm_interactivity_p90": "E2E-norm. interactivity p90 tok/s",
                "theoretical_hit_pct": "theoretical hit %", "server_hit_pct": "server hit %",
                "usd_per_m_output_tokens": "$ per M output tokens", "valid": "valid"}
assert set(TABLE_LABELS) == set(TABLE_COLUMNS)
TEXT_COLUMNS = {"run", "deployment", "valid", "point", "started", "configuration"}


def readable_rows(rows: list[dict]) -> list[dict]:
    """The sweep table as a page shows it: readable headers, numbers with thousands separators."""
    return [{TABLE_LABELS[k]: (v if k in TEXT_COLUMNS else fmt_number(v)) for k, v in r.items()}
            for r in rows]


def write_csv(rows: list[dict], path: Path) -> list[dict]:
    """`rows` as CSV at `path`; returns them."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, TABLE_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows
