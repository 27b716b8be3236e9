"""Filters shared by the point list, the frontier and the API: bound parameters, never SQL text;
and the check that a row read back holds what its columns' types say."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import Float, Integer, Select, String, select

from agentx.results.schema import datasets, deployments, points, sweeps

LABEL_FILTERS = ("model", "hardware", "engine", "engine_version", "precision", "parallelism", "spec_decoding",
                 "kv_offload", "router")  # deployment labels a filter matches exactly
KINDS = ("measured", "simulated", "plan")  # a point's kind: a real engine, the sim in real time, `sim plan`


@dataclass
class Filters:
    model: str | None = None
    hardware: str | None = None
    engine: str | None = None
    dataset: str | None = None
    since: str | None = None  # ISO 8601 date or time (UTC), inclusive
    until: str | None = None  # exclusive
    engine_version: str | None = None
    precision: str | None = None
    parallelism: str | None = None
    spec_decoding: str | None = None
    kv_offload: str | None = None
    router: str | None = None
    kind: str | None = None  # one of KINDS
    point: int | None = None  # one point by id (a served page's pinned tooltip)


def filtered(q: Select, f: Filters) -> Select:
    """`q` (which joins points to deployments) restricted to the points the filters match."""
    for name in LABEL_FILTERS:
        if getattr(f, name) is not None:
            q = q.where(deployments.c[name] == getattr(f, name))
    if f.dataset is not None:
        q = q.where(points.c.dataset_id.in_(select(datasets.c.id).where(datasets.c.name == f.dataset)))
    if f.since is not None:
        q = q.where(points.c.started_at >= f.since)
    if f.until is not None:
        q = q.where(points.c.started_at < f.until)
    if f.point is not None:
        q = q.where(points.c.id == f.point)
    if f.kind is not None:
        planned = points.c.sweep_id.in_(select(sweeps.c.id).where(sweeps.c.name.like("plan %")))
        q = q.where({"measured": ~points.c.simulated, "simulated": points.c.simulated & ~planned.is_(True),
                     "plan": planned}[f.kind])
    return q


def _kinds() -> dict[str, type]:
    out = {}
    for table in (deployments, points):
        for c in table.c:
            kind = next((t for k, t in ((Float, float), (Integer, int), (String, str)) if isinstance(c.type, k)), None)
            if kind is not None:
                out.setdefault(c.name, kind)
    return out


_COLUMN_KINDS = _kinds()


def unsound(row: dict) -> str | None:
    """Why a stored row cannot be shown, or None: a column holding what its type forbids (SQLite
    keeps any value in any column: a row another program or a hand edit wrote). A page, the API
    and the CLI skip such a row and say so; they never fail the whole query for it."""
    for name, v in row.items():
        kind = _COLUMN_KINDS.get(name.removesuffix("__from").replace("usd_per_m_tok_", "tok_per_usd_"))
        if v is None or kind is None or kind is str and isinstance(v, str):
            continue
        if kind is int and isinstance(v, int) and not isinstance(v, bool):
            continue
        if kind is float and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            continue
        return f"{name}: {'not a finite number' if kind is float else f'not {kind.__name__}'} ({str(v)[:40]!r})"
    return None
