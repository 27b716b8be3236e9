"""Issue #43's break: an LRU run and a retain run (`sim bench --kv-policy`, `--hints`) were stored as
one deployment and drawn as one curve. Now each is its own deployment in the results database,
its settings in its label (SPEC section 8, "The deployment key"), and its own curve (SPEC section 5)."""

from sqlalchemy import select

from agentx.data import sample_traces
from agentx.engine.config import Deployment, EngineConfig
from agentx.replay.settings import BenchSettings
from agentx.results.db import connect
from agentx.results.frontier import CANONICAL, configuration, frontier, load_points
from agentx.results.query import Filters
from agentx.results.importer import import_run
from agentx.results.schema import deployments, points
from agentx.traces.load import load_sessions
from agentx.virtual.runner import sim_bench


def test_lru_and_retain_runs_are_two_deployments(tmp_path):
    sessions = load_sessions([sample_traces()])
    db = connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    for policy, hints in (("lru", "none"), ("retain", "harness"), ("lru", "none")):
        out = tmp_path / f"{policy}-{len(list(tmp_path.iterdir()))}"
        settings = BenchSettings.build(url="virtual", concurrency=4, duration=60.0, out=str(out), hints=hints)
        sim_bench(settings, sessions, Deployment(EngineConfig(kv_policy=policy)))
        import_run(db, out)
    with db.connect() as conn:
        rows = conn.execute(select(deployments.c.id, deployments.c.engine_settings)).all()
        by_point = conn.execute(select(points.c.deployment_id)).scalars().all()
    assert len(rows) == 2 and len(by_point) == 3 and len(set(by_point)) == 2  # the two LRU runs: one deployment
    labels = {configuration({"engine_settings": r.engine_settings}) for r in rows}
    retain = next(label for label in labels if "retain" in label)
    assert "kv_policy=retain" in retain and "client: hints=harness" in retain
    assert not any("kv_policy" in label or "hints" in label for label in labels - {retain})
    curves = frontier(load_points(db.engine, Filters(), *CANONICAL), *CANONICAL, spread_limit=0)
    assert len(curves) == 2 and sorted(len(c.rows) for c in curves) == [1, 2]  # one curve per deployment
    assert {c.key["engine_settings"] for c in curves} == {r.engine_settings for r in rows}
