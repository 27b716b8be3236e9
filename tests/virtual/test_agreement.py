"""`agentx sim bench` (modeled time, no HTTP) agrees with `agentx bench` against `agentx sim serve`.

The same traces, settings and seed go through both paths: the plan and the engine decide the
same things, so the figures differ only by what HTTP adds (CPU delays of the server and client,
in milliseconds of wall time, times `SPEED` in modeled time).

Three defects made this test fail at random before (issue #16). Requests sent at the same
instant reached the engine in another order than they were sent: the client wrote the heads of
requests on new connections in the order the connections completed, and the sim queued
requests in the order their bodies finished parsing (a shorter prompt overtook a longer one);
with FCFS admission a burst's prefill order, and with it the ITL tail and TTFT p50, changed from
run to run. And a sim loop held off the CPU for over 50 ms restarted its modeled schedule, so
the stall became modeled time in every running request. Now the client writes heads in the
order requests began, the sim queues them in the order their heads arrived, and it catches up
after a stall (SPEC sections 2 and 6).

One order remained uncontrolled: requests written within a millisecond of each other on
*new* connections still reached the sim's queue out of order now and then (its event loop
takes sockets that became readable together in an order of its own; 3 of 18 runs without
warmup, moving ITL p90 by 14-18 %). With the usual warmup the lanes' connections are open and
pooled when profiling starts, so the burst's heads go out in plan order on connections the
server already reads, and the profiled prompts start from warm caches: the test runs with a
short warmup (2 requests per lane). Configuration: Llama-3.1-70B on 4 x H100 at 16 lanes
(TTFT p50 ~8 s, ITL p50 ~64 ms, p90 ~0.13 s), 50 modeled seconds of profiling at --speed 1.5 (22 profiled
requests, ~2 min with the warmup). The test also raises its priority while the HTTP run lasts
where the OS allows it, and names the client's lateness verdict in any failure.

On a loaded host the HTTP run may instead be NOT VALID, for its host error (measured minus the
sim's modeled timings over 3 % of a p50), the sim's own lag, the client's lateness or its figures
off the same plan in virtual time (its twin, tests/virtual/test_twin.py), and for nothing else
(issue #24): either the figures agree, or the run says they are not the engine's."""

import os
from contextlib import contextmanager

import pytest

from agentx.data import sample_traces
from agentx.engine.config import EngineConfig
from agentx.engine.launch import sim_server
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.engine.config import Deployment
from agentx.virtual.runner import sim_bench
from tests.conftest import failed_rules, valid_but_for_host_timing

SPEED = 1.5  # a millisecond of wall-clock delay counts 1.5 modeled ones, far below 3 % of these figures
# the timing constants pinned to the pre-calibration ones this test was sized with (the agreement of the
# two paths does not depend on them; the request count and the lateness margins do), and its KV cache:
# 27,999 blocks, 0.9 of the 80e9 B the H100 preset held before it took the 85.5e9 nvidia-smi reads (with
# 31,790 blocks the window's edge fell where, beside two busy processes, one request of 22 crossed it)
# (#44 refitted the KV efficiency and the roofline norm: pinned here to the values it was sized with)
ENGINE = dict(hardware="H100", gpus=4, model="llama-3.1-70b", mfu=0.3, mbu=0.7, kv_efficiency=0.55, roofline_norm=2.5,
              gpu_memory_utilization=0.8419)
OVERHEAD_MS = 5.0


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


@contextmanager
def raised_priority(steps: int = 10):
    """Nice this process (and the server it starts) `steps` higher while the block runs, if allowed."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, before - steps)
    except PermissionError:
        pass
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


def test_virtual_time_agrees_with_http_against_the_sim(tmp_path):
    sessions = load_sessions([sample_traces()])
    common = dict(concurrency=16, duration=50.0, seed=0, warmup_requests_per_lane=2)
    virtual = sim_bench(BenchSettings.build(url="virtual", out=str(tmp_path / "virtual"), **common), sessions,
                        Deployment(EngineConfig(**ENGINE, overhead_s=OVERHEAD_MS / 1000)))
    flags = [x for key, value in ENGINE.items() for x in (f"--{key.replace('_', '-')}", str(value))] + ["--overhead-ms", str(OVERHEAD_MS)]
    with raised_priority(), sim_server("--speed", str(SPEED), *flags) as url:
        http = bench(BenchSettings.build(url=url, out=str(tmp_path / "http"), clock_scale=SPEED, **common), sessions)
    assert virtual["identity"]["engine"] == "agentx-sim vllm profile (virtual time)"
    assert virtual["validity"]["valid"] and valid_but_for_host_timing(http), http["validity"]["reasons"]
    assert http["host_error"] is not None  # the sim's modeled timings reached the client
    health = http["client_health"]
    late = health["dispatch_lateness_ms"]
    client = (f"HTTP client {health['verdict']}: dispatch lateness p50 {late['p50']:.1f} ms, p99 {late['p99']:.1f} ms, "
              f"run-queue wait {health['runqueue_wait_percent']}%")
    assert virtual["requests"]["succeeded"] >= 20 and http["requests"]["succeeded"] >= 20
    if not http["validity"]["valid"]:  # a loaded host: the HTTP run says its figures are not the engine's
        assert failed_rules(http) and all(r.startswith(("host error", "the simulated engine's own lag",
                                                        "the client could not keep")) for r in http["validity"]["reasons"])
        return
    v, h = virtual["request_metrics"], http["request_metrics"]
    assert v["cache"]["theoretical_hit_rate"] == pytest.approx(h["cache"]["theoretical_hit_rate"], abs=0.005), client
    assert v["cache"]["measured_hit_rate"] == pytest.approx(h["cache"]["measured_hit_rate"], abs=0.005), client
    for metric in ("ttft_s", "itl_s", "e2e_normalized_interactivity_tok_s"):
        for q in ("p50", "p90"):
            assert rel(v[metric][q], h[metric][q]) < 0.03, (metric, q, v[metric][q], h[metric][q], client)
    assert rel(v["throughput"]["total_tok_s"], h["throughput"]["total_tok_s"]) < 0.02, client
    assert virtual["identity"]["simulated"]["model"] == "llama-3.1-70b"
