"""Pareto frontiers over stored points (SPEC §5, §8): per curve (model, hardware, engine) or over
every point, maximizing a y metric against an x metric, and a monotone interpolation on a curve.

A point survives a non-canonical view only if it is also on the canonical frontier of its curve
(tok/s per GPU against p90 E2E-normalized interactivity): InferenceX's policy for AgentX.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Engine

from agentx.errors import AgentxError
from agentx.results.query import Filters, filtered
from agentx.results.schema import DEPLOYMENT_LABELS, deployments, points

# x metric -> +1 if higher is better, -1 if lower is better
X_METRICS = {"p50_intvty": 1, "p90_intvty": 1, "p50_e2e_norm_intvty": 1, "p90_e2e_norm_intvty": 1, "p90_ttft": -1}
Y_METRICS = ("tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu", "tok_per_usd_hyperscaler",
             "tok_per_usd_neocloud", "tok_per_usd_rental_3y", "tok_s_per_mw", "measured_tok_s_per_mw",
             "joules_per_output_token", "joules_per_total_token")
Y_LOWER_BETTER = {"joules_per_output_token", "joules_per_total_token"}  # every other y: higher is better
CANONICAL = ("p90_e2e_norm_intvty", "tput_per_gpu")
CURVE = ("model", "hardware", "engine")


@dataclass
class Curve:
    key: dict  # model, hardware, engine (all None for the frontier over every point)
    points: list[dict] = field(default_factory=list)  # on the frontier, by x with better last


def check_metrics(x: str, y: str) -> None:
    if x not in X_METRICS:
        raise AgentxError(f"x: unknown metric {x!r} (want one of {', '.join(X_METRICS)})")
    if y not in Y_METRICS:
        raise AgentxError(f"y: unknown metric {y!r} (want one of {', '.join(Y_METRICS)})")


def load_points(engine: Engine, filters: Filters, x: str, y: str) -> list[dict]:
    """Successful points matching the filters: curve labels, settings and the metrics of the (x, y)
    view and of the canonical one."""
    check_metrics(x, y)
    cols = [points.c.id, points.c.concurrency, points.c.started_at, points.c.valid, points.c.simulated,
            points.c.source, *[deployments.c[k] for k in DEPLOYMENT_LABELS],
            *[points.c[name] for name in sorted({x, y, *CANONICAL})]]
    q = filtered(select(*cols).join(deployments, points.c.deployment_id == deployments.c.id), filters)
    with engine.connect() as conn:
        result = conn.execute(q.where(points.c.status == "ok").order_by(points.c.id))
        keys = list(result.keys())
        return [dict(zip(keys, row)) for row in result]


def pareto(rows: list[dict], x: str, y: str) -> list[dict]:
    """The non-dominated rows (y better, x better), ordered from the best x to the worst."""
    sign, ysign = X_METRICS[x], -1 if y in Y_LOWER_BETTER else 1
    usable = [r for r in rows if r.get(x) is not None and r.get(y) is not None]
    usable.sort(key=lambda r: (-sign * r[x], -ysign * r[y]))
    out, best = [], -np.inf
    for r in usable:
        if ysign * r[y] > best:
            out.append(r)
            best = ysign * r[y]
    return out


def frontier(rows: list[dict], x: str, y: str, per_curve: bool = True) -> list[Curve]:
    check_metrics(x, y)
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in CURVE) if per_curve else (None,) * len(CURVE), []).append(r)
    curves = []
    for key, group in sorted(groups.items(), key=lambda kv: tuple(str(v) for v in kv[0])):
        on = pareto(group, x, y)
        if (x, y) != CANONICAL:
            winners = {r["id"] for r in pareto(group, *CANONICAL)}
            on = [r for r in on if r["id"] in winners]
        curves.append(Curve(dict(zip(CURVE, key)), on))
    return curves


def interpolate(curve: Curve, x: str, y: str, at: float) -> float | None:
    """y at x = `at` on a frontier curve by monotone cubic (Fritsch-Carlson) interpolation, clamped
    at zero; None outside the curve's x range (no extrapolation)."""
    pts = sorted((r[x], r[y]) for r in curve.points)
    if not pts:
        return None
    xs, ys = np.array([p[0] for p in pts], float), np.array([p[1] for p in pts], float)
    if at < xs[0] or at > xs[-1]:
        return None
    if len(xs) == 1:
        return float(ys[0])
    h, d = np.diff(xs), np.diff(ys) / np.diff(xs)
    m = np.empty(len(xs))
    m[0], m[-1] = d[0], d[-1]
    for k in range(1, len(xs) - 1):
        if d[k - 1] * d[k] <= 0:
            m[k] = 0.0
        else:  # weighted harmonic mean keeps the curve monotone between knots
            w1, w2 = 2 * h[k] + h[k - 1], h[k] + 2 * h[k - 1]
            m[k] = (w1 + w2) / (w1 / d[k - 1] + w2 / d[k])
    k = min(int(np.searchsorted(xs, at, side="right")) - 1, len(xs) - 2)
    t = (at - xs[k]) / h[k]
    h00, h10, h01, h11 = 2 * t**3 - 3 * t**2 + 1, t**3 - 2 * t**2 + t, -2 * t**3 + 3 * t**2, t**3 - t**2
    value = h00 * ys[k] + h10 * h[k] * m[k] + h01 * ys[k + 1] + h11 * h[k] * m[k + 1]
    return max(0.0, float(value))
