"""Dataset explorer charts (SPEC §9): from the dataset's digest (SPEC §8 `datasets.summary`, what
`agentx trace stats` reads: ISL, OSL, turn gaps, subagents, requests and theoretical hit per
session), else from its stored conversations (per stream its turns as [node, input, cached,
uncached, output] tokens as planned, cached = what an infinite prefix cache would hold); and a
conversation's flamegraph."""

from __future__ import annotations

import numpy as np

from agentx.report.figures import COLORS, empty, figure, log_bars


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


def _stored_histogram(h: dict | None, title: str, x_title: str, why: str) -> dict:
    """A digest's log-spaced histogram (`agentx.traces.digest.log_histogram`) as bars on a log axis."""
    if not h:
        return empty(title, why)
    bars, axis = log_bars(h["edges"], h["counts"], title)
    if not bars["x"]:
        return empty(title, f"{h['n']:,} values, all under 0.0001")
    zeros = f", {h['zeros']:,} at 0 not drawn" if h.get("zeros") else ""
    return figure([bars], f"{title} (n {h['n'] + h.get('zeros', 0):,}{zeros})", x_title, "count", bargap=0.05,
                  xaxis=axis)


def _counts(values: list[int], title: str, x_title: str) -> dict:
    """Sessions per integer value (a bar per value seen)."""
    if not values:
        return empty(title, "no session")
    seen, counts = np.unique(np.asarray(values, dtype=int), return_counts=True)
    data = [{"type": "bar", "x": seen.tolist(), "y": counts.tolist(), "width": 0.8,
             "marker": {"color": COLORS["cached"]}, "hovertemplate": "%{x}: %{y} sessions<extra></extra>",
             "name": title}]
    return figure(data, f"{title} (n {len(values):,})", x_title, "sessions", xaxis={"dtick": 1}, bargap=0.2)


def digest_charts(digest: dict) -> dict[str, dict]:
    """The explorer's charts over a dataset's digest (SPEC §8 `datasets.summary`: the replayed
    corpus, as `agentx trace stats` reads it)."""
    per = digest["sessions"]
    hit = [h / t if t else 0.0 for h, t in zip(per["hit_tokens"], per["isl_tokens"])]
    order = sorted(range(len(hit)), key=lambda i: -hit[i])
    hover = "%{x}: %{y:.1%} of %{customdata[0]:,} input tokens, %{customdata[1]} requests<extra></extra>"
    hits = figure([{"type": "bar", "x": [per["id"][i] for i in order], "y": [hit[i] for i in order],
                    "customdata": [[per["isl_tokens"][i], per["requests"][i]] for i in order],
                    "hovertemplate": hover, "marker": {"color": COLORS["cached"]}, "name": "theoretical hit"}],
                  "Theoretical prefix-cache hit per session (infinite cache)", "", "hit tokens / input tokens",
                  xaxis={"showticklabels": len(order) <= 40, "type": "category", "tickangle": -45},
                  yaxis={"range": [0, 1.02]}, margin={"b": 90})
    return {
        "isl": _stored_histogram(digest.get("isl"), "ISL per request", "tokens (log scale)", "no request"),
        "osl": _stored_histogram(digest.get("osl"), "OSL per request", "tokens (log scale)", "no request"),
        "gaps": _stored_histogram(digest.get("gap_s"), "Recorded turn gaps", "seconds (log scale)",
                                  "no stream has two requests"),
        "subagents": _counts(per["subagents"], "Subagent and background streams per session", "streams"),
        "requests": _histogram(per["requests"], "Requests per session", "requests (log scale)"),
        "hit": hits,
    }


def dataset_charts(convs: list[dict]) -> dict[str, dict]:
    """The explorer's charts over a dataset's stored conversations (each with its `tree`), for a
    dataset without a digest (imported from a run that wrote none)."""
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


def conversation_flamegraph(conv: dict, whole: dict | None = None) -> dict:
    """One bar per request in session order (node), cached / uncached / output; a band per subagent
    stream labelled with its group (streams launched together share a group). With `whole` (the
    digest's conversation_nodes: every request the trace has) the requests not replayed are drawn
    too, in grey (input and output as the trace has them)."""
    rows = sorted(((t, s) for s in conv["tree"]["streams"] for t in s["turns"]), key=lambda ts: ts[0][0])
    replayed = {t[0] for t, _ in rows}
    extra = []
    if whole is not None:
        kinds = whole["streams"]
        extra = [([node, isl, 0, isl, osl], {"stream": stream, "kind": kinds[stream] if stream < len(kinds) else "?"})
                 for node, (stream, isl, osl) in enumerate(whole["nodes"]) if node not in replayed]
        rows = sorted(rows + extra, key=lambda ts: ts[0][0])
    skipped = {t[0] for t, _ in extra}
    of = f"{len(rows) - len(skipped)} of {len(rows)} requests replayed, grey: not replayed" if whole else \
        f"{len(rows)} requests"
    title = f"Conversation flamegraph: {conv['session']} ({of}; cached = theoretical)"
    if not rows:
        return empty(title, "no request")
    y = list(range(len(rows)))
    labels = [f"{'' if s['stream'] == 0 else '↳ '}{t[0]} {s['kind'] if s['stream'] else ''}".strip()
              + (" (not replayed)" if t[0] in skipped else "") for t, s in rows]
    custom = [[t[0], t[1], t[2], t[3], t[4]] for t, _ in rows]
    hover = ("turn %{customdata[0]}: ISL %{customdata[1]:,} = cached %{customdata[2]:,} + uncached %{customdata[3]:,};"
             " OSL %{customdata[4]:,}<extra>%{fullData.name}</extra>")
    data = [{"type": "bar", "orientation": "h", "y": y, "x": [0 if t[0] in skipped else t[i] for t, _ in rows],
             "name": name, "customdata": custom, "hovertemplate": hover, "marker": {"color": COLORS[key]}}
            for name, key, i in (("cached prefix", "cached", 2), ("uncached input", "uncached", 3),
                                 ("output", "output", 4))]
    if skipped:
        data += [{"type": "bar", "orientation": "h", "y": y, "x": [t[i] if t[0] in skipped else 0 for t, _ in rows],
                  "name": name, "customdata": custom, "marker": {"color": color},
                  "hovertemplate": "turn %{customdata[0]} (not replayed): ISL %{customdata[1]:,}, OSL "
                                   "%{customdata[4]:,}<extra></extra>"}
                 for name, i, color in (("input, not replayed", 1, "#b9bec7"), ("output, not replayed", 4, "#8a909b"))]
    shapes, notes = [], []
    for s in conv["tree"]["streams"]:
        mine = [i for i, (t, st) in enumerate(rows) if st is s or (t[0] in skipped and st["stream"] == s["stream"])]
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
                  height=int(np.clip(16 * len(rows) + 140, 300, 1400)), margin={"l": 170 if skipped else 110},
                  yaxis={"autorange": "reversed", "tickvals": None if many else y, "ticktext": None if many else labels,
                         "tickfont": {"size": 9}})
