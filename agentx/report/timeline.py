"""The request timeline: a Gantt of every request of a point, rows by conversation (a tree's
main stream, then its subagent and aux streams) or by lane.

Up to DETAIL_LIMIT requests, bars are WebGL line segments (one trace per colour, NaN between
bars) and a marker per bar carries the hover figures and the (tree, node) a click opens. Past
it (a browser needs over a second per 100k bars) the chart is binned here: a heatmap of requests
in flight per (group of rows, time bin), failed requests marked on top, a click opening the
first conversation of the clicked rows.
"""

from __future__ import annotations

import numpy as np

from agentx.report.figures import COLORS, empty, figure, typed
from agentx.report.rundata import RunData

MAX_LABELLED_ROWS = 80
DETAIL_LIMIT = 20_000
ROW_BINS, TIME_BINS = 400, 800
HOVER = ("tree %{customdata[0]} turn %{customdata[1]}<br>ISL %{customdata[2]:,} (cached %{customdata[3]:,})"
         "<br>OSL %{customdata[4]:,}<br>TTFT %{customdata[5]:,} ms<br>")


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


def _segments(x0: np.ndarray, x1: np.ndarray, y: np.ndarray) -> tuple[dict, dict]:
    """x and y of a lines trace drawing each [x0, x1] at height y, NaN (a gap) between segments."""
    xs, ys = np.full(3 * len(x0), np.nan), np.full(3 * len(x0), np.nan)
    xs[0::3], xs[1::3] = x0, x1
    ys[0::3], ys[1::3] = y, y
    return typed(xs), typed(ys)


def request_timeline(run: RunData, rows: str = "conversation", detail_limit: int = DETAIL_LIMIT) -> dict:
    """Gantt of every request; `rows` is "conversation" or "lane"; binned past `detail_limit`."""
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
    if len(start) > detail_limit:
        return _binned(run, y, labels, failed, title)
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
    custom = np.column_stack([c["tree"], c["node"], isl, c["cached"], osl, np.round(np.nan_to_num(ttft, nan=-1) * 1000)])
    middle = (start + end) / 2
    for name, mask in (("request", ~warm & ~failed), ("warmup request", warm & ~failed), ("failed request", failed)):
        if mask.any():
            data.append({"type": "scattergl", "mode": "markers", "x": typed(middle[mask]), "y": typed(y[mask]),
                         "customdata": typed(custom[mask]), "name": name, "hovertemplate": HOVER + name + "<extra></extra>",
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


def _binned(run: RunData, y: np.ndarray, labels: list[str], failed: np.ndarray, title: str) -> dict:
    """Requests in flight per (row group, time bin): a difference array over each request's bins."""
    c = run.columns
    per_bin = max(1, -(-len(labels) // ROW_BINS))
    rows = (y // per_bin).astype(np.int64)
    n_rows = int(rows.max()) + 1
    horizon = float(np.nanmax(c["end"])) or 1.0
    step = horizon / TIME_BINS
    first = np.clip((c["start"] // step).astype(np.int64), 0, TIME_BINS - 1)
    last = np.clip((c["end"] // step).astype(np.int64), 0, TIME_BINS - 1)
    diff = np.zeros((n_rows, TIME_BINS + 1))
    np.add.at(diff, (rows, first), 1)
    np.add.at(diff, (rows, last + 1), -1)
    z = np.cumsum(diff[:, :-1], axis=1)
    z[z == 0] = np.nan  # empty cells stay white
    tree_of_group = np.full(n_rows, -1)
    order = np.argsort(y, kind="stable")
    for r, t in zip(rows[order][::-1].tolist(), c["tree"][order][::-1].tolist()):
        tree_of_group[r] = t  # the first conversation of each row group
    data = [{"type": "heatmap", "z": typed(z), "x0": step / 2, "dx": step, "y0": 0, "dy": 1,
             "colorscale": "Viridis", "colorbar": {"title": {"text": "in flight"}, "thickness": 10},
             "customdata": typed(np.repeat(tree_of_group[:, None], TIME_BINS, axis=1)),
             "hovertemplate": f"rows %{{y}} x {per_bin}: %{{z:.0f}} requests in flight at %{{x:.0f}} s"
                              "<br>first tree %{customdata}<extra></extra>", "name": "requests in flight"}]
    if failed.any():
        data.append({"type": "scattergl", "mode": "markers", "x": typed(c["start"][failed]),
                     "y": typed(rows[failed].astype(float)), "name": "failed request",
                     "marker": {"color": COLORS["error"], "size": 5},
                     "customdata": typed(np.column_stack([c["tree"][failed], c["node"][failed]])),
                     "hovertemplate": "failed: tree %{customdata[0]} turn %{customdata[1]}<extra></extra>"})
    return figure(data, f"{title}: binned, {per_bin} rows x {step:.3g} s per cell", "run time s",
                  f"row groups of {per_bin} ({len(labels):,} rows)", yaxis={"autorange": "reversed"}, height=600,
                  meta={"binned": True})
