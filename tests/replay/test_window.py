"""Server counters over exactly the profiling window (the simulated engine, a real server process)."""

import pytest

from agentx.engine.launch import sim_server
from agentx.metrics.scrape import read_series
from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from tests.conftest import WEKA

SPEED = 50


@pytest.mark.parametrize("warmup", [True, False])
def test_server_counters_over_the_window_equal_the_records_sums(tmp_path, warmup):
    sessions = load_sessions([WEKA], None)
    with sim_server("--speed", str(SPEED)) as url:
        s = BenchSettings.build(url=url, concurrency=4, duration=200, out=str(tmp_path / "run"), clock_scale=SPEED,
                                warmup=warmup, warmup_requests_per_lane=3, grace=30)
        result = bench(s, sessions)
    records = read_records(tmp_path / "run")
    prof = [r for r in records if r.phase == "profile"]
    assert prof and all(r.error is None for r in prof) and any(r.phase == "warmup" for r in records) == warmup
    sm = result["server_metrics"]
    assert sm["window"] == "exact"
    c, by_source = sm["counters"], sm["prompt_tokens_by_source"]
    assert c["prompt_tokens"] == sum(r.isl for r in prof)
    assert c["prefix_queries"] == sum(r.isl for r in prof)  # (no preemption at 4 lanes: one admission each)
    assert c["prefix_hits"] == sum(r.cached for r in prof)
    assert by_source["local_cache_hit"] + by_source["external_kv_transfer"] == sum(r.cached for r in prof)
    assert c["generation_tokens"] == sum(r.osl for r in prof)
    assert sm["prefix_hit_rate"] == sum(r.cached for r in prof) / sum(r.isl for r in prof)
    phases = [row["phase"] for row in read_series(tmp_path / "run" / "server_metrics.jsonl")]
    assert phases.count("open") == 1 and phases.count("close") == 1
    assert phases.index("open") < phases.index("profile") if "profile" in phases else True
