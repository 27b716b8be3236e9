"""`agentx sim bench` (modeled time, no HTTP) agrees with `agentx bench` against `agentx sim serve`.

The same traces, settings and seed go through both paths: the plan and the engine decide the
same things, so the figures differ only by what HTTP adds (microseconds of wall time per
request, scaled by the server's speed) and by the order of near-simultaneous events."""

import pytest

from agentx.data import sample_traces
from agentx.engine.config import EngineConfig
from agentx.engine.launch import sim_server
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.virtual.runner import SimDeployment, sim_bench

SPEED = 1.0  # real time: what HTTP and a busy machine add stays far below 3 % of a TTFT


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def test_virtual_time_agrees_with_http_against_the_sim(tmp_path):
    sessions = load_sessions([sample_traces()])
    common = dict(concurrency=4, duration=60.0, seed=0)
    virtual = sim_bench(BenchSettings.build(url="virtual", out=str(tmp_path / "virtual"), **common), sessions,
                        SimDeployment(EngineConfig()))
    with sim_server("--speed", str(SPEED)) as url:
        http = bench(BenchSettings.build(url=url, out=str(tmp_path / "http"), clock_scale=SPEED, **common), sessions)
    assert virtual["identity"]["engine"] == "agentx-sim (virtual time)"
    assert virtual["validity"]["valid"] and http["validity"]["valid"]
    v, h = virtual["request_metrics"], http["request_metrics"]
    assert v["cache"]["theoretical_hit_rate"] == pytest.approx(h["cache"]["theoretical_hit_rate"], abs=0.005)
    assert v["cache"]["measured_hit_rate"] == pytest.approx(h["cache"]["measured_hit_rate"], abs=0.005)
    for metric in ("ttft_s", "itl_s", "e2e_normalized_interactivity_tok_s"):
        for q in ("p50", "p90"):
            assert rel(v[metric][q], h[metric][q]) < 0.03, (metric, q, v[metric][q], h[metric][q])
    assert rel(v["throughput"]["total_tok_s"], h["throughput"]["total_tok_s"]) < 0.02
    assert virtual["requests"]["succeeded"] >= 10
