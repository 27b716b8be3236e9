"""Dispatch lateness while other lanes' requests are in flight and the target's /metrics is big.

Against vLLM at 6 lanes, requests due while another lane's request was in flight went out
400-500 ms late, at that request's completion. The client's loop was held: the one thing in
it that grows with the server, the parse of each per-second /metrics scrape, took ~0.6 ms per
KB (prometheus_client's parser), and engines with many histograms and engines publish hundreds
of KB. Here the scrape is served a 480 KB exposition (the sim's own, vLLM names, for 32
engines); due times keep falling while requests are in flight.
"""

import sys

import pytest

from agentx.engine.launch import sim_server
from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from tests.conftest import WEKA
from tests.realengine.llamacpp import free_port, server_process

SPEED = 20


@pytest.fixture(scope="module")
def big_metrics(tmp_path_factory):
    import urllib.request

    folder = tmp_path_factory.mktemp("metrics")
    with sim_server("--speed", str(SPEED)) as url, urllib.request.urlopen(url + "/metrics") as r:
        one = r.read().decode()
    text = "".join(one.replace('engine="0"', f'engine="{i}"') for i in range(32))
    assert len(text) > 400_000
    (folder / "metrics").write_text(text)
    port = free_port()
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(folder)]
    with server_process(cmd, f"http://127.0.0.1:{port}", startup_s=30, health="/metrics") as base:
        yield base + "/metrics"


def test_due_requests_leave_on_time_while_others_are_in_flight(big_metrics, tmp_path):
    sessions = load_sessions([WEKA], None)
    with sim_server("--speed", str(SPEED)) as url:
        s = BenchSettings.build(url=url, concurrency=6, duration=600, out=str(tmp_path / "run"), clock_scale=SPEED,
                          warmup_requests_per_lane=2, grace=10, server_metrics=big_metrics)
        result = bench(s, sessions)
    prof = [r for r in read_records(tmp_path / "run") if r.phase == "profile"]
    # due times that fell while another request was in flight (most of them, at 6 lanes)
    crossed = [r for r in prof if any(o.start < r.planned < o.end for o in prof if o.lane != r.lane)]
    assert len(crossed) > 40
    late = sorted((r.start - r.planned) * 1000 / SPEED for r in crossed)
    assert result["server_metrics"]["scrapes"] > 5
    # A held loop (a scrape parsed on it) shows as hundreds of ms. How late a loaded host makes the
    # client is no defect of the code, so the figure itself is timed by benchmarks/dispatch_timing.py;
    # here the run must either keep the schedule or say it did not (SPEC section 3, rule `client`).
    p99 = late[int(0.99 * len(late))]
    client = next(r for r in result["validity"]["rules"] if r["rule"] == "client")
    assert p99 < 50 or not client["ok"], (p99, client)
    assert client["ok"] == (result["client_health"]["verdict"] == "ok"), client
