"""`agentx sweep RECIPE.yaml`: for each deployment, start its server, run its points (one
`agentx bench` run per concurrency), store each point as it finishes, stop the server.

Resumable: a point whose fingerprint is stored with status ok is skipped; the folder of a point
that was interrupted is moved under `.interrupted/` and the point re-run. A server that exits or
never becomes healthy marks its deployment's remaining points failed, and the sweep goes on.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Callable

import msgspec
from sqlalchemy import delete, select
from sqlalchemy.engine import Engine

from agentx.errors import AgentxError
from agentx.replay.corpus import Corpus
from agentx.results.db import now
from agentx.results.importer import import_run
from agentx.results.recipe import Deployment, Recipe, bench_options, load_recipe, point_fingerprint, recipe_fingerprint
from agentx.results.schema import points, sweeps
from agentx.results.points import deployment_labels, insert_point
from agentx.results.targets import healthy, running


def run_sweep(path: Path, engine: Engine, out: Path | None, say: Callable[[str], None] = print,
              on_tick=None, twin=None) -> tuple[Path, dict]:
    """Run (or resume) the recipe at `path`; return its folder and {deployment: {concurrency:
    status}}. `on_tick(snapshot)` follows each bench run (a progress line); `twin`: bench's
    virtual-twin check (`agentx.virtual.twin.virtual_twin`, passed in by the CLI)."""
    recipe = load_recipe(path)  # the recipe and its dataset are valid before anything is written
    options = bench_options(recipe, path)
    sessions = _sessions(recipe, path.parent)
    fingerprint = recipe_fingerprint(recipe)
    out = out or Path("runs") / f"sweep-{recipe.name}-{fingerprint[:8]}"
    if out.exists() and not out.is_dir():
        raise AgentxError(f"--out {out}: a file, want a folder")
    sweep_id = _sweep_row(engine, recipe, fingerprint, out)
    say(f"sweep {recipe.name} ({fingerprint[:8]}): {len(recipe.deployments)} deployments x "
        f"{len(recipe.concurrency)} concurrencies -> {out}")
    outcome: dict = {}
    status = "partial"  # unless every point is stored (an interrupted sweep is partial too)
    try:
        for dep in recipe.deployments:
            outcome[dep.name] = _deployment(engine, recipe, options, dep, sessions, out / dep.name, sweep_id, say,
                                            on_tick, twin)
        statuses = [s for per in outcome.values() for s in per.values()]
        status = "finished" if all(s != "failed" for s in statuses) else "partial"
    finally:
        with engine.begin() as conn:
            conn.execute(sweeps.update().where(sweeps.c.id == sweep_id).values(status=status, finished_at=now()))
    return out, outcome


def _sweep_row(engine: Engine, recipe: Recipe, fingerprint: str, out: Path) -> int:
    with engine.begin() as conn:
        found = conn.execute(select(sweeps.c.id).where(sweeps.c.fingerprint == fingerprint)).scalar()
        if found is not None:
            conn.execute(sweeps.update().where(sweeps.c.id == found).values(status="running", finished_at=None))
            return found
        return conn.execute(sweeps.insert().values(
            name=recipe.name, fingerprint=fingerprint, recipe=msgspec.json.encode(recipe).decode(), status="running",
            out_dir=str(out.resolve()), started_at=now())).inserted_primary_key[0]


def _corpus(recipe: Recipe, base: Path | None = None) -> Corpus:
    """The recipe's dataset (its trace paths relative to the recipe's folder `base`)."""
    ds = recipe.dataset
    return Corpus(tuple(ds.traces or ()), max_context=ds.max_context, scenario=ds.scenario, base=base)


def _sessions(recipe: Recipe, base: Path) -> list:
    return _corpus(recipe, base).sessions(max(recipe.concurrency))


def _stored(engine: Engine, fingerprint: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(select(points.c.id).where(
            (points.c.fingerprint == fingerprint) & (points.c.status == "ok"))).first() is not None


def _deployment(engine, recipe: Recipe, options: dict, dep: Deployment, sessions, folder: Path, sweep_id: int,
                say, on_tick=None, twin=None) -> dict:
    todo = {n: point_fingerprint(recipe, dep, n) for n in recipe.concurrency}
    status = {n: "stored" for n, fp in todo.items() if _stored(engine, fp)}
    todo = {n: fp for n, fp in todo.items() if n not in status}
    if not todo:
        say(f"{dep.name}: every point is stored already")
        return status
    try:
        with running(dep, folder) as url:
            say(f"{dep.name}: {url} healthy")
            for n, fp in todo.items():
                if not healthy(url):
                    raise AgentxError(f"deployment {dep.name}: {url} stopped answering (log: {folder / 'server.log'})")
                status[n] = _point(engine, recipe, options, dep, sessions, url, folder / f"c{n}", n, fp, sweep_id, say,
                                   on_tick, twin)
    except AgentxError as e:
        say(f"{dep.name}: failed: {e}")
        for n, fp in todo.items():
            if n not in status:
                _failed(engine, recipe, dep, n, fp, sweep_id, str(e))
                status[n] = "failed"
    return status


def _point(engine, recipe: Recipe, options: dict, dep: Deployment, sessions, url: str, folder: Path, n: int,
           fp: str, sweep_id: int, say, on_tick=None, twin=None) -> str:
    from agentx.replay.driver import bench
    from agentx.replay.settings import BenchSettings

    if folder.exists():  # an interrupted point: keep its files aside, run it again
        aside = folder.parent / ".interrupted" / f"{folder.name}-{uuid.uuid4().hex[:6]}"
        aside.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(folder), aside)
        say(f"{dep.name}: c{n} was interrupted; its files are in {aside}; running it again")
    labels = _labels(dep)
    clock_scale = dep.clock_scale or (float(dep.sim.get("speed", 1.0)) if dep.sim else 1.0)
    settings = BenchSettings.build(
        url=url, concurrency=n, duration=recipe.duration, out=str(folder), seed=recipe.seed, model=labels.get("model"),
        gpus=labels.get("gpus"), hardware=labels.get("hardware"), engine=labels.get("engine"), clock_scale=clock_scale,
        **_corpus(recipe).labels, **options)
    say(f"{dep.name}: concurrency {n}, {recipe.duration:g} s profiling -> {folder}")
    result = bench(settings, sessions, f"agentx sweep ({recipe.name})", on_tick, twin=twin)
    _label(folder, result, labels)
    done = import_run(engine, folder, sweep_id=sweep_id, fingerprint=fp)
    with engine.begin() as conn:  # a retried point replaces its failed attempts
        conn.execute(delete(points).where((points.c.fingerprint == fp) & (points.c.status == "failed")))
    say(f"{dep.name}: c{n} stored as point {done.point_id}")
    return "ok"


def _labels(dep: Deployment) -> dict:
    """The recipe's labels; a `sim` target's GPUs, hardware and engine default to the sim's."""
    labels = msgspec.to_builtins(dep.labels)
    if dep.sim:
        labels.setdefault("gpus", int(dep.sim.get("gpus", 8)))
        labels.setdefault("hardware", str(dep.sim.get("hardware", "H200")))
        labels.setdefault("engine", "agentx-sim")
    return labels


def _label(folder: Path, result: dict, labels: dict) -> None:
    """The recipe's labels join the result point's identity (result.json is rewritten with them)."""
    ident = result["identity"]
    published = ident.get("engine_settings")
    ident.update({k: v for k, v in labels.items() if v is not None})
    if published and labels.get("engine_settings") and published != labels["engine_settings"]:
        ident["engine_settings"] = f"{labels['engine_settings']}; server: {published}"  # both set it apart
    (folder / "result.json").write_text(json.dumps(result, indent=1))


def _failed(engine, recipe: Recipe, dep: Deployment, n: int, fp: str, sweep_id: int, failure: str) -> None:
    identity = {**_labels(dep), "concurrency": n}
    row = {"run_id": f"failed-{uuid.uuid4().hex[:12]}", "source": "agentx", "status": "failed", "failure": failure,
           "concurrency": n, "started_at": now(), "sweep_id": sweep_id, "fingerprint": fp,
           "settings": json.dumps(identity)}
    with engine.begin() as conn:
        insert_point(conn, deployment_labels(identity), row, {})
