"""`bench --ray ADDRESS` on a local Ray cluster of two nodes (Ray's `Cluster`, started and
stopped here; Ray binds its services to this host's address, not 127.0.0.1: `ray.init` turns a
loopback address into the host's) against the simulated engine: the workers are Ray actors, one
per node, and the run folder is a normal one."""

import json

import pytest

from agentx.engine.launch import sim_server
from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from tests.conftest import WEKA

cluster_utils = pytest.importorskip("ray.cluster_utils")

SPEED = 50


@pytest.fixture(scope="module")
def cluster():
    node = {"num_cpus": 1, "include_dashboard": False}
    c = cluster_utils.Cluster(initialize_head=True, head_node_args=node)
    try:
        c.add_node(**node)
        c.wait_for_nodes()
        yield c
    finally:
        c.shutdown()


def test_bench_on_a_two_node_ray_cluster_writes_a_normal_run_folder(cluster, tmp_path):
    sessions = load_sessions([WEKA], None)[:6]
    out = tmp_path / "ray"
    with sim_server("--speed", str(SPEED)) as url:
        settings = BenchSettings.build(url=url, concurrency=4, duration=60, out=str(out), clock_scale=SPEED,
                                       warmup_requests_per_lane=2, grace=10, ray=cluster.address, workers="2")
        result = bench(settings, sessions)
    records = read_records(out)
    # (not `validity`: its sim-lag and host-error rules depend on how loaded the test host is)
    assert result["requests"]["profiled"] > 0 and not result["requests"]["errors"]
    assert all(r.error is None and r.isl == r.isl_planned for r in records)
    info = json.loads((out / "run.json").read_text())
    assert info["finished"] and info["client_workers"]["where"] == "ray"
    workers = info["client"]["workers"]
    assert len(workers) == 2 and len({w["pid"] for w in workers}) == 2
    assert [w["records"] for w in workers] == [sum(r.lane % 2 == i for r in records) for i in (0, 1)]
    assert all(w["clock_rtt_s"] > 0 and abs(w["clock_offset_s"]) < 1.0 for w in workers)
    for name in ("records.jsonl", "trees.jsonl", "server_metrics.jsonl", "dataset.json", "result.json"):
        assert (out / name).exists()
