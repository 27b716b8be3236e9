"""Filters shared by the point list, the frontier and the API: bound parameters, never SQL text."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Select, select

from agentx.results.schema import datasets, deployments, points


@dataclass
class Filters:
    model: str | None = None
    hardware: str | None = None
    engine: str | None = None
    dataset: str | None = None
    since: str | None = None  # ISO 8601 date or time (UTC), inclusive
    until: str | None = None  # exclusive


def filtered(q: Select, f: Filters) -> Select:
    """`q` (which joins points to deployments) restricted to the points the filters match."""
    for name in ("model", "hardware", "engine"):
        if getattr(f, name) is not None:
            q = q.where(deployments.c[name] == getattr(f, name))
    if f.dataset is not None:
        q = q.where(points.c.dataset_id.in_(select(datasets.c.id).where(datasets.c.name == f.dataset)))
    if f.since is not None:
        q = q.where(points.c.started_at >= f.since)
    if f.until is not None:
        q = q.where(points.c.started_at < f.until)
    return q
