"""`agentx sim plan`'s points into the results database (SPEC section 10): each configuration a
sweep, each point a simulated point of its configuration's deployment.

A point replaces the points stored under its fingerprint (the plan's settings, the configuration
and the concurrency): a virtual point depends only on them and the simulator's code, so the
latest run is the one to keep (its earlier run folders stay on disk).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

from sqlalchemy import delete, select
from sqlalchemy.engine import Engine

from agentx.results.db import now
from agentx.results.importer import import_run
from agentx.results.schema import points, sweeps
from agentx.virtual.capacity import Plan, config_name, plan_settings


def _sha(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def store_plan(engine: Engine, plan: Plan, out: Path, say: Callable[[str], None] = print) -> dict[str, list[int]]:
    """Store every point of the plan run into `out`; returns the point ids per configuration."""
    out, settings = Path(out), {**plan_settings(plan), "slo": plan.slo}
    stored: dict[str, list[int]] = {}
    for config in plan.configs:
        name = config_name(config)
        recipe = {"plan": settings, "configuration": config, "concurrency": list(plan.concurrency)}
        fingerprint = _sha({"plan": settings, "configuration": config})
        sweep_id = _sweep_row(engine, f"plan {out.name}: {name}", fingerprint, recipe, out / name)
        ids, missing = [], 0
        for c in plan.concurrency:
            folder = out / name / f"c{c}"
            if not (folder / "result.json").is_file():
                say(f"{name}: c{c} not stored: {folder} is not on this machine (a Ray worker's disk?)")
                missing += 1
                continue
            point_fp = _sha([fingerprint, c])
            new = import_run(engine, folder, sweep_id=sweep_id, fingerprint=point_fp).point_id
            with engine.begin() as conn:  # the latest run of a plan point replaces the earlier ones
                conn.execute(delete(points).where((points.c.fingerprint == point_fp) & (points.c.id != new)))
            ids.append(new)
        with engine.begin() as conn:
            conn.execute(sweeps.update().where(sweeps.c.id == sweep_id).values(
                status="partial" if missing else "finished", finished_at=now()))
        stored[name] = ids
    return stored


def _sweep_row(engine: Engine, name: str, fingerprint: str, recipe: dict, out: Path) -> int:
    with engine.begin() as conn:
        found = conn.execute(select(sweeps.c.id).where(sweeps.c.fingerprint == fingerprint)).scalar()
        if found is not None:
            return found
        return conn.execute(sweeps.insert().values(
            name=name, fingerprint=fingerprint, recipe=json.dumps(recipe), status="running",
            out_dir=str(out.resolve()), started_at=now())).inserted_primary_key[0]
