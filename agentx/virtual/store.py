"""`agentx sim plan`'s points into the results database (SPEC section 10): each configuration a
sweep, each point a simulated point of its configuration's deployment.

Like `agentx sweep`, a point already stored `ok` under its fingerprint (the plan's settings, the
configuration and the concurrency) is not stored again: a virtual point depends only on them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

from sqlalchemy import select
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
            point_fp = _sha([fingerprint, c])
            with engine.connect() as conn:
                found = conn.execute(select(points.c.id).where(
                    (points.c.fingerprint == point_fp) & (points.c.status == "ok"))).scalar()
            if found is None and not (folder / "result.json").is_file():
                say(f"{name}: c{c} not stored: {folder} is not on this machine (a Ray worker's disk?)")
                missing += 1
                continue
            ids.append(found if found is not None else
                       import_run(engine, folder, sweep_id=sweep_id, fingerprint=point_fp).point_id)
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
