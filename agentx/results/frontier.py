"""Pareto frontiers over stored points (SPEC §5, §8): per curve (`CURVE`: one served model on one
workload, its layouts and concurrencies along it) or over every deployment of a workload,
maximizing a y metric against an x metric, and a monotone interpolation on a curve. A curve never mixes workloads (dataset or scenario, and its max-context
variant): a 1k1k point and an agentic-trace point answer different questions.

A point survives a non-canonical view only if it is also on the canonical frontier of its curve
(tok/s per GPU against p90 E2E-normalized interactivity): InferenceX's policy for AgentX.

An invalid point (its run printed NOT VALID) is never on a curve, in a canonical winner set or in
"y at x": it is listed apart with its reasons. "y at x" answers within one deployment
configuration (interpolating only between points of the same deployment key) and names the
configuration and concurrency that give the best y at or better than x.

A low-confidence point (its TTFT interval over session trees wider than the bound,
`metrics/confidence.py`) is no answer either: listed apart with the session trees it would need.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import msgspec
import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Engine

from agentx.engine.presets import COST_BASES
from agentx.errors import AgentxError
from agentx.metrics.confidence import ANSWER_SPREAD_LIMIT, confidence
from agentx.metrics.validity import LOW_SAMPLE
from agentx.results.query import Filters, filtered, unsound
from agentx.results.schema import DEPLOYMENT_LABELS, datasets, deployments, points

# x metric -> +1 if higher is better, -1 if lower is better
X_METRICS = {"p50_intvty": 1, "p90_intvty": 1, "p50_e2e_norm_intvty": 1, "p90_e2e_norm_intvty": 1, "p90_ttft": -1,
             "p50_e2el": -1, "p90_e2el": -1}
# y metrics computed from a stored column: name -> the column ($ per million total tokens = 1e6 / tokens per $)
DERIVED_Y = {f"usd_per_m_tok_{basis}": f"tok_per_usd_{basis}" for basis in COST_BASES}
Y_METRICS = ("tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu", "tok_per_usd_hyperscaler",
             "tok_per_usd_neocloud", "tok_per_usd_rental_3y", "tok_s_per_mw", "measured_tok_s_per_mw",
             "joules_per_output_token", "joules_per_total_token", *DERIVED_Y)
Y_LOWER_BETTER = {"joules_per_output_token", "joules_per_total_token", *DERIVED_Y}  # every other y: higher is better
CANONICAL = ("p90_e2e_norm_intvty", "tput_per_gpu")
# a curve is one served model on one workload: what the engine computes (version, precision, speculative
# decoding, KV offload, non-default settings such as the KV policy) is fixed along it; how it is laid out
# (GPUs, parallelism, router) and the concurrency vary along it, as InferenceX's curves span TP / EP configs
CURVE = ("model", "hardware", "engine", "engine_version", "precision", "spec_decoding", "kv_offload",
         "engine_settings", "workload")
OVERALL = ("workload",)  # the frontier over every deployment still keeps to one workload


@dataclass
class Curve:
    key: dict  # CURVE's labels (all but workload None for the frontier over every deployment)
    points: list[dict] = field(default_factory=list)  # on the frontier, by x with better last
    invalid: list[dict] = field(default_factory=list)  # the curve's NOT VALID points (never on it), with `reasons`
    rows: list[dict] = field(default_factory=list)  # every valid, confident point of the curve (for "y at x")
    # valid points whose TTFT interval is too wide to answer (never on it), with `confidence` (text, need_trees)
    low_confidence: list[dict] = field(default_factory=list)


class _Width(msgspec.Struct):
    width_rel: float | None = None


class _Ttft(msgspec.Struct):
    p50: _Width | None = None
    p90: _Width | None = None


class _Spread(msgspec.Struct):
    trees: int | None = None
    ttft_s: _Ttft | None = None


class _Validity(msgspec.Struct):
    reasons: list[str] | None = None


class _Stored(msgspec.Struct):
    """What the frontier reads of a stored result: the validity reasons and the TTFT intervals."""

    validity: _Validity | None = None
    spread: _Spread | None = None

    def widths(self) -> dict:
        """The `spread` shape `metrics/confidence.py` reads."""
        ttft = (self.spread and self.spread.ttft_s) or _Ttft()
        return {"trees": self.spread and self.spread.trees,
                "ttft_s": {q: {"width_rel": getattr(getattr(ttft, q) or _Width(), "width_rel")} for q in ("p50", "p90")}}


def _stored(text: str | None) -> _Stored | None:
    """The stored result's parts, or None where they are not what a result holds."""
    try:
        try:
            return msgspec.json.decode(text or "{}", type=_Stored)
        except msgspec.DecodeError:  # a row stored before imports refused NaN / Infinity tokens
            return msgspec.convert(json.loads(text), _Stored)
    except (ValueError, TypeError, msgspec.ValidationError):
        return None


