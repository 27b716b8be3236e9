"""`bench --workers N` against the simulated engine (a real server process): the same plan, the
same profiled requests and the same definitions as one process, the records from every worker on
the driver's clock."""

import json

import pytest

from agentx.engine.launch import sim_server
from agentx.errors import AgentxError
from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from tests.conftest import MOONCAKE, WEKA

SPEED = 50


@pytest.fixture(scope="module")
def sim():
    with sim_server("--speed", str(SPEED)) as url:
        yield url


def _settings(url, out, **kw) -> BenchSettings:
    base = dict(url=url, concurrency=4, duration=60, out=str(out), clock_scale=SPEED, warmup_requests_per_lane=2,
                grace=10)
    return BenchSettings.build(**{**base, **kw})


def _planned(records):
    """What the plan and the renderer decided of each request, not what timing made of it."""
    return {(r.session, r.node, r.stream, r.phase, r.isl_planned, r.osl_planned, r.theo_cached) for r in records}


def test_two_workers_send_the_same_profiled_requests_as_one(sim, tmp_path):
    """Schedule mode on single-request sessions: which requests fall into the window is fixed by
    their recorded start times, so the sets must be equal, request by request."""
    sessions = load_sessions([MOONCAKE], None)[:40]
    runs = {}
    for n in (1, 2):
        out = tmp_path / f"w{n}"
        result = bench(_settings(sim, out, mode="schedule", warmup=False, warmup_seconds=2.0, duration=20,
                                 workers=str(n)), sessions)
        runs[n] = (result, read_records(out), json.loads((out / "run.json").read_text()))
    (one, rec1, info1), (two, rec2, info2) = runs[1], runs[2]
    profiled = [r for r in rec2 if r.phase == "profile"]
    assert profiled and _planned(profiled) == _planned(r for r in rec1 if r.phase == "profile")
    assert _planned(rec2) == _planned(rec1)
    assert all(r.error is None and r.isl == r.isl_planned for r in rec2)
    assert one["requests"]["profiled"] == two["requests"]["profiled"] == len(profiled)
    assert _keys(one) == _keys(two)  # the same result, metric by metric
    settings1, settings2 = info1["settings"], info2["settings"]
    assert {k for k in settings1 if settings1[k] != settings2[k]} == {"workers", "out"}
    workers = info2["client"]["workers"]
    assert [w["worker"] for w in workers] == [0, 1] and "workers" not in info1["client"]
    assert sum(w["records"] for w in workers) == len(rec2) and all(w["records"] > 0 for w in workers)
    assert all(abs(w["clock_offset_s"]) < 0.05 and w["clock_rtt_s"] > 0 for w in workers)  # one host, one clock


def test_lanes_of_multi_turn_sessions_on_two_workers(sim, tmp_path):
    """Closed loop on the real sessions: every lane's streams on its worker (L mod 2), bodies
    rendered there agree with the plan, and the records' times are on the driver's clock."""
    sessions = load_sessions([WEKA], None)
    out1, out2 = tmp_path / "one", tmp_path / "two"
    bench(_settings(sim, out1, workers="1"), sessions)
    result = bench(_settings(sim, out2, workers="2"), sessions)
    records = read_records(out2)
    # (not `validity`: its sim-lag and host-error rules depend on how loaded the test host is)
    assert result["requests"]["profiled"] > 0 and not result["requests"]["errors"]
    assert all(r.error is None and r.isl == r.isl_planned for r in records)
    first = {(r.lane, r.session) for r in records if r.replay == 0}  # each lane's first tree: seeded
    assert first == {(r.lane, r.session) for r in read_records(out1) if r.replay == 0}
    info = json.loads((out2 / "run.json").read_text())
    by_worker = [w["records"] for w in info["client"]["workers"]]
    assert by_worker == [sum(r.lane % 2 == i for r in records) for i in (0, 1)]
    wall = info["client"]["wall_s"] * SPEED
    assert all(0 <= r.start <= r.end <= wall for r in records)


def test_worker_count_is_checked():
    with pytest.raises(AgentxError, match="workers"):
        BenchSettings.build(url="http://x", workers="0")
    assert BenchSettings.build(url="http://x", workers="auto").target.worker_count() is None


def _keys(d, prefix=""):
    out = set()
    for k, v in d.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= _keys(v, prefix + k + ".")
    return out
