"""Small helpers shared by the chart builders: figure and layout dicts, JSON-safe arrays."""

from __future__ import annotations

import base64
import math

import numpy as np

COLORS = {"cached": "#8fb8de", "uncached": "#f4a259", "output": "#5b8e7d", "error": "#d1495b",
          "prefill": "#f4a259", "decode": "#5b8e7d", "warmup": "rgba(120,120,120,0.15)"}


def values(a) -> list:
    """A numpy array or list as a JSON list (NaN and inf become null)."""
    out = np.asarray(a, dtype=float).tolist()
    return [v if math.isfinite(v) else None for v in out] if not np.isfinite(a).all() else out


def typed(a, dtype: str = "f4") -> dict:
    """A numpy array as plotly.js's base64 typed array (NaN stays NaN: a gap in a line). Parses
    much faster in the browser than a JSON list; 2-D arrays (customdata) keep their shape."""
    a = np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<"))
    out = {"dtype": dtype, "bdata": base64.b64encode(a.tobytes()).decode("ascii")}
    if a.ndim == 2:
        out["shape"] = f"{a.shape[0]},{a.shape[1]}"
    return out


def figure(data: list[dict], title: str, x_title: str = "", y_title: str = "", **layout) -> dict:
    base = {"title": {"text": title, "x": 0.01, "font": {"size": 14}}, "margin": {"l": 60, "r": 20, "t": 40, "b": 45},
            "xaxis": {"title": {"text": x_title}}, "yaxis": {"title": {"text": y_title}}, "height": 320,
            "legend": {"orientation": "h", "y": -0.25}, "hovermode": "closest"}
    for key, value in layout.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return {"data": data, "layout": base}


def empty(title: str, why: str) -> dict:
    """A figure that says why it has no data (the page shows the reason instead of a blank)."""
    return figure([], title, annotations=[{"text": why, "showarrow": False, "xref": "paper", "yref": "paper",
                                           "x": 0.5, "y": 0.5, "font": {"size": 13}}],
                  xaxis={"visible": False}, yaxis={"visible": False}, height=160)


def log_bars(edges: list[float], counts: list, name: str, number: str = ",.4g", unit: str = "") -> tuple[dict, dict]:
    """Counts over log-spaced bin `edges` as bars on log10(x) (each bin its range in the hover,
    `number` formatting its ends), and the x axis that ticks it at powers of ten in plain numbers."""
    keep = [i for i in range(len(edges) - 1) if edges[i] > 0]  # a digest stored before edges kept 5 digits
    if not keep:  # held 0 for sub-0.0001 bins: those are not drawn
        return {"type": "bar", "x": [], "y": [], "name": name}, {}
    edges, counts = [edges[i] for i in keep] + [edges[keep[-1] + 1]], [counts[i] for i in keep]
    logs = [math.log10(e) for e in edges]
    bars = {"type": "bar", "x": [(a + b) / 2 for a, b in zip(logs[:-1], logs[1:])], "y": counts,
            "width": [b - a for a, b in zip(logs[:-1], logs[1:])], "name": name, "textposition": "none",
            "text": [f"{a:{number}}-{b:{number}}{unit}" for a, b in zip(edges[:-1], edges[1:])],
            "hovertemplate": "%{text}: %{y}<extra></extra>", "marker": {"color": COLORS["cached"]}}
    ticks = list(range(math.floor(logs[0]), math.ceil(logs[-1]) + 1))
    return bars, {"tickvals": ticks, "ticktext": [f"{10 ** t:,}" for t in ticks]}
