"""Dataset explorer charts from the stored conversations (SPEC §8 `conversations`: per stream its
turns as [node, input, cached, uncached, output] tokens as planned, cached = what an infinite
prefix cache would hold): ISL / OSL over every turn, turns, subagent groups and theoretical hit
per conversation, and a conversation's flamegraph."""

from __future__ import annotations

import numpy as np

from agentx.report.figures import COLORS, empty, figure


def _histogram(values: list[float], title: str, x_title: str, log: bool = True) -> dict:
    v = np.asarray([x for x in values if x > 0] if log else values, dtype=float)
    if v.size == 0:
        return empty(title, "no data")
    x = np.log10(v) if log else v
    counts, edges = np.histogram(x, bins=min(40, max(5, int(np.sqrt(v.size)))))
    centers = (edges[:-1] + edges[1:]) / 2
    text = [f"{10 ** a:,.0f}-{10 ** b:,.0f}" if log else f"{a:,.2f}-{b:,.2f}" for a, b in zip(edges[:-1], edges[1:])]
    axis = {}
    if log:
        ticks = list(range(int(np.floor(x.min())), int(np.ceil(x.max())) + 1))
        axis = {"tickvals": ticks, "ticktext": [f"{10 ** t:,}" for t in ticks]}
    data = [{"type": "bar", "x": centers.tolist(), "y": counts.tolist(), "text": text, "textposition": "none",
             "hovertemplate": "%{text}: %{y}<extra></extra>", "marker": {"color": COLORS["cached"]}, "name": title}]
    return figure(data, f"{title} (n {v.size:,}, median {np.median(v):,.3g})", x_title, "count", xaxis=axis,
                  bargap=0.05)


def _turns(conv: dict) -> list[list[int]]:
    return [t for s in conv["tree"]["streams"] for t in s["turns"]]


def dataset_charts(convs: list[dict]) -> dict[str, dict]:
    """The explorer's charts over a dataset's conversations (each with its `tree`)."""
    turns = [t for c in convs for t in _turns(c)]
    return {
        "isl": _histogram([t[1] for t in turns], "ISL per request", "tokens (log scale)"),
        "osl": _histogram([t[4] for t in turns], "OSL per request", "tokens (log scale)"),
        "turns": _histogram([c["turns"] for c in convs], "requests per conversation", "requests (log scale)"),
        "subagents": _histogram([c["subagent_groups"] for c in convs], "subagent groups per conversation", "groups",
                                log=False),
        "hit": _histogram([c["cached_tokens"] / c["input_tokens"] if c["input_tokens"] else 0.0 for c in convs],
                          "theoretical prefix hit per conversation", "cached / input tokens", log=False),
    }


def conversation_flamegraph(conv: dict) -> dict:
    """One bar per request in session order (node), cached / uncached / output; a band per subagent
    stream labelled with its group (streams launched together share a group)."""
    rows = sorted(((t, s) for s in conv["tree"]["streams"] for t in s["turns"]), key=lambda ts: ts[0][0])
    title = f"Conversation flamegraph: {conv['session']} ({len(rows)} requests, cached = theoretical)"
    if not rows:
        return empty(title, "no request")
    y = list(range(len(rows)))
    labels = [f"{'' if s['stream'] == 0 else '↳ '}{t[0]} {s['kind'] if s['stream'] else ''}".strip() for t, s in rows]
    custom = [[t[0], t[1], t[2], t[3], t[4]] for t, _ in rows]
    hover = ("turn %{customdata[0]}: ISL %{customdata[1]:,} = cached %{customdata[2]:,} + uncached %{customdata[3]:,};"
             " OSL %{customdata[4]:,}<extra>%{fullData.name}</extra>")
    data = [{"type": "bar", "orientation": "h", "y": y, "x": [t[i] for t, _ in rows], "name": name,
             "customdata": custom, "hovertemplate": hover, "marker": {"color": COLORS[key]}}
            for name, key, i in (("cached prefix", "cached", 2), ("uncached input", "uncached", 3),
                                 ("output", "output", 4))]
    shapes, notes = [], []
    for s in conv["tree"]["streams"]:
        mine = [i for i, (_, st) in enumerate(rows) if st is s]
        if s["stream"] == 0 or not mine:
            continue
        shapes.append({"type": "rect", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": min(mine) - 0.45,
                       "y1": max(mine) + 0.45, "fillcolor": "rgba(100,100,200,0.08)", "layer": "below",
                       "line": {"color": "rgba(100,100,200,0.5)", "width": 1}})
        group = f", group {s['group']}" if s.get("group") else ""
        notes.append({"xref": "paper", "yref": "y", "x": 1, "xanchor": "right", "y": min(mine), "showarrow": False,
                      "text": f"{s['kind']} stream {s['stream']}{group}", "font": {"size": 9, "color": "#446"}})
    many = len(rows) > 120
    return figure(data, title, "tokens", "turn (session order)", barmode="stack", shapes=shapes, annotations=notes,
                  height=int(np.clip(16 * len(rows) + 140, 300, 1400)), margin={"l": 110},
                  yaxis={"autorange": "reversed", "tickvals": None if many else y, "ticktext": None if many else labels,
                         "tickfont": {"size": 9}})
