"""The conversation flamegraph: one bar per request of a session tree in session order, split
into cached prefix, uncached input and output tokens; subagent groups drawn where they spawn
and join; the replayed gap before each request in its hover."""

from __future__ import annotations

import numpy as np

from agentx.report.figures import COLORS, empty, figure, values
from agentx.report.rundata import RunData


def flamegraph(run: RunData, tree: int) -> dict:
    c = run.columns
    idx = np.flatnonzero(c["tree"] == tree)
    if idx.size == 0:
        return empty(f"Conversation flamegraph: tree {tree}", "no request of this tree in the run")
    idx = idx[np.lexsort((c["start"][idx], c["node"][idx]))]  # session order
    session = c["session"][idx[0]]
    isl = np.where(c["isl"][idx] >= 0, c["isl"][idx], c["isl_planned"][idx])
    reported = c["cached"][idx] >= 0
    cached = np.where(reported, c["cached"][idx], c["theo_cached"][idx])
    cached = np.minimum(cached, isl)
    osl = np.where(c["osl"][idx] >= 0, c["osl"][idx], c["chunks"][idx])
    streams, kinds = c["stream"][idx], [c["stream_kind"][i] for i in idx]
    gaps = _gaps(c["start"][idx], c["end"][idx], streams)  # as replayed
    planned_gaps = _gaps(c["planned"][idx], c["end"][idx], streams)  # as the trace recorded them (delays end-to-start)
    rows = list(range(idx.size))
    labels = [f"{'' if s == 0 else '↳ '}{n} {k if s else ''}".strip() for n, s, k in zip(c["node"][idx].tolist(),
                                                                                     streams.tolist(), kinds)]
    ttft = np.round(np.nan_to_num(c["ttft"][idx], nan=-1) * 1000, 1)
    custom = [list(row) for row in zip(c["node"][idx].tolist(), isl.tolist(), cached.tolist(), (isl - cached).tolist(),
                                       osl.tolist(), ttft.tolist(), values(np.round(gaps, 2)),
                                       values(np.round(planned_gaps, 2)))]
    text = [("warmup " if c["phase"][i] == "warmup" else "") + (c["error"][i] or "") for i in idx]
    hover = ("turn %{customdata[0]}: ISL %{customdata[1]:,} = cached %{customdata[2]:,} + uncached "
             "%{customdata[3]:,}; OSL %{customdata[4]:,}<br>TTFT %{customdata[5]:,} ms; gap before: recorded "
             "%{customdata[7]} s, replayed %{customdata[6]} s %{text}<extra>%{fullData.name}</extra>")
    data = [{"type": "bar", "orientation": "h", "y": rows, "x": v.tolist(), "name": name, "customdata": custom,
             "text": text, "textposition": "none", "hovertemplate": hover, "marker": {"color": COLORS[key]}}
            for name, key, v in (("cached prefix", "cached", cached), ("uncached input", "uncached", isl - cached),
                                 ("output", "output", osl))]
    shapes, notes = _subagent_groups(streams, kinds, c["start"][idx], c["end"][idx], float((isl + osl).max()))
    source = "server-reported cached tokens" if reported.all() else "cached = theoretical where not reported"
    layout = {"barmode": "stack", "height": int(np.clip(16 * idx.size + 140, 300, 1400)), "shapes": shapes,
              "annotations": notes, "meta": {"tree": tree, "nodes": c["node"][idx].tolist()},
              "yaxis": {"autorange": "reversed", "tickvals": rows if idx.size <= 120 else None,
                        "ticktext": labels if idx.size <= 120 else None, "tickfont": {"size": 9}},
              "margin": {"l": 110}}
    return figure(data, f"Conversation flamegraph: {session} (tree {tree}, {idx.size} requests; {source})",
                  "tokens", "turn (session order)", **layout)


def _gaps(start: np.ndarray, end: np.ndarray, streams: np.ndarray) -> np.ndarray:
    """`start` minus the previous request's end in the same stream (NaN for a stream's first)."""
    gaps = np.full(start.size, np.nan)
    last: dict[int, float] = {}
    for i, s in enumerate(streams.tolist()):
        if s in last:
            gaps[i] = start[i] - last[s]
        last[s] = end[i]
    return gaps


def _subagent_groups(streams, kinds, start, end, width: float) -> tuple[list, list]:
    """A band behind each subagent stream's rows, labelled with the main-stream turns it spawned
    after and joined before (by time)."""
    shapes, notes = [], []
    main = np.flatnonzero(streams == 0)
    for s in sorted(set(streams.tolist()) - {0}):
        rows = np.flatnonzero(streams == s)
        before = main[start[main] <= start[rows].min()]
        after = main[start[main] >= end[rows].max()]
        spawn = f"after row {before.max()}" if before.size else "at start"
        join = f", joined before row {after.min()}" if after.size else ""
        shapes.append({"type": "rect", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": int(rows.min()) - 0.45,
                       "y1": int(rows.max()) + 0.45, "fillcolor": "rgba(100,100,200,0.08)",
                       "line": {"color": "rgba(100,100,200,0.5)", "width": 1}, "layer": "below"})
        notes.append({"xref": "paper", "yref": "y", "x": 1, "xanchor": "right", "y": int(rows.min()), "showarrow": False,
                      "text": f"{kinds[rows[0]]} {s}: spawned {spawn}{join}", "font": {"size": 9, "color": "#446"}})
    return shapes, notes
