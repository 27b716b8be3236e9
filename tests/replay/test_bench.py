"""`agentx bench` end to end against the simulated engine (a real server process)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from agentx.engine.launch import sim_server
from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.scenarios import scenario_sessions
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from tests.conftest import WEKA, valid_but_for_host_timing

SPEED = 50


@pytest.fixture(scope="module")
def sessions():
    return load_sessions([WEKA], None)


@pytest.fixture(scope="module")
def sim():
    with sim_server("--speed", str(SPEED)) as url:
        yield url


def settings(url, out, **kw) -> BenchSettings:
    base = dict(url=url, concurrency=4, duration=300, out=str(out), clock_scale=SPEED, gpus=8, hardware="H200",
                warmup_requests_per_lane=3, grace=10)
    base.update(kw)
    return BenchSettings.build(**base)


def test_tokens_mode_records_metrics_and_result_agree(sim, sessions, tmp_path):
    result = bench(settings(sim, tmp_path / "run"), sessions)
    records = read_records(tmp_path / "run")
    prof = [r for r in records if r.phase == "profile"]
    warm = [r for r in records if r.phase == "warmup"]
    assert warm and prof and all(r.error is None for r in records)
    assert all(r.osl_planned == 1 for r in warm)
    # token counts on the wire equal the trace's
    for r in prof:
        assert r.isl == r.isl_planned and r.osl == r.osl_planned
    by_session = {s.id: s for s in sessions}
    isl_of = {(s.id, i): s.replay_isl(req) for s in sessions for i, req in enumerate(s.requests())}
    assert all(r.isl_planned in {v for (sid, _), v in isl_of.items() if sid == r.session} for r in prof[:50])
    assert set(r.session for r in prof) <= set(by_session)
    rm = result["request_metrics"]
    assert result["requests"]["profiled"] == len(prof) and result["requests"]["warmup"] == len(warm)
    assert rm["osl"]["n"] == len(prof)  # warmup excluded
    # the sim's KV cache (1.4M tokens) holds these 4 lanes: measured hit ~ theoretical hit
    cache = rm["cache"]
    assert cache["theoretical_hit_rate"] > 0.5
    assert cache["measured_hit_rate"] == pytest.approx(cache["theoretical_hit_rate"], abs=0.05)
    sm = result["server_metrics"]
    assert sm["engine"] == "vllm" and sm["scrapes"] > 3 and sm["prefix_hit_rate"] > 0.4
    assert "prompt_tokens_by_source" in sm and sm["kv_usage_max"] > 0
    assert rm["throughput"]["total_tok_s_per_gpu"] > 0 and rm["throughput"]["usd_per_m_output_tokens"] > 0
    assert valid_but_for_host_timing(result), result["validity"]  # the host's speed is not what this tests
    assert result["host_error"]["ttft_s"]["n"] == rm["ttft_s"]["n"]  # every request carried the sim's timings
    assert (tmp_path / "run" / "records.parquet").exists()
    assert json.loads((tmp_path / "run" / "result.json").read_text())["schema_version"] == 1


def test_chat_mode_with_the_sims_tokenizer(sim, sessions, tmp_path):
    result = bench(settings(sim, tmp_path / "chat", wire="chat", concurrency=2, duration=120), sessions)
    prof = [r for r in read_records(tmp_path / "chat") if r.phase == "profile"]
    assert prof and all(r.error is None and r.osl == r.osl_planned for r in prof)
    # content tokens are exact; the chat template adds a few tokens per message, and a stream's
    # n-th request (node n) carries the messages of the turns before it (measured: 33 + 26 n)
    drift = [r.isl - r.isl_planned for r in prof]
    assert all(0 < d < 64 * (r.node + 1) for d, r in zip(drift, prof))
    assert result["request_metrics"]["isl_drift_tokens_mean"] == pytest.approx(sum(drift) / len(drift))


def test_failing_server_is_measured_not_fatal(sessions, tmp_path):
    with sim_server("--speed", str(SPEED), "--fault-rate", "0.3", "--fault-stall-s", "0.2", "--seed", "3") as url:
        result = bench(settings(url, tmp_path / "faults", duration=200, request_timeout=30), sessions)
    records = read_records(tmp_path / "faults")
    errors = {r.error for r in records if r.error}
    assert {"http_5xx", "context_overflow", "disconnect", "malformed"} <= errors
    assert sum(result["requests"]["errors"].values()) > 0
    assert not result["validity"]["valid"]  # > 10 % failed
    assert result["requests"]["succeeded"] > 0


def test_fixed_scenario(sim, tmp_path):
    result = bench(settings(sim, tmp_path / "s", concurrency=2, duration=60, scenario="1k1k"),
                   scenario_sessions("1k1k", 2))
    prof = [r for r in read_records(tmp_path / "s") if r.phase == "profile"]
    # the alias draws each length uniformly from [0.8 L, L], as InferenceX runs it
    assert prof and all(819 <= r.isl <= 1024 and 819 <= r.osl <= 1024 for r in prof)
    assert len({r.isl for r in prof}) > 1
    assert result["request_metrics"]["cache"]["theoretical_hit_rate"] == 0


def test_sigkill_mid_profile_then_report(sim, tmp_path):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "agentx.cli", "bench", "--url", sim, "--traces", str(WEKA), "--concurrency", "4",
           "--duration", "100000", "--clock-scale", str(SPEED), "--warmup-requests-per-lane", "2", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            path = out / "records.jsonl"
            if path.exists() and sum(b'"phase":"profile"' in line for line in path.read_bytes().splitlines()) >= 15:
                break
            time.sleep(0.2)
        else:
            pytest.fail("no profiling records appeared")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    lines = [json.loads(line) for line in (out / "records.jsonl").read_bytes().splitlines() if line.strip()]
    res = subprocess.run([sys.executable, "-m", "agentx.cli", "report", str(out)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 3, res.stderr  # a killed run is not valid
    result = json.loads((out / "result.json").read_text())
    assert result["requests"]["total"] == len(lines)
    assert result["requests"]["profiled"] == sum(1 for r in lines if r["phase"] == "profile") >= 15
    assert not result["validity"]["valid"] and "did not finish" in result["validity"]["reasons"][0]
    assert "TTFT ms" in res.stdout


def test_schedule_mode_on_a_timestamped_corpus(sim, tmp_path):
    from tests.conftest import MOONCAKE

    sessions = load_sessions([MOONCAKE], None)[:40]
    result = bench(settings(sim, tmp_path / "sched", mode="schedule", time_scale=1.0, warmup_seconds=2.0,
                            duration=20, warmup=False), sessions)
    records = read_records(tmp_path / "sched")
    assert {r.phase for r in records} == {"warmup", "profile"}
    assert all(r.error is None and r.isl == r.isl_planned for r in records)
    assert len({r.tree for r in records}) == len({r.session for r in records})  # a tree per session
    assert result["requests"]["profiled"] == sum(r.phase == "profile" for r in records)
    assert result["identity"]["concurrency"] is None  # schedule mode has no lanes


def _agentx(*args):
    return subprocess.run([sys.executable, "-m", "agentx.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_an_invalid_run_exits_3_unless_allowed(tmp_path):
    """Every request fails (the sim answers 500): the run finishes NOT VALID, bench and report
    exit 3, --allow-invalid exits 0. `--traces` takes several paths after one flag (a glob)."""
    paths = [WEKA / "trace_0026.json", WEKA / "trace_0277.json"]
    with sim_server("--speed", str(SPEED), "--fault-rate", "1", "--fault-kinds", "http500") as failing:
        def run(out, *extra):
            return _agentx("bench", "--url", failing, "--traces", *paths, "--concurrency", "2", "--duration", "5",
                           "--clock-scale", SPEED, "--no-warmup", "--grace", "1", "--out", out, *extra)

        res = run(tmp_path / "a")
        assert res.returncode == 3, res.stderr
        assert "NOT VALID" in res.stdout and res.stderr.strip().splitlines()[-1].startswith("not valid: the run")
        assert run(tmp_path / "b", "--allow-invalid").returncode == 0
    result = json.loads((tmp_path / "a" / "result.json").read_text())
    assert not result["validity"]["valid"] and result["identity"]["dataset"] == ", ".join(map(str, paths))
    assert {r.session for r in read_records(tmp_path / "a")} == {"trace_0026", "trace_0277"}
    assert _agentx("report", tmp_path / "a").returncode == 3
    assert _agentx("report", tmp_path / "a", "--allow-invalid").returncode == 0


def test_schedule_mode_has_no_concurrency_to_sweep():
    res = _agentx("bench", "--url", "http://127.0.0.1:9", "--mode", "schedule", "--concurrency", "1,4")
    assert res.returncode == 2 and res.stderr.strip() == (
        "error: --concurrency: schedule mode replays at the recorded start times: it has no lanes to sweep")