def workload(name: str | None, variant: str | None) -> str | None:
    """A point's workload in words: its dataset (trace folder or scenario) and max-context variant."""
    if not name:
        return None
    return f"{name} (max context {variant})" if variant else name


def check_metrics(x: str, y: str) -> None:
    if x not in X_METRICS:
        raise AgentxError(f"x: unknown metric {x!r} (want one of {', '.join(X_METRICS)})")
    if y not in Y_METRICS:
        raise AgentxError(f"y: unknown metric {y!r} (want one of {', '.join(Y_METRICS)})")


def load_points(engine: Engine, filters: Filters, x: str, y: str, skipped: list[dict] | None = None) -> list[dict]:
    """Successful points matching the filters: curve labels (the workload too), settings, the
    metrics of the (x, y) view and of the canonical one, and the TTFT intervals (`spread`). A
    corrupt row (`query.unsound`, or a stored result that is not a JSON object) is left out and
    added to `skipped` as {"id", "reason"}."""
    check_metrics(x, y)
    cols = [points.c.id, points.c.concurrency, points.c.started_at, points.c.valid, points.c.simulated,
            points.c.source, points.c.requests_ok, points.c.deployment_id, *[deployments.c[k] for k in DEPLOYMENT_LABELS],
            datasets.c.name.label("dataset"), datasets.c.variant, points.c.result,
            *[metric_column(name) for name in sorted({x, y, *CANONICAL})]]
    q = filtered(select(*cols).join(deployments, points.c.deployment_id == deployments.c.id)
                 .outerjoin(datasets, points.c.dataset_id == datasets.c.id), filters)
    out, bad = [], []
    with engine.connect() as conn:
        result = conn.execute(q.where(points.c.status == "ok").order_by(points.c.id))
        keys = list(result.keys())
        for row in result:
            r = dict(zip(keys, row))
            text = r.pop("result")
            reason = unsound(r)
            stored = None if reason else _stored(text)
            if stored is None:
                bad.append({"id": r["id"], "reason": reason or "result: not a JSON object"})
            else:
                out.append(with_derived(r) | {"result": stored})
    for r in out:
        stored = r.pop("result")
        r["spread"] = stored.widths()
        r["workload"] = workload(r.pop("dataset"), r.pop("variant"))
        if r["valid"] is False:
            r["reasons"] = (stored.validity and stored.validity.reasons) or ["NOT VALID"]
        r["low_sample"] = r["requests_ok"] is not None and r["requests_ok"] < LOW_SAMPLE  # SPEC §3: a mark, not invalid
    if skipped is not None:
        skipped.extend(sorted(bad, key=lambda b: b["id"]))
    return out


def metric_column(name: str):
    """The database column of a metric (a derived y: its stored column, computed in with_derived)."""
    return points.c[DERIVED_Y[name]].label(f"{name}__from") if name in DERIVED_Y else points.c[name]


def with_derived(row: dict) -> dict:
    """`row` with each derived y whose column it holds ($ per million tokens from tokens per $)."""
    for name, column in DERIVED_Y.items():
        if f"{name}__from" in row:
            v = row.pop(f"{name}__from")
        elif column in row:
            v = row[column]
        else:
            continue
        row[name] = 1e6 / v if v else None
    return row


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


