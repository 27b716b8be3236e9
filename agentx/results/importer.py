"""`agentx db import`: store run folders (one run, or a sweep's folder of runs) as points."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from sqlalchemy import select
from sqlalchemy.engine import Engine

from agentx.errors import AgentxError
from agentx.results.runfolder import RunFolder, find_run_folders, incomplete, read_run
from agentx.results.schema import datasets, points
from agentx.power.energy import power_over_time
from agentx.results.series import build_histograms, build_series
from agentx.results.points import (add_conversations, check_conversations, dataset_id, deployment_labels, insert_point,
                                   point_row, strict_json)
from agentx.results.timeline import build_conversations, build_timelines
from agentx.traces.digest import read_digest


@dataclass
class Refused:
    path: Path
    reason: str


@dataclass
class Skipped:
    path: Path
    reason: str  # why the run folder is incomplete (runfolder.incomplete)


@dataclass
class Imported:
    path: Path
    point_id: int
    new: bool  # False: the run was stored already (same run id)
    differs: str | None = None  # stored already, but this folder's result point is not the stored one: how


def chart_blobs(run: RunFolder) -> dict[str, dict]:
    """The chart data stored with a point (SPEC §8): series, histograms and timelines by kind."""
    identity, settings = run.result["identity"], run.info.get("settings", {})
    clock_scale = identity.get("clock_scale") or settings.get("clock_scale") or 1.0
    prefix = (read_digest(run.path) or {}).get("prefix")  # (read again: chart_blobs is also called alone)
    series = build_series(run.columns, run.series, clock_scale, prefix, settings.get("token_scale") or 1,
                          power_over_time(run.power or []), (run.result.get("power") or {}).get("source"))
    return {"series": series,
            "histograms": build_histograms(run.columns), **build_timelines(run.columns)}


def import_run(engine: Engine, path: Path, sweep_id: int | None = None, fingerprint: str | None = None) -> Imported:
    """Store one run folder, validated whole first (runschema), in one transaction."""
    run = read_run(path)
    digest = read_digest(path)  # checked too before anything is stored, or found stored
    run_id = run.run_id
    with engine.connect() as conn:
        found = conn.execute(select(points.c.id, points.c.result).where(points.c.run_id == run_id)).first()
    if found is not None:
        return Imported(path, found.id, False, differs(found.result, run.result))
    identity = run.result["identity"]
    blobs = chart_blobs(run)
    convs = build_conversations(run.columns)
    check_conversations(path, convs)
    row = point_row(run.result, run_id, "agentx", run_dir=str(path.resolve()), sweep_id=sweep_id,
                    fingerprint=fingerprint)
    with engine.begin() as conn:
        row["dataset_id"] = dataset_id(conn, identity.get("dataset"), identity.get("variant"))
        if row["dataset_id"] is not None:
            add_conversations(conn, row["dataset_id"], convs)
            if digest is not None:  # the first run imported with the digest fills it
                conn.execute(datasets.update().where((datasets.c.id == row["dataset_id"])
                                                     & datasets.c.summary.is_(None))
                             .values(summary=json.dumps({k: v for k, v in digest.items() if k != "prefix"})))
        point = insert_point(conn, deployment_labels(identity), row, blobs)
    return Imported(path, point, True)


def differs(stored: str | None, result: dict) -> str | None:
    """Which top-level fields of a folder's result point differ from the stored point's (None:
    the same), as `agentx db import` says when a re-imported folder was edited."""
    now = json.loads(strict_json(result))
    try:
        then = json.loads(stored or "null")
    except ValueError:
        return "the stored point's result is corrupt"
    if then == now:
        return None
    if not isinstance(then, dict):
        return "the stored point has no result"
    keys = sorted(k for k in then.keys() | now.keys() if then.get(k) != now.get(k))
    return "result.json fields " + ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def import_paths(engine: Engine, paths: list[Path], skipped=None) -> list[Imported]:
    """Every complete run folder named or below the folders named; the first bad one raises
    (callers that report a batch folder by folder use `import_each`). `skipped(path, why)` hears
    of each incomplete one (a failed or killed run), which is left out."""
    out = []
    for folder in find_run_folders(paths):
        why = incomplete(folder)
        if why is None:
            out.append(import_run(engine, folder))
        elif skipped is not None:
            skipped(folder, why)
    return out


def _run_folders(paths: list[Path]) -> Iterator[Path | Refused]:
    for path in paths:
        try:
            yield from find_run_folders([path])
        except AgentxError as e:
            yield Refused(path, str(e))


def import_each(engine: Engine, paths: list[Path]) -> Iterator[Imported | Refused | Skipped]:
    """Each run folder's outcome: stored (atomically, a folder at a time), skipped as incomplete
    (a failed or killed run: a note, not an error), or refused with why; a path holding no run (an
    empty folder `sim plan` left) is refused, and the other paths are still imported."""
    for folder in _run_folders(paths):
        if isinstance(folder, Refused):
            yield folder
            continue
        why = incomplete(folder)
        if why is not None:
            yield Skipped(folder, why)
            continue
        try:
            yield import_run(engine, folder)
        except AgentxError as e:
            yield Refused(folder, str(e))
