"""The request timeline: a Gantt of every request of a point, rows by conversation (a tree's
main stream, then its subagent and aux streams) or by lane.

Up to DETAIL_LIMIT requests, bars are WebGL line segments (one trace per colour, NaN between
bars) and a marker per bar carries the hover figures and the (tree, node) a click opens. Past
it (a browser needs over a second per 100k bars) the chart is binned here: a heatmap of requests
in flight per (group of rows, time bin), failed requests marked on top, a click opening the
first conversation of the clicked rows (layout.meta.trees, by row group).
"""

from __future__ import annotations

import numpy as np

from agentx.report.figures import COLORS, empty, figure, typed

MAX_LABELLED_ROWS = 80
DETAIL_LIMIT = 20_000
ROW_BINS, TIME_BINS = 400, 800
TIMELINE_TYPES = frozenset({"scattergl", "heatmap"})  # the trace types it draws (a served page loads them first)
HOVER = ("tree %{customdata[0]} turn %{customdata[1]}<br>ISL %{customdata[2]:,} (cached %{customdata[3]:,})"
         "<br>OSL %{customdata[4]:,}<br>TTFT %{customdata[5]:,} ms<br>")


def _columns(blob: dict) -> dict:
    """The stored timeline's arrays as numpy (null times as NaN)."""
    f = lambda k: np.array(blob[k], dtype=float)  # noqa: E731
    c = {k: f(k) for k in ("start", "first_token", "end", "row", "tree", "node", "isl", "osl", "cached")}
    failed = np.array([e is not None for e in blob["errors"]], dtype=bool)  # per distinct error, then per request
    c["failed"] = failed[np.asarray(blob["error"], dtype=np.int64)]
    warmup = np.array([p == "warmup" for p in blob["phases"]], dtype=bool)
    c["warmup"] = warmup[np.asarray(blob["phase"], dtype=np.int64)]
    return c


def _segments(x0: np.ndarray, x1: np.ndarray, y: np.ndarray) -> tuple[dict, dict]:
    """x and y of a lines trace drawing each [x0, x1] at height y, NaN (a gap) between segments."""
    xs, ys = np.full(3 * len(x0), np.nan), np.full(3 * len(x0), np.nan)
    xs[0::3], xs[1::3] = x0, x1
    ys[0::3], ys[1::3] = y, y
    return typed(xs), typed(ys)


def request_timeline(blob: dict, detail_limit: int = DETAIL_LIMIT) -> dict:
    """Gantt of every request from a stored timeline (SPEC §8, rows by conversation or by lane);
    binned past `detail_limit` requests."""
    labels = blob["rows"]
    title = f"Request timeline ({blob['n']:,} requests, rows by {blob['by']})"
    if blob["n"] == 0:
        return empty(title, "the run has no records")
    c = _columns(blob)
    start, end, y, failed = c["start"], c["end"], c["row"], c["failed"]
    if blob["n"] > detail_limit:
        return _binned(c, len(labels), title)
    first = np.where(np.isfinite(c["first_token"]), c["first_token"], end)
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
    ttft = np.round(np.nan_to_num(c["first_token"] - start, nan=-0.001) * 1000)
    custom = np.column_stack([c["tree"], c["node"], c["isl"], c["cached"], c["osl"], ttft])
    middle = (start + end) / 2
    warm = c["warmup"]
    for name, mask in (("request", ~warm & ~failed), ("warmup request", warm & ~failed), ("failed request", failed)):
        if mask.any():
            data.append({"type": "scattergl", "mode": "markers", "x": typed(middle[mask]), "y": typed(y[mask]),
                         "customdata": typed(custom[mask]), "name": name, "hovertemplate": HOVER + name + "<extra></extra>",
                         "marker": {"size": max(3.0, width), "color": "rgba(40,40,40,0.55)", "symbol": "line-ns-open"}})
    profiled = start[~warm]
    shapes = ([{"type": "rect", "xref": "x", "yref": "paper", "x0": 0, "x1": float(np.nanmin(profiled)), "y0": 0,
                "y1": 1, "fillcolor": COLORS["warmup"], "line": {"width": 0}, "layer": "below"}]
              if warm.any() and profiled.size else [])
    yaxis = {"autorange": "reversed", "zeroline": False}
    if len(labels) <= MAX_LABELLED_ROWS:
        yaxis.update(tickvals=list(range(len(labels))), ticktext=labels, tickfont={"size": 9})
    else:
        yaxis.update(title={"text": f"{len(labels):,} rows"}, showticklabels=False)
    height = int(np.clip(14 * len(labels) + 120, 320, 900))
    return figure(data, title, "run time s", "", yaxis=yaxis, height=height, shapes=shapes, dragmode="zoom",
                  margin={"l": 170 if len(labels) <= MAX_LABELLED_ROWS else 60})


def _binned(c: dict, n_labels: int, title: str) -> dict:
    """Requests in flight per (row group, time bin): a difference array over each request's bins."""
    y, failed = c["row"], c["failed"]
    per_bin = max(1, -(-n_labels // ROW_BINS))
    rows = (y // per_bin).astype(np.int64)
    n_rows = int(rows.max()) + 1
    horizon = float(np.nanmax(c["end"])) or 1.0  # a request without an end has none: NaN bins dropped below
    step = horizon / TIME_BINS
    first = np.clip(np.nan_to_num(c["start"] // step), 0, TIME_BINS - 1).astype(np.int64)
    last = np.clip(np.nan_to_num(c["end"] // step, nan=-1), -1, TIME_BINS - 1).astype(np.int64)
    last = np.maximum(last, first)
    width = TIME_BINS + 1
    cells = n_rows * width
    diff = (np.bincount(rows * width + first, minlength=cells)
            - np.bincount(rows * width + last + 1, minlength=cells)).reshape(n_rows, width)
    z = np.cumsum(diff[:, :-1], axis=1, dtype=float)
    z[z == 0] = np.nan  # empty cells stay white
    tree_of_group = np.full(n_rows, -1)
    order = np.argsort(y, kind="stable")
    for r, t in zip(rows[order][::-1].tolist(), c["tree"][order][::-1].tolist()):
        tree_of_group[r] = t  # the first conversation of each row group
    data = [{"type": "heatmap", "z": typed(z), "x0": step / 2, "dx": step, "y0": 0, "dy": 1,
             "colorscale": "Viridis", "colorbar": {"title": {"text": "in flight"}, "thickness": 10},
             "hovertemplate": f"rows %{{y}} x {per_bin}: %{{z:.0f}} requests in flight at %{{x:.0f}} s<extra></extra>",
             "name": "requests in flight"}]
    if failed.any():
        data.append({"type": "scattergl", "mode": "markers", "x": typed(c["start"][failed]),
                     "y": typed(rows[failed].astype(float)), "name": "failed request",
                     "marker": {"color": COLORS["error"], "size": 5},
                     "customdata": typed(np.column_stack([c["tree"][failed], c["node"][failed]])),
                     "hovertemplate": "failed: tree %{customdata[0]} turn %{customdata[1]}<extra></extra>"})
    return figure(data, f"{title}: binned, {per_bin} rows x {step:.3g} s per cell", "run time s",
                  f"row groups of {per_bin} ({n_labels:,} rows)", yaxis={"autorange": "reversed"}, height=600,
                  meta={"binned": True, "trees": tree_of_group.tolist()})