def frontier(rows: list[dict], x: str, y: str, per_curve: bool = True,
             spread_limit: float = ANSWER_SPREAD_LIMIT) -> list[Curve]:
    """Curves of one workload each; `spread_limit` 0: every valid point answers, however wide."""
    check_metrics(x, y)
    groups: dict[tuple, list[dict]] = {}
    labels = CURVE if per_curve else OVERALL
    for r in rows:
        groups.setdefault(tuple(r.get(k) if k in labels else None for k in CURVE), []).append(r)
    curves = []
    for key, group in sorted(groups.items(), key=lambda kv: tuple(str(v) for v in kv[0])):
        valid, low = [], []
        for r in group:
            if r.get("valid") is not False:
                r["confidence"] = confidence(r.get("spread"), spread_limit)
                (low if r["confidence"]["low"] else valid).append(r)
        on = pareto(valid, x, y)
        if (x, y) != CANONICAL:
            winners = {r["id"] for r in pareto(valid, *CANONICAL)}
            on = [r for r in on if r["id"] in winners]
        invalid = [r for r in group if r.get("valid") is False]
        curves.append(Curve(dict(zip(CURVE, key)), on, invalid, valid, low))
    return curves


CONFIG_LABELS = ("gpus", "precision", "parallelism", "spec_decoding", "kv_offload", "router", "engine_settings")


def configuration(row: dict) -> str:
    """A deployment configuration in words (the labels of its key beyond the curve's)."""
    parts = [f"{row['gpus']} GPUs" if row.get("gpus") else None, *(row.get(k) for k in CONFIG_LABELS[1:])]
    return ", ".join(str(p) for p in parts if p) or "default configuration"


def at_x(curve: Curve, x: str, y: str, at: float) -> dict | None:
    """The best y at or better than x = `at` on a curve, within one deployment configuration:
    each deployment's own frontier gives a measured answer (its best point whose x meets `at`)
    and, where `at` lies between two of its points, an interpolated one (flagged); the best of
    all deployments wins, a measured answer over an equal interpolated one. None when no point
    of any deployment reaches `at`."""
    sign, ysign, best = X_METRICS[x], -1 if y in Y_LOWER_BETTER else 1, None  # best: J / $ per token the least
    by_deployment: dict = {}
    for r in curve.rows:
        by_deployment.setdefault(r.get("deployment_id"), []).append(r)
    for dep, group in by_deployment.items():
        front = sorted(pareto(group, x, y), key=lambda r: r[x])
        meeting = [r for r in front if sign * (r[x] - at) >= 0]
        candidates = []
        if meeting:
            r = max(meeting, key=lambda r: ysign * r[y])
            candidates.append((r[y], 1, {"interpolated": False, "point_ids": [r["id"]],
                                         "concurrency": [r["concurrency"]]}, r))
        value = _hermite([(r[x], r[y]) for r in front], at)
        if value is not None and not any(r[x] == at for r in front):
            lo = max((r for r in front if r[x] < at), key=lambda r: r[x])
            hi = min((r for r in front if r[x] > at), key=lambda r: r[x])
            candidates.append((value, 0, {"interpolated": True, "point_ids": [lo["id"], hi["id"]],
                                          "concurrency": [lo["concurrency"], hi["concurrency"]]}, lo))
        for value, measured, answer, row in candidates:
            if best is None or (ysign * value, measured) > (ysign * best[0], best[1]):
                best = (value, measured, answer, row)
    if best is None:
        return None
    value, _, answer, row = best
    return {"value": value, **answer, "deployment_id": row.get("deployment_id"), "configuration": configuration(row)}


def interpolate(curve: Curve, x: str, y: str, at: float) -> float | None:
    """y at x = `at` through a curve's frontier points (any deployments; `at_x` keeps to one)."""
    return _hermite([(r[x], r[y]) for r in curve.points], at)


def _hermite(points: list[tuple[float, float]], at: float) -> float | None:
    """y at x = `at` by monotone cubic (Fritsch-Carlson) interpolation through (x, y) points,
    clamped at zero; None outside their x range (no extrapolation)."""
    pts = sorted(points)
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
