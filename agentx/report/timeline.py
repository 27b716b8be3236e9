"""The request timeline: a Gantt of every request of a point, rows by conversation (a tree's
main stream, then its subagent and aux streams) or by lane.

Bars are WebGL line segments (one trace per colour, None between bars) so 100k requests stay
fluid; a marker per bar carries the hover figures and the (tree, node) a click opens.
"""

from __future__ import annotations

import numpy as np

from agentx.report.figures import COLORS, empty, figure
from agentx.report.rundata import RunData

MAX_LABELLED_ROWS = 80


def _rows_by_conversation(run: RunData) -> tuple[np.ndarray, list[str]]:
    c = run.columns
    first: dict[tuple[int, int], float] = {}
    for tree, stream, start in zip(c["tree"].tolist(), c["stream"].tolist(), c["start"].tolist()):
        key = (tree, stream)
        first[key] = min(first.get(key, start), start)
    tree_start = {}
    for (tree, _), t in first.items():
        tree_start[tree] = min(tree_start.get(tree, t), t)
    order = sorted(first, key=lambda k: (tree_start[k[0]], k[0], k[1] != 0, first[k]))
    index = {k: i for i, k in enumerate(order)}
    kind = {(t, s): (sess, k) for t, s, sess, k in zip(c["tree"].tolist(), c["stream"].tolist(), c["session"],
                                                        c["stream_kind"])}
    labels = [f"{kind[k][0]} #{k[0]}" if k[1] == 0 else f"  ↳ {kind[k][1]} {k[1]}" for k in order]
    rows = np.array([index[k] for k in zip(c["tree"].tolist(), c["stream"].tolist())], dtype=float)
    return rows, labels


def _segments(x0: np.ndarray, x1: np.ndarray, y: np.ndarray) -> tuple[list, list]:
    """x and y of a lines trace drawing each [x0, x1] at height y, None between segments."""
    n = len(x0)
    xs = np.empty(3 * n, dtype=object)
    ys = np.empty(3 * n, dtype=object)
    xs[0::3], xs[1::3], xs[2::3] = np.round(x0, 3), np.round(x1, 3), None
    ys[0::3], ys[1::3], ys[2::3] = y, y, None
    return xs.tolist(), ys.tolist()


def request_timeline(run: RunData, rows: str = "conversation") -> dict:
    """Gantt of every request; `rows` is "conversation" or "lane"."""
    c = run.columns
    title = f"Request timeline ({len(c['start']):,} requests, rows by {rows})"
    if len(c["start"]) == 0:
        return empty(title, "the run has no records")
    if rows == "lane":
        y = c["lane"].astype(float)
        labels = [f"lane {i}" for i in range(int(y.max()) + 1)]
    else:
        y, labels = _rows_by_conversation(run)
    start, end, ttft = c["start"], c["end"], c["ttft"]
    failed = np.array([e is not None for e in c["error"]], dtype=bool)
    warm = np.array([p == "warmup" for p in c["phase"]], dtype=bool)
    first = np.where(np.isfinite(ttft), start + np.nan_to_num(ttft), end)
    width = float(np.clip(560 / max(len(labels), 1), 1, 8))
    data = []
    for name, mask, x0, x1, color in (
            ("to first token (queue + prefill)", ~failed, start, first, COLORS["prefill"]),
            ("decode", ~failed, first, end, COLORS["decode"]),
            ("error", failed, start, np.maximum(end, start + 0.05), COLORS["error"])):
        if mask.any():
            xs, ys = _segments(x0[mask], x1[mask], y[mask])
            data.append({"type": "scattergl", "mode": "lines", "x": xs, "y": ys, "name": name, "hoverinfo": "skip",
                         "line": {"color": color, "width": width}})
    isl = np.where(c["isl"] >= 0, c["isl"], c["isl_planned"])
    osl = np.where(c["osl"] >= 0, c["osl"], c["chunks"])
    custom = np.column_stack([c["tree"], c["node"], isl, c["cached"], osl,
                              np.round(np.nan_to_num(ttft, nan=-1) * 1000, 1)]).tolist()
    hover = ("tree %{customdata[0]} turn %{customdata[1]}<br>ISL %{customdata[2]:,} (cached %{customdata[3]:,})"
             "<br>OSL %{customdata[4]:,}<br>TTFT %{customdata[5]:,} ms<br>%{text}<extra></extra>")
    text = [("warmup " if w else "") + (e or "ok") for w, e in zip(warm.tolist(), c["error"])]
    data.append({"type": "scattergl", "mode": "markers", "x": np.round((start + end) / 2, 3).tolist(),
                 "y": y.tolist(), "customdata": custom, "text": text, "hovertemplate": hover, "name": "request",
                 "marker": {"size": max(3.0, width), "color": "rgba(40,40,40,0.55)", "symbol": "line-ns-open"}})
    tl = run.columns["start"][~warm]
    shapes = ([{"type": "rect", "xref": "x", "yref": "paper", "x0": 0, "x1": float(tl.min()), "y0": 0, "y1": 1,
                "fillcolor": COLORS["warmup"], "line": {"width": 0}, "layer": "below"}] if warm.any() and tl.size else [])
    yaxis = {"autorange": "reversed", "zeroline": False}
    if len(labels) <= MAX_LABELLED_ROWS:
        yaxis.update(tickvals=list(range(len(labels))), ticktext=labels, tickfont={"size": 9})
    else:
        yaxis.update(title={"text": f"{len(labels):,} rows"}, showticklabels=False)
    height = int(np.clip(14 * len(labels) + 120, 320, 900))
    return figure(data, title, "run time s", "", yaxis=yaxis, height=height, shapes=shapes, dragmode="zoom",
                  margin={"l": 170 if len(labels) <= MAX_LABELLED_ROWS else 60})
